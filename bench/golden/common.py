"""What the golden generators share: the JSON form of values in the golden files
(tests/golden/README.md: tensors flat and row-major with NaN and infinities as strings,
numbers, dtypes, None, lists and tuples), and the function a case's qualified name names."""

import math

import torch


def num(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def enc(v):
    if isinstance(v, torch.Tensor):
        t = v.detach()
        dtype = str(t.dtype).replace("torch.", "")
        flat = t.reshape(-1).tolist()
        data = [num(x) if isinstance(x, float) else x for x in flat]
        return {"tensor": {"dtype": dtype, "shape": list(t.shape), "data": data}}
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).replace("torch.", "")}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        return {"float": num(v)}
    if v is None:
        return {"none": None}
    if isinstance(v, list):
        return {"list": [enc(x) for x in v]}
    if isinstance(v, tuple):  # tuples, named tuples (max(x, dim)) and torch.Size
        return {"tuple": [enc(x) for x in v]}
    raise TypeError(type(v))


def resolve(name):
    if name.startswith("torch.Tensor."):
        method = name[len("torch.Tensor."):]
        return lambda self, *a, **k: getattr(self, method)(*a, **k)
    obj = torch
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def dec(v):
    """The value `enc` encoded (tensors of any dtype torchfn has)."""
    (kind, inner), = v.items()
    if kind == "tensor":
        dtype = getattr(torch, inner["dtype"])
        data = [float(x) if isinstance(x, str) else x for x in inner["data"]]
        wide = torch.float64 if dtype.is_floating_point else torch.int64 if dtype != torch.bool else torch.bool
        return torch.tensor(data, dtype=wide).reshape(inner["shape"]).to(dtype)
    if kind == "dtype":
        return getattr(torch, inner)
    if kind == "float":
        return float(inner)
    if kind in ("int", "bool", "str", "none"):
        return inner
    if kind == "list":
        return [dec(x) for x in inner]
    if kind == "tuple":
        return tuple(dec(x) for x in inner)
    raise TypeError(kind)
