"""PyTorch's figures for the autograd bench's custom-Function rows: seed 001's MulConstant
against the built-in multiplication, forward + backward on a 1-element float32 tensor.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn):
    python bench/mul_constant.py
"""
import timeit

import torch
from torch.autograd import Function


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        tensor, constant = inputs
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


x = torch.tensor([1.0], requires_grad=True)


def builtin():
    (x * 2.0).backward()
    x.grad = None


def custom():
    MulConstant.apply(x, 2.0).backward()
    x.grad = None


def best_ns(f, n=20000, repeat=7):
    return min(timeit.repeat(f, number=n, repeat=repeat)) / n * 1e9


torch.set_num_threads(1)
b, c = best_ns(builtin), best_ns(custom)
print(f"PyTorch {torch.__version__}: x * 2 forward+backward {b:.0f} ns, MulConstant {c:.0f} ns, ratio {c / b:.2f}x")
