#!/usr/bin/env python3
"""Checks `vit predict --tensor` against PyTorch for a full ViT-B/16 with random weights, in the
torchvision, timm and Hugging Face layouts, at batch 1 and batch 4 (target: every logit within
1e-4 of the largest logit). Needs Debian's python3-torch and python3-torchvision; not part of CI.

  /usr/bin/python3 tools/compare/check_vit_b16.py --build build
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def to_timm(sd, depth):
    out = {"cls_token": sd["class_token"], "pos_embed": sd["encoder.pos_embedding"],
           "patch_embed.proj.weight": sd["conv_proj.weight"], "patch_embed.proj.bias": sd["conv_proj.bias"],
           "norm.weight": sd["encoder.ln.weight"], "norm.bias": sd["encoder.ln.bias"],
           "head.weight": sd["heads.head.weight"], "head.bias": sd["heads.head.bias"]}
    names = {"ln_1": "norm1", "ln_2": "norm2", "self_attention.in_proj_weight": "attn.qkv.weight",
             "self_attention.in_proj_bias": "attn.qkv.bias", "self_attention.out_proj": "attn.proj",
             "mlp.0": "mlp.fc1", "mlp.3": "mlp.fc2", "mlp.linear_1": "mlp.fc1", "mlp.linear_2": "mlp.fc2"}
    for i in range(depth):
        prefix = f"encoder.layers.encoder_layer_{i}."
        for key, value in sd.items():
            if not key.startswith(prefix):
                continue
            rest = key[len(prefix):]
            for tv, timm in names.items():
                if rest.startswith(tv):
                    out[f"blocks.{i}." + timm + rest[len(tv):]] = value
    return out


def to_hf(timm, depth, dim):
    out = {"vit.embeddings.cls_token": timm["cls_token"], "vit.embeddings.position_embeddings": timm["pos_embed"],
           "vit.embeddings.patch_embeddings.projection.weight": timm["patch_embed.proj.weight"],
           "vit.embeddings.patch_embeddings.projection.bias": timm["patch_embed.proj.bias"],
           "vit.layernorm.weight": timm["norm.weight"], "vit.layernorm.bias": timm["norm.bias"],
           "classifier.weight": timm["head.weight"], "classifier.bias": timm["head.bias"]}
    for i in range(depth):
        b, h = f"blocks.{i}.", f"vit.encoder.layer.{i}."
        for k, part in enumerate(["query", "key", "value"]):
            out[h + f"attention.attention.{part}.weight"] = timm[b + "attn.qkv.weight"][k * dim:(k + 1) * dim]
            out[h + f"attention.attention.{part}.bias"] = timm[b + "attn.qkv.bias"][k * dim:(k + 1) * dim]
        for ours, theirs in [("norm1", "layernorm_before"), ("norm2", "layernorm_after"),
                             ("attn.proj", "attention.output.dense"), ("mlp.fc1", "intermediate.dense"),
                             ("mlp.fc2", "output.dense")]:
            out[h + theirs + ".weight"] = timm[b + ours + ".weight"]
            out[h + theirs + ".bias"] = timm[b + ours + ".bias"]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16().eval()
    with torch.no_grad():  # random weights everywhere (the default init zeroes the head)
        for prm in model.parameters():
            prm.normal_(0, 0.02 if prm.ndim > 1 else 0.05)
    x = torch.randn(4, 3, 224, 224)
    sd = model.state_dict()
    timm = to_timm(sd, 12)
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x4.npy"), x.numpy())
        np.save(os.path.join(tmp, "x1.npy"), x[:1].numpy())
        with torch.no_grad():
            ref = model(x).numpy()
            for m in model.modules():  # Hugging Face's LayerNorm eps
                if isinstance(m, torch.nn.LayerNorm):
                    m.eps = 1e-12
            ref_hf = model(x).numpy()
        cases = [("torchvision", sd, ref), ("timm", timm, ref), ("huggingface", to_hf(timm, 12, 768), ref_hf)]
        for layout, tensors, expected in cases:
            path = os.path.join(tmp, layout + ".safetensors")
            save_safetensors(path, tensors)
            for batch in (1, 4):
                out = os.path.join(tmp, f"{layout}{batch}.npy")
                subprocess.run([os.path.join(args.build, "vit"), "predict", "--checkpoint", path, "--tensor",
                                os.path.join(tmp, f"x{batch}.npy"), "--out", out, "--threads", str(args.threads)],
                               check=True, stdout=subprocess.DEVNULL)
                ours = np.load(out)
                diff = np.abs(ours - expected[:batch]).max() / np.abs(expected[:batch]).max()
                worst = max(worst, diff)
                print(f"{layout:12s} batch {batch}: max |diff| / max |logit| = {diff:.2e}")
    print("PASS" if worst <= 1e-4 else "FAIL", f"(worst {worst:.2e}, target 1e-4)")
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
