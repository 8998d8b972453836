#!/usr/bin/env python3
"""Generate references for ViT's descendants (DeiT, DeiT III, DINOv2, CLIP, MAE-style avg pooling,
qk_norm, registers) and for the ViT notebook's model.

Requirements: Debian's python3-torch (1.13) and python3-numpy; no timm, no transformers: the reference
models below are written in plain PyTorch after the published definitions (timm's
timm/models/vision_transformer.py + deit.py + layers/pos_embed.py; Hugging Face transformers'
modeling_deit.py, modeling_dinov2.py, modeling_dinov2_with_registers.py, modeling_clip.py).
Run with the system interpreter:

    /usr/bin/python3 tools/golden/make_golden_variants.py

Deterministic (fixed seeds, one thread); takes no arguments; prints every file it writes with its
size and re-reads each one to check it. Files are written with the hand-written safetensors writer
in tools/lib/safetensors_io.py.

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

import hashlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
# Cfg, weights and timm's forward: tools/golden/variants_timm.py; the HF models: variants_hf.py;
# key conversions and the writer: variants_io.py; the cases: variants_cases.py, variants_notebook.py
from golden.variants_cases import CASES, make_case, make_train_golden  # noqa: E402
from golden.variants_io import OUT_DIR, written  # noqa: E402
from golden.variants_notebook import make_notebook_golden  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


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
