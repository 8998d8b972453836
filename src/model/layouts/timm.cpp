// timm's own layout and its families in timm's names: OpenAI CLIP (timm's _convert_openai_clip
// output), DeiT distilled, DINOv2 / DeiT III (LayerScale), plain ViT. The keys are ours already;
// the marker keys tell what the names cannot: the LayerNorm eps, the activation, the projection.
#include "model/layouts/sources.h"

namespace vit::model::layouts {
namespace {

bool all_zero(const Tensor& t) {
  const Tensor f = t.to(DType::F32).contiguous();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (p[i] != 0.0f) return false;
  }
  return true;
}

Converted as_is(const NamedTensors& tensors, Family family) {
  Converted out;
  out.weights = tensors;
  out.family = family;
  return out;
}

// OpenAI CLIP: norm_pre and a patch embedding without bias.
bool openai_clip(const NamedTensors& t) {
  return find(t, "norm_pre.weight") != nullptr && find(t, "patch_embed.proj.bias") == nullptr;
}
// QuickGELU, eps 1e-5; the head, when its bias is all zero (timm writes the projection so), is the
// image projection.
Converted convert_openai_clip(const NamedTensors& tensors, const std::string&) {
  Converted out = as_is(tensors, Family::Clip);
  out.eps = 1e-5;
  out.act = "quick_gelu";
  const Tensor* head_bias = find(tensors, "head.bias");
  out.projection = find(tensors, "head.weight") != nullptr && (head_bias == nullptr || all_zero(*head_bias));
  return out;
}

bool deit(const NamedTensors& t) { return find(t, "dist_token") != nullptr; }
Converted convert_deit(const NamedTensors& tensors, const std::string&) { return as_is(tensors, Family::Deit); }

bool dinov2(const NamedTensors& t) { return find(t, "blocks.0.ls1.gamma") != nullptr; }
Converted convert_dinov2(const NamedTensors& tensors, const std::string&) { return as_is(tensors, Family::Dinov2); }

Converted convert_vit(const NamedTensors& tensors, const std::string&) { return as_is(tensors, Family::Vit); }

}  // namespace

const std::vector<Source>& timm_sources() {
  static const std::vector<Source> sources = {
      {"timm openai clip", Layout::Timm, openai_clip, convert_openai_clip},
      {"timm deit", Layout::Timm, deit, convert_deit},
      {"timm dinov2", Layout::Timm, dinov2, convert_dinov2},
      {"timm vit", Layout::Timm, nullptr, convert_vit},
  };
  return sources;
}

}  // namespace vit::model::layouts
