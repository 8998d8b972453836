"""make_golden_layouts.py's files: the writer/checker helpers (emit, check_file, write_weights,
load_back), tests/golden/layouts/ (make_layouts) and tests/golden/preprocess/ (make_preprocess)."""

import collections
import os

import numpy as np
import torch
import torch.nn.functional as F

from lib.safetensors_io import SafeTensorsWriter, read_safetensors, round_to_dtype

from .layouts_model import (CH, CLASSES, DEPTH, DIM, GRID, HEADS, HIDDEN, IMG, PATCH, HFViTForImageClassification,
                            make_timm_weights, make_torchvision_model, timm_forward, timm_to_hf,
                            timm_to_torchvision)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYOUT_DIR = os.path.join(ROOT, "tests", "golden", "layouts")
PRE_DIR = os.path.join(ROOT, "tests", "golden", "preprocess")

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
        print("wrote %-50s %8d bytes, %dx%d (from %dx%d)"
              % (os.path.relpath(png, ROOT), os.path.getsize(png), nw, nh, w, h))
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
