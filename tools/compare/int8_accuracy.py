#!/usr/bin/env python3
"""How close int8 logits stay to fp32: a float checkpoint and its `vit quantize` copy run through
`vit predict --tensor` on the same inputs; prints cosine similarity (per input: min and mean) and
top-1 agreement. Not part of CI.

Inputs: the committed scikit-image photos (tests/golden/preprocess/*.png: chelsea, coffee,
astronaut), each also flipped and shifted (12 photo inputs), plus --smooth smooth random images
(Gaussian noise upsampled bilinearly from 7x7 to the model's size, then normalised), all at the
model's resolution, normalised with mean/std 0.5.

Without --checkpoint it builds the model: a torchvision-layout ViT-B/16 with torchvision's own
initialisation (torchvision.models.vit_b_16(weights=None), seed 0, with the head, which
torchvision zeroes, drawn from N(0, 0.02); no pretrained weights are reachable from this machine),
written with tools/lib/safetensors_io.py's writer.

  /usr/bin/python3 tools/compare/int8_accuracy.py --build build
  /usr/bin/python3 tools/compare/int8_accuracy.py --build build --checkpoint model.safetensors --smooth 200
  /usr/bin/python3 tools/compare/int8_accuracy.py --build build --bits 7     # the older 7-bit scheme

Needs python3-torch, python3-torchvision, python3-pil (Debian) and numpy.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from lib.safetensors_io import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def photos(size):
    from PIL import Image
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "preprocess", "*.png"))):
        img = Image.open(path).convert("RGB")
        short = min(img.size)
        left, top = (img.size[0] - short) // 2, (img.size[1] - short) // 2
        img = img.crop((left, top, left + short, top + short)).resize((size, size), Image.BICUBIC)
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
        out += [x, x.flip(-1), torch.roll(x, size // 8, dims=-1), torch.roll(x.flip(-2), size // 6, dims=-2)]
    return [(x - 0.5) / 0.5 for x in out]


def smooth(n, size, channels, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, channels, 7, 7, generator=g)
    x = F.interpolate(z, size=(size, size), mode="bilinear", align_corners=False)
    return list((x - x.mean()) / x.std())


def logits(build, checkpoint, x, tmp, name, threads):
    x_path, y_path = os.path.join(tmp, name + "_x.npy"), os.path.join(tmp, name + "_y.npy")
    np.save(x_path, x)
    subprocess.run([os.path.join(build, "vit"), "predict", "--checkpoint", checkpoint, "--tensor", x_path, "--out",
                    y_path, "--threads", str(threads), "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    return np.load(y_path).astype(np.float64)


def report(label, a, b):
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    agree = (a.argmax(1) == b.argmax(1)).mean()
    print(f"  {label}: {len(a)} inputs, cosine min {cos.min():.5f} mean {cos.mean():.5f}, "
          f"top-1 agreement {100 * agree:.1f}%")
    # Where top-1 differs: how far apart the two classes were in fp32, against the logits' spread.
    for i in np.nonzero(a.argmax(1) != b.argmax(1))[0]:
        gap = b[i, b[i].argmax()] - b[i, a[i].argmax()]
        print(f"    input {i}: fp32 top-1 {b[i].argmax()} vs int8 {a[i].argmax()}: fp32 gap {gap:.4f} "
              f"= {gap / b[i].std():.3f} std of its logits")
    return cos.min(), agree


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--checkpoint", default="", help="a float checkpoint (default: a torchvision ViT-B/16 built here)")
    p.add_argument("--smooth", type=int, default=100, help="smooth random inputs")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bits", type=int, default=8, choices=(7, 8), help="vit quantize --bits (weights' bits)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="vit-int8-") as tmp:
        f32 = a.checkpoint
        if not f32:
            import torchvision
            torch.manual_seed(0)
            model = torchvision.models.vit_b_16(weights=None)
            with torch.no_grad():  # torchvision zeroes the head (vit quantize refuses all-zero weights)
                model.heads.head.weight.normal_(0, 0.02)
            f32 = os.path.join(tmp, "vit_b_16.safetensors")
            write_safetensors(f32, model.state_dict().items())
            print("model: torchvision vit_b_16, torchvision's initialisation (seed 0), head ~ N(0, 0.02)")
        q8 = os.path.join(tmp, "int8.safetensors")
        out = subprocess.run([os.path.join(a.build, "vit"), "quantize", "--checkpoint", f32, "--out", q8,
                              "--bits", str(a.bits)],
                             check=True, capture_output=True, text=True).stdout
        print(out.strip())
        ph = np.stack([x.numpy() for x in photos(a.size)])
        sm = np.stack([x.numpy() for x in smooth(a.smooth, a.size, 3, 1)])
        worst, agree = [], []
        for label, x in (("photos", ph), ("smooth random", sm)):
            r = report(label, logits(a.build, q8, x, tmp, "q8", a.threads),
                       logits(a.build, f32, x, tmp, "f32", a.threads))
            worst.append(r[0])
            agree.append(r[1])
        print(f"all: cosine >= {min(worst):.5f}, top-1 agreement >= {100 * min(agree):.1f}%")


if __name__ == "__main__":
    main()
