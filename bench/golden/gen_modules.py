"""Writes tests/golden/modules.json: PyTorch's forward outputs and gradients (for the inputs
and every parameter) of the attention, transformer and recurrent modules, each with its state
dict, so that torchfn's modules can load the same parameters and be compared.

Each case: the module's kind and constructor arguments, its state dict, the forward's inputs
(tensors, None for omitted ones) and keyword arguments, the outputs, the gradient of
sum(output * grad_output) over the tensor outputs, and that gradient for each input that
requires grad and for each parameter.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn), from the
repository root:
    python bench/golden/gen_modules.py
"""
import json
import os

import torch
import torch.nn as nn

from common import enc

torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "modules.json")


def rounded(shape, low=-1.0, high=1.0):
    t = torch.rand(shape, dtype=torch.float64) * (high - low) + low
    return (torch.round(t * 1000) / 1000).to(torch.float32)


def flat(out):
    """The tensors of a forward's result, in order (nested tuples flattened, None kept)."""
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in flat(o)]
    return [out]


CASES = []


def case(kind, args, module, inputs, kwargs=None, grad_inputs=()):
    kwargs = kwargs or {}
    module.eval()
    leaves = [x.clone().requires_grad_(i in grad_inputs) if isinstance(x, torch.Tensor) else x
              for i, x in enumerate(inputs)]
    out = flat(module(*leaves, **kwargs))
    gouts = [None if o is None else rounded(o.shape) for o in out]
    total = sum((o * g).sum() for o, g in zip(out, gouts) if o is not None)
    total.backward()
    CASES.append({
        "kind": kind,
        "args": args,
        "state": {k: enc(v) for k, v in module.state_dict().items()},
        "inputs": [enc(x) for x in inputs],
        "kwargs": {k: enc(v) for k, v in kwargs.items()},
        "outputs": [enc(o) for o in out],
        "grad_outputs": [None if g is None else enc(g) for g in gouts],
        "input_grads": {str(i): enc(leaves[i].grad) for i in grad_inputs},
        "param_grads": {k: enc(p.grad) for k, p in module.named_parameters() if p.grad is not None},
    })


# MultiheadAttention: batch first with key padding; separate key/value sizes with bias_k/v and
# a boolean mask; the per-head weights.
m = nn.MultiheadAttention(8, 2, batch_first=True)
x = rounded([2, 3, 8])
case("MultiheadAttention", {"embed_dim": 8, "num_heads": 2, "batch_first": True}, m, [x, x.clone(), x.clone()],
     {"key_padding_mask": torch.tensor([[False, False, True], [False, False, False]])}, grad_inputs=(0, 1, 2))
m = nn.MultiheadAttention(6, 3, add_bias_kv=True, kdim=4, vdim=5)
case("MultiheadAttention", {"embed_dim": 6, "num_heads": 3, "add_bias_kv": True, "kdim": 4, "vdim": 5}, m,
     [rounded([2, 2, 6]), rounded([4, 2, 4]), rounded([4, 2, 5])],
     {"attn_mask": torch.tensor([[False, True, False, False], [True, False, False, True]]),
      "average_attn_weights": False}, grad_inputs=(0, 1))

# Transformer encoder layers: post-norm relu; a two-layer pre-norm gelu stack with a final norm.
m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
case("TransformerEncoderLayer", {"d_model": 8, "nhead": 2, "dim_feedforward": 16, "batch_first": True}, m,
     [rounded([2, 4, 8])], grad_inputs=(0,))
layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", norm_first=True)
m = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
with torch.no_grad():  # the copies start equal; make them differ, as after training
    for p in m.layers[1].parameters():
        p.add_(rounded(p.shape, -0.1, 0.1))
case("TransformerEncoder", {"d_model": 8, "nhead": 2, "dim_feedforward": 16, "activation": "gelu",
                            "norm_first": True, "num_layers": 2, "norm": True}, m, [rounded([4, 2, 8])],
     grad_inputs=(0,))

# Recurrent networks: a two-layer bidirectional batch-first LSTM from given states; a GRU from
# zeros; an unbatched LSTM.
m = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
case("LSTM", {"input_size": 3, "hidden_size": 4, "num_layers": 2, "bidirectional": True, "batch_first": True}, m,
     [rounded([2, 5, 3]), (rounded([4, 2, 4]), rounded([4, 2, 4]))], grad_inputs=(0,))
m = nn.GRU(3, 5)
case("GRU", {"input_size": 3, "hidden_size": 5}, m, [rounded([6, 2, 3])], grad_inputs=(0,))
m = nn.LSTM(2, 3, bias=False)
case("LSTM", {"input_size": 2, "hidden_size": 3, "bias": False}, m, [rounded([4, 2])], grad_inputs=(0,))

with open(OUT, "w") as f:
    json.dump({"version": 1, "reference": f"PyTorch {torch.__version__}", "cases": CASES}, f)
    f.write("\n")
print(f"{len(CASES)} cases -> {os.path.normpath(OUT)}")
