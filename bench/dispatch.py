"""PyTorch's figures for the dispatch bench's table (`cargo bench --bench dispatch`): a one-element
float32 `add` and a 100-operation chain forward and backward, plain and under a pass-through
`TorchDispatchMode`, timed with `timeit`, best of 5, 2 threads.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn), in the same
sitting as the Rust bench:
    python bench/dispatch.py
"""
import timeit

import torch
from torch.utils._python_dispatch import TorchDispatchMode

torch.set_num_threads(2)


class PassThrough(TorchDispatchMode):
    """A dispatch mode that passes every call through."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def ns(stmt, number):
    """Nanoseconds per call of `stmt`, best of 5."""
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number * 1e9


CHAIN = 100
a, b = torch.tensor([1.0]), torch.tensor([0.5])
ga, gb = a.clone().requires_grad_(), b.clone().requires_grad_()


def chain():
    t = ga
    for i in range(CHAIN):
        t = t * gb if i % 2 == 0 else t + gb
    t.backward()
    ga.grad = None
    gb.grad = None


def rows():
    return ns(lambda: torch.add(a, b), 100_000), ns(chain, 200) / CHAIN


add, per_op = rows()
with PassThrough():
    add_mode, per_op_mode = rows()

print(f"PyTorch {torch.__version__}")
print("| measurement | ns | under a pass-through dispatch mode |")
print("|---|---:|---:|")
print(f"| 1-element torch.add | {add:,.0f} | {add_mode:,.0f} (+{add_mode - add:,.0f}) |")
print(f"| 100-op chain forward + backward, per op | {per_op:,.0f} | {per_op_mode:,.0f} (+{per_op_mode - per_op:,.0f}) |")
