"""Golden ONNX files written by PyTorch 1.13's torch.onnx.export, for vit's ONNX import
(tests/golden/onnx/, read by tests/infer/onnx_import_test.cpp; the tests need no PyTorch):

  torchvision_op14.onnx        torchvision's VisionTransformer (the class vit_b_16 builds, tiny sizes),
                               opset 14, constant-folded (export's default)
  torchvision_op17_nofold.onnx the same model, opset 17, do_constant_folding=False
  timm_op17.onnx               timm's VisionTransformer forward (written after timm's
                               vision_transformer.py: qkv reshape/permute/unbind, q * scale), opset 17
  timm_op15_nofold.onnx        the same, opset 15, not folded
  hf_op16.onnx                 Hugging Face ViTForImageClassification (after modeling_vit.py), opset 16
  deit_distilled_op17.onnx     timm's VisionTransformerDistilled (class + distillation tokens, two heads), opset 17
  deit3_op14.onnx              timm's DeiT III (LayerScale, no_embed_class), opset 14
  expected.safetensors         input (2, 3, 32, 32) and each file's logits computed by PyTorch in float64

All five share the tiny ViT of make_golden_layouts.py (32x32, patch 8, width 48, 2 blocks, 4 heads,
10 classes), with a dynamic batch axis named "batch" as people export them.
Run: python3 tools/golden/make_golden_onnx.py (Debian's python3-torch, python3-torchvision).
"""
import collections
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden
from golden import layouts_model as lm  # noqa: E402
from golden.variants_io import emit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "golden", "onnx")


class TimmAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.num_heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class TimmMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class LayerScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(0.5 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * self.gamma


class TimmBlock(nn.Module):
    def __init__(self, dim, heads, hidden, layer_scale=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = TimmAttention(dim, heads)
        self.ls1 = LayerScale(dim) if layer_scale else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = TimmMlp(dim, hidden)
        self.ls2 = LayerScale(dim) if layer_scale else nn.Identity()

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class TimmPatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(lm.CH, lm.DIM, kernel_size=lm.PATCH, stride=lm.PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TimmViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, lm.DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, lm.TOKENS, lm.DIM))
        self.patch_embed = TimmPatchEmbed()
        self.blocks = nn.Sequential(*[TimmBlock(lm.DIM, lm.HEADS, lm.HIDDEN) for _ in range(lm.DEPTH)])
        self.norm = nn.LayerNorm(lm.DIM, eps=1e-6)
        self.head = nn.Linear(lm.DIM, lm.CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


class TimmDeiTDistilled(nn.Module):
    """timm's VisionTransformerDistilled (deit_*_distilled): class and distillation tokens, both
    under the position table; eval logits (head(x[:, 0]) + head_dist(x[:, 1])) / 2."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.cls_token = nn.Parameter(0.1 * torch.randn(1, 1, lm.DIM))
        self.dist_token = nn.Parameter(0.1 * torch.randn(1, 1, lm.DIM))
        self.pos_embed = nn.Parameter(0.1 * torch.randn(1, lm.TOKENS + 1, lm.DIM))
        self.patch_embed = TimmPatchEmbed()
        self.blocks = nn.Sequential(*[TimmBlock(lm.DIM, lm.HEADS, lm.HIDDEN) for _ in range(lm.DEPTH)])
        self.norm = nn.LayerNorm(lm.DIM, eps=1e-6)
        self.head = nn.Linear(lm.DIM, lm.CLASSES)
        self.head_dist = nn.Linear(lm.DIM, lm.CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        B = x.shape[0]
        x = torch.cat((self.cls_token.expand(B, -1, -1), self.dist_token.expand(B, -1, -1), x), dim=1)
        x = self.norm(self.blocks(x + self.pos_embed))
        return (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2


class TimmDeiT3(nn.Module):
    """timm's DeiT III (deit3_*): LayerScale in every block, the position table over the patches only
    (no_embed_class), added before the class token is put in front."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(13)
        self.cls_token = nn.Parameter(0.1 * torch.randn(1, 1, lm.DIM))
        self.pos_embed = nn.Parameter(0.1 * torch.randn(1, lm.TOKENS - 1, lm.DIM))
        self.patch_embed = TimmPatchEmbed()
        self.blocks = nn.Sequential(*[TimmBlock(lm.DIM, lm.HEADS, lm.HIDDEN, True) for _ in range(lm.DEPTH)])
        self.norm = nn.LayerNorm(lm.DIM, eps=1e-6)
        self.head = nn.Linear(lm.DIM, lm.CLASSES)

    def forward(self, x):
        x = self.patch_embed(x) + self.pos_embed
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        return self.head(self.norm(self.blocks(x))[:, 0])


def export(model, path, opset, fold):
    model.eval()
    x = torch.randn(2, lm.CH, lm.IMG, lm.IMG)
    # torch 1.13's nn.MultiheadAttention takes its fused fast path under no_grad in eval mode, an op
    # the exporter does not know: export with autograd on (the parameters require grad), as the
    # torchvision ViT exports people publish are made.
    with torch.enable_grad():
        torch.onnx.export(model, x, path, opset_version=opset, do_constant_folding=fold, input_names=["pixel_values"],
                          output_names=["logits"], dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}})
    print("wrote %-58s %8d bytes" % (os.path.relpath(path, ROOT), os.path.getsize(path)))


def main():
    os.makedirs(OUT, exist_ok=True)
    sd = lm.make_timm_weights()
    torch.manual_seed(7)
    x = torch.randn(2, lm.CH, lm.IMG, lm.IMG)
    expected = [("input", x)]

    tv = lm.make_torchvision_model()
    tv.load_state_dict(lm.timm_to_torchvision(sd, tv.state_dict().keys()))
    timm = TimmViT()
    timm.load_state_dict(sd)
    hf = lm.HFViTForImageClassification()
    hf.load_state_dict(lm.timm_to_hf(sd))
    cases = [("torchvision_op14", tv, 14, True), ("torchvision_op17_nofold", tv, 17, False),
             ("timm_op17", timm, 17, True), ("timm_op15_nofold", timm, 15, False), ("hf_op16", hf, 16, True),
             ("deit_distilled_op17", TimmDeiTDistilled(), 17, True), ("deit3_op14", TimmDeiT3(), 14, True)]
    for name, model, opset, fold in cases:
        export(model, os.path.join(OUT, name + ".onnx"), opset, fold)
    for name, model, _, _ in cases:
        if name.endswith("_nofold"):
            continue
        ref = model.double().eval()
        with torch.no_grad():
            logits = ref(x.double())
        model.float()
        expected.append((name.rsplit("_op", 1)[0].replace("_nofold", "") + ".logits", logits))
    # torchvision and timm are the same weights and eps: their float64 logits agree to rounding
    assert (expected[1][1] - expected[2][1]).abs().max() < 1e-9
    emit(os.path.join(OUT, "expected.safetensors"), expected, {"source": "tools/golden/make_golden_onnx.py"},
         dtype="F64")


if __name__ == "__main__":
    main()
