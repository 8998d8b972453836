"""make_golden_variants.py's notebook golden: the ViT notebook's VisionTransformer as its author meant
it (NotebookViT), its weights/gradients in canonical names, a from-scratch check on them, and
notebook.safetensors (make_notebook_golden)."""

import collections
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from .variants_io import OUT_DIR, emit, mx


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
    meta = {"config": json.dumps(cfg), "seed": "301", "torch": torch.__version__,
            "loss": "CE(logits, labels), batch mean"}
    emit(os.path.join(OUT_DIR, "notebook.safetensors"), tensors, meta, dtype="F64")
