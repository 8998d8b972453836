#!/usr/bin/env python3
"""Generate checkpoint-layout and preprocessing references for the pretrained-weights loader.

Requirements: Debian's python3-torch (1.13), python3-torchvision (0.14), python3-skimage,
python3-pil. Run with the system interpreter:

    /usr/bin/python3 tools/make_golden_layouts.py

Deterministic (fixed seeds, single thread); takes no arguments; prints every file it writes with
its size and re-reads each one to check it. Files are written with the hand-written safetensors
writer in tools/convert_checkpoint.py. Model weights and references are stored as F32 (the
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

import collections
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_checkpoint import SafeTensorsWriter, read_safetensors, round_to_dtype  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT_DIR = os.path.join(ROOT, "tests", "golden", "layouts")
PRE_DIR = os.path.join(ROOT, "tests", "golden", "preprocess")

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)

IMG, PATCH, CH, DIM, DEPTH, HEADS, HIDDEN, CLASSES = 32, 8, 3, 48, 2, 4, 192, 10
GRID = IMG // PATCH
TOKENS = GRID * GRID + 1

written = []


def emit(w):
    path = w.write()
    written.append(path)
    print("wrote %-50s %8d bytes, %d tensors" % (os.path.relpath(path, ROOT), os.path.getsize(path), len(w.entries)))
    return path


def check_file(path, expected, dtype=None, meta=None):
    """Re-read path and compare names/order/shapes/values (exact, after the stored rounding)."""
    got, m, dtypes = read_safetensors(path)
    assert [n for n, _ in got] == [n for n, _ in expected], path
    for (n, t), (_, e) in zip(got, expected):
        assert tuple(t.shape) == tuple(e.shape), (path, n)
        dt = dtype or "F32"
        assert dtypes[n] == dt, (path, n, dtypes[n])
        ref = round_to_dtype(e, dt) if dt != "F64" else e.double()
        assert torch.equal(t.to(torch.float32), ref.to(torch.float32)), (path, n)
    if meta is not None:
        assert m == meta, (path, m, meta)


# ----------------------------------------------------------------------------------------
# weights (timm names, registration order)
# ----------------------------------------------------------------------------------------

def make_timm_weights():
    torch.manual_seed(1234)
    sd = collections.OrderedDict()

    def lin(name, out_f, in_f):
        sd[name + ".weight"] = 0.05 * torch.randn(out_f, in_f)
        sd[name + ".bias"] = 0.05 * torch.randn(out_f)

    def ln(name):
        sd[name + ".weight"] = 1.0 + 0.1 * torch.randn(DIM)
        sd[name + ".bias"] = 0.1 * torch.randn(DIM)

    sd["cls_token"] = 0.1 * torch.randn(1, 1, DIM)
    sd["pos_embed"] = 0.1 * torch.randn(1, TOKENS, DIM)
    sd["patch_embed.proj.weight"] = 0.05 * torch.randn(DIM, CH, PATCH, PATCH)
    sd["patch_embed.proj.bias"] = 0.05 * torch.randn(DIM)
    for i in range(DEPTH):
        p = "blocks.%d." % i
        ln(p + "norm1")
        lin(p + "attn.qkv", 3 * DIM, DIM)
        lin(p + "attn.proj", DIM, DIM)
        ln(p + "norm2")
        lin(p + "mlp.fc1", HIDDEN, DIM)
        lin(p + "mlp.fc2", DIM, HIDDEN)
    ln("norm")
    lin("head", CLASSES, DIM)
    return sd


# ----------------------------------------------------------------------------------------
# timm formula
# ----------------------------------------------------------------------------------------

def timm_forward(sd, x, pos_embed=None, eps=1e-6):
    """timm VisionTransformer.forward (eval): class-token pooling, pre-norm blocks."""
    pos = sd["pos_embed"] if pos_embed is None else pos_embed
    B = x.shape[0]
    h = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=PATCH)
    h = h.flatten(2).transpose(1, 2)
    h = torch.cat([sd["cls_token"].expand(B, -1, -1), h], dim=1)
    h = h + pos
    hd = DIM // HEADS
    for i in range(DEPTH):
        p = "blocks.%d." % i
        y = F.layer_norm(h, (DIM,), sd[p + "norm1.weight"], sd[p + "norm1.bias"], eps)
        Bn, N, C = y.shape
        qkv = F.linear(y, sd[p + "attn.qkv.weight"], sd[p + "attn.qkv.bias"])
        qkv = qkv.reshape(Bn, N, 3, HEADS, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q * hd ** -0.5) @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(Bn, N, C)
        y = F.linear(y, sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"])
        h = h + y
        y = F.layer_norm(h, (DIM,), sd[p + "norm2.weight"], sd[p + "norm2.bias"], eps)
        y = F.linear(y, sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"])
        y = F.gelu(y)
        y = F.linear(y, sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"])
        h = h + y
    h = F.layer_norm(h, (DIM,), sd["norm.weight"], sd["norm.bias"], eps)
    return F.linear(h[:, 0], sd["head.weight"], sd["head.bias"])


# ----------------------------------------------------------------------------------------
# Hugging Face ViTForImageClassification, written after transformers' modeling_vit.py
# ----------------------------------------------------------------------------------------

class HFPatchEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.projection = nn.Conv2d(CH, DIM, kernel_size=PATCH, stride=PATCH)

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)


class HFEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.patch_embeddings = HFPatchEmbeddings()
        self.position_embeddings = nn.Parameter(torch.zeros(1, TOKENS, DIM))

    def forward(self, pixel_values):
        emb = self.patch_embeddings(pixel_values)
        cls = self.cls_token.expand(emb.shape[0], -1, -1)
        emb = torch.cat((cls, emb), dim=1)
        return emb + self.position_embeddings


class HFSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_attention_heads = HEADS
        self.attention_head_size = DIM // HEADS
        self.all_head_size = DIM
        self.query = nn.Linear(DIM, DIM, bias=True)
        self.key = nn.Linear(DIM, DIM, bias=True)
        self.value = nn.Linear(DIM, DIM, bias=True)

    def transpose_for_scores(self, x):
        x = x.view(x.size()[:-1] + (self.num_attention_heads, self.attention_head_size))
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        probs = nn.functional.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.all_head_size,))


class HFSelfOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(DIM, DIM)

    def forward(self, hidden_states):
        return self.dense(hidden_states)


class HFAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = HFSelfAttention()
        self.output = HFSelfOutput()

    def forward(self, hidden_states):
        return self.output(self.attention(hidden_states))


class HFIntermediate(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(DIM, HIDDEN)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


class HFOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(HIDDEN, DIM)

    def forward(self, hidden_states, input_tensor):
        return self.dense(hidden_states) + input_tensor


class HFLayer(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.attention = HFAttention()
        self.intermediate = HFIntermediate()
        self.output = HFOutput()
        self.layernorm_before = nn.LayerNorm(DIM, eps=eps)
        self.layernorm_after = nn.LayerNorm(DIM, eps=eps)

    def forward(self, hidden_states):
        hidden_states = self.attention(self.layernorm_before(hidden_states)) + hidden_states
        out = self.intermediate(self.layernorm_after(hidden_states))
        return self.output(out, hidden_states)


class HFEncoder(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.layer = nn.ModuleList([HFLayer(eps) for _ in range(DEPTH)])

    def forward(self, h):
        for layer in self.layer:
            h = layer(h)
        return h


class HFViTModel(nn.Module):  # add_pooling_layer=False, as in ViTForImageClassification
    def __init__(self, eps):
        super().__init__()
        self.embeddings = HFEmbeddings()
        self.encoder = HFEncoder(eps)
        self.layernorm = nn.LayerNorm(DIM, eps=eps)

    def forward(self, pixel_values):
        return self.layernorm(self.encoder(self.embeddings(pixel_values)))


class HFViTForImageClassification(nn.Module):
    def __init__(self, eps=1e-12):
        super().__init__()
        self.vit = HFViTModel(eps)
        self.classifier = nn.Linear(DIM, CLASSES)

    def forward(self, pixel_values):
        return self.classifier(self.vit(pixel_values)[:, 0, :])


def timm_to_hf(sd):
    out = collections.OrderedDict()
    out["vit.embeddings.cls_token"] = sd["cls_token"]
    out["vit.embeddings.position_embeddings"] = sd["pos_embed"]
    out["vit.embeddings.patch_embeddings.projection.weight"] = sd["patch_embed.proj.weight"]
    out["vit.embeddings.patch_embeddings.projection.bias"] = sd["patch_embed.proj.bias"]
    for i in range(DEPTH):
        s, d = "blocks.%d." % i, "vit.encoder.layer.%d." % i
        qw, kw, vw = sd[s + "attn.qkv.weight"].chunk(3, dim=0)
        qb, kb, vb = sd[s + "attn.qkv.bias"].chunk(3, dim=0)
        for part, w, b in (("query", qw, qb), ("key", kw, kb), ("value", vw, vb)):
            out[d + "attention.attention.%s.weight" % part] = w.clone()
            out[d + "attention.attention.%s.bias" % part] = b.clone()
        out[d + "attention.output.dense.weight"] = sd[s + "attn.proj.weight"]
        out[d + "attention.output.dense.bias"] = sd[s + "attn.proj.bias"]
        out[d + "intermediate.dense.weight"] = sd[s + "mlp.fc1.weight"]
        out[d + "intermediate.dense.bias"] = sd[s + "mlp.fc1.bias"]
        out[d + "output.dense.weight"] = sd[s + "mlp.fc2.weight"]
        out[d + "output.dense.bias"] = sd[s + "mlp.fc2.bias"]
        out[d + "layernorm_before.weight"] = sd[s + "norm1.weight"]
        out[d + "layernorm_before.bias"] = sd[s + "norm1.bias"]
        out[d + "layernorm_after.weight"] = sd[s + "norm2.weight"]
        out[d + "layernorm_after.bias"] = sd[s + "norm2.bias"]
    out["vit.layernorm.weight"] = sd["norm.weight"]
    out["vit.layernorm.bias"] = sd["norm.bias"]
    out["classifier.weight"] = sd["head.weight"]
    out["classifier.bias"] = sd["head.bias"]
    return out


# ----------------------------------------------------------------------------------------
# torchvision
# ----------------------------------------------------------------------------------------

def timm_to_torchvision(sd, tv_keys):
    """Map timm names to torchvision names; tv_keys decides the MLP naming (mlp.0 vs mlp.linear_1)."""
    new_mlp = any(".mlp.0.weight" in k for k in tv_keys)
    m1, m2 = ("mlp.0", "mlp.3") if new_mlp else ("mlp.linear_1", "mlp.linear_2")
    out = collections.OrderedDict()
    out["class_token"] = sd["cls_token"]
    out["conv_proj.weight"] = sd["patch_embed.proj.weight"]
    out["conv_proj.bias"] = sd["patch_embed.proj.bias"]
    out["encoder.pos_embedding"] = sd["pos_embed"]
    for i in range(DEPTH):
        s, d = "blocks.%d." % i, "encoder.layers.encoder_layer_%d." % i
        out[d + "ln_1.weight"] = sd[s + "norm1.weight"]
        out[d + "ln_1.bias"] = sd[s + "norm1.bias"]
        out[d + "self_attention.in_proj_weight"] = sd[s + "attn.qkv.weight"]
        out[d + "self_attention.in_proj_bias"] = sd[s + "attn.qkv.bias"]
        out[d + "self_attention.out_proj.weight"] = sd[s + "attn.proj.weight"]
        out[d + "self_attention.out_proj.bias"] = sd[s + "attn.proj.bias"]
        out[d + "ln_2.weight"] = sd[s + "norm2.weight"]
        out[d + "ln_2.bias"] = sd[s + "norm2.bias"]
        out[d + m1 + ".weight"] = sd[s + "mlp.fc1.weight"]
        out[d + m1 + ".bias"] = sd[s + "mlp.fc1.bias"]
        out[d + m2 + ".weight"] = sd[s + "mlp.fc2.weight"]
        out[d + m2 + ".bias"] = sd[s + "mlp.fc2.bias"]
    out["encoder.ln.weight"] = sd["norm.weight"]
    out["encoder.ln.bias"] = sd["norm.bias"]
    out["heads.head.weight"] = sd["head.weight"]
    out["heads.head.bias"] = sd["head.bias"]
    return out


def make_torchvision_model():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=IMG, patch_size=PATCH, num_layers=DEPTH, num_heads=HEADS,
                             hidden_dim=DIM, mlp_dim=HIDDEN, num_classes=CLASSES)


def write_weights(name, sd, dtype="F32"):
    w = SafeTensorsWriter(os.path.join(LAYOUT_DIR, name), dtype)
    for k, v in sd.items():
        w.add(k, v, dtype)
    path = emit(w)
    check_file(path, list(sd.items()), dtype, meta={})
    return path


def load_back(name):
    got, _, _ = read_safetensors(os.path.join(LAYOUT_DIR, name))
    return collections.OrderedDict((k, v.to(torch.float32)) for k, v in got)


# ----------------------------------------------------------------------------------------
# layouts
# ----------------------------------------------------------------------------------------

def make_layouts():
    import torchvision
    os.makedirs(LAYOUT_DIR, exist_ok=True)
    sd = make_timm_weights()
    x = torch.randn(4, CH, IMG, IMG)

    with torch.no_grad():
        # timm
        logits_timm = timm_forward(sd, x)
        write_weights("timm.safetensors", sd)

        # torchvision
        tv = make_torchvision_model()
        tv_keys = list(tv.state_dict().keys())
        tv_sd = timm_to_torchvision(sd, tv_keys)
        assert sorted(tv_sd.keys()) == sorted(tv_keys), (sorted(set(tv_keys) ^ set(tv_sd.keys())))
        tv.load_state_dict(tv_sd, strict=True)
        tv.eval()
        mlp_keys = [k for k in tv_keys if k.startswith("encoder.layers.encoder_layer_0.mlp")]
        print("torchvision %s MLP keys: %s" % (torchvision.__version__, mlp_keys))
        logits_tv = tv(x)
        full_tv = tv.state_dict()  # all keys, in torchvision's order
        write_weights("torchvision.safetensors", full_tv)

        legacy = collections.OrderedDict()
        for k, v in full_tv.items():
            legacy[k.replace(".mlp.0.", ".mlp.linear_1.").replace(".mlp.3.", ".mlp.linear_2.")] = v
        assert legacy.keys() != full_tv.keys()
        write_weights("torchvision_legacy.safetensors", legacy)
        # torchvision itself accepts the legacy names (MLPBlock._load_from_state_dict)
        tv2 = make_torchvision_model()
        tv2.load_state_dict(load_back("torchvision_legacy.safetensors"), strict=True)
        tv2.eval()
        assert torch.equal(tv2(x), logits_tv)
        tv3 = make_torchvision_model()
        tv3.load_state_dict(load_back("torchvision.safetensors"), strict=True)
        tv3.eval()
        assert torch.equal(tv3(x), logits_tv)

        # Hugging Face
        hf_sd = timm_to_hf(sd)
        hf = HFViTForImageClassification(eps=1e-12)
        assert sorted(hf.state_dict().keys()) == sorted(hf_sd.keys())
        hf.load_state_dict(hf_sd, strict=True)
        hf.eval()
        logits_hf = hf(x)
        write_weights("hf.safetensors", hf_sd)
        nopre = collections.OrderedDict((k[4:] if k.startswith("vit.") else k, v) for k, v in hf_sd.items())
        write_weights("hf_noprefix.safetensors", nopre)
        hf_check = HFViTForImageClassification(eps=1e-6)
        hf_check.load_state_dict(load_back("hf.safetensors"), strict=True)
        hf_check.eval()
        d_hf6 = (hf_check(x) - logits_timm).abs().max().item()

        # reduced precision timm
        sd_f16 = collections.OrderedDict((k, round_to_dtype(v, "F16")) for k, v in sd.items())
        sd_bf16 = collections.OrderedDict((k, round_to_dtype(v, "BF16")) for k, v in sd.items())
        for k, v in sd.items():  # our BF16 rounding == torch's (round-to-nearest-even)
            assert torch.equal(sd_bf16[k], v.to(torch.bfloat16).to(torch.float32)), k
            assert torch.equal(sd_f16[k], v.half().float()), k
        logits_f16 = timm_forward(sd_f16, x)
        logits_bf16 = timm_forward(sd_bf16, x)
        write_weights("timm_f16.safetensors", sd, "F16")
        write_weights("timm_bf16.safetensors", sd, "BF16")
        assert torch.equal(timm_forward(load_back("timm_bf16.safetensors"), x), logits_bf16)
        assert torch.equal(timm_forward(load_back("timm_f16.safetensors"), x), logits_f16)
        assert torch.equal(timm_forward(load_back("timm.safetensors"), x), logits_timm)

        # float64 check of the formulas
        sd64 = {k: v.double() for k, v in sd.items()}
        logits64 = timm_forward(sd64, x.double())

    inp = [("input", x), ("logits_timm", logits_timm), ("logits_torchvision", logits_tv),
           ("logits_hf", logits_hf), ("logits_timm_f16", logits_f16), ("logits_timm_bf16", logits_bf16)]
    meta = {"num_heads": str(HEADS), "image_size": str(IMG), "patch_size": str(PATCH),
            "in_channels": str(CH), "dim": str(DIM), "depth": str(DEPTH), "mlp_hidden": str(HIDDEN),
            "num_classes": str(CLASSES), "layernorm_eps_timm": "1e-6", "layernorm_eps_torchvision": "1e-6",
            "layernorm_eps_hf": "1e-12", "torch": torch.__version__, "torchvision": torchvision.__version__}
    w = SafeTensorsWriter(os.path.join(LAYOUT_DIR, "input.safetensors"))
    for k, v in inp:
        w.add(k, v)
    for k, v in meta.items():
        w.meta(k, v)
    check_file(emit(w), inp, "F32", meta)

    # position-embedding resampling
    pos = sd["pos_embed"]

    def resample(grid, align_corners, antialias=False):
        cls, patches = pos[:, :1], pos[:, 1:]
        img = patches.reshape(1, GRID, GRID, DIM).permute(0, 3, 1, 2)
        img = F.interpolate(img, size=(grid, grid), mode="bicubic", antialias=antialias,
                            align_corners=align_corners)
        img = img.permute(0, 2, 3, 1).reshape(1, grid * grid, DIM)
        return torch.cat([cls, img], dim=1)

    with torch.no_grad():
        r_timm = resample(6, False)
        r_tv = resample(6, True)
        r_down = resample(3, False)
        r_down_aa = resample(3, False, antialias=True)
        # torchvision's own function agrees with resample_torchvision
        from torchvision.models.vision_transformer import interpolate_embeddings
        st = interpolate_embeddings(48, PATCH, collections.OrderedDict([("encoder.pos_embedding", pos.clone())]))
        assert torch.equal(st["encoder.pos_embedding"], r_tv)
        x48 = torch.randn(4, CH, 48, 48)
        logits48 = timm_forward(sd, x48, pos_embed=r_timm)
    pe = [("pos_embed", pos), ("resample_timm", r_timm), ("resample_torchvision", r_tv),
          ("resample_timm_down", r_down), ("resample_timm_down_aa", r_down_aa),
          ("input_48", x48), ("logits_timm_48", logits48)]
    w = SafeTensorsWriter(os.path.join(LAYOUT_DIR, "posembed.safetensors"))
    for k, v in pe:
        w.add(k, v)
    pmeta = {"mode": "bicubic", "old_grid": "4", "new_grid": "6", "down_grid": "3", "num_prefix_tokens": "1",
             "num_heads": str(HEADS), "patch_size": str(PATCH)}
    for k, v in pmeta.items():
        w.meta(k, v)
    check_file(emit(w), pe, "F32", pmeta)

    def mx(a, b):
        return (a.double() - b.double()).abs().max().item()

    print("max |logits_hf - logits_timm|          = %.3e" % mx(logits_hf, logits_timm))
    print("max |hf(eps=1e-6) - logits_timm|       = %.3e" % d_hf6)
    print("max |logits_torchvision - logits_timm| = %.3e" % mx(logits_tv, logits_timm))
    print("max |logits_timm - float64 formula|    = %.3e" % mx(logits_timm, logits64))
    print("max |logits_timm_f16 - logits_timm|    = %.3e" % mx(logits_f16, logits_timm))
    print("max |logits_timm_bf16 - logits_timm|   = %.3e" % mx(logits_bf16, logits_timm))
    print("max |resample_timm - resample_tv|      = %.3e" % mx(r_timm, r_tv))
    print("max |resample_down - resample_down_aa| = %.3e" % mx(r_down, r_down_aa))
    print("max |logits_timm| = %.3f" % logits_timm.abs().max().item())


# ----------------------------------------------------------------------------------------
# preprocessing
# ----------------------------------------------------------------------------------------

def make_preprocess():
    import PIL
    import skimage
    import skimage.data
    import torchvision
    import torchvision.transforms as T
    from PIL import Image
    from torchvision.transforms import InterpolationMode

    os.makedirs(PRE_DIR, exist_ok=True)
    tensors = []
    for name in ("chelsea", "coffee", "astronaut"):
        arr = getattr(skimage.data, name)()
        assert arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] == 3, (name, arr.shape)
        h, w = arr.shape[:2]
        s = 120.0 / min(h, w)
        nw, nh = (120, int(round(h * s))) if w <= h else (int(round(w * s)), 120)
        small = Image.fromarray(arr, "RGB").resize((nw, nh), Image.LANCZOS)
        png = os.path.join(PRE_DIR, name + ".png")
        small.save(png, format="PNG")
        written.append(png)
        print("wrote %-50s %8d bytes, %dx%d (from %dx%d)" % (os.path.relpath(png, ROOT), os.path.getsize(png), nw, nh, w, h))
        img = Image.open(png).convert("RGB")
        assert np.array_equal(np.asarray(img), np.asarray(small))
        bil = T.Compose([T.Resize(64, interpolation=InterpolationMode.BILINEAR), T.CenterCrop(56), T.ToTensor()])
        bic = T.Compose([T.Resize(64, interpolation=InterpolationMode.BICUBIC), T.CenterCrop(56), T.ToTensor()])
        sq = T.Compose([T.Resize((64, 64), interpolation=InterpolationMode.BILINEAR), T.ToTensor()])
        tensors += [(name + ".bilinear", bil(img)), (name + ".bicubic", bic(img)), (name + ".square_bilinear", sq(img))]
    meta = {"torchvision": torchvision.__version__, "PIL": PIL.__version__, "torch": torch.__version__,
            "skimage": skimage.__version__, "short_side": "120", "resize": "64", "crop": "56",
            "note": "torchvision Resize on PIL images = PIL Image.resize (antialiased when shrinking); "
                    "ToTensor = uint8/255, CHW, RGB; no normalisation"}
    w = SafeTensorsWriter(os.path.join(PRE_DIR, "expected.safetensors"))
    for k, v in tensors:
        w.add(k, v)
    for k, v in meta.items():
        w.meta(k, v)
    check_file(emit(w), tensors, "F32", meta)


def main():
    make_layouts()
    make_preprocess()
    total = sum(os.path.getsize(p) for p in written)
    print("total %d bytes in %d files" % (total, len(written)))


if __name__ == "__main__":
    main()
