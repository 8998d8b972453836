// timm / torchvision / Hugging Face / JAX weights as a model source (see model_source.h): the
// layout detected, the keys renamed to timm's, the config inferred from the shapes, the family's
// evaluation transform.
#include <fmt/ranges.h>

#include <cmath>

#include "checkpoint/checkpoint.h"
#include "core/printable.h"
#include "infer/model_source.h"
#include "model/layouts/config_from_shapes.h"

namespace vit::infer {
namespace {

const std::vector<double> kImagenetMean = {0.485, 0.456, 0.406}, kImagenetStd = {0.229, 0.224, 0.225};

// A descendant's transform (timm's configs, Hugging Face's processors): OpenAI CLIP resizes the
// short side bicubically to the size with CLIP's statistics; DINOv2 (crop_pct 1.0) and DeiT (0.875;
// Hugging Face's 256 -> 224) resize bicubically with ImageNet's.
void family_preprocess(Preprocess& p, model::Layout layout, model::Family family, const model::ViTConfig& c) {
  if (family == model::Family::Clip) {
    p.filter = Filter::Bicubic;
    p.resize = c.image_size;
    p.mean = {0.48145466, 0.4578275, 0.40821073};
    p.std = {0.26862954, 0.26130258, 0.27577711};
  } else if (family == model::Family::Dinov2 || family == model::Family::Deit) {
    p.filter = Filter::Bicubic;
    const double crop_pct = family == model::Family::Deit || layout == model::Layout::HuggingFace ? 0.875 : 1.0;
    p.resize = static_cast<int64_t>(std::floor(static_cast<double>(c.image_size) / crop_pct));
    p.mean = kImagenetMean;
    p.std = kImagenetStd;
  }
}

// A plain ViT's transform, as each source publishes it.
void layout_preprocess(Preprocess& p, model::Layout layout, const model::ViTConfig& c) {
  switch (layout) {
    case model::Layout::Timm:  // timm's ViT eval transform: bicubic, crop_pct 0.9, mean/std 0.5
    case model::Layout::Jax:   // (timm's config for the JAX releases it converts)
      p.filter = Filter::Bicubic;
      p.resize = static_cast<int64_t>(std::floor(static_cast<double>(c.image_size) / 0.9));
      break;
    case model::Layout::Torchvision:  // ViT_B_16_Weights: bilinear resize 256, crop 224, ImageNet stats
      p.filter = Filter::Bilinear;
      p.resize = c.image_size * 256 / 224;
      p.mean = kImagenetMean;
      p.std = kImagenetStd;
      break;
    case model::Layout::HuggingFace:  // ViTImageProcessor: bilinear resize to size x size, mean/std 0.5
      p.filter = Filter::Bilinear;
      p.resize = c.image_size;
      p.square = true;
      p.crop = 0;
      break;
  }
}

// Which state dict of a torch.save file was read, and what else it held.
std::string torch_note(const io::TorchCheckpoint& t, bool use_ema) {
  const std::string dict =
      use_ema ? "'" + t.ema_key + "'" : (t.weights_key.empty() ? "at the top level" : "'" + t.weights_key + "'");
  return fmt::format(
      "PyTorch (torch.save) file, state dict {}{}{}{}", dict,
      t.stripped_prefix.empty() ? "" : fmt::format(" (keys without their '{}' prefix)", t.stripped_prefix),
      t.ema.empty() ? ""
      : use_ema     ? fmt::format(" (--raw: '{}')", t.weights_key)
                    : fmt::format(", EMA state dict '{}' (--ema)", t.ema_key),
      t.skipped.empty() ? "" : fmt::format("; skipped: {}", short_list(t.skipped)));
}

// The weights as float32, known keys inference does not use set aside (an old CLIP file's int64
// position_ids buffer); integer and int8 tensors are refused.
model::NamedTensors float_weights(const model::NamedTensors& tensors, model::Layout layout, const std::string& path,
                                  std::vector<std::string>& ignored) {
  model::NamedTensors f32;
  for (const auto& [name, t] : tensors) {
    if (model::is_ignored_key(name, layout)) {
      ignored.push_back(name);
      continue;
    }
    VIT_CHECK(t.dtype() != DType::I64, "checkpoint", "{}: tensor '{}' is an integer tensor, not a weight", path,
              printable(name));
    VIT_CHECK(t.dtype() != DType::I8, "checkpoint",
              "{}: tensor '{}' is int8, but the file is not an int8 model written by vit quantize (its metadata "
              "says nothing of its scales)",
              path, printable(name));
    f32.emplace_back(name, t.to(DType::F32));
  }
  return f32;
}

// The head count the file records: what the names or shapes told, else its "num_heads" metadata
// (0: none; then --heads, or the standard one for the width).
int64_t recorded_heads(const io::WeightsFile& file, int64_t converted) {
  if (converted > 0) return converted;
  const auto it = file.metadata.find("num_heads");
  if (it == file.metadata.end()) return 0;
  const std::string& text = it->second;
  const bool digits = !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
  const int64_t heads = digits ? std::stoll(text) : 0;
  VIT_CHECK(heads > 0, "checkpoint", "{}: metadata 'num_heads' is '{}', not a positive integer (--heads overrides it)",
            file.path, text);
  return heads;
}

// --ema on a file without an EMA state dict is refused, naming what the file is.
void check_ema_asked(const io::WeightsFile& file, const LoadSettings& options) {
  if (options.weights != WeightSet::Ema || !file.torch.ema.empty()) return;
  const std::string what =
      file.format != io::WeightsFormat::Safetensors
          ? io::format_name(file.format)
          : model::layout_name(options.layout ? *options.layout : model::detect_layout(file.tensors, file.path));
  fail("checkpoint",
       "{}: --ema picks the EMA weights of a checkpoint written by vit train, or a PyTorch file's EMA state dict "
       "(state_dict_ema, model_ema); this {} file has none",
       file.path, what);
}

}  // namespace

Preprocess default_preprocess(model::Layout layout, model::Family family, const model::ViTConfig& c) {
  Preprocess p;
  p.crop = c.image_size;
  if (family != model::Family::Vit) {
    family_preprocess(p, layout, family, c);
  } else {
    layout_preprocess(p, layout, c);
  }
  if (c.in_channels != 3) {
    p.mean.assign(c.in_channels, p.mean[0]);
    p.std.assign(c.in_channels, p.std[0]);
  }
  return p;
}

ModelSource foreign_source(const io::WeightsFile& file, const LoadSettings& options) {
  const std::string& path = file.path;
  check_ema_asked(file, options);
  const bool use_ema = options.weights == WeightSet::Ema;
  const model::NamedTensors& tensors = use_ema ? file.torch.ema : file.tensors;
  checkpoint::scan_checkpoint_file(file, /*checksum=*/false, options.allow_nonfinite, use_ema);
  const model::Layout layout = options.layout ? *options.layout : model::detect_layout(tensors, path);
  ModelSource s;
  LoadedModel& d = s.described;
  d.layout = model::layout_name(layout);
  d.format = file.format;
  d.ema = use_ema;
  const io::TorchCheckpoint& torch = file.torch;
  if (!torch.ema.empty()) {
    const std::string weights_key = torch.weights_key.empty() ? std::string("(top level)") : torch.weights_key;
    d.weights_note = use_ema
                         ? fmt::format("EMA state dict '{}' (--ema)", torch.ema_key)
                         : fmt::format("state dict '{}' (--ema: the EMA state dict '{}')", weights_key, torch.ema_key);
  }
  if (file.format == io::WeightsFormat::TorchZip) d.source_note = torch_note(torch, use_ema);
  if (file.format == io::WeightsFormat::Npz) d.source_note = "NumPy .npz archive (JAX/Flax names)";
  model::Converted converted = model::to_timm(float_weights(tensors, layout, path, d.ignored_keys), layout, path);
  s.weights = std::move(converted.weights);
  d.unexpected_keys = converted.unused;
  d.ignored_keys.insert(d.ignored_keys.end(), converted.ignored.begin(), converted.ignored.end());
  d.family = converted.family;
  s.recorded_heads = recorded_heads(file, converted.num_heads);
  const int64_t heads = options.num_heads > 0 ? options.num_heads : s.recorded_heads;
  s.config = model::infer_config(s.weights, layout, heads, path);
  VIT_CHECK(!s.config.hybrid(), "checkpoint",
            "{}: the weights of a hybrid (backbone.*) without a model config: its stem's stride, hence the image size, "
            "cannot be told from their shapes (load the checkpoint vit wrote, which carries its config)",
            path);
  s.config.eps = converted.eps;
  s.config.act = converted.act;
  s.config.projection = converted.projection;
  if (converted.family != model::Family::Vit)
    s.config.name = fmt::format("{}-{}-checkpoint", model::family_name(d.family), d.layout);
  d.preprocess = default_preprocess(layout, converted.family, s.config);
  s.align_corners = layout == model::Layout::Torchvision;
  s.source_keys = std::move(converted.source_keys);
  return s;
}

}  // namespace vit::infer
