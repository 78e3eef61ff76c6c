"""PyTorch 2.15's times for `cargo bench --bench kernels`, measured on the same data (2 threads,
the mean of repeated calls after warm-up), printed as JSON in nanoseconds per call.

The bench runs it itself when `PYTORCH_PYTHON` names a Python with torch installed:

    PYTORCH_PYTHON=/path/to/venv/bin/python cargo bench --bench kernels
"""
import json
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(2)
N = 10_000_000


def mean_ns(f, repeat):
    for _ in range(3):
        f()
    start = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - start) / repeat * 1e9


def ramp(*shape):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n) % 1000).float().mul_(1e-3).reshape(shape)


a, b, out = ramp(N), ramp(N), torch.zeros(N)
# The transcendental functions read values over their interesting range: -5 to 5.
t = a.mul(10).sub_(5)
m1024, m2048 = ramp(1024, 1024), ramp(2048, 2048)
one, two = torch.tensor([1.0]), torch.tensor([2.0])
m64, q, skinny_a, skinny_b = ramp(64, 64), ramp(32, 64, 64), ramp(512, 4608), ramp(4608, 8)
mlp_a, mlp_b = ramp(128, 512), ramp(512, 128)
times = {
    "add_out": mean_ns(lambda: torch.add(a, b, out=out), 50),
    "add_alloc": mean_ns(lambda: torch.add(a, b), 50),
    "exp_out": mean_ns(lambda: torch.exp(a, out=out), 50),
    "exp_alloc": mean_ns(lambda: torch.exp(a), 50),
    "sum": mean_ns(lambda: torch.sum(a), 50),
    "matmul_1024": mean_ns(lambda: m1024 @ m1024, 20),
    "matmul_2048": mean_ns(lambda: m2048 @ m2048, 5),
    "matmul_64": mean_ns(lambda: m64 @ m64, 20_000),
    "bmm_attention": mean_ns(lambda: torch.bmm(q, q), 2_000),
    "matmul_skinny": mean_ns(lambda: skinny_a @ skinny_b, 2_000),
    "matmul_mlp": mean_ns(lambda: mlp_a @ mlp_b, 5_000),
    "add_1": mean_ns(lambda: torch.add(one, two), 100_000),
}
for name, f in [
    ("exp", lambda: torch.exp(t, out=out)),
    ("log", lambda: torch.log(a, out=out)),
    ("tanh", lambda: torch.tanh(t, out=out)),
    ("sigmoid", lambda: torch.sigmoid(t, out=out)),
    ("erf", lambda: torch.erf(t, out=out)),
    ("gelu", lambda: F.gelu(t)),
    ("gelu_tanh", lambda: F.gelu(t, approximate="tanh")),
    ("silu", lambda: F.silu(t)),
    ("softmax", lambda: torch.softmax(t.reshape(N // 1000, 1000), 1)),
    ("softmax_columns", lambda: torch.softmax(t.reshape(1000, N // 1000), 0)),
]:
    times["math_" + name] = mean_ns(f, 30)
times["torch"] = torch.__version__
print(json.dumps(times))
