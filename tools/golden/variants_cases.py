"""make_golden_variants.py's inference cases (CASES, make_case: <case>.{timm,hf,expected}.safetensors)
and the float64 training golden train_ls_reg_dist.safetensors (make_train_golden)."""

import collections
import json
import os

import torch
import torch.nn.functional as F

from .variants_hf import CLIPVisionModelWithProjection, DeiTForImageClassificationWithTeacher, Dinov2Model
from .variants_io import (OUT_DIR, dinov2_original_to_hf, dinov2_reg_original_to_timm, emit, load_hf, mx,
                          timm_to_hf_clip, timm_to_hf_deit)
from .variants_timm import Cfg, make_timm_weights, timm_forward


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
            print("  %-16s max|features gelu - quick_gelu| = %.2e"
                  % (name, mx(g3["features"], ref["timm"]["features"])))
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
    loss = ((1 - alpha) * F.cross_entropy(out["logits_cls"], labels)
            + alpha * F.cross_entropy(out["logits_dist"], teacher))
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
