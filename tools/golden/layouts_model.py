"""make_golden_layouts.py's model: the tiny ViT's configuration, its weights in timm names
(registration order), timm's forward formula, a Hugging Face ViTForImageClassification written after
transformers' modeling_vit.py, and the timm -> HF / torchvision key maps."""

import collections
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IMG, PATCH, CH, DIM, DEPTH, HEADS, HIDDEN, CLASSES = 32, 8, 3, 48, 2, 4, 192, 10
GRID = IMG // PATCH
TOKENS = GRID * GRID + 1


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

def timm_forward(sd, x, pos_embed=None, eps=1e-6, no_embed_class=False, pre_logits=None):
    """timm VisionTransformer.forward (eval): class-token pooling, pre-norm blocks.
    no_embed_class: pos_embed (1, patches, D) covers only the patches and is added to them before the
        class token is prepended (timm's no_embed_class=True; big_vision's ViT);
    pre_logits: (weight (R, D), bias (R)): the pooled features go through tanh(F.linear(f, weight,
        bias)) before the head (the original ViT release's representation layer)."""
    pos = sd["pos_embed"] if pos_embed is None else pos_embed
    B = x.shape[0]
    h = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=PATCH)
    h = h.flatten(2).transpose(1, 2)
    if no_embed_class:
        h = torch.cat([sd["cls_token"].expand(B, -1, -1), h + pos], dim=1)
    else:
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
    f = h[:, 0]
    if pre_logits is not None:
        f = torch.tanh(F.linear(f, pre_logits[0], pre_logits[1]))
    return F.linear(f, sd["head.weight"], sd["head.bias"])


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
