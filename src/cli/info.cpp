// `vit info`: a model's config, parameters per part and in total, and compute per image, for a
// preset (model flags override its values) or a checkpoint.
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/bf16_format.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/int8_format.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/printable.h"
#include "infer/load_model.h"
#include "infer/load_options.h"
#include "kernels/cpu_features.h"
#include "nn/layers.h"
#include "train/train_config.h"

namespace vit::cli {
namespace {

// Precision and bytes in memory per top-level part (blocks together), int8 scales included; for a
// file storing weights as bf16 (storage_json, checkpoint/bf16_format.h), their share of each part.
void print_storage(const model::VisionTransformer& model, const std::string& path, const std::string& storage_json) {
  struct Part {
    int64_t f32 = 0, i8 = 0, scales = 0, bf16 = 0;
  };
  const std::vector<std::string> stored_bf16 = checkpoint::bf16_storage_names(storage_json);
  std::vector<std::pair<std::string, Part>> parts;
  auto part_of = [&parts](const std::string& name) -> Part& {
    const std::string top = name.substr(0, name.find('.'));
    for (auto& [n, p] : parts) {
      if (n == top) return p;
    }
    return parts.emplace_back(top, Part{}).second;
  };
  for (const auto& [name, p] : model.named_parameters()) {
    (p.data().dtype() == DType::I8 ? part_of(name).i8 : part_of(name).f32) += p.data().numel();
    if (std::find(stored_bf16.begin(), stored_bf16.end(), name) != stored_bf16.end())
      part_of(name).bf16 += p.data().numel();
  }
  for (const auto& [name, s] : checkpoint::quantization_scales(model)) part_of(name).scales += s.numel();
  int bits = 0;  // the int8 scheme's weight bits (one per file)
  for (const auto& [name, l] : checkpoint::named_linears(model)) {
    if (l->quantized()) bits = l->weight_bits;
  }
  const std::string kind =
      bits ? fmt::format("int8 model: Linear weights int8 ({}-bit, scheme {}), the rest float32", bits,
                         bits == 8 ? checkpoint::kQuantizationScheme8 : checkpoint::kQuantizationScheme7)
      : !stored_bf16.empty()
          ? fmt::format(
                "bf16 file: Linear and convolution weights stored as bfloat16 (scheme {}), widened to float32 "
                "in memory; the rest float32",
                checkpoint::kBf16Scheme)
          : "float32 model";
  std::printf("storage (%s):\n", kind.c_str());
  double total = 0;
  for (const auto& [name, p] : parts) {
    const double bytes = static_cast<double>(p.i8 + 4 * (p.f32 + p.scales));
    total += bytes;
    const std::string precision =
        p.bf16 > 0  ? fmt::format("float32 (bf16 in the file: {:.1f}%)",
                                  100.0 * static_cast<double>(p.bf16) / static_cast<double>(p.f32))
        : p.i8 == 0 ? "float32"
                    : fmt::format("int8 {:.1f}% + float32 (scales {}, other {})",
                                  100.0 * static_cast<double>(p.i8) / static_cast<double>(p.i8 + p.f32 + p.scales),
                                  p.scales, p.f32);
    std::printf("  %-12s %12.3f MB  %s\n", name.c_str(), bytes / 1e6, precision.c_str());
  }
  std::error_code ec;
  const auto file = std::filesystem::file_size(path, ec);
  std::printf("  %-12s %12.3f MB  (the file: %.3f MB)\n", "total", total / 1e6,
              ec ? 0.0 : static_cast<double>(file) / 1e6);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto preset = std::make_shared<std::string>();
  auto checkpoint = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "print a model's config, parameter counts and FLOPs per image");
  auto* p = cmd->add_option("--preset", *preset, "preset name");
  auto model_flags = std::make_shared<ModelFlags>(*cmd);
  auto* c = cmd->add_option("--checkpoint", *checkpoint,
                            "checkpoint file: .safetensors (ours, int8 ones included, timm, torchvision, Hugging "
                            "Face), PyTorch .pth/.bin, JAX .npz");
  p->excludes(c);
  model_flags->exclude(c, "--heads");  // a foreign checkpoint of a non-standard width needs its head count
  cmd->callback([=] {
    VIT_CHECK(!preset->empty() || !checkpoint->empty() || model_flags->given(), "info",
              "give --preset NAME or --checkpoint FILE (presets: {})", fmt::join(model::preset_names(), ", "));
    std::unique_ptr<model::VisionTransformer> model;
    std::string origin;        // a checkpoint's layout, family and the keys inference does not use
    std::string storage_json;  // a bf16 file's "storage" metadata
    std::string preprocess;    // a file's evaluation transform, as vit eval / predict / serve apply it
    std::string augmentation;  // the training augmentation of the run that wrote the file
    if (!checkpoint->empty()) {
      // --heads, the one load option of vit info (a model flag without --checkpoint), through infer's table.
      OptionArgs heads;
      if (model_flags->heads_given() > 0) heads.set("heads", {std::to_string(model_flags->heads_given())});
      infer::LoadedModel loaded = infer::load_model(*checkpoint, infer::make_load_settings(heads));
      origin = fmt::format(
          "  {} layout{}", loaded.layout,
          loaded.family != model::Family::Vit ? fmt::format(" ({})", model::family_name(loaded.family)) : "");
      if (!loaded.source_note.empty()) origin += "; " + loaded.source_note;  // a .pth's says which state dict
      if (!loaded.weights_note.empty() && loaded.source_note.empty()) origin += "; " + loaded.weights_note;
      if (!loaded.ignored_keys.empty())
        origin += fmt::format("; not used for inference: {}", printable_list(loaded.ignored_keys));
      storage_json = loaded.recorded.storage_json;
      preprocess = loaded.preprocess.describe();
      if (!loaded.recorded.train_config_json.empty()) {
        try {
          augmentation = train::TrainConfig::from_json(loaded.recorded.train_config_json).augment.describe();
        } catch (const Error&) {  // a config this version cannot read: nothing to say about it
        }
      }
      model = std::move(loaded.model);
    } else {
      // Model flags without --preset describe a "custom" model over vit_digits, as `vit train` does.
      const model::ViTConfig config = model_flags->config(preset->empty() ? "vit_digits" : *preset, !preset->empty());
      model = std::make_unique<model::VisionTransformer>(config, std::make_shared<Generator>(0));
    }
    const model::ViTConfig& m = model->config();
    std::printf("%s\n", printable(m.name).c_str());  // a checkpoint's own name
    std::printf("  image %ldx%ldx%ld, patch %ld -> %ld patches, %ld tokens\n", m.in_channels, m.image_size,
                m.image_size, m.patch_size, m.num_patches(), m.num_tokens());
    if (m.hybrid()) {
      const int64_t side = m.feature_size();
      std::printf(
          "  backbone: 3x3 stem (stride %ld) + %ld ResNet stage%s x %ld block%s, %ld to %ld channels, BatchNorm, "
          "a %ldx%ld map in %ldx%ld patches\n",
          m.conv_stem_stride, m.conv_stages, m.conv_stages == 1 ? "" : "s", m.conv_blocks,
          m.conv_blocks == 1 ? "" : "s", m.conv_channels, m.embed_channels(), side, side, m.embed_patch(),
          m.embed_patch());
    }
    if (m.stem_layers > 0) {
      std::printf("  stem: %ld x (3x3 convolution to %ld channels + GELU) before the patch embedding\n", m.stem_layers,
                  m.stem_channels);
    }
    std::printf("  dim %ld, depth %ld, heads %ld (head dim %ld), mlp %ld, qkv_bias %s, pool %s, eps %g, classes %ld\n",
                m.dim, m.depth, m.num_heads, m.head_dim(), m.hidden_dim(), m.qkv_bias ? "yes" : "no", m.pool.c_str(),
                m.eps, m.num_classes);
    std::vector<std::string> options;  // what ViT's descendants add, when set
    if (m.dist_token) options.push_back("distillation token + head_dist");
    if (m.reg_tokens > 0) options.push_back(fmt::format("{} register tokens", m.reg_tokens));
    if (m.no_embed_class) options.push_back("pos_embed over the patches only");
    if (m.pre_norm) options.push_back("norm_pre, no patch bias");
    if (m.layer_scale > 0) options.push_back(fmt::format("LayerScale (init {})", m.layer_scale));
    if (m.qk_norm) options.push_back("qk_norm");
    if (m.act != "gelu") options.push_back("act " + m.act);
    if (m.dim_head > 0) options.push_back(fmt::format("attention width {}", m.attn_dim()));
    if (m.mlp_layers == 1) options.push_back("one-Linear MLP");
    if (m.norm_tokens) options.push_back("LayerNorm over tokens x channels");
    if (!m.final_norm) options.push_back("no final norm");
    if (m.head_tanh) options.push_back("tanh head");
    if (m.projection) options.push_back(fmt::format("head = image projection to {}", m.num_classes));
    if (!m.has_head()) options.push_back("no head (features only)");
    if (!options.empty()) std::printf("  %s\n", fmt::format("{}", fmt::join(options, ", ")).c_str());
    if (!origin.empty()) std::printf("%s\n", origin.c_str());
    if (!preprocess.empty()) std::printf("  preprocessing (vit eval, predict, serve): %s\n", preprocess.c_str());
    if (!augmentation.empty()) std::printf("  training augmentation (the run's): %s\n", augmentation.c_str());
    std::printf("  dropout %g, attn_dropout %g, drop_path %g\n", m.dropout, m.attn_dropout, m.drop_path);
    std::printf("parameters:\n");
    int64_t total = 0;
    for (const auto& [part, n] : model::parameters_by_part(m)) {
      std::printf("  %-12s %14ld\n", part.c_str(), n);
      total += n;
    }
    if (m.depth > 0) std::printf("  (each block: %ld)\n", model::parameters_per_block(m));
    std::printf("  %-12s %14ld\n", "total", total);
    if (!checkpoint->empty()) print_storage(*model, *checkpoint, storage_json);
    const model::ComputeCost cost = model::macs_per_image(m);
    std::printf("compute per image (forward): %.3f GMACs = %.3f GFLOPs\n", static_cast<double>(cost.total()) / 1e9,
                2.0 * static_cast<double>(cost.total()) / 1e9);
    const std::string stem = cost.stem > 0 ? fmt::format("stem {:.3f}, ", static_cast<double>(cost.stem) / 1e9) : "";
    std::printf("  %spatch_embed %.3f, attention %.3f, mlp %.3f, head %.3f GMACs\n", stem.c_str(),
                cost.patch_embed / 1e9, cost.attention / 1e9, cost.mlp / 1e9, cost.head / 1e9);
    std::printf("kernels on this machine: %s\n", kernels::kernels_summary().c_str());
  });
}

}  // namespace vit::cli
