"""Issue 29's census: every overridable function one training step (forward, loss, backward,
AdamW step) calls in fourteen common architectures at small sizes, recorded with a
`TorchFunctionMode` in PyTorch 2.15, and which of them torchfn's registry lacks.

    cargo run --release --example registry > /tmp/registry.txt
    python bench/census.py /tmp/registry.txt > bench/census.json

Needs torch, torchvision, transformers and diffusers. The names are PyTorch's
(`torch.overrides.resolve_name`), mapped to torchfn's as the golden files do: `torch.X` is
`torchfn.X`, `torch.Tensor.X` is `Tensor.X`, `torch.nn.functional.X` is
`torchfn.nn.functional.X`. Calls made inside another recorded call are not recorded (the mode
is off while a function runs, as torchfn's modes are), so the lists are what user code and
modules call, not what PyTorch's functions call internally.
"""

import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, resolve_name

torch.manual_seed(0)


class Census(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = resolve_name(func)
        if name is not None:
            self.names.add(name)
        return func(*args, **(kwargs or {}))


def step(model, make_loss):
    """One training step of `model` with the loss `make_loss(model)` gives."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    census = Census()
    with census:
        opt.zero_grad(set_to_none=True)
        loss = make_loss(model)
        loss.backward()
        opt.step()
    return census.names


def transformers_models():
    from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                              LlamaForCausalLM, T5Config, T5ForConditionalGeneration, ViTConfig,
                              ViTForImageClassification)
    ids = torch.randint(5, 100, (2, 12))
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                 vocab_size=128)
    yield "GPT-2", GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=128, n_positions=32)), \
        lambda m: m(input_ids=ids, labels=ids).loss
    labels = torch.where(torch.rand(2, 12) < 0.3, ids, torch.full_like(ids, -100))
    yield "BERT (masked LM)", BertForMaskedLM(BertConfig(max_position_embeddings=32, **small)), \
        lambda m: m(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
    yield "LLaMA", LlamaForCausalLM(LlamaConfig(num_key_value_heads=2, max_position_embeddings=32, **small)), \
        lambda m: m(input_ids=ids, labels=ids).loss
    pixels = torch.randn(2, 3, 32, 32)
    yield "ViT", ViTForImageClassification(ViTConfig(image_size=32, patch_size=8, num_labels=10, **{
        k: v for k, v in small.items() if k != "vocab_size"})), \
        lambda m: m(pixel_values=pixels, labels=torch.tensor([1, 2])).loss
    yield "T5", T5ForConditionalGeneration(T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                                    vocab_size=128, decoder_start_token_id=0, pad_token_id=0)), \
        lambda m: m(input_ids=ids, labels=ids[:, :8].contiguous()).loss


def torchvision_models():
    import torchvision.models as tv
    images = torch.randn(2, 3, 64, 64)
    labels = torch.tensor([1, 3])
    for name, make in [("ResNet-18", tv.resnet18), ("ResNet-50", tv.resnet50),
                       ("MobileNetV3-small", tv.mobilenet_v3_small), ("EfficientNet-B0", tv.efficientnet_b0),
                       ("ConvNeXt-tiny", tv.convnext_tiny)]:
        yield name, make(num_classes=10), lambda m: F.cross_entropy(m(images), labels)


def diffusers_models():
    from diffusers import UNet2DModel
    unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(16, 32),
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8, attention_head_dim=8)
    sample, noise = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)
    yield "diffusion UNet", unet, lambda m: F.mse_loss(m(sample, torch.tensor([10, 500])).sample, noise)


class RNNModel(nn.Module):
    """PyTorch's word-language-model example (as bench/golden/gen_workloads.py's)."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(128, 64)
        self.rnn = nn.LSTM(64, 64, 2, dropout=0.2)
        self.decoder = nn.Linear(64, 128)

    def forward(self, x):
        out, _ = self.rnn(self.drop(self.encoder(x)))
        return self.decoder(self.drop(out))


class VAE(nn.Module):
    """A convolutional VAE: strided convolutions down, the reparameterization, transposed ones up."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(),
                                 nn.Flatten())
        self.mu, self.logvar = nn.Linear(32 * 7 * 7, 16), nn.Linear(32 * 7 * 7, 16)
        self.fc = nn.Linear(16, 32 * 7 * 7)
        self.dec = nn.Sequential(nn.Unflatten(1, (32, 7, 7)), nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(),
                                 nn.ConvTranspose2d(16, 1, 4, 2, 1))

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        recon = self.dec(self.fc(z))
        bce = F.binary_cross_entropy_with_logits(recon, x, reduction="sum")
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return (bce + kl) / x.shape[0]


def torch_nn_models():
    tokens = torch.randint(0, 128, (12, 2))
    yield "LSTM language model", RNNModel(), \
        lambda m: F.cross_entropy(m(tokens[:-1]).reshape(-1, 128), tokens[1:].reshape(-1))
    images = torch.rand(2, 1, 28, 28)
    yield "convolutional VAE", VAE(), lambda m: m(images)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    encoder = nn.Sequential()
    encoder.add_module("embed", nn.Embedding(128, 64))
    encoder.add_module("encoder", nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False))
    encoder.add_module("head", nn.Linear(64, 128))
    ids = torch.randint(0, 128, (2, 12))
    yield "nn.TransformerEncoder", encoder, lambda m: F.cross_entropy(m(ids).reshape(-1, 128), ids.reshape(-1))


def torchfn_name(name):
    if name.startswith("torch.Tensor."):
        return "Tensor." + name[len("torch.Tensor."):]
    if name.startswith("torch."):
        return "torchfn." + name[len("torch."):]
    return name


def main():
    with open(sys.argv[1]) as f:
        # Overridable functions as `name(signature)`, ignored ones as `name: reason`.
        registry = {line.split("(")[0].split(":")[0].strip() for line in f if line.strip() and not line.startswith("#")}
    models = {}
    for source in (transformers_models, torchvision_models, diffusers_models, torch_nn_models):
        for name, model, loss in source():
            # The profiler's record_function marks (AdamW wraps its step in one) are not
            # operations.
            models[name] = sorted(n for n in step(model, loss) if not n.startswith("profiler."))
    missing = {name: [n for n in names if torchfn_name(n) not in registry] for name, names in models.items()}
    every = sorted({n for names in models.values() for n in names})
    absent = sorted({n for names in missing.values() for n in names})
    print(json.dumps({
        "torch": torch.__version__,
        "models": len(models),
        "functions_called": len(every),
        "functions_torchfn_has": len(every) - len(absent),
        "models_torchfn_covers": [m for m, names in missing.items() if not names],
        "missing": {n: [m for m, names in missing.items() if n in names] for n in absent},
        "calls": models,
    }, indent=1))


if __name__ == "__main__":
    main()
