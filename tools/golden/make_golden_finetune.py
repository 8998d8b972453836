#!/usr/bin/env python3
"""References for `vit train --init` (fine-tuning): the first AdamW steps of two adapted models.

Requirements: Debian's python3-torch (1.13) and python3-numpy; no timm. The models are the
plain-PyTorch timm forward of tools/golden/variants_timm.py, started from two committed timm-layout
files of make_golden_variants.py and adapted as vit's train/init_from.cpp adapts them:

  deit    tests/golden/variants/deit_distilled.timm.safetensors (32x32 RGB, patch 8, width 32,
          2 heads, class + distillation token, 5 classes) fine-tuned at 48x48 (pos_embed's 4x4 patch
          grid resampled to 6x6: bicubic, align_corners=False, no antialias when growing; the two
          prefix rows kept) on 3 new classes: head and head_dist replaced by zeros; layer decay 0.75.
  dinov2  tests/golden/variants/dinov2_reg.timm.safetensors (56x56 RGB, patch 14, 4 registers,
          LayerScale, no_embed_class, no head) fine-tuned at 28x28 (4x4 -> 2x2, antialiased) on GREY
          images (patch_embed.proj.weight summed over its 3 input channels, timm's adapt_input_conv)
          with a new zero head for 4 classes; layer decay 0.65 and a head learning rate 5x the base.

The key part of each attn.qkv.bias has a zero gradient in exact arithmetic (softmax does not change
when every score of a query moves by the same q.b), so there both sides' AdamW steps amplify
rounding noise: the C++ test leaves that third of the final qkv biases out.

Each: 3 steps of full-batch training on fixed random inputs (already normalised): logits = the
model's (DeiT: the mean of its two heads, as timm's eval forward and vit train without a teacher),
loss = cross-entropy with label smoothing 0.1 (batch mean), then torch.optim.AdamW (betas 0.9,
0.999, eps 1e-8) with one param group per parameter: lr = 1e-2 x decay^(depth + 1 - layer_id)
(layer_id: 0 for cls/dist/reg tokens, pos_embed, patch_embed; i + 1 for blocks.i; depth + 1 for
the rest), the head's lr x 5 in dinov2, weight decay 0.05 on tensors of >= 2 dims except
cls_token, dist_token and pos_embed, else 0. Float32 throughout (as vit trains).

tests/golden/finetune/<case>.safetensors (F32):
  input (B,C,S,S), targets (B) as F32; per step k = 0, 1, 2 (before its update): logits.k (B,K),
  loss.k (), grad.k.<name> for every parameter; after the third update: final.<name>.
  __metadata__: config JSON (case, init file, image_size, channels, classes, layer_decay, head_lr
  scale, lr, weight_decay, label_smoothing, steps, heads), "torch".

    /usr/bin/python3 tools/golden/make_golden_finetune.py
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from lib.safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from golden.variants_timm import Cfg, resample_abs_pos_embed, timm_forward  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = os.path.join(ROOT, "tests", "golden", "variants")
OUT = os.path.join(ROOT, "tests", "golden", "finetune")

LR, WD, LS, STEPS = 1e-2, 0.05, 0.1, 3

CASES = [
    dict(name="deit", init="deit_distilled.timm.safetensors", seed=301, batch=6,
         src=Cfg(mlp_dim=64, dist_token=True), image_size=48, channels=3, classes=3, layer_decay=0.75,
         head_scale=1.0),
    dict(name="dinov2", init="dinov2_reg.timm.safetensors", seed=302, batch=5,
         src=Cfg(image_size=56, patch_size=14, num_classes=0, layer_scale=True, reg_tokens=4, no_embed_class=True),
         image_size=28, channels=1, classes=4, layer_decay=0.65, head_scale=5.0),
]


def layer_id(name, depth):
    if name.startswith(("cls_token", "dist_token", "reg_token", "pos_embed", "patch_embed.")):
        return 0
    if name.startswith("blocks."):
        return int(name.split(".")[1]) + 1
    return depth + 1


def decays(name, t):
    return t.dim() >= 2 and name not in ("cls_token", "dist_token", "pos_embed")


def make(case):
    torch.manual_seed(case["seed"])
    src = case["src"]
    tensors, _, _ = read_safetensors(os.path.join(VARIANTS, case["init"]))
    sd = {k: v.float().clone() for k, v in tensors}
    # The adaptations.
    grid = case["image_size"] // src.patch_size
    prefix = 0 if src.no_embed_class else src.num_prefix
    sd["pos_embed"] = resample_abs_pos_embed(sd["pos_embed"], grid, prefix)
    if case["channels"] == 1:
        sd["patch_embed.proj.weight"] = sd["patch_embed.proj.weight"].sum(dim=1, keepdim=True)
    K, D = case["classes"], src.dim
    sd["head.weight"], sd["head.bias"] = torch.zeros(K, D), torch.zeros(K)
    if src.dist_token:
        sd["head_dist.weight"], sd["head_dist.bias"] = torch.zeros(K, D), torch.zeros(K)
    cfg = Cfg(**{k: getattr(src, k) for k in Cfg.KEYS})
    cfg.image_size, cfg.num_classes = case["image_size"], K
    # Inputs after the weights' adaptation.
    B, S, C = case["batch"], case["image_size"], case["channels"]
    x = torch.randn(B, C, S, S)
    # No class exactly B / K times: the zero head's first bias gradient (count / B - 1 / K) is then
    # not zero, which would leave AdamW to amplify rounding noise there.
    targets = torch.tensor([0, 0, 0, 0, 1, 2, 3, 1])[:B] % K
    names = list(sd.keys())
    params = {k: sd[k].clone().requires_grad_(True) for k in names}
    groups = []
    for k in names:
        scale = case["layer_decay"] ** (src.depth + 1 - layer_id(k, src.depth))
        if k.startswith(("head.", "head_dist.")):
            scale = case["head_scale"]
        groups.append({"params": [params[k]], "lr": LR * scale, "weight_decay": WD if decays(k, params[k]) else 0.0})
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    out = [("input", x), ("targets", targets.float())]
    for step in range(STEPS):
        opt.zero_grad()
        logits = timm_forward(params, cfg, x, cfg.eps_timm)["logits"]
        loss = F.cross_entropy(logits, targets, label_smoothing=LS)
        loss.backward()
        out += [("logits.%d" % step, logits.detach().clone()), ("loss.%d" % step, loss.detach().clone())]
        out += [("grad.%d.%s" % (step, k), params[k].grad.detach().clone()) for k in names]
        print("  %s step %d loss %.6f" % (case["name"], step, loss.item()))
        opt.step()
    out += [("final." + k, params[k].detach().clone()) for k in names]
    meta = {"config": json.dumps(dict(case=case["name"], init=case["init"], image_size=S, channels=C, classes=K,
                                      layer_decay=case["layer_decay"], head_scale=case["head_scale"], lr=LR,
                                      weight_decay=WD, label_smoothing=LS, steps=STEPS, heads=src.num_heads)),
            "torch": torch.__version__}
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, case["name"] + ".safetensors")
    write_safetensors(path, out, meta)
    print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))


def main():
    torch.set_num_threads(1)
    for case in CASES:
        make(case)


if __name__ == "__main__":
    main()
