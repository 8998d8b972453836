// Model loading for inference (see pretrained.h).
#include "infer/pretrained.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "checkpoint/int8_format.h"
#include "io/weights_file.h"
#include "nn/init.h"

namespace vit::infer {
namespace {

#include "infer/imagenet_classes.inc"

Preprocess default_preprocess(model::Layout layout, const std::string& family, const model::ViTConfig& c) {
  Preprocess p;
  p.crop = c.image_size;
  const std::vector<double> imagenet_mean = {0.485, 0.456, 0.406}, imagenet_std = {0.229, 0.224, 0.225};
  if (family == "clip") {  // OpenAI CLIP: bicubic resize of the short side to the size, centre crop, CLIP's stats
    p.filter = Filter::Bicubic;
    p.resize = c.image_size;
    p.mean = {0.48145466, 0.4578275, 0.40821073};
    p.std = {0.26862954, 0.26130258, 0.27577711};
  } else if (family == "dinov2" || family == "deit") {
    // timm's DINOv2 (crop_pct 1.0) and DeiT (0.875) configs, Hugging Face's processors (256 -> 224):
    // bicubic, ImageNet statistics.
    p.filter = Filter::Bicubic;
    const double crop_pct = family == "deit" || layout == model::Layout::HuggingFace ? 0.875 : 1.0;
    p.resize = static_cast<int64_t>(std::floor(static_cast<double>(c.image_size) / crop_pct));
    p.mean = imagenet_mean;
    p.std = imagenet_std;
  }
  if (family != "vit") {
    if (c.in_channels != 3) {
      p.mean.assign(c.in_channels, p.mean[0]);
      p.std.assign(c.in_channels, p.std[0]);
    }
    return p;
  }
  switch (layout) {
    case model::Layout::Timm:  // timm's ViT eval transform: bicubic, crop_pct 0.9, mean/std 0.5
    case model::Layout::Jax:   // (timm's config for the JAX releases it converts)
      p.filter = Filter::Bicubic;
      p.resize = static_cast<int64_t>(std::floor(static_cast<double>(c.image_size) / 0.9));
      break;
    case model::Layout::Torchvision:  // ViT_B_16_Weights: bilinear resize 256, crop 224, ImageNet stats
      p.filter = Filter::Bilinear;
      p.resize = c.image_size * 256 / 224;
      p.mean = {0.485, 0.456, 0.406};
      p.std = {0.229, 0.224, 0.225};
      break;
    case model::Layout::HuggingFace:  // ViTImageProcessor: bilinear resize to size x size, mean/std 0.5
      p.filter = Filter::Bilinear;
      p.resize = c.image_size;
      p.square = true;
      p.crop = 0;
      break;
  }
  if (c.in_channels != 3) {
    p.mean.assign(c.in_channels, p.mean[0]);
    p.std.assign(c.in_channels, p.std[0]);
  }
  return p;
}

// The "preprocess" metadata of a checkpoint (checkpoint.h), every field checked.
Preprocess parse_preprocess(const std::string& text, int64_t channels, const std::string& path) {
  Preprocess p;
  try {
    const auto j = nlohmann::json::parse(text);
    p.resize = j.at("resize").get<int64_t>();
    p.square = j.at("square").get<bool>();
    p.crop = j.at("crop").get<int64_t>();
    p.filter = parse_filter(j.at("filter").get<std::string>());
    p.mean = j.at("mean").get<std::vector<double>>();
    p.std = j.at("std").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint",
         "{}: metadata 'preprocess' is not {{\"resize\", \"square\", \"crop\", \"filter\", \"mean\", \"std\"}} ({})",
         path, e.what());
  } catch (const Error& e) {
    checkpoint::rethrow_for_file(path, e, "metadata 'preprocess'");
  }
  VIT_CHECK(p.resize > 0 && p.resize <= 65536 && p.crop >= 0 && p.crop <= 65536, "checkpoint",
            "{}: metadata 'preprocess' resize {} / crop {} out of range", path, p.resize, p.crop);
  VIT_CHECK(static_cast<int64_t>(p.mean.size()) == channels && static_cast<int64_t>(p.std.size()) == channels,
            "checkpoint", "{}: metadata 'preprocess' has {} means and {} stds for {} channels", path, p.mean.size(),
            p.std.size(), channels);
  for (size_t c = 0; c < p.mean.size(); ++c) {
    VIT_CHECK(std::isfinite(p.mean[c]) && std::isfinite(p.std[c]) && p.std[c] > 0, "checkpoint",
              "{}: metadata 'preprocess' mean/std[{}] = {}/{} (finite, std > 0)", path, c, number_str(p.mean[c]),
              number_str(p.std[c]));
  }
  return p;
}

// LayerScale is all or nothing: a file with some blocks' gammas and not others is damaged.
void check_layer_scale(const model::NamedTensors& weights, const model::ViTConfig& c, const std::string& path) {
  if (c.layer_scale <= 0) return;
  std::vector<std::string> missing;
  for (int64_t i = 0; i < c.depth; ++i) {
    for (const char* gamma : {"ls1.gamma", "ls2.gamma"}) {
      const std::string key = fmt::format("blocks.{}.{}", i, gamma);
      if (std::none_of(weights.begin(), weights.end(), [&](const auto& kv) { return kv.first == key; }))
        missing.push_back(key);
    }
  }
  VIT_CHECK(missing.empty(), "checkpoint",
            "{}: LayerScale gammas missing for some blocks: [{}] (blocks.0.ls1.gamma says the model has LayerScale; "
            "--no-strict leaves them at 1)",
            path, fmt::join(missing, ", "));
}

// An error about timm-named weights, with the foreign file's own key beside each name it quotes.
std::string with_source_keys(std::string message, const std::map<std::string, std::string>& source_keys) {
  for (const auto& [timm, key] : source_keys) {
    if (timm == key) continue;
    const std::string quoted = "'" + timm + "'";
    const size_t at = message.find(quoted);
    if (at != std::string::npos) message.insert(at + quoted.size(), " (the file's '" + key + "')");
  }
  return message;
}

}  // namespace

std::string preprocess_json(const Preprocess& p) {
  return nlohmann::json{{"resize", p.resize}, {"square", p.square}, {"crop", p.crop}, {"filter", filter_name(p.filter)},
                        {"mean", p.mean},     {"std", p.std}}
      .dump();
}

const std::vector<std::string>& imagenet_class_names() {
  static const std::vector<std::string> names(std::begin(kImageNetClasses), std::end(kImageNetClasses));
  return names;
}

checkpoint::CheckpointInfo checkpoint_info(const LoadedModel& m) {
  checkpoint::CheckpointInfo info;
  if (m.layout == "vit") {
    info = m.recorded;
  } else {
    info.normalization.mean = m.preprocess.mean;
    info.normalization.std = m.preprocess.std;
    info.preprocess_json = preprocess_json(m.preprocess);
    info.source_family = m.family;
    info.source_layout = m.layout;
  }
  info.model = m.model->config();
  info.class_names = m.class_names;
  info.evaluated = "";  // the loaded set (EMA or raw) becomes the file's only weights
  return info;
}

void apply_preprocess_overrides(Preprocess& p, const LoadOptions& o, int64_t channels) {
  const char* op = "preprocess";
  VIT_CHECK(o.resize >= 0, op, "--resize must be positive, got {}", o.resize);
  VIT_CHECK(o.crop >= -1, op, "--crop must be >= 0 (0: no crop), got {}", o.crop);
  if (o.resize > 0) p.resize = o.resize, p.square = false;
  if (o.crop >= 0) p.crop = o.crop;
  if (o.interpolation) p.filter = *o.interpolation;
  const auto n = static_cast<size_t>(channels);
  auto per_channel = [n, op](const std::vector<double>& v, const char* name) {
    VIT_CHECK(v.size() == 1 || v.size() == n, op,
              "--{} needs {} (one value for all channels, or one per channel), got {}", name,
              n == 1 ? std::string("1 value (the model takes grey images)") : fmt::format("1 or {} values", n),
              v.size());
    for (double x : v) VIT_CHECK(std::isfinite(x), op, "--{} values must be finite numbers, got {}", name, x);
    return v.size() == 1 ? std::vector<double>(n, v[0]) : v;
  };
  if (!o.mean.empty()) p.mean = per_channel(o.mean, "mean");
  if (!o.std.empty()) p.std = per_channel(o.std, "std");
  for (double s : p.std) VIT_CHECK(s > 0, op, "--std values must be positive, got {}", s);
}

LoadedModel load_model(const std::string& path, const LoadOptions& options) {
  const io::SafetensorsFile file = io::load_weights_file(path);
  LoadedModel out;
  model::ViTConfig config;
  model::NamedTensors weights, scales;
  bool interpolate_align_corners = false;
  std::map<std::string, std::string> source_keys;  // a foreign file's key of each timm name
  if (checkpoint::is_vit_checkpoint(file)) {
    // Our own checkpoint: everything is in the metadata.
    checkpoint::LoadedCheckpoint checkpoint =
        checkpoint::parse_checkpoint(file, {.allow_nonfinite = options.allow_nonfinite});
    VIT_CHECK(!options.layout || *options.layout == model::Layout::Timm, "checkpoint",
              "{}: a checkpoint written by vit train (weights under timm's names); --layout {} does not apply to it",
              path, model::layout_name(*options.layout));
    out.layout = "vit";
    out.checksum = checkpoint.checksum;
    config = checkpoint.info.model;
    out.ema = checkpoint::uses_ema(checkpoint, options.weights);
    out.recorded_ema = checkpoint::uses_ema(checkpoint, WeightSet::Recorded);
    out.weights_note = checkpoint::weights_note(checkpoint, out.ema);
    weights = out.ema ? std::move(checkpoint.ema) : std::move(checkpoint.weights);
    VIT_CHECK(!weights.empty(), "checkpoint", "{}: no {}weights in this checkpoint", path, out.ema ? "EMA " : "");
    out.class_names = checkpoint.info.class_names;
    out.preprocess.mean = checkpoint.info.normalization.mean;
    out.preprocess.std = checkpoint.info.normalization.std;
    out.preprocess.resize = config.image_size;
    out.preprocess.square = true;
    out.preprocess.crop = 0;
    out.preprocess.filter = Filter::Bilinear;
    if (!checkpoint.info.preprocess_json.empty()) {
      out.preprocess = parse_preprocess(checkpoint.info.preprocess_json, config.in_channels, path);
    }
    scales = std::move(checkpoint.scales);
    if (!checkpoint.info.source_family.empty()) out.family = checkpoint.info.source_family;  // a foreign model's copy
    out.recorded = std::move(checkpoint.info);
  } else {
    // A torch.save training checkpoint may hold an EMA state dict besides its weights: --ema picks it.
    if (options.weights == WeightSet::Ema && file.ema.empty()) {
      fail("checkpoint",
           "{}: --ema picks the EMA weights of a checkpoint written by vit train, or a PyTorch file's EMA state dict "
           "(state_dict_ema, model_ema); this {} file has none",
           path,
           file.format == "pytorch" ? "PyTorch"
           : file.format == "npz"
               ? ".npz"
               : model::layout_name(options.layout ? *options.layout : model::detect_layout(file.tensors, path)));
    }
    const bool use_ema = options.weights == WeightSet::Ema;
    const model::NamedTensors& tensors = use_ema ? file.ema : file.tensors;
    checkpoint::scan_checkpoint_file(file, /*checksum=*/false, options.allow_nonfinite, use_ema);
    const model::Layout layout = options.layout ? *options.layout : model::detect_layout(tensors, path);
    out.layout = model::layout_name(layout);
    out.format = file.format;
    out.ema = use_ema;
    if (!file.ema.empty()) {
      out.weights_note =
          use_ema ? fmt::format("EMA state dict '{}' (--ema)", file.ema_key)
                  : fmt::format("state dict '{}' (--ema: the EMA state dict '{}')",
                                file.weights_key.empty() ? std::string("(top level)") : file.weights_key, file.ema_key);
    }
    if (file.format == "pytorch") {
      out.source_note = fmt::format(
          "PyTorch (torch.save) file, state dict {}{}{}{}",
          use_ema ? "'" + file.ema_key + "'"
                  : (file.weights_key.empty() ? "at the top level" : "'" + file.weights_key + "'"),
          file.stripped_prefix.empty() ? "" : fmt::format(" (keys without their '{}' prefix)", file.stripped_prefix),
          file.ema.empty() ? ""
          : use_ema        ? fmt::format(" (--raw: '{}')", file.weights_key)
                           : fmt::format(", EMA state dict '{}' (--ema)", file.ema_key),
          file.skipped.empty() ? "" : fmt::format("; skipped: {}", fmt::join(file.skipped, ", ")));
    } else if (file.format == "npz") {
      out.source_note = "NumPy .npz archive (JAX/Flax names)";
    }
    model::NamedTensors f32;
    for (const auto& [name, t] : tensors) {
      if (model::is_ignored_key(name, layout)) {  // e.g. an old CLIP file's int64 position_ids buffer
        out.ignored_keys.push_back(name);
        continue;
      }
      VIT_CHECK(t.dtype() != DType::I64, "checkpoint", "{}: tensor '{}' is an integer tensor, not a weight", path,
                name);
      VIT_CHECK(t.dtype() != DType::I8, "checkpoint",
                "{}: tensor '{}' is int8, but the file is not an int8 model written by vit quantize (its metadata "
                "says nothing of its scales)",
                path, name);
      f32.emplace_back(name, t.to(DType::F32));
    }
    model::Converted converted = model::to_timm(f32, layout, path);
    weights = std::move(converted.weights);
    out.unexpected_keys = converted.unused;
    out.ignored_keys.insert(out.ignored_keys.end(), converted.ignored.begin(), converted.ignored.end());
    out.family = converted.family;
    // The head count: --heads, else the file's "num_heads" metadata, else the standard one for the width.
    int64_t heads = options.num_heads > 0 ? options.num_heads : converted.num_heads;
    if (auto it = file.metadata.find("num_heads"); it != file.metadata.end() && heads <= 0) {
      const std::string& text = it->second;
      const bool digits =
          !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
      heads = digits ? std::stoll(text) : 0;
      VIT_CHECK(heads > 0, "checkpoint",
                "{}: metadata 'num_heads' is '{}', not a positive integer (--heads overrides it)", path, text);
    }
    config = model::infer_config(weights, layout, heads, path);
    config.eps = converted.eps;
    config.act = converted.act;
    config.projection = converted.projection;
    if (converted.family != "vit") config.name = fmt::format("{}-{}-checkpoint", converted.family, out.layout);
    out.preprocess = default_preprocess(layout, converted.family, config);
    interpolate_align_corners = layout == model::Layout::Torchvision;
    source_keys = std::move(converted.source_keys);
  }
  if (options.num_heads > 0) config.num_heads = options.num_heads;
  if (options.eps) config.eps = *options.eps;
  if (options.act) config.act = *options.act;
  config.validate();

  out.file_image_size = config.image_size;
  // Another resolution: resample pos_embed to the new grid.
  if (options.image_size > 0 && options.image_size != config.image_size) {
    VIT_CHECK(options.image_size % config.patch_size == 0, "checkpoint",
              "--image-size {} is not a multiple of the patch size {}", options.image_size, config.patch_size);
    const int64_t grid = options.image_size / config.patch_size;
    // timm resamples with antialiasing (it matters when shrinking: DINOv2's 518-pixel grid to 224);
    // growing keeps PyTorch's plain bicubic, torchvision its align_corners form.
    const bool shrinking = grid < config.grid();
    for (auto& [name, t] : weights) {
      if (name == "pos_embed") {
        t = model::resample_pos_embed(t, config.no_embed_class ? 0 : config.prefix_tokens(), grid, grid,
                                      interpolate_align_corners, shrinking && !interpolate_align_corners);
      }
    }
    const double ratio = static_cast<double>(options.image_size) / static_cast<double>(config.image_size);
    config.image_size = options.image_size;
    out.preprocess.resize = static_cast<int64_t>(std::llround(static_cast<double>(out.preprocess.resize) * ratio));
    if (out.preprocess.crop > 0) out.preprocess.crop = options.image_size;
  }

  // Strict loading replaces every weight: skip the random initialisation and let the model use
  // the (memory-mapped) tensors themselves, so loading costs neither time nor a second copy.
  {
    std::optional<nn::init::SkipInit> skip;
    if (options.strict) skip.emplace();
    out.model = std::make_unique<model::VisionTransformer>(config, std::make_shared<Generator>(0));
  }
  checkpoint::prepare_quantized(*out.model, scales, checkpoint::quantization_bits(out.recorded.quantization_json, path),
                                path);
  if (options.strict) check_layer_scale(weights, config, path);
  try {
    const nn::LoadResult r = out.model->load_state_dict(weights, options.strict, /*share=*/true);
    out.missing_keys = r.missing_keys;
    for (const auto& k : r.unexpected_keys) out.unexpected_keys.push_back(k);
  } catch (const Error& e) {
    checkpoint::rethrow_for_file(path, Error(with_source_keys(e.what(), source_keys)));
  }
  if (options.strict && !out.unexpected_keys.empty()) {
    fail("checkpoint", "{}: unexpected keys [{}] (use --no-strict to ignore them)", path,
         fmt::join(out.unexpected_keys, ", "));
  }
  out.model->eval();
  if (out.class_names.empty() && config.num_classes == 1000) out.class_names = imagenet_class_names();
  // One name per output: a model trained on fewer classes than it has outputs (3 class folders,
  // 10 outputs) names the unused ones by number, so every predicted index has a name.
  for (auto k = static_cast<int64_t>(out.class_names.size()); k < config.num_classes; ++k) {
    out.class_names.push_back(std::to_string(k));
  }
  apply_preprocess_overrides(out.preprocess, options, config.in_channels);
  return out;
}

void own_file_weights(model::VisionTransformer& model) {
  for (auto& [_, p] : model.named_parameters()) {
    Node& node = *p.node();
    if (node.data.is_file_mapped()) node.data = node.data.clone();
  }
  model.apply([](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m); linear != nullptr && linear->quantized()) {
      if (linear->weight_scale.is_file_mapped()) linear->weight_scale = linear->weight_scale.clone();
    }
  });
}

}  // namespace vit::infer
