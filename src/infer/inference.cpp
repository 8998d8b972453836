// The graph-free inference session (see inference.h): input checks, then the stages of
// vit_stages.h in order.
#include "infer/inference.h"

#include "infer/session_weights.h"
#include "infer/vit_stages.h"

namespace vit::infer {

InferenceSession::InferenceSession(const model::VisionTransformer& model, WeightPages pages, Precision precision)
    : model_(model),
      model_pool_(model.config().pool_kind() == model::PoolKind::Cls ? Pool::Cls : Pool::Avg),
      activations_(std::make_unique<Activations>()) {
  VIT_CHECK(supports(model), "inference",
            "the inference path needs float32 (or int8 Linear) parameters with contiguous storage");
  weights_ = std::make_shared<const SessionWeights>(model, pages == WeightPages::Release, pages == WeightPages::Own,
                                                    precision == Precision::BF16);
}

InferenceSession::~InferenceSession() = default;

const SessionWeights& InferenceSession::weights() const { return *weights_; }

bool InferenceSession::supports(const model::VisionTransformer& model) {
  // int8 parameters only come as the weights of int8 Linears (load_state_dict refuses others).
  for (const auto& [name, p] : model.named_parameters()) {
    const DType d = p.data().dtype();
    if ((d != DType::F32 && d != DType::I8) || !p.data().is_contiguous()) return false;
  }
  return true;
}

Tensor InferenceSession::forward(const Tensor& images) {
  VIT_CHECK(model_.head != nullptr, "vit",
            "{} has no classification head (num_classes 0: a feature extractor); use its features (vit embed)",
            model_.config().name);
  return run(images, Result::Logits, model_pool_);
}

Tensor InferenceSession::forward_features(const Tensor& images) { return run(images, Result::Features, model_pool_); }

Tensor InferenceSession::embed(const Tensor& images, Pool pool) {
  VIT_CHECK(pool != Pool::Cls || model_.config().class_token(), "embed",
            "{} has no class token: pool it with avg (or take the tokens)", model_.config().name);
  return run(images, pool == Pool::Tokens ? Result::Tokens : Result::Embedding, pool);
}

Tensor InferenceSession::run(const Tensor& input, Result result, Pool pool) {
  const model::ViTConfig& c = model_.config();
  VIT_CHECK(input.dim() == 4 && input.size(1) == c.in_channels && input.size(2) == c.image_size &&
                input.size(3) == c.image_size,
            "vit", "input {}: expected (B, {}, {}, {})", shape_str(input.shape()), c.in_channels, c.image_size,
            c.image_size);
  const Tensor images = input.to(DType::F32).contiguous();
  const VitDims d(c, images.size(0));
  const SessionWeights& w = *weights_;
  Activations& act = *activations_;
  const int64_t features_width = c.representation_size > 0 ? c.representation_size : d.D;
  const bool head_output = result == Result::Logits || (result == Result::Embedding && c.projection);
  if (d.B == 0) {
    if (result == Result::Tokens) return Tensor::empty({0, d.N, d.D});
    if (result == Result::Logits) return Tensor::empty({0, c.num_classes});
    return Tensor::empty({0, head_output ? c.num_classes : features_width});
  }

  embed_image_patches(w, c, d, images.data<float>(), act);  // x (B, N, D)
  for (const LayerWeights& layer : w.layers) vit_transformer_layer(layer, d, act);

  if (result == Result::Tokens) {
    Tensor tokens = Tensor::empty({d.B, d.N, d.D});
    final_tokens(w, d, act, tokens.data<float>());
    return tokens;
  }
  const bool distilled = result == Result::Logits && w.head_dist;
  const Features f = pool_features(w, d, pool == Pool::Tokens ? model_pool_ : pool, distilled, act);
  if (!head_output) {
    Tensor features = Tensor::empty({d.B, f.width});
    std::copy(f.data, f.data + d.B * f.width, features.data<float>());
    return features;
  }
  Tensor logits = Tensor::empty({d.B, w.head.out});
  classifier_head(w, d, f, distilled, c.head_tanh, logits.data<float>());
  return logits;
}

}  // namespace vit::infer
