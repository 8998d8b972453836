#!/usr/bin/env python3
"""Times the same ViT configurations in PyTorch and in `vit bench`, alternating rounds in one run,
and prints the ratios (only same-run ratios mean anything on a shared machine). Not part of CI.

Needs Debian's python3-torch (run with /usr/bin/python3). PyTorch must use OpenBLAS: install
libopenblas0-openmp (this script prints torch's BLAS so you can check). Thread counts are set
explicitly on both sides (torch defaults to 1 thread here).

  /usr/bin/python3 tools/compare_pytorch.py --build build --threads 2 --rounds 3
"""
import argparse
import json
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
import torchvision

PRESETS = {"vit_tiny_patch16_224": (192, 12, 3), "vit_small_patch16_224": (384, 12, 6),
           "vit_base_patch16_224": (768, 12, 12)}


def torch_model(preset):
    if preset == "vit_digits":  # patch 7, dim 64, depth 6, 4 heads, mlp 128, 28x28x1, 10 classes
        m = torchvision.models.VisionTransformer(28, 7, 6, 4, 64, 128, num_classes=10)
        m.conv_proj = torch.nn.Conv2d(1, 64, 7, 7)
        return m, (1, 28, 28), 10
    dim, depth, heads = PRESETS[preset]
    return torchvision.models.VisionTransformer(224, 16, depth, heads, dim, 4 * dim), (3, 224, 224), 1000


def time_torch(preset, batch, iters, train):
    model, shape, classes = torch_model(preset)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    model.train(train)

    def step():
        if train:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        else:
            with torch.no_grad():
                model(x)

    for _ in range(3):
        step()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def time_vit(build, preset, batch, iters, train, threads):
    cmd = [f"{build}/vit", "bench", "--preset", preset, "--batch", str(batch), "--iters", str(iters),
           "--threads", str(threads), "--json"] + (["--train"] if train else [])
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["median_ms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--only", default="", help="comma-separated presets to run (default: all)")
    p.add_argument("--threads-only", type=int, default=0, help="run only the configurations with this thread count")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    blas = [line for line in torch.__config__.show().splitlines() if "BLAS" in line]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {'; '.join(blas) or 'BLAS: unknown'}")
    T = args.threads
    configs = [("vit_tiny_patch16_224", 1, False, T), ("vit_small_patch16_224", 1, False, T),
               ("vit_base_patch16_224", 1, False, T), ("vit_base_patch16_224", 8, False, T),
               ("vit_tiny_patch16_224", 32, False, T), ("vit_digits", 128, True, T),
               ("vit_tiny_patch16_224", 1, False, 1), ("vit_base_patch16_224", 1, False, 1)]
    print(f"{'model':24s} {'batch':>5s} {'threads':>7s} {'mode':>9s} {'torch ms':>10s} {'vit ms':>10s} {'vit/torch':>10s}")
    for preset, batch, train, threads in configs:
        if args.only and preset not in args.only.split(","):
            continue
        if args.threads_only and threads != args.threads_only:
            continue
        torch.set_num_threads(threads)
        t_torch, t_vit = [], []
        for _ in range(args.rounds):  # alternate so drift hits both sides alike
            t_torch.append(time_torch(preset, batch, args.iters, train))
            t_vit.append(time_vit(args.build, preset, batch, args.iters, train, threads))
        a, b = statistics.median(t_torch), statistics.median(t_vit)
        print(f"{preset:24s} {batch:5d} {threads:7d} {'train' if train else 'inference':>9s} {a:10.1f} {b:10.1f} "
              f"{b / a:10.2f}", flush=True)


if __name__ == "__main__":
    main()
