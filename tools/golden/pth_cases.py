"""make_golden_pth.py's files: the tiny ViT of tests/golden/layouts/ saved with torch.save and as
JAX .npz (tests/golden/pth/), the expected logits, the hostile files (tests/golden/pth/hostile/),
the fuzz seeds (tests/fuzz/corpus/pth/, tests/fuzz/corpus/npz/) and the optional vit_b_16 pair.

Helpers here: a pickle assembler (Pk), torch's own zip writer (torch_zip), a raw zip writer for
the crafted .npz files (raw_zip), the timm <-> JAX name maps (timm_to_jax, and jax_to_timm, a port of
timm's vision_transformer._load_weights used to check the inverse), and the forward formula with
the no_embed_class / pre_logits options (vit_forward)."""

import argparse
import collections
import io
import os
import pathlib
import pickle
import pickletools
import shutil
import struct
import zipfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

from lib.safetensors_io import SafeTensorsWriter, read_safetensors

from .layouts_model import (CH, CLASSES, DEPTH, DIM, HEADS, HIDDEN, IMG, PATCH, HFViTForImageClassification,
                            make_timm_weights, make_torchvision_model, timm_forward, timm_to_hf,
                            timm_to_torchvision)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYOUT_DIR = os.path.join(ROOT, "tests", "golden", "layouts")
PTH_DIR = os.path.join(ROOT, "tests", "golden", "pth")
HOSTILE_DIR = os.path.join(PTH_DIR, "hostile")
CORPUS_PTH = os.path.join(ROOT, "tests", "fuzz", "corpus", "pth")
CORPUS_NPZ = os.path.join(ROOT, "tests", "fuzz", "corpus", "npz")
SEED_LIMIT = 100 * 1024  # every fuzz seed stays below this

written = []


def report(path, what=""):
    written.append(path)
    shown = os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path
    print("wrote %-52s %8d bytes  %s" % (shown, os.path.getsize(path), what))
    return path


def pth(name):
    return os.path.join(PTH_DIR, name)


def hostile(name):
    return os.path.join(HOSTILE_DIR, name)


# ----------------------------------------------------------------------------------------
# forward formula: timm's, with big_vision's position handling and the representation layer
# ----------------------------------------------------------------------------------------

def vit_forward(sd, x, no_embed_class=False, pre_logits=None, eps=1e-6):
    """layouts_model.timm_forward with big_vision's position handling and the representation layer."""
    return timm_forward(sd, x, eps=eps, no_embed_class=no_embed_class, pre_logits=pre_logits)


# ----------------------------------------------------------------------------------------
# timm <-> JAX (google-research/vision_transformer, big_vision)
# ----------------------------------------------------------------------------------------

def _np(t):
    return np.ascontiguousarray(t.detach().to(torch.float32).numpy())  # C order, as JAX saves them


def timm_to_jax(sd, big_vision=False, pre_logits=None):
    """timm names -> the original JAX names (keys sorted, as flax flattens them).

    google-research/vision_transformer: Transformer/encoderblock_{i}/{LayerNorm_0, MultiHeadDotProductAttention_1,
    LayerNorm_2, MlpBlock_3}, Transformer/posembed_input/pos_embedding (1,17,D).
    big_vision (big_vision=True, prefix added by the caller): scanned blocks Transformer/encoderblock/
    {LayerNorm_0, MultiHeadDotProductAttention_0, LayerNorm_1, MlpBlock_0} with a leading depth axis,
    pos_embedding (1,16,D) at the top level (sd["pos_embed"] must already be the patch-only table).
    pre_logits: (kernel (D,D) JAX (in,out) layout, bias (D)) -> pre_logits/{kernel,bias}."""
    D, H, hd = DIM, HEADS, DIM // HEADS
    out = {}
    out["cls"] = _np(sd["cls_token"])                                              # (1,1,D)
    out["embedding/kernel"] = _np(sd["patch_embed.proj.weight"].permute(2, 3, 1, 0))  # OIHW -> HWIO
    out["embedding/bias"] = _np(sd["patch_embed.proj.bias"])
    if big_vision:
        assert sd["pos_embed"].shape == (1, (IMG // PATCH) ** 2, D)
        out["pos_embedding"] = _np(sd["pos_embed"])
    else:
        out["Transformer/posembed_input/pos_embedding"] = _np(sd["pos_embed"])
    ln1, mha, ln2, mlp = (("LayerNorm_0", "MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0")
                          if big_vision else
                          ("LayerNorm_0", "MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3"))
    blocks = []
    for i in range(DEPTH):
        p = "blocks.%d." % i
        b = collections.OrderedDict()
        b[ln1 + "/scale"] = _np(sd[p + "norm1.weight"])
        b[ln1 + "/bias"] = _np(sd[p + "norm1.bias"])
        ws = sd[p + "attn.qkv.weight"].chunk(3, dim=0)  # rows [q; k; v], each (out, in)
        bs = sd[p + "attn.qkv.bias"].chunk(3, dim=0)
        for n, w, bias in zip(("query", "key", "value"), ws, bs):
            b["%s/%s/kernel" % (mha, n)] = _np(w.t().reshape(D, H, hd))   # (D, heads, head_dim)
            b["%s/%s/bias" % (mha, n)] = _np(bias.reshape(H, hd))         # (heads, head_dim)
        b[mha + "/out/kernel"] = _np(sd[p + "attn.proj.weight"].reshape(D, H, hd).permute(1, 2, 0))  # (H, hd, D)
        b[mha + "/out/bias"] = _np(sd[p + "attn.proj.bias"])
        b[ln2 + "/scale"] = _np(sd[p + "norm2.weight"])
        b[ln2 + "/bias"] = _np(sd[p + "norm2.bias"])
        b[mlp + "/Dense_0/kernel"] = _np(sd[p + "mlp.fc1.weight"].t())  # (in, out)
        b[mlp + "/Dense_0/bias"] = _np(sd[p + "mlp.fc1.bias"])
        b[mlp + "/Dense_1/kernel"] = _np(sd[p + "mlp.fc2.weight"].t())
        b[mlp + "/Dense_1/bias"] = _np(sd[p + "mlp.fc2.bias"])
        blocks.append(b)
    for k in blocks[0]:
        if big_vision:
            out["Transformer/encoderblock/" + k] = np.ascontiguousarray(np.stack([b[k] for b in blocks]))
        else:
            for i, b in enumerate(blocks):
                out["Transformer/encoderblock_%d/%s" % (i, k)] = b[k]
    out["Transformer/encoder_norm/scale"] = _np(sd["norm.weight"])
    out["Transformer/encoder_norm/bias"] = _np(sd["norm.bias"])
    out["head/kernel"] = _np(sd["head.weight"].t())  # (D, K)
    out["head/bias"] = _np(sd["head.bias"])
    if pre_logits is not None:
        out["pre_logits/kernel"] = _np(pre_logits[0])
        out["pre_logits/bias"] = _np(pre_logits[1])
    for v in out.values():
        assert v.dtype == np.float32 and v.flags.c_contiguous
    return collections.OrderedDict(sorted(out.items()))


def jax_to_timm(w):
    """timm's vision_transformer._load_weights (timm 0.9: prefix detection, _n2p, the big_vision
    branch, scanned blocks via idx) on a dict of numpy arrays; returns timm names (+ pre_logits.fc.*
    when present, as timm's older representation-layer code loaded it)."""
    prefix, big_vision = "", False
    if "opt/target/embedding/kernel" in w:
        prefix = "opt/target/"
    elif "params/embedding/kernel" in w:
        prefix, big_vision = "params/", True

    def n2p(a, t=True, idx=None):
        if idx is not None:
            a = a[idx]
        if a.ndim == 4 and a.shape[0] == a.shape[1] == a.shape[2] == 1:
            a = a.flatten()
        if t:
            if a.ndim == 4:
                a = a.transpose([3, 2, 0, 1])
            elif a.ndim == 3:
                a = a.transpose([2, 0, 1])
            elif a.ndim == 2:
                a = a.transpose([1, 0])
        return torch.from_numpy(np.ascontiguousarray(a))

    sd = collections.OrderedDict()
    sd["cls_token"] = n2p(w[prefix + "cls"], t=False)
    if big_vision:
        sd["pos_embed"] = n2p(w[prefix + "pos_embedding"], t=False)
    else:
        sd["pos_embed"] = n2p(w[prefix + "Transformer/posembed_input/pos_embedding"], t=False)
    sd["patch_embed.proj.weight"] = n2p(w[prefix + "embedding/kernel"])
    sd["patch_embed.proj.bias"] = n2p(w[prefix + "embedding/bias"])
    mha_sub, b_sub, ln1_sub = (0, 0, 1) if big_vision else (1, 3, 2)
    for i in range(DEPTH):
        if prefix + "Transformer/encoderblock/LayerNorm_0/scale" in w:
            bp, idx = prefix + "Transformer/encoderblock/", i
        else:
            bp, idx = prefix + "Transformer/encoderblock_%d/" % i, None
        mp = bp + "MultiHeadDotProductAttention_%d/" % mha_sub
        d = "blocks.%d." % i
        sd[d + "norm1.weight"] = n2p(w[bp + "LayerNorm_0/scale"], idx=idx)
        sd[d + "norm1.bias"] = n2p(w[bp + "LayerNorm_0/bias"], idx=idx)
        sd[d + "attn.qkv.weight"] = torch.cat([
            n2p(w[mp + n + "/kernel"], t=False, idx=idx).flatten(1).T for n in ("query", "key", "value")])
        sd[d + "attn.qkv.bias"] = torch.cat([
            n2p(w[mp + n + "/bias"], t=False, idx=idx).reshape(-1) for n in ("query", "key", "value")])
        sd[d + "attn.proj.weight"] = n2p(w[mp + "out/kernel"], idx=idx).flatten(1)
        sd[d + "attn.proj.bias"] = n2p(w[mp + "out/bias"], idx=idx)
        sd[d + "norm2.weight"] = n2p(w[bp + "LayerNorm_%d/scale" % ln1_sub], idx=idx)
        sd[d + "norm2.bias"] = n2p(w[bp + "LayerNorm_%d/bias" % ln1_sub], idx=idx)
        for r in range(2):
            sd[d + "mlp.fc%d.weight" % (r + 1)] = n2p(w[bp + "MlpBlock_%d/Dense_%d/kernel" % (b_sub, r)], idx=idx)
            sd[d + "mlp.fc%d.bias" % (r + 1)] = n2p(w[bp + "MlpBlock_%d/Dense_%d/bias" % (b_sub, r)], idx=idx)
    sd["norm.weight"] = n2p(w[prefix + "Transformer/encoder_norm/scale"])
    sd["norm.bias"] = n2p(w[prefix + "Transformer/encoder_norm/bias"])
    sd["head.weight"] = n2p(w[prefix + "head/kernel"])
    sd["head.bias"] = n2p(w[prefix + "head/bias"])
    if prefix + "pre_logits/kernel" in w:
        sd["pre_logits.fc.weight"] = n2p(w[prefix + "pre_logits/kernel"])
        sd["pre_logits.fc.bias"] = n2p(w[prefix + "pre_logits/bias"])
    return sd


# ----------------------------------------------------------------------------------------
# state-dict helpers
# ----------------------------------------------------------------------------------------

def with_module_metadata(sd):
    """An OrderedDict copy carrying nn.Module.state_dict()'s `_metadata` attribute ({module prefix:
    {"version": 1}} for '' and every parent module of a key), so the pickle has the BUILD that real
    model.state_dict() files have."""
    out = collections.OrderedDict(sd.items())
    meta = collections.OrderedDict([("", {"version": 1})])
    for k in sd:
        parts = k.split(".")[:-1]
        for n in range(1, len(parts) + 1):
            meta.setdefault(".".join(parts[:n]), {"version": 1})
    out._metadata = meta
    return out


def ema_weights(sd):
    """ddp.pth's EMA set: 0.9 * w + 0.1 for LayerNorm weights (stays ~1), 0.9 * w + 0.01 otherwise."""
    out = collections.OrderedDict()
    for k, v in sd.items():
        is_ln_weight = k.endswith(("norm1.weight", "norm2.weight")) or k == "norm.weight"
        out[k] = v * 0.9 + (0.1 if is_ln_weight else 0.01)
    return out


def adamw_state(sd, x):
    """A real torch.optim.AdamW state_dict after one step on copies of the weights, training the head only
    (a linear probe; it keeps the file small), in timm's param groups: no weight decay for 1-D tensors.
    Loss: cross-entropy of the timm formula on x against labels arange(B) % CLASSES."""
    params = collections.OrderedDict((k, v.clone().requires_grad_(k.startswith("head."))) for k, v in sd.items())
    no_decay = [params["head.bias"]]
    decay = [params["head.weight"]]
    opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": 0.05}],
                            lr=5e-4, betas=(0.9, 0.999), eps=1e-8)
    with torch.enable_grad():
        loss = F.cross_entropy(timm_forward(params, x), torch.arange(x.shape[0]) % CLASSES)
        loss.backward()
    opt.step()
    return opt.state_dict()


def assert_same_tensors(got, want, what, dtype=None):
    assert list(got.keys()) == list(want.keys()), (what, list(got.keys())[:5], list(want.keys())[:5])
    for k in want:
        g, w = got[k], want[k]
        assert isinstance(g, torch.Tensor), (what, k)
        assert g.dtype == (dtype or w.dtype), (what, k, g.dtype)
        assert tuple(g.shape) == tuple(w.shape), (what, k)
        assert torch.equal(g.to(w.dtype), w), (what, k)


def load_layout(name):
    got, _, _ = read_safetensors(os.path.join(LAYOUT_DIR, name))
    return collections.OrderedDict(got)


# ----------------------------------------------------------------------------------------
# the valid files
# ----------------------------------------------------------------------------------------

def save(obj, name, what, **kw):
    path = pth(name)
    torch.save(obj, path, **kw)
    return report(path, what)


def save_npz(arrays, name, compressed=False):
    path = pth(name)
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    report(path, "%d arrays%s" % (len(arrays), ", deflated" if compressed else ""))
    with np.load(path) as z:
        assert list(z.keys()) == list(arrays.keys()), name
        for k, v in arrays.items():
            assert z[k].dtype == np.float32 and z[k].shape == v.shape and np.array_equal(z[k], v), (name, k)
        back = {k: z[k] for k in z.keys()}
    with zipfile.ZipFile(path) as zf:
        method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
        assert all(i.compress_type == method for i in zf.infolist()), name
    return back


def make_valid():
    import torchvision
    os.makedirs(PTH_DIR, exist_ok=True)
    sd = make_timm_weights()
    x = torch.randn(4, CH, IMG, IMG)
    committed = load_layout("input.safetensors")
    assert torch.equal(x, committed["input"]), "input differs from layouts/input.safetensors"
    assert_same_tensors(sd, load_layout("timm.safetensors"), "timm weights")
    exp = collections.OrderedDict([("input", x)])

    with torch.no_grad():
        # 1. torchvision
        tv = make_torchvision_model()
        tv.load_state_dict(timm_to_torchvision(sd, list(tv.state_dict().keys())), strict=True)
        tv.eval()
        tv_sd = tv.state_dict()
        assert_same_tensors(tv_sd, load_layout("torchvision.safetensors"), "torchvision weights")
        exp["logits_timm"] = timm_forward(sd, x)
        exp["logits_torchvision"] = tv(x)
        path = save(tv_sd, "torchvision.pth", "torchvision VisionTransformer.state_dict() (with _metadata)")
        back = torch.load(path, weights_only=True)
        assert_same_tensors(back, tv_sd, path)
        assert hasattr(back, "_metadata")
        tv2 = make_torchvision_model()
        tv2.load_state_dict(back, strict=True)
        tv2.eval()
        assert torch.equal(tv2(x), exp["logits_torchvision"])

        # 2. timm / DeiT training checkpoint
        timm_sd = with_module_metadata(sd)
        train = {"model": timm_sd, "epoch": 7, "arch": "vit_tiny_test",
                 "args": argparse.Namespace(lr=5e-4, model="vit_tiny_test", batch_size=64, drop_path=0.1,
                                            output_dir=pathlib.PosixPath("/tmp/out")),
                 "optimizer": adamw_state(sd, x), "metric": 81.5, "version": 2}
        path = save(train, "timm_train.pth", "timm training checkpoint (Namespace, PosixPath, AdamW state)")
        try:
            torch.load(path, weights_only=True)
            raise AssertionError("timm_train.pth loaded with weights_only=True")
        except pickle.UnpicklingError:
            pass
        back = torch.load(path)  # our own file: full unpickling is fine
        assert list(back.keys()) == list(train.keys())
        assert_same_tensors(back["model"], sd, path)
        assert back["args"] == train["args"] and back["epoch"] == 7 and back["metric"] == 81.5
        opt = back["optimizer"]
        n_params = 2  # the head's weight and bias (adamw_state trains the head only)
        assert sorted(opt["state"].keys()) == list(range(n_params))
        assert sum(len(g["params"]) for g in opt["param_groups"]) == n_params
        for i, st in opt["state"].items():
            assert set(st.keys()) == {"step", "exp_avg", "exp_avg_sq"} and float(st["step"]) == 1.0

        # 3. DistributedDataParallel wrapper + EMA
        ema = ema_weights(sd)
        exp["logits_hf"] = None  # filled below, keeps the key order of the docstring

        def wrapped(t):
            return with_module_metadata(collections.OrderedDict(("module." + k, v) for k, v in t.items()))
        ddp = {"state_dict": wrapped(sd), "state_dict_ema": wrapped(ema)}
        path = save(ddp, "ddp.pth", "state_dict + state_dict_ema, 'module.' prefix")
        back = torch.load(path, weights_only=True)
        assert list(back.keys()) == ["state_dict", "state_dict_ema"]
        assert_same_tensors(collections.OrderedDict((k[7:], v) for k, v in back["state_dict"].items()), sd, path)
        assert_same_tensors(collections.OrderedDict((k[7:], v) for k, v in back["state_dict_ema"].items()), ema, path)
        exp["logits_ema"] = timm_forward(ema, x)

        # 4. Hugging Face pytorch_model.bin
        hf_sd = timm_to_hf(sd)
        assert_same_tensors(hf_sd, load_layout("hf.safetensors"), "hf weights")
        hf = HFViTForImageClassification(eps=1e-12)
        hf.load_state_dict(hf_sd, strict=True)
        hf.eval()
        exp["logits_hf"] = hf(x)
        path = save(collections.OrderedDict(hf_sd), "pytorch_model.bin", "Hugging Face ViTForImageClassification keys")
        assert_same_tensors(torch.load(path, weights_only=True), hf_sd, path)

        # 5. views: non-contiguous, shared storage, storage offsets
        views = collections.OrderedDict(sd.items())
        w = sd["head.weight"]                                       # (10, 48)
        base = torch.empty(DIM, CLASSES)
        base.copy_(w.t())
        views["head.weight"] = base.t()                             # stride (1, 10)
        qkv, proj = sd["blocks.0.attn.qkv.weight"], sd["blocks.0.attn.proj.weight"]
        flat = torch.full((qkv.numel() + 3 + proj.numel(),), float("nan"))
        flat[:qkv.numel()] = qkv.flatten()
        flat[qkv.numel() + 3:] = proj.flatten()
        views["blocks.0.attn.qkv.weight"] = flat[:qkv.numel()].view(qkv.shape)        # offset 0
        views["blocks.0.attn.proj.weight"] = flat[qkv.numel() + 3:].view(proj.shape)  # offset 6915
        pos = sd["pos_embed"]
        padded = torch.full((5 + pos.numel() + 7,), float("nan"))
        padded[5:5 + pos.numel()] = pos.flatten()
        views["pos_embed"] = padded[5:5 + pos.numel()].view(pos.shape)                # offset 5
        views["patch_embed.proj.weight"] = sd["patch_embed.proj.weight"].contiguous(
            memory_format=torch.channels_last)                                          # stride (192, 1, 24, 3)
        v = views
        assert not v["head.weight"].is_contiguous() and v["head.weight"].stride() == (1, CLASSES)
        assert (v["blocks.0.attn.qkv.weight"].storage().data_ptr()
                == v["blocks.0.attn.proj.weight"].storage().data_ptr())
        assert v["blocks.0.attn.proj.weight"].storage_offset() == qkv.numel() + 3
        assert v["pos_embed"].storage_offset() == 5
        assert v["patch_embed.proj.weight"].stride() == (CH * PATCH * PATCH, 1, PATCH * CH, CH)
        path = save(views, "views.pth", "timm keys; strided head.weight, shared storage, offsets, channels_last conv")
        back = torch.load(path, weights_only=True)
        assert_same_tensors(back, sd, path)
        assert back["head.weight"].stride() == (1, CLASSES)
        assert (back["blocks.0.attn.qkv.weight"].storage().data_ptr()
                == back["blocks.0.attn.proj.weight"].storage().data_ptr())
        assert back["blocks.0.attn.proj.weight"].storage_offset() == qkv.numel() + 3
        assert back["pos_embed"].storage_offset() == 5 and back["pos_embed"].storage().size() == pos.numel() + 12
        assert back["patch_embed.proj.weight"].stride() == (CH * PATCH * PATCH, 1, PATCH * CH, CH)
        assert torch.equal(timm_forward(back, x), exp["logits_timm"])

        # 6. half precision
        f16 = collections.OrderedDict((k, v.half()) for k, v in sd.items())
        bf16 = collections.OrderedDict((k, v.bfloat16()) for k, v in sd.items())
        exp["logits_f16"] = timm_forward(collections.OrderedDict((k, v.float()) for k, v in f16.items()), x)
        exp["logits_bf16"] = timm_forward(collections.OrderedDict((k, v.float()) for k, v in bf16.items()), x)
        assert_same_tensors(f16, load_layout("timm_f16.safetensors"), "f16 weights")
        assert_same_tensors(bf16, load_layout("timm_bf16.safetensors"), "bf16 weights")
        for name, t in (("f16.pth", f16), ("bf16.pth", bf16)):
            path = save(t, name, "timm keys, every tensor %s" % next(iter(t.values())).dtype)
            assert_same_tensors(torch.load(path, weights_only=True), t, path)

        # 7. {"model": state_dict}
        path = save({"model": timm_sd}, "model_key.pth", "{'model': timm state dict}")
        assert_same_tensors(torch.load(path, weights_only=True)["model"], sd, path)

        # 8-11. JAX
        jax = timm_to_jax(sd)
        assert_same_tensors(jax_to_timm(jax), sd, "jax round trip")
        back = save_npz(jax, "jax.npz")
        assert_same_tensors(jax_to_timm(back), sd, "jax.npz")

        jc = collections.OrderedDict(("opt/target/" + k, v) for k, v in jax.items())
        back = save_npz(jc, "jax_compressed.npz", compressed=True)
        assert_same_tensors(jax_to_timm(back), sd, "jax_compressed.npz")

        g = torch.Generator().manual_seed(4321)
        pl_kernel = 0.05 * torch.randn(DIM, DIM, generator=g)  # JAX (in, out)
        pl_bias = 0.05 * torch.randn(DIM, generator=g)
        jp = timm_to_jax(sd, pre_logits=(pl_kernel, pl_bias))
        back = save_npz(jp, "jax_prelogits.npz")
        rt = jax_to_timm(back)
        assert torch.equal(rt.pop("pre_logits.fc.weight"), pl_kernel.t())
        assert torch.equal(rt.pop("pre_logits.fc.bias"), pl_bias)
        assert_same_tensors(rt, sd, "jax_prelogits.npz")
        exp["logits_prelogits"] = vit_forward(sd, x, pre_logits=(pl_kernel.t().contiguous(), pl_bias))

        sd_bv = collections.OrderedDict(sd.items())
        sd_bv["pos_embed"] = sd["pos_embed"][:, 1:].contiguous()
        jb = collections.OrderedDict(("params/" + k, v) for k, v in timm_to_jax(sd_bv, big_vision=True).items())
        assert jb["params/Transformer/encoderblock/LayerNorm_0/scale"].shape == (DEPTH, DIM)
        back = save_npz(jb, "jax_bigvision.npz")
        assert_same_tensors(jax_to_timm(back), sd_bv, "jax_bigvision.npz")
        exp["logits_bigvision"] = vit_forward(sd_bv, x, no_embed_class=True)
        # the patch-only table == the full one with a zero class row added after the concatenation
        zero_cls = torch.cat([torch.zeros(1, 1, DIM), sd_bv["pos_embed"]], dim=1)
        assert torch.equal(exp["logits_bigvision"], timm_forward(sd, x, pos_embed=zero_cls))

        # the formulas agree with the committed references: bit for bit when run on the CPU that wrote
        # them; torch's float32 kernels differ in the last bits between CPUs (AVX2 / AVX-512), hence 1e-5
        assert torch.equal(vit_forward(sd, x), exp["logits_timm"])
        for mine, theirs in (("logits_timm", "logits_timm"), ("logits_torchvision", "logits_torchvision"),
                             ("logits_hf", "logits_hf"), ("logits_f16", "logits_timm_f16"),
                             ("logits_bf16", "logits_timm_bf16")):
            d = (exp[mine].double() - committed[theirs].double()).abs().max().item()
            print("max |%s - layouts/input.safetensors %s| = %.3e" % (mine, theirs, d))
            assert d <= 1e-5, (mine, theirs, d)

    # 12. expected.safetensors
    meta = {"image_size": str(IMG), "patch_size": str(PATCH), "in_channels": str(CH), "dim": str(DIM),
            "depth": str(DEPTH), "num_heads": str(HEADS), "mlp_hidden": str(HIDDEN), "num_classes": str(CLASSES),
            "layernorm_eps": "1e-6 (timm, torchvision, JAX); 1e-12 (logits_hf)",
            "gelu": "exact (erf)", "pooling": "class token",
            "torch": torch.__version__, "torchvision": torchvision.__version__}
    w = SafeTensorsWriter(pth("expected.safetensors"))
    for k, v in exp.items():
        assert v.dtype == torch.float32, k
        w.add(k, v, "F32")
    for k, v in meta.items():
        w.meta(k, v)
    report(w.write(), "%d tensors: %s" % (len(exp), ", ".join(exp)))
    got, m, dtypes = read_safetensors(pth("expected.safetensors"))
    assert m == meta and all(d == "F32" for d in dtypes.values())
    assert_same_tensors(collections.OrderedDict(got), exp, "expected.safetensors")

    def mx(a, b):
        return (a.double() - b.double()).abs().max().item()

    print("max |logits_ema - logits_timm|        = %.3e" % mx(exp["logits_ema"], exp["logits_timm"]))
    print("max |logits_prelogits - logits_timm|  = %.3e" % mx(exp["logits_prelogits"], exp["logits_timm"]))
    print("max |logits_bigvision - logits_timm|  = %.3e" % mx(exp["logits_bigvision"], exp["logits_timm"]))


# ----------------------------------------------------------------------------------------
# pickles, torch zips and raw zips for the hostile files
# ----------------------------------------------------------------------------------------

class Pk:
    """Assembles a protocol-2 pickle opcode by opcode (the opcodes torch.save emits)."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")  # PROTO 2

    def op(self, raw):
        self.b += raw
        return self

    def glob(self, module, name):  # GLOBAL
        return self.op(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def str(self, s):  # BINUNICODE
        e = s.encode()
        return self.op(b"X" + struct.pack("<I", len(e)) + e)

    def int(self, i):
        if 0 <= i < 256:
            return self.op(b"K" + bytes([i]))                       # BININT1
        if 0 <= i < 65536:
            return self.op(b"M" + struct.pack("<H", i))             # BININT2
        if -2 ** 31 <= i < 2 ** 31:
            return self.op(b"J" + struct.pack("<i", i))             # BININT
        n = (i.bit_length() + 8) // 8
        return self.op(b"\x8a" + bytes([n]) + i.to_bytes(n, "little", signed=True))  # LONG1

    def ints(self, xs):  # MARK ints TUPLE
        self.op(b"(")
        for v in xs:
            self.int(v)
        return self.op(b"t")

    def tensor(self, storage_type, key, numel, offset, size, stride):
        """torch._utils._rebuild_tensor_v2((storage pid), offset, size, stride, False, OrderedDict())."""
        self.glob("torch._utils", "_rebuild_tensor_v2").op(b"(")
        self.op(b"(").str("storage").glob("torch", storage_type).str(key).str("cpu").int(numel).op(b"t")
        self.op(b"Q")  # BINPERSID
        self.int(offset).ints(size).ints(stride).op(b"\x89")  # NEWFALSE: requires_grad
        self.glob("collections", "OrderedDict").op(b")R")     # EMPTY_TUPLE REDUCE
        return self.op(b"tR")                                  # TUPLE REDUCE

    def done(self):
        return bytes(self.b + b".")  # STOP


def torch_zip(path, records):
    """A torch.save-format zip written by torch's own writer (torch._C.PyTorchFileWriter, as
    torch.save uses it): entries '<stem>/<name>' stored, 64-byte aligned, with data descriptors;
    '<stem>/version' ("3\\n") is added last by write_end_of_file."""
    w = torch._C.PyTorchFileWriter(path)
    for name, data in records:
        w.write_record(name, data, len(data))
    w.write_end_of_file()
    del w
    return path


def dict_pickle(items):
    """{key: tensor-or-callable(pk)} -> pickle bytes; items: [(key, fn(Pk))]."""
    p = Pk().op(b"}(")  # EMPTY_DICT MARK
    for k, fn in items:
        p.str(k)
        fn(p)
    return p.op(b"u").done()  # SETITEMS


def f32_bytes(values):
    return np.asarray(values, dtype="<f4").tobytes()


def safe_globals(pkl):
    """The GLOBALs a pickle names, read with pickletools (nothing is imported or called)."""
    return [arg.replace(" ", ".") for op, arg, _ in pickletools.genops(pkl) if op.name == "GLOBAL"]


def torch_load_outcome(path):
    """What torch.load(weights_only=True) makes of a (non-malicious) hostile file, for the log."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torchscript.pt: "dispatching to torch.jit.load"
            obj = torch.load(path, weights_only=True)
        return "loads: %s" % (type(obj).__name__,)
    except BaseException as e:  # noqa: BLE001 -- any refusal is what we want to see
        return "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:110])


def dos_date():
    return 0, (0 << 9) | (1 << 5) | 1  # 1980-01-01 00:00:00


def raw_zip(entries):
    """A zip built field by field. entries: dicts with name (str), payload (bytes as stored), method
    (0 stored / 8 deflated), crc, usize (declared uncompressed size; >= 4 GiB -> ZIP64 extra fields).
    Returns the bytes (local headers, data, central directory, end record)."""
    out, central = bytearray(), bytearray()
    t, d = dos_date()
    for e in entries:
        name = e["name"].encode()
        payload, method, crc, usize = e["payload"], e.get("method", 0), e["crc"], e["usize"]
        csize = len(payload)
        if usize >= 0xFFFFFFFF:
            ver = 45
            lextra = struct.pack("<HHQQ", 0x0001, 16, usize, csize)  # local: both sizes in the ZIP64 field
            lu = lc = 0xFFFFFFFF
            cextra = struct.pack("<HHQ", 0x0001, 8, usize)          # central: the uncompressed size only
            cu, cc = 0xFFFFFFFF, csize
        else:
            ver = 20
            lextra = cextra = b""
            lu = cu = usize
            lc = cc = csize
        off = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, ver, 0, method, t, d, crc, lc, lu, len(name), len(lextra))
        out += name + lextra + payload
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | ver, ver, 0, method, t, d, crc, cc, cu,
                               len(name), len(cextra), 0, 0, 0, 0o100644 << 16, off)
        central += name + cextra
    cd_off = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), cd_off, 0)
    return bytes(out)


def npy_bytes(a):
    f = io.BytesIO()
    np.lib.format.write_array(f, np.asarray(a), allow_pickle=False)
    return f.getvalue()


def npy_header(shape, descr="<f4"):
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    return f.getvalue()


def deflate(data, level=9):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def stored(name, data):
    return {"name": name, "payload": data, "method": 0, "crc": zlib.crc32(data), "usize": len(data)}


class _LegacyKeys:
    """pickle_module for torch.save(..., _use_new_zipfile_serialization=False): torch 1.13's legacy writer
    names storages by memory address (str(storage._cdata)); this renames them '0', '1', ... in the
    persistent ids and in the storage-key list so the file is reproducible. Nothing else changes."""

    __name__ = "pickle"  # torch.save asks (it special-cases dill)

    def __init__(self):
        self.map = {}
        outer = self

        class Pickler(pickle._Pickler):  # the pure-Python pickler: persistent_id is looked up per object
            def __setattr__(self, k, v):
                if k == "persistent_id":
                    orig = v

                    def pid(obj):
                        r = orig(obj)
                        if r is not None and r[0] == "storage":
                            r = list(r)
                            r[2] = outer.key(r[2])
                            if r[5] is not None:
                                r[5] = (outer.key(r[5][0]),) + tuple(r[5][1:])
                            r = tuple(r)
                        return r
                    v = pid
                super().__setattr__(k, v)

        self.Pickler = Pickler

    def key(self, k):
        return self.map.setdefault(k, str(len(self.map)))

    def dump(self, obj, f, protocol=2):
        if isinstance(obj, list) and obj and all(isinstance(k, str) and k in self.map for k in obj):
            obj = [self.map[k] for k in obj]
        pickle.dump(obj, f, protocol=protocol)


# ----------------------------------------------------------------------------------------
# hostile files
# ----------------------------------------------------------------------------------------

def tensor_dict_pickle(entries):
    """entries: [(key, storage_type, storage_key, numel, offset, size, stride)]."""
    return dict_pickle([(k, (lambda p, a=a: p.tensor(*a))) for k, *a in entries])


def call_pickle(module, name, args_fn):
    """{'weight': module.name(*args)} (GLOBAL + args + REDUCE)."""
    def value(p):
        p.glob(module, name)
        args_fn(p)
        p.op(b"R")
    return dict_pickle([("weight", value)])


def make_hostile():
    os.makedirs(HOSTILE_DIR, exist_ok=True)
    log = []

    def done(path, what, torch_check=True):
        report(path, what)
        if torch_check:
            log.append((os.path.basename(path), torch_load_outcome(path)))

    # a hand-assembled valid file first: proves the assembler writes what torch reads
    w4 = f32_bytes([1.0, 2.0, 3.0, 4.0])
    ok = tensor_dict_pickle([("weight", "FloatStorage", "0", 4, 0, (2, 2), (2, 1))])
    tmp = os.path.join(HOSTILE_DIR, "_assembler_check.pth")
    torch_zip(tmp, [("data.pkl", ok), ("data/0", w4)])
    assert torch.equal(torch.load(tmp, weights_only=True)["weight"], torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    os.remove(tmp)

    # code execution and unknown classes (checked with pickletools only: never unpickled)
    calls = [
        ("os_system.pth", "posix", "system", lambda p: p.str("echo pwned").op(b"\x85")),                 # TUPLE1
        ("builtins_eval.pth", "builtins", "eval",
         lambda p: p.str("__import__('os').system('echo pwned')").op(b"\x85")),
        ("subprocess_popen.pth", "subprocess", "Popen",
         lambda p: p.op(b"](").str("echo").str("pwned").op(b"e\x85")),                                   # list, APPENDS
        ("unknown_reduce.pth", "mymodule", "Evil", lambda p: p.op(b")")),                                 # EMPTY_TUPLE
    ]
    for name, mod, fn, args in calls:
        pkl = call_pickle(mod, fn, args)
        assert safe_globals(pkl) == ["%s.%s" % (mod, fn)], name
        done(torch_zip(hostile(name), [("data.pkl", pkl)]), "{'weight': %s.%s(...)} via REDUCE" % (mod, fn), False)
    pkl = dict_pickle([("weight", lambda p: p.glob("mymodule", "Evil").op(b")\x81"))])  # EMPTY_TUPLE NEWOBJ
    assert safe_globals(pkl) == ["mymodule.Evil"]
    done(torch_zip(hostile("unknown_newobj.pth"), [("data.pkl", pkl)]),
         "{'weight': mymodule.Evil.__new__()} via NEWOBJ", False)

    # pickle structure
    pkl = Pk().op(b"}q\x00(").str("weight").op(b"q\x01h\x07u").done()  # BINPUT 0, 1; BINGET 7
    done(torch_zip(hostile("memo_out_of_range.pth"), [("data.pkl", pkl)]), "BINGET 7, only memo 0 and 1 put")

    buf = io.BytesIO()
    torch.save(collections.OrderedDict([("weight", torch.arange(4.0).reshape(2, 2)), ("bias", torch.ones(2))]), buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        real = {n.split("/", 1)[1]: z.read(n) for n in z.namelist()}
    cut = real["data.pkl"][:len(real["data.pkl"]) // 2]
    done(torch_zip(hostile("truncated_pickle.pth"),
                   [("data.pkl", cut), ("data/0", real["data/0"]), ("data/1", real["data/1"])]),
         "data.pkl cut after %d of %d bytes (no STOP)" % (len(cut), len(real["data.pkl"])))

    depth = 100000
    pkl = Pk().op(b"]" * depth + b"a" * (depth - 1)).done()  # EMPTY_LIST x N, APPEND x N-1
    done(torch_zip(hostile("nesting_bomb.pth"), [("data.pkl", pkl)]), "%d nested lists (EMPTY_LIST/APPEND)" % depth)

    # storages and views
    pkl = tensor_dict_pickle([("weight", "FloatStorage", "0", 1000, 0, (1000,), (1,))])
    done(torch_zip(hostile("storage_too_big.pth"), [("data.pkl", pkl), ("data/0", w4)]),
         "storage numel 1000 (4000 bytes), data/0 holds 16")
    pkl = tensor_dict_pickle([("weight", "FloatStorage", "0", 2 ** 62, 0, (4,), (1,))])
    done(torch_zip(hostile("storage_huge_numel.pth"), [("data.pkl", pkl), ("data/0", w4)]),
         "storage numel 2^62 (x4 bytes wraps to 0 in 64 bits), data/0 holds 16, tensor (4,)")
    pkl = tensor_dict_pickle([("weight", "FloatStorage", "0", 4, 2, (4,), (1,))])
    done(torch_zip(hostile("offset_past_end.pth"), [("data.pkl", pkl), ("data/0", w4)]),
         "storage numel 4, tensor offset 2 size (4,) stride (1,): needs 6")

    # zip structure
    pa = tensor_dict_pickle([("weight", "FloatStorage", "0", 4, 0, (2, 2), (2, 1))])
    pb = tensor_dict_pickle([("weight", "FloatStorage", "1", 4, 0, (2, 2), (2, 1))])
    path = hostile("duplicate.pth")
    torch_zip(path, [("data.pkl", pa), ("data/0", w4), ("data.pkX", pb), ("data/1", f32_bytes([5, 6, 7, 8]))])
    raw = open(path, "rb").read()
    assert raw.count(b"duplicate/data.pkX") == 2  # local header + central directory
    with open(path, "wb") as f:
        f.write(raw.replace(b"duplicate/data.pkX", b"duplicate/data.pkl"))
    with zipfile.ZipFile(path) as z:
        assert [i.filename for i in z.infolist()].count("duplicate/data.pkl") == 2
        assert z.testzip() is None
    done(path, "two 'duplicate/data.pkl' entries (weights 1..4 and 5..8)")

    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    torch.save({"linear.weight": w}, hostile("legacy.pth"), pickle_module=_LegacyKeys(),
               _use_new_zipfile_serialization=False)
    assert torch.equal(torch.load(hostile("legacy.pth"), weights_only=True)["linear.weight"], w)
    done(hostile("legacy.pth"), "legacy (pre-1.6, non-zip) torch.save of {'linear.weight': (2,2)}")

    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), hostile("torchscript.pt"))
    done(hostile("torchscript.pt"), "torch.jit.save of a scripted nn.Linear(2, 2)")

    torch.save({"a": 1, "b": [1, 2]}, hostile("not_a_state_dict.pth"))
    assert torch.load(hostile("not_a_state_dict.pth"), weights_only=True) == {"a": 1, "b": [1, 2]}
    done(hostile("not_a_state_dict.pth"), "torch.save({'a': 1, 'b': [1, 2]})")

    path = hostile("bad_crc.pth")
    torch_zip(path, [("data.pkl", ok), ("data/0", w4)])
    raw = bytearray(open(path, "rb").read())
    at = raw.find(w4)
    assert at > 0 and raw.count(w4) == 1
    raw[at] ^= 0x01  # one bit of data/0's first float, CRC left as it was
    with open(path, "wb") as f:
        f.write(bytes(raw))
    with zipfile.ZipFile(path) as z:
        assert z.testzip() == "bad_crc/data/0"
    done(path, "valid {'weight': (2,2)} with one bit of data/0 flipped (CRC mismatch)")

    # .npz
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    head = npy_header((2 ** 31,))  # 8 GiB of float32
    data = head + bytes(4096)
    path = hostile("npz_bomb_declared.npz")
    with open(path, "wb") as f:
        f.write(raw_zip([{"name": "x.npy", "payload": deflate(data), "method": 8, "crc": zlib.crc32(data),
                          "usize": 8 * 2 ** 30}]))
    with zipfile.ZipFile(path) as z:
        assert z.infolist()[0].file_size == 8 * 2 ** 30
    done(path, "x.npy: declares 8 GiB uncompressed (ZIP64), deflate holds %d bytes" % len(data), False)

    n = 64 * 2 ** 20
    data = npy_header((n // 4,)) + bytes(n)
    payload = deflate(data)
    path = hostile("npz_bomb_lying.npz")
    with open(path, "wb") as f:
        f.write(raw_zip([{"name": "x.npy", "payload": payload, "method": 8, "crc": zlib.crc32(data), "usize": 1024}]))
    with zipfile.ZipFile(path) as z:
        assert z.infolist()[0].file_size == 1024
    assert len(zlib.decompress(payload, -15)) == len(data)
    done(path, "x.npy: declares 1024 bytes, deflate inflates to %d" % len(data), False)

    path = hostile("dotdot.npz")
    with open(path, "wb") as f:
        f.write(raw_zip([stored("../../x.npy", npy_bytes(a))]))
    done(path, "one stored entry named '../../x.npy' (valid (2,3) f32)", False)

    path = hostile("duplicate.npz")
    with open(path, "wb") as f:
        f.write(raw_zip([stored("x.npy", npy_bytes(a)), stored("x.npy", npy_bytes(a + 10))]))
    with zipfile.ZipFile(path) as z:
        assert z.namelist() == ["x.npy", "x.npy"] and z.testzip() is None
    done(path, "two 'x.npy' entries (values 0..5 and 10..15)", False)

    good = io.BytesIO()
    np.savez(good, a=a, b=np.ones(3, np.float32), c=np.zeros((2, 2), np.float32))
    good = good.getvalue()
    eocd = good.rfind(b"PK\x05\x06")
    cd_size, cd_off = struct.unpack("<II", good[eocd + 12:eocd + 20])
    assert cd_off + cd_size == eocd
    path = hostile("truncated_cd.npz")
    with open(path, "wb") as f:
        f.write(good[:cd_off + cd_size // 2])
    done(path, "np.savez of a, b, c cut %d bytes into its %d-byte central directory (no end record)"
         % (cd_size // 2, cd_size), False)
    path = hostile("truncated_cd_eocd.npz")
    with open(path, "wb") as f:
        f.write(good[:cd_off + cd_size // 2] + good[eocd:])
    done(path, "same, the end record kept (it still claims %d bytes of central directory at %d)" % (cd_size, cd_off),
         False)

    bad = bytearray(npy_bytes(a))
    bad[-1] ^= 0x40
    e = stored("x.npy", npy_bytes(a))
    e["payload"] = bytes(bad)
    path = hostile("bad_crc.npz")
    with open(path, "wb") as f:
        f.write(raw_zip([e]))
    done(path, "stored x.npy with its last byte changed after the CRC was taken", False)

    print("torch.load(weights_only=True) on the hostile .pth files (for reference):")
    for name, outcome in log:
        print("  %-24s %s" % (name, outcome))


# ----------------------------------------------------------------------------------------
# fuzz seeds
# ----------------------------------------------------------------------------------------

def small_state_dict():
    g = torch.Generator().manual_seed(7)
    sd = collections.OrderedDict()
    sd["f32"] = torch.randn(2, 3, generator=g)
    sd["f16"] = torch.randn(3, generator=g).half()
    sd["bf16"] = torch.randn(2, 2, generator=g).bfloat16()
    sd["f64"] = torch.randn(2, generator=g).double()
    sd["i64_scalar"] = torch.tensor(5)                        # like BatchNorm's num_batches_tracked
    sd["i32"] = torch.tensor([1, -2, 3], dtype=torch.int32)
    sd["u8"] = torch.tensor([0, 255], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False])
    base = torch.randn(3, 2, generator=g)
    sd["transposed"] = base.t()                               # stride (1, 2)
    flat = torch.randn(10, generator=g)
    sd["shared_a"] = flat[:4].view(2, 2)
    sd["shared_b"] = flat[5:9].view(4)                        # same storage, offset 5
    sd["conv_cl"] = torch.randn(2, 2, 2, 2, generator=g).contiguous(memory_format=torch.channels_last)
    sd["empty"] = torch.empty(0, 3)
    return sd


def seed(dir_, name, src=None, data=None):
    os.makedirs(dir_, exist_ok=True)
    path = os.path.join(dir_, name)
    if src is not None:
        shutil.copyfile(src, path)
    elif data is not None:
        with open(path, "wb") as f:
            f.write(data)
    assert os.path.getsize(path) < SEED_LIMIT, path
    report(path)


def make_corpus():
    sd = small_state_dict()
    path = os.path.join(CORPUS_PTH, "seed_small.pth")
    os.makedirs(CORPUS_PTH, exist_ok=True)
    torch.save(sd, path)
    back = torch.load(path, weights_only=True)
    assert all(torch.equal(back[k], v) for k, v in sd.items())
    seed(CORPUS_PTH, "seed_small.pth")
    path = os.path.join(CORPUS_PTH, "seed_small_model_key.pth")
    torch.save({"model": with_module_metadata(sd), "epoch": 3, "args": argparse.Namespace(lr=0.1)}, path)
    seed(CORPUS_PTH, "seed_small_model_key.pth")
    torch_zip(os.path.join(CORPUS_PTH, "seed_nesting_bomb_mark.pth"),
              [("data.pkl", Pk().op(b"(" * 40000 + b"l" * 40000).done())])  # MARK x N, LIST x N
    seed(CORPUS_PTH, "seed_nesting_bomb_mark.pth")
    for name in sorted(os.listdir(HOSTILE_DIR)):
        src = os.path.join(HOSTILE_DIR, name)
        if name == "nesting_bomb.pth":
            continue  # 200 KB; seed_nesting_bomb_mark.pth stands in (40000 MARK / LIST levels)
        seed(CORPUS_NPZ if name.endswith(".npz") else CORPUS_PTH, "seed_hostile_" + name, src=src)

    a = collections.OrderedDict([("w", np.arange(6, dtype=np.float32).reshape(2, 3)),
                                 ("h", np.array([1.5, -2.0], dtype=np.float16)),
                                 ("s", np.array(3.0, dtype=np.float32)),
                                 ("d", np.array([0.25, 0.5], dtype=np.float64))])
    for name, fn in (("seed_small.npz", np.savez), ("seed_small_compressed.npz", np.savez_compressed)):
        os.makedirs(CORPUS_NPZ, exist_ok=True)
        fn(os.path.join(CORPUS_NPZ, name), **a)
        seed(CORPUS_NPZ, name)
    f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    os.makedirs(CORPUS_NPZ, exist_ok=True)
    np.savez(os.path.join(CORPUS_NPZ, "seed_layouts.npz"), fortran=f,
             big_endian=np.arange(3, dtype=">f4"), scanned=np.zeros((2, 3, 4), np.float32))
    seed(CORPUS_NPZ, "seed_layouts.npz")


# ----------------------------------------------------------------------------------------
# vit_b_16 load-time pair (--vit-b-16 DIR; never committed)
# ----------------------------------------------------------------------------------------

def make_vit_b_16(out_dir, builder=None):
    import torchvision
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    m = (builder or torchvision.models.vit_b_16)()
    sd = m.state_dict()
    p = os.path.join(out_dir, "vit_b_16.pth")
    torch.save(sd, p)
    report(p, "%d tensors" % len(sd))
    back = torch.load(p, weights_only=True)
    assert_same_tensors(back, sd, p)
    del back
    w = SafeTensorsWriter(os.path.join(out_dir, "vit_b_16.safetensors"))
    for k, v in sd.items():
        w.add(k, v, "F32")
    report(w.write(), "%d tensors" % len(sd))
    del w
    got, _, _ = read_safetensors(os.path.join(out_dir, "vit_b_16.safetensors"))
    assert_same_tensors(collections.OrderedDict(got), sd, "vit_b_16.safetensors")
