#!/usr/bin/env python3
"""Times the same ViTs in PyTorch, ONNX Runtime and `vit bench`, engines alternating within each
round, and prints a markdown table of medians with the ratios vit / PyTorch and vit / ORT (only
same-run ratios mean anything on a shared machine). Not part of CI.

The inference rows use one random-weight torchvision.models.VisionTransformer per size: PyTorch
runs it, the same module is exported to ONNX (fp32, opset 17, static shapes) for ONNX Runtime,
and its state dict is written to a torchvision-layout .safetensors that `vit bench --checkpoint`
loads, so all three engines run the very same weights (checked once per model: logits compared
on one input, see --no-verify). `vit quantize` makes an int8 copy of that file, timed as a fourth
engine ("vit int8", same `vit bench --checkpoint`; its logits' cosine similarity to PyTorch's
on the check input is printed; --no-int8 leaves it out). The training rows (PyTorch and vit only) time one step of the
digits ViT (forward, cross-entropy, backward, AdamW) on random data, no augmentation, with the
same architecture as `--preset vit_digits`: mean pooling, no class token, drop-path up to 0.1.

Needs (as root) `apt-get install python3-torch python3-torchvision python3-onnx
libopenblas0-openmp nodejs npm`; run with Debian's /usr/bin/python3. ONNX Runtime is the npm
package onnxruntime-node, installed on first use into ~/.cache/vit-ort/ with
ONNXRUNTIME_NODE_INSTALL=skip (its CPU library ships inside the tarball; the post-install
download is for GPU builds) and driven by tools/ort_bench.mjs.

  /usr/bin/python3 tools/compare_engines.py --build build --rounds 3 --iters 10
  /usr/bin/python3 tools/compare_engines.py --rows ti-b1,digits-train --rounds 1 --iters 3
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_checkpoint import write_safetensors  # noqa: E402

ORT_VERSION = "1.30.0"
NODE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_bench.mjs")
VERIFY_TOLERANCE = 1e-4  # max |diff| / max |logit| between engines on the same input
ARCHS = {"ViT-Ti/16": (192, 12, 3), "ViT-S/16": (384, 12, 6), "ViT-B/16": (768, 12, 12)}  # dim, depth, heads
SHORT = {"ViT-Ti/16": "vit_tiny", "ViT-S/16": "vit_small", "ViT-B/16": "vit_base"}  # temporary file names


def rows(threads):
    """key, case label, kind, model, batch, threads; `threads` replaces 2 in the multi-thread rows."""
    t = threads
    out = [("ti-b1", "ViT-Ti/16", 1, t), ("s-b1", "ViT-S/16", 1, t), ("b-b1", "ViT-B/16", 1, t),
           ("b-b8", "ViT-B/16", 8, t), ("ti-b32", "ViT-Ti/16", 32, t), ("b-b1-t1", "ViT-B/16", 1, 1)]
    table = [(key, f"{m}, batch {b}, {n} thread{'s' if n > 1 else ''}", "infer", m, b, n) for key, m, b, n in out]
    for key, patch in (("digits-train", 7), ("digits-p4-train", 4)):
        model = "digits ViT" + (" patch 4" if patch == 4 else "")
        label = f"{model} training step, batch 128, {t} thread{'s' if t > 1 else ''}"
        table.append((key, label, "train", patch, 128, t))
    return table


# ---------------------------------------------------------------- PyTorch models

def torchvision_vit(name, seed):
    dim, depth, heads = ARCHS[name]
    torch.manual_seed(seed)
    model = torchvision.models.VisionTransformer(224, 16, depth, heads, dim, 4 * dim).eval()
    with torch.no_grad():  # random weights everywhere (torchvision's init zeroes the head)
        for prm in model.parameters():
            prm.normal_(0, 0.02 if prm.ndim > 1 else 0.05)
    return model


def drop_path(x, p, training):
    if not training or p == 0.0:
        return x
    keep = (torch.rand(x.shape[0], 1, 1) >= p).to(x.dtype) / (1.0 - p)
    return x * keep


class DigitsBlock(nn.Module):
    def __init__(self, dim, heads, hidden, drop):
        super().__init__()
        self.heads, self.drop = heads, drop
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):  # (B, N, D)
        B, N, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) * (D // self.heads) ** -0.5).softmax(-1)
        x = x + drop_path(self.proj((a @ v).transpose(1, 2).reshape(B, N, D)), self.drop, self.training)
        return x + drop_path(self.fc2(F.gelu(self.fc1(self.norm2(x)))), self.drop, self.training)


class DigitsViT(nn.Module):
    """--preset vit_digits: 28x28x1, dim 64, depth 6, 4 heads, mlp 128, mean pool, drop-path 0..0.1."""

    def __init__(self, patch, dim=64, depth=6, heads=4, hidden=128, classes=10, drop_path_rate=0.1):
        super().__init__()
        self.proj = nn.Conv2d(1, dim, patch, patch)
        self.pos_embed = nn.Parameter(torch.randn(1, (28 // patch) ** 2, dim) * 0.02)
        self.blocks = nn.Sequential(*[DigitsBlock(dim, heads, hidden, drop_path_rate * i / (depth - 1))
                                      for i in range(depth)])
        self.fc_norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):  # (B, 1, 28, 28) -> (B, 10)
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = self.blocks(x + self.pos_embed)
        return self.head(self.fc_norm(x.mean(1)))


def time_torch(model, batch_shape, train, iters, warmup, threads):
    torch.set_num_threads(threads)
    x = torch.randn(*batch_shape)
    if train:
        y = torch.randint(0, 10, (batch_shape[0],))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model.train()

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    else:
        model.eval()

        def step():
            with torch.inference_mode():
                model(x)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


# ---------------------------------------------------------------- ONNX Runtime (node) and vit

def ensure_ort(folder, version):
    """Installs onnxruntime-node@version into folder (once) and returns the CPU library's path."""
    pkg = os.path.join(folder, "node_modules", "onnxruntime-node", "package.json")
    installed = None
    if os.path.exists(pkg):
        with open(pkg) as f:
            installed = json.load(f)["version"]
    if installed != version:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "package.json"), "w") as f:  # keeps npm from walking up the tree
            json.dump({"private": True, "name": "vit-ort-cache"}, f)
        print(f"installing onnxruntime-node@{version} into {folder}", file=sys.stderr, flush=True)
        env = dict(os.environ, ONNXRUNTIME_NODE_INSTALL="skip")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", f"onnxruntime-node@{version}"],
                       cwd=folder, env=env, check=True, stdout=sys.stderr)
    libs = glob.glob(os.path.join(folder, "node_modules/onnxruntime-node/bin/napi-v*/linux/x64/libonnxruntime.so*"))
    if not libs:
        sys.exit(f"[compare_engines] onnxruntime-node@{version} in {folder} has no "
                 "bin/napi-v*/linux/x64/libonnxruntime.so (the CPU library)")
    return libs[0]


def run_ort(ort_dir, onnx_path, shape, threads, iters, warmup, extra=()):
    cmd = ["node", NODE_SCRIPT, "--ort-dir", ort_dir, "--model", onnx_path, "--shape", ",".join(map(str, shape)),
           "--threads", str(threads), "--iters", str(iters), "--warmup", str(warmup), *extra]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def run_vit(build, args, threads, iters, warmup):
    cmd = [os.path.join(build, "vit"), "bench", *args, "--iters", str(iters), "--warmup", str(warmup),
           "--threads", str(threads), "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["median_ms"]


def export_onnx(model, batch, path):
    with warnings.catch_warnings():  # torchvision's input-size assert becomes a constant in the trace
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(batch, 3, 224, 224), path, opset_version=17, input_names=["images"],
                          output_names=["logits"], do_constant_folding=True)


def verify(name, model, onnx_path, weights, ort_dir, build, tmp, threads, int8=None):
    """Logits of the three engines on one input; exits when they differ (not the same model)."""
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        ref = model(x).numpy()
    x_npy, x_bin = os.path.join(tmp, "verify_x.npy"), os.path.join(tmp, "verify_x.bin")
    np.save(x_npy, x.numpy())
    x.numpy().astype(np.float32).tofile(x_bin)
    y_ort, y_vit = os.path.join(tmp, "verify_ort.bin"), os.path.join(tmp, "verify_vit.npy")
    run_ort(ort_dir, onnx_path, (1, 3, 224, 224), threads, 0, 0, ("--input", x_bin, "--output", y_ort))
    subprocess.run([os.path.join(build, "vit"), "predict", "--checkpoint", weights, "--tensor", x_npy, "--out", y_vit,
                    "--overwrite", "--threads", str(threads)], check=True, stdout=subprocess.DEVNULL)
    scale = np.abs(ref).max()
    d_ort = np.abs(np.fromfile(y_ort, dtype=np.float32).reshape(ref.shape) - ref).max() / scale
    d_vit = np.abs(np.load(y_vit) - ref).max() / scale
    print(f"  {name}: same logits? max |diff| / max |logit|: ORT {d_ort:.1e}, vit {d_vit:.1e}", flush=True)
    if max(d_ort, d_vit) > VERIFY_TOLERANCE:
        sys.exit(f"[compare_engines] {name}: engines disagree beyond {VERIFY_TOLERANCE:g}; not the same model")
    if int8:
        y8 = os.path.join(tmp, "verify_int8.npy")
        subprocess.run([os.path.join(build, "vit"), "predict", "--checkpoint", int8, "--tensor", x_npy, "--out", y8,
                        "--overwrite", "--threads", str(threads)], check=True, stdout=subprocess.DEVNULL)
        a, b = np.load(y8).ravel().astype(np.float64), ref.ravel().astype(np.float64)
        cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        print(f"  {name}: int8 logits vs PyTorch fp32: cosine {cos:.6f}, max |diff| / max |logit| "
              f"{np.abs(a - b).max() / scale:.1e}", flush=True)


# ---------------------------------------------------------------- one row's engines

class ModelFiles:
    """Per size: the PyTorch module, its torchvision-layout .safetensors and its ONNX exports per batch."""

    def __init__(self, tmp, ort_dir):
        self.tmp, self.ort_dir = tmp, ort_dir
        self.models, self.weights, self.onnx, self.int8 = {}, {}, {}, {}

    def onnx_file(self, name, batch):
        if (name, batch) not in self.onnx:
            self.onnx[name, batch] = os.path.join(self.tmp, f"{SHORT[name]}-b{batch}.onnx")
            export_onnx(self.models[name], batch, self.onnx[name, batch])
        return self.onnx[name, batch]

    def inference_engines(self, name, batch, threads, args):
        if name not in self.models:
            self.models[name] = torchvision_vit(name, seed=len(self.models))
            self.weights[name] = os.path.join(self.tmp, f"{SHORT[name]}.safetensors")
            write_safetensors(self.weights[name], self.models[name].state_dict().items())
            if not args.no_int8:
                self.int8[name] = os.path.join(self.tmp, f"{SHORT[name]}-int8.safetensors")
                subprocess.run([os.path.join(args.build, "vit"), "quantize", "--checkpoint", self.weights[name],
                                "--out", self.int8[name], "--overwrite"], check=True, stdout=subprocess.DEVNULL)
            if not args.no_verify:
                verify(name, self.models[name], self.onnx_file(name, 1), self.weights[name], self.ort_dir, args.build,
                       self.tmp, threads, self.int8.get(name))
        model, onnx, shape = self.models[name], self.onnx_file(name, batch), (batch, 3, 224, 224)
        vit_args = ["--checkpoint", self.weights[name], "--batch", str(batch)]
        engines = {"torch": lambda: time_torch(model, shape, False, args.iters, args.warmup, threads),
                   "ort": lambda: run_ort(self.ort_dir, onnx, shape, threads, args.iters, args.warmup)["median_ms"],
                   "vit": lambda: run_vit(args.build, vit_args, threads, args.iters, args.warmup)}
        if name in self.int8:
            int8_args = ["--checkpoint", self.int8[name], "--batch", str(batch)]
            engines["vit8"] = lambda: run_vit(args.build, int8_args, threads, args.iters, args.warmup)
        return engines


def training_engines(patch, batch, threads, args):
    torch.manual_seed(0)
    model = DigitsViT(patch)
    vit_args = ["--preset", "vit_digits", "--batch", str(batch), "--train"]
    if patch != 7:
        vit_args += ["--patch-size", str(patch)]
    return {"torch": lambda: time_torch(model, (batch, 1, 28, 28), True, args.iters, args.warmup, threads),
            "vit": lambda: run_vit(args.build, vit_args, threads, args.iters, args.warmup)}


# ---------------------------------------------------------------- machine description

def torch_blas():
    """The BLAS library torch actually loaded (Debian's torch links libblas.so.3, an alternative)."""
    torch.randn(64, 64) @ torch.randn(64, 64)
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"lib(open)?blas", os.path.basename(path)):
                libs.add(os.path.realpath(path))
    info = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return f"BLAS_INFO={info.group(1) if info else '?'}, loaded: {', '.join(sorted(libs)) or 'none found'}"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="folder holding the vit binary")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each runs every engine once per row")
    p.add_argument("--iters", type=int, default=10, help="timed iterations per engine per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations before them")
    p.add_argument("--threads", type=int, default=2, help="threads of the multi-thread rows (the 1-thread row stays)")
    p.add_argument("--rows", default="", help="comma-separated row keys (default: all): " +
                   ", ".join(r[0] for r in rows(2)))
    p.add_argument("--ort-version", default=ORT_VERSION)
    p.add_argument("--ort-dir", default="", help="npm folder for onnxruntime-node (default ~/.cache/vit-ort/<version>)")
    p.add_argument("--no-verify", action="store_true", help="skip the same-logits check of the three engines")
    p.add_argument("--no-int8", action="store_true", help="leave out the int8 engine (vit quantize + vit bench)")
    args = p.parse_args()
    table = rows(args.threads)
    if args.rows:
        wanted = args.rows.split(",")
        unknown = [k for k in wanted if k not in {r[0] for r in table}]
        if unknown:
            sys.exit(f"[compare_engines] unknown rows {unknown}; known: {[r[0] for r in table]}")
        table = [r for r in table if r[0] in wanted]
    if not os.access(os.path.join(args.build, "vit"), os.X_OK):
        sys.exit(f"[compare_engines] no vit binary in {args.build} (cmake --build {args.build} --target vit)")
    ort_dir = args.ort_dir or os.path.expanduser(f"~/.cache/vit-ort/onnxruntime-node-{args.ort_version}")
    need_ort = any(r[2] == "infer" for r in table)
    ort_lib = ensure_ort(ort_dir, args.ort_version) if need_ort else None

    print(f"machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu_name()}")
    print(f"PyTorch {torch.__version__} (torchvision {torchvision.__version__}), {torch_blas()}")
    if need_ort:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
        print(f"ONNX Runtime: onnxruntime-node {args.ort_version} ({ort_lib}), via node {node}")
    print(f"vit: {os.path.abspath(os.path.join(args.build, 'vit'))}")
    print(f"{args.rounds} rounds x {args.iters} iterations (after {args.warmup} warm-up) per engine; medians",
          flush=True)

    results = []
    with tempfile.TemporaryDirectory(prefix="vit-engines-") as tmp:
        files = ModelFiles(tmp, ort_dir)
        for _, label, kind, model_name, batch, threads in table:
            make = files.inference_engines if kind == "infer" else training_engines
            engines = make(model_name, batch, threads, args)
            times = {name: [] for name in engines}
            order = list(engines)
            for r in range(args.rounds):  # alternate, rotating who goes first, so drift hits all alike
                for name in order[r % len(order):] + order[:r % len(order)]:
                    times[name].append(engines[name]())
            med = {name: statistics.median(v) for name, v in times.items()}
            results.append((label, med))
            print(f"  {label}: " + ", ".join(f"{n} {m:.1f} ms" for n, m in med.items()), file=sys.stderr, flush=True)

    print()
    print("| case | PyTorch ms | ONNX Runtime ms | vit ms | vit / PyTorch | vit / ORT |")
    print("|---|---|---|---|---|---|")
    for label, med in results:
        ort = f"{med['ort']:.1f}" if "ort" in med else "-"
        vs_ort = f"{med['vit'] / med['ort']:.2f}" if "ort" in med else "-"
        vs_torch = f"{med['vit'] / med['torch']:.2f}"
        print(f"| {label} | {med['torch']:.1f} | {ort} | {med['vit']:.1f} | {vs_torch} | {vs_ort} |")
    int8_rows = [(label, med) for label, med in results if "vit8" in med]
    if int8_rows:
        print()
        print("| case (int8) | vit int8 ms | int8 / vit fp32 | int8 / ONNX Runtime fp32 | int8 / PyTorch fp32 |")
        print("|---|---|---|---|---|")
        for label, med in int8_rows:
            print(f"| {label} | {med['vit8']:.1f} | {med['vit8'] / med['vit']:.2f} | {med['vit8'] / med['ort']:.2f} | "
                  f"{med['vit8'] / med['torch']:.2f} |")


if __name__ == "__main__":
    main()
