#!/usr/bin/env python3
"""Times the same ViTs in PyTorch, ONNX Runtime and `vit bench`, engines alternating within each
round, and prints a markdown table of medians with the ratios vit / ORT (float32, int8, bf16) and,
for training, vit / PyTorch (only same-run ratios mean anything on a shared machine). Not part of CI.

The inference rows use one random-weight torchvision.models.VisionTransformer per size: PyTorch
runs it, the same module is exported to ONNX (fp32, opset 17, static shapes) for ONNX Runtime,
and its state dict is written to a torchvision-layout .safetensors that `vit bench --checkpoint`
loads, so all three engines run the very same weights (checked once per model: logits compared
on one input, see --no-verify). int8: "ORT int8" runs the ONNX file that
quantize_dynamic(per_channel=True, weight_type=QInt8) writes (made by tools/compare/ort_int8.py with the
`onnx` package; the check run writes ORT's optimised graph and exits unless its int8 MatMuls run
as DynamicQuantizeMatMul), "vit int8" a `vit quantize` copy of the .safetensors (--no-int8 leaves
both out). bf16: "vit bf16" is `vit bench --precision bf16` on the float file (ORT has no bf16 on
x86; --no-bf16 leaves it out). The cosine similarity of each int8 / bf16 engine's logits to
PyTorch's on the check input is printed. The training rows (PyTorch and vit only) time one step of
the digits ViT (forward, cross-entropy, backward, AdamW) on random data, no augmentation, with the
same architecture as `--preset vit_digits`: mean pooling, no class token, drop-path up to 0.1.

Needs (as root) `apt-get install python3-torch python3-torchvision python3-onnx
libopenblas0-openmp nodejs npm`; run with Debian's /usr/bin/python3. ONNX Runtime is the npm
package onnxruntime-node, installed on first use into ~/.cache/vit-ort/ with
ONNXRUNTIME_NODE_INSTALL=skip (its CPU library ships inside the tarball; the post-install
download is for GPU builds) and driven by tools/compare/ort_bench.mjs.

  /usr/bin/python3 tools/compare/compare_engines.py --build build --rounds 3 --iters 10
  /usr/bin/python3 tools/compare/compare_engines.py --rows ti-b1,digits-train --rounds 1 --iters 3
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from compare import ort_int8  # noqa: E402
from lib.safetensors_io import write_safetensors  # noqa: E402

ORT_VERSION = "1.30.0"
NODE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_bench.mjs")
VERIFY_TOLERANCE = 1e-4  # max |diff| / max |logit| between engines on the same input
ARCHS = {"ViT-Ti/16": (192, 12, 3), "ViT-S/16": (384, 12, 6), "ViT-B/16": (768, 12, 12)}  # dim, depth, heads
SHORT = {"ViT-Ti/16": "vit_tiny", "ViT-S/16": "vit_small", "ViT-B/16": "vit_base"}  # temporary file names
COLUMNS = (("torch", "PyTorch fp32"), ("ort", "ORT fp32"), ("ort8", "ORT int8"), ("vit", "vit fp32"),
           ("vit8", "vit int8"), ("vitbf16", "vit bf16"))
RATIOS = (("vit", "ort", "vit/ORT fp32"), ("vit8", "ort8", "vit int8/ORT int8"),
          ("vitbf16", "ort", "vit bf16/ORT fp32"))
CPU_FLAGS = re.compile(r"avx2|fma|avx512.*|amx.*|.*vnni.*|.*bf16.*")  # the ones the kernels care about


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
    # Fine-tuning a ViT-Ti/16 at 224x224 on 10 classes (vit train --init's step: the whole model trains).
    table.append(("ti-finetune", f"ViT-Ti/16 fine-tuning step 224x224, 10 classes, batch 16, {t} thread"
                  f"{'s' if t > 1 else ''}", "train", "ViT-Ti/16", 16, t))
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


# The last float32 `vit bench` report of each (model, batch, threads): its GFLOP a forward and the
# float32 FMA peak of those threads, measured in the run (for the shares of peak, see print_tables).
PEAKS = {}


def run_vit(build, args, threads, iters, warmup, peak_key=None):
    cmd = [os.path.join(build, "vit"), "bench", *args, "--iters", str(iters), "--warmup", str(warmup),
           "--threads", str(threads), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"[compare_engines] {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    report = json.loads(done.stdout)
    if peak_key is not None and report.get("precision") == "float32" and "peak_gflops" in report:
        gflop = report["gflops"] * report["median_ms"] / 1000.0
        PEAKS[peak_key] = (gflop, report["peak_gflops"] / report["peak_factor"], report["peak_basis"])
    return report["median_ms"]


def export_onnx(model, batch, path):
    with warnings.catch_warnings():  # torchvision's input-size assert becomes a constant in the trace
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(batch, 3, 224, 224), path, opset_version=17, input_names=["images"],
                          output_names=["logits"], do_constant_folding=True)


def agreement(what, y, ref):
    a, b = y.ravel().astype(np.float64), ref.ravel().astype(np.float64)
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    rel = np.abs(a - b).max() / np.abs(b).max()
    return f"{what} logits vs PyTorch fp32: cosine {cos:.6f}, max |diff| / max |logit| {rel:.1e}"


def fuse_check(name, written, optimized):
    """ORT's optimised int8 graph must run the MatMulIntegers fused (DynamicQuantizeMatMul), as MLAS's int8 GEMM."""
    ran = ort_int8.op_counts(optimized)
    fused, wrote = ran[ort_int8.FUSED_OP], written["MatMulInteger"]
    rest = ", ".join(f"{op} {n}" for op, n in sorted(ran.items()) if op != ort_int8.FUSED_OP and
                     ("Integer" in op or "Quantize" in op))
    print(f"  {name}: ORT int8 as optimised: {fused} {ort_int8.FUSED_OP} for the {wrote} MatMulInteger written"
          f"{'' if fused == wrote else ' (NOT all fused)'}; left: {rest or 'none'}", flush=True)
    if fused == 0:
        sys.exit(f"[compare_engines] {name}: no {ort_int8.FUSED_OP} in ORT's optimised graph ({optimized}): "
                 "ORT int8 would not run as quantize_dynamic's output normally runs")


def verify(name, model, files, args, threads):
    """Logits of the engines on one input: exits when the fp32 ones differ (not the same model); prints how close
    the int8 and bf16 ones are, and checks that ORT int8 runs fused."""
    tmp, vit = files.tmp, os.path.join(args.build, "vit")
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        ref = model(x).numpy()
    x_npy, x_bin = os.path.join(tmp, "verify_x.npy"), os.path.join(tmp, "verify_x.bin")
    np.save(x_npy, x.numpy())
    x.numpy().astype(np.float32).tofile(x_bin)

    def vit_predict(weights, *extra):
        y = os.path.join(tmp, "verify_vit.npy")
        subprocess.run([vit, "predict", "--checkpoint", weights, "--tensor", x_npy, "--out", y, "--overwrite",
                        "--threads", str(threads), *extra], check=True, stdout=subprocess.DEVNULL)
        return np.load(y)

    def ort_predict(onnx_path, *extra):
        y = os.path.join(tmp, "verify_ort.bin")
        run_ort(files.ort_dir, onnx_path, (1, 3, 224, 224), threads, 0, 0, ("--input", x_bin, "--output", y, *extra))
        return np.fromfile(y, dtype=np.float32).reshape(ref.shape)

    scale = np.abs(ref).max()
    d_ort = np.abs(ort_predict(files.onnx_file(name, 1)) - ref).max() / scale
    d_vit = np.abs(vit_predict(files.weights[name]) - ref).max() / scale
    print(f"  {name}: same logits? max |diff| / max |logit|: ORT {d_ort:.1e}, vit {d_vit:.1e}", flush=True)
    if max(d_ort, d_vit) > VERIFY_TOLERANCE:
        sys.exit(f"[compare_engines] {name}: engines disagree beyond {VERIFY_TOLERANCE:g}; not the same model")
    if not args.no_int8:
        optimized = os.path.join(tmp, "verify_ort_int8_optimized.onnx")
        y = ort_predict(files.ort8_file(name, 1), "--optimized-out", optimized)
        print(f"  {name}: {agreement('ORT int8', y, ref)}", flush=True)
        fuse_check(name, files.ort8_counts[name, 1], optimized)
        print(f"  {name}: {agreement('vit int8', vit_predict(files.int8[name]), ref)}", flush=True)
    if not args.no_bf16:
        y = vit_predict(files.weights[name], "--precision", "bf16")
        print(f"  {name}: {agreement('vit bf16', y, ref)}", flush=True)


# ---------------------------------------------------------------- one row's engines

class ModelFiles:
    """Per size: the PyTorch module, its torchvision-layout .safetensors (and vit int8 copy), its ONNX exports per
    batch and their dynamic-int8 versions."""

    def __init__(self, tmp, ort_dir):
        self.tmp, self.ort_dir = tmp, ort_dir
        self.models, self.weights, self.onnx, self.int8, self.ort8, self.ort8_counts = {}, {}, {}, {}, {}, {}

    def onnx_file(self, name, batch):
        if (name, batch) not in self.onnx:
            self.onnx[name, batch] = os.path.join(self.tmp, f"{SHORT[name]}-b{batch}.onnx")
            export_onnx(self.models[name], batch, self.onnx[name, batch])
        return self.onnx[name, batch]

    def ort8_file(self, name, batch):
        if (name, batch) not in self.ort8:
            self.ort8[name, batch] = os.path.join(self.tmp, f"{SHORT[name]}-b{batch}-int8.onnx")
            self.ort8_counts[name, batch] = ort_int8.quantize_dynamic_int8(self.onnx_file(name, batch),
                                                                           self.ort8[name, batch])
        return self.ort8[name, batch]

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
                verify(name, self.models[name], self, args, threads)
        model, shape = self.models[name], (batch, 3, 224, 224)
        onnx, ort8 = self.onnx_file(name, batch), None if args.no_int8 else self.ort8_file(name, batch)

        def vit(weights, *extra):
            return lambda: run_vit(args.build, ["--checkpoint", weights, "--batch", str(batch), *extra], threads,
                                   args.iters, args.warmup, peak_key=(name, batch, threads))

        def ort(path):
            return lambda: run_ort(self.ort_dir, path, shape, threads, args.iters, args.warmup)["median_ms"]

        engines = {"torch": lambda: time_torch(model, shape, False, args.iters, args.warmup, threads),
                   "ort": ort(onnx), "vit": vit(self.weights[name])}
        if not args.no_int8:
            engines.update(ort8=ort(ort8), vit8=vit(self.int8[name]))
        if not args.no_bf16:
            engines["vitbf16"] = vit(self.weights[name], "--precision", "bf16")
        return engines


def training_engines(patch, batch, threads, args):
    torch.manual_seed(0)
    if isinstance(patch, str):  # a timm-sized ViT fine-tuned at 224 on 10 classes
        model = torchvision_vit(patch, 0)
        model.heads.head = torch.nn.Linear(model.hidden_dim, 10)
        preset = {"ViT-Ti/16": "vit_tiny_patch16_224", "ViT-S/16": "vit_small_patch16_224",
                  "ViT-B/16": "vit_base_patch16_224"}[patch]
        vit_args = ["--preset", preset, "--num-classes", "10", "--batch", str(batch), "--train"]
        shape = (batch, 3, 224, 224)
    else:
        model = DigitsViT(patch)
        vit_args = ["--preset", "vit_digits", "--batch", str(batch), "--train"]
        if patch != 7:
            vit_args += ["--patch-size", str(patch)]
        shape = (batch, 1, 28, 28)
    return {"torch": lambda: time_torch(model, shape, True, args.iters, args.warmup, threads),
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


def cpuinfo(key, default):
    """The first /proc/cpuinfo value of key (model name, flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.split(":")[0].strip() == key)
    except (OSError, StopIteration):
        return default


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
    p.add_argument("--no-verify", action="store_true",
                   help="skip the check run (fp32 logits compared, int8 / bf16 cosines, ORT int8 fuse check)")
    p.add_argument("--no-int8", action="store_true", help="leave out the int8 engines (ORT int8 and vit int8)")
    p.add_argument("--no-bf16", action="store_true", help="leave out vit bf16 (vit bench --precision bf16)")
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

    print(f"machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpuinfo('model name', '?')}")
    flags = [f for f in cpuinfo("flags", "").split() if CPU_FLAGS.fullmatch(f)]
    print(f"CPU flags: {' '.join(flags) or 'none of avx2, fma, avx512*, *vnni*, *bf16*, amx*'}")
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
            if (model_name, batch, threads) in PEAKS:
                med["peak"] = PEAKS[model_name, batch, threads]
            results.append((label, med))
            print(f"  {label}: " + ", ".join(f"{n} {m:.1f} ms" for n, m in med.items() if n != "peak"), file=sys.stderr,
                  flush=True)

    print_tables(results)


def print_tables(results):
    """The issue's table (inference, ms and same-run ratios, bold), then the training steps against PyTorch."""
    infer = [(label, med) for label, med in results if "ort" in med]
    if infer:
        cols = [(key, title) for key, title in COLUMNS if any(key in med for _, med in infer)]
        ratios = [r for r in RATIOS if any(r[0] in med and r[1] in med for _, med in infer)]
        print()
        print("| case | " + " | ".join([t for _, t in cols] + [t for _, _, t in ratios]) + " |")
        print("|---" * (1 + len(cols) + len(ratios)) + "|")
        for label, med in infer:
            cells = [f"{med[k]:.1f}" if k in med else "-" for k, _ in cols]
            cells += [f"**{med[a] / med[b]:.2f}**" if a in med and b in med else "-" for a, b, _ in ratios]
            print(f"| {label} | " + " | ".join(cells) + " |")
        # Each engine's whole forward (GEMMs and attention, as vit bench counts it) against the peak of
        # the instruction its precision uses: the float32 FMA rate of those threads measured by vit
        # bench in this run, x2 for bf16 (vdpbf16ps), x4 for int8 (vpdpbusd), as issue 42 counts.
        shared = [(label, med) for label, med in infer if "peak" in med]
        if shared:
            factor = {"torch": 1, "ort": 1, "vit": 1, "ort8": 4, "vit8": 4, "vitbf16": 2}
            print()
            print("| case | GFLOP | fp32 peak GFLOP/s | " + " | ".join(f"{t} % of peak" for _, t in cols) + " |")
            print("|---" * (3 + len(cols)) + "|")
            for label, med in shared:
                gflop, peak, basis = med["peak"]
                cells = [f"{100.0 * gflop / (med[k] / 1000.0) / (peak * factor[k]):.0f}%" if k in med else "-"
                         for k, _ in cols]
                print(f"| {label} | {gflop:.2f} | {peak:.0f} ({basis}) | " + " | ".join(cells) + " |")
    train = [(label, med) for label, med in results if "ort" not in med and "torch" in med]
    if train:
        print()
        print("| case | PyTorch fp32 | vit fp32 | vit / PyTorch |")
        print("|---|---|---|---|")
        for label, med in train:
            print(f"| {label} | {med['torch']:.1f} | {med['vit']:.1f} | **{med['vit'] / med['torch']:.2f}** |")


if __name__ == "__main__":
    main()
