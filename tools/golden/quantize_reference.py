#!/usr/bin/env python3
"""The int8 scheme of `vit quantize` in PyTorch, and the golden files that hold the C++ to it.

Requirements: Debian's python3-torch (1.13). Run with the system interpreter:

    /usr/bin/python3 tools/golden/quantize_reference.py            # writes tests/golden/int8/
    /usr/bin/python3 tools/golden/quantize_reference.py --check CKPT_F32 CKPT_INT8
        # compares a float checkpoint (timm layout) quantized here with vit quantize's file
        # (7- or 8-bit: the file's scheme says which)

The schemes (src/kernels/gemm/int8_gemm.h says the same): vit-int8-2 (8-bit weights, Q = 127, what
vit quantize writes by default) and vit-int8-1 (7-bit weights, Q = 63, vit quantize --bits 7):
  weights, per output channel, symmetric:
      scale[n] = max_k |W[n,k]| / Q (float32; 1 for a row of zeros),
      q[n,k]   = clamp(round_half_even(W[n,k] / scale[n]), -Q, Q)
  activations, per row (token), asymmetric, uint8, at run time:
      mn = min(0, min_k x), mx = max(0, max_k x), s = (mx - mn) / 255 (float32; 1 when < FLT_MIN),
      inv = 1 / s, z = clamp(round_half_even(-mn * inv), 0, 255),
      q[k] = clamp(round_half_even(x[k] * inv) + z, 0, 255)
  products: acc = sum_k qa[k] qw[n,k] (exact integers), y = (acc - z sum_k qw[n,k]) * s * scale[n] + b
LayerNorm, softmax, the attention products, GELU and the residual stream stay float32.

tests/golden/int8/ (deterministic: seed 4321, one thread):
  tiny_vit.safetensors   a timm-layout float32 ViT: image 16, patch 4 (16 patches + CLS), 3
                         channels, dim 48, depth 2, 4 heads, MLP 192 (exact GELU), 10 classes, qkv
                         bias, LayerNorm eps 1e-6; weights ~ 0.05 randn (LayerNorm 1 + 0.1 randn,
                         biases 0.1 randn), one fc1 row scaled by 40 and one fc2 input column by
                         25 (outlier channels, as trained ViTs have).
  reference.safetensors  (7-bit weights, vit-int8-1) input (2,3,16,16); for each of the 10 Linear
                         layers L (in module order):
                           L.q (I8) and L.scale (F32): the weight quantized here;
                           L.input (F32, (34, K)): what reaches the layer in this int8 forward;
                           L.qa (I32 (34, K)), L.row_scale (F32), L.zero_point (I32): its rows
                           quantized; L.acc (I32 (34, N)): sum_k qa qw; L.output (F64): the
                           layer's float result from those integers.
                         logits (F64 (2, 10)): the int8 forward; logits_f32: the float model.
  reference_8bit.safetensors  the same for 8-bit weights (vit-int8-2).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from lib.safetensors_io import read_safetensors, write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "golden", "int8")
FLT_MIN = float(np.finfo(np.float32).tiny)
WMAX = {7: 63, 8: 127}
SCHEME = {7: "vit-int8-1", 8: "vit-int8-2"}
REFERENCE = {7: "reference.safetensors", 8: "reference_8bit.safetensors"}


def quantize_weight(w, bits):
    """w float32 (N, K) -> q int8 (N, K), scale float32 (N,)."""
    w = w.to(torch.float32)
    scale = w.abs().amax(dim=1) / WMAX[bits]
    scale = torch.where(scale >= FLT_MIN, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(w / scale[:, None]), -WMAX[bits], WMAX[bits]).to(torch.int8)
    return q, scale


def quantize_rows(x):
    """x float32 (M, K) -> q (M, K) int64 in [0, 255], scale float32 (M,), zero point int64 (M,)."""
    x = x.to(torch.float32)
    mn = torch.clamp(x.amin(dim=1), max=0.0)
    mx = torch.clamp(x.amax(dim=1), min=0.0)
    s = (mx - mn) / 255.0
    s = torch.where(s >= FLT_MIN, s, torch.ones_like(s))
    inv = torch.ones_like(s) / s
    z = torch.clamp(torch.round(-mn * inv), 0, 255)
    q = torch.clamp(torch.round(x * inv[:, None]) + z[:, None], 0, 255)
    return q.to(torch.int64), s, z.to(torch.int64)


def linear_int8(x, q, scale, bias, record=None):
    """y (M, N) float64 from the integers; record (a dict) receives the intermediate values."""
    qa, s, z = quantize_rows(x)
    qw = q.to(torch.int64)
    acc = qa @ qw.T
    corrected = acc - z[:, None] * qw.sum(dim=1)[None, :]
    y = corrected.to(torch.float64) * (s[:, None].to(torch.float64) * scale[None, :].to(torch.float64))
    if bias is not None:
        y = y + bias.to(torch.float64)
    if record is not None:
        record.update(input=x.clone(), qa=qa, row_scale=s, zero_point=z, acc=acc, output=y)
    return y


def layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def forward(W, x, heads, eps, int8=None, records=None):
    """A timm ViT (CLS pooling, pre-norm) on weights W (timm names); int8: name -> (q, scale)."""
    def linear(name, h):
        shape = h.shape
        h2 = h.reshape(-1, shape[-1])
        if int8 is None:
            y = h2 @ W[name + ".weight"].T + W[name + ".bias"]
        else:
            rec = {} if records is not None else None
            q, scale = int8[name]
            y = linear_int8(h2, q, scale, W[name + ".bias"], rec).to(torch.float32)
            if records is not None:
                records.append((name, rec))
        return y.reshape(*shape[:-1], -1)

    B = x.shape[0]
    p = F.conv2d(x, W["patch_embed.proj.weight"], W["patch_embed.proj.bias"],
                 stride=W["patch_embed.proj.weight"].shape[-1])
    t = p.flatten(2).transpose(1, 2)
    t = torch.cat([W["cls_token"].expand(B, -1, -1), t], dim=1) + W["pos_embed"]
    D = t.shape[-1]
    depth = len({k.split(".")[1] for k in W if k.startswith("blocks.")})
    for i in range(depth):
        pre = "blocks.%d." % i
        h = layer_norm(t, W[pre + "norm1.weight"], W[pre + "norm1.bias"], eps)
        qkv = linear(pre + "attn.qkv", h).reshape(B, -1, 3, heads, D // heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(qkv[0] @ qkv[1].transpose(-2, -1) * (D // heads) ** -0.5, dim=-1) @ qkv[2]
        t = t + linear(pre + "attn.proj", a.transpose(1, 2).reshape(B, -1, D))
        h = layer_norm(t, W[pre + "norm2.weight"], W[pre + "norm2.bias"], eps)
        t = t + linear(pre + "mlp.fc2", F.gelu(linear(pre + "mlp.fc1", h)))
    t = layer_norm(t, W["norm.weight"], W["norm.bias"], eps)
    return linear("head", t[:, 0])


def linear_names(W):
    return [k[:-len(".weight")] for k in W if k.endswith(".weight") and W[k].dim() == 2]


def make_golden():
    torch.manual_seed(4321)
    torch.set_num_threads(1)
    C, S, P, D, depth, heads, hidden, K = 3, 16, 4, 48, 2, 4, 192, 10
    W = {}
    W["cls_token"] = 0.1 * torch.randn(1, 1, D)
    W["pos_embed"] = 0.1 * torch.randn(1, (S // P) ** 2 + 1, D)
    W["patch_embed.proj.weight"] = 0.05 * torch.randn(D, C, P, P)
    W["patch_embed.proj.bias"] = 0.1 * torch.randn(D)
    for i in range(depth):
        pre = "blocks.%d." % i
        W[pre + "norm1.weight"] = 1 + 0.1 * torch.randn(D)
        W[pre + "norm1.bias"] = 0.1 * torch.randn(D)
        W[pre + "attn.qkv.weight"] = 0.05 * torch.randn(3 * D, D)
        W[pre + "attn.qkv.bias"] = 0.1 * torch.randn(3 * D)
        W[pre + "attn.proj.weight"] = 0.05 * torch.randn(D, D)
        W[pre + "attn.proj.bias"] = 0.1 * torch.randn(D)
        W[pre + "norm2.weight"] = 1 + 0.1 * torch.randn(D)
        W[pre + "norm2.bias"] = 0.1 * torch.randn(D)
        W[pre + "mlp.fc1.weight"] = 0.05 * torch.randn(hidden, D)
        W[pre + "mlp.fc1.bias"] = 0.1 * torch.randn(hidden)
        W[pre + "mlp.fc2.weight"] = 0.05 * torch.randn(D, hidden)
        W[pre + "mlp.fc2.bias"] = 0.1 * torch.randn(D)
        W[pre + "mlp.fc1.weight"][7] *= 40.0        # an outlier output channel
        W[pre + "mlp.fc2.weight"][:, 11] *= 25.0    # an outlier input column
    W["norm.weight"] = 1 + 0.1 * torch.randn(D)
    W["norm.bias"] = 0.1 * torch.randn(D)
    W["head.weight"] = 0.05 * torch.randn(K, D)
    W["head.bias"] = 0.1 * torch.randn(K)
    x = torch.randn(2, C, S, S)

    os.makedirs(OUT_DIR, exist_ok=True)
    model_path = os.path.join(OUT_DIR, "tiny_vit.safetensors")
    write_safetensors(model_path, [(k, v, "F32") for k, v in W.items()], {"num_heads": str(heads)})
    paths = [model_path]
    with torch.no_grad():
        logits_f32 = forward(W, x, heads, 1e-6)
    for bits in (7, 8):
        paths.append(write_reference(W, x, heads, bits, logits_f32))
    for path in paths:
        read_safetensors(path)  # re-read: the writer's output parses
        print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))


def write_reference(W, x, heads, bits, logits_f32):
    int8 = {name: quantize_weight(W[name + ".weight"], bits) for name in linear_names(W)}
    records = []
    with torch.no_grad():
        logits = forward(W, x, heads, 1e-6, int8, records)
    ref = [("input", x, "F32")]
    for name, rec in records:
        q, scale = int8[name]
        ref += [(name + ".q", q, "I8"), (name + ".scale", scale, "F32"), (name + ".input", rec["input"], "F32"),
                (name + ".qa", rec["qa"], "I32"), (name + ".row_scale", rec["row_scale"], "F32"),
                (name + ".zero_point", rec["zero_point"], "I32"), (name + ".acc", rec["acc"], "I32"),
                (name + ".output", rec["output"], "F64")]
    ref += [("logits", logits.to(torch.float64), "F64"), ("logits_f32", logits_f32, "F32")]
    ref_path = os.path.join(OUT_DIR, REFERENCE[bits])
    write_safetensors(ref_path, ref, {"torch": torch.__version__, "scheme": SCHEME[bits]})
    cos = F.cosine_similarity(logits.to(torch.float32), logits_f32, dim=1)
    print("int8 (%d-bit weights) vs float logits: cosine %s, max |diff| %.3g" %
          (bits, cos.tolist(), (logits.to(torch.float32) - logits_f32).abs().max().item()))
    return ref_path


def check(float_path, int8_path):
    """Quantizes a timm-layout float file here and compares with vit quantize's output, bit for bit."""
    W = {k: v.to(torch.float32) for k, v in read_safetensors(float_path)[0]}
    tensors, metadata, _ = read_safetensors(int8_path)
    Q = dict(tensors)
    scheme = json.loads(metadata["quantization"])["scheme"]
    bits = {v: k for k, v in SCHEME.items()}[scheme]
    print("%s: scheme %s (%d-bit weights)" % (int8_path, scheme, bits))
    bad = 0
    for name in linear_names(W):
        q, scale = quantize_weight(W[name + ".weight"], bits)
        same = torch.equal(q, Q[name + ".weight"]) and torch.equal(scale, Q[name + ".weight_scale"])
        bad += not same
        if not same:
            print("DIFFERS: %s" % name)
    print("%d Linear weights compared, %d differ" % (len(linear_names(W)), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", nargs=2, metavar=("FLOAT", "INT8"))
    a = ap.parse_args()
    sys.exit(check(*a.check) if a.check else make_golden())
