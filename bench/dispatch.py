"""PyTorch's figures for the dispatch bench's table (`cargo bench --bench dispatch`): a one-element
float32 `add` and a 100-operation chain forward and backward, plain and under a pass-through
`TorchDispatchMode`, and a gpt_tiny step (forward, loss, backward) plain and under
`FlopCounterMode`, timed with `timeit`, best of 5, 2 threads.

Run with a PyTorch from PyPI in a scratch venv (never a dependency of torchfn; transformers and
safetensors too), in the same sitting as the Rust bench:
    python bench/dispatch.py
"""
import json
import os
import timeit

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode
from transformers import GPT2Config, GPT2LMHeadModel

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


# gpt_tiny, as bench/golden/gen_flops.py builds it.
workload = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "workloads", "gpt_tiny")
config = json.load(open(os.path.join(workload, "meta.json")))["config"]
kw = {k: config[k] for k in ("n_layer", "n_head", "n_embd", "vocab_size", "n_positions")}
model = GPT2LMHeadModel(GPT2Config(**kw, attn_implementation="eager", resid_pdrop=0.0, embd_pdrop=0.0,
                                   attn_pdrop=0.0))
model.load_state_dict(load_file(os.path.join(workload, "init.safetensors")), strict=False)
model.train()
inputs = load_file(os.path.join(workload, "inputs.safetensors"))


def step():
    logits = model(input_ids=inputs["input_ids"]).logits
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), inputs["targets"].reshape(-1)).backward()
    model.zero_grad()


plain = ns(step, 20)
counter = FlopCounterMode(display=False)
with counter:
    counted = ns(step, 20)
print(f"| gpt_tiny step (forward, loss, backward) | {plain / 1e6:.2f} ms | under FlopCounterMode "
      f"{counted / plain:.2f}x |")


def fake_step_ms(n_layer, n_head, n_embd):
    """A GPT-2 training step (8 x 1024 tokens: forward, loss, backward, AdamW) under
    FakeTensorMode, the model built under the mode, best of 3."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        model = GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                                           attn_implementation="eager", resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0))
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
        ids = torch.zeros(8, 1024, dtype=torch.long)

        def step():
            optimizer.zero_grad()
            logits = model(input_ids=ids).logits
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1)).backward()
            optimizer.step()

        return min(timeit.repeat(step, number=1, repeat=3)) * 1e3


print(f"| GPT-2 124M step under FakeTensorMode | {fake_step_ms(12, 12, 768):,.0f} ms |")
print(f"| GPT-2 medium step under FakeTensorMode | {fake_step_ms(24, 16, 1024):,.0f} ms |")
