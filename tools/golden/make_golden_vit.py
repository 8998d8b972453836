#!/usr/bin/env python3
"""Generate tests/golden/tiny_vit.safetensors: an end-to-end tiny timm-style ViT reference.

Requirements: PyTorch (tested with 1.13). Run with Debian's system interpreter:

    /usr/bin/python3 tools/golden/make_golden_vit.py

Reuses the hand-written F64 safetensors writer/reader (`Golden`, `read_safetensors`) and the
timm attention/MLP helpers from tools/golden/ops_common.py. Deterministic; takes no arguments;
prints the file size and re-reads the file to check names/shapes/values/metadata.

Model (timm VisionTransformer, float64): image 16x16, 3 channels, patch 4 (16 patches),
dim 32, depth 2, 4 heads, MLP hidden 128 (exact GELU), qkv_bias, 10 classes, LayerNorm
eps 1e-6, class-token pooling, no dropout / drop path.

    x (B,3,16,16) -> conv2d(stride 4) -> flatten(2).transpose(1,2) -> cat(cls, .) -> + pos_embed
    -> blocks: x = x + attn(norm1(x)); x = x + mlp(norm2(x)) -> norm -> token 0 -> head
    loss = F.cross_entropy(logits, targets)   (mean, no label smoothing)

Initial values, drawn in float32 after torch.manual_seed(2024) in registration order
(PARAM_SPECS below), then widened to float64:
    Linear / conv weights: torch.nn.init.trunc_normal_(std=0.02) (default a=-2, b=2)
    biases: 0.01*randn;  LayerNorm weight 1+0.1*randn, bias 0.1*randn
    cls_token, pos_embed: 0.02*randn
then x = randn(4,3,16,16), targets = randint(0,10,(4,)) (stored as F64).

Tensors, in this order:
    <name> for every parameter (initial values, registration order), x, targets,
    logits (4,10), loss (0-dim), grad.<name> for every parameter,
    adamw.losses (5,), adamw.final.<name>   -- 5 steps of torch.optim.AdamW(lr=1e-3,
        betas=(0.9,0.999), eps=1e-8) with two groups: weight_decay=0.05 for params with
        ndim >= 2 except cls_token/pos_embed, weight_decay=0.0 for the rest;
    sgd.losses (5,), sgd.final.<name>       -- 5 steps of torch.optim.SGD(lr=0.05,
        momentum=0.9, weight_decay=0) from the same initial parameters.
    Each step: zero_grad, forward on the same x/targets, loss (recorded), backward, step.
"""

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from golden.ops_common import Golden, read_safetensors, timm_attention, timm_mlp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "golden")
FILE_NAME = "tiny_vit.safetensors"

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)

IMG, PATCH, CIN, DIM, DEPTH, HEADS, MLP_RATIO, NCLS, EPS = 16, 4, 3, 32, 2, 4, 4, 10, 1e-6
NTOK = (IMG // PATCH) ** 2 + 1
HID = MLP_RATIO * DIM
BATCH = 4
SEED = 2024
STEPS = 5
LR, BETAS, ADAM_EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.05
SGD_LR, SGD_MOMENTUM = 0.05, 0.9

# (name, shape, kind) in registration order; kind selects the initializer.
PARAM_SPECS = [
    ("cls_token", (1, 1, DIM), "token"),
    ("pos_embed", (1, NTOK, DIM), "token"),
    ("patch_embed.proj.weight", (DIM, CIN, PATCH, PATCH), "weight"),
    ("patch_embed.proj.bias", (DIM,), "bias"),
]
for _i in range(DEPTH):
    _p = "blocks.%d." % _i
    PARAM_SPECS += [
        (_p + "norm1.weight", (DIM,), "ln_weight"),
        (_p + "norm1.bias", (DIM,), "ln_bias"),
        (_p + "attn.qkv.weight", (3 * DIM, DIM), "weight"),
        (_p + "attn.qkv.bias", (3 * DIM,), "bias"),
        (_p + "attn.proj.weight", (DIM, DIM), "weight"),
        (_p + "attn.proj.bias", (DIM,), "bias"),
        (_p + "norm2.weight", (DIM,), "ln_weight"),
        (_p + "norm2.bias", (DIM,), "ln_bias"),
        (_p + "mlp.fc1.weight", (HID, DIM), "weight"),
        (_p + "mlp.fc1.bias", (HID,), "bias"),
        (_p + "mlp.fc2.weight", (DIM, HID), "weight"),
        (_p + "mlp.fc2.bias", (DIM,), "bias"),
    ]
PARAM_SPECS += [
    ("norm.weight", (DIM,), "ln_weight"),
    ("norm.bias", (DIM,), "ln_bias"),
    ("head.weight", (NCLS, DIM), "weight"),
    ("head.bias", (NCLS,), "bias"),
]
PARAM_NAMES = [n for n, _, _ in PARAM_SPECS]


def init_value(shape, kind):
    """float32 draw for one parameter, widened to float64 (no grad)."""
    if kind == "weight":
        t = torch.nn.init.trunc_normal_(torch.empty(*shape, dtype=torch.float32), std=0.02)
    elif kind == "bias":
        t = torch.randn(*shape, dtype=torch.float32) * 0.01
    elif kind == "ln_weight":
        t = torch.randn(*shape, dtype=torch.float32) * 0.1 + 1.0
    elif kind == "ln_bias":
        t = torch.randn(*shape, dtype=torch.float32) * 0.1
    elif kind == "token":
        t = torch.randn(*shape, dtype=torch.float32) * 0.02
    else:
        raise ValueError(kind)
    return t.double()


def forward(p, x):
    """timm VisionTransformer forward; p: dict name -> float64 tensor. Returns logits."""
    Bx = x.shape[0]
    h = F.conv2d(x, p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], stride=PATCH)
    h = h.flatten(2).transpose(1, 2)
    h = torch.cat((p["cls_token"].expand(Bx, -1, -1), h), dim=1)
    h = h + p["pos_embed"]
    for i in range(DEPTH):
        q = "blocks.%d." % i
        a = F.layer_norm(h, (DIM,), p[q + "norm1.weight"], p[q + "norm1.bias"], EPS)
        h = h + timm_attention(a, p[q + "attn.qkv.weight"], p[q + "attn.qkv.bias"],
                               p[q + "attn.proj.weight"], p[q + "attn.proj.bias"], HEADS)
        m = F.layer_norm(h, (DIM,), p[q + "norm2.weight"], p[q + "norm2.bias"], EPS)
        h = h + timm_mlp(m, p[q + "mlp.fc1.weight"], p[q + "mlp.fc1.bias"],
                         p[q + "mlp.fc2.weight"], p[q + "mlp.fc2.bias"])
    h = F.layer_norm(h, (DIM,), p["norm.weight"], p["norm.bias"], EPS)
    return F.linear(h[:, 0], p["head.weight"], p["head.bias"])


def fresh_params(init):
    return {n: init[n].clone().requires_grad_(True) for n in PARAM_NAMES}


def train(init, x, targets, make_opt):
    p = fresh_params(init)
    opt = make_opt(p)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(forward(p, x), targets)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return torch.tensor(losses, dtype=torch.float64), p


def make_adamw(p):
    decay = [p[n] for n in PARAM_NAMES
             if p[n].ndim >= 2 and n not in ("cls_token", "pos_embed")]
    no_decay = [p[n] for n in PARAM_NAMES
                if not (p[n].ndim >= 2 and n not in ("cls_token", "pos_embed"))]
    assert len(decay) + len(no_decay) == len(PARAM_NAMES)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=LR, betas=BETAS, eps=ADAM_EPS)


def make_sgd(p):
    return torch.optim.SGD([p[n] for n in PARAM_NAMES], lr=SGD_LR, momentum=SGD_MOMENTUM,
                           weight_decay=0.0)


def build():
    torch.manual_seed(SEED)
    init = {n: init_value(s, k) for n, s, k in PARAM_SPECS}
    x = torch.randn(BATCH, CIN, IMG, IMG, dtype=torch.float32).double()
    targets = torch.randint(0, NCLS, (BATCH,), dtype=torch.int64)

    g = Golden(FILE_NAME)
    for n in PARAM_NAMES:
        g.add(n, init[n])
    g.add("x", x)
    g.add("targets", targets.double())

    p = fresh_params(init)
    logits = forward(p, x)
    loss = F.cross_entropy(logits, targets)
    loss.backward()
    g.add("logits", logits)
    g.add("loss", loss)
    for n in PARAM_NAMES:
        g.add("grad." + n, p[n].grad)

    adam_losses, adam_p = train(init, x, targets, make_adamw)
    assert adam_losses[0].item() == loss.item()
    g.add("adamw.losses", adam_losses)
    for n in PARAM_NAMES:
        g.add("adamw.final." + n, adam_p[n])

    sgd_losses, sgd_p = train(init, x, targets, make_sgd)
    assert sgd_losses[0].item() == loss.item()
    g.add("sgd.losses", sgd_losses)
    for n in PARAM_NAMES:
        g.add("sgd.final." + n, sgd_p[n])

    for k, v in [("image_size", IMG), ("patch_size", PATCH), ("in_channels", CIN),
                 ("dim", DIM), ("depth", DEPTH), ("num_heads", HEADS),
                 ("mlp_ratio", MLP_RATIO), ("num_classes", NCLS), ("eps", repr(EPS)),
                 ("lr", repr(LR)), ("betas", "%r,%r" % BETAS), ("adam_eps", repr(ADAM_EPS)),
                 ("weight_decay", repr(WD)), ("sgd_lr", repr(SGD_LR)),
                 ("sgd_momentum", repr(SGD_MOMENTUM))]:
        g.meta(k, v)
    return g


def self_check(g, path):
    tensors, meta = read_safetensors(path)
    assert [n for n, _ in tensors] == [n for n, _ in g.tensors], "name/order mismatch"
    shapes = {n: tuple(s) for n, s, _ in PARAM_SPECS}
    expect = dict(shapes)
    expect.update({"x": (BATCH, CIN, IMG, IMG), "targets": (BATCH,), "logits": (BATCH, NCLS),
                   "loss": (), "adamw.losses": (STEPS,), "sgd.losses": (STEPS,)})
    for n in PARAM_NAMES:
        for prefix in ("grad.", "adamw.final.", "sgd.final."):
            expect[prefix + n] = shapes[n]
    assert set(expect) == {n for n, _ in tensors}, "unexpected/missing tensor names"
    for (n, got), (_, want) in zip(tensors, g.tensors):
        assert got.shape == expect[n] == want.shape, (n, got.shape, expect[n])
        assert np.array_equal(got, want), n
        assert np.all(np.isfinite(got)), n
    assert meta == g.metadata, "metadata mismatch"
    return len(tensors)


def main():
    if len(sys.argv) > 1:
        sys.exit("usage: %s   (takes no arguments)" % sys.argv[0])
    os.makedirs(OUT_DIR, exist_ok=True)
    g = build()
    path = g.write(OUT_DIR)
    n = self_check(g, path)
    print("wrote %s  %d bytes, %d tensors" % (os.path.relpath(path, ROOT), os.path.getsize(path), n))
    d = dict(g.tensors)
    print("loss          %r" % float(d["loss"]))
    print("adamw.losses  %s" % ", ".join(repr(float(v)) for v in d["adamw.losses"]))
    print("sgd.losses    %s" % ", ".join(repr(float(v)) for v in d["sgd.losses"]))
    print("self-check OK")


if __name__ == "__main__":
    main()
