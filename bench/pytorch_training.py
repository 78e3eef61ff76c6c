"""PyTorch 2.15's times for `cargo bench --bench training`, in the same sitting: one training
step (zero_grad, forward, loss, backward, AdamW step) of the four workloads, and the backward
pass alone, with 2 threads; the mean of repeated steps after warm-up, in milliseconds, as JSON;
and the resident size's growth over resnet18's first 20 steps, in MiB.
It needs transformers and torchvision besides torch. The bench runs it itself when
`PYTORCH_PYTHON` names such a Python:

    PYTORCH_PYTHON=/path/to/venv/bin/python cargo bench --bench training

The models are the bench's: gpt_tiny and resnet_tiny are the workloads of tests/golden/workloads
(README there); gpt_small is GPT-2 with n_layer 4, n_embd 128, n_head 4, vocab 128 on a batch
of 4 x 32 tokens; resnet18 is torchvision's with 10 classes on a batch of 8 x 3x32x32.
"""
import json
import time

import torch
import torch.nn.functional as F
import torchvision
from transformers import GPT2Config, GPT2LMHeadModel

def gpt(n_layer, n_embd, batch, tokens, device="cpu"):
    config = GPT2Config(n_layer=n_layer, n_head=4, n_embd=n_embd, vocab_size=128, n_positions=32,
                        attn_implementation="eager", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).train().to(device)
    ids = torch.randint(0, 128, (batch, tokens), device=device)
    targets = torch.randint(0, 128, (batch, tokens), device=device)

    def loss():
        logits = model(ids).logits
        return F.cross_entropy(logits.reshape(-1, 128), targets.reshape(-1))
    return model, loss


def resnet(widths, device="cpu"):
    # resnet_tiny's widths are 16/32/64/128 with one block per stage (the bench's NarrowResNet).
    model = torchvision.models.resnet18(num_classes=10) if widths == 64 else narrow_resnet()
    model.train().to(device)
    images = torch.randn(8, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (8,), device=device)
    return model, lambda: F.cross_entropy(model(images), labels)


def narrow_resnet():
    from torchvision.models.resnet import BasicBlock, ResNet

    class Narrow(ResNet):
        def __init__(self):
            torch.nn.Module.__init__(self)
            self._norm_layer = torch.nn.BatchNorm2d
            self.inplanes, self.dilation, self.groups, self.base_width = 16, 1, 1, 64
            self.conv1 = torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(16)
            self.relu = torch.nn.ReLU(inplace=True)
            self.maxpool = torch.nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(BasicBlock, 16, 1)
            self.layer2 = self._make_layer(BasicBlock, 32, 1, stride=2)
            self.layer3 = self._make_layer(BasicBlock, 64, 1, stride=2)
            self.layer4 = self._make_layer(BasicBlock, 128, 1, stride=2)
            self.avgpool = torch.nn.AdaptiveAvgPool2d((1, 1))
            self.fc = torch.nn.Linear(128, 10)
    return Narrow()


def timed(model, loss, repeat, synchronize=lambda: None):
    """The mean step and backward times in milliseconds; `synchronize` waits for the device
    before each clock reading."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
    for _ in range(5):
        step()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        step()
    synchronize()
    step_ms = (time.perf_counter() - start) / repeat * 1e3
    backward = 0.0
    for _ in range(repeat):
        opt.zero_grad(set_to_none=True)
        value = loss()
        synchronize()
        start = time.perf_counter()
        value.backward()
        synchronize()
        backward += time.perf_counter() - start
    return step_ms, backward / repeat * 1e3


def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1048576


def resnet18_growth():
    """The resident size's growth over resnet18's first 20 steps, first thing in the process
    (the bench measures torchfn's the same way)."""
    model, loss = resnet(64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    start = resident_mib()
    for _ in range(20):
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
    return resident_mib() - start


def optimizers_alone(repeat=10):
    """The AdamW and SGD (momentum 0.9) steps alone over resnet18's parameters with
    gradients, default and fused, in milliseconds."""
    model, loss = resnet(64)
    loss().backward()
    times = {}
    for fused in (False, True):
        for name, opt in [
            ("adamw", torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=fused)),
            ("sgd", torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4, fused=fused)),
        ]:
            for _ in range(3):
                opt.step()
            start = time.perf_counter()
            for _ in range(repeat):
                opt.step()
            key = f"{name}_resnet18" + ("_fused" if fused else "")
            times[key] = (time.perf_counter() - start) / repeat * 1e3
    return times


def main():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    times = {"resnet18_growth_mib": resnet18_growth()}
    for name, (model, loss), repeat in [
        ("gpt_tiny", gpt(2, 64, 4, 16), 50),
        ("resnet_tiny", resnet(16), 30),
        ("gpt_small", gpt(4, 128, 4, 32), 30),
        ("resnet18", resnet(64), 10),
    ]:
        times[name + "_step"], times[name + "_backward"] = timed(model, loss, repeat)
    times.update(optimizers_alone())
    times["torch"] = torch.__version__
    print(json.dumps(times))


if __name__ == "__main__":
    main()
