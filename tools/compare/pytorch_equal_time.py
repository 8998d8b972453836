#!/usr/bin/env python3
"""The main job in PyTorch at equal time: vit_fashion's (or, --model vit_hybrid_fashion, the hybrid's: BatchNorm
ResNet stages as torchvision builds them) model and recipe, trained for the same
wall-clock budget as `vit train` (10 minutes by default) on the official Fashion-MNIST split.

Model: tools/recipes/screen_recipes.py's PyTorch twin of vit_fashion (one 3x3 conv to 8 channels + GELU,
7x7 patches, width 64, 6 pre-norm blocks of 4 heads, MLP ratio 2, mean pooling). Recipe as vit's:
AdamW lr 2e-3 (no decay on 1-d tensors and the position table), half-epoch warmup then a cosine to
1e-5 over the steps that fit, label smoothing 0.1, gradient clipping 1.0, random crops padded by 2
and horizontal flips, normalisation from the training images, batch 128; vit's EMA is left out
(worth +-0.1 point there). The length is sized as vit sizes it: the first 30 steps are timed and
the steps that fit in the budget less 2% and the final evaluation are fixed. Debian's torch with
OpenBLAS (libopenblas0-openmp), torch.set_num_threads(N) explicit. Prints one JSON line.

    /usr/bin/python3 tools/compare/pytorch_equal_time.py --data data/fashion-mnist --budget 600 --threads 2
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from recipes.screen_recipes import build, crop_and_flip, read_idx  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/fashion-mnist")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds, evaluation included")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", choices=["vit_fashion", "vit_hybrid_fashion"], default="vit_fashion")
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t_start = time.time()
    v = dict(patch=7, dim=64, depth=6, heads=4, mlp=2.0, stem=[8], lr=2e-3, min_lr=1e-5, wd=0.05, warmup=0.5,
             ls=0.1, clip=1.0, batch=128, crop=2, hflip=True)
    if a.model == "vit_hybrid_fashion":  # screen_recipes.py's "hybrid" twin (no GELU stem)
        from recipes.screen_recipes import VARIANTS
        v.update(VARIANTS["hybrid"], stem=[])
    xs = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    ys = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    xt = read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    yt = read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    mean, std = xs.mean(), xs.std()
    x_tr = torch.tensor((xs - mean) / std).unsqueeze(1)
    y_tr = torch.tensor(ys)
    x_te = torch.tensor((xt - mean) / std).unsqueeze(1)
    y_te = torch.tensor(yt)
    pad_value = float(-mean / std)
    model = build(v)
    decay = [p for p in model.parameters() if p.dim() >= 2 and p is not model.pos]
    no_decay = [p for p in model.parameters() if p.dim() < 2 or p is model.pos]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": v["wd"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=v["lr"])
    n = len(x_tr)
    steps_per_epoch = n // v["batch"]
    warm = int(v["warmup"] * steps_per_epoch)
    total = None  # fixed after the timed steps

    def lr_at(s):
        if s < warm:
            return v["lr"] * (s + 1) / warm
        t = (s - warm) / max(1, (total or 10 ** 9) - warm)
        return v["min_lr"] + 0.5 * (v["lr"] - v["min_lr"]) * (1 + math.cos(math.pi * min(1.0, t)))

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for b in range(0, len(x_te), 1000):
                correct += (model(x_te[b:b + 1000]).argmax(1) == y_te[b:b + 1000]).sum().item()
        model.train()
        return 100.0 * correct / len(x_te)

    step, timed_from = 0, None
    model.train()
    while total is None or step < total:
        order = torch.randperm(n)
        for b in range(steps_per_epoch):
            if total is not None and step >= total:
                break
            idx = order[b * v["batch"]:(b + 1) * v["batch"]]
            x = crop_and_flip(x_tr[idx], v["crop"], v["hflip"], pad_value)
            y = y_tr[idx]
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = F.cross_entropy(model(x), y, label_smoothing=v["ls"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), v["clip"])
            opt.step()
            step += 1
            if step == 5:
                timed_from = time.time()
            if step == 35 and total is None:
                step_s = (time.time() - timed_from) / 30
                t_eval = time.time()
                evaluate()
                eval_s = time.time() - t_eval
                left = 0.98 * a.budget - (time.time() - t_start) - eval_s
                total = step + max(1, int(left / step_s))
                print(json.dumps(dict(step_seconds=round(step_s, 4), eval_seconds=round(eval_s, 2), steps=total,
                                      epochs=round(total / steps_per_epoch, 2))), flush=True)
    acc = evaluate()
    print(json.dumps(dict(engine="pytorch " + torch.__version__, model=a.model, threads=a.threads, seed=a.seed, steps=total,
                          epochs=round(total / steps_per_epoch, 2), test_acc=acc,
                          seconds=round(time.time() - t_start, 1))), flush=True)


if __name__ == "__main__":
    main()
