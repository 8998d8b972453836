#!/usr/bin/env python3
"""Generate references for ViT's descendants (DeiT, DeiT III, DINOv2, CLIP, MAE-style avg pooling,
qk_norm, registers) and for the ViT notebook's model.

Requirements: Debian's python3-torch (1.13) and python3-numpy; no timm, no transformers: the reference
models below are written in plain PyTorch after the published definitions (timm's
timm/models/vision_transformer.py + deit.py + layers/pos_embed.py; Hugging Face transformers'
modeling_deit.py, modeling_dinov2.py, modeling_dinov2_with_registers.py, modeling_clip.py).
Run with the system interpreter:

    /usr/bin/python3 tools/make_golden_variants.py

Deterministic (fixed seeds, one thread); takes no arguments; prints every file it writes with its
size and re-reads each one to check it. Files are written with the hand-written safetensors writer
in tools/convert_checkpoint.py.

Weights (every case; drawn in float32 after torch.manual_seed(<case seed>) in the order of the
timm layout's key list, then the inputs):
  Linear / conv weights randn / sqrt(fan_in); all Linear / conv biases 0.05 * randn;
  LayerNorm (incl. q_norm / k_norm) weight 1 + 0.1 * randn, bias 0.1 * randn;
  cls_token / dist_token / reg_token / pos_embed 0.5 * randn; LayerScale gammas 0.5 + 0.1 * randn;
  HF-only tensors: DINOv2 mask_token 0.1 * randn (drawn after the other weights; unused for
  inference); CLIP position_ids arange. (dinov2_reg draws the HF/original weights, see below.)
  Inputs randn, drawn after the weights: input_b3, then input_b1 (independent of input_b3), then
  the resampling inputs.

tests/golden/variants/<case>.<layout>.safetensors -- the weights, F32 (CLIP position_ids I64)
  layout "timm": the canonical names (cls_token, [dist_token], [reg_token], pos_embed,
  patch_embed.proj.weight [.bias], [norm_pre.*], blocks.{i}.{norm1, attn.qkv, [attn.q_norm,
  attn.k_norm], attn.proj, [ls1.gamma], norm2, mlp.fc1, mlp.fc2, [ls2.gamma]}.*, norm.* or fc_norm.*,
  [head.*], [head_dist.*]); layout "hf": the Hugging Face model's state_dict() keys in its order.

tests/golden/variants/<case>.expected.safetensors -- F32, computed in float32
  input_b1 (1,3,S,S), input_b3 (3,3,S,S); per layout L:
    logits_b1.L (1,K), logits_b3.L (3,K)     only when the case has a classifier head
    features_b1.L (1,F), features_b3.L (3,F)  pooled features before the head (DeiT distilled:
                                              (x0 + x1) / 2 after norm; CLIP: the projected embedding)
    tokens_b3.L (3,N,D)                        the final token sequence: norm(x) for token-pooled
                                              models (CLIP hf: post_layernorm applied to every token
                                              of last_hidden_state, which HF itself leaves un-normed);
                                              the raw output of the last block for avg-pooled models
  plus the case's extras (below). __metadata__["config"] = JSON {image_size, patch_size, dim, depth,
  num_heads, head_dim, mlp_dim, num_classes, class_token, reg_tokens, dist_token, no_embed_class,
  pre_norm, layer_scale, qk_norm, act, pool, eps_timm, eps_hf (0: no HF layout), projection_dim
  (0: none), layouts}; __metadata__["seed"], ["torch"].

  deit_distilled   image 32, patch 8, D 32, 2 heads (hd 16), MLP 64, K 5, cls + dist token,
                   pos (1,18,D), head + head_dist; eps timm 1e-6, hf 1e-12.
                   layouts: timm, hf (DeiTForImageClassificationWithTeacher: deit.embeddings.*,
                   deit.encoder.layer.{i}.*, deit.layernorm.*, cls_classifier.*, distillation_classifier.*)
  deit3            image 32, patch 8, D 32, 2 heads, MLP 64, K 5, LayerScale, no_embed_class
                   (pos (1,16,D)), cls pooling. layouts: timm
  dinov2           image 56, patch 14 (4x4), D 32, 2 heads, MLP 128, LayerScale, cls token, pos (1,17,D),
                   no head (features = norm(x)[:,0]); eps 1e-6 both.
                   layouts: timm, hf (Dinov2Model: embeddings.{cls_token, mask_token, position_embeddings,
                   patch_embeddings.projection.*}, encoder.layer.{i}.*, layernorm.*)
                   extras: input_b3_at28 (3,3,28,28), features_b3_at28.{timm,hf} (grid 2, shrinking),
                   input_b3_at84 (3,3,84,84), features_b3_at84.{timm,hf} (grid 6, growing): the patch
                   part of pos_embed resampled as timm's resample_abs_pos_embed (bicubic,
                   align_corners=False, antialiased when shrinking; prefix rows kept). Both layouts hold the same
                   weights, so .timm and .hf agree (to float rounding).
                   hf_interp_features_b3_at28 / hf_interp_features_b3_at84: what HF's Dinov2Model itself
                   gives (its interpolate_pos_encoding: bicubic, size=, align_corners=False, antialias
                   False) -- for information; differs from timm's.
  dinov2_reg       as dinov2 with 4 register tokens. hf (Dinov2WithRegistersModel): embeddings.register_tokens
                   (1,4,D), position_embeddings (1,17,D) incl. the class token's row. timm: made from the
                   hf weights by timm's conversion (no_embed_class): reg_token = register_tokens,
                   cls_token = cls_token + position_embeddings[:, 0], pos_embed = position_embeddings[:, 1:].
                   extras: input_b3_at28, features_b3_at28.{timm,hf} (HF's own interpolation here is
                   timm's: bicubic, antialias=True; checked).
  clip             image 32, patch 8, D 32, 2 heads, MLP 128, pre_norm (norm_pre; patch conv without bias),
                   QuickGELU, eps 1e-5, cls pooling with norm, projection to 24 without bias.
                   layouts: timm (head.weight (24,D) = the projection, head.bias (24) zeros),
                   hf (CLIPVisionModelWithProjection: vision_model.embeddings.{class_embedding (D),
                   position_ids (1,17) I64, patch_embedding.weight, position_embedding.weight (17,D)},
                   vision_model.pre_layrnorm.*, vision_model.encoder.layers.{i}.*, vision_model.post_layernorm.*,
                   visual_projection.weight (24,D)). features = the projected embedding (B,24).
                   extras: features_gelu_b1.timm, features_gelu_b3.timm (exact GELU instead of QuickGELU:
                   what `--act gelu` must give for the timm file).
  avgpool          image 32, patch 8, D 32, 2 heads, MLP 64, K 5, cls token kept, global_pool avg:
                   fc_norm(mean of the 16 patch tokens), no `norm`. layouts: timm
  qknorm_headdim   image 32, patch 8, D 32, 2 heads of width 24 (qkv (144,32), proj (32,48)), MLP 64, K 5,
                   qk_norm (LayerNorm over 24, eps 1e-6), cls pooling. layouts: timm
  patch8_regs_avg  image 32, patch 8, D 32, 4 heads, MLP 64, K 5, no class token, 2 register tokens,
                   no_embed_class, avg pooling over the patch tokens + fc_norm. layouts: timm

tests/golden/variants/train_ls_reg_dist.safetensors -- F64 (see tests/golden/SPEC.md)
  timm-style: LayerScale, cls + dist + 2 register tokens (in that order), no_embed_class
  (pos (1,16,D)), image 16, patch 4, D 16, 2 heads, MLP 32, depth 2, K 4, cls pooling with norm,
  head + head_dist, no dropout. Values drawn in float32, forward + backward in float64.
  Tensors: every weight under its canonical name; input (4,3,16,16); labels (4), teacher_labels (4)
  (whole numbers); logits_cls (4,4) = head(x[:,0]); logits_dist (4,4) = head_dist(x[:,1]);
  logits = their mean; loss [] = 0.5 * CE(logits_cls, labels) + 0.5 * CE(logits_dist,
  teacher_labels) (batch mean, no smoothing); grad.<name> for every weight. config JSON + alpha.

tests/golden/variants/notebook.safetensors -- F64
  The ViT notebook's VisionTransformer as its author meant it (NotebookViT below): image 16,
  patch 4 (16 patches + class = 17 tokens), 3 channels, D 16, 2 heads (each of width D), depth 2,
  K 4; flattened (p1 p2 c) patches through Linear(48, 16); LayerNorm((17,16)) (tokens x channels,
  eps 1e-5); per-head Linear(D,D) q/k/v, softmax(q k^T / sqrt(D)) v, heads concatenated, Linear(H*D, D);
  block MLP = one Linear(D,D), no activation; no final norm; logits = tanh(head(z[:,0])).
  Tensors under the canonical names (patch_embed.proj.weight (16,3,4,4) = the Linear's weight
  reshaped (D,P,P,C) and permuted to (D,C,P,P); blocks.{i}.norm1/norm2.* (17,16); attn.qkv.weight
  (3*H*D, D) = [q_0, q_1, k_0, k_1, v_0, v_1]; attn.proj (16, 32); mlp.fc1 (16,16) = the block's
  Linear), input (4,3,16,16), labels (4), logits (4,4) (after tanh), loss [] = CE(logits, labels),
  grad.<canonical name> for every weight. Checked: a from-scratch forward on the canonical weights
  (conv patch embedding, fused qkv) gives the notebook class's logits to 1e-12.
"""

import collections
import hashlib
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_checkpoint import SafeTensorsWriter, read_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "golden", "variants")

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)

written = []


# ----------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------

class Cfg:
    """A variant's architecture (timm's vocabulary)."""

    KEYS = ("image_size", "patch_size", "dim", "depth", "num_heads", "head_dim", "mlp_dim",
            "num_classes", "class_token", "reg_tokens", "dist_token", "no_embed_class", "pre_norm",
            "layer_scale", "qk_norm", "act", "pool", "eps_timm", "eps_hf", "projection_dim")

    def __init__(self, **kw):
        self.image_size = 32
        self.patch_size = 8
        self.dim = 32
        self.depth = 2
        self.num_heads = 2
        self.head_dim = 0  # 0: dim // num_heads
        self.mlp_dim = 128
        self.num_classes = 5
        self.class_token = True
        self.reg_tokens = 0
        self.dist_token = False
        self.no_embed_class = False
        self.pre_norm = False
        self.layer_scale = False
        self.qk_norm = False
        self.act = "gelu"  # "gelu" (erf) or "quick_gelu"
        self.pool = "cls"  # "cls" or "avg"
        self.eps_timm = 1e-6
        self.eps_hf = 0.0  # 0: no Hugging Face layout
        self.projection_dim = 0  # CLIP: `head` is a bias-free projection to this width
        for k, v in kw.items():
            assert hasattr(self, k), k
            setattr(self, k, v)
        if not self.head_dim:
            self.head_dim = self.dim // self.num_heads

    @property
    def grid(self):
        return self.image_size // self.patch_size

    @property
    def attn_dim(self):
        return self.num_heads * self.head_dim

    @property
    def num_prefix(self):
        return int(self.class_token) + int(self.dist_token) + self.reg_tokens

    @property
    def pos_tokens(self):
        if self.no_embed_class:
            return self.grid ** 2
        assert self.reg_tokens == 0, "timm: register tokens come with no_embed_class"
        return self.grid ** 2 + int(self.class_token) + int(self.dist_token)

    def to_dict(self, layouts=None, **extra):
        d = collections.OrderedDict((k, getattr(self, k)) for k in self.KEYS)
        if layouts is not None:
            d["layouts"] = list(layouts)
        d.update(extra)
        return d


# ----------------------------------------------------------------------------------------
# weights (canonical timm names)
# ----------------------------------------------------------------------------------------

class Init:
    """Draws the weights in the order they are requested (seeded by the caller)."""

    def __init__(self):
        self.sd = collections.OrderedDict()

    def linear(self, name, out_f, in_f, bias=True):
        self.sd[name + ".weight"] = torch.randn(out_f, in_f) / math.sqrt(in_f)
        if bias:
            self.sd[name + ".bias"] = 0.05 * torch.randn(out_f)

    def conv(self, name, out_c, in_c, k, bias=True):
        self.sd[name + ".weight"] = torch.randn(out_c, in_c, k, k) / math.sqrt(in_c * k * k)
        if bias:
            self.sd[name + ".bias"] = 0.05 * torch.randn(out_c)

    def norm(self, name, shape):
        self.sd[name + ".weight"] = 1.0 + 0.1 * torch.randn(shape)
        self.sd[name + ".bias"] = 0.1 * torch.randn(shape)

    def token(self, name, shape):
        self.sd[name] = 0.5 * torch.randn(shape)

    def gamma(self, name, n):
        self.sd[name] = 0.5 + 0.1 * torch.randn(n)


def make_timm_weights(cfg, pos_tokens=None):
    """Canonical weights of cfg (pos_tokens overrides the rows of pos_embed: DINOv2-reg's original)."""
    D, C = cfg.dim, 3
    w = Init()
    if cfg.class_token:
        w.token("cls_token", (1, 1, D))
    if cfg.dist_token:
        w.token("dist_token", (1, 1, D))
    if cfg.reg_tokens:
        w.token("reg_token", (1, cfg.reg_tokens, D))
    w.token("pos_embed", (1, pos_tokens or cfg.pos_tokens, D))
    w.conv("patch_embed.proj", D, C, cfg.patch_size, bias=not cfg.pre_norm)
    if cfg.pre_norm:
        w.norm("norm_pre", D)
    for i in range(cfg.depth):
        p = "blocks.%d." % i
        w.norm(p + "norm1", D)
        w.linear(p + "attn.qkv", 3 * cfg.attn_dim, D)
        if cfg.qk_norm:
            w.norm(p + "attn.q_norm", cfg.head_dim)
            w.norm(p + "attn.k_norm", cfg.head_dim)
        w.linear(p + "attn.proj", D, cfg.attn_dim)
        if cfg.layer_scale:
            w.gamma(p + "ls1.gamma", D)
        w.norm(p + "norm2", D)
        w.linear(p + "mlp.fc1", cfg.mlp_dim, D)
        w.linear(p + "mlp.fc2", D, cfg.mlp_dim)
        if cfg.layer_scale:
            w.gamma(p + "ls2.gamma", D)
    w.norm("fc_norm" if cfg.pool == "avg" else "norm", D)
    if cfg.projection_dim:
        w.linear("head", cfg.projection_dim, D, bias=False)
        w.sd["head.bias"] = torch.zeros(cfg.projection_dim)  # timm's OpenAI CLIP conversion
    elif cfg.num_classes:
        w.linear("head", cfg.num_classes, D)
        if cfg.dist_token:
            w.linear("head_dist", cfg.num_classes, D)
    return w.sd


# ----------------------------------------------------------------------------------------
# timm VisionTransformer (+ VisionTransformerDistilled), functional, eval mode
# ----------------------------------------------------------------------------------------

def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


ACTS = {"gelu": F.gelu, "quick_gelu": quick_gelu}


def resample_abs_pos_embed(posemb, new_grid, num_prefix_tokens):
    """timm.layers.resample_abs_pos_embed (square grids): bicubic, align_corners=False, antialiased
    when shrinking (timm >= 0.9 passes antialias=True, which is what matters for DINOv2's 518-pixel
    grid run at 224; when growing, `vit` keeps PyTorch's plain bicubic, as timm < 0.9 and the
    layouts references do -- antialias=True would switch the cubic's A from -0.75 to -0.5)."""
    n = posemb.shape[1] - num_prefix_tokens
    old = int(math.sqrt(n))
    assert old * old == n
    if new_grid == old:
        return posemb
    prefix, grid = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    dim = posemb.shape[-1]
    orig_dtype = posemb.dtype
    grid = grid.float().reshape(1, old, old, dim).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_grid, new_grid), mode="bicubic", antialias=new_grid < old)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, dim).to(orig_dtype)
    return torch.cat([prefix, grid], dim=1)


def timm_attention(sd, p, cfg, x, eps):
    B, N, _ = x.shape
    H, hd = cfg.num_heads, cfg.head_dim
    qkv = F.linear(x, sd[p + "qkv.weight"], sd[p + "qkv.bias"])
    q, k, v = qkv.reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)
    if cfg.qk_norm:
        q = F.layer_norm(q, (hd,), sd[p + "q_norm.weight"], sd[p + "q_norm.bias"], eps)
        k = F.layer_norm(k, (hd,), sd[p + "k_norm.weight"], sd[p + "k_norm.bias"], eps)
    attn = ((q * hd ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
    y = (attn @ v).transpose(1, 2).reshape(B, N, H * hd)
    return F.linear(y, sd[p + "proj.weight"], sd[p + "proj.bias"])


def timm_forward(sd, cfg, x, eps, act=None, resample=True):
    """Returns dict(tokens, features, logits[, logits_cls, logits_dist]) of timm's eval forward.

    Inputs of another size than cfg.image_size get pos_embed resampled as timm does
    (dynamic_img_size: num_prefix_tokens = 0 if no_embed_class else the prefix rows).
    """
    act_fn = ACTS[act or cfg.act]
    D = cfg.dim
    B = x.shape[0]
    h = F.conv2d(x, sd["patch_embed.proj.weight"], sd.get("patch_embed.proj.bias"), stride=cfg.patch_size)
    grid = h.shape[-1]
    assert h.shape[-2] == grid
    h = h.flatten(2).transpose(1, 2)
    pos = sd["pos_embed"]
    pos_prefix = 0 if cfg.no_embed_class else pos.shape[1] - cfg.grid ** 2
    if grid != cfg.grid:
        assert resample
        pos = resample_abs_pos_embed(pos, grid, pos_prefix)
    prefix = []
    if cfg.class_token:
        prefix.append(sd["cls_token"].expand(B, -1, -1))
    if cfg.dist_token:
        prefix.append(sd["dist_token"].expand(B, -1, -1))
    if cfg.reg_tokens:
        prefix.append(sd["reg_token"].expand(B, -1, -1))
    if cfg.no_embed_class:
        h = torch.cat(prefix + [h + pos], dim=1)
    else:
        h = torch.cat(prefix + [h], dim=1) + pos
    if cfg.pre_norm:
        h = F.layer_norm(h, (D,), sd["norm_pre.weight"], sd["norm_pre.bias"], eps)
    for i in range(cfg.depth):
        p = "blocks.%d." % i
        y = F.layer_norm(h, (D,), sd[p + "norm1.weight"], sd[p + "norm1.bias"], eps)
        y = timm_attention(sd, p + "attn.", cfg, y, eps)
        if cfg.layer_scale:
            y = y * sd[p + "ls1.gamma"]
        h = h + y
        y = F.layer_norm(h, (D,), sd[p + "norm2.weight"], sd[p + "norm2.bias"], eps)
        y = F.linear(y, sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"])
        y = F.linear(act_fn(y), sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"])
        if cfg.layer_scale:
            y = y * sd[p + "ls2.gamma"]
        h = h + y
    out = {}
    if cfg.pool == "avg":  # norm = Identity, fc_norm after the mean of the patch tokens
        out["tokens"] = h
        feats = F.layer_norm(h[:, cfg.num_prefix:].mean(dim=1), (D,), sd["fc_norm.weight"], sd["fc_norm.bias"], eps)
    else:
        h = F.layer_norm(h, (D,), sd["norm.weight"], sd["norm.bias"], eps)
        out["tokens"] = h
        feats = (h[:, 0] + h[:, 1]) / 2 if cfg.dist_token else h[:, 0]
    if cfg.projection_dim:
        out["features"] = F.linear(feats, sd["head.weight"], sd["head.bias"])
    else:
        out["features"] = feats
        if cfg.num_classes:
            if cfg.dist_token:
                out["logits_cls"] = F.linear(h[:, 0], sd["head.weight"], sd["head.bias"])
                out["logits_dist"] = F.linear(h[:, 1], sd["head_dist.weight"], sd["head_dist.bias"])
                out["logits"] = (out["logits_cls"] + out["logits_dist"]) / 2
            else:
                out["logits"] = F.linear(feats, sd["head.weight"], sd["head.bias"])
    return out


# ----------------------------------------------------------------------------------------
# Hugging Face models, written after transformers' modeling_{deit,dinov2,dinov2_with_registers,clip}.py
# (eval mode, eager attention; dropout / drop_path / masking left out)
# ----------------------------------------------------------------------------------------

class HFPatchEmbeddings(nn.Module):  # DeiTPatchEmbeddings / Dinov2PatchEmbeddings
    def __init__(self, c):
        super().__init__()
        self.projection = nn.Conv2d(3, c.dim, kernel_size=c.patch_size, stride=c.patch_size)

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)


class HFSelfAttention(nn.Module):  # ViTSelfAttention (DeiT, DINOv2): query / key / value
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_heads
        self.attention_head_size = c.dim // c.num_heads
        self.all_head_size = c.dim
        self.scaling = self.attention_head_size ** -0.5
        self.query = nn.Linear(c.dim, c.dim)
        self.key = nn.Linear(c.dim, c.dim)
        self.value = nn.Linear(c.dim, c.dim)

    def forward(self, hidden_states):
        B = hidden_states.shape[0]
        shape = (B, -1, self.num_attention_heads, self.attention_head_size)
        k = self.key(hidden_states).view(*shape).transpose(1, 2)
        v = self.value(hidden_states).view(*shape).transpose(1, 2)
        q = self.query(hidden_states).view(*shape).transpose(1, 2)
        w = torch.matmul(q, k.transpose(-1, -2)) * self.scaling
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        ctx = torch.matmul(w, v).transpose(1, 2).contiguous()
        return ctx.reshape(ctx.size()[:-2] + (self.all_head_size,))


class HFSelfOutput(nn.Module):  # ViTSelfOutput: the residual is added by the layer
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.dim, c.dim)

    def forward(self, hidden_states):
        return self.dense(hidden_states)


class HFAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = HFSelfAttention(c)
        self.output = HFSelfOutput(c)

    def forward(self, hidden_states):
        return self.output(self.attention(hidden_states))


# --- DeiT ---

class DeiTEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim))
        self.distillation_token = nn.Parameter(torch.zeros(1, 1, c.dim))
        self.patch_embeddings = HFPatchEmbeddings(c)
        self.position_embeddings = nn.Parameter(torch.zeros(1, c.grid ** 2 + 2, c.dim))

    def forward(self, pixel_values):
        emb = self.patch_embeddings(pixel_values)
        B = emb.shape[0]
        emb = torch.cat((self.cls_token.expand(B, -1, -1), self.distillation_token.expand(B, -1, -1), emb), dim=1)
        return emb + self.position_embeddings


class DeiTIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.dim, c.mlp_dim)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


class DeiTOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.mlp_dim, c.dim)

    def forward(self, hidden_states, input_tensor):
        return self.dense(hidden_states) + input_tensor


class DeiTLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = HFAttention(c)
        self.intermediate = DeiTIntermediate(c)
        self.output = DeiTOutput(c)
        self.layernorm_before = nn.LayerNorm(c.dim, eps=c.eps_hf)
        self.layernorm_after = nn.LayerNorm(c.dim, eps=c.eps_hf)

    def forward(self, hidden_states):
        hidden_states = self.attention(self.layernorm_before(hidden_states)) + hidden_states
        return self.output(self.intermediate(self.layernorm_after(hidden_states)), hidden_states)


class HFEncoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, h):
        for layer in self.layer:
            h = layer(h)
        return h


class DeiTModel(nn.Module):  # add_pooling_layer=False, use_mask_token=False (as WithTeacher builds it)
    def __init__(self, c):
        super().__init__()
        self.embeddings = DeiTEmbeddings(c)
        self.encoder = HFEncoder([DeiTLayer(c) for _ in range(c.depth)])
        self.layernorm = nn.LayerNorm(c.dim, eps=c.eps_hf)

    def forward(self, pixel_values):
        return self.layernorm(self.encoder(self.embeddings(pixel_values)))


class DeiTForImageClassificationWithTeacher(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.deit = DeiTModel(c)
        self.cls_classifier = nn.Linear(c.dim, c.num_classes)
        self.distillation_classifier = nn.Linear(c.dim, c.num_classes)

    def forward(self, pixel_values):
        seq = self.deit(pixel_values)
        cls_logits = self.cls_classifier(seq[:, 0, :])
        dist_logits = self.distillation_classifier(seq[:, 1, :])
        return {"tokens": seq, "features": (seq[:, 0] + seq[:, 1]) / 2, "logits": (cls_logits + dist_logits) / 2}


# --- DINOv2 (with and without registers) ---

class Dinov2Embeddings(nn.Module):
    """Dinov2Embeddings, or Dinov2WithRegistersEmbeddings when c.reg_tokens > 0.

    interpolate_pos_encoding: Dinov2 uses bicubic, size=, align_corners=False (antialias False);
    Dinov2WithRegisters the same with antialias=True. `interp_antialias` overrides it.
    """

    def __init__(self, c, interp_antialias=None):
        super().__init__()
        self.c = c
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim))
        self.mask_token = nn.Parameter(torch.zeros(1, c.dim))
        if c.reg_tokens:
            self.register_tokens = nn.Parameter(torch.zeros(1, c.reg_tokens, c.dim))
        self.patch_embeddings = HFPatchEmbeddings(c)
        self.position_embeddings = nn.Parameter(torch.zeros(1, c.grid ** 2 + 1, c.dim))
        self.antialias = bool(c.reg_tokens) if interp_antialias is None else interp_antialias

    def interpolate_pos_encoding(self, embeddings, height, width):
        num_patches = embeddings.shape[1] - 1
        num_positions = self.position_embeddings.shape[1] - 1
        if num_patches == num_positions and height == width:
            return self.position_embeddings
        class_pos_embed = self.position_embeddings[:, :1]
        patch_pos_embed = self.position_embeddings[:, 1:]
        dim = embeddings.shape[-1]
        new_h, new_w = height // self.c.patch_size, width // self.c.patch_size
        s = int(num_positions ** 0.5)
        patch_pos_embed = patch_pos_embed.reshape(1, s, s, dim).permute(0, 3, 1, 2)
        target_dtype = patch_pos_embed.dtype
        patch_pos_embed = F.interpolate(patch_pos_embed.to(torch.float32), size=(new_h, new_w), mode="bicubic",
                                        align_corners=False, antialias=self.antialias).to(target_dtype)
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).reshape(1, -1, dim)
        return torch.cat((class_pos_embed, patch_pos_embed), dim=1)

    def forward(self, pixel_values):
        B, _, height, width = pixel_values.shape
        emb = self.patch_embeddings(pixel_values)
        emb = torch.cat((self.cls_token.expand(B, -1, -1), emb), dim=1)
        emb = emb + self.interpolate_pos_encoding(emb, height, width)
        if self.c.reg_tokens:
            emb = torch.cat((emb[:, :1], self.register_tokens.expand(B, -1, -1), emb[:, 1:]), dim=1)
        return emb


class Dinov2LayerScale(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.lambda1 = nn.Parameter(torch.ones(c.dim))

    def forward(self, hidden_state):
        return hidden_state * self.lambda1


class Dinov2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1 = nn.Linear(c.dim, c.mlp_dim)
        self.fc2 = nn.Linear(c.mlp_dim, c.dim)

    def forward(self, hidden_state):
        return self.fc2(F.gelu(self.fc1(hidden_state)))


class Dinov2Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = nn.LayerNorm(c.dim, eps=c.eps_hf)
        self.attention = HFAttention(c)
        self.layer_scale1 = Dinov2LayerScale(c)
        self.norm2 = nn.LayerNorm(c.dim, eps=c.eps_hf)
        self.mlp = Dinov2MLP(c)
        self.layer_scale2 = Dinov2LayerScale(c)

    def forward(self, hidden_states):
        hidden_states = self.layer_scale1(self.attention(self.norm1(hidden_states))) + hidden_states
        return self.layer_scale2(self.mlp(self.norm2(hidden_states))) + hidden_states


class Dinov2Model(nn.Module):  # or Dinov2WithRegistersModel
    def __init__(self, c, interp_antialias=None):
        super().__init__()
        self.embeddings = Dinov2Embeddings(c, interp_antialias)
        self.encoder = HFEncoder([Dinov2Layer(c) for _ in range(c.depth)])
        self.layernorm = nn.LayerNorm(c.dim, eps=c.eps_hf)

    def forward(self, pixel_values):
        seq = self.layernorm(self.encoder(self.embeddings(pixel_values)))
        return {"tokens": seq, "features": seq[:, 0, :]}  # last_hidden_state, pooler_output


# --- CLIP vision tower ---

class CLIPVisionEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        n = c.grid ** 2 + 1
        self.class_embedding = nn.Parameter(torch.zeros(c.dim))
        self.patch_embedding = nn.Conv2d(3, c.dim, kernel_size=c.patch_size, stride=c.patch_size, bias=False)
        self.position_embedding = nn.Embedding(n, c.dim)
        # persistent, as in the transformers versions whose files carry it (now persistent=False)
        self.register_buffer("position_ids", torch.arange(n).expand((1, -1)))

    def forward(self, pixel_values):
        B = pixel_values.shape[0]
        patch = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        emb = torch.cat([self.class_embedding.expand(B, 1, -1), patch], dim=1)
        return emb + self.position_embedding(self.position_ids)


class CLIPAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_heads = c.num_heads
        self.head_dim = c.dim // c.num_heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(c.dim, c.dim)
        self.v_proj = nn.Linear(c.dim, c.dim)
        self.q_proj = nn.Linear(c.dim, c.dim)
        self.out_proj = nn.Linear(c.dim, c.dim)

    def forward(self, hidden_states):
        B, N, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(B, N, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(B, N, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(B, N, -1, self.head_dim).transpose(1, 2)
        w = F.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(B, N, -1)
        return self.out_proj(out)


class CLIPMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.act = ACTS[c.act]  # config.hidden_act "quick_gelu" (OpenAI) or "gelu"
        self.fc1 = nn.Linear(c.dim, c.mlp_dim)
        self.fc2 = nn.Linear(c.mlp_dim, c.dim)

    def forward(self, hidden_states):
        return self.fc2(self.act(self.fc1(hidden_states)))


class CLIPEncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = CLIPAttention(c)
        self.layer_norm1 = nn.LayerNorm(c.dim, eps=c.eps_hf)
        self.mlp = CLIPMLP(c)
        self.layer_norm2 = nn.LayerNorm(c.dim, eps=c.eps_hf)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.self_attn(self.layer_norm1(hidden_states))
        return hidden_states + self.mlp(self.layer_norm2(hidden_states))


class CLIPEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layers = nn.ModuleList([CLIPEncoderLayer(c) for _ in range(c.depth)])

    def forward(self, h):
        for layer in self.layers:
            h = layer(h)
        return h


class CLIPVisionTransformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = CLIPVisionEmbeddings(c)
        self.pre_layrnorm = nn.LayerNorm(c.dim, eps=c.eps_hf)
        self.encoder = CLIPEncoder(c)
        self.post_layernorm = nn.LayerNorm(c.dim, eps=c.eps_hf)

    def forward(self, pixel_values):
        last_hidden_state = self.encoder(self.pre_layrnorm(self.embeddings(pixel_values)))
        pooled_output = self.post_layernorm(last_hidden_state[:, 0, :])
        return last_hidden_state, pooled_output


class CLIPVisionModelWithProjection(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.vision_model = CLIPVisionTransformer(c)
        self.visual_projection = nn.Linear(c.dim, c.projection_dim, bias=False)

    def forward(self, pixel_values):
        last_hidden_state, pooled = self.vision_model(pixel_values)
        image_embeds = self.visual_projection(pooled)
        # tokens: post_layernorm over every token (timm's norm(x)); HF's last_hidden_state is un-normed
        return {"tokens": self.vision_model.post_layernorm(last_hidden_state), "features": image_embeds}


# ----------------------------------------------------------------------------------------
# key conversions
# ----------------------------------------------------------------------------------------

def split_qkv(sd, s):
    w = sd[s + "attn.qkv.weight"].chunk(3, dim=0)
    b = sd[s + "attn.qkv.bias"].chunk(3, dim=0)
    return [(wi.clone(), bi.clone()) for wi, bi in zip(w, b)]


def timm_to_hf_deit(sd, cfg):
    out = {}
    e = "deit.embeddings."
    out[e + "cls_token"] = sd["cls_token"]
    out[e + "distillation_token"] = sd["dist_token"]
    out[e + "position_embeddings"] = sd["pos_embed"]
    out[e + "patch_embeddings.projection.weight"] = sd["patch_embed.proj.weight"]
    out[e + "patch_embeddings.projection.bias"] = sd["patch_embed.proj.bias"]
    for i in range(cfg.depth):
        s, d = "blocks.%d." % i, "deit.encoder.layer.%d." % i
        for part, (w, b) in zip(("query", "key", "value"), split_qkv(sd, s)):
            out[d + "attention.attention.%s.weight" % part] = w
            out[d + "attention.attention.%s.bias" % part] = b
        pairs = (("attention.output.dense", "attn.proj"), ("intermediate.dense", "mlp.fc1"),
                 ("output.dense", "mlp.fc2"), ("layernorm_before", "norm1"), ("layernorm_after", "norm2"))
        for hf, tm in pairs:
            for t in ("weight", "bias"):
                out[d + hf + "." + t] = sd[s + tm + "." + t]
    for t in ("weight", "bias"):
        out["deit.layernorm." + t] = sd["norm." + t]
        out["cls_classifier." + t] = sd["head." + t]
        out["distillation_classifier." + t] = sd["head_dist." + t]
    return out


def dinov2_original_to_hf(sd, cfg, mask_token):
    """Canonical names with pos_embed covering the class token (+ reg_token) -> Dinov2[WithRegisters]Model."""
    out = {"embeddings.cls_token": sd["cls_token"], "embeddings.mask_token": mask_token}
    if cfg.reg_tokens:
        out["embeddings.register_tokens"] = sd["reg_token"]
    out["embeddings.position_embeddings"] = sd["pos_embed"]
    out["embeddings.patch_embeddings.projection.weight"] = sd["patch_embed.proj.weight"]
    out["embeddings.patch_embeddings.projection.bias"] = sd["patch_embed.proj.bias"]
    for i in range(cfg.depth):
        s, d = "blocks.%d." % i, "encoder.layer.%d." % i
        for part, (w, b) in zip(("query", "key", "value"), split_qkv(sd, s)):
            out[d + "attention.attention.%s.weight" % part] = w
            out[d + "attention.attention.%s.bias" % part] = b
        pairs = (("attention.output.dense", "attn.proj"), ("norm1", "norm1"), ("norm2", "norm2"),
                 ("mlp.fc1", "mlp.fc1"), ("mlp.fc2", "mlp.fc2"))
        for hf, tm in pairs:
            for t in ("weight", "bias"):
                out[d + hf + "." + t] = sd[s + tm + "." + t]
        out[d + "layer_scale1.lambda1"] = sd[s + "ls1.gamma"]
        out[d + "layer_scale2.lambda1"] = sd[s + "ls2.gamma"]
    out["layernorm.weight"] = sd["norm.weight"]
    out["layernorm.bias"] = sd["norm.bias"]
    return out


def dinov2_reg_original_to_timm(orig):
    """timm's _convert_dinov2 for register models: no_embed_class, the class position folded into cls_token."""
    out = collections.OrderedDict()
    for k, v in orig.items():
        if k == "cls_token":
            out[k] = orig["cls_token"] + orig["pos_embed"][:, 0]
        elif k == "pos_embed":
            out[k] = orig["pos_embed"][:, 1:].clone()
        else:
            out[k] = v
    return out


def timm_to_hf_clip(sd, cfg):
    assert torch.count_nonzero(sd["head.bias"]) == 0
    v = "vision_model."
    e = v + "embeddings."
    n = cfg.grid ** 2 + 1
    out = {e + "class_embedding": sd["cls_token"].reshape(cfg.dim),
           e + "patch_embedding.weight": sd["patch_embed.proj.weight"],
           e + "position_embedding.weight": sd["pos_embed"].reshape(n, cfg.dim),
           e + "position_ids": torch.arange(n, dtype=torch.int64).expand((1, -1)).contiguous()}
    for t in ("weight", "bias"):
        out[v + "pre_layrnorm." + t] = sd["norm_pre." + t]
        out[v + "post_layernorm." + t] = sd["norm." + t]
    for i in range(cfg.depth):
        s, d = "blocks.%d." % i, v + "encoder.layers.%d." % i
        for part, (w, b) in zip(("q_proj", "k_proj", "v_proj"), split_qkv(sd, s)):
            out[d + "self_attn.%s.weight" % part] = w
            out[d + "self_attn.%s.bias" % part] = b
        pairs = (("self_attn.out_proj", "attn.proj"), ("layer_norm1", "norm1"), ("layer_norm2", "norm2"),
                 ("mlp.fc1", "mlp.fc1"), ("mlp.fc2", "mlp.fc2"))
        for hf, tm in pairs:
            for t in ("weight", "bias"):
                out[d + hf + "." + t] = sd[s + tm + "." + t]
    out["visual_projection.weight"] = sd["head.weight"]
    return out


def load_hf(model, hf_sd):
    """load_state_dict(strict) and return the model's own state_dict (its key order)."""
    assert sorted(model.state_dict().keys()) == sorted(hf_sd.keys()), \
        sorted(set(model.state_dict().keys()) ^ set(hf_sd.keys()))
    model.load_state_dict(hf_sd, strict=True)
    model.eval()
    return collections.OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())


# ----------------------------------------------------------------------------------------
# files
# ----------------------------------------------------------------------------------------

def st_dtype(t, default):
    return "I64" if t.dtype == torch.int64 else default


def emit(path, tensors, metadata=None, dtype="F32"):
    """Write (name, tensor) pairs, re-read the file and check names, dtypes, shapes and values."""
    w = SafeTensorsWriter(path, dtype)
    for k, v in tensors:
        w.add(k, v, st_dtype(v, dtype))
    for k, v in (metadata or {}).items():
        w.meta(k, v)
    w.write()
    written.append(path)
    print("wrote %-58s %8d bytes, %3d tensors" % (os.path.relpath(path, ROOT), os.path.getsize(path), len(w.entries)))
    got, meta, dtypes = read_safetensors(path)
    assert [n for n, _ in got] == [n for n, _ in tensors], path
    for (n, t), (_, e) in zip(got, tensors):
        assert tuple(t.shape) == tuple(e.shape), (path, n)
        dt = st_dtype(e, dtype)
        assert dtypes[n] == dt, (path, n, dtypes[n])
        if dt == "I64":
            assert torch.equal(t, e), (path, n)
        else:
            ref = e.detach().to(torch.float64 if dt == "F64" else torch.float32)
            assert torch.equal(t, ref), (path, n)
    assert meta == {str(k): str(v) for k, v in (metadata or {}).items()}, path
    return collections.OrderedDict((n, t) for n, t in got)


def mx(a, b):
    return (a.double() - b.double()).abs().max().item()


# ----------------------------------------------------------------------------------------
# inference cases
# ----------------------------------------------------------------------------------------

CASES = [
    dict(name="deit_distilled", seed=101, layouts=("timm", "hf"),
         cfg=Cfg(mlp_dim=64, dist_token=True, eps_hf=1e-12)),
    dict(name="deit3", seed=102, layouts=("timm",),
         cfg=Cfg(mlp_dim=64, layer_scale=True, no_embed_class=True)),
    dict(name="dinov2", seed=103, layouts=("timm", "hf"), resample=(28, 84),
         cfg=Cfg(image_size=56, patch_size=14, num_classes=0, layer_scale=True, eps_hf=1e-6)),
    dict(name="dinov2_reg", seed=104, layouts=("timm", "hf"), resample=(28,),
         cfg=Cfg(image_size=56, patch_size=14, num_classes=0, layer_scale=True, reg_tokens=4,
                 no_embed_class=True, eps_hf=1e-6)),
    dict(name="clip", seed=105, layouts=("timm", "hf"),
         cfg=Cfg(num_classes=0, pre_norm=True, act="quick_gelu", eps_timm=1e-5, eps_hf=1e-5, projection_dim=24)),
    dict(name="avgpool", seed=106, layouts=("timm",), cfg=Cfg(mlp_dim=64, pool="avg")),
    dict(name="qknorm_headdim", seed=107, layouts=("timm",), cfg=Cfg(mlp_dim=64, head_dim=24, qk_norm=True)),
    dict(name="patch8_regs_avg", seed=108, layouts=("timm",),
         cfg=Cfg(mlp_dim=64, num_heads=4, class_token=False, reg_tokens=2, no_embed_class=True, pool="avg")),
]


def make_case(case):
    name, cfg, layouts = case["name"], case["cfg"], case["layouts"]
    S = cfg.image_size
    torch.manual_seed(case["seed"])
    hf_sd = None
    if name == "dinov2_reg":
        # the original (HF) weights: pos_embed (1, 1 + 16, D) covering the class token
        orig = make_timm_weights(cfg, pos_tokens=cfg.grid ** 2 + 1)
        mask_token = 0.1 * torch.randn(1, cfg.dim)
        sd = dinov2_reg_original_to_timm(orig)
        hf_model = Dinov2Model(cfg)
        hf_sd = load_hf(hf_model, dinov2_original_to_hf(orig, cfg, mask_token))
    else:
        sd = make_timm_weights(cfg)
        if name == "deit_distilled":
            hf_model = DeiTForImageClassificationWithTeacher(cfg)
            hf_sd = load_hf(hf_model, timm_to_hf_deit(sd, cfg))
        elif name == "dinov2":
            mask_token = 0.1 * torch.randn(1, cfg.dim)
            hf_model = Dinov2Model(cfg)
            hf_sd = load_hf(hf_model, dinov2_original_to_hf(sd, cfg, mask_token))
        elif name == "clip":
            hf_model = CLIPVisionModelWithProjection(cfg)
            hf_sd = load_hf(hf_model, timm_to_hf_clip(sd, cfg))
    assert ("hf" in layouts) == (hf_sd is not None)
    x3 = torch.randn(3, 3, S, S)
    x1 = torch.randn(1, 3, S, S)
    xr = {r: torch.randn(3, 3, r, r) for r in case.get("resample", ())}

    # weights files; the references below are computed from the weights read back
    sd = emit(os.path.join(OUT_DIR, "%s.timm.safetensors" % name), list(sd.items()))
    if hf_sd is not None:
        hf_sd = emit(os.path.join(OUT_DIR, "%s.hf.safetensors" % name), list(hf_sd.items()))
        hf_model.load_state_dict(hf_sd, strict=True)
        hf_model.eval()

    ins = [("input_b1", x1), ("input_b3", x3)]
    for r, x in xr.items():
        ins.append(("input_b3_at%d" % r, x))
    outs = []
    with torch.no_grad():
        ref = {}
        for L in layouts:
            if L == "timm":
                f1, f3 = timm_forward(sd, cfg, x1, cfg.eps_timm), timm_forward(sd, cfg, x3, cfg.eps_timm)
            else:
                f1, f3 = hf_model(x1), hf_model(x3)
            ref[L] = f3
            if "logits" in f3:
                outs += [("logits_b1." + L, f1["logits"]), ("logits_b3." + L, f3["logits"])]
            outs += [("features_b1." + L, f1["features"]), ("features_b3." + L, f3["features"]),
                     ("tokens_b3." + L, f3["tokens"])]
            # float64 check of the float32 references
            if L == "timm":
                f64 = timm_forward({k: v.double() for k, v in sd.items()}, cfg, x3.double(), cfg.eps_timm)
            else:
                m64 = type(hf_model)(cfg)
                m64.load_state_dict(hf_sd, strict=True)
                m64 = m64.double().eval()
                f64 = m64(x3.double())
            print("  %-16s %-4s max|features f32 - f64| = %.2e   max|features| = %.3f" % (
                name, L, mx(f3["features"], f64["features"]), f3["features"].abs().max().item()))
        if "hf" in layouts:
            for k in ("features", "tokens", "logits"):
                if k in ref["timm"]:
                    print("  %-16s max|%s timm - hf| = %.2e (eps %g vs %g)" % (
                        name, k, mx(ref["timm"][k], ref["hf"][k]), cfg.eps_timm, cfg.eps_hf))
        if name == "clip":
            g1 = timm_forward(sd, cfg, x1, cfg.eps_timm, act="gelu")
            g3 = timm_forward(sd, cfg, x3, cfg.eps_timm, act="gelu")
            outs += [("features_gelu_b1.timm", g1["features"]), ("features_gelu_b3.timm", g3["features"])]
            print("  %-16s max|features gelu - quick_gelu| = %.2e" % (name, mx(g3["features"], ref["timm"]["features"])))
        for r, x in xr.items():
            ft = timm_forward(sd, cfg, x, cfg.eps_timm)["features"]
            outs.append(("features_b3_at%d.timm" % r, ft))
            # the HF layout's weights with timm's resampling (antialiased when shrinking)
            hf_timm = Dinov2Model(cfg, interp_antialias=r < cfg.image_size)
            hf_timm.load_state_dict(hf_sd, strict=True)
            fh = hf_timm.eval()(x)["features"]
            outs.append(("features_b3_at%d.hf" % r, fh))
            # the HF model's own interpolation
            fo = hf_model(x)["features"]
            if name == "dinov2":
                outs.append(("hf_interp_features_b3_at%d" % r, fo))
            elif r < cfg.image_size:
                assert torch.equal(fo, fh)  # Dinov2WithRegisters interpolates with antialias=True
            print("  %-16s at %d: max|timm - hf| = %.2e, max|timm - HF's own interpolation| = %.2e" % (
                name, r, mx(ft, fh), mx(ft, fo)))
    meta = {"config": json.dumps(cfg.to_dict(layouts)), "seed": str(case["seed"]), "torch": torch.__version__}
    tensors = ins + outs
    for n, t in tensors:
        assert torch.isfinite(t).all(), (name, n)
    emit(os.path.join(OUT_DIR, "%s.expected.safetensors" % name), tensors, meta)


# ----------------------------------------------------------------------------------------
# training golden: LayerScale + registers + distillation token (float64)
# ----------------------------------------------------------------------------------------

def make_train_golden():
    cfg = Cfg(image_size=16, patch_size=4, dim=16, num_heads=2, mlp_dim=32, num_classes=4, dist_token=True,
              reg_tokens=2, no_embed_class=True, layer_scale=True)
    alpha = 0.5
    torch.manual_seed(201)
    sd32 = make_timm_weights(cfg)
    x32 = torch.randn(4, 3, 16, 16)
    labels = torch.tensor([0, 3, 1, 2])
    teacher = torch.tensor([0, 1, 1, 3])  # agrees with labels on two of four
    params = collections.OrderedDict((k, v.double().requires_grad_(True)) for k, v in sd32.items())
    x = x32.double()
    out = timm_forward(params, cfg, x, cfg.eps_timm)
    loss = (1 - alpha) * F.cross_entropy(out["logits_cls"], labels) + alpha * F.cross_entropy(out["logits_dist"], teacher)
    loss.backward()
    tensors = [(k, v.detach()) for k, v in params.items()]
    tensors += [("input", x), ("labels", labels.double()), ("teacher_labels", teacher.double()),
                ("logits_cls", out["logits_cls"].detach()), ("logits_dist", out["logits_dist"].detach()),
                ("logits", out["logits"].detach()), ("loss", loss.detach())]
    tensors += [("grad." + k, v.grad) for k, v in params.items()]
    for k, v in params.items():
        assert v.grad is not None and v.grad.abs().max() > 0, k
    meta = {"config": json.dumps(cfg.to_dict(["timm"], alpha=alpha)), "seed": "201", "torch": torch.__version__,
            "loss": "0.5 * CE(logits_cls, labels) + 0.5 * CE(logits_dist, teacher_labels), batch mean"}
    emit(os.path.join(OUT_DIR, "train_ls_reg_dist.safetensors"), tensors, meta, dtype="F64")
    print("  train_ls_reg_dist loss = %.6f" % loss.item())


# ----------------------------------------------------------------------------------------
# notebook golden
# ----------------------------------------------------------------------------------------

def patchify(images, p):
    """einops: b c (h p1) (w p2) -> b (h w) (p1 p2 c)."""
    B, C, Hh, Ww = images.shape
    h, w = Hh // p, Ww // p
    x = images.reshape(B, C, h, p, w, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, h * w, p * p * C)


class NotebookMSA(nn.Module):
    """Per-head q/k/v Linear(d, d); softmax(q k^T / sqrt(d)) v; heads concatenated; Linear(H*d, d)."""

    def __init__(self, d, n_heads):
        super().__init__()
        self.d = d
        self.q_mappings = nn.ModuleList([nn.Linear(d, d) for _ in range(n_heads)])
        self.k_mappings = nn.ModuleList([nn.Linear(d, d) for _ in range(n_heads)])
        self.v_mappings = nn.ModuleList([nn.Linear(d, d) for _ in range(n_heads)])
        self.out = nn.Linear(n_heads * d, d)

    def forward(self, z):
        heads = []
        for q_map, k_map, v_map in zip(self.q_mappings, self.k_mappings, self.v_mappings):
            q, k, v = q_map(z), k_map(z), v_map(z)
            attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d), dim=-1)
            heads.append(attn @ v)
        return self.out(torch.cat(heads, dim=-1))


class NotebookBlock(nn.Module):
    def __init__(self, n_tokens, d, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm((n_tokens, d))  # over tokens and channels, eps 1e-5
        self.msa = NotebookMSA(d, n_heads)
        self.ln2 = nn.LayerNorm((n_tokens, d))
        self.mlp = nn.Linear(d, d)  # no activation

    def forward(self, z):
        z = z + self.msa(self.ln1(z))
        return z + self.mlp(self.ln2(z))


class NotebookViT(nn.Module):
    def __init__(self, image=16, patch=4, channels=3, d=16, n_heads=2, depth=2, n_classes=4):
        super().__init__()
        self.patch = patch
        n_tokens = (image // patch) ** 2 + 1
        self.linear_mapper = nn.Linear(patch * patch * channels, d)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_tokens, d))
        self.blocks = nn.ModuleList([NotebookBlock(n_tokens, d, n_heads) for _ in range(depth)])
        self.head = nn.Linear(d, n_classes)

    def forward(self, images):
        z = self.linear_mapper(patchify(images, self.patch))
        z = torch.cat([self.class_token.expand(z.shape[0], -1, -1), z], dim=1) + self.pos_embed
        for block in self.blocks:
            z = block(z)
        return torch.tanh(self.head(z[:, 0]))


def notebook_to_canonical(get, n_heads, depth, patch, channels):
    """get(notebook_param_name) -> tensor (weights or gradients); returns the canonical dict."""
    out = collections.OrderedDict()
    out["cls_token"] = get("class_token")
    out["pos_embed"] = get("pos_embed")
    w = get("linear_mapper.weight")
    d = w.shape[0]
    out["patch_embed.proj.weight"] = w.reshape(d, patch, patch, channels).permute(0, 3, 1, 2).contiguous()
    out["patch_embed.proj.bias"] = get("linear_mapper.bias")
    for i in range(depth):
        b, p = "blocks.%d." % i, "blocks.%d." % i
        out[p + "norm1.weight"] = get(b + "ln1.weight")
        out[p + "norm1.bias"] = get(b + "ln1.bias")
        for t in ("weight", "bias"):
            out[p + "attn.qkv." + t] = torch.cat([get(b + "msa.%s_mappings.%d.%s" % (m, h, t))
                                                  for m in ("q", "k", "v") for h in range(n_heads)], dim=0)
        out[p + "attn.proj.weight"] = get(b + "msa.out.weight")
        out[p + "attn.proj.bias"] = get(b + "msa.out.bias")
        out[p + "norm2.weight"] = get(b + "ln2.weight")
        out[p + "norm2.bias"] = get(b + "ln2.bias")
        out[p + "mlp.fc1.weight"] = get(b + "mlp.weight")
        out[p + "mlp.fc1.bias"] = get(b + "mlp.bias")
    out["head.weight"] = get("head.weight")
    out["head.bias"] = get("head.bias")
    return out


def canonical_notebook_forward(sd, x, n_heads, depth, patch, eps=1e-5):
    """From scratch on the canonical weights: conv patch embedding, fused qkv, LayerNorm over (N, D)."""
    h = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=patch).flatten(2).transpose(1, 2)
    B, _, D = h.shape
    h = torch.cat([sd["cls_token"].expand(B, -1, -1), h], dim=1) + sd["pos_embed"]
    N = h.shape[1]
    for i in range(depth):
        p = "blocks.%d." % i
        y = F.layer_norm(h, (N, D), sd[p + "norm1.weight"], sd[p + "norm1.bias"], eps)
        qkv = F.linear(y, sd[p + "attn.qkv.weight"], sd[p + "attn.qkv.bias"])
        hd = qkv.shape[-1] // (3 * n_heads)
        q, k, v = qkv.reshape(B, N, 3, n_heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        a = ((q * hd ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        y = (a @ v).transpose(1, 2).reshape(B, N, n_heads * hd)
        h = h + F.linear(y, sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"])
        y = F.layer_norm(h, (N, D), sd[p + "norm2.weight"], sd[p + "norm2.bias"], eps)
        h = h + F.linear(y, sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"])
    return torch.tanh(F.linear(h[:, 0], sd["head.weight"], sd["head.bias"]))


def make_notebook_golden():
    IMG, P, C, D, H, DEPTH, K = 16, 4, 3, 16, 2, 2, 4
    N = (IMG // P) ** 2 + 1
    torch.manual_seed(301)
    model = NotebookViT(IMG, P, C, D, H, DEPTH, K)
    with torch.no_grad():  # the variants' weight scheme, in the module's parameter order
        for name, p in model.named_parameters():
            if name in ("class_token", "pos_embed"):
                p.copy_(0.5 * torch.randn(p.shape))
            elif ".ln" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape))
            elif name.endswith("weight"):
                p.copy_(torch.randn(p.shape) / math.sqrt(p.shape[1]))
            else:
                p.copy_(0.05 * torch.randn(p.shape))
    x32 = torch.randn(4, C, IMG, IMG)
    labels = torch.tensor([2, 0, 3, 1])
    model = model.double()
    x = x32.double()
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    named = dict(model.named_parameters())
    weights = notebook_to_canonical(lambda n: named[n].detach(), H, DEPTH, P, C)
    grads = notebook_to_canonical(lambda n: named[n].grad, H, DEPTH, P, C)
    assert len(weights) == len(named) - 6 * H * DEPTH + 2 * DEPTH  # q/k/v per head fused into qkv weight + bias
    assert sum(v.numel() for v in weights.values()) == sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        again = canonical_notebook_forward(weights, x, H, DEPTH, P)
    d = mx(again, logits.detach())
    assert d < 1e-12, d
    # the gradients convert the same way: autograd through the canonical forward agrees
    w2 = collections.OrderedDict((k, v.clone().requires_grad_(True)) for k, v in weights.items())
    F.cross_entropy(canonical_notebook_forward(w2, x, H, DEPTH, P), labels).backward()
    dg = max(mx(w2[k].grad, grads[k]) for k in weights)
    assert dg < 1e-12, dg
    print("  notebook: max|canonical forward - NotebookViT| = %.1e, grads %.1e; loss = %.6f" % (d, dg, loss.item()))
    cfg = {"image_size": IMG, "patch_size": P, "dim": D, "depth": DEPTH, "num_heads": H, "head_dim": D,
           "mlp_dim": D, "num_classes": K, "class_token": True, "reg_tokens": 0, "dist_token": False,
           "no_embed_class": False, "pre_norm": False, "layer_scale": False, "qk_norm": False, "act": "none",
           "pool": "cls", "eps_timm": 1e-5, "eps_hf": 0.0, "projection_dim": 0, "layouts": ["timm"],
           "norm_tokens": True, "norm_shape": [N, D], "mlp_layers": 1, "final_norm": False, "head_tanh": True}
    tensors = list(weights.items())
    tensors += [("input", x), ("labels", labels.double()), ("logits", logits.detach()), ("loss", loss.detach())]
    tensors += [("grad." + k, v) for k, v in grads.items()]
    meta = {"config": json.dumps(cfg), "seed": "301", "torch": torch.__version__, "loss": "CE(logits, labels), batch mean"}
    emit(os.path.join(OUT_DIR, "notebook.safetensors"), tensors, meta, dtype="F64")


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for case in CASES:
        make_case(case)
    make_train_golden()
    make_notebook_golden()
    total = sum(os.path.getsize(p) for p in written)
    print("total %d bytes in %d files" % (total, len(written)))
    h = hashlib.sha256()
    for p in sorted(written):
        with open(p, "rb") as f:
            h.update(os.path.basename(p).encode() + b"\0" + f.read())
    print("sha256 of all files: %s" % h.hexdigest())


if __name__ == "__main__":
    main()
