"""PyTorch 2.15's torch.func results that tests/api/func.rs checks torchfn against:
per-sample gradients of an MLP, an ensemble through stack_module_state, Hessians and
Jacobians of a few functions, and the messages of the misuse cases. Writes
tests/golden/func.safetensors and tests/golden/func.json. Run it in a scratch venv with torch
and safetensors from PyPI: python bench/func_golden.py"""

import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, stack_module_state, vmap

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden")
torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
t = {}

# Per-sample gradients of an MLP (12 -> 16 -> 5), cross-entropy, batch 8.
mlp = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))
params = {k: v.detach() for k, v in mlp.named_parameters()}
x, y = torch.randn(8, 12), torch.randint(0, 5, (8,))


def loss(p, xi, yi):
    return F.cross_entropy(functional_call(mlp, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))


per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
for k, v in params.items():
    t[f"mlp.params.{k}"] = v
    t[f"mlp.grads.{k}"] = per_sample[k]
t["mlp.x"], t["mlp.y"] = x, y

# An ensemble of three Linear(4, 5) through stack_module_state.
models = [torch.nn.Linear(4, 5) for _ in range(3)]
stacked, _ = stack_module_state(models)
xe = torch.randn(6, 4)
base = torch.nn.Linear(4, 5).to("meta")
out = vmap(lambda p, xi: functional_call(base, p, (xi,)), in_dims=(0, None))(stacked, xe)
for i, m in enumerate(models):
    t[f"ensemble.{i}.weight"], t[f"ensemble.{i}.bias"] = m.weight.detach(), m.bias.detach()
t["ensemble.x"], t["ensemble.out"] = xe, out.detach()

# Hessians and Jacobians.
xh = torch.randn(4)
a = torch.randn(4, 4)
m = torch.randn(3, 4)
t["x"], t["a"], t["m"] = xh, a, m
t["hessian.exp_sin_roll"] = hessian(lambda v: (v.sin() * v.roll(1, 0)).sum().exp())(xh)
t["hessian.quadratic"] = hessian(lambda v: v @ a @ v)(xh)
t["hessian.logsumexp"] = hessian(lambda v: torch.logsumexp(v * v, 0))(xh)
t["jacrev.tanh"] = jacrev(lambda v: (m @ v.tanh()) * v[0])(xh)
t["jacfwd.tanh"] = jacfwd(lambda v: (m @ v.tanh()) * v[0])(xh)

save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(OUT, "func.safetensors"))

# The messages of the misuse cases.
xb = torch.randn(3, 4)
cases = {
    "item": lambda: vmap(lambda v: torch.tensor(v.sum().item()))(xb),
    "random": lambda: vmap(lambda v: v + torch.rand(4))(xb),
    "inplace": lambda: vmap(lambda v: torch.zeros(4).copy_(v))(xb),
    "sizes": lambda: vmap(lambda p, q: p + q)(xb, torch.randn(5, 4)),
    "in_dim_range": lambda: vmap(lambda v: v, in_dims=2)(xb),
    "no_mapped": lambda: vmap(lambda v: v, in_dims=(None,))(xb),
    "grad_scalar": lambda: grad(lambda v: v.exp())(xb[0]),
    "nonzero": lambda: vmap(lambda v: v.nonzero())(xb),
    "chunk": lambda: vmap(lambda v: v, chunk_size=0)(xb),
}
messages = {}
for name, case in cases.items():
    try:
        case()
    except Exception as e:  # noqa: BLE001
        messages[name] = {"type": type(e).__name__, "message": str(e)}
with open(os.path.join(OUT, "func.json"), "w") as f:
    json.dump(messages, f, indent=1, sort_keys=True)
    f.write("\n")
