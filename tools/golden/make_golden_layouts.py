#!/usr/bin/env python3
"""Generate checkpoint-layout and preprocessing references for the pretrained-weights loader.

Requirements: Debian's python3-torch (1.13), python3-torchvision (0.14), python3-skimage,
python3-pil. Run with the system interpreter:

    /usr/bin/python3 tools/golden/make_golden_layouts.py

Deterministic (fixed seeds, single thread); takes no arguments; prints every file it writes with
its size and re-reads each one to check it. Files are written with the hand-written safetensors
writer in tools/lib/safetensors_io.py. Model weights and references are stored as F32 (the
C++ loader reads real checkpoints as F32/F16/BF16), except the *_f16 / *_bf16 files.

tests/golden/layouts/ -- one tiny ViT, the SAME weights in each family's key layout
  Config: image 32, patch 8 (4x4 = 16 patches + CLS = 17 tokens), 3 channels, dim 48, depth 2,
  4 heads, MLP hidden 192 (exact GELU), 10 classes, qkv bias, CLS-token pooling.
  Weights drawn after torch.manual_seed(1234) in timm registration order: Linear/conv weights and
  all Linear/conv biases ~ 0.05*randn, LayerNorm weight 1+0.1*randn / bias 0.1*randn,
  cls_token / pos_embed ~ 0.1*randn. Then input = randn(4,3,32,32).
  timm.safetensors            timm VisionTransformer keys (qkv fused: rows [q; k; v])
  timm_f16.safetensors        same, every tensor F16
  timm_bf16.safetensors       same, every tensor BF16 (round-to-nearest-even)
  torchvision.safetensors     state_dict() of a real torchvision VisionTransformer holding them
                              (MLP keys mlp.0.* / mlp.3.*)
  torchvision_legacy.safetensors  same with the pre-0.13 MLP names mlp.linear_1.* / mlp.linear_2.*
  hf.safetensors              Hugging Face ViTForImageClassification keys (q/k/v split)
  hf_noprefix.safetensors     same without the "vit." prefix (classifier.* unchanged)
  input.safetensors           input (4,3,32,32); logits_timm (timm formula, LayerNorm eps 1e-6),
                              logits_torchvision (the torchvision module, eps 1e-6),
                              logits_hf (HF formula, LayerNorm eps 1e-12),
                              logits_timm_f16 / logits_timm_bf16 (timm formula with weights rounded
                              to F16 / BF16 and widened back to F32). All logits computed in float32.
  posembed.safetensors        pos_embed (1,17,48); resample_timm (1,37,48): patch part to 6x6 with
                              bicubic, align_corners=False, antialias=False (timm
                              resample_abs_pos_embed); resample_torchvision (1,37,48): same with
                              align_corners=True (torchvision interpolate_embeddings);
                              resample_timm_down (1,10,48): to 3x3, align_corners=False,
                              antialias=False; resample_timm_down_aa: same with antialias=True
                              (timm's default when it resamples checkpoints; only matters when
                              shrinking); input_48 (4,3,48,48) randn; logits_timm_48: timm formula
                              on input_48 with pos_embed := resample_timm.

tests/golden/preprocess/ -- torchvision preprocessing references
  <name>.png for chelsea, coffee, astronaut (skimage.data), downscaled with PIL LANCZOS so the
  shorter side is 120 px: these PNGs are the test inputs. expected.safetensors (F32), computed
  from the PNG re-read with PIL (RGB):
    <name>.bilinear        (3,56,56) Resize(64, BILINEAR) -> CenterCrop(56) -> ToTensor
    <name>.bicubic         (3,56,56) Resize(64, BICUBIC)  -> CenterCrop(56) -> ToTensor
    <name>.square_bilinear (3,64,64) Resize((64,64), BILINEAR) -> ToTensor
  (torchvision's Resize on PIL images calls PIL's resize, which antialiases when shrinking.)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
# the model and key maps live in tools/golden/layouts_model.py, the files in layouts_cases.py
from golden.layouts_cases import make_layouts, make_preprocess, written  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


def main():
    make_layouts()
    make_preprocess()
    total = sum(os.path.getsize(p) for p in written)
    print("total %d bytes in %d files" % (total, len(written)))


if __name__ == "__main__":
    main()
