"""PyTorch 2.15's fused Adam, AdamW and SGD (`fused=True`) on the CPU, for tests/api/optim.rs:
two float32 parameters (37 elements, and 5 x 7: sizes off the kernel's vector width), three
steps with given gradients, for each configuration below. Writes tests/golden/fused_optim.json:
per case the options, the initial parameters, each step's gradients, and the parameters after
each step with fused=True and with the default (single-tensor) step, in the case's dtype
(float32, or bfloat16 and float16 for the half-precision cases, whose initial values and
gradients are the float32 ones rounded).

    /path/to/venv/bin/python bench/golden/gen_fused_optim.py
"""
import json
import os

import torch

torch.manual_seed(0)
SHAPES = [(37,), (5, 7)]
CASES = [
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.05)),
    ("AdamW", dict(lr=0.003, betas=(0.5, 0.9), weight_decay=0.01, amsgrad=True, maximize=True)),
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.02, momentum=0.5, dampening=0.1, weight_decay=0.1)),
    # Half precision: the fused kernels compute in float32 and round each result once.
    ("AdamW", dict(lr=0.01, weight_decay=0.05), "bfloat16"),
    ("Adam", dict(lr=0.01, amsgrad=True), "float16"),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01), "bfloat16"),
]
STEPS = 3

init = [torch.randn(s) for s in SHAPES]
grads = [[torch.randn(s) for s in SHAPES] for _ in range(STEPS)]


def run(name, options, fused, dtype):
    params = [p.to(dtype).clone().requires_grad_(True) for p in init]
    opt = getattr(torch.optim, name)(params, fused=fused, **options)
    after = []
    for step in range(STEPS):
        for p, g in zip(params, grads[step]):
            p.grad = g.to(dtype)
        opt.step()
        after.append([p.detach().float().flatten().tolist() for p in params])
    return after


cases = []
for name, options, *dtype in CASES:
    dtype = dtype[0] if dtype else "float32"
    cases.append({
        "optimizer": name,
        "dtype": dtype,
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
        "fused": run(name, options, True, getattr(torch, dtype)),
        "default": run(name, options, False, getattr(torch, dtype)),
    })
out = {
    "torch": torch.__version__,
    "shapes": [list(s) for s in SHAPES],
    "init": [p.flatten().tolist() for p in init],
    "grads": [[g.flatten().tolist() for g in step] for step in grads],
    "cases": cases,
}
path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "fused_optim.json")
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", os.path.normpath(path))
