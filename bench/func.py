"""PyTorch 2.15's torch.func per-sample gradients, the figures `cargo bench --bench func`
compares with: one batched forward+backward, vmap(grad) through functional_call, and a loop
of one example at a time, for an MLP (784 -> 256 -> 10, batch 64) and gpt_tiny (2 layers,
4 heads, 64 wide, vocabulary 128; batch 8 x 31 tokens). Run it in a scratch venv with torch
from PyPI, in the same sitting as the Rust bench: python bench/func.py"""

import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

torch.set_num_threads(2)


def timed(f, seconds=3.0):
    f()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        f()
        n += 1
    return (time.perf_counter() - start) / n * 1e3


def workload(name, model, x, y, loss):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def batched():
        loss(model(x), y).backward()

    def compute_loss(p, xi, yi):
        return loss(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per_sample = vmap(grad(compute_loss), in_dims=(None, 0, 0))

    def loop():
        for i in range(x.shape[0]):
            grad(compute_loss)(params, x[i], y[i])

    b, m, l = timed(batched), timed(lambda: per_sample(params, x, y)), timed(loop)
    print(f"| {name} | {b:.2f} ms | {m:.2f} ms | {l:.2f} ms | {m / b:.2f}x | {l / m:.1f}x |")


def gpt_tiny():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=128, n_positions=32,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).eval()


class Logits(torch.nn.Module):
    """The language model's logits alone (transformers returns an output object)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids):
        return self.gpt(input_ids=input_ids).logits


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


if __name__ == "__main__":
    torch.manual_seed(0)
    print("| workload | batched fwd+bwd | vmap(grad) | loop | vmap / batched | loop / vmap |")
    print("|---|---:|---:|---:|---:|---:|")
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    workload("mlp", mlp, torch.randn(64, 784), torch.randint(0, 10, (64,)), F.cross_entropy)
    ids = torch.randint(0, 128, (8, 32))
    workload("gpt_tiny", Logits(gpt_tiny()), ids[:, :31], ids[:, 1:], lm_loss)
