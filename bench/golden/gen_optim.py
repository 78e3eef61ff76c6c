"""Records PyTorch's optimizer and learning-rate scheduler results for torchfn's conformance
tests: writes tests/golden/optim.json. Run with any Python that has PyTorch:

    python bench/golden/gen_optim.py

Each optimizer case gives the initial parameters, the parameter groups (options and which
parameters), an explicit gradient per step and parameter (null: the parameter has no gradient
that step, so the optimizer skips it) and the parameters after each step. The gradients are
those of a fixed quadratic loss, recomputed at each step's parameters, so they follow the
trajectory as a real training loop's would. Single-tensor implementations (foreach=False, the
CPU default), as torchfn follows.
"""

import json
import pathlib

import torch

STEPS = 5


def loss_grads(params, targets, scales):
    """Gradients of sum(scale * (p - target)^2 + 0.1 * p^3) at the current parameters."""
    out = []
    for p, t, s in zip(params, targets, scales):
        x = p.detach().clone().requires_grad_(True)
        (s * (x - t) ** 2 + 0.1 * x**3).sum().backward()
        out.append(x.grad)
    return out


def tensor_json(t):
    return {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()}


def run_case(case_id, cls, dtype, groups, kwargs, skip=None):
    """groups: list of (param indices, per-group overrides); skip: {step: [param index]} left
    without a gradient that step."""
    g = torch.Generator().manual_seed(sum(map(ord, case_id)))
    shapes = [(2, 3), (4,), ()]
    params = [torch.randn(s, generator=g, dtype=torch.float64).to(dtype).requires_grad_(True) for s in shapes]
    targets = [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]
    scales = [0.5, 2.0, 1.0]
    initial = [tensor_json(p) for p in params]
    opt_groups = [dict(params=[params[i] for i in idx], **over) for idx, over in groups]
    opt = cls(opt_groups, foreach=False, **kwargs)
    grads_log, expect = [], []
    for step in range(STEPS):
        grads = loss_grads(params, targets, scales)
        missing = (skip or {}).get(step, [])
        for i, (p, gr) in enumerate(zip(params, grads)):
            p.grad = None if i in missing else gr
        grads_log.append([None if i in missing else tensor_json(gr) for i, gr in enumerate(grads)])
        opt.step()
        expect.append([tensor_json(p) for p in params])
    sd = opt.state_dict()
    return {
        "id": case_id,
        "optimizer": cls.__name__,
        "dtype": str(dtype).removeprefix("torch."),
        "defaults": kwargs,
        "groups": [{"params": list(idx), "options": over} for idx, over in groups],
        "params": initial,
        "grads": grads_log,
        "expect": expect,
        "steps": {str(k): float(v["step"]) for k, v in sd["state"].items() if "step" in v},
    }


def optimizer_cases():
    cases = []
    one = [([0, 1, 2], {})]
    sgd = {
        "plain": {"lr": 0.1},
        "momentum": {"lr": 0.05, "momentum": 0.9},
        "dampening": {"lr": 0.05, "momentum": 0.9, "dampening": 0.3},
        "nesterov": {"lr": 0.05, "momentum": 0.8, "nesterov": True},
        "weight_decay": {"lr": 0.1, "momentum": 0.5, "weight_decay": 0.1},
        "maximize": {"lr": 0.02, "momentum": 0.9, "maximize": True, "weight_decay": 0.01},
    }
    adam = {
        "defaults": {},
        "weight_decay": {"lr": 0.01, "weight_decay": 0.1},
        "amsgrad": {"lr": 0.01, "amsgrad": True, "betas": (0.8, 0.95)},
        "maximize": {"lr": 0.01, "maximize": True, "eps": 1e-6, "weight_decay": 0.05},
    }
    adamw = {
        "defaults": {},
        "workload": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01},
        "amsgrad": {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1, "betas": (0.5, 0.9)},
    }
    for dtype in (torch.float32, torch.float64):
        dt = str(dtype).removeprefix("torch.")
        for name, kw in sgd.items():
            cases.append(run_case(f"SGD/{name}/{dt}", torch.optim.SGD, dtype, one, kw))
        for name, kw in adam.items():
            cases.append(run_case(f"Adam/{name}/{dt}", torch.optim.Adam, dtype, one, kw))
        for name, kw in adamw.items():
            cases.append(run_case(f"AdamW/{name}/{dt}", torch.optim.AdamW, dtype, one, kw))
        two = [([0, 2], {"lr": 0.01}), ([1], {"momentum": 0.5})]
        cases.append(run_case(f"SGD/groups/{dt}", torch.optim.SGD, dtype, two, {"lr": 0.1, "momentum": 0.9}))
        two = [([1], {}), ([2, 0], {"lr": 0.05, "weight_decay": 0.0})]
        cases.append(run_case(f"AdamW/groups/{dt}", torch.optim.AdamW, dtype, two, {"lr": 0.01}))
        # A parameter without a gradient is skipped: no update, and its step count lags.
        skip = {0: [1], 2: [1, 2]}
        cases.append(run_case(f"Adam/skipped/{dt}", torch.optim.Adam, dtype, one, {"lr": 0.01}, skip))
        cases.append(run_case(f"SGD/skipped/{dt}", torch.optim.SGD, dtype, one, {"lr": 0.1, "momentum": 0.9}, skip))
    return cases


def scheduler_cases():
    cases = []
    specs = [
        ("StepLR/default_gamma", torch.optim.lr_scheduler.StepLR, {"step_size": 3}, 10),
        ("StepLR/half", torch.optim.lr_scheduler.StepLR, {"step_size": 2, "gamma": 0.5}, 10),
        ("CosineAnnealingLR/T10", torch.optim.lr_scheduler.CosineAnnealingLR, {"T_max": 10}, 25),
        ("CosineAnnealingLR/T4_eta_min", torch.optim.lr_scheduler.CosineAnnealingLR, {"T_max": 4, "eta_min": 0.001}, 20),
    ]
    for case_id, cls, kw, steps in specs:
        lrs = [0.1, 0.03]
        ps = [torch.zeros(1, requires_grad=True) for _ in lrs]
        opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, lrs)], lr=0.1)
        sched = cls(opt, **kw)
        seq = [list(sched.get_last_lr())]
        for _ in range(steps):
            opt.step()
            sched.step()
            seq.append(list(sched.get_last_lr()))
        cases.append({"id": case_id, "scheduler": cls.__name__, "kwargs": kw, "lrs": lrs, "last_lr": seq})
    return cases


def main():
    out = {
        "version": 1,
        "reference": f"PyTorch {torch.__version__}",
        "optimizers": optimizer_cases(),
        "schedulers": scheduler_cases(),
    }
    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "optim.json"
    text = json.dumps(out, separators=(",", ":"), allow_nan=False)
    path.write_text(text + "\n")
    print(f"wrote {path} ({len(out['optimizers'])} optimizer cases, {len(out['schedulers'])} scheduler cases)")


if __name__ == "__main__":
    main()
