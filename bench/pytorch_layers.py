"""PyTorch 2.15's times for `cargo bench --bench layers`, measured the same way (the mean of
repeated calls after warm-up, 2 threads), printed as JSON in milliseconds. The bench runs it
itself, in the same sitting, when `PYTORCH_PYTHON` names a Python with torch installed:

    PYTORCH_PYTHON=/path/to/venv/bin/python cargo bench --bench layers
"""
import json
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(0)


def mean_ms(f, repeat):
    for _ in range(3):
        f()
    start = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - start) / repeat * 1e3


lstm = torch.nn.LSTM(256, 256, batch_first=True)
x = torch.randn(32, 64, 256, requires_grad=True)


def forward_backward():
    lstm.zero_grad(set_to_none=True)
    out, _ = lstm(x)
    out.sum().backward()


def forward():
    with torch.no_grad():
        lstm(x)


v = torch.randn(1_000_000)
m = torch.randn(256, 256)
a = m @ m.T + torch.eye(256) * 256
rhs = torch.randn(256, 64)
print(json.dumps({
    "lstm_forward_backward": mean_ms(forward_backward, 20),
    "lstm_forward": mean_ms(forward, 20),
    "silu_1e6": mean_ms(lambda: F.silu(v), 200),
    "hardswish_1e6": mean_ms(lambda: F.hardswish(v), 200),
    "hardsigmoid_1e6": mean_ms(lambda: F.hardsigmoid(v), 200),
    "sort_1e6": mean_ms(lambda: torch.sort(v), 20),
    "topk_1e6_k100": mean_ms(lambda: torch.topk(v, 100), 50),
    "linalg_inv_256": mean_ms(lambda: torch.linalg.inv(a), 50),
    "linalg_solve_256x64": mean_ms(lambda: torch.linalg.solve(a, rhs), 50),
    "linalg_cholesky_256": mean_ms(lambda: torch.linalg.cholesky(a), 50),
    "linalg_qr_256": mean_ms(lambda: torch.linalg.qr(a), 50),
    "linalg_eigh_256": mean_ms(lambda: torch.linalg.eigh(a), 20),
    "linalg_svd_256": mean_ms(lambda: torch.linalg.svd(a, full_matrices=False), 20),
    "torch": torch.__version__,
}))
