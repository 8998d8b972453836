// Loading a model for inference (see load_model.h): a source from either path (model_source.h),
// then the overrides, the resampling and the build, the same for both.
#include "infer/load_model.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "checkpoint/checkpoint.h"
#include "checkpoint/int8_format.h"
#include "core/printable.h"
#include "infer/model_source.h"
#include "io/weights_file.h"
#include "model/pos_embed.h"
#include "nn/init.h"

namespace vit::infer {
namespace {

#include "infer/imagenet_classes.inc"

// LayerScale is all or nothing: a file with some blocks' gammas and not others is damaged.
void check_layer_scale(const model::NamedTensors& weights, const model::ViTConfig& c, const std::string& path) {
  if (c.layer_scale <= 0) return;
  std::unordered_set<std::string_view> names;
  for (const auto& [name, _] : weights) names.insert(name);
  std::vector<std::string> missing;
  for (int64_t i = 0; i < c.depth; ++i) {
    for (const char* gamma : {"ls1.gamma", "ls2.gamma"}) {
      const std::string key = fmt::format("blocks.{}.{}", i, gamma);
      if (!names.count(key)) missing.push_back(key);
    }
  }
  VIT_CHECK(missing.empty(), "checkpoint",
            "{}: LayerScale gammas missing for some blocks: [{}] (blocks.0.ls1.gamma says the model has LayerScale; "
            "--no-strict leaves them at 1)",
            path, short_list(missing));
}

// An error about timm-named weights, with the foreign file's own key beside each name it quotes.
std::string with_source_keys(std::string message, const std::map<std::string, std::string>& source_keys) {
  for (const auto& [timm, key] : source_keys) {
    if (timm == key) continue;
    const std::string quoted = "'" + timm + "'";
    const size_t at = message.find(quoted);
    if (at != std::string::npos) message.insert(at + quoted.size(), " (the file's '" + printable(key) + "')");
  }
  return message;
}

}  // namespace

Preprocess at_size(Preprocess p, int64_t size) {
  const int64_t crop = p.crop > 0 ? p.crop : p.resize;
  if (crop != size && crop > 0) {
    p.resize = static_cast<int64_t>(
        std::llround(static_cast<double>(p.resize) * static_cast<double>(size) / static_cast<double>(crop)));
    p.crop = p.crop > 0 || !p.square ? size : 0;
  } else if (p.crop == 0 && !p.square) {
    p.crop = size;  // the shorter side alone: cropped to the model's square
  }
  return p;
}

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
    info.source_family = model::family_name(m.family);
    info.source_layout = m.layout;
  }
  info.model = m.model->config();
  info.class_names = m.class_names;
  info.evaluated = "";  // the loaded set (EMA or raw) becomes the file's only weights
  return info;
}

void apply_preprocess_overrides(Preprocess& p, const LoadSettings& o, int64_t channels) {
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

namespace {

// The options that replace what the file says: the head count, eps and activation.
// The options that set what the file leaves open: the head count, eps and activation. One that
// contradicts what the file records is refused (a model with other heads than it was trained
// with gives other answers, silently); one that agrees changes nothing.
void apply_config_overrides(ModelSource& s, const LoadSettings& options, const std::string& path) {
  model::ViTConfig& config = s.config;
  const char* how =
      "give it only for files that record none (a timm/torchvision/Hugging Face file of a non-standard width); vit "
      "convert --heads N records it in a copy";
  if (options.num_heads > 0 && s.recorded_heads > 0 && options.num_heads != s.recorded_heads) {
    fail("load", "{}: the file records {} attention heads; --heads {} contradicts it ({})", path, s.recorded_heads,
         options.num_heads, how);
  }
  if (s.records_config && options.eps && *options.eps != config.eps) {
    fail("load", "{}: the file records LayerNorm eps {}; --eps {} contradicts it (--eps is for foreign files)", path,
         number_str(config.eps), number_str(*options.eps));
  }
  if (s.records_config && options.act && *options.act != config.act) {
    fail("load", "{}: the file records the activation {}; --act {} contradicts it (--act is for foreign files)", path,
         config.act, *options.act);
  }
  if (options.num_heads > 0) config.num_heads = options.num_heads;
  if (options.eps) config.eps = *options.eps;
  if (options.act) config.act = *options.act;
  config.validate();
}

// Another resolution (--image-size): pos_embed resampled to the new grid, the preprocessing scaled.
void resample(ModelSource& s, const LoadSettings& options) {
  model::ViTConfig& config = s.config;
  if (options.image_size <= 0 || options.image_size == config.image_size) return;
  VIT_CHECK(options.image_size % config.patch_size == 0, "checkpoint",
            "--image-size {} is not a multiple of the patch size {}", options.image_size, config.patch_size);
  const int64_t grid = options.image_size / config.patch_size;
  // timm resamples with antialiasing (it matters when shrinking: DINOv2's 518-pixel grid to 224);
  // growing keeps PyTorch's plain bicubic, torchvision its align_corners form.
  const bool shrinking = grid < config.grid();
  for (auto& [name, t] : s.weights) {
    if (name == "pos_embed") {
      t = model::resample_pos_embed(t, config.no_embed_class ? 0 : config.prefix_tokens(), grid, grid, s.align_corners,
                                    shrinking && !s.align_corners);
    }
  }
  const double ratio = static_cast<double>(options.image_size) / static_cast<double>(config.image_size);
  config.image_size = options.image_size;
  Preprocess& p = s.described.preprocess;
  p.resize = static_cast<int64_t>(std::llround(static_cast<double>(p.resize) * ratio));
  if (p.crop > 0) p.crop = options.image_size;
}

// The model, its weights loaded (strictly: every weight replaced, none left over).
void build(ModelSource& s, const LoadSettings& options, const std::string& path) {
  LoadedModel& out = s.described;
  // Strict loading replaces every weight: skip the random initialisation and let the model use
  // the (memory-mapped) tensors themselves, so loading costs neither time nor a second copy.
  {
    std::optional<nn::init::SkipInit> skip;
    if (options.strict) skip.emplace();
    out.model = std::make_unique<model::VisionTransformer>(s.config, std::make_shared<Generator>(0));
  }
  checkpoint::prepare_quantized(*out.model, s.scales,
                                checkpoint::quantization_bits(out.recorded.quantization_json, path), path);
  if (options.strict) check_layer_scale(s.weights, s.config, path);
  try {
    const nn::LoadResult r = out.model->load_state_dict(s.weights, options.strict, /*share=*/true);
    out.missing_keys = r.missing_keys;
    for (const auto& k : r.unexpected_keys) out.unexpected_keys.push_back(k);
  } catch (const Error& e) {
    checkpoint::rethrow_for_file(path, Error(with_source_keys(e.what(), s.source_keys)));
  }
  if (options.strict && !out.unexpected_keys.empty()) {
    fail("checkpoint", "{}: unexpected keys [{}] (use --no-strict to ignore them)", path,
         printable_list(out.unexpected_keys));
  }
  out.model->eval();
}

// One name per output: the file's, ImageNet-1k's for 1000 classes; a model trained on fewer
// classes than it has outputs (3 class folders, 10 outputs) names the others by number.
void name_classes(LoadedModel& m, int64_t num_classes) {
  if (m.class_names.empty() && num_classes == 1000) m.class_names = imagenet_class_names();
  m.named_classes = !m.class_names.empty();
  for (auto k = static_cast<int64_t>(m.class_names.size()); k < num_classes; ++k) {
    m.class_names.push_back(std::to_string(k));
  }
}

}  // namespace

LoadedModel load_model(const std::string& path, const LoadSettings& options) {
  ModelSource s;
  if (io::is_onnx_file(path)) {
    s = onnx_source(io::read_onnx(path), options);
  } else {
    const io::WeightsFile file = io::load_weights_file(path);
    s = checkpoint::is_vit_checkpoint(file) ? own_checkpoint_source(file, options) : foreign_source(file, options);
  }
  apply_config_overrides(s, options, path);
  s.described.file_image_size = s.config.image_size;
  resample(s, options);
  build(s, options, path);
  LoadedModel out = std::move(s.described);
  out.nonfinite_allowed = options.allow_nonfinite;
  name_classes(out, s.config.num_classes);
  apply_preprocess_overrides(out.preprocess, options, s.config.in_channels);
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
