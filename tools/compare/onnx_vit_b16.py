"""ONNX at full size, both ways, on torchvision's ViT-B/16 (torchvision's initialisation, seed 0, head
~ N(0, 0.02), as tools/compare/int8_accuracy.py builds it; no pretrained weights are reachable here):

  import  torch.onnx.export (PyTorch 1.13, opset 14, constant-folded, dynamic batch) -> `vit predict`
          on the .onnx: logits against PyTorch's (float64 reference), max|diff| / max|logit|, target 1e-5
  export  `vit export` of the same weights (safetensors) -> ONNX Runtime (onnxruntime-node): against
          `vit predict`, target 1e-5; and `vit export --precision int8` -> ONNX Runtime: cosine against
          vit's float32 logits (target >= 0.999), whether ORT fused every int8 MatMul
          (DynamicQuantizeMatMul), and ORT's time per batch-1 image for both files beside `vit bench`'s.

Inputs: the committed photos (tests/golden/preprocess/*.png, 4 views each) and smooth random images.

  /usr/bin/python3 tools/compare/onnx_vit_b16.py --build build [--ort-dir DIR] [--threads 2]

Needs python3-torch, python3-torchvision, python3-onnx, python3-pil, node + onnxruntime-node.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/
from compare.int8_accuracy import photos, smooth  # noqa: E402
from compare.onnx_check import ORT_BENCH, fused  # noqa: E402
from lib.safetensors_io import write_safetensors  # noqa: E402


def vit_logits(vit, model, x, tmp, threads):
    x_path, y_path = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(x_path, x)
    subprocess.run([vit, "predict", "--checkpoint", model, "--tensor", x_path, "--out", y_path, "--overwrite",
                    "--threads", str(threads)], check=True, stdout=subprocess.DEVNULL)
    return np.load(y_path).astype(np.float64)


def ort(args, model, x, tmp, optimized=None, time_it=False, per_row=False):
    x_bin, y_bin = os.path.join(tmp, "x.bin"), os.path.join(tmp, "y.bin")
    x.astype(np.float32).tofile(x_bin)
    base = ["node", ORT_BENCH, "--ort-dir", args.ort_dir, "--model", model, "--threads", str(args.threads)]
    cmd = base + ["--shape", ",".join(map(str, x.shape)), "--input", x_bin, "--output", y_bin, "--output-name",
                  "logits"]
    if optimized:
        cmd += ["--optimized-out", optimized]
    if per_row:
        cmd += ["--per-row", "1"]
    dims = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    y = np.fromfile(y_bin, dtype=np.float32).reshape(dims["dims"]).astype(np.float64)
    ms = None
    if time_it:
        t = subprocess.run(base + ["--shape", "1,3,224,224", "--iters", "10", "--warmup", "2"], check=True,
                           capture_output=True, text=True).stdout
        ms = json.loads(t.strip().splitlines()[-1])["median_ms"]
    return y, ms


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def cosine_min(a, b):
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--ort-dir", default=os.path.expanduser("~/.cache/vit-ort/onnxruntime-node-1.30.0"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smooth", type=int, default=8)
    p.add_argument("--bits", type=int, default=7, choices=(7, 8),
                   help="int8 weight bits (vit export's default 7; 8 saturates ORT's AVX2 kernels without VNNI)")
    a = p.parse_args()
    if not os.path.isdir(os.path.join(a.ort_dir, "node_modules", "onnxruntime-node")):
        sys.exit(f"[onnx_vit_b16] no onnxruntime-node under {a.ort_dir} (docs/onnx.md shows the npm command)")
    vit = os.path.join(a.build, "vit")
    torch.set_num_threads(a.threads)
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).eval()
    with torch.no_grad():
        model.heads.head.weight.normal_(0, 0.02)
    x = np.concatenate([np.stack([t.numpy() for t in photos(224)]),
                        np.stack([t.numpy() for t in smooth(a.smooth, 224, 3, 1)])]).astype(np.float32)
    with torch.no_grad():
        ref = model.double()(torch.from_numpy(x).double()).numpy()
    model.float()
    rows = {"int8_weight_bits": a.bits}
    with tempfile.TemporaryDirectory(prefix="vit-onnx-b16-") as tmp:
        # import: PyTorch's export read by vit
        path = os.path.join(tmp, "vit_b_16_torch.onnx")
        with torch.enable_grad():  # nn.MultiheadAttention's fast path (no_grad, eval) has no ONNX export in 1.13
            torch.onnx.export(model, torch.from_numpy(x[:1]), path, opset_version=14, input_names=["x"],
                              output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
        got = vit_logits(vit, path, x, tmp, a.threads)
        rows["import_torch_onnx_rel"] = rel(got, ref)
        print(f"import: torch.onnx.export (opset 14) -> vit predict: max|diff|/max|logit| {rows['import_torch_onnx_rel']:.2e}"
              f" over {len(x)} inputs (target 1e-5)", flush=True)
        # export: vit's file in ONNX Runtime
        f32 = os.path.join(tmp, "vit_b_16.safetensors")
        write_safetensors(f32, model.state_dict().items())
        ours = vit_logits(vit, f32, x, tmp, a.threads)
        rows["vit_vs_pytorch_rel"] = rel(ours, ref)
        onnx32 = os.path.join(tmp, "f32.onnx")
        subprocess.run([vit, "export", f32, onnx32], check=True, stdout=subprocess.DEVNULL)
        y32, ms32 = ort(a, onnx32, x, tmp, time_it=True)
        rows["export_float32_rel"] = rel(y32, ours)
        print(f"export float32 -> ORT: max|diff|/max|logit| {rows['export_float32_rel']:.2e} against vit "
              f"(vit against PyTorch {rows['vit_vs_pytorch_rel']:.2e}); ORT batch 1: {ms32:.1f} ms", flush=True)
        onnx8 = os.path.join(tmp, "int8.onnx")
        subprocess.run([vit, "export", f32, onnx8, "--precision", "int8", "--bits", str(a.bits)], check=True,
                       stdout=subprocess.DEVNULL)
        opt = os.path.join(tmp, "int8.opt.onnx")
        # ORT's DynamicQuantizeLinear scales each call's whole activation tensor: one image per call
        # (a server's batch 1), and the 20 inputs in one call
        y8, ms8 = ort(a, onnx8, x, tmp, optimized=opt, time_it=True, per_row=True)
        y8_batch, _ = ort(a, onnx8, x, tmp)
        rows["export_int8_cosine_min_vs_float32"] = cosine_min(y8, ours)
        rows["export_int8_batched_cosine_min_vs_float32"] = cosine_min(y8_batch, ours)
        rows["export_int8_top1_agreement"] = float((y8.argmax(1) == ours.argmax(1)).mean())
        rows["ort_ops"] = fused(opt)
        q8 = os.path.join(tmp, "q8.safetensors")
        subprocess.run([vit, "quantize", "--checkpoint", f32, "--out", q8, "--bits", str(a.bits)], check=True,
                       stdout=subprocess.DEVNULL)
        vit8 = vit_logits(vit, q8, x, tmp, a.threads)
        rows["vit_int8_cosine_min_vs_float32"] = cosine_min(vit8, ours)
        rows["ort_ms_batch1"] = {"float32": ms32, "int8": ms8}
        print(f"export int8 -> ORT, one image per call: cosine min {rows['export_int8_cosine_min_vs_float32']:.5f} "
              f"against vit float32 (all {len(x)} in one call: {rows['export_int8_batched_cosine_min_vs_float32']:.5f}; "
              f"vit's own int8: {rows['vit_int8_cosine_min_vs_float32']:.5f}), top-1 agreement "
              f"{100 * rows['export_int8_top1_agreement']:.1f}%, ORT ops {rows['ort_ops']}; ORT batch 1: {ms8:.1f} ms",
              flush=True)
    print(json.dumps(rows))
    ok = (rows["import_torch_onnx_rel"] <= 1e-5 and rows["export_float32_rel"] <= 1e-5 and
          rows["export_int8_cosine_min_vs_float32"] >= 0.999 and rows["ort_ops"]["MatMulInteger"] == 0)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
