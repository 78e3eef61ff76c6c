"""Writes PyTorch 2.15's references for automatic mixed precision:

- tests/golden/amp.json: `autocast` — every case of ops.json run inside
  `torch.autocast("cpu", torch.bfloat16)` and again with its float32 tensors given as bfloat16
  (so the float32 list shows), with PyTorch's result (values and dtype) or error class, in
  ops.json's format; `grad_scaler` — a GradScaler (growth_interval 2) driving SGD over steps
  whose gradients are finite or not, with the scale, growth tracker, whether the step was taken
  and the parameter after each step.
- tests/golden/workloads/gpt_tiny/autocast_bf16.safetensors: gpt_tiny's first training step
  (see the README there) with the forward pass under `torch.autocast("cpu", torch.bfloat16)`:
  the bfloat16 `logits`, the float32 `loss` and `grad/<param>` for every parameter.

Run with a PyTorch (and transformers, safetensors) from PyPI in a scratch venv, never a
dependency of torchfn, from the repository root:
    python bench/golden/gen_amp.py
"""
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from common import dec, enc, resolve

HERE = os.path.dirname(__file__)
GOLDEN = os.path.join(HERE, "..", "..", "tests", "golden")
BF16_TOL = 1.6e-2


def lowered(v):
    if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
        return v.to(torch.bfloat16), True
    if isinstance(v, (list, tuple)):
        items = [lowered(x) for x in v]
        return type(v)(x for x, _ in items), any(c for _, c in items)
    return v, False


def autocast_cases():
    cases = []
    for case in json.load(open(os.path.join(GOLDEN, "ops.json")))["cases"]:
        func = resolve(case["func"])
        args = [dec(a) for a in case["args"]]
        kwargs = {k: dec(v) for k, v in case["kwargs"].items()}
        variants = [("float32", args, kwargs)]
        low = [lowered(a) for a in args]
        low_kwargs = {k: lowered(v) for k, v in kwargs.items()}
        if any(c for _, c in low) or any(c for _, c in low_kwargs.values()):
            variants.append(("bfloat16", [a for a, _ in low], {k: v for k, (v, _) in low_kwargs.items()}))
        for name, a, k in variants:
            entry = {"id": f"{case['id']}/{name}", "func": case["func"], "args": [enc(x) for x in a],
                     "kwargs": {key: enc(v) for key, v in k.items()}}
            try:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    result = func(*[x.clone() if isinstance(x, torch.Tensor) else x for x in a], **k)
                entry["expect"] = enc(result)
                entry["tol"] = BF16_TOL
            except Exception as e:  # noqa: BLE001 - the class is the expected result
                entry["error"] = type(e).__name__
            cases.append(entry)
    return cases


def grad_scaler_steps():
    """SGD on w (float32) with a GradScaler; each step's loss is sum(w * c) for a given c
    (infinite or NaN on some steps), scaled, backward, step, update."""
    w = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    sgd = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=2)
    coefficients = [[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [1.0, float("inf"), 1.0], [2.0, 1.0, 0.0],
                    [float("nan"), 1.0, 1.0], [1.0, 1.0, 1.0], [3.0, -1.0, 2.0], [1e30, 1.0, 1.0]]
    steps = []
    for c in coefficients:
        sgd.zero_grad()
        loss = (w * torch.tensor(c)).sum()
        scaler.scale(loss).backward()
        before = w.detach().clone()
        scaler.step(sgd)
        stepped = not torch.equal(before, w.detach())
        scaler.update()
        state = scaler.state_dict()
        steps.append({"c": [enc(torch.tensor(c))], "stepped": stepped, "w": enc(w.detach().clone()),
                      "scale": state["scale"], "growth_tracker": state["_growth_tracker"]})
    return {"init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2, "lr": 0.1,
            "w": enc(torch.tensor([1.0, -2.0, 0.5])), "steps": steps}


def gpt_tiny_step():
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = os.path.join(GOLDEN, "workloads", "gpt_tiny")
    meta = json.load(open(os.path.join(folder, "meta.json")))
    c = meta["config"]
    config = GPT2Config(n_layer=c["n_layer"], n_head=c["n_head"], n_embd=c["n_embd"], vocab_size=c["vocab_size"],
                        n_positions=c["n_positions"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        attn_implementation="eager")
    model = GPT2LMHeadModel(config)
    model.load_state_dict(load_file(os.path.join(folder, "init.safetensors")), strict=False)
    model.tie_weights()
    model.train()
    inputs = load_file(os.path.join(folder, "inputs.safetensors"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(inputs["input_ids"]).logits
        loss = F.cross_entropy(logits.reshape(-1, c["vocab_size"]), inputs["targets"].reshape(-1))
    loss.backward()
    out = {"logits": logits.detach().contiguous(), "loss": loss.detach()}
    for name, p in model.named_parameters():
        out[f"grad/{name}"] = p.grad.detach().contiguous()
    save_file(out, os.path.join(folder, "autocast_bf16.safetensors"))
    print(f"gpt_tiny under autocast: loss {loss.item():.6f} ({logits.dtype} logits)")


def main():
    torch.manual_seed(0)
    cases = autocast_cases()
    out = {"version": 1, "reference": f"PyTorch {torch.__version__}", "cases": cases,
           "grad_scaler": grad_scaler_steps()}
    with open(os.path.join(GOLDEN, "amp.json"), "w") as f:
        json.dump(out, f)
    print(f"{len(cases)} autocast cases, {sum('error' in c for c in cases)} errors")
    gpt_tiny_step()


if __name__ == "__main__":
    main()
