"""Writes tests/golden/dtypes.json: every case of ops.json (the catalogue's functions) again in
each of float16, bfloat16, uint8, int8 and int16, with PyTorch 2.15's result (values and
dtype) or the class of the error it raised, in ops.json's format (tests/golden/README.md).

For a half-precision dtype, the case's floating-point tensors become that dtype; for an
integer dtype, its integer tensors and its floating-point tensors times ten (so that they hold
integers other than 0 and 1) become that dtype. Other arguments are kept. A case none of whose
tensors change is left out. Half-precision results carry PyTorch's `assert_close` tolerances.

It also writes tests/golden/dtypes.safetensors (see `safetensors_file`).

Run with a PyTorch (and safetensors) from PyPI in a scratch venv (never a dependency of torchfn), from the
repository root:
    python bench/golden/gen_dtypes.py
"""
import json
import os

import torch

from common import dec, enc, resolve

HERE = os.path.dirname(__file__)
GOLDEN = os.path.join(HERE, "..", "..", "tests", "golden")
DTYPES = [torch.float16, torch.bfloat16, torch.uint8, torch.int8, torch.int16]
# Relative tolerances for the half-precision dtypes: two units in the last place (bfloat16's
# is torch.testing.assert_close's; float16's is twice its 1e-3). PyTorch itself rounds some
# results twice in the scalar tail of a loop and once in its vectorised body (`add` with an
# `alpha`: `b * alpha` is rounded to half first in the tail), so a value computed in float32
# and rounded once, as torchfn does everywhere, can be two units from PyTorch's.
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def convert(v, dtype):
    """`v` with its tensors converted as the module's docstring says; and whether any was."""
    if isinstance(v, torch.Tensor):
        if dtype.is_floating_point and v.dtype.is_floating_point:
            return v.to(dtype), True
        if not dtype.is_floating_point and v.dtype.is_floating_point:
            return (v * 10).to(dtype), True
        if not dtype.is_floating_point and v.dtype in (torch.int32, torch.int64):
            return v.to(dtype), True
        return v, False
    if isinstance(v, (list, tuple)):
        items = [convert(x, dtype) for x in v]
        return type(v)(x for x, _ in items), any(c for _, c in items)
    return v, False


def main():
    torch.manual_seed(0)
    source = json.load(open(os.path.join(GOLDEN, "ops.json")))
    cases = []
    for case in source["cases"]:
        func = resolve(case["func"])
        for dtype in DTYPES:
            args, changed = convert([dec(a) for a in case["args"]], dtype)
            kwargs = {k: convert(dec(v), dtype) for k, v in case["kwargs"].items()}
            changed |= any(c for _, c in kwargs.values())
            kwargs = {k: v for k, (v, _) in kwargs.items()}
            if not changed:
                continue
            name = str(dtype).replace("torch.", "")
            entry = {"id": f"{case['id']}/{name}", "func": case["func"], "args": [enc(a) for a in args],
                     "kwargs": {k: enc(v) for k, v in kwargs.items()}}
            try:
                # Copies: in-place methods must not change the arguments recorded.
                result = func(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
                entry["expect"] = enc(result)
                if dtype in TOL:
                    entry["tol"] = TOL[dtype]
            except Exception as e:  # noqa: BLE001 - the class is the expected result
                entry["error"] = type(e).__name__
            cases.append(entry)
    out = {"version": 1, "reference": f"PyTorch {torch.__version__}", "cases": cases}
    with open(os.path.join(GOLDEN, "dtypes.json"), "w") as f:
        json.dump(out, f)
    print(f"{len(cases)} cases, {sum('error' in c for c in cases)} errors")
    safetensors_file()


def safetensors_file():
    """tests/golden/dtypes.safetensors: one tensor of each new dtype, written by PyTorch's
    safetensors, with values whose bits matter (negative zero, infinities, NaN, a subnormal,
    the extremes of each integer type)."""
    from safetensors.torch import save_file

    tensors = {
        "float16": torch.tensor([1.0, -0.0, 65504.0, float("inf"), float("-inf"), float("nan"), 6e-8, 1 / 3],
                                dtype=torch.float16),
        "bfloat16": torch.tensor([1.0, -0.0, 3.0e38, float("inf"), float("nan"), 1e-40, 1 / 3], dtype=torch.bfloat16),
        "int8": torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8),
        "uint8": torch.tensor([[0, 1], [128, 255]], dtype=torch.uint8),
        "int16": torch.tensor([-32768, -1, 0, 300, 32767], dtype=torch.int16),
    }
    save_file(tensors, os.path.join(GOLDEN, "dtypes.safetensors"))


if __name__ == "__main__":
    main()
