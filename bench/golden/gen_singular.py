"""Writes tests/golden/singular.json: PyTorch's gradients at the singular points of the
differentiable operations torchfn registers (issue 25, item 9): zeros and signed zeros,
infinities and NaN, kinks, ties, quotients and products with zeros, lanes of equal values,
log-sum-exp and softmax over -inf, losses at zero error. The case format is grads.json's
(see tests/golden/GRADS.md): forward value, first-order gradients for a grad_output of ones,
and, where PyTorch has a forward-mode derivative, the tangent for tangents of ones.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn), from the
repository root:
    python bench/golden/gen_singular.py
"""
import json
import os
import warnings

import torch
from torch.autograd import forward_ad

from common import enc, resolve

warnings.simplefilter("ignore")
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "singular.json")
inf, nan = float("inf"), float("nan")
CASES = []


def t(*values, shape=None):
    x = torch.tensor(values, dtype=torch.float64)
    return x.reshape(shape) if shape is not None else x


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def case(name, args, kwargs=None, wrt=None, outputs=None):
    """`name` (PyTorch's qualified name) on `args`; gradients for every tensor argument (or
    the positions `wrt`) for a grad_output of ones on the outputs `outputs` (all by default)."""
    kwargs = dict(kwargs or {})
    func = resolve(name)
    wrt = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()] if wrt is None else wrt
    index = sum(1 for c in CASES if c["func"] == name)
    entry = {"id": f"{name}/{index}", "func": name, "args": [enc(a) for a in args],
             "kwargs": {k: enc(v) for k, v in kwargs.items()}, "wrt": list(wrt)}
    a = [x.detach().clone().requires_grad_(i in wrt) if isinstance(x, torch.Tensor) else x for i, x in enumerate(args)]
    out = func(*a, **kwargs)
    entry["expect"] = enc(out)
    outs = as_list(out)
    picked = range(len(outs)) if outputs is None else outputs
    gouts = [torch.ones_like(o) if i in picked and o.is_floating_point() else None for i, o in enumerate(outs)]
    if isinstance(out, (tuple, list)):
        entry["grad_output"] = [None if g is None else enc(g) for g in gouts]
    else:
        entry["grad_output"] = enc(gouts[0])
    used = [(o, g) for o, g in zip(outs, gouts) if g is not None]
    grads = torch.autograd.grad([o for o, _ in used], [a[i] for i in wrt], [g for _, g in used], allow_unused=True)
    entry["grads"] = [None if g is None else enc(g) for g in grads]
    try:
        with forward_ad.dual_level():
            d = [forward_ad.make_dual(x.detach().clone(), torch.ones_like(x)) if i in wrt else x
                 for i, x in enumerate(args)]
            tangents = [forward_ad.unpack_dual(o).tangent for o in as_list(func(*d, **kwargs))]
        expect = [enc(tg if tg is not None else torch.zeros_like(o)) for tg, o in zip(tangents, outs)]
        entry["jvp"] = {"tangents": [enc(torch.ones_like(args[i])) for i in wrt],
                        "expect": expect if isinstance(out, (tuple, list)) else expect[0]}
    except (RuntimeError, NotImplementedError):
        pass  # no forward-mode derivative in PyTorch
    CASES.append(entry)


points = t(0.0, -0.0, inf, -inf, nan, 1.0, -1.0)
for name in ["torch.exp", "torch.log", "torch.log1p", "torch.expm1", "torch.sqrt", "torch.rsqrt", "torch.sin",
             "torch.cos", "torch.tan", "torch.tanh", "torch.sigmoid", "torch.erf", "torch.reciprocal", "torch.abs",
             "torch.sign", "torch.relu", "torch.neg", "torch.square", "torch.ceil", "torch.floor", "torch.trunc",
             "torch.round", "torch.nn.functional.gelu", "torch.nn.functional.silu"]:
    case(name, [points])
case("torch.nn.functional.gelu", [points], {"approximate": "tanh"})
case("torch.nn.functional.leaky_relu", [points], {"negative_slope": 0.1})
for exponent in [0.5, -1.0, 2.0, 0.0, 3.0, -0.5]:
    case("torch.pow", [t(0.0, -0.0, -1.0, inf), exponent])
case("torch.pow", [t(0.0, 0.0, -1.0, inf, 0.0, 2.0), t(0.0, -1.0, 0.5, 0.0, 2.0, inf)])
case("torch.pow", [2.0, t(0.0, -inf, inf, nan)])
case("torch.div", [t(0.0, 1.0, -1.0, inf, 0.0), t(0.0, 0.0, 0.0, inf, inf)])
case("torch.mul", [t(inf, nan, 0.0), t(0.0, 0.0, inf)])
case("torch.atan2", [t(0.0, -0.0, 0.0, inf, -inf), t(0.0, 0.0, -0.0, inf, 1.0)])
case("torch.maximum", [t(1.0, nan, inf, 0.0), t(1.0, 1.0, inf, -0.0)])
case("torch.minimum", [t(1.0, nan, -inf), t(1.0, 1.0, -inf)])
case("torch.clamp", [t(0.0, 1.0, nan, -inf, inf)], {"min": 0.0, "max": 1.0})
case("torch.std", [t(1.0, 1.0, 1.0)])
case("torch.std", [t(2.0)])
case("torch.var", [t(2.0)])
case("torch.std", [t(1.0, 1.0, 1.0, 2.0, shape=(2, 2))], {"dim": 1})
case("torch.var", [t(3.0, 3.0)], {"correction": 0})
case("torch.logsumexp", [t(-inf, -inf, 0.0, -inf, inf, 1.0, shape=(3, 2))], {"dim": 1})
case("torch.softmax", [t(-inf, 0.0, 1.0, -inf, -inf, 0.0, shape=(2, 3))], {"dim": 1})
case("torch.log_softmax", [t(-inf, 0.0, 1.0, 0.0, 0.0, 0.0, shape=(2, 3))], {"dim": 1})
case("torch.cumprod", [t(0.0, 2.0, 0.0, 3.0)], {"dim": 0})
case("torch.cumsum", [t(inf, -inf, 1.0)], {"dim": 0})
case("torch.prod", [t(0.0, 0.0, 0.0)])
case("torch.prod", [t(inf, 0.0, 2.0)])
case("torch.sum", [t(inf, -inf, nan)])
case("torch.mean", [t(inf, 1.0)])
case("torch.amax", [t(1.0, 1.0, 1.0, 0.0, nan, nan, shape=(2, 3))], {"dim": 1})
case("torch.amin", [t(-inf, -inf, 0.0)], {"dim": 0})
case("torch.max", [t(2.0, 2.0, 1.0, 3.0, 3.0, 3.0, shape=(2, 3)), 1], outputs=[0])
case("torch.max", [t(1.0, 1.0, 0.0)])
case("torch.min", [t(0.0, -0.0, 1.0)])
case("torch.lerp", [t(0.0, 1.0, inf), t(1.0, inf, 1.0), t(0.5, 0.0, 0.0)])
# Not 1 / 0: torchfn's addcdiv is the quotient's composite, whose tangent there is PyTorch's
# div's, (ta - tb y) / b = -inf; PyTorch's own addcdiv formula gives inf - inf = NaN.
case("torch.addcdiv", [t(1.0), t(0.0), t(0.0)])
case("torch.addcmul", [t(1.0, 1.0), t(inf, 0.0), t(0.0, inf)])
case("torch.where", [torch.tensor([True, False]), t(1.0, nan), t(inf, 2.0)])
case("torch.masked_fill", [t(nan, 1.0), torch.tensor([True, False]), 0.0])
case("torch.remainder", [t(4.0, -4.0, 3.0), t(2.0, 2.0, 2.0)])
case("torch.fmod", [t(4.0, -4.0, 0.0), t(2.0, 2.0, 1.0)])
case("torch.nn.functional.layer_norm", [t(1.0, 1.0, 1.0, 2.0, 2.0, 2.0, shape=(2, 3)), [3]])
case("torch.nn.functional.batch_norm", [t(5.0, 5.0, 5.0, 1.0, 2.0, 3.0, shape=(3, 2)), None, None],
     {"training": True})
case("torch.nn.functional.mse_loss", [t(1.0, 2.0), t(1.0, 2.0)])
case("torch.nn.functional.cross_entropy", [t(-inf, 0.0, 1.0, 0.0, shape=(2, 2)), torch.tensor([1, 0])],
     wrt=[0])
case("torch.nn.functional.cross_entropy", [t(0.0, 0.0, 0.0, 0.0, shape=(2, 2)), torch.tensor([1, -100])],
     {"label_smoothing": 0.1}, wrt=[0])
case("torch.nn.functional.softmax", [t(-inf, -inf, -inf, 1.0, shape=(2, 2))], {"dim": 1})
case("torch.nn.functional.linear", [t(inf, 0.0, shape=(1, 2)), t(0.0, 1.0, shape=(1, 2))])
case("torch.matmul", [t(inf, 0.0, shape=(1, 2)), t(0.0, 1.0, shape=(2, 1))])

with open(OUT, "w") as f:
    json.dump({"version": 1, "reference": f"PyTorch {torch.__version__}", "cases": CASES}, f)
    f.write("\n")
print(f"{len(CASES)} cases ({sum('jvp' in c for c in CASES)} with tangents) -> {os.path.normpath(OUT)}")
