// VisionTransformer (see vision_transformer.h).
#include "model/vision_transformer.h"

#include "core/system.h"
#include "nn/init.h"

namespace vit::model {

PreLogits::PreLogits(int64_t in_features, int64_t out_features, Generator& gen) {
  fc = register_module("fc", std::make_shared<nn::Linear>(in_features, out_features, true, gen));
}

VisionTransformer::VisionTransformer(const ViTConfig& config, nn::GeneratorPtr gen)
    : config_(config), gen_(std::move(gen)) {
  config_.validate();
  VIT_CHECK(gen_ != nullptr, "vit", "a Generator is required");
  const ViTConfig& c = config_;
  check_fits_in_memory(4 * parameter_count(c), fmt::format("the float32 weights of {}", c.name), "");
  Generator& g = *gen_;
  const bool use_cls = c.pool == "cls";
  if (use_cls) {
    Tensor t = Tensor::empty({1, 1, c.dim});
    nn::init::normal_(t, 0.0, 1e-6, g);
    cls_token = register_parameter("cls_token", t);
  }
  Tensor pos = Tensor::empty({1, c.num_tokens(), c.dim});
  nn::init::trunc_normal_(pos, 0.02, g);
  pos_embed = register_parameter("pos_embed", pos);
  patch_embed = register_module("patch_embed", std::make_shared<nn::PatchEmbed>(c.image_size, c.patch_size,
                                                                                c.in_channels, c.dim, g));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(c.dropout, gen_));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < c.depth; ++i) {
    nn::EncoderBlockConfig bc;
    bc.dim = c.dim;
    bc.num_heads = c.num_heads;
    bc.mlp_ratio = static_cast<double>(c.hidden_dim()) / static_cast<double>(c.dim);
    bc.qkv_bias = c.qkv_bias;
    bc.dropout = c.dropout;
    bc.attn_dropout = c.attn_dropout;
    bc.drop_path = c.depth > 1 ? c.drop_path * static_cast<double>(i) / static_cast<double>(c.depth - 1) : 0.0;
    bc.eps = c.eps;
    auto block = std::make_shared<nn::EncoderBlock>(bc, gen_);
    VIT_ASSERT(block->mlp->fc1->out_features == c.hidden_dim());
    blocks->push_back(block);
  }
  if (use_cls) {
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{c.dim}, c.eps));
  } else {
    fc_norm = register_module("fc_norm", std::make_shared<nn::LayerNorm>(Shape{c.dim}, c.eps));
  }
  int64_t features = c.dim;
  if (c.representation_size > 0) {
    pre_logits = register_module("pre_logits", std::make_shared<PreLogits>(c.dim, c.representation_size, g));
    features = c.representation_size;
  }
  head = register_module("head", std::make_shared<nn::Linear>(features, c.num_classes, true, g));
  // timm's init_weights_vit_timm: every Linear gets trunc-normal(.02) weights and zero biases.
  apply([&g](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
      Tensor w = lin->weight.data();
      nn::init::trunc_normal_(w, 0.02, g);
      if (lin->bias.defined() && !nn::init::SkipInit::active()) lin->bias.data().fill_(0.0);
    }
  });
}

Variable VisionTransformer::forward_features(const Variable& images) {
  const ViTConfig& c = config_;
  VIT_CHECK(images.dim() == 4 && images.size(1) == c.in_channels && images.size(2) == c.image_size &&
                images.size(3) == c.image_size,
            "vit", "input {}: expected (B, {}, {}, {})", shape_str(images.shape()), c.in_channels, c.image_size,
            c.image_size);
  const int64_t B = images.size(0);
  Variable x = patch_embed->forward(images);                          // (B, P, D)
  if (cls_token.defined()) x = cat({cls_token.expand({B, 1, c.dim}), x}, 1);  // (B, N, D)
  x = pos_drop->forward(x + pos_embed);                               // (B, N, D)
  x = blocks->forward(x);                                             // (B, N, D)
  Variable pooled = norm ? norm->forward(x).select(1, 0)              // (B, D)
                         : fc_norm->forward(x.mean({1}));             // (B, D)
  if (pre_logits) pooled = pre_logits->forward(pooled);              // (B, R)
  return pooled;
}

Variable VisionTransformer::forward(const Variable& images) { return head->forward(forward_features(images)); }

ComputeCost macs_per_image(const ViTConfig& c) {
  const int64_t N = c.num_tokens(), D = c.dim, F = c.hidden_dim();
  ComputeCost cost;
  cost.patch_embed = c.num_patches() * D * c.in_channels * c.patch_size * c.patch_size;
  // qkv projection, q k^T, attention @ v, output projection
  cost.attention = c.depth * (N * D * 3 * D + 2 * N * N * D + N * D * D);
  cost.mlp = c.depth * (2 * N * D * F);
  const int64_t features = c.representation_size > 0 ? c.representation_size : D;
  cost.head = (c.representation_size > 0 ? D * c.representation_size : 0) + features * c.num_classes;
  return cost;
}

double parameter_count(const ViTConfig& c) {
  // Doubles: absurd configs must give a huge number to refuse, not an int64 overflow.
  const double D = static_cast<double>(c.dim), F = static_cast<double>(c.hidden_dim()),
               P = static_cast<double>(c.patch_size), C = static_cast<double>(c.in_channels),
               N = static_cast<double>(c.num_tokens()), K = static_cast<double>(c.num_classes),
               R = static_cast<double>(c.representation_size);
  double n = D * C * P * P + D + N * D + (c.pool == "cls" ? D : 0.0);               // patch_embed, pos_embed, cls
  const double block = 4 * D + 3 * D * D + (c.qkv_bias ? 3 * D : 0.0) + D * D + D  // norms, qkv, proj
                       + D * F + F + F * D + D;                                      // mlp
  n += static_cast<double>(c.depth) * block + 2 * D;                                 // blocks, final norm
  if (c.representation_size > 0) n += D * R + R;
  n += (c.representation_size > 0 ? R : D) * K + K;  // head
  return n;
}

std::string MemoryEstimate::describe() const {
  std::string s = "weights " + bytes_str(weights);
  if (training_state > 0) s += ", gradients + optimizer state + EMA " + bytes_str(training_state);
  return s + ", activations for the batch " + bytes_str(activations);
}

MemoryEstimate memory_estimate(const ViTConfig& c, int64_t batch, bool training) {
  const double D = static_cast<double>(c.dim), F = static_cast<double>(c.hidden_dim()),
               N = static_cast<double>(c.num_tokens()), H = static_cast<double>(c.num_heads),
               B = static_cast<double>(batch), L = static_cast<double>(c.depth),
               pixels = static_cast<double>(c.in_channels) * static_cast<double>(c.image_size) *
                        static_cast<double>(c.image_size);
  MemoryEstimate m;
  m.weights = 4 * parameter_count(c);
  if (training) {
    m.training_state = 4 * m.weights;  // gradient, AdamW m and v, EMA
    // Per block the backward pass keeps: two LayerNorm inputs/outputs, qkv, attention scores and
    // probabilities, attention output, projection, residuals, fc1 and GELU outputs, fc2 output.
    const double per_block = N * (10 * D + 2 * F) + 2 * H * N * N;
    m.activations = 4 * B * (L * per_block + 2 * pixels + 3 * N * D);
  } else {
    // One block at a time: qkv, scores, the MLP hidden layer, residual streams, and the input.
    m.activations = 4 * B * (N * (6 * D + F) + H * N * N + 2 * pixels);
  }
  return m;
}

void check_memory(const ViTConfig& c, int64_t batch, bool training) {
  const MemoryEstimate m = memory_estimate(c, batch, training);
  check_fits_in_memory(m.total(),
                       fmt::format("{} {} with batch {} ({})", training ? "training" : "running", c.name, batch,
                                   m.describe()),
                       training ? "; use a smaller --batch-size or model" : "; use a smaller batch or model");
}

std::vector<std::pair<std::string, int64_t>> parameters_by_part(const VisionTransformer& model) {
  std::vector<std::pair<std::string, int64_t>> parts;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::string part = name.substr(0, name.find('.'));
    if (parts.empty() || parts.back().first != part) parts.emplace_back(part, 0);
    parts.back().second += p.numel();
  }
  return parts;
}

}  // namespace vit::model
