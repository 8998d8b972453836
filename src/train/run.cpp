// The helpers every training phase uses on a Run (see run.h).
#include "train/run.h"

#include <nlohmann/json.hpp>

#include "core/fields.h"
#include "infer/load_model.h"
#include "train/budget.h"

namespace vit::train {

std::string EpochStats::to_json(double more_seconds) const {
  EpochStats s = *this;
  s.seconds += more_seconds;
  return fields_to_json<nlohmann::json>(s).dump();
}

EpochStats EpochStats::from_json(const std::string& text, const std::string& path) {
  EpochStats s;
  try {
    fields_from_json(nlohmann::json::parse(text), s);
  } catch (const nlohmann::json::exception& e) {
    fail("train", "{}: corrupt epoch statistics in the checkpoint ({})", path, e.what());
  }
  return s;
}

void set_steps(Run& run, int64_t steps) {
  run.config.steps = steps;
  run.config.epochs = epochs_for(steps, run.steps_per_epoch);
  run.total_steps = steps;
}

checkpoint::CheckpointInfo checkpoint_info(const Run& run, int64_t epoch, int64_t batch, std::string epoch_stats_json) {
  std::string preprocess;
  if (run.eval_transform) {
    infer::Preprocess p = *run.eval_transform;
    p.mean = run.data.norm.mean;
    p.std = run.data.norm.std;
    preprocess = infer::preprocess_json(p);
  }
  return {run.config.model,
          run.config.to_json(),
          epoch,
          run.step,
          run.elapsed(),
          run.data.train.class_names,
          run.data.norm,
          batch,
          std::move(epoch_stats_json),
          run.data.fingerprint,
          "",
          std::move(preprocess),
          run.ema ? "ema" : "raw",
          "",
          "",
          ""};
}

void save(const Run& run, const std::string& path, const checkpoint::CheckpointInfo& info) {
  if (!run.lead()) return;  // rank 0 writes; the others hold the same weights
  checkpoint::TrainingState state{run.config.optimizer, run.opt->state(), {}};
  if (run.ema) state.ema = run.ema->averages();
  const FileVersion before(path);
  try {
    checkpoint::save_checkpoint(path, *run.model, info, state);
  } catch (const Error& e) {
    const FileVersion after(path);
    const std::string left = !(after == before) ? path + " was changed meanwhile, not by this run"
                             : after.exists     ? "the previous " + path + " is unchanged"
                                                : std::string("no earlier checkpoint exists, so nothing is unchanged");
    fail("train", "could not save a checkpoint: {}. Stopping; {}", e.what(), left);
  }
}

std::string interrupted_message(const Run& run, const StopSignals& signals) {
  return fmt::format("interrupted by {} at step {}: saved {}", signals.describe(), run.step, run.files.last);
}

EvalShard eval_shard(Run& run) {
  return {run.comm.rank(), run.comm.size(), [&run](std::vector<double>& v) { run.comm.sum(v); }};
}

}  // namespace vit::train
