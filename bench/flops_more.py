"""PyTorch 2.15's FlopCounterMode per-module totals for one training step (forward, loss,
backward) of two models bigger than the golden workloads, as tests/api/flop_counter.rs builds
them: a 3-layer GPT-2 (width 64, 4 heads, vocabulary 256, dropout 0.1, batch 2 x 32) and a
NarrowResNet with two BasicBlocks per stage (widths 8-64, batch 2 x 3 x 32 x 32). FLOP counts
depend on shapes only, so weights and inputs are random.

Run with a PyTorch from PyPI in a scratch venv (transformers, torchvision too):
    python bench/flops_more.py > tests/golden/flops_more.json
(gen_flops.py, for NarrowResNet, is in ../shared/golden/ or pass its folder as GOLDEN_DIR.)
"""
import json, os, sys
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
from torchvision.models.resnet import BasicBlock
from transformers import GPT2Config, GPT2LMHeadModel
import transformers

sys.path.insert(0, os.environ.get("GOLDEN_DIR", os.path.join(os.path.dirname(__file__), "../../shared/golden")))
from gen_flops import NarrowResNet  # noqa: E402

transformers.logging.set_verbosity_error()


def totals(step):
    counter = FlopCounterMode(display=False, depth=None)
    with counter:
        step()
    return {module: sum(ops.values()) for module, ops in counter.get_flop_counts().items()}


def main():
    torch.manual_seed(0)
    gpt = GPT2LMHeadModel(GPT2Config(n_layer=3, n_head=4, n_embd=64, vocab_size=256, n_positions=64,
                                     attn_implementation="eager", resid_pdrop=0.1, embd_pdrop=0.1,
                                     attn_pdrop=0.1))
    gpt.train()
    ids = torch.randint(0, 256, (2, 32))

    def gpt_step():
        logits = gpt(input_ids=ids).logits
        F.cross_entropy(logits.reshape(-1, 256), ids.reshape(-1)).backward()

    resnet = NarrowResNet(BasicBlock, [2, 2, 2, 2], num_classes=10, width=8)
    resnet.train()
    images, labels = torch.randn(2, 3, 32, 32), torch.tensor([1, 3])

    def resnet_step():
        F.cross_entropy(resnet(images), labels).backward()

    out = {"reference": f"torch {torch.__version__}, FlopCounterMode(display=False, depth=None), per-module totals",
           "gpt2_3layer_dropout": totals(gpt_step), "resnet_2222": totals(resnet_step)}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
