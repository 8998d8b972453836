// Shared inference flags (see model_options.h).
#include "cli/model_options.h"

#include <fmt/ranges.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/validators.h"
#include "data/image.h"
#include "kernels/gemm/bf16_gemm.h"

namespace vit::cli {

void add_model_options(CLI::App* cmd, ModelOptions& o, bool require_checkpoint) {
  o.max_pixels = data::kDefaultMaxPixels;
  cmd->add_option("--checkpoint", o.checkpoint,
                  "model file: .safetensors (ours, timm, torchvision, Hugging Face), PyTorch .pth/.bin or JAX .npz")
      ->required(require_checkpoint);
  add_load_options(cmd, o);
  cmd->add_option("--threads", o.threads, "threads (0: all cores)")->check(kThreads);
  cmd->add_option("--max-pixels", o.max_pixels, "refuse images with more pixels")->check(kPositive);
  add_precision_option(cmd, o.precision);
}

void add_load_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("--layout", o.layout,
                  "force the key layout: timm, torchvision, huggingface, jax (default: detected)");
  cmd->add_option("--heads", o.heads, "attention heads (default: from the file, else standard for the width)")
      ->check(kPositive);
  cmd->add_option("--eps", o.eps,
                  "LayerNorm eps (default: timm/torchvision 1e-6, Hugging Face ViT/DeiT 1e-12, DINOv2 1e-6, CLIP 1e-5)")
      ->check(kPositive);
  cmd->add_option("--act", o.act,
                  "MLP activation (default: the file's; a timm-layout OpenAI CLIP runs quick_gelu, LAION's CLIPs need "
                  "gelu; JAX files run exact gelu as timm does, gelu_tanh as JAX does)")
      ->check(CLI::IsMember({"gelu", "gelu_tanh", "quick_gelu", "relu"}));
  cmd->add_option("--image-size", o.image_size, "run at this resolution (position embedding interpolated)")
      ->check(kPositive);
  cmd->add_flag("--no-strict", o.no_strict, "list missing / unexpected keys and continue");
  add_weight_flags(cmd, o.ema, o.raw);
  cmd->add_flag("--allow-nonfinite", o.allow_nonfinite, "load weights that hold NaN or Inf (refused by default)");
  cmd->add_option("--resize", o.resize, "preprocessing: resize the shorter side to this")->check(kPositive);
  cmd->add_option("--crop", o.crop, "preprocessing: center crop size (0: none)")->check(kNonNegative);
  cmd->add_option("--interpolation", o.interpolation, "preprocessing: bilinear or bicubic")
      ->check(CLI::IsMember({"bilinear", "bicubic"}));
  cmd->add_option("--mean", o.mean, "preprocessing: per-channel mean")->expected(1, 3);
  cmd->add_option("--std", o.std, "preprocessing: per-channel std")->expected(1, 3);
}

void add_precision_option(CLI::App* cmd, std::string& precision) {
  cmd->add_option("--precision", precision,
                  "fp32, or bf16: the Linear layers in bfloat16 with float32 accumulation (AVX512_BF16 where the CPU "
                  "has it; LayerNorm, softmax and the residual stream stay float32)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

infer::Precision inference_precision(const std::string& precision) {
  const infer::Precision p = infer::parse_precision(precision);
  if (p == infer::Precision::BF16 && !kernels::bf16_gemm_native()) {
    std::fprintf(stderr,
                 "note: no AVX512_BF16 here (the CPU lacks it, or VIT_ISA caps the kernels below AVX-512): --precision "
                 "bf16 runs a plain C++ emulation (same numbers, much slower than fp32)\n");
  }
  return p;
}

void add_weight_flags(CLI::App* cmd, bool& ema, bool& raw) {
  auto* e = cmd->add_flag(
      "--ema", ema, "a vit checkpoint's EMA weights (default: the weights its run evaluated, EMA if it had them)");
  auto* r = cmd->add_flag("--raw", raw, "a vit checkpoint's raw weights, not their EMA");
  e->excludes(r);
}

infer::WeightSet weight_set(bool ema, bool raw) {
  return ema ? infer::WeightSet::Ema : raw ? infer::WeightSet::Raw : infer::WeightSet::Recorded;
}

void warn_no_checksum(const std::string& path) {
  std::fprintf(stderr, "warning: %s has no checksum (written by an older vit): its integrity cannot be verified\n",
               path.c_str());
}

infer::LoadOptions load_options(const ModelOptions& o) {
  infer::LoadOptions options;
  if (!o.layout.empty()) options.layout = model::parse_layout(o.layout);
  options.num_heads = o.heads;
  if (o.eps > 0) options.eps = o.eps;
  if (!o.act.empty()) options.act = o.act;
  options.image_size = o.image_size;
  options.strict = !o.no_strict;
  options.weights = weight_set(o.ema, o.raw);
  options.allow_nonfinite = o.allow_nonfinite;
  options.resize = o.resize;
  options.crop = o.crop;
  if (!o.interpolation.empty()) options.interpolation = infer::parse_filter(o.interpolation);
  options.mean = o.mean;
  options.std = o.std;
  return options;
}

infer::LoadedModel load_model(const ModelOptions& o) {
  set_threads(o.threads);
  infer::LoadedModel m = infer::load_model(o.checkpoint, load_options(o));
  if (m.layout == "vit" && m.checksum.empty()) warn_no_checksum(o.checkpoint);
  // Weights other than those the run evaluated, asked for with --raw / --ema: said, since its
  // accuracy is not the one training printed. (The default is said by each command's own output.)
  if (!m.weights_note.empty() && (o.ema || o.raw) && m.ema != m.recorded_ema) {
    std::fprintf(stderr, "note: %s: %s\n", o.checkpoint.c_str(), m.weights_note.c_str());
  }
  if (o.no_strict) {
    for (const auto& k : m.missing_keys)
      std::fprintf(stderr, "warning: %s: missing key '%s' (left at its initial value)\n", o.checkpoint.c_str(),
                   k.c_str());
    for (const auto& k : m.unexpected_keys)
      std::fprintf(stderr, "warning: %s: unexpected key '%s' (ignored)\n", o.checkpoint.c_str(), k.c_str());
    if (!m.ignored_keys.empty()) {  // known keys inference has no use for: DINOv2's mask_token, CLIP's position_ids
      std::fprintf(stderr, "note: %s: not used for inference: %s\n", o.checkpoint.c_str(),
                   fmt::format("{}", fmt::join(m.ignored_keys, ", ")).c_str());
    }
  }
  return m;
}

infer::Predictor load_predictor(const ModelOptions& o, infer::Predictor::WeightPages pages) {
  const infer::Precision precision = inference_precision(o.precision);
  return infer::Predictor(load_model(o), pages, precision);
}

}  // namespace vit::cli
