// Reading a vit checkpoint: the metadata parsed value by value, checked together
// (validate_checkpoint_info) and against the tensors, then the checksum and the search for NaN/Inf
// (see checkpoint.h).
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "checkpoint/bf16_format.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/int8_format.h"
#include "core/printable.h"
#include "model/layouts/config_from_shapes.h"

namespace vit::checkpoint {
namespace {

// A metadata integer: digits only (std::stoll would take "12abc" as 12), no overflow.
int64_t parse_count(const std::string& path, const std::string& key, const std::string& text) {
  int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 18;
  for (char ch : text) ok = ok && ch >= '0' && ch <= '9';
  if (ok) v = std::stoll(text);
  VIT_CHECK(ok, "checkpoint", "{}: metadata '{}' is '{}', not a non-negative integer", path, key, printable(text));
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
            "{}: metadata 'elapsed_seconds' is '{}', not a finite number >= 0", path, printable(text));
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
  if (c.hybrid() && w.hybrid()) {  // the stem's stride is in no shape: the config's (config_from_shapes.cpp)
    w.conv_stem_stride = c.conv_stem_stride;
    w.patch_size *= c.conv_stem_stride;
    w.image_size *= c.conv_stem_stride;
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
      {"conv_stages", {c.conv_stages, w.conv_stages}},
      {"conv_channels", {c.conv_channels, w.conv_channels}},
      {"conv_blocks", {c.conv_blocks, w.conv_blocks}},
      {"qkv_bias", {c.qkv_bias, w.qkv_bias}},
  };
  for (const auto& [field, values] : fields) {
    VIT_CHECK(values.first == values.second, "checkpoint", "{}: model_config {} is {}, but the weights have {}", path,
              field, values.first, values.second);
  }
  VIT_CHECK(c.pool == w.pool, "checkpoint", "{}: model_config pool is '{}', but the weights are of a '{}'-pooled model",
            path, printable(c.pool), w.pool);
  // Every other shape follows; the count bounds what building the model allocates by the file's size.
  double held = 0;
  for (const auto& [name, t] : weights) held += static_cast<double>(t.numel());
  VIT_CHECK(held == model::state_count(c), "checkpoint",
            "{}: model_config describes {:.0f} values (parameters and buffers), but the weights hold {:.0f}", path,
            model::state_count(c), held);
}

// EMA weights (when present) mirror the model's: same names, shapes, float32.
void check_ema(const std::string& path, const model::NamedTensors& weights, const model::NamedTensors& ema) {
  if (ema.empty()) return;
  VIT_CHECK(ema.size() == weights.size(), "checkpoint", "{}: {} EMA tensors for {} weights", path, ema.size(),
            weights.size());
  for (size_t i = 0; i < ema.size(); ++i) {
    VIT_CHECK(ema[i].first == weights[i].first && ema[i].second.shape() == weights[i].second.shape() &&
                  ema[i].second.dtype() == DType::F32,
              "checkpoint", "{}: EMA tensor 'ema.{}' {} {} does not mirror weight '{}' {} float32", path,
              printable(ema[i].first), dtype_name(ema[i].second.dtype()), shape_str(ema[i].second.shape()),
              printable(weights[i].first), shape_str(weights[i].second.shape()));
  }
}

// A vit checkpoint's metadata: a missing key says that the file is not one.
class Metadata {
 public:
  explicit Metadata(const io::WeightsFile& file) : file_(file) {}
  bool has(const std::string& key) const { return file_.metadata.count(key) > 0; }
  const std::string& operator[](const std::string& key) const {
    auto it = file_.metadata.find(key);
    VIT_CHECK(it != file_.metadata.end(), "checkpoint",
              "{}: not a checkpoint written by vit train (no '{}' in its metadata); timm, torchvision and Hugging Face "
              "weights are for vit predict / vit attention",
              file_.path, key);
    return it->second;
  }

 private:
  const io::WeightsFile& file_;
};

// The values a run may or may not have recorded (files written before a field was added lack it).
void read_optional_fields(const io::WeightsFile& file, const Metadata& meta, CheckpointInfo& info) {
  if (meta.has("batch")) info.batch = parse_count(file.path, "batch", meta["batch"]);
  if (meta.has("epoch_stats")) info.epoch_stats_json = meta["epoch_stats"];
  if (meta.has("dataset")) info.dataset_json = meta["dataset"];
  if (meta.has("quantization")) info.quantization_json = meta["quantization"];
  if (meta.has(kStorageKey)) {
    info.storage_json = meta[kStorageKey];
    (void)check_bf16_storage(file, info.storage_json);
  }
  if (meta.has("preprocess")) info.preprocess_json = meta["preprocess"];
  if (meta.has("source_family")) {
    info.source_family = meta["source_family"];
    (void)model::parse_family(info.source_family, file.path + ": metadata 'source_family'");
  }
  if (meta.has("source_layout")) {
    info.source_layout = meta["source_layout"];
    VIT_CHECK(info.source_layout == "timm" || info.source_layout == "torchvision" ||
                  info.source_layout == "huggingface" || info.source_layout == "jax",
              "checkpoint", "{}: metadata 'source_layout' is '{}' (timm, torchvision, huggingface or jax)", file.path,
              printable(info.source_layout));
  }
  if (meta.has("evaluated")) info.evaluated = meta["evaluated"];
}

// class_names (a JSON list of strings) and normalization ({"mean": [...], "std": [...]}).
void read_json_fields(const std::string& path, const Metadata& meta, CheckpointInfo& info) {
  for (const char* key : {"class_names", "normalization"}) {
    try {
      const auto j = nlohmann::json::parse(meta[key]);
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
}

// Every metadata value, each parsed and checked on its own (validate_checkpoint_info checks them together).
CheckpointInfo read_info(const io::WeightsFile& file, const Metadata& meta) {
  const std::string& path = file.path;
  CheckpointInfo info;
  try {
    info.model = model::ViTConfig::from_json(meta["model_config"]);
  } catch (const std::exception& e) {
    rethrow_for_file(path, e, "model_config");
  }
  info.train_config_json = meta["train_config"];
  info.epoch = parse_count(path, "epoch", meta["epoch"]);
  info.step = parse_count(path, "step", meta["step"]);
  read_optional_fields(file, meta, info);
  info.elapsed_seconds = parse_seconds(path, meta["elapsed_seconds"]);
  read_json_fields(path, meta, info);
  return info;
}

// The optimizer the state belongs to: "adamw", "sgd", "none", or "" (an older file).
std::string read_optimizer(const Metadata& meta, const std::string& path) {
  const std::string optimizer = meta.has("optimizer") ? meta["optimizer"] : "";
  VIT_CHECK(optimizer.empty() || optimizer == "adamw" || optimizer == "sgd" || optimizer == "none", "checkpoint",
            "{}: metadata 'optimizer' is '{}' (adamw, sgd or none)", path, printable(optimizer));
  return optimizer;
}

// The file's tensors by prefix: "optimizer.*", "ema.*", the model's weights (float32; int8 in an
// int8 model) and, out of those, an int8 model's scales.
void split_tensors(const io::WeightsFile& file, LoadedCheckpoint& c) {
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind("optimizer.", 0) == 0) {
      c.optimizer.emplace_back(name.substr(10), t);
    } else if (name.rfind("ema.", 0) == 0) {
      c.ema.emplace_back(name.substr(4), t);
    } else {
      VIT_CHECK(t.dtype() == DType::F32 || (t.dtype() == DType::I8 && !c.info.quantization_json.empty()), "checkpoint",
                "{}: weight '{}' is {}, expected float32", file.path, printable(name), dtype_name(t.dtype()));
      c.weights.emplace_back(name, t);
    }
  }
  c.scales = split_quantization(c.weights, c.info.quantization_json, file.path);
}

// The tensors against the metadata: the model config, the optimizer, the EMA and what was evaluated.
void check_tensors_fit(const LoadedCheckpoint& c, const std::string& optimizer) {
  const std::string& path = c.path;
  const CheckpointInfo& info = c.info;
  VIT_CHECK(c.scales.empty() || (c.optimizer.empty() && c.ema.empty()), "checkpoint",
            "{}: an int8 model holds no optimizer or EMA state (it is for inference)", path);
  VIT_CHECK(optimizer != "none" || c.optimizer.empty(), "checkpoint",
            "{}: metadata 'optimizer' is 'none' but the file holds {} optimizer tensors", path, c.optimizer.size());
  check_config_fits_weights(path, info.model, c.weights);
  check_ema(path, c.weights, c.ema);
  VIT_CHECK(info.evaluated.empty() || info.evaluated == "raw" || (info.evaluated == "ema" && !c.ema.empty()),
            "checkpoint", "{}: metadata 'evaluated' is '{}' ({})", path, printable(info.evaluated),
            info.evaluated == "ema" ? "but the file holds no EMA weights" : "ema or raw");
}

// The stored checksum against the file's bytes, and the search for NaN/Inf (scan_checkpoint_file).
// Returns the checksum ("" for an older file written without one).
std::string verify_integrity(const io::WeightsFile& file, const CheckpointInfo& info, const ReadOptions& options) {
  const std::string& path = file.path;
  const auto stored = file.metadata.find(io::kChecksumKey);
  const bool has_checksum = stored != file.metadata.end();
  if (has_checksum) {
    const std::string& s = stored->second;
    bool ok = s.size() == 22 && s.rfind("xxh64:", 0) == 0;
    for (size_t i = 6; ok && i < s.size(); ++i) ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    VIT_CHECK(ok, "checkpoint", "{}: metadata 'checksum' is '{}', not an xxh64 checksum (xxh64: and 16 hex digits)",
              path, printable(s));
  }
  // Checksums came before int8 files: every int8 file was written with one, so one without it was
  // edited (its scales then say nothing true).
  VIT_CHECK(has_checksum || info.quantization_json.empty(), "checkpoint",
            "{}: an int8 model without its 'checksum' metadata (vit quantize always writes one): the file was "
            "edited; quantize its float checkpoint again",
            path);
  const io::ContentScan scan = scan_checkpoint_file(file, has_checksum, options.allow_nonfinite);
  if (!has_checksum) return "";
  VIT_CHECK(scan.checksum == stored->second, "checkpoint",
            "{}: checksum mismatch (the file was edited or corrupted): stored {}, computed {}", path, stored->second,
            scan.checksum);
  return scan.checksum;
}

}  // namespace

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
            file.path, printable(scan.nonfinite_tensor),
            std::isnan(scan.nonfinite_value) ? "NaN" : (scan.nonfinite_value > 0 ? "Inf" : "-Inf"),
            scan.nonfinite_index, scan.nonfinite_count, scan.nonfinite_count == 1 ? "" : "s");
  return scan;
}

LoadedCheckpoint parse_checkpoint(const io::WeightsFile& file, const ReadOptions& options) {
  const Metadata meta(file);
  VIT_CHECK(meta["format"] == kCheckpointFormat, "checkpoint", "{}: unknown checkpoint format '{}'", file.path,
            printable(meta["format"]));
  LoadedCheckpoint c;
  c.path = file.path;
  c.info = read_info(file, meta);
  validate_checkpoint_info(c.info, file.path);
  const std::string optimizer = read_optimizer(meta, file.path);
  split_tensors(file, c);
  check_tensors_fit(c, optimizer);
  // Integrity last, so that an edit that breaks a rule is reported by name.
  c.checksum = verify_integrity(file, c.info, options);
  return c;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const ReadOptions& options) {
  return parse_checkpoint(io::load_safetensors(path), options);
}

}  // namespace vit::checkpoint
