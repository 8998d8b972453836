"""make_golden_variants.py's Hugging Face models (DeiT with teacher, DINOv2 with and without
registers, the CLIP vision tower with projection), written in plain PyTorch after transformers'
modeling files; they return dicts of tokens / features [/ logits] like timm_forward."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .variants_timm import ACTS


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
