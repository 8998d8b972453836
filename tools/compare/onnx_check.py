"""Runs the ONNX files `vit export` writes in ONNX Runtime (the npm package onnxruntime-node, via
tools/compare/ort_bench.mjs) and compares them with vit's own answers on the same input.

For every family (one small checkpoint each, from tests/golden and a hybrid made on the spot):
  - float32: ORT's logits (or embedding, for a model without a classifier) against `vit predict`'s
    (`vit embed`'s): the largest |difference| over the largest |value|; target <= 1e-5;
  - int8 (`vit export --precision int8`): ORT's logits against vit's float32 and int8 logits
    (cosine, target >= 0.999), and whether ORT's optimised graph runs every MatMulInteger fused
    (DynamicQuantizeMatMul / MatMulIntegerToFloat; the optimised model is read with the `onnx` package).
Prints one line per case and a JSON summary; exits 1 if a target is missed.

  python3 tools/compare/onnx_check.py --vit build/vit [--ort-dir ~/.cache/vit-ort/onnxruntime-node-1.30.0]
      [--cases vit,deit,...] [--opset 17] [--batch 2] [--json out.json]

Needs: node (onnxruntime-node installed as compare_engines.py installs it), python3-numpy, python3-onnx.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
ORT_BENCH = os.path.join(ROOT, "tools", "compare", "ort_bench.mjs")

# name -> (checkpoint, extra load flags)
CASES = {
    "vit": ("layouts/timm.safetensors", ["--heads", "4"]),
    "torchvision": ("layouts/torchvision.safetensors", ["--heads", "4"]),
    "huggingface": ("layouts/hf.safetensors", ["--heads", "4"]),
    "deit_distilled": ("variants/deit_distilled.timm.safetensors", ["--heads", "2"]),
    "deit_distilled_hf": ("variants/deit_distilled.hf.safetensors", ["--heads", "2"]),
    "deit3": ("variants/deit3.timm.safetensors", ["--heads", "2"]),
    "dinov2": ("variants/dinov2.timm.safetensors", ["--heads", "2"]),
    "dinov2_reg": ("variants/dinov2_reg.timm.safetensors", ["--heads", "2"]),
    "clip": ("variants/clip.timm.safetensors", ["--heads", "2"]),
    "clip_hf": ("variants/clip.hf.safetensors", ["--heads", "2"]),
    "avgpool": ("variants/avgpool.timm.safetensors", ["--heads", "2"]),
    "qknorm_headdim": ("variants/qknorm_headdim.timm.safetensors", ["--heads", "2"]),
    "patch8_regs_avg": ("variants/patch8_regs_avg.timm.safetensors", ["--heads", "2"]),
    "jax_prelogits": ("pth/jax_prelogits.npz", ["--heads", "4"]),
    "notebook": ("train:vit_notebook", []),
    "fashion": ("train:vit_fashion", []),
    "hybrid": ("train:vit_hybrid_fashion", []),
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def trained(vit, preset, folder, data):
    """Our own checkpoint of a preset (the notebook's model, the hybrid with its BatchNorms): 40 steps
    of `vit train` on Fashion-MNIST, so that no weight (BatchNorm statistics included) is at its
    initial value."""
    out = os.path.join(folder, preset)
    run([vit, "train", "--data", data, "--preset", preset, "--steps", "40", "--out", out])
    return os.path.join(out, "best.safetensors")


def case_model(args, name, folder):
    path, flags = CASES[name]
    if path.startswith("train:"):
        return trained(args.vit, path[len("train:"):], folder, args.data), flags
    return os.path.join(GOLDEN, path), flags


def onnx_io(path):
    """The exported model's input (C, H) and output names, read with the onnx package."""
    import onnx
    m = onnx.load(path)
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    return dims[1], dims[2], [o.name for o in m.graph.output]


def vit_answer(vit, checkpoint, flags, x_path, out_path, classifier):
    if classifier:
        run([vit, "predict", "--checkpoint", checkpoint, "--tensor", x_path, "--out", out_path, "--overwrite"] + flags)
    else:
        run([vit, "embed", "--checkpoint", checkpoint, "--tensor", x_path, "--out", out_path, "--overwrite"] + flags)
    return np.load(out_path)


def ort_answer(args, model, x, output_name, folder, optimized=None, per_row=False):
    x_bin, y_bin = os.path.join(folder, "x.bin"), os.path.join(folder, "y.bin")
    x.astype(np.float32).tofile(x_bin)
    cmd = ["node", ORT_BENCH, "--ort-dir", args.ort_dir, "--model", model, "--shape", ",".join(map(str, x.shape)),
           "--threads", "1", "--input", x_bin, "--output", y_bin, "--output-name", output_name]
    if optimized:
        cmd += ["--optimized-out", optimized]
    if per_row:  # one image per call, as a server runs it (dynamic int8 scales each call's whole tensor)
        cmd += ["--per-row", "1"]
    dims = json.loads(run(cmd).strip().splitlines()[-1])["dims"]
    return np.fromfile(y_bin, dtype=np.float32).reshape(dims)


def fused(optimized):
    import onnx
    m = onnx.load(optimized)
    ops = [n.op_type for n in m.graph.node]
    return {"MatMulInteger": ops.count("MatMulInteger"), "DynamicQuantizeMatMul": ops.count("DynamicQuantizeMatMul"),
            "MatMulIntegerToFloat": ops.count("MatMulIntegerToFloat")}


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def check_case(args, name, folder):
    checkpoint, flags = case_model(args, name, folder)
    onnx_path = os.path.join(folder, f"{name}.onnx")
    run([args.vit, "export", checkpoint, onnx_path, "--opset", str(args.opset), "--overwrite"] + flags)
    c, size, outputs = onnx_io(onnx_path)
    classifier = "logits" in outputs
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, c, size, size)).astype(np.float32)
    x_path = os.path.join(folder, "x.npy")
    np.save(x_path, x)
    ours = vit_answer(args.vit, checkpoint, flags, x_path, os.path.join(folder, "ours.npy"), classifier)
    output = "logits" if classifier else "embedding"
    theirs = ort_answer(args, onnx_path, x, output, folder)
    rel = float(np.abs(theirs - ours).max() / np.abs(ours).max())
    row = {"case": name, "output": output, "shape": list(ours.shape), "float32_rel": rel, "float32_ok": rel <= 1e-5}
    if classifier and not args.no_int8:
        q_path = os.path.join(folder, f"{name}.int8.onnx")
        run([args.vit, "export", checkpoint, q_path, "--precision", "int8", "--bits", str(args.bits), "--overwrite"] + flags)
        optimized = os.path.join(folder, f"{name}.int8.opt.onnx")
        ort_int8 = ort_answer(args, q_path, x, output, folder, optimized, per_row=True)
        q_ckpt = os.path.join(folder, f"{name}.int8.safetensors")
        run([args.vit, "quantize", "--checkpoint", checkpoint, "--out", q_ckpt, "--bits", str(args.bits), "--overwrite"] +
            flags)
        vit_int8 = vit_answer(args.vit, q_ckpt, [], x_path, os.path.join(folder, "ours8.npy"), classifier)
        counts = fused(optimized)
        row.update({"int8_cosine_vs_float32": cosine(ort_int8, ours), "int8_cosine_vs_vit_int8": cosine(ort_int8, vit_int8),
                    "vit_int8_cosine_vs_float32": cosine(vit_int8, ours), "ort_ops": counts})
        # the bar: cosine >= 0.999 against float32, or (the tiny random-weight test models, whose own
        # int8 cannot reach it) no further from float32 than vit's own int8 of the same weights
        bar = min(0.999, row["vit_int8_cosine_vs_float32"] - 0.001)
        row["int8_ok"] = row["int8_cosine_vs_float32"] >= bar and counts["MatMulInteger"] == 0
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vit", default=os.path.join(ROOT, "build", "vit"))
    p.add_argument("--ort-dir", default=os.path.expanduser("~/.cache/vit-ort/onnxruntime-node-1.30.0"))
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-int8", action="store_true")
    p.add_argument("--bits", type=int, default=7, choices=(7, 8),
                   help="int8 weight bits (vit export's default 7; 8 saturates ORT's int8 kernel on CPUs without VNNI)")
    p.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist"))
    p.add_argument("--json", default="")
    args = p.parse_args()
    if not os.path.isdir(os.path.join(args.ort_dir, "node_modules", "onnxruntime-node")):
        sys.exit(f"[onnx_check] no onnxruntime-node under {args.ort_dir}: install it there (docs/onnx.md shows the "
                 "npm command) or pass --ort-dir")
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as folder:
        for name in args.cases.split(","):
            try:
                row = check_case(args, name, folder)
            except RuntimeError as e:
                row = {"case": name, "error": str(e)[-2000:], "float32_ok": False}
            rows.append(row)
            good = row.get("float32_ok") and row.get("int8_ok", True)
            ok = ok and good
            extra = ""
            if "int8_cosine_vs_float32" in row:
                extra = (f"  int8: cosine {row['int8_cosine_vs_float32']:.6f} vs float32 (vit int8: "
                         f"{row['vit_int8_cosine_vs_float32']:.6f}), {row['int8_cosine_vs_vit_int8']:.6f} vs vit int8, "
                         f"fused {row['ort_ops']['DynamicQuantizeMatMul']}, unfused {row['ort_ops']['MatMulInteger']}")
            if "error" in row:
                print(f"{name:16s} ERROR {row['error']}")
            else:
                print(f"{name:16s} {row['output']:9s} max|diff|/max|value| {row['float32_rel']:.2e}{extra}"
                      f"  {'ok' if good else 'MISSED'}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
