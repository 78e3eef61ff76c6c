"""Writes tests/golden/nn_ops.json: PyTorch's results for the operations GPT-2 and ResNet
training need beyond ops.json and grads.json (masked_fill, split by sizes,
scaled_dot_product_attention, baddbmm, sqrt_), in the case format of grads.json: forward
values, gradients for given grad_outputs, second-order gradients and forward-mode tangents,
errors by exception class; and a `clip_grad` section for torch.nn.utils.clip_grad_norm_.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn), from the
repository root:
    python bench/golden/gen_nn_ops.py
"""
import json
import math
import os

import torch
import torch.nn.functional as F
from torch.autograd import forward_ad

from common import enc, num, resolve

torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "nn_ops.json")


def rounded(shape, dtype=torch.float64, low=-2.0, high=2.0):
    """Values rounded to 3 decimals, so that the JSON holds them exactly."""
    t = torch.rand(shape, dtype=torch.float64) * (high - low) + low
    return (torch.round(t * 1000) / 1000).to(dtype) if dtype.is_floating_point else t.to(dtype)


def mask(shape, p=0.5):
    return torch.rand(shape) < p


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def random_like(t):
    return rounded(t.shape, t.dtype, -1.0, 1.0)


def zeros_or(g, like):
    """`g`, or zeros like `like` for no gradient (None, or PyTorch's storage-less zero tensor)."""
    return torch.zeros_like(like) if g is None or g._is_zerotensor() else g


CASES = []


def case(name, args, kwargs=None, wrt=(), func=None, mutates=(), tol=None, ref=None, second=True, tangents=True):
    """One case of `name` (PyTorch's qualified name); `wrt` lists the positions (ints) or
    keywords (strs) of the inputs the gradients are taken for; `func` computes it (the named
    function by default). `second=False` records no second-order gradient (at a singular
    point, where PyTorch's is NaN); `tangents=False` no forward-mode one (PyTorch has none). `ref` computes the same with PyTorch operations that have second
    and forward-mode derivatives, for a function whose CPU kernel has neither (attention's
    fused kernel): its values and gradients are checked against the function's first."""
    kwargs = dict(kwargs or {})
    func = func or resolve(name)
    index = sum(1 for c in CASES if c["func"] == name)
    entry = {"id": f"{name}/{index}", "func": name, "args": [enc(a) for a in args],
             "kwargs": {k: enc(v) for k, v in kwargs.items()}, "wrt": list(wrt)}
    if tol is not None:
        entry["tol"] = tol

    def with_leaves(make):
        a = [x.clone() if isinstance(x, torch.Tensor) else list(x) if isinstance(x, list) else x for x in args]
        k = dict(kwargs)
        leaves = []
        for w in wrt:
            if isinstance(w, int):
                a[w] = make(a[w], len(leaves))
                leaves.append(a[w])
            elif isinstance(w, list):  # [argument, item]: a tensor in a list argument
                a[w[0]][w[1]] = make(a[w[0]][w[1]], len(leaves))
                leaves.append(a[w[0]][w[1]])
            else:
                k[w] = make(k[w], len(leaves))
                leaves.append(k[w])
        return a, k, leaves

    a, k, leaves = with_leaves(lambda t, _: t.detach().clone().requires_grad_(True))
    out = func(*a, **k)
    entry["expect"] = enc(out)
    for i in mutates:
        entry.setdefault("mutated", {})[str(i)] = enc(a[i])
    if not leaves:
        CASES.append(entry)
        return
    # Outputs that are None (attention without its weights) take no gradient: null.
    outs = as_list(out)
    gouts = [None if o is None or not o.requires_grad else random_like(o) for o in outs]
    entry["grad_output"] = ([None if g is None else enc(g) for g in gouts] if isinstance(out, (tuple, list))
                            else enc(gouts[0]))
    tensor_outs = [o for o, g in zip(outs, gouts) if g is not None]
    grads = torch.autograd.grad(tensor_outs, leaves, [g for g in gouts if g is not None], allow_unused=True,
                                create_graph=ref is None)
    entry["grads"] = [None if g is None else enc(g) for g in grads]
    if ref is not None:
        first = grads
        a, k, leaves = with_leaves(lambda t, _: t.detach().clone().requires_grad_(True))
        outs_ref = [r for r, g in zip(as_list(ref(*a, **k)), gouts) if g is not None]
        for o, r in zip(tensor_outs, outs_ref):
            assert torch.allclose(o, r, rtol=1e-10, atol=1e-12), name
        grads = torch.autograd.grad(outs_ref, leaves, [g for g in gouts if g is not None], allow_unused=True,
                                    create_graph=True)
        for g, r in zip(first, grads):
            assert (g is None and r is None) or torch.allclose(g, r, rtol=1e-10, atol=1e-12), name
    vs = [random_like(l) for l in leaves]
    total = sum((g * v).sum() for g, v in zip(grads, vs) if g is not None and g.requires_grad)
    try:
        if not second:
            raise RuntimeError("is not implemented: not recorded at a singular point")
        if isinstance(total, torch.Tensor):
            second = torch.autograd.grad(total, leaves, allow_unused=True)
        else:
            second = [None] * len(leaves)
        entry["gradgrad"] = {"v": [enc(v) for v in vs],
                             "expect": [enc(zeros_or(s, l)) for s, l in zip(second, leaves)]}
    except RuntimeError as e:  # PyTorch has no second derivative here (hardsigmoid_backward)
        assert "is not implemented" in str(e), (name, e)
    if not tangents:
        CASES.append(entry)
        return
    tangents = [random_like(l) for l in leaves]
    with forward_ad.dual_level():
        a, k, _ = with_leaves(lambda t, i: forward_ad.make_dual(t.detach().clone(), tangents[i]))
        dual_out = (ref or func)(*a, **k)
        primal = as_list(out)
        got = as_list(dual_out)
        expect = []
        for o, d in zip(primal, got):
            if o is None:
                expect.append(None)
                continue
            unpacked = forward_ad.unpack_dual(d)
            assert torch.allclose(unpacked.primal, o.detach(), rtol=1e-10, atol=1e-12, equal_nan=True), name
            expect.append(enc(zeros_or(unpacked.tangent, o)))
    entry["jvp"] = {"tangents": [enc(t) for t in tangents],
                    "expect": expect if isinstance(out, (tuple, list)) else expect[0]}
    CASES.append(entry)


def error(name, args, kwargs=None):
    kwargs = dict(kwargs or {})
    index = sum(1 for c in CASES if c["func"] == name)
    try:
        resolve(name)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the class is what the case records
        CASES.append({"id": f"{name}/{index}", "func": name, "args": [enc(a) for a in args],
                      "kwargs": {k: enc(v) for k, v in kwargs.items()}, "error": type(e).__name__})
        return
    raise AssertionError(f"{name} did not raise")


def sdpa_reference(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """PyTorch's math reference (its documentation's), with `_safe_softmax`'s zeros for rows
    masked out entirely; only for forward-mode tangents, which the fused CPU kernel lacks."""
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    attn = query @ key.transpose(-2, -1) * scale
    if is_causal:
        attn = attn.masked_fill(torch.ones(L, S, dtype=torch.bool).tril().logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn = attn.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            attn = attn + attn_mask
    dead = (attn == float("-inf")).all(-1, keepdim=True)
    weights = torch.softmax(attn.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    assert dropout_p == 0.0
    return weights @ value


f64 = torch.float64

# masked_fill: broadcasting masks, numbers and 0-d tensors as values, in-place.
case("torch.masked_fill", [rounded([2, 3]), mask([3]), -1.5], wrt=[0])
case("torch.masked_fill", [rounded([3, 1, 4]), mask([2, 1]), torch.tensor(0.25, dtype=f64)], wrt=[0, 2])
case("torch.masked_fill", [rounded([4], torch.int64, -5, 5), mask([4]), 0.7])
case("torch.masked_fill", [rounded([2, 2]), mask([2, 2]), float("-inf")], wrt=[0])
case("torch.Tensor.masked_fill", [rounded([2, 3], torch.float32), mask([2, 1]), 2.0])
case("torch.Tensor.masked_fill_", [rounded([2, 3]), mask([3]), torch.tensor(3.0, dtype=f64)], wrt=[2],
     func=lambda self, m, v: self.masked_fill_(m, v), mutates=[0])
error("torch.masked_fill", [rounded([2, 3]), mask([3]).to(torch.float32), 0.0])
error("torch.masked_fill", [rounded([2, 3]), mask([3]), torch.tensor([1.0, 2.0])])
error("torch.masked_fill", [rounded([2, 3]), mask([4]), 0.0])
error("torch.Tensor.masked_fill_", [rounded([3]), mask([2, 3]), 0.0])

# split: a size, sizes, a negative dimension; sizes that do not add up.
case("torch.split", [rounded([5, 2]), 2], wrt=[0])
case("torch.split", [rounded([5, 2]), [1, 4]], wrt=[0])
case("torch.split", [rounded([2, 6]), [3, 0, 2, 1]], {"dim": -1}, wrt=[0])
case("torch.Tensor.split", [rounded([3, 4]), [2, 2]], {"dim": 1}, wrt=[0])
error("torch.split", [rounded([5, 2]), [1, 3]])
error("torch.split", [rounded([5, 2]), [6, -1]])
error("torch.split", [rounded([5, 2]), 2], {"dim": 2})

# scaled_dot_product_attention: plain, scaled, causal (square and L != S), bool and float
# masks (broadcast), a row masked out entirely, lower-rank key and value, dropout_p = 1.
F_SDPA = "torch.nn.functional.scaled_dot_product_attention"
case(F_SDPA, [rounded([2, 3, 4]), rounded([2, 5, 4]), rounded([2, 5, 2])], wrt=[0, 1, 2], ref=sdpa_reference)
case(F_SDPA, [rounded([1, 2, 4, 3]), rounded([1, 2, 4, 3]), rounded([1, 2, 4, 3])], {"is_causal": True},
     wrt=[0, 1, 2], ref=sdpa_reference)
case(F_SDPA, [rounded([2, 4, 3]), rounded([2, 3, 3]), rounded([2, 3, 2])], {"is_causal": True, "scale": 0.3},
     wrt=[0, 1, 2], ref=sdpa_reference)
case(F_SDPA, [rounded([2, 3, 4]), rounded([2, 5, 4]), rounded([2, 5, 2])],
     {"attn_mask": torch.tensor([[True, False, True, True, False], [False, True, True, False, True],
                                 [True, True, False, False, False]])}, wrt=[0, 1, 2], ref=sdpa_reference)
case(F_SDPA, [rounded([2, 3, 4]), rounded([2, 5, 4]), rounded([2, 5, 2])], {"attn_mask": rounded([5])},
     wrt=[0, 1, 2, "attn_mask"], ref=sdpa_reference)
case(F_SDPA, [rounded([3, 2]), rounded([3, 2]), rounded([3, 3])],
     {"attn_mask": torch.tensor([[True, True, False], [False, False, False], [True, False, True]])},
     wrt=[0, 1, 2], ref=sdpa_reference)
case(F_SDPA, [rounded([2, 3, 4]), rounded([5, 4]), rounded([5, 2])], wrt=[0, 1, 2], ref=sdpa_reference)
case(F_SDPA, [rounded([2, 3, 4], torch.float32), rounded([2, 3, 4], torch.float32),
              rounded([2, 3, 4], torch.float32)], {"dropout_p": 1.0})
error(F_SDPA, [rounded([2, 3, 4]), rounded([2, 3, 4]), rounded([2, 3, 4])],
      {"attn_mask": mask([3, 3]), "is_causal": True})
error(F_SDPA, [rounded([4]), rounded([3, 4]), rounded([3, 4])])
error(F_SDPA, [rounded([1, 2, 4], torch.float32), rounded([1, 3, 4]), rounded([1, 3, 4])])
error(F_SDPA, [rounded([1, 2, 4]), rounded([1, 3, 4]), rounded([1, 3, 4])], {"attn_mask": mask([2, 3]).to(torch.int64)})
error(F_SDPA, [rounded([2, 4]), rounded([3, 4]), rounded([3, 4])], {"dropout_p": 1.5})

# baddbmm: defaults, beta and alpha, a broadcast input, beta = 0 ignoring NaN.
case("torch.baddbmm", [rounded([2, 2, 4]), rounded([2, 2, 3]), rounded([2, 3, 4])], wrt=[0, 1, 2])
case("torch.baddbmm", [rounded([4]), rounded([2, 2, 3]), rounded([2, 3, 4])], {"beta": 0.5, "alpha": -2.0},
     wrt=[0, 1, 2])
case("torch.baddbmm", [torch.full([2, 1, 1], float("nan"), dtype=f64), rounded([2, 2, 3]), rounded([2, 3, 1])],
     {"beta": 0}, wrt=[1, 2])
case("torch.Tensor.baddbmm", [rounded([1, 2, 1]), rounded([3, 2, 3]), rounded([3, 3, 2])], {"alpha": 0.5},
     wrt=[0, 1, 2])
error("torch.baddbmm", [rounded([3, 3]), rounded([2, 2, 3]), rounded([2, 3, 3])])
error("torch.baddbmm", [rounded([2, 2, 3]), rounded([2, 2, 3], torch.float32), rounded([2, 3, 3], torch.float32)])
error("torch.baddbmm", [rounded([2, 2, 3]), rounded([2, 3]), rounded([2, 3, 3])])

# hardswish and hardsigmoid (issue 29): every branch, float64 and float32, in place.
F_ = "torch.nn.functional."
case(F_ + "hardswish", [rounded([3, 5], low=-5.0, high=5.0)], wrt=[0])
case(F_ + "hardswish", [rounded([7], torch.float32, -5.0, 5.0)], wrt=[0])
case(F_ + "hardsigmoid", [rounded([3, 5], low=-5.0, high=5.0)], wrt=[0])
case(F_ + "hardsigmoid", [rounded([7], torch.float32, -5.0, 5.0)], {"inplace": True}, mutates=[0])
error(F_ + "hardswish", [torch.arange(3)])
error(F_ + "hardsigmoid", [torch.arange(3)])

# Losses (issue 29): nll_loss, l1, smooth L1, Huber, KL divergence and binary cross-entropy,
# with their reductions, weights and parameters; gradients for inputs and targets.
def probs(shape, dtype=f64):
    return rounded(shape, dtype, 0.05, 0.95)


case(F_ + "nll_loss", [torch.log_softmax(rounded([4, 3]), 1), torch.tensor([0, 2, 1, 2])], wrt=[0])
case(F_ + "nll_loss", [torch.log_softmax(rounded([2, 3, 2]), 1), torch.tensor([[0, 2], [-100, 1]])],
     {"weight": rounded([3], low=0.5, high=2.0), "reduction": "mean"}, wrt=[0])
case(F_ + "nll_loss", [torch.log_softmax(rounded([3]), 0), torch.tensor(1)], {"reduction": "none"}, wrt=[0])
error(F_ + "nll_loss", [rounded([2, 3]), torch.tensor([0, 3])])
error(F_ + "nll_loss", [rounded([2, 3]), torch.tensor([0, 1, 2])])
case(F_ + "l1_loss", [rounded([2, 3]), rounded([2, 3])], wrt=[0, 1])
case(F_ + "l1_loss", [rounded([2, 3]), rounded([3])], {"reduction": "sum"}, wrt=[0, 1])
case(F_ + "l1_loss", [rounded([2, 3]), rounded([2, 3])], {"weight": probs([2, 3])}, wrt=[0, 1])
error(F_ + "l1_loss", [rounded([2, 3]), rounded([2, 3])], {"weight": probs([3])})
case(F_ + "smooth_l1_loss", [rounded([3, 4]), rounded([3, 4])], wrt=[0, 1])
case(F_ + "smooth_l1_loss", [rounded([3, 4]), rounded([3, 4])], {"beta": 0.5, "reduction": "none"}, wrt=[0, 1])
case(F_ + "smooth_l1_loss", [rounded([3, 4]), rounded([4])], {"beta": 0.0, "reduction": "sum"}, wrt=[0, 1])
error(F_ + "smooth_l1_loss", [rounded([3]), rounded([3])], {"beta": -1.0})
case(F_ + "huber_loss", [rounded([3, 4]), rounded([3, 4])], wrt=[0, 1])
case(F_ + "huber_loss", [rounded([3, 4]), rounded([3, 4])], {"delta": 0.5, "reduction": "sum"}, wrt=[0, 1])
case(F_ + "huber_loss", [rounded([3, 4]), rounded([3, 4])], {"delta": 2.0, "weight": probs([3, 4])}, wrt=[0, 1])
error(F_ + "huber_loss", [rounded([3]), rounded([3])], {"delta": 0.0})
case(F_ + "kl_div", [torch.log_softmax(rounded([3, 4]), 1), torch.softmax(rounded([3, 4]), 1)],
     {"reduction": "batchmean"}, wrt=[0, 1])
case(F_ + "kl_div", [torch.log_softmax(rounded([3, 4]), 1), torch.softmax(rounded([3, 4]), 1)],
     {"reduction": "mean"}, wrt=[0, 1])
case(F_ + "kl_div", [torch.log_softmax(rounded([2, 3]), 1), torch.log_softmax(rounded([2, 3]), 1)],
     {"reduction": "none", "log_target": True}, wrt=[0, 1])
case(F_ + "kl_div", [rounded([2, 2]), torch.tensor([[0.0, 1.0], [0.5, 0.5]], dtype=f64)], {"reduction": "sum"}, wrt=[0])
case(F_ + "binary_cross_entropy", [probs([3, 4]), probs([3, 4])], wrt=[0, 1])
case(F_ + "binary_cross_entropy", [probs([3, 4]), probs([3, 4]), probs([4])], {"reduction": "sum"}, wrt=[0, 1])
case(F_ + "binary_cross_entropy", [probs([5]), torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5], dtype=f64)],
     {"reduction": "none"}, wrt=[0])
error(F_ + "binary_cross_entropy", [torch.tensor([0.5, 1.5], dtype=f64), torch.tensor([0.0, 1.0], dtype=f64)])
error(F_ + "binary_cross_entropy", [probs([2, 3]), probs([3])])

# rms_norm (issue 29): the default eps (the dtype's), a given one, a weight, float32.
case(F_ + "rms_norm", [rounded([3, 4]), [4]], wrt=[0])
case(F_ + "rms_norm", [rounded([2, 2, 3]), [2, 3], rounded([2, 3])], {"eps": 1e-3}, wrt=[0, 2])
case(F_ + "rms_norm", [rounded([2, 5], torch.float32), [5], rounded([5], torch.float32)], wrt=[0, 2], tol=1e-5)
error(F_ + "rms_norm", [rounded([2, 3]), [2]])

# conv1d and conv_transpose2d (issue 29): strides, paddings, dilations, groups, output
# padding, unbatched inputs, biases; gradients for input, weight and bias.
case(F_ + "conv1d", [rounded([2, 3, 7]), rounded([4, 3, 3]), rounded([4])], wrt=[0, 1, 2])
case(F_ + "conv1d", [rounded([4, 9]), rounded([2, 2, 2])], {"stride": 2, "padding": 1, "dilation": 2, "groups": 2},
     wrt=[0, 1])
error(F_ + "conv1d", [rounded([2, 3, 7]), rounded([4, 2, 3])])
F_CT = F_ + "conv_transpose2d"
case(F_CT, [rounded([1, 2, 3, 3]), rounded([2, 3, 3, 3]), rounded([3])], {"stride": 2, "padding": 1}, wrt=[0, 1, 2])
case(F_CT, [rounded([2, 2, 2, 3]), rounded([2, 1, 2, 2])], {"stride": [2, 3], "output_padding": [1, 2]}, wrt=[0, 1])
case(F_CT, [rounded([4, 2, 3]), rounded([4, 1, 3, 2])], {"groups": 2, "dilation": 2, "padding": [1, 0]}, wrt=[0, 1])
case(F_CT, [rounded([1, 1, 2, 2]), rounded([1, 2, 3, 3])], {"padding": 1}, wrt=[0, 1])
error(F_CT, [rounded([1, 1, 2, 2]), rounded([1, 2, 3, 3])], {"padding": 2})
error(F_CT, [rounded([1, 2, 3, 3]), rounded([2, 3, 3, 3])], {"output_padding": 1})
error(F_CT, [rounded([1, 3, 3, 3]), rounded([2, 3, 3, 3])])
error(F_CT, [rounded([1, 2, 1, 1]), rounded([2, 3, 1, 1])], {"padding": 1})

# avg_pool2d (issue 29): strides, padding counted or not, ceil_mode's partial windows, a
# divisor override, unbatched input.
F_AP = F_ + "avg_pool2d"
case(F_AP, [rounded([1, 2, 4, 4]), 2], wrt=[0])
case(F_AP, [rounded([2, 5, 5]), 3], {"stride": 2, "padding": 1, "ceil_mode": True}, wrt=[0])
case(F_AP, [rounded([1, 1, 5, 4]), [3, 2]], {"padding": 1, "count_include_pad": False, "ceil_mode": True}, wrt=[0])
case(F_AP, [rounded([1, 2, 6, 5]), [2, 3]], {"stride": [2, 1], "divisor_override": 5}, wrt=[0])
case(F_AP, [rounded([1, 1, 7, 7]), 3], {"stride": 3, "ceil_mode": True, "count_include_pad": False}, wrt=[0])
error(F_AP, [rounded([1, 1, 5, 5]), 3], {"padding": 2})
error(F_AP, [rounded([1, 1, 2, 2]), 3])

# multi_head_attention_forward (issue 29): packed and separate projections, the weights
# averaged or per head, bool and float masks, key padding, bias_k/bias_v, add_zero_attn,
# unbatched input, and the fused path (need_weights=False) with the causal hint.
F_MHA = F_ + "multi_head_attention_forward"


def mha(q, kv, e=4, heads=2, **extra):
    args = [q, kv, kv.clone(), e, heads, rounded([3 * e, e]), rounded([3 * e]), None, None, False, 0.0,
            rounded([e, e]), rounded([e])]
    return args, extra


a, k = mha(rounded([3, 2, 4]), rounded([5, 2, 4]))
case(F_MHA, a, k, wrt=[0, 1, 2, 5, 6, 11, 12])
def mha_reference(*args, **kwargs):
    """The fused path's output by the weights path (the fused CPU kernel has no forward-mode
    derivative)."""
    return F.multi_head_attention_forward(*args, **dict(kwargs, need_weights=True))[0], None


a, k = mha(rounded([3, 2, 4]), rounded([3, 2, 4]), need_weights=False,
           key_padding_mask=torch.tensor([[False, False, True], [False, True, False]]))
case(F_MHA, a, k, wrt=[0, 1, 5, 11], ref=mha_reference)
a, k = mha(rounded([3, 4]), rounded([3, 4]), attn_mask=rounded([3, 3]), average_attn_weights=False)
case(F_MHA, a, k, wrt=[0, 5])
a, k = mha(rounded([4, 1, 4]), rounded([4, 1, 4]), attn_mask=torch.ones(4, 4, dtype=torch.bool).triu(1),
           is_causal=True, need_weights=False)
case(F_MHA, a, k, wrt=[0, 5], ref=mha_reference)
a, k = mha(rounded([2, 3, 6]), rounded([4, 3, 6]), e=6, heads=3, attn_mask=mask([9, 2, 4], 0.3))
a[7], a[8], a[9] = rounded([1, 1, 6]), rounded([1, 1, 6]), True
case(F_MHA, a, k, wrt=[0, 7, 8])
a, k = mha(rounded([3, 2, 4]), rounded([3, 2, 4]), use_separate_proj_weight=True, q_proj_weight=rounded([4, 4]),
           k_proj_weight=rounded([4, 4]), v_proj_weight=rounded([4, 4]))
a[5] = None
case(F_MHA, a, k, wrt=[0, "q_proj_weight", "v_proj_weight"])
a, k = mha(rounded([3, 2, 4]), rounded([3, 2, 4]), attn_mask=rounded([2, 3]))
error(F_MHA, a, k)

# Norms and distances (issue 29): vector norms of several orders over dims, with a zero slice
# (PyTorch's zero gradient there); matrix norms; linalg.norm's choices; cdist, coinciding rows.
LN = "torch.linalg."
zero_row = torch.cat([rounded([2, 3]), torch.zeros(1, 3, dtype=f64)])
case(LN + "vector_norm", [zero_row], {"dim": 1}, wrt=[0], second=False)
case(LN + "vector_norm", [rounded([2, 3])], {"ord": 1}, wrt=[0])
case(LN + "vector_norm", [rounded([2, 3])], {"ord": float("inf"), "dim": [0], "keepdim": True}, wrt=[0])
case(LN + "vector_norm", [zero_row], {"ord": 3.0, "dim": -1}, wrt=[0], second=False)
case(LN + "vector_norm", [rounded([4])], {"ord": 0})
case(LN + "vector_norm", [rounded([2, 2], torch.float32)], {"dtype": f64})
error(LN + "vector_norm", [torch.tensor([1, 2])])
case(LN + "matrix_norm", [rounded([2, 3, 3])], wrt=[0])
case(LN + "matrix_norm", [rounded([3, 4])], {"ord": 1}, wrt=[0])
case(LN + "matrix_norm", [rounded([3, 4])], {"ord": float("-inf"), "keepdim": True}, wrt=[0])
error(LN + "matrix_norm", [rounded([3])])
case(LN + "norm", [rounded([2, 3])], wrt=[0])
case(LN + "norm", [rounded([2, 3])], {"ord": float("inf")}, wrt=[0])
case(LN + "norm", [rounded([2, 3, 2])], {"ord": 3.0, "dim": 1}, wrt=[0])
case(LN + "norm", [rounded([2, 3, 2])], {"dim": [0, 2]}, wrt=[0])
def cdist_reference(x1, x2, p=2.0):
    """cdist by vector_norm of the differences (the cdist kernel has no forward-mode derivative)."""
    return torch.linalg.vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), ord=p, dim=-1)


x1 = rounded([3, 2])
case("torch.cdist", [x1, torch.cat([x1[:1], rounded([2, 2])])], wrt=[0, 1], ref=cdist_reference, second=False)
case("torch.cdist", [rounded([2, 3, 2]), rounded([2, 4, 2])], {"p": 1.0}, wrt=[0, 1], ref=cdist_reference)
case("torch.cdist", [rounded([2, 3]), rounded([4, 3])], {"p": 3.0}, wrt=[0, 1], ref=cdist_reference)
error("torch.cdist", [rounded([2, 3]), rounded([4, 2])])

# einsum (issue 29): products, batched products, outer products, the implicit output, an
# ellipsis, three operands, traces of a dimension (sums), broadcasting size-one dimensions.
E = "torch.einsum"
case(E, ["ij,jk->ik", [rounded([2, 3]), rounded([3, 4])]], wrt=[[1, 0], [1, 1]])
case(E, ["bij,bjk->bik", [rounded([2, 2, 3]), rounded([2, 3, 2])]], wrt=[[1, 0], [1, 1]])
case(E, ["i,j", [rounded([3]), rounded([2])]], wrt=[[1, 0], [1, 1]])
case(E, ["ij,ij", [rounded([2, 3]), rounded([2, 3])]], wrt=[[1, 0], [1, 1]])
case(E, ["...ij->...ji", [rounded([2, 2, 3])]], wrt=[[1, 0]])
case(E, ["b...i,bi->b...", [rounded([2, 3, 4, 2]), rounded([2, 2])]], wrt=[[1, 0], [1, 1]])
case(E, ["ij,jk,kl->il", [rounded([2, 3]), rounded([3, 2]), rounded([2, 2])]], wrt=[[1, 0], [1, 2]])
case(E, ["ijk->ki", [rounded([2, 3, 4])]], wrt=[[1, 0]])
case(E, ["bhqd,bhkd->bhqk", [rounded([1, 2, 3, 4]), rounded([1, 2, 5, 4])]], wrt=[[1, 0], [1, 1]])
case(E, ["ij,kj->ik", [rounded([1, 3]), rounded([4, 3])]], wrt=[[1, 0], [1, 1]])
error(E, ["ij,jk->ik", [rounded([2, 3]), rounded([4, 4])]])
error(E, ["ij->k", [rounded([2, 3])]])
error(E, ["ijk->i", [rounded([2, 3])]])

# The index family (issue 29): index_add (repeated positions, alpha), index_copy, index_fill
# (a number, a 0-d tensor that takes a gradient), take_along_dim (broadcasting, flattened),
# masked_select (a broadcast mask); errors for bad indices and shapes.
I64 = torch.int64
case("torch.index_add", [rounded([3, 2]), 0, torch.tensor([0, 2, 0]), rounded([3, 2])], wrt=[0, 3])
case("torch.index_add", [rounded([2, 4]), 1, torch.tensor([3, 1]), rounded([2, 2])], {"alpha": 2.5}, wrt=[0, 3])
case("torch.Tensor.index_add", [rounded([4]), 0, torch.tensor([1]), rounded([1])], wrt=[0, 3])
error("torch.index_add", [rounded([3, 2]), 0, torch.tensor([3]), rounded([1, 2])])
error("torch.index_add", [rounded([3, 2]), 0, torch.tensor([0]), rounded([1, 3])])
case("torch.index_copy", [rounded([4, 2]), 0, torch.tensor([3, 0]), rounded([2, 2])], wrt=[0, 3])
case("torch.index_copy", [rounded([2, 3, 2]), 1, torch.tensor([1]), rounded([2, 1, 2])], wrt=[0, 3])
case("torch.index_fill", [rounded([2, 3]), 1, torch.tensor([0, 2]), torch.tensor(-1.5, dtype=f64)], wrt=[0, 3])
case("torch.index_fill", [rounded([3, 2]), 0, torch.tensor([1, 1]), torch.tensor(2.0, dtype=f64)], wrt=[0])
error("torch.index_fill", [rounded([2, 3]), 1, torch.tensor([[0]]), torch.tensor(0.0, dtype=f64)])
case("torch.take_along_dim", [rounded([2, 3]), torch.tensor([[2], [0]])], {"dim": 1}, wrt=[0])
case("torch.take_along_dim", [rounded([2, 3, 2]), torch.tensor([[[1, 0]], [[2, 2]]])], {"dim": 1}, wrt=[0])
case("torch.take_along_dim", [rounded([2, 3]), torch.tensor([5, 0, 3])], wrt=[0])
case("torch.take_along_dim", [rounded([1, 3]), torch.tensor([[0, 1], [2, 2]])], {"dim": 1}, wrt=[0])
error("torch.take_along_dim", [rounded([2, 3]), torch.tensor([1, 0])], {"dim": 1})
case("torch.masked_select", [rounded([2, 3]), mask([2, 3])], wrt=[0])
case("torch.masked_select", [rounded([2, 3]), mask([3])], wrt=[0])
case("torch.masked_select", [rounded([3]), mask([2, 3])], wrt=[0])
error("torch.masked_select", [rounded([2, 3]), mask([2, 3]).to(I64)])
# (PyTorch's own backward fails for the src of a smaller index: no src gradient there.)
case("torch.scatter_add", [rounded([3, 2]), 0, torch.tensor([[0, 2], [1, 0]]), rounded([2, 3])], wrt=[0])
case("torch.scatter_add", [rounded([3, 2]), 0, torch.tensor([[0, 2], [1, 0]]), rounded([2, 2])], wrt=[0, 3])
case("torch.scatter_add", [rounded([2, 4]), 1, torch.tensor([[3, 3, 0]]), rounded([2, 3])], wrt=[0])
case("torch.Tensor.scatter_add", [rounded([4]), 0, torch.tensor([1, 1]), rounded([2])], wrt=[0, 3])
error("torch.scatter_add", [rounded([3, 2]), 0, torch.tensor([[3, 0]]), rounded([1, 2])])
error("torch.scatter_add", [rounded([3, 2]), 0, torch.tensor([[0, 0]]), rounded([1, 2], torch.float32)])
case("torch.masked_scatter", [rounded([2, 3]), mask([2, 3]), rounded([6])], wrt=[0, 2])
case("torch.masked_scatter", [rounded([2, 3]), mask([3]), rounded([2, 4])], wrt=[0, 2])
case("torch.Tensor.masked_scatter", [rounded([4]), mask([4]), rounded([5])], wrt=[0, 2])
error("torch.masked_scatter", [rounded([2, 3]), torch.ones(2, 3, dtype=torch.bool), rounded([5])])
SR = "torch.scatter_reduce"
case(SR, [rounded([3, 2]), 0, torch.tensor([[0, 2], [0, 0]]), rounded([2, 2]), "sum"], wrt=[0, 3])
case(SR, [rounded([3, 2]), 0, torch.tensor([[0, 2], [0, 0]]), rounded([2, 2]), "sum"], {"include_self": False},
     wrt=[0, 3])
case(SR, [rounded([2, 3]), 1, torch.tensor([[2, 2], [0, 1]]), rounded([2, 2]), "mean"], wrt=[0, 3])
case(SR, [rounded([2, 3]), 1, torch.tensor([[2, 2], [0, 1]]), rounded([2, 2]), "mean"], {"include_self": False},
     wrt=[0, 3])
case(SR, [torch.tensor([10, 20, 30]), 0, torch.tensor([0, 0, 2]), torch.tensor([1, 2, 4]), "mean"])
error(SR, [rounded([3]), 0, torch.tensor([0]), rounded([1]), "median"])

# interpolate's area mode (issue 29): windows that overlap, downsampling and upsampling.
F_I = F_ + "interpolate"
case(F_I, [rounded([1, 2, 5, 4])], {"size": [2, 3], "mode": "area"}, wrt=[0])
case(F_I, [rounded([2, 1, 7])], {"size": 3, "mode": "area"}, wrt=[0])
case(F_I, [rounded([1, 1, 2, 3, 2])], {"scale_factor": 2.0, "mode": "area"}, wrt=[0])
error(F_I, [rounded([1, 1, 4])], {"size": 2, "mode": "area", "align_corners": True})
case(F_I, [rounded([1, 2, 4, 5])], {"size": [7, 3], "mode": "bicubic"}, wrt=[0])
case(F_I, [rounded([1, 1, 3, 4])], {"scale_factor": 2.5, "mode": "bicubic", "align_corners": True}, wrt=[0])
case(F_I, [rounded([2, 1, 6, 6])], {"scale_factor": 0.5, "mode": "bicubic"}, wrt=[0])
error(F_I, [rounded([1, 1, 4])], {"size": 8, "mode": "bicubic"})

# ctc_loss (issue 29): padded and concatenated targets, varied lengths, repeated labels, the
# reductions, unbatched input, another blank, an impossible target with and without
# zero_infinity. PyTorch's ctc_loss has no forward-mode derivative.
CTC = F_ + "ctc_loss"


def log_probs(shape):
    return torch.log_softmax(rounded(shape, low=-2.0, high=2.0), -1)


case(CTC, [log_probs([6, 2, 4]), torch.tensor([[1, 2, 3], [2, 2, 0]]), torch.tensor([6, 5]), torch.tensor([3, 2])],
     wrt=[0], tangents=False)
case(CTC, [log_probs([5, 2, 3]), torch.tensor([[1, 1], [2, 0]]), torch.tensor([5, 5]), torch.tensor([2, 1])],
     {"reduction": "sum"}, wrt=[0], tangents=False)
case(CTC, [log_probs([5, 3, 4]), torch.tensor([1, 2, 3, 3, 1]), torch.tensor([5, 4, 3]), torch.tensor([2, 2, 1])],
     {"reduction": "none"}, wrt=[0], tangents=False)
case(CTC, [log_probs([4, 3]), torch.tensor([1, 2]), torch.tensor(4), torch.tensor(2)], wrt=[0], tangents=False)
case(CTC, [log_probs([5, 2, 4]), torch.tensor([[0, 1], [2, 2]]), torch.tensor([5, 5]), torch.tensor([2, 2])],
     {"blank": 3}, wrt=[0], tangents=False)
case(CTC, [log_probs([2, 2, 3]), torch.tensor([[1, 1], [1, 2]]), torch.tensor([2, 2]), torch.tensor([2, 2])],
     {"zero_infinity": True, "reduction": "none"}, wrt=[0], tangents=False)
case(CTC, [log_probs([2, 1, 3]), torch.tensor([[1, 1]]), torch.tensor([2]), torch.tensor([2])], {"reduction": "sum"})
error(CTC, [log_probs([4, 2, 3]), torch.tensor([[1], [2]]), torch.tensor([4, 4]), torch.tensor([1, 1])], {"blank": 3})

# Sorting and selection (issue 29): sort (stable, descending, NaN last or first, ties kept),
# argsort, msort, topk, kthvalue, median (all, per dimension, NaN), with gradients; errors.
ties = torch.tensor([[1.0, -0.5, 1.0, 2.0, -0.5], [0.25, float("nan"), 0.25, -1.0, 3.0]], dtype=f64)
case("torch.sort", [rounded([3, 4])], wrt=[0])
case("torch.sort", [ties], {"stable": True}, wrt=[0])
case("torch.sort", [ties], {"dim": 1, "descending": True, "stable": True}, wrt=[0])
case("torch.sort", [rounded([3, 4]), 0], {"descending": True}, wrt=[0])
case("torch.sort", [torch.tensor([3, -1, 2, -1])], {"stable": True})
case("torch.Tensor.sort", [rounded([5])], {"descending": True}, wrt=[0])
case("torch.argsort", [ties], {"stable": True})
case("torch.argsort", [ties], {"descending": True, "stable": True})
case("torch.msort", [rounded([4, 2])], wrt=[0])
case("torch.topk", [rounded([2, 6]), 3], wrt=[0])
case("torch.topk", [rounded([5, 2]), 2], {"dim": 0, "largest": False}, wrt=[0])
case("torch.Tensor.topk", [rounded([6]), 1], wrt=[0])
error("torch.topk", [rounded([2, 3]), 4])
case("torch.kthvalue", [rounded([3, 5]), 2], wrt=[0])
case("torch.kthvalue", [rounded([4, 3]), 4, 0], {"keepdim": True}, wrt=[0])
error("torch.kthvalue", [rounded([2, 3]), 0])
case("torch.median", [rounded([3, 4])], wrt=[0])
case("torch.median", [torch.tensor([1.0, float("nan"), 0.5, float("nan")], dtype=f64)])
case("torch.median", [rounded([3, 4]), 1], wrt=[0])
case("torch.median", [ties, 1], {"keepdim": True})
case("torch.median", [rounded([4, 3]), 0], wrt=[0])
bounds = torch.tensor([-1.0, -0.5, -0.5, 0.25, 1.0, 2.0], dtype=f64)  # (NaN boundaries: search-path dependent)
vals = torch.tensor([[-2.0, -0.5, 0.0], [0.25, 3.0, float("nan")]], dtype=f64)
case("torch.searchsorted", [bounds, vals])
case("torch.searchsorted", [bounds, vals], {"right": True})
case("torch.searchsorted", [bounds, vals], {"side": "right", "out_int32": True})
case("torch.searchsorted", [torch.sort(rounded([2, 5]))[0], rounded([2, 3])])
case("torch.searchsorted", [torch.tensor([3.0, 1.0, 2.0], dtype=f64), rounded([4], low=0.0, high=4.0)],
     {"sorter": torch.tensor([1, 2, 0])})
error("torch.searchsorted", [rounded([2, 5]), rounded([3, 3])])
error("torch.searchsorted", [bounds, vals], {"side": "left", "right": True})
case("torch.bucketize", [vals, bounds[:5]])
case("torch.bucketize", [vals, bounds[:5]], {"right": True})
error("torch.bucketize", [vals, rounded([2, 2])])
case("torch.unique", [torch.tensor([[3, 1, 3], [2, 1, 5]])])
case("torch.unique", [torch.tensor([[3, 1, 3], [2, 1, 5]])], {"return_inverse": True})
case("torch.unique", [ties], {"return_inverse": True, "return_counts": True})
case("torch.unique", [torch.tensor([], dtype=f64)], {"return_counts": True})
case("torch.Tensor.unique", [torch.tensor([True, False, True])], {"return_counts": True})

# sqrt_ (forward and written-into argument).
case("torch.Tensor.sqrt_", [rounded([2, 3], low=0.1, high=4.0)], mutates=[0])


def clip_case(shapes, max_norm, norm_type, with_grad=None, error_if_nonfinite=False, poison=None):
    """clip_grad_norm_ on float32 parameters of `shapes` (those not in `with_grad` have no
    gradient); `poison` puts that value into the first gradient."""
    params = [rounded(s, torch.float32).requires_grad_(True) for s in shapes]
    with_grad = range(len(shapes)) if with_grad is None else with_grad
    for i in with_grad:
        params[i].grad = rounded(shapes[i], torch.float32, -3.0, 3.0)
    if poison is not None:
        params[0].grad.view(-1)[0] = poison
    entry = {"params": [enc(p) for p in params], "grads": [None if p.grad is None else enc(p.grad) for p in params],
             "max_norm": max_norm, "norm_type": num(norm_type), "error_if_nonfinite": error_if_nonfinite}
    try:
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite)
    except RuntimeError:
        entry["error"] = "RuntimeError"
        return entry
    entry["expect_total"] = enc(total)
    entry["expect_grads"] = [None if p.grad is None else enc(p.grad) for p in params]
    return entry


CLIP = [
    clip_case([[3, 4], [5], [2, 2, 2]], 1.0, 2.0),
    clip_case([[3, 4], [5], [2, 2, 2]], 1.0, float("inf")),
    clip_case([[3, 4], [5]], 1e3, 2.0),
    clip_case([[6], [2, 3]], 0.5, 1.0),
    clip_case([[4], [3]], 1.0, 2.0, with_grad=[1]),
    clip_case([[4], [3]], 1.0, 2.0, with_grad=[]),
    clip_case([[4], [3]], 1.0, 2.0, poison=float("inf")),
    clip_case([[4], [3]], 1.0, 2.0, poison=float("nan"), error_if_nonfinite=True),
    clip_case([[4], [3]], 1.0, float("inf"), poison=float("inf"), error_if_nonfinite=True),
]

with open(OUT, "w") as f:
    json.dump({"version": 1, "reference": f"PyTorch {torch.__version__}", "cases": CASES, "clip_grad": CLIP}, f)
    f.write("\n")
print(f"{len(CASES)} cases ({sum('error' in c for c in CASES)} errors, {sum('jvp' in c for c in CASES)} with "
      f"tangents), {len(CLIP)} clip_grad_norm_ cases -> {os.path.normpath(OUT)}")
