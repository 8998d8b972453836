// Resuming a run (see resume.h).
#include "train/resume.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/fields.h"

namespace vit::train {
namespace {

using json = nlohmann::ordered_json;

// The flags a resumed run takes from the command line: they steer this process, not the run's
// numbers (--data only with the same data, checked once it is loaded).
constexpr const char* kMayChange[] = {
    "--resume",     "--out",   "--data",         "--epochs",         "--threads",        "--checkpoint-every",
    "--max-pixels", "--plain", "--comm-timeout", "--data-residency", "--loader-threads", "--skip-nonfinite",
    "--teacher"};
constexpr const char* kMayChangeText =
    "--data (the same data, moved), --epochs (to extend it), --threads, --checkpoint-every, --max-pixels, "
    "--data-residency, --loader-threads, --skip-nonfinite, --plain and --teacher (the teacher's file, moved)";

struct FixedFlag {
  const char* flag;
  const char* pointer;  // into {train config fields..., "model": {...}, "normalization": {...}}
};
// The schedule's, the optimiser's, the augmentation's and the input's: a resumed run keeps them.
constexpr FixedFlag kRunFlags[] = {{"--batch-size", "/batch_size"},
                                   {"--optimizer", "/optimizer"},
                                   {"--lr", "/lr"},
                                   {"--min-lr", "/min_lr"},
                                   {"--warmup-epochs", "/warmup_epochs"},
                                   {"--weight-decay", "/weight_decay"},
                                   {"--momentum", "/momentum"},
                                   {"--label-smoothing", "/label_smoothing"},
                                   {"--clip-grad", "/clip_grad"},
                                   {"--ema", "/ema_decay"},
                                   {"--seed", "/seed"},
                                   {"--time-budget", "/time_budget"},
                                   {"--steps", "/steps"},
                                   {"--val-split", "/val_split"},
                                   {"--rotate", "/augment/rotate_degrees"},
                                   {"--translate", "/augment/translate"},
                                   {"--scale-min", "/augment/scale_min"},
                                   {"--scale-max", "/augment/scale_max"},
                                   {"--crop-padding", "/augment/crop_padding"},
                                   {"--hflip", "/augment/hflip"},
                                   {"--mixup", "/augment/mixup_alpha"},
                                   {"--cutmix", "/augment/cutmix_alpha"},
                                   {"--erase", "/augment/erase_prob"},
                                   {"--rrc-scale", "/augment/rrc_scale"},
                                   {"--auto-augment", "/augment/auto_augment"},
                                   {"--no-augment", "/augment"},
                                   {"--distillation", "/distillation"},
                                   {"--teacher-heads", "/teacher_heads"},
                                   {"--distill-alpha", "/distill_alpha"},
                                   {"--distill-tau", "/distill_tau"},
                                   {"--precision", "/precision"},
                                   {"--layer-decay", "/layer_decay"},
                                   {"--head-lr", "/head_lr"},
                                   {"--freeze", "/freeze"},
                                   {"--new-head", "/new_head"},
                                   {"--keep-head", "/keep_head"},
                                   {"--mean", "/normalization/mean"},
                                   {"--std", "/normalization/std"}};

// Everything a flag can set, as JSON (the model without its name: --preset vit_digits matches a
// run of the same shape whatever it was called).
json as_json(const TrainConfig& c, const model::ViTConfig& m, const data::Normalization& norm) {
  json j = fields_to_json<json>(c);
  j["model"] = fields_to_json<json>(m);
  j["model"].erase("name");
  j["normalization"] = {{"mean", norm.mean}, {"std", norm.std}};
  return j;
}

// A value as the command line writes it: 0.002, 8 (not 8.0), sgd (no quotes).
std::string text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return fmt::format("{}", value.get<double>());
  return value.dump();
}

// "--lr 0.01 (the run's 0.002)", or for a flag setting several fields (--preset, --no-augment)
// "--no-augment: rotate_degrees 0 (the run's 8), ..."; "" when they agree.
std::string difference(const char* flag, const json& asked, const json& run, const char* whose) {
  if (asked == run) return "";
  if (asked.is_object() && run.is_object()) {
    std::string out;
    for (const auto& [key, value] : asked.items()) {
      if (run.contains(key) && run.at(key) == value) continue;
      out += fmt::format("{}{} {} ({} {})", out.empty() ? "" : ", ", key, text(value), whose,
                         run.contains(key) ? text(run.at(key)) : "none");
    }
    return fmt::format("{}: {}", flag, out);
  }
  return fmt::format("{} {} ({} {})", flag, text(asked), whose, text(run));
}

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

// Refuses every flag the caller gave that the run cannot take, naming it with both values.
void refuse_changes(const TrainConfig& asked, const TrainConfig& saved, const checkpoint::CheckpointInfo& run,
                    const std::string& checkpoint_path) {
  const json a = as_json(asked, asked.model, asked.normalization);
  const json r = as_json(saved, run.model, run.normalization);
  // The model: each field set on the command line (all of them with a --preset) must be the
  // checkpoint's; keys, not flags, so a field added to ViTConfig needs no entry here.
  const auto& set = asked.given_model_fields;
  const bool whole = std::find(set.begin(), set.end(), "*") != set.end();
  std::vector<std::string> fields;
  for (const auto& [key, value] : a.at("model").items()) {
    if (!whole && std::find(set.begin(), set.end(), key) == set.end()) continue;
    if (key == "num_classes" && !asked.num_classes_given) continue;  // a preset's is a default: the data's is kept
    if (r.at("model").contains(key) && r.at("model").at(key) == value) continue;
    fields.push_back(fmt::format("{} {} (the checkpoint's {})", key, text(value),
                                 r.at("model").contains(key) ? text(r.at("model").at(key)) : "none"));
  }
  VIT_CHECK(fields.empty(), "train",
            "{}: checkpoint is a different model than requested: {}; resume without model flags, or start a new run "
            "with another --out",
            checkpoint_path, joined(fields, ", "));
  std::vector<std::string> run_changes;
  for (const std::string& flag : asked.given_flags) {
    if (std::find(std::begin(kMayChange), std::end(kMayChange), flag) != std::end(kMayChange)) continue;
    if (flag == "--overwrite") continue;  // refused by TrainConfig::validate() as a contradiction
    auto match = [&](const FixedFlag& f) { return flag == f.flag; };
    if (const auto* g = std::find_if(std::begin(kRunFlags), std::end(kRunFlags), match); g != std::end(kRunFlags)) {
      const json::json_pointer p(g->pointer);
      if (auto d = difference(g->flag, a.at(p), r.at(p), "the run's"); !d.empty()) run_changes.push_back(d);
    } else {
      run_changes.push_back(flag + " (not something a resumed run can take)");
    }
  }
  VIT_CHECK(run_changes.empty(), "train",
            "--resume {}: {} cannot change when resuming (the run would no longer be the one it continues); drop {}, "
            "or start a new run with another --out. A resumed run takes only {}",
            asked.out_dir, joined(run_changes, "; "), run_changes.size() == 1 ? "it" : "them", kMayChangeText);
}

// FNV-1a over 64-bit words (and the tail bytes): enough to tell a changed dataset, and fast.
uint64_t hash_bytes(const uint8_t* bytes, size_t n, uint64_t h) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + i, 8);
    h = (h ^ word) * kPrime;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ bytes[i]) * kPrime;
  return h;
}

uint64_t hash_dataset(const data::Dataset& d, uint64_t h) {
  // Image folders and shards by their files, whether held in memory or streamed (the pixels depend
  // on the decoder and resampler, the files are the data); IDX and CIFAR by their pixels.
  if (d.files.empty() && d.members.empty()) h = hash_bytes(d.pixels.data(), d.pixels.size(), h);
  // A streamed folder by its files: class folder and name (a moved folder is the same data) and size.
  for (const std::string& file : d.files) {
    const size_t last = file.rfind('/'),
                 parent = last == 0 || last == std::string::npos ? last : file.rfind('/', last - 1);
    const std::string name = parent == std::string::npos ? file : file.substr(parent + 1);  // "class/photo.jpg"
    std::error_code ec;
    const uint64_t bytes = std::filesystem::file_size(file, ec);
    h = hash_bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size(), h);
    h = hash_bytes(reinterpret_cast<const uint8_t*>(&bytes), sizeof(bytes), h);
  }
  // Shards by their names (a moved folder is the same data) and sizes, and where each image lies in them.
  for (const std::string& shard : d.shards) {
    const std::string name = std::filesystem::path(shard).filename().string();
    std::error_code ec;
    const uint64_t bytes = std::filesystem::file_size(shard, ec);
    h = hash_bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size(), h);
    h = hash_bytes(reinterpret_cast<const uint8_t*>(&bytes), sizeof(bytes), h);
  }
  for (const data::ShardMember& m : d.members) {
    const uint64_t where[3] = {m.shard, m.offset, m.size};
    h = hash_bytes(reinterpret_cast<const uint8_t*>(where), sizeof(where), h);
  }
  return hash_bytes(reinterpret_cast<const uint8_t*>(d.labels.data()), d.labels.size() * sizeof(int64_t), h);
}

}  // namespace

TrainConfig resume_config(const TrainConfig& asked, const checkpoint::LoadedCheckpoint& checkpoint,
                          const std::string& checkpoint_path) {
  TrainConfig saved = TrainConfig::from_json(checkpoint.info.train_config_json);
  const model::ViTConfig& m = checkpoint.info.model;
  if (asked.given_flags.empty()) {
    model::ViTConfig compared = asked.model;
    if (!asked.num_classes_given) compared.num_classes = m.num_classes;  // a preset's is a default
    VIT_CHECK(!asked.model_explicit || m.same_architecture(compared), "train",
              "{}: checkpoint is a different model ({} dim {} depth {} heads {}) than requested ({} dim {} depth {} "
              "heads {})",
              checkpoint_path, m.name, m.dim, m.depth, m.num_heads, asked.model.name, asked.model.dim,
              asked.model.depth, asked.model.num_heads);
  } else {
    refuse_changes(asked, saved, checkpoint.info, checkpoint_path);
  }
  saved.model = m;
  VIT_CHECK(saved.steps == 0 || !asked.flag_given("--epochs"), "train",
            "--resume {}: this run's schedule is {} steps (fixed by its time budget or --steps); --epochs cannot "
            "extend it. Start a new run to train longer",
            asked.out_dir, saved.steps);
  // --epochs on resume extends (or keeps) the schedule; without it the saved one continues.
  if (asked.epochs > 0) saved.epochs = std::max(asked.epochs, checkpoint.info.epoch);
  if (asked.flag_given("--data")) saved.data_dir = asked.data_dir;  // checked to be the same data once loaded
  if (asked.flag_given("--skip-nonfinite")) saved.skip_nonfinite = asked.skip_nonfinite;
  if (asked.flag_given("--teacher")) {
    VIT_CHECK(!saved.teacher.empty(), "train",
              "--resume {}: this run trains without a teacher; --teacher cannot add one to it", asked.out_dir);
    saved.teacher = asked.teacher;  // the same teacher, moved (its predictions are not checked)
  }
  saved.out_dir = asked.out_dir;
  saved.threads = asked.threads;
  saved.progress = asked.progress;
  saved.stop_after_epoch = asked.stop_after_epoch;
  saved.checkpoint_every = asked.checkpoint_every;
  saved.max_pixels = asked.max_pixels;
  saved.data_residency = asked.data_residency;
  saved.loader_threads = asked.loader_threads;
  saved.comm_timeout = asked.comm_timeout;
  saved.resume = true;
  saved.overwrite = asked.overwrite;  // refused by validate(): a resumed run continues, never replaces
  saved.given_flags = asked.given_flags;
  saved.on_epoch = asked.on_epoch;
  saved.validate();
  return saved;
}

std::string dataset_fingerprint(const data::Dataset& train, const data::Dataset& test) {
  const uint64_t h = hash_dataset(test, hash_dataset(train, 0xcbf29ce484222325ull));
  return json{{"train_images", train.size()},
              {"test_images", test.size()},
              {"image", {train.channels, train.height, train.width}},
              {"hash", fmt::format("{:016x}", h)}}
      .dump();
}

bool check_same_data(const checkpoint::CheckpointInfo& run, const std::string& run_data_dir,
                     const std::string& data_dir, const data::Dataset& train, const std::string& fingerprint) {
  std::vector<std::string> differences;
  const auto& names = train.class_names;
  if (names.size() != run.class_names.size()) {
    differences.push_back(fmt::format("{} classes (the run's {})", names.size(), run.class_names.size()));
  } else {
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k] == run.class_names[k]) continue;
      differences.push_back(fmt::format("class {} is '{}' (the run's '{}')", k, names[k], run.class_names[k]));
      break;
    }
  }
  if (!run.dataset_json.empty()) {
    try {
      const json now = json::parse(fingerprint), then = json::parse(run.dataset_json);
      for (const char* key : {"train_images", "test_images"}) {
        if (now.at(key) != then.at(key)) {
          differences.push_back(fmt::format("{} {} (the run's {})", text(now.at(key)),
                                            key == std::string("train_images") ? "training images" : "test images",
                                            text(then.at(key))));
        }
      }
      if (now.at("image") != then.at("image")) {
        const auto shape = [](const json& s) { return fmt::format("{}x{}x{}", text(s[0]), text(s[1]), text(s[2])); };
        differences.push_back(fmt::format("images {} (the run's {})", shape(now.at("image")), shape(then.at("image"))));
      }
      if (differences.empty() && now.at("hash") != then.at("hash")) {
        differences.push_back("the same numbers of images, but different pixels or labels");
      }
    } catch (const json::exception& e) {
      fail("train", "corrupt dataset fingerprint in the checkpoint ({})", e.what());
    }
  }
  if (!differences.empty()) {
    if (data_dir == run_data_dir) {
      fail("train",
           "{} is not the data this run was trained on any more: {}; restore it, or start a new run with "
           "another --out",
           data_dir, joined(differences, ", "));
    }
    fail("train",
         "--data {} is not the data this run was trained on ({}): {}; resume with the run's data, or start a "
         "new run with another --out",
         data_dir, run_data_dir, joined(differences, ", "));
  }
  return data_dir != run_data_dir;
}

}  // namespace vit::train
