"""PyTorch 2.15's times for `cargo bench --bench half`, on the same data (2 threads, the mean of
repeated calls after warm-up), printed as JSON in nanoseconds per call; and how far five
gpt_small training steps raise the peak resident memory above what the process held before
them, in float32 and under bfloat16 autocast (each in a fresh process), in bytes.

The bench runs it itself when `PYTORCH_PYTHON` names a Python with torch and transformers:

    PYTORCH_PYTHON=/path/to/venv/bin/python cargo bench --bench half
"""
import json
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(2)
N = 10_000_000


def mean_ns(f, repeat, warm=3):
    for _ in range(warm):
        f()
    start = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - start) / repeat * 1e9


def gpt_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=128, n_positions=32, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    model = GPT2LMHeadModel(config).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ids, targets = torch.randint(128, (4, 32)), torch.randint(128, (4, 32))
    return model, opt, ids, targets


def step(model, opt, ids, targets, bf16):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(ids).logits
        loss = F.cross_entropy(logits.reshape(-1, 128), targets.reshape(-1))
    loss.backward()
    opt.step()


def resident():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


if len(sys.argv) == 2:  # one configuration's peak memory, in a process of its own
    model, opt, ids, targets = gpt_small()
    before = resident()
    for _ in range(5):
        step(model, opt, ids, targets, sys.argv[1] == "bf16")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)
    sys.exit(0)

times = {}
for name, dtype in [("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16)]:
    a = (torch.arange(N) % 1000).float().mul_(1e-3).to(dtype)
    b, out = a.clone(), torch.zeros(N, dtype=dtype)
    t = a.mul(10).sub_(5)
    times[f"add_out_{name}"] = mean_ns(lambda: torch.add(a, b, out=out), 30)
    times[f"mul_out_{name}"] = mean_ns(lambda: torch.mul(a, b, out=out), 30)
    times[f"exp_out_{name}"] = mean_ns(lambda: torch.exp(t, out=out), 30)
    times[f"gelu_tanh_{name}"] = mean_ns(lambda: F.gelu(t, approximate="tanh"), 30)
    for n in (1024, 2048):
        m = (torch.arange(n * n) % 1000).float().mul_(1e-3).reshape(n, n).to(dtype)
        # PyTorch's float16 matmul on a CPU without AVX512_FP16 takes about a minute at 2048: once.
        slow = dtype == torch.float16
        repeat, warm = (1, 0) if slow else (10 if n == 1024 else 3, 3)
        times[f"matmul_{n}_{name}"] = mean_ns(lambda: m @ m, repeat, warm)
model, opt, ids, targets = gpt_small()
for name, bf16 in [("f32", False), ("bf16", True)]:
    times[f"gpt_small_{name}"] = mean_ns(lambda: step(model, opt, ids, targets, bf16), 20)
    peak = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True)
    times[f"gpt_small_peak_{name}"] = float(peak.stdout.strip() or "nan")
print(json.dumps(times))
