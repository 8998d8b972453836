// Fine-tuning from a model file (see init_from.h).
#include "train/init_from.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/check.h"
#include "model/model_options.h"

namespace vit::train {
namespace {

constexpr const char* kOp = "train";

// "--patch-size" for the ViTConfig key "patch_size".
std::string flag_for_key(const std::string& key) {
  for (const model::ModelOption& o : model::model_options()) {
    if (o.key == key) {
      std::string flag = "--" + o.name;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return flag;
    }
  }
  return key;
}

std::string numbers_str(const std::vector<double>& v) {
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(fmt::format("{:.4g}", x));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// One value per channel for `channels` channels: RGB statistics averaged for grey, grey repeated.
std::vector<double> per_channel(const std::vector<double>& v, int64_t channels) {
  if (v.empty() || static_cast<int64_t>(v.size()) == channels) return v;
  if (v.size() == 1) return std::vector<double>(static_cast<size_t>(channels), v[0]);
  if (channels == 1) {
    double sum = 0;
    for (double x : v) sum += x;
    return {sum / static_cast<double>(v.size())};
  }
  fail(kOp, "cannot adapt the {}-channel normalisation {} to {} channels", v.size(), numbers_str(v), channels);
}

// The first convolution, the one that reads the image: the stem's, else the patch embedding's.
std::string input_conv(const model::ViTConfig& m) {
  return m.stem_layers > 0 ? "stem.0.weight" : m.hybrid() ? "backbone.stem.conv.weight" : "patch_embed.proj.weight";
}

// (O, I_file, k, k) -> (O, I, k, k): grey from RGB sums the input channels (a grey image x feeds
// x to each of them), RGB from grey repeats the kernel and divides by 3 (a grey image's three
// equal channels then give the grey model's response).
Tensor adapt_input_conv(const Tensor& w, int64_t channels, const std::string& path) {
  const int64_t O = w.size(0), I = w.size(1), kh = w.size(2), kw = w.size(3);  // (O, I, kh, kw)
  const Tensor src = w.to(DType::F32).contiguous();
  Tensor out = Tensor::zeros({O, channels, kh, kw});
  const float* s = src.data<float>();
  float* d = out.data<float>();
  const int64_t k = kh * kw;
  if (channels == 1) {
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i)
        for (int64_t j = 0; j < k; ++j) d[o * k + j] += s[(o * I + i) * k + j];
    return out;
  }
  VIT_CHECK(I == 1, kOp,
            "--init {}: its first convolution reads {} channels; only grey <-> RGB is adapted, not {} -> {}", path, I,
            I, channels);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t j = 0; j < k; ++j) d[(o * channels + c) * k + j] = s[o * k + j] / static_cast<float>(channels);
  return out;
}

}  // namespace

bool is_head_parameter(const std::string& name) {
  return name.rfind("head.", 0) == 0 || name.rfind("head_dist.", 0) == 0;
}

int64_t layer_id(const std::string& name, int64_t depth) {
  for (const char* embedding :
       {"cls_token", "dist_token", "reg_token", "pos_embed", "patch_embed.", "stem.", "norm_pre."}) {
    if (name.rfind(embedding, 0) == 0) return 0;
  }
  if (name.rfind("blocks.", 0) == 0) {
    const size_t dot = name.find('.', 7);
    return std::stoll(name.substr(7, dot - 7)) + 1;
  }
  return depth + 1;
}

std::vector<double> lr_scales(const optim::NamedParameters& params, const TrainConfig& c) {
  if (c.layer_decay == 1.0 && c.head_lr <= 0) return {};
  const int64_t depth = c.model.depth;
  std::vector<double> scales;
  for (const auto& [name, p] : params) {
    double s = std::pow(c.layer_decay, static_cast<double>(depth + 1 - layer_id(name, depth)));
    if (c.head_lr > 0 && is_head_parameter(name)) s = c.head_lr / c.lr;
    scales.push_back(s);
  }
  return scales;
}

InitSource read_init(TrainConfig& c) {
  namespace fs = std::filesystem;
  InitSource src;
  src.path = c.init;
  VIT_CHECK(!c.init.empty(), kOp, "--init: give the model file to fine-tune");
  std::error_code ec;
  VIT_CHECK(fs::is_regular_file(c.init, ec), kOp, "--init {}: {}", c.init,
            fs::exists(c.init, ec) ? "is not a file" : "no such file");
  // Only the resolution may be asked of the loader; the rest is adapted here.
  for (const std::string& key : c.given_model_fields) {
    VIT_CHECK(key == "image_size" || key == "in_channels" || key == "num_classes" || key == "dropout" ||
                  key == "attn_dropout" || key == "drop_path" || key == "num_heads",
              kOp,
              "{} with --init {}: the model's shape is the file's; only --image-size, --channels, --num-classes, "
              "--dropout, --attn-dropout and --drop-path adapt it (and --heads gives the head count of a file "
              "without it, of non-standard width)",
              flag_for_key(key), c.init);
  }
  infer::LoadSettings options;
  if (c.model_field_given("num_heads")) options.num_heads = c.model.num_heads;
  if (c.model_field_given("image_size")) {  // pos_embed resampled
    VIT_CHECK(c.model.image_size >= 1, kOp,
              "--image-size {} with --init {}: give a resolution >= 1 (a multiple of the file's patch size), or leave "
              "it out to keep the file's",
              c.model.image_size, c.init);
    options.image_size = c.model.image_size;
  }
  src.loaded = infer::load_model(c.init, options);
  VIT_CHECK(src.loaded.recorded.quantization_json.empty(), kOp,
            "--init {}: an int8 model (vit quantize) is for inference only; fine-tune from the float checkpoint it "
            "was made from",
            c.init);
  src.file_config = src.loaded.model->config();
  src.file_config.image_size = src.loaded.file_image_size;
  const model::ViTConfig& f = src.file_config;
  const bool resample = src.loaded.model->config().image_size != f.image_size;
  model::ViTConfig m = src.loaded.model->config();
  std::vector<std::string>& notes = c.init_notes;
  notes.clear();
  notes.push_back(fmt::format("initialised from {} ({} layout, {} family; {}, {}x{}x{} images)", c.init,
                              src.loaded.layout, model::family_name(src.loaded.family), m.name, f.in_channels,
                              f.image_size, f.image_size));
  if (resample) {
    notes.push_back(fmt::format(
        "resolution {} -> {}: the position embedding resampled from {}x{} to {}x{} patches (prefix tokens kept)",
        f.image_size, m.image_size, f.grid(), f.grid(), m.grid(), m.grid()));
  }
  if (c.model_field_given("in_channels")) m.in_channels = c.model.in_channels;
  if (c.model_field_given("num_classes")) m.num_classes = c.model.num_classes;
  if (c.model_field_given("dropout")) m.dropout = c.model.dropout;
  if (c.model_field_given("attn_dropout")) m.attn_dropout = c.model.attn_dropout;
  if (c.model_field_given("drop_path")) m.drop_path = c.model.drop_path;
  src.has_head = f.num_classes > 0 && !f.projection;
  if (f.projection) {  // CLIP: the image projection is an embedding, not a classifier
    m.projection = false;
    m.head_bias = true;
  }
  c.model = m;
  if (!c.flag_given("--mean")) {  // one value per channel of the model as asked (the data may adapt it again)
    c.normalization = {per_channel(src.loaded.preprocess.mean, m.in_channels),
                       per_channel(src.loaded.preprocess.std, m.in_channels)};
  }
  return src;
}

std::vector<std::string> fit_init_to_data(TrainConfig& c, InitSource& src, const data::Dataset& train) {
  model::ViTConfig& m = c.model;
  const model::ViTConfig& f = src.file_config;
  std::vector<std::string>& notes = c.init_notes;
  // Data with channels of its own (IDX, CIFAR: image folders are converted to the model's).
  if (train.channels != m.in_channels && !c.model_field_given("in_channels")) m.in_channels = train.channels;
  if (m.in_channels != f.in_channels) {
    VIT_CHECK((m.in_channels == 1 && f.in_channels == 3) || (m.in_channels == 3 && f.in_channels == 1), kOp,
              "--init {}: the model reads {} channels and the data has {}; only grey <-> RGB is adapted", src.path,
              f.in_channels, m.in_channels);
    notes.push_back(fmt::format(
        "channels {} -> {}: the first convolution ({}) {}", f.in_channels, m.in_channels, input_conv(m),
        m.in_channels == 1 ? "summed over its RGB inputs (timm's adapt_input_conv)"
                           : "repeated over RGB and divided by 3 (a grey image gives the grey model's response)"));
  }
  if (!c.flag_given("--mean")) {
    c.normalization.mean = per_channel(c.normalization.mean, m.in_channels);
    c.normalization.std = per_channel(c.normalization.std, m.in_channels);
    notes.push_back(fmt::format("normalisation: the file's, mean {} std {}", numbers_str(c.normalization.mean),
                                numbers_str(c.normalization.std)));
  } else {
    notes.push_back(fmt::format("normalisation: as given, mean {} std {}", numbers_str(c.normalization.mean),
                                numbers_str(c.normalization.std)));
  }
  // The head.
  const std::vector<std::string>& file_names = src.loaded.class_names;
  const std::vector<std::string>& data_names = train.class_names;
  const int64_t data_classes = static_cast<int64_t>(data_names.size());
  const int64_t fresh_size = c.num_classes_given ? m.num_classes : data_classes;
  const std::string heads = m.dist_token ? "pair of heads (head, head_dist)" : "head";
  auto fresh = [&](const std::string& why) {
    src.fresh_head = true;
    m.num_classes = fresh_size;
    notes.push_back(fmt::format("a fresh zero-initialised {} for {} classes: {}", heads, fresh_size, why));
    return std::vector<std::string>{};
  };
  if (!src.has_head) {
    VIT_CHECK(fresh_size > 0, kOp, "--init {}: the file has no head and {} names no classes to train one for", src.path,
              train.source);
    return fresh(f.projection ? fmt::format("the file's image projection ({} -> {}) dropped for a classifier", f.dim,
                                            f.num_classes)
                              : "the file has none (a feature extractor)");
  }
  if (c.new_head) return fresh("--new-head");
  // A head without class names: its rows are some other data's classes, by number only.
  if (!src.loaded.named_classes && !c.keep_head) {
    return fresh(
        fmt::format("the file's {}-class head names no classes, so its rows mean nothing to {} (--keep-head "
                    "keeps it, the data's classes 0..K-1 as its rows)",
                    f.num_classes, train.source));
  }
  if (c.num_classes_given && m.num_classes != f.num_classes)
    return fresh(fmt::format("--num-classes {} (the file's head has {})", m.num_classes, f.num_classes));
  std::vector<std::string> unknown;
  for (const std::string& name : data_names) {
    if (std::find(file_names.begin(), file_names.end(), name) == file_names.end()) unknown.push_back(name);
  }
  if (unknown.empty() && data_classes > 0) {
    notes.push_back(fmt::format("head kept: its {} classes cover the {} of {} (labels matched by name)", f.num_classes,
                                data_classes, train.source));
    return file_names;
  }
  if (static_cast<int64_t>(unknown.size()) == data_classes) {
    return fresh(fmt::format("the file's {} classes are not the data's", f.num_classes));
  }
  fail(kOp,
       "--init {}: its head knows {} of the {} classes of {}, not: {}. Give --new-head to train a fresh head for the "
       "data's classes",
       src.path, data_classes - static_cast<int64_t>(unknown.size()), data_classes, train.source,
       fmt::join(unknown, ", "));
}

void load_init_weights(model::VisionTransformer& m, const InitSource& src, const TrainConfig& c) {
  std::map<std::string, Tensor> file;
  for (const auto& [name, t] : src.loaded.model->state_dict()) file.emplace(name, t);
  const std::string conv = input_conv(c.model);
  // Parameters and buffers (a hybrid's BatchNorm statistics come with its weights).
  for (auto& [name, p] : m.named_state()) {
    Tensor dst = p.data();
    if (src.fresh_head && is_head_parameter(name)) {
      dst.fill_(0.0);
      continue;
    }
    const auto it = file.find(name);
    VIT_CHECK(it != file.end(), kOp, "--init {}: no weight '{}' for the model to fine-tune", src.path, name);
    const Tensor& from = it->second;
    if (name == conv && from.shape() != dst.shape()) {
      dst.copy_(adapt_input_conv(from, c.model.in_channels, src.path));
      continue;
    }
    VIT_CHECK(from.shape() == dst.shape(), kOp, "--init {}: weight '{}' is {}, the model to fine-tune needs {}",
              src.path, name, shape_str(from.shape()), shape_str(dst.shape()));
    dst.copy_(from.to(DType::F32));
  }
}

}  // namespace vit::train
