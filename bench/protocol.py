"""PyTorch's figures for the protocol bench's table (`cargo bench --bench protocol`): the cost of
`__torch_function__` on one-element float32 tensors, timed with `timeit`, best of 5, 2 threads.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn), in the same
sitting as the Rust bench:
    python bench/protocol.py
"""
import timeit

import torch

torch.set_num_threads(2)


class Sub(torch.Tensor):
    """A subclass with the default hook."""


class Ready:
    """A duck whose hook returns a ready value."""

    ready = torch.tensor([1.0])

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return Ready.ready


class PassThrough(torch.overrides.TorchFunctionMode):
    """A mode that passes every call through."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def ns(stmt, number=200_000):
    """Nanoseconds per call of `stmt`, best of 5."""
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number * 1e9


a, b = torch.tensor([1.0]), torch.tensor([2.0])
s = a.as_subclass(Sub)
d = Ready()

plain = ns(lambda: torch.add(a, b))
rows = [
    ("torch.add, plain tensors", plain, ""),
    ("a + b, plain tensors", ns(lambda: a + b), ""),
    ("torch.add, subclass with the default hook", ns(lambda: torch.add(s, s), 50_000), "+"),
    ("torch.add, duck whose hook returns a ready value", ns(lambda: torch.add(d, d)), ""),
]
with PassThrough():
    rows.append(("torch.add, plain tensors under a pass-through mode", ns(lambda: torch.add(a, b), 50_000), "+"))

print(f"PyTorch {torch.__version__}")
print("| case | ns | over torch.add |")
print("|---|---:|---:|")
for name, t, over in rows:
    print(f"| {name} | {t:,.0f} | {f'+{t - plain:,.0f}' if over else ''} |")
