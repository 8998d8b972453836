"""make_golden_variants.py's key conversions (timm <-> Hugging Face DeiT / DINOv2 / CLIP, DINOv2-reg's
original -> timm), load_hf, and the file writer that re-reads and checks what it wrote (emit)."""

import collections
import os

import torch

from lib.safetensors_io import SafeTensorsWriter, read_safetensors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "golden", "variants")

written = []


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
