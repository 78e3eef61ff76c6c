"""Writes end-to-end training references (tests/golden/workloads/README.md): for each named model,
one fixed batch, three AdamW steps in float32 on the CPU, and everything a port needs to check
itself (init.safetensors, inputs.safetensors, expect.safetensors, meta.json).

    python bench/golden/gen_workloads.py tests/golden/workloads [name ...]

Names: llama_tiny, bert_tiny, vit_tiny, unet_tiny, lstm_lm (all when none is given). The first
two folders of the suite (gpt_tiny, resnet_tiny) came from the project's shared references in
this same format; this script writes the five that issue 29 added.

Needs torch 2.15, transformers (LLaMA, BERT, ViT), diffusers (UNet2DModel) and safetensors.
"""

import json
import os
import platform
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

SEED = 1
THREADS = 2

OPTIMIZER = {
    "class": "torch.optim.AdamW", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01,
    "amsgrad": False, "maximize": False, "foreach": False, "fused": False,
    "param_groups": "one group: model.parameters() (weight decay applies to every parameter, biases and norms included)",
    "update": [
        "state per parameter p: m = zeros_like(p), v = zeros_like(p); t counts steps from 1",
        "p = p * (1 - lr * weight_decay)",
        "m = m + (g - m) * (1 - beta1)            # m.lerp_(g, 1 - beta1)",
        "v = v * beta2 + (1 - beta2) * g * g      # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)",
        "bc1 = 1 - beta1**t; bc2 = 1 - beta2**t   # Python floats (double)",
        "denom = sqrt(v) / sqrt(bc2) + eps",
        "p = p - (lr / bc1) * m / denom           # p.addcdiv_(m, denom, value=-lr/bc1)",
    ],
    "note": "PyTorch's single-tensor (for-loop) implementation, the CPU default; tensors are float32, the scalar "
            "coefficients are computed in double and applied as float32 ops",
}

PROCEDURE = [
    "load init.safetensors into the model (state_dict keys), inputs from inputs.safetensors",
    "opt = AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)",
    "for step in 1, 2, 3: zero grads; logits, loss = forward + loss; loss.backward(); opt.step()",
    "expect: logits, loss and grad/* from step 1 (before its update); step1/* and buffers_step1/* after step 1's "
    "update; step3/*, buffers_step3/* after step 3; losses[k] = loss of step k+1",
]

TOLERANCES = {
    "logits": {"rtol": 1e-4, "atol": 1e-4},
    "loss": {"rtol": 1e-4},
    "grads": {"rel_l2": 1e-3, "max_abs_over_max_abs": 1e-3},
    "step1": {"atol": 2e-6, "tiny_grad": 1e-5, "atol_where_tiny_grad": 2e-3},
    "step3": {"atol": 2e-5, "tiny_grad": 1e-5, "atol_where_tiny_grad": 6e-3, "update_rel_l2": 1e-2},
    "losses": {"rtol": 1e-4},
    "buffers_step1": {"rel_l2": 1e-4},
    "buffers_step3": {"rel_l2": 1e-3},
    "meaning": {
        "rtol/atol": "per element: |got - want| <= atol + rtol * |want|",
        "rel_l2": "per tensor: ||got - want|| / ||want||",
        "max_abs_over_max_abs": "per tensor: max|got - want| / max|want|",
        "update_rel_l2": "per parameter: ||(got - init) - (want - init)|| / ||want - init||",
        "tiny_grad": "elements whose step-1 gradient |grad/<p>| < tiny_grad get atol_where_tiny_grad instead of "
                     "atol: AdamW moves a parameter by about lr * g / (|g| + eps), eps = 1e-8, so where g is ~1e-8 "
                     "or exactly 0 the update is set by rounding noise",
    },
}


def tokens(g, batch, seq, vocab):
    """Random tokens t of (batch, seq + 1): input_ids = t[:, :-1], targets = t[:, 1:]."""
    t = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def lm_loss(vocab):
    return lambda logits, inputs: F.cross_entropy(logits.reshape(-1, vocab), inputs["targets"].reshape(-1))


# ----------------------------------------------------------------------------------------- models


def llama_tiny(g):
    from transformers import LlamaConfig, LlamaForCausalLM
    kw = dict(vocab_size=128, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0,
              tie_word_embeddings=False, attention_bias=False, mlp_bias=False, hidden_act="silu",
              attention_dropout=0.0, attn_implementation="eager")
    model = LlamaForCausalLM(LlamaConfig(**kw))
    input_ids, targets = tokens(g, 4, 16, kw["vocab_size"])
    config = dict(kw, head_dim=kw["hidden_size"] // kw["num_attention_heads"])
    config.pop("attn_implementation")
    return dict(
        model=model, config=config,
        constructor=f"LlamaForCausalLM(LlamaConfig({', '.join(f'{k}={v!r}' for k, v in kw.items())}))",
        inputs={"input_ids": input_ids, "targets": targets},
        inputs_note="random tokens t[0..seq]; input_ids = t[:, :-1], targets = t[:, 1:]",
        forward=lambda m, i: m(input_ids=i["input_ids"]).logits,
        forward_text="logits = model(input_ids=input_ids).logits   (model.train(); no attention_mask, no labels)",
        loss=lm_loss(kw["vocab_size"]),
        loss_text="F.cross_entropy(logits.reshape(-1, vocab_size), targets.reshape(-1))",
        tied={},
        architecture=[
            "B, T = input_ids.shape; E = hidden_size; H = num_attention_heads; KV = num_key_value_heads; "
            "D = E // H",
            "x = model.embed_tokens.weight[input_ids]",
            "inv_freq = 1 / rope_theta ** (arange(0, D, 2, float32) / D); freqs = arange(T)[:, None] * inv_freq; "
            "emb = cat([freqs, freqs], -1); cos, sin = emb.cos(), emb.sin()   # (T, D)",
            "rotate_half(u) = cat([-u[..., D/2:], u[..., :D/2]], -1); rope(u) = u * cos + rotate_half(u) * sin",
            "rms_norm(u, w) = w * (u * rsqrt(mean(u**2, -1, keepdim) + eps))   # computed in float32",
            "for i in range(num_hidden_layers):   # model.layers.{i} (LlamaDecoderLayer), pre-norm",
            "  h = rms_norm(x, input_layernorm.weight)",
            "  q = h @ self_attn.q_proj.weight.T -> (B, H, T, D); k, v = (k_proj, v_proj) -> (B, KV, T, D); "
            "no biases",
            "  q, k = rope(q), rope(k); k, v = repeat_kv(k), repeat_kv(v)   # each kv head serves H/KV query heads "
            "(repeat_interleave on dim 1)",
            "  s = q @ k.transpose(2, 3) * D**-0.5 + causal mask (finfo.min above the diagonal); "
            "p = softmax(s, -1, dtype=float32)",
            "  x = x + ((p @ v).transpose(1, 2).reshape(B, T, E) @ o_proj.weight.T)",
            "  h = rms_norm(x, post_attention_layernorm.weight)",
            "  x = x + (silu(h @ mlp.gate_proj.weight.T) * (h @ mlp.up_proj.weight.T)) @ mlp.down_proj.weight.T",
            "x = rms_norm(x, model.norm.weight); logits = x @ lm_head.weight.T   # untied",
        ],
    )


def bert_tiny(g):
    from transformers import BertConfig, BertForMaskedLM
    kw = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
              max_position_embeddings=32, type_vocab_size=2, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, hidden_act="gelu",
              attn_implementation="eager")
    model = BertForMaskedLM(BertConfig(**kw))
    B, T, V = 4, 16, kw["vocab_size"]
    input_ids = torch.randint(5, V, (B, T), generator=g)
    token_type_ids = torch.zeros(B, T, dtype=torch.int64)
    token_type_ids[:, T // 2:] = 1
    attention_mask = torch.ones(B, T, dtype=torch.int64)
    attention_mask[1, T - 3:] = 0
    attention_mask[3, T - 5:] = 0
    masked = (torch.rand(B, T, generator=g) < 0.25) & (attention_mask == 1)
    masked[0, 1] = True
    labels = torch.where(masked, input_ids, torch.full_like(input_ids, -100))
    input_ids = torch.where(masked, torch.full_like(input_ids, 4), input_ids)  # 4 = [MASK]
    input_ids = torch.where(attention_mask == 1, input_ids, torch.zeros_like(input_ids))  # 0 = [PAD]
    config = dict(kw)
    config.pop("attn_implementation")
    return dict(
        model=model, config=config,
        constructor=f"BertForMaskedLM(BertConfig({', '.join(f'{k}={v!r}' for k, v in kw.items())}))",
        inputs={"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                "labels": labels},
        inputs_note="random tokens 5..vocab; about a quarter of the unpadded positions replaced by 4 ([MASK]) with "
                    "their token as label, every other label -100; rows 1 and 3 padded (id 0, attention_mask 0) at "
                    "the end; token_type_ids 0 then 1",
        forward=lambda m, i: m(input_ids=i["input_ids"], token_type_ids=i["token_type_ids"],
                               attention_mask=i["attention_mask"]).logits,
        forward_text="logits = model(input_ids=input_ids, token_type_ids=token_type_ids, "
                     "attention_mask=attention_mask).logits   (model.train(); no labels)",
        loss=lambda logits, i: F.cross_entropy(logits.reshape(-1, V), i["labels"].reshape(-1), ignore_index=-100),
        loss_text="F.cross_entropy(logits.reshape(-1, vocab_size), labels.reshape(-1), ignore_index=-100)  "
                  "(mean over the masked positions)",
        tied={"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
              "cls.predictions.decoder.bias": "cls.predictions.bias"},
        architecture=[
            "B, T = input_ids.shape; E = hidden_size; H = num_attention_heads; D = E // H",
            "x = word_embeddings[input_ids] + position_embeddings[arange(T)] + token_type_embeddings[token_type_ids]",
            "x = layer_norm(x, embeddings.LayerNorm, eps=1e-12)   # dropout p=0",
            "mask = (1 - attention_mask[:, None, None, :]) * finfo(float32).min   # additive, (B, 1, 1, T)",
            "for i in range(num_hidden_layers):   # bert.encoder.layer.{i} (BertLayer), post-norm",
            "  q, k, v = attention.self.{query,key,value}(x) -> (B, H, T, D)   # nn.Linear with bias",
            "  p = softmax(q @ k.transpose(-1, -2) * D**-0.5 + mask, -1)",
            "  a = (p @ v).transpose(1, 2).reshape(B, T, E)",
            "  x = layer_norm(attention.output.dense(a) + x, attention.output.LayerNorm)",
            "  u = gelu(intermediate.dense(x))   # exact (erf) gelu",
            "  x = layer_norm(output.dense(u) + x, output.LayerNorm)",
            "h = layer_norm(gelu(cls.predictions.transform.dense(x)), cls.predictions.transform.LayerNorm)",
            "logits = h @ word_embeddings.T + cls.predictions.bias   # decoder tied to the word embeddings; its bias "
            "is cls.predictions.bias",
        ],
    )


def vit_tiny(g):
    from transformers import ViTConfig, ViTForImageClassification
    kw = dict(image_size=16, patch_size=4, num_channels=3, hidden_size=64, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=128, num_labels=10, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, hidden_act="gelu", qkv_bias=True,
              attn_implementation="eager")
    model = ViTForImageClassification(ViTConfig(**kw))
    images = torch.randn(8, 3, 16, 16, generator=g)
    labels = torch.randint(0, 10, (8,), generator=g)
    config = dict(kw)
    config.pop("attn_implementation")
    return dict(
        model=model, config=config,
        constructor=f"ViTForImageClassification(ViTConfig({', '.join(f'{k}={v!r}' for k, v in kw.items())}))",
        inputs={"pixel_values": images, "labels": labels},
        inputs_note="pixel_values standard normal (B, 3, 16, 16); labels uniform in 0..num_labels",
        forward=lambda m, i: m(pixel_values=i["pixel_values"]).logits,
        forward_text="logits = model(pixel_values=pixel_values).logits   (model.train(); no labels)",
        loss=lambda logits, i: F.cross_entropy(logits, i["labels"]),
        loss_text="F.cross_entropy(logits, labels)",
        tied={},
        architecture=[
            "B = pixel_values.shape[0]; E = hidden_size; P = patch_size; N = (image_size / P)**2",
            "x = conv2d(pixel_values, patch_embeddings.projection, stride=P).flatten(2).transpose(1, 2)   # (B, N, E)",
            "x = cat([embeddings.cls_token.expand(B, 1, E), x], 1) + embeddings.position_embeddings   # (B, N+1, E)",
            "for i in range(num_hidden_layers):   # vit.layers.{i} (ViTLayer), pre-norm",
            "  h = layernorm_before(x); q, k, v = attention.{q_proj,k_proj,v_proj}(h) -> (B, H, N+1, D)",
            "  x = x + attention.o_proj((softmax(q @ k.transpose(-1, -2) * D**-0.5, -1) @ v) merged)",
            "  x = x + mlp.fc2(gelu(mlp.fc1(layernorm_after(x))))   # exact (erf) gelu",
            "logits = classifier(vit.layernorm(x)[:, 0, :])",
        ],
    )


def unet_tiny(g):
    from diffusers import UNet2DModel
    kw = dict(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(16, 32),
              down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
              norm_num_groups=8, attention_head_dim=8)
    model = UNet2DModel(**kw)
    sample = torch.randn(4, 3, 16, 16, generator=g)
    timesteps = torch.randint(0, 1000, (4,), generator=g)
    noise = torch.randn(4, 3, 16, 16, generator=g)
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dict(model.config).items()
              if not k.startswith("_")}
    return dict(
        model=model, config=config,
        constructor=f"UNet2DModel({', '.join(f'{k}={v!r}' for k, v in kw.items())})",
        inputs={"sample": sample, "timesteps": timesteps, "target": noise},
        inputs_note="sample and target standard normal (B, 3, 16, 16); timesteps uniform in 0..1000 (int64)",
        forward=lambda m, i: m(i["sample"], i["timesteps"]).sample,
        forward_text="logits = model(sample, timesteps).sample   (model.train(); the denoiser's output)",
        loss=lambda out, i: F.mse_loss(out, i["target"]),
        loss_text="F.mse_loss(output, target)",
        tied={},
        architecture=[
            "diffusers UNet2DModel (the config above lists every default); time embedding: sinusoidal "
            "Timesteps(flip_sin_to_cos=True, freq_shift=0) then TimestepEmbedding (linear_1, SiLU, linear_2)",
            "conv_in; down_blocks: ResnetBlock2D (GroupNorm(eps=1e-5), SiLU, conv1, + time_emb_proj(SiLU(temb)), "
            "GroupNorm, SiLU, dropout 0, conv2, 1x1 conv_shortcut when channels change, / output_scale_factor 1), "
            "Attention (group_norm, to_q/to_k/to_v, to_out.0, residual, heads = channels / attention_head_dim), "
            "Downsample2D (3x3 conv, stride 2, padding 1) except the last block",
            "mid_block: resnet, attention, resnet; up_blocks: resnets on cat([x, skip], 1), attentions, "
            "Upsample2D (nearest x2 then 3x3 conv) except the last; conv_norm_out (GroupNorm), SiLU, conv_out",
        ],
    )


class RNNModel(nn.Module):
    """PyTorch's word_language_model example (examples/word_language_model/model.py): encoder, a recurrent
    module, decoder; batch_first here."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input):
        emb = self.drop(self.encoder(input))
        output, _ = self.rnn(emb)
        return self.decoder(self.drop(output))


def lstm_lm(g):
    kw = dict(rnn_type="LSTM", ntoken=128, ninp=64, nhid=96, nlayers=2, dropout=0.0)
    model = RNNModel(**kw)
    input_ids, targets = tokens(g, 4, 16, kw["ntoken"])
    return dict(
        model=model, config=dict(kw, batch_first=True),
        constructor=f"RNNModel({', '.join(f'{k}={v!r}' for k, v in kw.items())})   # defined in this script",
        inputs={"input_ids": input_ids, "targets": targets},
        inputs_note="random tokens t[0..seq]; input_ids = t[:, :-1], targets = t[:, 1:]",
        forward=lambda m, i: m(i["input_ids"]),
        forward_text="logits = model(input_ids)   (model.train(); zero initial states)",
        loss=lm_loss(kw["ntoken"]),
        loss_text="F.cross_entropy(logits.reshape(-1, ntoken), targets.reshape(-1))",
        tied={},
        architecture=[
            "x = drop(encoder.weight[input_ids])   # (B, T, ninp); dropout p=0",
            "y, _ = rnn(x)   # nn.LSTM(ninp, nhid, nlayers, batch_first=True), zero h0/c0; gates i, f, g, o in "
            "that order in weight_ih_l{k} / weight_hh_l{k}, biases b_ih + b_hh",
            "logits = decoder(drop(y))   # nn.Linear(nhid, ntoken)",
        ],
    )


MODELS = {f.__name__: f for f in [llama_tiny, bert_tiny, vit_tiny, unet_tiny, lstm_lm]}


# ----------------------------------------------------------------------------------------- common


def step_time(model, spec):
    """The median of 10 timed steps after 5 warm-ups, with the share of the machine's CPU time other
    processes used meanwhile (from /proc/stat)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)

    def step():
        opt.zero_grad(set_to_none=True)
        spec["loss"](spec["forward"](model, spec["inputs"]), spec["inputs"]).backward()
        opt.step()

    def busy():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return sum(fields) - fields[3] - fields[4], os.times()

    for _ in range(5):
        step()
    (b0, t0), times = busy(), []
    for _ in range(10):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    b1, t1 = busy()
    hz = os.sysconf("SC_CLK_TCK")
    own = ((t1.user + t1.system) - (t0.user + t0.system)) * hz
    total = max(b1 - b0, 1)
    times_sorted = sorted(times)
    return {
        "median_ms": round((times_sorted[4] + times_sorted[5]) / 2, 3), "min_ms": round(times_sorted[0], 3),
        "threads": THREADS, "other_processes_cpu_share": round(max(total - own, 0) / total, 3),
        "method": "torch.set_num_threads(2); 5 warm-up steps, then the median of 10 timed steps; "
                  "other_processes_cpu_share from /proc/stat over the timed steps (a share above 0.05 inflates "
                  "the figure)",
        "what": "one training step: opt.zero_grad(set_to_none=True); forward; loss; loss.backward(); opt.step()",
        "machine": {"cpu": platform.processor() or platform.machine(), "logical_cpus": os.cpu_count()},
        "torch": torch.__version__,
    }


def generate(name, out_dir):
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)
    spec = MODELS[name](g)
    model = spec["model"]
    model.train()
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)

    init = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(init, os.path.join(folder, "init.safetensors"))
    save_file({k: v.contiguous() for k, v in spec["inputs"].items()}, os.path.join(folder, "inputs.safetensors"))

    named = list(model.named_parameters())
    buffers = list(model.named_buffers())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            foreach=False)
    expect, losses = {}, []
    for step in (1, 2, 3):
        opt.zero_grad(set_to_none=True)
        logits = spec["forward"](model, spec["inputs"])
        loss = spec["loss"](logits, spec["inputs"])
        loss.backward()
        if step == 1:
            expect["logits"] = logits.detach().clone()
            expect["loss"] = loss.detach().clone()
            for n, p in named:
                if p.grad is not None:  # None: the parameter takes no part in the loss (BERT's untied bias)
                    expect[f"grad/{n}"] = p.grad.detach().clone()
        losses.append(loss.item())
        opt.step()
        if step in (1, 3):
            for n, p in named:
                expect[f"step{step}/{n}"] = p.detach().clone()
            for n, b in buffers:
                expect[f"buffers_step{step}/{n}"] = b.detach().clone()
    expect["losses"] = torch.tensor(losses, dtype=torch.float32)
    save_file({k: v.contiguous() for k, v in expect.items()}, os.path.join(folder, "expect.safetensors"))

    fresh = MODELS[name](torch.Generator().manual_seed(SEED))["model"]
    fresh.load_state_dict(init)
    fresh.train()
    timing = step_time(fresh, spec)

    layers = []
    for lname, m in model.named_modules():
        if lname and not list(m.children()):
            layers.append({"name": lname, "class": f"{type(m).__module__}.{type(m).__name__}", "repr": repr(m),
                           "params": {k: list(v.shape) for k, v in m.named_parameters(recurse=False)}})
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    for lib in ("transformers", "diffusers"):
        try:
            versions[lib] = __import__(lib).__version__
        except ImportError:
            pass
    meta = {
        "name": name, "seed": SEED, "versions": versions,
        "model": f"{type(model).__module__}.{type(model).__name__}",
        "constructor": spec["constructor"], "config": spec["config"],
        "inputs": dict({k: list(v.shape) for k, v in spec["inputs"].items()}, note=spec["inputs_note"]),
        "forward": spec["forward_text"], "loss": spec["loss_text"], "tied": spec["tied"],
        "architecture": spec["architecture"], "mode": "model.train(), float32, CPU", "reference_threads": THREADS,
        "optimizer": OPTIMIZER, "procedure": PROCEDURE, "losses": losses,
        "parameters": [[n, list(p.shape)] for n, p in named],
        "buffers": [[n, list(b.shape)] for n, b in buffers],
        "state_dict_keys": list(init.keys()),
        "files": {"init.safetensors": "the initial state_dict (PyTorch key names; tied weights stored once per key, "
                                      "equal values)",
                  "inputs.safetensors": list(spec["inputs"].keys()),
                  "expect.safetensors": {"logits": list(expect["logits"].shape), "loss": [], "losses": [3],
                                         "grad/<param>": "gradient of every parameter at step 1",
                                         "step1/<param>": "every parameter after one AdamW step",
                                         "step3/<param>": "every parameter after three AdamW steps on the same batch",
                                         "buffers_step1/<buffer>": "buffers after step 1",
                                         "buffers_step3/<buffer>": "the same after step 3"}},
        "suggested_tolerances": TOLERANCES, "layers": layers, "module_tree": repr(model), "step_time": timing,
    }
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    n_params = sum(p.numel() for _, p in named)
    print(f"{name}: {n_params} parameters, losses {losses}, step {timing['median_ms']} ms "
          f"(others' CPU share {timing['other_processes_cpu_share']})")


def main():
    torch.set_num_threads(THREADS)
    out_dir = sys.argv[1]
    for name in sys.argv[2:] or list(MODELS):
        generate(name, out_dir)


if __name__ == "__main__":
    main()
