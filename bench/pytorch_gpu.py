"""PyTorch's times for `cargo bench --bench gpu_bench`, in the same sitting, on the CUDA
device: the same copy, add, exp, sum and float32 matmul sizes (TF32 off, PyTorch's default for
matmul), float16 and bfloat16 add and matmul at 2048 (on the tensor cores), one small add launched eagerly, and one training step of gpt_small and resnet18 (the
models of bench/pytorch_training.py, moved to the GPU). Prints the mean time per call in
nanoseconds as JSON, keyed as the bench's criterion ids without their "gpu/" prefix, and the
device's name. Exits with a message when torch has no CUDA device. The bench runs it itself
when `PYTORCH_PYTHON` names such a Python:

    PYTORCH_PYTHON=python3 cargo bench --bench gpu_bench
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_training import gpt, resnet, timed  # noqa: E402

if not torch.cuda.is_available():
    sys.exit("torch has no CUDA device here")
torch.manual_seed(0)
cuda = torch.device("cuda")
N = 10_000_000


def ramp(*shape):
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, device=cuda) % 1000).float().mul_(1e-3).reshape(shape)


def per_call_ns(f, seconds=1.0):
    """Runs `f` until `seconds` have passed (after a warm-up), waiting for the device once at
    the end of each batch, as the bench's `timed` does."""
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    calls, start = 0, time.perf_counter()
    batch = 1
    while time.perf_counter() - start < seconds:
        for _ in range(batch):
            f()
        torch.cuda.synchronize()
        calls += batch
        batch *= 2
    return (time.perf_counter() - start) / calls * 1e9


a, b, out = ramp(N), ramp(N), torch.zeros(N, device=cuda)
times = {
    "copy": per_call_ns(lambda: a.clone()),
    "add_out": per_call_ns(lambda: torch.add(a, b, out=out)),
    "add": per_call_ns(lambda: torch.add(a, b)),
    "exp": per_call_ns(lambda: torch.exp(a)),
    "sum": per_call_ns(lambda: torch.sum(a)),
}
for name, dtype in [("f16", torch.float16), ("bf16", torch.bfloat16)]:
    ha, hb = a.to(dtype), b.to(dtype)
    times[f"add_{name}"] = per_call_ns(lambda: torch.add(ha, hb))
    m = ramp(2048, 2048).to(dtype)
    times[f"matmul_{name}_2048"] = per_call_ns(lambda: torch.matmul(m, m))
torch.backends.cuda.matmul.allow_tf32 = False
for n in [1024, 2048, 4096]:
    m = ramp(n, n)
    times[f"matmul_{n}"] = per_call_ns(lambda: torch.matmul(m, m))
one, two = ramp(4), ramp(4)
times["launch_batched"] = times["launch_unbatched"] = per_call_ns(lambda: torch.add(one, two))
sync = torch.cuda.synchronize
for name, (model, loss), repeat in [
    ("gpt_small", gpt(4, 128, 4, 32, cuda), 30),
    ("resnet18", resnet(64, cuda), 20),
]:
    times[name + "_step"] = timed(model, loss, repeat, sync)[0] * 1e6
times["device"] = f"{torch.cuda.get_device_name()} (torch {torch.__version__})"
print(json.dumps(times))
