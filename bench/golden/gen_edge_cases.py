"""Writes tests/golden/edge_cases.json: PyTorch's results for the catalogue's creation
functions, reductions, joins and splits on degenerate inputs (empty tensors and lists,
zero-dimensional tensors, a single step, empty ranges, out-of-range dimensions, NaN), in the
case format of ops.json (see tests/golden/README.md): the value PyTorch returned, or the class
of the exception it raised. Random functions are compared by shape and dtype only
(`"compare": "shape"`).

Only functions torchfn registers by name are called. Cases where matching PyTorch would be
wrong for torchfn, or impossible, are not cases: `skip(...)` records them in the file's
`skipped` section with the reason, and tests/api/edge_cases.rs reports their number.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn), from the
repository root:
    python bench/golden/gen_edge_cases.py
"""
import json
import math
import os
import warnings

import torch
import torch.nn.functional as F

from common import enc, resolve

torch.manual_seed(0)
warnings.simplefilter("ignore")  # var/std with no degrees of freedom, legacy softmax dim
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "edge_cases.json")

f32, f64, i64, i32, b8 = torch.float32, torch.float64, torch.int64, torch.int32, torch.bool
NAN, INF = float("nan"), float("inf")


CASES = []
SKIPPED = []


def entry(name, args, kwargs):
    index = sum(1 for c in CASES + SKIPPED if c["func"] == name)
    return {"id": f"{name}/{index}", "func": name, "args": [enc(a) for a in args],
            "kwargs": {k: enc(v) for k, v in kwargs.items()}}


def outcome(e, name, args, kwargs):
    """Calls `name` and writes PyTorch's result (or exception class) into the entry `e`."""
    try:
        out = resolve(name)(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the class is what the case records
        e["error"] = type(err).__name__
        return
    e["expect"] = enc(out)


def case(name, *args, compare=None, tol=None, **kwargs):
    """One call of `name` (PyTorch's qualified name) with these arguments; `compare="shape"`
    for random results, whose values are compared by shape and dtype only."""
    e = entry(name, args, kwargs)
    outcome(e, name, args, kwargs)
    if compare is not None:
        e["compare"] = compare
    if tol is not None:
        e["tol"] = tol
    CASES.append(e)


def skip(reason, name, *args, **kwargs):
    """A call that torchfn does not answer as PyTorch does, on purpose: recorded with the reason
    and PyTorch's result, not tested."""
    e = entry(name, args, kwargs)
    outcome(e, name, args, kwargs)
    e["reason"] = reason
    SKIPPED.append(e)


def ramp(shape, dtype=f32, start=0):
    """Distinct small values (exact in every dtype), as `dtype`, of `shape`."""
    n = math.prod(shape)
    t = (torch.arange(n, dtype=f64) * 0.75 - 1.5 + start).reshape(shape)
    return t.to(dtype) if dtype != b8 else (torch.arange(n) % 3 != 0).reshape(shape)


def empty(shape, dtype=f32):
    return torch.zeros(shape, dtype=dtype)


def scalar(x, dtype=f32):
    return torch.tensor(x, dtype=dtype)


def nans(shape, dtype=f32):
    return torch.full(shape, NAN, dtype=dtype)


EMPTIES = [[0], [2, 0], [0, 3]]

# Why the skipped calls are not cases.
NEGATIVE = ("torchfn's sizes are unsigned (Shape, usize): a negative size, n or steps cannot be bound to the "
            "parameter, so the call is refused as a TypeError before the function runs; PyTorch binds a signed int "
            "and raises RuntimeError inside")
KERNEL = ("PyTorch checks this dtype only inside the kernel, which an empty result (or linspace's single-step "
          "fill, cumsum's zero-dimensional copy) never runs; torchfn refuses the dtype up front, whatever the "
          "size, with the NotImplementedError PyTorch raises for every other size")
RAGGED_EMPTY = ("PyTorch infers the sizes from each level's first item and reads no further once a size is 0, "
                "so ragged data after a first row without elements passes unchecked; torchfn checks every row and refuses it "
                "as PyTorch refuses [[1], []] (a ValueError, or a TypeError for a number beside a sequence)")
LSE_EMPTY_DIMS = ("PyTorch's logsumexp(x, dim=[]) on a tensor of one or more dimensions fails inside with an "
                  "internal shape mismatch ('output with shape [] doesn't match the broadcast shape [1, ...]'), "
                  "not a documented refusal; torchfn reduces over every dimension, as sum, amax and PyTorch's own "
                  "logsumexp of a zero-dimensional or empty tensor with dim=[] do")
DTYPES = [f32, f64, i64, i32, b8]

# ---------------------------------------------------------------------------------------------
# Creation.

for fn in ["torch.zeros", "torch.ones"]:
    for size in [[0], [2, 0], [0, 3], [], [1]]:
        case(fn, size)
    case(fn, (0, 2))
    case(fn, [0], dtype=i64)
    case(fn, [], dtype=b8)
    case(fn, [2, 0], dtype=f64)
    case(fn, [], dtype=i32)
    skip(NEGATIVE, fn, [-1])
    skip(NEGATIVE, fn, [2, -3])

case("torch.full", [0], 1.5)
case("torch.full", [], 7)
case("torch.full", [], 2.5)
case("torch.full", [2, 0], True)
case("torch.full", [2], True)
case("torch.full", [], 2.5, dtype=i64)
case("torch.full", [2], -1.5, dtype=i64)
case("torch.full", [2], -1.5, dtype=b8)
case("torch.full", [0], 3, dtype=f64)
case("torch.full", [1], NAN)
case("torch.full", [2], INF, dtype=i64)
case("torch.full", [2], NAN, dtype=i64)
case("torch.full", [2], 1e300)
case("torch.full", [2], 1e300, dtype=f64)
case("torch.full", [1], -INF, dtype=f32)
case("torch.full", [2], 2**40, dtype=i32)
case("torch.full", [2], -2**31, dtype=i32)
case("torch.full", [2], 2**31, dtype=i32)
case("torch.full", [1], 2.0**63, dtype=i64)
case("torch.full", [1], -2.0**63, dtype=i64)
case("torch.full", [1], 2**62, dtype=f32)
case("torch.full", [2], NAN, dtype=b8)
case("torch.full", [2], 5, dtype=b8)
case("torch.full", [0], INF, dtype=i32)
skip(NEGATIVE, "torch.full", [-1], 1.0)

for n, m in [(0, None), (1, None), (0, 3), (3, 0), (0, 0), (1, 4), (4, 1)]:
    case("torch.eye", n, **({} if m is None else {"m": m}))
case("torch.eye", 0, dtype=i64)
case("torch.eye", 2, dtype=b8)
case("torch.eye", 2, 3, dtype=i32)
skip(NEGATIVE, "torch.eye", -1)
skip(NEGATIVE, "torch.eye", 2, -1)

# arange(end)
for end in [0, 1, 0.0, 0.5, 1.0, 3, 2.5]:
    case("torch.arange", end)
case("torch.arange", -3)
case("torch.arange", -0.5)
case("torch.arange", 0, dtype=f64)
case("torch.arange", 3, dtype=f32)
case("torch.arange", 2.5, dtype=i64)
# arange(start, end, step)
for args in [
    (5, 5), (5, 5, -1), (0.0, 0.0), (0, 1, 2), (0, 1, 5), (3, 4), (0, 10, 3), (10, 0, -3), (1, 0, -1),
    (0, 1, 0.3), (0, 1, 0.25), (1, 0, -0.25), (0, 1, 0.1), (-1.5, 1.5, 1), (-1, -5, -2), (0.5, 0.6, 1),
    (2, 3, 0.5), (0, 5, -1), (5, 0, 1), (0, 0, -1), (0, 1, 0), (0.0, 1.0, 0.0), (0, INF), (NAN, 1),
]:
    case("torch.arange", *args)
case("torch.arange", 0, 3, dtype=f64)
case("torch.arange", 0, 2.5, 0.5, dtype=i64)
case("torch.arange", 0.5, 3, dtype=i64)
case("torch.arange", 1, 0, -0.5, dtype=i32)
case("torch.arange", 0, 4, 1.5, dtype=i64)
case("torch.arange", 3, 3, dtype=f64)
case("torch.arange", 0, 3, dtype=b8)
case("torch.arange", 0, 0, dtype=b8)
case("torch.arange", 2**62, 2**62 + 3)
case("torch.arange", -2.5, 2.5, 1.5, dtype=i32)
case("torch.arange", 0, 2, step=1)
case("torch.arange", start=1, end=3)

# linspace
for args in [(0, 1, 0), (0, 1, 1), (2.5, 5, 1), (0, 1, 2), (5, 5, 3), (1, 0, 4), (0, 1, 3), (-1, 1, 5)]:
    case("torch.linspace", *args)
case("torch.linspace", 0, 10, 5, dtype=i64)
case("torch.linspace", 0, 1, 1, dtype=i64)
case("torch.linspace", 0, 1, 0, dtype=f64)
case("torch.linspace", 10, 0, 4, dtype=i32)
case("torch.linspace", 0, 1, 4, dtype=i64)
case("torch.linspace", -1, 1, 5, dtype=i64)
case("torch.linspace", 0, 10, 4, dtype=i64)
case("torch.linspace", 0, 1, 3, dtype=b8)
skip(KERNEL, "torch.linspace", 0, 1, 0, dtype=b8)
skip(KERNEL, "torch.linspace", 0, 1, 1, dtype=b8)
skip(NEGATIVE, "torch.linspace", 0, 1, -1)
case("torch.linspace", 0, NAN, 3)
case("torch.linspace", 0, INF, 1)

# tensor and as_tensor from empty and nested empty lists, numbers, ragged data
for fn in ["torch.tensor", "torch.as_tensor"]:
    for data in [[], [[]], [[], []], [[[]]], (), 2.5, 3, True, [True, False], [1, 2.5], [[1], [2]], [[1, 2], [3]],
                 [1, [2]], [[1], 2], [[1], []], [None], [[], ()]]:
        case(fn, data)
    for data in [[[], [1]], [[], [[]]], [[], 1], [[[]], []]]:
        skip(RAGGED_EMPTY, fn, data)
    case(fn, [], dtype=i64)
    case(fn, [[]], dtype=b8)
    case(fn, 2.5, dtype=i32)
    case(fn, [1.5, -2.5], dtype=i64)
    case(fn, [True, 2], dtype=f64)
    case(fn, empty([0, 2], i64))
    case(fn, empty([2, 0]), dtype=f64)
    case(fn, scalar(1.5))
    case(fn, scalar(7, i64), dtype=b8)

# the *_like functions
LIKE_INPUTS = [empty([0]), empty([2, 0]), empty([0, 3], i64), scalar(2.5), scalar(3, i64), scalar(True, b8),
               empty([0], b8), ramp([2, 3], i32)]
for fn in ["torch.zeros_like", "torch.ones_like"]:
    for t in LIKE_INPUTS:
        case(fn, t)
    case(fn, empty([0]), dtype=i64)
    case(fn, scalar(1.5), dtype=b8)
    case(fn, scalar(7, i64), dtype=f64)
for t in LIKE_INPUTS:
    case("torch.full_like", t, 2)
case("torch.full_like", empty([0]), 1.5)
case("torch.full_like", scalar(1, i64), 2.5)
case("torch.full_like", scalar(1, i64), -2.5)
case("torch.full_like", scalar(True, b8), 0)
case("torch.full_like", scalar(True, b8), 0.5)
case("torch.full_like", scalar(0.0), True)
case("torch.full_like", empty([2, 0]), 1.5, dtype=i64)
case("torch.full_like", scalar(1.0), 3, dtype=i32)
case("torch.full_like", scalar(1.0), NAN)
case("torch.full_like", ramp([2], i64), INF)
case("torch.full_like", ramp([2], i64), NAN)
case("torch.full_like", empty([0], i64), NAN)

# random: shapes and dtypes (values are random), and errors
for size in [[0], [2, 0], [0, 3], [], [1]]:
    case("torch.rand", size, compare="shape")
    case("torch.randn", size, compare="shape")
    case("torch.randint", 5, size, compare="shape")
    case("torch.randint", -3, 3, size, compare="shape")
case("torch.rand", [0], dtype=f64, compare="shape")
case("torch.randn", [], dtype=f64, compare="shape")
case("torch.rand", [2], dtype=i64)
case("torch.randn", [2], dtype=i64)
case("torch.rand", [0], dtype=i64)
skip(KERNEL, "torch.randn", [0], dtype=i64)
case("torch.rand", [2], dtype=b8)
skip(NEGATIVE, "torch.rand", [-1])
skip(NEGATIVE, "torch.randn", [2, -1])
case("torch.randint", 5, [0], dtype=f32, compare="shape")
case("torch.randint", 5, [], dtype=i32, compare="shape")
case("torch.randint", 2, [3], dtype=b8, compare="shape")
case("torch.randint", 1, [3], compare="shape")
case("torch.randint", 0, [3])
case("torch.randint", 0, [0])
case("torch.randint", 3, 3, [0])
case("torch.randint", 4, 3, [2])
case("torch.randint", -2, [])
skip(NEGATIVE, "torch.randint", 5, [-1])
for t in [empty([0]), empty([2, 0], f64), scalar(1.0), scalar(2.0, f64)]:
    case("torch.rand_like", t, compare="shape")
    case("torch.randn_like", t, compare="shape")
case("torch.rand_like", empty([0], i64), dtype=f32, compare="shape")
case("torch.randn_like", scalar(1.0), dtype=f64, compare="shape")
case("torch.rand_like", scalar(1, i64))
case("torch.randn_like", ramp([2], i64))
case("torch.rand_like", empty([0], i64))
skip(KERNEL, "torch.randn_like", empty([0], i64))
case("torch.rand_like", scalar(1.0), dtype=i64)
case("torch.randn_like", empty([2], b8))

# ---------------------------------------------------------------------------------------------
# Reductions.

EMPTY_F = [empty(s) for s in EMPTIES]
ZERO_D = [scalar(2.5), scalar(-3, i64), scalar(True, b8), scalar(NAN)]

# full reductions (no dim) over empty, 0-d, every dtype, NaN
FULL = ["torch.sum", "torch.mean", "torch.prod", "torch.amax", "torch.amin", "torch.max", "torch.min",
        "torch.argmax", "torch.argmin", "torch.all", "torch.any", "torch.var", "torch.std",
        "torch.Tensor.sum", "torch.Tensor.mean"]
for fn in FULL:
    for t in EMPTY_F + ZERO_D:
        case(fn, t)
    for dtype in DTYPES:
        case(fn, ramp([2, 3], dtype))
        case(fn, empty([0], dtype))
    case(fn, nans([3]))
    case(fn, torch.tensor([1.0, NAN, -INF, 2.0]))
    case(fn, torch.tensor([-INF, INF], dtype=f64))

# along dims: empty tensors, keepdim, 0-d with dim 0 / -1 / out of range, repeated dims
DIMMED = ["torch.sum", "torch.mean", "torch.prod", "torch.amax", "torch.amin", "torch.max", "torch.min",
          "torch.argmax", "torch.argmin", "torch.all", "torch.any", "torch.logsumexp", "torch.var", "torch.std",
          "torch.Tensor.sum", "torch.Tensor.mean"]
for fn in DIMMED:
    for shape in EMPTIES:
        for dim in range(len(shape)):
            case(fn, empty(shape), dim)
            case(fn, empty(shape), dim, keepdim=True)
        case(fn, empty(shape), -1)
        case(fn, empty(shape), len(shape))
    for t in [scalar(2.5), scalar(4, i64), scalar(False, b8)]:
        for dim in [0, -1, 1, -2]:
            case(fn, t, dim)
        case(fn, t, 0, keepdim=True)
    case(fn, ramp([2, 3]), 2)
    case(fn, ramp([2, 3]), -3)
    case(fn, ramp([2, 3, 2], i64), 1, keepdim=True)
    case(fn, ramp([2, 3], b8), 0)
    case(fn, ramp([2, 3], i32), -1)
    case(fn, torch.tensor([[NAN, 1.0], [2.0, 3.0]]), 1)
    case(fn, torch.tensor([[NAN, 1.0], [2.0, 3.0]]), 0, keepdim=True)
    case(fn, torch.tensor([[-INF, -INF], [INF, 1.0]], dtype=f64), 1)

# several dims at once, where the function takes them
for fn in ["torch.sum", "torch.mean", "torch.amax", "torch.amin", "torch.all", "torch.any", "torch.logsumexp",
           "torch.var", "torch.std", "torch.Tensor.sum", "torch.Tensor.mean"]:
    case(fn, empty([2, 0, 3]), [0, 1])
    case(fn, empty([2, 0, 3]), (0, 2), keepdim=True)
    case(fn, empty([2, 0, 3]), [-1, 0])
    case(fn, ramp([2, 3]), [0, 1])
    case(fn, ramp([2, 3]), [1, -1])
    case(fn, ramp([2, 3]), [0, 0])
    case(fn, ramp([2, 3]), [0, 2])
    if fn == "torch.logsumexp":
        skip(LSE_EMPTY_DIMS, fn, ramp([2, 3]), [])
        skip(LSE_EMPTY_DIMS, fn, ramp([3]), ())
    else:
        case(fn, ramp([2, 3]), [])
    case(fn, empty([0, 3]), [])
    case(fn, scalar(1.5), [])
    case(fn, scalar(1.5), [0])
    case(fn, scalar(1.5), [0, -1])

# keyword forms and the None dim
for fn in ["torch.sum", "torch.mean", "torch.prod", "torch.all", "torch.any", "torch.amax", "torch.amin", "torch.logsumexp",
           "torch.Tensor.sum", "torch.Tensor.mean"]:
    case(fn, empty([2, 0]), dim=None)
    case(fn, ramp([2, 3]), dim=None, keepdim=True)
    case(fn, scalar(1.5), dim=None, keepdim=True)
    case(fn, ramp([2, 3]), dim=1, keepdim=False)
    case(fn, empty([0, 3]), keepdim=True, dim=0)
for fn in ["torch.argmax", "torch.argmin"]:
    case(fn, empty([2, 0]), dim=None)
    case(fn, ramp([2, 3]), dim=None, keepdim=True)
    case(fn, scalar(1.5), dim=None, keepdim=True)
    case(fn, empty([0, 3]), dim=1, keepdim=True)
for fn in ["torch.var", "torch.std"]:
    for correction in [0, 1, 2, 0.5]:
        case(fn, ramp([1]), correction=correction)
        case(fn, ramp([3]), correction=correction)
        case(fn, empty([0]), correction=correction)
        case(fn, empty([2, 0]), 0, correction=correction)
        case(fn, scalar(2.0), correction=correction)
    case(fn, ramp([4]), correction=5)
    case(fn, ramp([2, 3]), dim=None, keepdim=True)
    case(fn, ramp([2, 3]), dim=1, correction=0, keepdim=True)
    case(fn, ramp([2, 3], f64), -1, correction=3)
    case(fn, scalar(2.0), 0, correction=0)
    case(fn, scalar(2.0), dim=None, keepdim=True)
    case(fn, nans([2]), correction=0)

# logsumexp: empty lanes give -inf; integers compute in the default float
for t in [ramp([2, 3], i64), ramp([2, 3], b8), ramp([2, 3], i32), scalar(3, i64)]:
    case("torch.logsumexp", t, 0 if t.dim() == 0 else 1)
case("torch.logsumexp", empty([0], i64), 0)
case("torch.logsumexp", torch.tensor([-INF, -INF]), 0)
case("torch.logsumexp", torch.tensor([INF, INF]), 0)
case("torch.logsumexp", torch.tensor([INF, -INF, 1.0]), 0)
case("torch.logsumexp", torch.tensor([NAN, INF]), 0)
case("torch.logsumexp", torch.tensor([[-INF, 0.0], [INF, NAN]], dtype=f64), 1, keepdim=True)

# max / min: the three forms
for fn in ["torch.max", "torch.min"]:
    case(fn, empty([0]), empty([0]))
    case(fn, empty([0]), empty([2, 1]))
    case(fn, empty([0, 3]), scalar(1.0))
    case(fn, scalar(1.0), scalar(NAN))
    case(fn, scalar(2, i64), scalar(1.5))
    case(fn, ramp([3], i64), ramp([3], b8))
    case(fn, empty([2]), empty([3]))
    case(fn, ramp([2, 3], b8), 1)
    case(fn, ramp([2, 3], b8), 0, keepdim=True)
    case(fn, ramp([2, 3]), dim=1, keepdim=True)
    case(fn, torch.tensor([[1.0, NAN, 3.0], [NAN, NAN, 0.0]]), 1)
    case(fn, torch.tensor([[2, 2, 1], [0, 0, 0]]), 1)

# scans: cumsum and cumprod
for fn in ["torch.cumsum", "torch.cumprod"]:
    for shape in EMPTIES:
        for dim in range(len(shape)):
            case(fn, empty(shape), dim)
        case(fn, empty(shape), -1)
        case(fn, empty(shape), len(shape))
    for t in [scalar(2.5), scalar(4, i64), scalar(True, b8), scalar(3, i32)]:
        for dim in [0, -1, 1, -2]:
            case(fn, t, dim)
    for dtype in DTYPES:
        case(fn, ramp([2, 3], dtype), 1)
        case(fn, empty([0], dtype), 0)
    case(fn, empty([0], i64), 0, dtype=f32)
    case(fn, ramp([3], b8), 0, dtype=b8)
    case(fn, ramp([2, 2], i64), 1, dtype=b8)
    skip(KERNEL, fn, scalar(3, i64), 0, dtype=b8)
    skip(KERNEL, fn, empty([0]), 0, dtype=b8)
    case(fn, ramp([3], f32), 0, dtype=f64)
    case(fn, ramp([3], f32), 0, dtype=i64)
    case(fn, scalar(2.5), 0, dtype=i64)
    case(fn, torch.tensor([1.0, NAN, 2.0]), 0)
    case(fn, torch.tensor([INF, -INF, 2.0]), 0)

# softmax and log_softmax, as functions, methods and torch.nn.functional's
for fn in ["torch.softmax", "torch.log_softmax", "torch.Tensor.softmax", "torch.Tensor.log_softmax",
           "torch.nn.functional.softmax", "torch.nn.functional.log_softmax"]:
    for shape in EMPTIES:
        for dim in range(len(shape)):
            case(fn, empty(shape), dim)
        case(fn, empty(shape), len(shape))
    for dim in [0, -1, 1, -2]:
        case(fn, scalar(2.5), dim)
    case(fn, scalar(NAN), 0)
    case(fn, ramp([2, 3], i64), 1)
    case(fn, ramp([2, 3], b8), 1)
    case(fn, ramp([2, 3], i64), 1, dtype=f32)
    case(fn, empty([0], i64), 0, dtype=f64)
    case(fn, scalar(3, i64), 0, dtype=f32)
    case(fn, ramp([3]), 0, dtype=i64)
    case(fn, ramp([1, 3], f64), 0)
    case(fn, torch.tensor([[-INF, -INF], [INF, 1.0], [NAN, 0.0]]), 1)
for fn in ["torch.nn.functional.softmax", "torch.nn.functional.log_softmax"]:
    for t in [scalar(2.5), empty([0]), empty([2, 0]), ramp([2, 3]), empty([0, 2, 3])]:
        case(fn, t)  # dim=None: PyTorch's legacy implicit dim (0 for 0, 1 and 3 dims, else 1)

# ---------------------------------------------------------------------------------------------
# Joins and splits.

for fn in ["torch.cat", "torch.concat", "torch.stack"]:
    case(fn, [])
    case(fn, [], dim=1)
    case(fn, [empty([0])])
    case(fn, [empty([0]), empty([0])])
    case(fn, [empty([0]), empty([0])], dim=1)
    case(fn, [empty([0]), empty([0])], dim=-1)
    case(fn, [empty([0, 3]), ramp([2, 3])])
    case(fn, [empty([2, 0]), ramp([2, 3])], dim=1)
    case(fn, [empty([0, 3]), empty([0, 3])], dim=1)
    case(fn, [empty([0, 3]), empty([0, 4])])
    case(fn, [empty([0, 3]), empty([0, 4])], dim=1)
    case(fn, [empty([0]), ramp([2, 3])])
    case(fn, [empty([0]), ramp([2, 3])], dim=1)
    case(fn, [ramp([2, 3]), empty([0])], dim=-1)
    case(fn, [empty([0], i64), ramp([2], f32)])
    case(fn, [empty([0], f64), ramp([2], f32)])
    case(fn, [empty([0], b8), empty([0], i32)])
    case(fn, [scalar(1.0)])
    case(fn, [scalar(1.0), scalar(2.0)])
    case(fn, [scalar(1.0), scalar(2, i64)], dim=-1)
    case(fn, [scalar(1.0)], dim=1)
    case(fn, [empty([0])], dim=1)
    case(fn, [empty([0])], dim=2)
    case(fn, [empty([2, 0]), empty([2, 0])], dim=2)
    case(fn, [empty([2, 0]), empty([2, 0])], dim=-3)
for fn in ["torch.cat", "torch.stack"]:
    case(fn, (empty([0]), empty([0])))
    case(fn, (empty([2, 0]), empty([2, 0])), dim=-1)
    case(fn, ())
case("torch.concatenate", [])
case("torch.concatenate", [empty([0]), empty([0])])
case("torch.concatenate", [empty([2, 0]), ramp([2, 2])], axis=1)
case("torch.concatenate", [scalar(1.0)])

for fn in ["torch.split", "torch.Tensor.split"]:
    for size in [1, 2, 0]:
        case(fn, empty([0]), size)
        case(fn, empty([2, 0]), size, dim=1)
    case(fn, empty([0, 3]), [0, 0])
    case(fn, empty([0]), [])
    case(fn, empty([0]), [0])
    case(fn, empty([0]), [1])
    case(fn, empty([2, 0]), [1, 1])
    case(fn, empty([2, 0]), [0], dim=1)
    case(fn, empty([2, 0]), [0, 0, 0], dim=-1)
    case(fn, ramp([3]), [])
    case(fn, ramp([3]), 5)
    case(fn, ramp([3]), 0)
    case(fn, ramp([3]), -1)
    case(fn, scalar(1.0), 1)
    case(fn, scalar(1.0), [1])
    case(fn, empty([0]), 1, dim=1)
    case(fn, empty([0]), 1, dim=-2)

for fn in ["torch.chunk", "torch.Tensor.chunk"]:
    for chunks in [1, 2, 3]:
        case(fn, empty([0]), chunks)
        case(fn, empty([2, 0]), chunks, dim=1)
        case(fn, empty([0, 3]), chunks, dim=1)
    case(fn, empty([0]), 0)
    case(fn, empty([0]), -1)
    case(fn, ramp([1]), 3)
    case(fn, ramp([5]), 3)
    case(fn, ramp([5]), 10)
    case(fn, scalar(1.0), 1)
    case(fn, empty([0]), 2, dim=1)
    case(fn, empty([2, 0]), 2, dim=-3)

with open(OUT, "w") as f:
    json.dump({"version": 1, "reference": f"PyTorch {torch.__version__}", "cases": CASES, "skipped": SKIPPED}, f)
    f.write("\n")
funcs = {c["func"] for c in CASES}
print(f"{len(CASES)} cases of {len(funcs)} functions ({sum('error' in c for c in CASES)} errors, "
      f"{sum('compare' in c for c in CASES)} compared by shape), {len(SKIPPED)} skipped -> {os.path.normpath(OUT)}")
