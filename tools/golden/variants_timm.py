"""make_golden_variants.py's timm side: Cfg (a variant's architecture), the canonical weights
(Init, make_timm_weights), and timm's VisionTransformer (+ Distilled) forward, functional, eval mode,
with timm's resample_abs_pos_embed."""

import collections
import math

import torch
import torch.nn.functional as F


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
