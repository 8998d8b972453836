#!/usr/bin/env python3
"""Screens Fashion-MNIST recipe variants for `vit train` on a validation split, in PyTorch.

The recipe search of the `vit_fashion` preset asks many "would X pay off within the budget?"
questions; answering each with a 10-minute `vit train` run on the two-core machine takes hours.
This script replays vit's training recipe (AdamW with decoupled decay on weight matrices only,
warmup + cosine per step, label smoothing, gradient clipping, random crop with zero padding +
horizontal flip, normalisation from the training images, mean-pooled pre-norm ViT) on a fast
machine (a GPU when one is there), one process per variant, and gives each variant the number of
epochs that costs the same arithmetic as the baseline's epochs (multiply-adds per image, forward).
Only the ranking is used: the chosen variant is then built in vit and measured with `vit train
--val-split 10000 --time-budget 10m` on the two-core machine itself.

Never reads the test set: the last --val images of a fixed permutation of the 60,000 training
images are held out (as `vit train --val-split` does, with its own draw).

  python3 tools/recipes/screen_recipes.py --data DIR --variants base,stem16 --base-epochs 26 --seeds 0,1
"""
import argparse
import gzip
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

VARIANTS = {
    # name: model and recipe overrides of the baseline (vit_fashion today)
    "base": {},
    "noaug": {"crop": 0, "hflip": False},
    "nols": {"ls": 0.0},
    "lr1e-3": {"lr": 1e-3},
    "lr4e-3": {"lr": 4e-3},
    "stem8": {"stem": [8]},
    "stem16": {"stem": [16]},
    "stem32": {"stem": [32]},
    "stem16x2": {"stem": [16, 16]},
    "stem24": {"stem": [24]},
    "d96x4": {"dim": 96, "depth": 4, "heads": 4},
    "d80": {"dim": 80, "heads": 4},
    "stem16_d48": {"stem": [16], "dim": 48, "heads": 4},
    "p4": {"patch": 4},
    "stem16_noaug": {"stem": [16], "crop": 0, "hflip": False},
    "stem16_erase": {"stem": [16], "erase": 0.25},
    "mixup": {"mixup": 0.2},
    "stem4": {"stem": [4]},
    "stem8_erase": {"stem": [8], "erase": 0.25},
    "stem8_d48": {"stem": [8], "dim": 48, "heads": 4},
    "stem8x2": {"stem": [8, 8]},
    "stem8_b256": {"stem": [8], "batch": 256, "lr": 3e-3},
    "stem8_ls0": {"stem": [8], "ls": 0.0},
    # vit_hybrid_fashion: a stride-2 stem and ResNet stages of 32 and 64 channels, one block of width 64
    "hybrid": {"patch": 4, "dim": 64, "depth": 1, "heads": 2,
               "backbone": {"channels": 32, "stages": 2, "blocks": 1, "stem_stride": 2}},
}

BASE = dict(patch=7, dim=64, depth=6, heads=4, mlp=2.0, stem=[], lr=2e-3, min_lr=1e-5, wd=0.05, warmup=0.5,
            ls=0.1, clip=1.0, batch=128, crop=2, hflip=True, erase=0.0, mixup=0.0)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    dims = magic & 0xFF
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def macs_per_image(v):
    """Forward multiply-adds of one 28x28 image (convolutions, Linears, attention products)."""
    grid = 28 // v["patch"]
    n = grid * grid
    d, h = v["dim"], int(round(v["dim"] * v["mlp"]))
    macs = 0
    cin = 1
    for c in v["stem"]:
        macs += 28 * 28 * 9 * cin * c
        cin = c
    macs += n * v["patch"] * v["patch"] * cin * d
    block = n * d * 3 * d + n * d * d + 2 * n * d * h + 2 * n * n * d
    return macs + v["depth"] * block + d * 10


def build(v):
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d, heads, hidden):
            super().__init__()
            self.norm1 = nn.LayerNorm(d, eps=1e-6)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(d, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))

        def forward(self, x):
            y = self.norm1(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class BasicBlock(nn.Module):  # torchvision's, as vit's backbone (src/model/backbone.h)
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            nn.init.zeros_(self.bn2.weight)  # zero_init_last: each block starts as its shortcut
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + (x if self.downsample is None else self.downsample(x)))

    def backbone(b):
        # vit's --conv-stages S --conv-channels C --conv-blocks N --conv-stem-stride s
        layers = [nn.Conv2d(1, b["channels"], 3, b["stem_stride"], 1, bias=False), nn.BatchNorm2d(b["channels"]),
                  nn.ReLU()]
        cin = b["channels"]
        for s in range(b["stages"]):
            cout = b["channels"] << s
            for i in range(b["blocks"]):
                layers.append(BasicBlock(cin, cout, 2 if s > 0 and i == 0 else 1))
                cin = cout
        for m in layers:
            for c in m.modules():
                if isinstance(c, nn.Conv2d):
                    nn.init.kaiming_normal_(c.weight, mode="fan_out", nonlinearity="relu")
        return nn.Sequential(*layers), cin, b["stem_stride"] << (b["stages"] - 1)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin, stride = [], 1, 1
            for c in v["stem"]:
                layers += [nn.Conv2d(cin, c, 3, 1, 1), nn.GELU()]
                cin = c
            self.stem = nn.Sequential(*layers)
            if v.get("backbone"):  # a hybrid: the patch embedding reads the backbone's map
                self.stem, cin, stride = backbone(v["backbone"])
            d = v["dim"]
            self.proj = nn.Conv2d(cin, d, v["patch"] // stride, v["patch"] // stride)
            grid = 28 // v["patch"]
            self.pos = nn.Parameter(torch.randn(1, grid * grid, d) * 0.02)
            hidden = int(round(d * v["mlp"]))
            self.blocks = nn.Sequential(*[Block(d, v["heads"], hidden) for _ in range(v["depth"])])
            self.norm = nn.LayerNorm(d, eps=1e-6)
            self.head = nn.Linear(d, 10)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.trunc_normal_(m.weight, std=0.02)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = self.proj(self.stem(x)).flatten(2).transpose(1, 2) + self.pos
            return self.head(self.norm(self.blocks(x).mean(1)))

    return ViT()


def crop_and_flip(x, pad, hflip, pad_value):
    """vit's crop (zero padding in pixel space, pad_value after normalisation) and flip of a batch
    (B, 1, 28, 28) of normalised images, on x's device."""
    import torch
    import torch.nn.functional as F

    B, dev = x.shape[0], x.device
    if pad:
        xp = F.pad(x, (pad, pad, pad, pad), value=pad_value)
        dx = torch.randint(0, 2 * pad + 1, (B,), device=dev)
        dy = torch.randint(0, 2 * pad + 1, (B,), device=dev)
        ar = torch.arange(28, device=dev)
        rows = (dy[:, None] + ar[None, :])[:, :, None].expand(B, 28, 28)
        cols = (dx[:, None] + ar[None, :])[:, None, :].expand(B, 28, 28)
        x = xp[torch.arange(B, device=dev)[:, None, None], 0, rows, cols].unsqueeze(1)
    if hflip:
        flip = torch.rand(B, device=dev) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
    return x


def run_one(args, name, seed):
    import torch
    import torch.nn.functional as F

    v = dict(BASE)
    v.update(VARIANTS[name])
    torch.manual_seed(seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    xs = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    ys = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    perm = np.random.default_rng(1234).permutation(len(xs))
    tr, va = perm[:-args.val], perm[-args.val:]
    mean, std = xs[tr].mean(), xs[tr].std()
    x_tr = torch.tensor((xs[tr] - mean) / std, device=dev).unsqueeze(1)
    y_tr = torch.tensor(ys[tr], device=dev)
    x_va = torch.tensor((xs[va] - mean) / std, device=dev).unsqueeze(1)
    y_va = torch.tensor(ys[va], device=dev)
    pad_value = float(-mean / std)  # zero padding in pixel space

    model = build(v).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2 and p is not model.pos]
    no_decay = [p for p in model.parameters() if p.dim() < 2 or p is model.pos]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": v["wd"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=v["lr"])
    base_macs = macs_per_image(dict(BASE))
    epochs = args.base_epochs * base_macs / macs_per_image(v)
    steps_per_epoch = len(tr) // v["batch"]
    total = int(epochs * steps_per_epoch)
    warm = int(v["warmup"] * steps_per_epoch)

    def lr_at(s):
        if s < warm:
            return v["lr"] * (s + 1) / warm
        t = (s - warm) / max(1, total - warm)
        return v["min_lr"] + 0.5 * (v["lr"] - v["min_lr"]) * (1 + math.cos(math.pi * t))

    n = len(tr)
    step = 0
    t0 = time.time()
    while step < total:
        order = torch.randperm(n, device=dev)
        for b in range(steps_per_epoch):
            if step >= total:
                break
            idx = order[b * v["batch"]:(b + 1) * v["batch"]]
            x, y = x_tr[idx], y_tr[idx]
            B = x.shape[0]
            x = crop_and_flip(x, v["crop"], v["hflip"], pad_value)
            if v["erase"] > 0:
                # one rectangle of 2-33% of the image, aspect 0.3-3.3, filled with noise
                for i in range(B):
                    if torch.rand(1).item() < v["erase"]:
                        area = 784 * (0.02 + 0.31 * torch.rand(1).item())
                        ratio = math.exp(math.log(0.3) + (math.log(3.3) - math.log(0.3)) * torch.rand(1).item())
                        eh = min(28, int(round(math.sqrt(area * ratio))))
                        ew = min(28, int(round(math.sqrt(area / ratio))))
                        top = int(torch.randint(0, 28 - eh + 1, (1,)))
                        left = int(torch.randint(0, 28 - ew + 1, (1,)))
                        x[i, :, top:top + eh, left:left + ew] = torch.randn(1, eh, ew, device=dev)
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            logits = None
            if v["mixup"] > 0:
                lam = float(np.random.beta(v["mixup"], v["mixup"]))
                j = torch.randperm(B, device=dev)
                logits = model(lam * x + (1 - lam) * x[j])
                loss = lam * F.cross_entropy(logits, y, label_smoothing=v["ls"]) + (1 - lam) * F.cross_entropy(
                    logits, y[j], label_smoothing=v["ls"])
            else:
                loss = F.cross_entropy(model(x), y, label_smoothing=v["ls"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if v["clip"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), v["clip"])
            opt.step()
            step += 1
    model.eval()
    correct = 0
    with torch.no_grad():
        for b in range(0, len(va), 1000):
            correct += (model(x_va[b:b + 1000]).argmax(1) == y_va[b:b + 1000]).sum().item()
    return dict(variant=name, seed=seed, epochs=round(epochs, 2), steps=total, macs=macs_per_image(v),
                val_acc=100.0 * correct / len(va), seconds=round(time.time() - t0, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder with the four Fashion-MNIST IDX .gz files")
    ap.add_argument("--variants", default="base", help="comma-separated names: " + ", ".join(VARIANTS))
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--base-epochs", type=float, default=26.0,
                    help="epochs of the baseline (26 = what vit_fashion trains in 10 minutes on two cores)")
    ap.add_argument("--val", type=int, default=10000)
    ap.add_argument("--parallel", type=int, default=8, help="processes at once")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        name, seed = args.one.split(":")
        print(json.dumps(run_one(args, name, int(seed))), flush=True)
        return
    jobs = [(n, s) for n in args.variants.split(",") for s in args.seeds.split(",")]
    for n, _ in jobs:
        if n not in VARIANTS:
            sys.exit(f"unknown variant {n!r}; known: {', '.join(VARIANTS)}")
    running = []
    while jobs or running:
        while jobs and len(running) < args.parallel:
            n, s = jobs.pop(0)
            cmd = [sys.executable, __file__, "--data", args.data, "--base-epochs", str(args.base_epochs), "--val",
                   str(args.val), "--one", f"{n}:{s}"]
            running.append(subprocess.Popen(cmd))
        running[0].wait()
        running.pop(0)


if __name__ == "__main__":
    main()
