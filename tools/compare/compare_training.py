#!/usr/bin/env python3
"""Trains the same ViT recipe in PyTorch on the same IDX digits, for comparison with `vit train`.

Needs Debian's python3-torch (run with /usr/bin/python3); uses torch.set_num_threads explicitly.
Prints one line per epoch: test accuracy, images/s and elapsed seconds.

  /usr/bin/python3 tools/compare/compare_training.py --data data/mnist --epochs 4 --patch 7 --pool mean
"""
import argparse
import math
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).view(n, 1, rows, cols)
    return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).long()


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        B, N, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) * (D // self.heads) ** -0.5).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(B, N, D))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, size, patch, dim, depth, heads, hidden, classes, pool):
        super().__init__()
        self.pool = pool
        n = (size // patch) ** 2 + (1 if pool == "cls" else 0)
        self.proj = nn.Conv2d(1, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 1e-6)
        self.pos_embed = nn.Parameter(torch.randn(1, n, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        if self.pool == "cls":
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        x = self.blocks(x + self.pos_embed)
        x = self.norm(x)[:, 0] if self.pool == "cls" else self.norm(x.mean(1))
        return self.head(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--schedule-epochs", type=int, default=60, help="cosine length (as vit's --epochs)")
    p.add_argument("--patch", type=int, default=7)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp", type=int, default=128)
    p.add_argument("--pool", default="mean")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    xtr = (read_idx(f"{args.data}/train-images-idx3-ubyte").float() / 255 - 0.1307) / 0.3081
    ytr = read_idx(f"{args.data}/train-labels-idx1-ubyte")
    xte = (read_idx(f"{args.data}/t10k-images-idx3-ubyte").float() / 255 - 0.1307) / 0.3081
    yte = read_idx(f"{args.data}/t10k-labels-idx1-ubyte")
    model = ViT(28, args.patch, args.dim, args.depth, args.heads, args.mlp, 10, args.pool)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and n not in ("cls_token", "pos_embed")]
    other = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and n not in ("cls_token", "pos_embed"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr)
    steps_per_epoch = len(xtr) // args.batch
    total = steps_per_epoch * args.schedule_epochs
    step = 0
    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        t0 = time.time()
        order = torch.randperm(len(xtr))
        for b in range(steps_per_epoch):
            idx = order[b * args.batch:(b + 1) * args.batch]
            if step < steps_per_epoch:
                lr = args.lr * (step + 1) / steps_per_epoch
            else:
                progress = (step - steps_per_epoch) / (total - steps_per_epoch)
                lr = 1e-5 + 0.5 * (args.lr - 1e-5) * (1 + math.cos(math.pi * progress))
            for g in opt.param_groups:
                g["lr"] = lr
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx], label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
        ips = steps_per_epoch * args.batch / (time.time() - t0)
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"torch epoch {epoch + 1}: test acc {100 * acc:.2f}%  {ips:.0f} img/s  "
              f"elapsed {time.time() - start:.1f}s", flush=True)


if __name__ == "__main__":
    main()
