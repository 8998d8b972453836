// vit checkpoints: writing and reading, with every metadata value checked (see checkpoint.h).
#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "checkpoint/bf16_format.h"
#include "checkpoint/int8_format.h"
#include "model/layouts/config_from_shapes.h"

namespace vit::checkpoint {
namespace {

constexpr double kMaxLayerNormEps = 1e-2;  // timm 1e-6, PyTorch 1e-5, Hugging Face 1e-12

// A metadata integer: digits only (std::stoll would take "12abc" as 12), no overflow.
int64_t parse_count(const std::string& path, const std::string& key, const std::string& text) {
  int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 18;
  for (char ch : text) ok = ok && ch >= '0' && ch <= '9';
  if (ok) v = std::stoll(text);
  VIT_CHECK(ok, "checkpoint", "{}: metadata '{}' is '{}', not a non-negative integer", path, key, text);
  return v;
}

double parse_seconds(const std::string& path, const std::string& text) {
  double v = -1;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = -1;
  } catch (const std::exception&) {
  }
  VIT_CHECK(std::isfinite(v) && v >= 0, "checkpoint",
            "{}: metadata 'elapsed_seconds' is '{}', not a finite number >= 0", path, text);
  return v;
}

// The model config's shape fields against what the weights' shapes say.
void check_config_fits_weights(const std::string& path, const model::ViTConfig& c, const model::NamedTensors& weights) {
  model::ViTConfig w;
  try {  // one head: the shapes cannot tell the head count, and any width is divisible by 1
    w = model::infer_config(weights, model::Layout::Timm, 1, path);
  } catch (const std::exception& e) {
    rethrow_for_file(path, e, "its weights do not form a ViT");
  }
  const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
      {"dim", {c.dim, w.dim}},
      {"depth", {c.depth, w.depth}},
      {"patch_size", {c.patch_size, w.patch_size}},
      {"in_channels", {c.in_channels, w.in_channels}},
      {"image_size", {c.image_size, w.image_size}},
      {"num_classes", {c.num_classes, w.num_classes}},
      {"mlp hidden size (mlp_dim, mlp_ratio)", {c.hidden_dim(), w.hidden_dim()}},
      {"representation_size", {c.representation_size, w.representation_size}},
      {"qkv_bias", {c.qkv_bias, w.qkv_bias}},
  };
  for (const auto& [field, values] : fields) {
    VIT_CHECK(values.first == values.second, "checkpoint", "{}: model_config {} is {}, but the weights have {}", path,
              field, values.first, values.second);
  }
  VIT_CHECK(c.pool == w.pool, "checkpoint", "{}: model_config pool is '{}', but the weights are of a '{}'-pooled model",
            path, c.pool, w.pool);
  // Every other shape follows; the count bounds what building the model allocates by the file's size.
  double held = 0;
  for (const auto& [name, t] : weights) held += static_cast<double>(t.numel());
  VIT_CHECK(held == model::parameter_count(c), "checkpoint",
            "{}: model_config describes {:.0f} parameters, but the weights hold {:.0f}", path,
            model::parameter_count(c), held);
}

// EMA weights (when present) mirror the model's: same names, shapes, float32.
void check_ema(const std::string& path, const model::NamedTensors& weights, const model::NamedTensors& ema) {
  if (ema.empty()) return;
  VIT_CHECK(ema.size() == weights.size(), "checkpoint", "{}: {} EMA tensors for {} weights", path, ema.size(),
            weights.size());
  for (size_t i = 0; i < ema.size(); ++i) {
    VIT_CHECK(ema[i].first == weights[i].first && ema[i].second.shape() == weights[i].second.shape() &&
                  ema[i].second.dtype() == DType::F32,
              "checkpoint", "{}: EMA tensor 'ema.{}' {} {} does not mirror weight '{}' {} float32", path, ema[i].first,
              dtype_name(ema[i].second.dtype()), shape_str(ema[i].second.shape()), weights[i].first,
              shape_str(weights[i].second.shape()));
  }
}

}  // namespace

[[noreturn]] void rethrow_for_file(const std::string& path, const std::exception& e, const std::string& context) {
  const std::string message = e.what();
  if (message.rfind("[checkpoint] " + path + ": ", 0) == 0) throw Error(message);  // names the file already
  if (context.empty()) fail("checkpoint", "{}: {}", path, message);
  fail("checkpoint", "{}: {}: {}", path, context, message);
}

void validate_checkpoint_info(const CheckpointInfo& info, const std::string& path) {
  const model::ViTConfig& m = info.model;
  try {
    m.validate();
  } catch (const std::exception& e) {
    rethrow_for_file(path, e, "model_config");
  }
  VIT_CHECK(m.eps <= kMaxLayerNormEps, "checkpoint",
            "{}: model_config eps is {}, outside (0, {}] (LayerNorm eps: timm "
            "1e-6, PyTorch 1e-5)",
            path, number_str(m.eps), kMaxLayerNormEps);
  // Normalisation: one finite mean and std per input channel, in the range pixels in [0, 1] allow.
  const data::Normalization& n = info.normalization;
  const auto C = static_cast<size_t>(m.in_channels);
  VIT_CHECK(n.mean.size() == C && n.std.size() == C, "checkpoint",
            "{}: normalization has {} means and {} stds for a model of {} input channels", path, n.mean.size(),
            n.std.size(), C);
  for (size_t c = 0; c < C; ++c) {
    VIT_CHECK(std::isfinite(n.mean[c]) && n.mean[c] >= 0 && n.mean[c] <= data::kMaxNormalizationMean, "checkpoint",
              "{}: normalization mean[{}] is {}, outside [0, {}] (pixels are scaled to [0, 1])", path, c,
              number_str(n.mean[c]), data::kMaxNormalizationMean);
    VIT_CHECK(std::isfinite(n.std[c]) && n.std[c] > 0 && n.std[c] <= data::kMaxNormalizationStd, "checkpoint",
              "{}: normalization std[{}] is {}, outside (0, {}] (pixels are scaled to [0, 1])", path, c,
              number_str(n.std[c]), data::kMaxNormalizationStd);
  }
  // Class names: at most one per output, each non-empty and different (a prediction names one).
  VIT_CHECK(static_cast<int64_t>(info.class_names.size()) <= m.num_classes, "checkpoint",
            "{}: class_names has {} names for a model of {} classes", path, info.class_names.size(), m.num_classes);
  std::set<std::string> seen;
  for (size_t k = 0; k < info.class_names.size(); ++k) {
    const std::string& name = info.class_names[k];
    VIT_CHECK(!name.empty(), "checkpoint", "{}: class_names[{}] is empty", path, k);
    VIT_CHECK(seen.insert(name).second, "checkpoint", "{}: class_names[{}] '{}' repeats an earlier class name", path, k,
              name);
  }
  // Progress: every finished epoch trained at least one batch, each batch is one step.
  VIT_CHECK(info.epoch >= 0 && info.step >= 0 && info.batch >= 0, "checkpoint",
            "{}: negative epoch/step/batch ({}, {}, {})", path, info.epoch, info.step, info.batch);
  VIT_CHECK(info.batch <= info.step && info.epoch <= info.step - info.batch, "checkpoint",  // no overflow
            "{}: step {} is less than epoch {} + batch {} (every epoch and every batch takes a step)", path, info.step,
            info.epoch, info.batch);
  VIT_CHECK(std::isfinite(info.elapsed_seconds) && info.elapsed_seconds >= 0, "checkpoint",
            "{}: elapsed_seconds is {}, not a finite number >= 0", path, number_str(info.elapsed_seconds));
  nlohmann::json train, stats;
  try {
    train = nlohmann::json::parse(info.train_config_json.empty() ? "{}" : info.train_config_json);
    stats = nlohmann::json::parse(info.epoch_stats_json.empty() ? "{}" : info.epoch_stats_json);
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: train_config or epoch_stats is not valid JSON ({})", path, e.what());
  }
  VIT_CHECK(train.is_object() && stats.is_object(), "checkpoint",
            "{}: train_config and epoch_stats must be JSON objects", path);
  if (train.contains("epochs") && train["epochs"].is_number_integer() && train["epochs"].get<int64_t>() > 0) {
    const auto epochs = train["epochs"].get<int64_t>();
    VIT_CHECK(info.epoch < epochs || (info.epoch == epochs && info.batch == 0), "checkpoint",
              "{}: epoch {} (batch {}) is past the end of train_config's {} epochs", path, info.epoch, info.batch,
              epochs);
  }
  if (info.batch > 0) {  // mid-epoch: the epoch's statistics so far cover exactly `batch` batches
    auto count = [&](const char* key) -> int64_t {
      const auto it = stats.find(key);
      VIT_CHECK(it != stats.end() && it->is_number_integer() && it->get<int64_t>() >= 0, "checkpoint",
                "{}: epoch_stats '{}' is missing or not a count (batch {} is mid-epoch)", path, key, info.batch);
      return it->get<int64_t>();
    };
    const int64_t steps = count("steps"), skipped = count("skipped"), seen_images = count("seen"),
                  correct = count("correct");
    VIT_CHECK(skipped <= info.batch && steps == info.batch - skipped && correct <= seen_images, "checkpoint",
              "{}: epoch_stats ({} steps + {} skipped, {} of {} correct) do not add up to batch {}", path, steps,
              skipped, correct, seen_images, info.batch);
    for (const char* key : {"loss_sum", "seconds"}) {
      const auto it = stats.find(key);
      VIT_CHECK(it != stats.end() && it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= 0,
                "checkpoint", "{}: epoch_stats '{}' is missing or not a finite number >= 0", path, key);
    }
  }
}

std::map<std::string, std::string> checkpoint_metadata(const std::string& path, const CheckpointInfo& info,
                                                       const std::string& optimizer) {
  std::map<std::string, std::string> metadata;
  try {
    metadata = {
        {"format", kCheckpointFormat},
        {"model_config", info.model.to_json()},
        {"train_config", info.train_config_json.empty() ? "{}" : info.train_config_json},
        {"epoch", std::to_string(info.epoch)},
        {"step", std::to_string(info.step)},
        {"batch", std::to_string(info.batch)},
        {"epoch_stats", info.epoch_stats_json.empty() ? "{}" : info.epoch_stats_json},
        {"elapsed_seconds", fmt::format("{:.17g}", info.elapsed_seconds)},
        {"class_names", nlohmann::json(info.class_names).dump()},
        {"normalization", nlohmann::json{{"mean", info.normalization.mean}, {"std", info.normalization.std}}.dump()},
        {"optimizer", optimizer},
    };
    if (!info.dataset_json.empty()) metadata["dataset"] = info.dataset_json;
    if (!info.quantization_json.empty()) metadata["quantization"] = info.quantization_json;
    if (!info.storage_json.empty()) metadata[kStorageKey] = info.storage_json;
    if (!info.preprocess_json.empty()) metadata["preprocess"] = info.preprocess_json;
    if (!info.source_family.empty()) metadata["source_family"] = info.source_family;
    if (!info.source_layout.empty()) metadata["source_layout"] = info.source_layout;
    if (!info.evaluated.empty()) metadata["evaluated"] = info.evaluated;
    // The header holds these as JSON strings: all of them must be UTF-8 too.
    (void)nlohmann::json(metadata).dump();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: cannot record the metadata as JSON ({})", path, e.what());
  }
  return metadata;
}

void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const CheckpointInfo& info,
                     const TrainingState& state, WeightStorage storage) {
  validate_checkpoint_info(info, path);
  VIT_CHECK(info.evaluated != "ema" || !state.ema.empty(), "checkpoint",
            "{}: 'evaluated' is ema, but no EMA weights are saved", path);
  CheckpointInfo with_model = info;
  with_model.quantization_json = quantization_metadata(model);  // what the model is, not what info says
  const bool bf16 = storage == WeightStorage::BF16;
  VIT_CHECK(!bf16 || (with_model.quantization_json.empty() && state.optimizer_state.empty() && state.ema.empty()),
            "checkpoint", "{}: bfloat16 storage is for a float32 model alone (no int8 Linears, optimizer or EMA state)",
            path);
  with_model.storage_json = bf16 ? bf16_storage_metadata(bf16_weight_names(model)) : "";  // what is written
  const std::map<std::string, std::string> metadata = checkpoint_metadata(path, with_model, state.optimizer);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, t);
  for (const auto& [name, t] : quantization_scales(model)) tensors.emplace_back(name, t);
  for (const auto& [name, t] : state.optimizer_state) tensors.emplace_back("optimizer." + name, t);
  for (const auto& [name, t] : state.ema) tensors.emplace_back("ema." + name, t);
  io::save_safetensors(path, tensors, metadata, /*checksum=*/true, bf16 ? bf16_weight_bits(model) : io::Bf16Bits{});
}

bool is_vit_checkpoint(const io::WeightsFile& file) {
  const auto it = file.metadata.find("format");
  return it != file.metadata.end() && file.metadata.count("model_config");
}

io::ContentScan scan_checkpoint_file(const io::WeightsFile& file, bool checksum, bool allow_nonfinite, bool ema) {
  io::ContentScan scan;
  if (file.format == io::WeightsFormat::Safetensors) {
    scan = io::scan_contents(file, checksum, !allow_nonfinite);
  } else if (!allow_nonfinite && ema) {
    scan = io::scan_tensors(file.torch.ema);
  } else if (!allow_nonfinite) {
    // What was not searched while its bytes were read (prescanned: a .pth's float32 storages).
    const std::unordered_set<std::string> prescanned(file.torch.prescanned.begin(), file.torch.prescanned.end());
    std::vector<std::pair<std::string, Tensor>> rest;
    for (const auto& named : file.tensors) {
      if (prescanned.count(named.first) == 0) rest.push_back(named);
    }
    scan = file.torch.prescan;
    const io::ContentScan more = io::scan_tensors(rest);
    if (scan.nonfinite_count == 0)
      scan = more;
    else
      scan.nonfinite_count += more.nonfinite_count;
  }
  VIT_CHECK(scan.nonfinite_count == 0, "checkpoint",
            "{}: tensor '{}' holds {} at index {} ({} non-finite value{} in the file); refusing to load it "
            "(--allow-nonfinite loads it anyway)",
            file.path, scan.nonfinite_tensor,
            std::isnan(scan.nonfinite_value) ? "NaN" : (scan.nonfinite_value > 0 ? "Inf" : "-Inf"),
            scan.nonfinite_index, scan.nonfinite_count, scan.nonfinite_count == 1 ? "" : "s");
  return scan;
}

LoadedCheckpoint parse_checkpoint(const io::WeightsFile& file, const ReadOptions& options) {
  const std::string& path = file.path;
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = file.metadata.find(key);
    VIT_CHECK(it != file.metadata.end(), "checkpoint",
              "{}: not a checkpoint written by vit train (no '{}' in its metadata); timm, torchvision and Hugging Face "
              "weights are for vit predict / vit attention",
              path, key);
    return it->second;
  };
  VIT_CHECK(meta("format") == kCheckpointFormat, "checkpoint", "{}: unknown checkpoint format '{}'", path,
            meta("format"));
  LoadedCheckpoint c;
  c.path = path;
  CheckpointInfo& info = c.info;
  try {
    info.model = model::ViTConfig::from_json(meta("model_config"));
  } catch (const std::exception& e) {
    rethrow_for_file(path, e, "model_config");
  }
  info.train_config_json = meta("train_config");
  info.epoch = parse_count(path, "epoch", meta("epoch"));
  info.step = parse_count(path, "step", meta("step"));
  if (file.metadata.count("batch")) info.batch = parse_count(path, "batch", meta("batch"));
  if (file.metadata.count("epoch_stats")) info.epoch_stats_json = meta("epoch_stats");
  if (file.metadata.count("dataset")) info.dataset_json = meta("dataset");
  if (file.metadata.count("quantization")) info.quantization_json = meta("quantization");
  if (file.metadata.count(kStorageKey)) {
    info.storage_json = meta(kStorageKey);
    (void)check_bf16_storage(file, info.storage_json);
  }
  if (file.metadata.count("preprocess")) info.preprocess_json = meta("preprocess");
  if (file.metadata.count("source_family")) {
    info.source_family = meta("source_family");
    VIT_CHECK(info.source_family == "vit" || info.source_family == "deit" || info.source_family == "dinov2" ||
                  info.source_family == "clip",
              "checkpoint", "{}: metadata 'source_family' is '{}' (vit, deit, dinov2 or clip)", file.path,
              info.source_family);
  }
  if (file.metadata.count("source_layout")) {
    info.source_layout = meta("source_layout");
    VIT_CHECK(info.source_layout == "timm" || info.source_layout == "torchvision" ||
                  info.source_layout == "huggingface" || info.source_layout == "jax",
              "checkpoint", "{}: metadata 'source_layout' is '{}' (timm, torchvision, huggingface or jax)", file.path,
              info.source_layout);
  }
  if (file.metadata.count("evaluated")) info.evaluated = meta("evaluated");
  info.elapsed_seconds = parse_seconds(path, meta("elapsed_seconds"));
  for (const char* key : {"class_names", "normalization"}) {
    try {
      const auto j = nlohmann::json::parse(meta(key));
      if (std::string(key) == "class_names") {
        info.class_names = j.get<std::vector<std::string>>();
      } else {
        info.normalization.mean = j.at("mean").get<std::vector<double>>();
        info.normalization.std = j.at("std").get<std::vector<double>>();
      }
    } catch (const nlohmann::json::exception& e) {
      fail("checkpoint", "{}: metadata '{}' is not {} ({})", path, key,
           std::string(key) == "class_names" ? "a JSON list of strings" : "{\"mean\": [...], \"std\": [...]}",
           e.what());
    }
  }
  validate_checkpoint_info(info, path);
  const std::string optimizer = file.metadata.count("optimizer") ? meta("optimizer") : "";  // "": an older file
  VIT_CHECK(optimizer.empty() || optimizer == "adamw" || optimizer == "sgd" || optimizer == "none", "checkpoint",
            "{}: metadata 'optimizer' is '{}' (adamw, sgd or none)", path, optimizer);

  for (const auto& [name, t] : file.tensors) {
    if (name.rfind("optimizer.", 0) == 0) {
      c.optimizer.emplace_back(name.substr(10), t);
    } else if (name.rfind("ema.", 0) == 0) {
      c.ema.emplace_back(name.substr(4), t);
    } else {
      VIT_CHECK(t.dtype() == DType::F32 || (t.dtype() == DType::I8 && !info.quantization_json.empty()), "checkpoint",
                "{}: weight '{}' is {}, expected float32", path, name, dtype_name(t.dtype()));
      c.weights.emplace_back(name, t);
    }
  }
  c.scales = split_quantization(c.weights, info.quantization_json, path);
  VIT_CHECK(c.scales.empty() || (c.optimizer.empty() && c.ema.empty()), "checkpoint",
            "{}: an int8 model holds no optimizer or EMA state (it is for inference)", path);
  VIT_CHECK(optimizer != "none" || c.optimizer.empty(), "checkpoint",
            "{}: metadata 'optimizer' is 'none' but the file holds {} optimizer tensors", path, c.optimizer.size());
  check_config_fits_weights(path, info.model, c.weights);
  check_ema(path, c.weights, c.ema);
  VIT_CHECK(info.evaluated.empty() || info.evaluated == "raw" || (info.evaluated == "ema" && !c.ema.empty()),
            "checkpoint", "{}: metadata 'evaluated' is '{}' ({})", path, info.evaluated,
            info.evaluated == "ema" ? "but the file holds no EMA weights" : "ema or raw");

  // Integrity last, so that an edit that breaks a rule is reported by name.
  const auto stored = file.metadata.find(io::kChecksumKey);
  const bool has_checksum = stored != file.metadata.end();
  if (has_checksum) {
    const std::string& s = stored->second;
    bool ok = s.size() == 22 && s.rfind("xxh64:", 0) == 0;
    for (size_t i = 6; ok && i < s.size(); ++i) ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    VIT_CHECK(ok, "checkpoint", "{}: metadata 'checksum' is '{}', not an xxh64 checksum (xxh64: and 16 hex digits)",
              path, s);
  }
  // Checksums came before int8 files: every int8 file was written with one, so one without it was
  // edited (its scales then say nothing true).
  VIT_CHECK(has_checksum || info.quantization_json.empty(), "checkpoint",
            "{}: an int8 model without its 'checksum' metadata (vit quantize always writes one): the file was "
            "edited; quantize its float checkpoint again",
            path);
  const io::ContentScan scan = scan_checkpoint_file(file, has_checksum, options.allow_nonfinite);
  if (has_checksum) {
    VIT_CHECK(scan.checksum == stored->second, "checkpoint",
              "{}: checksum mismatch (the file was edited or corrupted): stored {}, computed {}", path, stored->second,
              scan.checksum);
    c.checksum = scan.checksum;
  }
  return c;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const ReadOptions& options) {
  return parse_checkpoint(io::load_safetensors(path), options);
}

bool uses_ema(const LoadedCheckpoint& checkpoint, WeightSet asked) {
  if (asked == WeightSet::Recorded) {
    return checkpoint.info.evaluated.empty() ? !checkpoint.ema.empty() : checkpoint.info.evaluated == "ema";
  }
  VIT_CHECK(asked == WeightSet::Raw || !checkpoint.ema.empty(), "checkpoint", "{}: no EMA weights in this {}",
            checkpoint.path,
            checkpoint.scales.empty() ? "checkpoint (trained without --ema)" : "int8 model (it holds one set)");
  return asked == WeightSet::Ema;
}

std::string weights_note(const LoadedCheckpoint& checkpoint, bool ema) {
  if (checkpoint.ema.empty()) return "";
  const bool evaluated_ema = uses_ema(checkpoint, WeightSet::Recorded);
  if (ema == evaluated_ema) {
    return ema ? "EMA weights, as the run evaluated (--raw: the raw weights)"
               : "raw weights, as the run evaluated (--ema: the EMA weights)";
  }
  return ema ? "EMA weights (--ema); the run evaluated its raw weights"
             : "raw weights (--raw); the run evaluated its EMA weights";
}

std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, WeightSet weights) {
  const bool use_ema = uses_ema(checkpoint, weights);
  auto model = std::make_unique<model::VisionTransformer>(checkpoint.info.model, std::make_shared<Generator>(0));
  if (!use_ema) {
    prepare_quantized(*model, checkpoint.scales, quantization_bits(checkpoint.info.quantization_json, checkpoint.path),
                      checkpoint.path);
  }
  try {
    model->load_state_dict(use_ema ? checkpoint.ema : checkpoint.weights);
  } catch (const std::exception& e) {
    rethrow_for_file(checkpoint.path, e, use_ema ? "EMA weights" : "");
  }
  return model;
}

}  // namespace vit::checkpoint
