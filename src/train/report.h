// report.html: one self-contained file (no network, no scripts), as a person comparing runs reads
// it: the result (and, for a dataset with a published benchmark table, the table with this run's
// row placed in it), curves as inline SVG (error rate on a log axis and accuracy against wall
// time, loss per epoch, the learning-rate schedule), per-class accuracy bars, the confusion
// matrix, the most confident mistakes as embedded PNGs, and the configuration as a table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/vit_config.h"
#include "train/benchmark_table.h"
#include "train/evaluate.h"
#include "train/train_config.h"

namespace vit::train {

struct ReportInputs {
  const TrainConfig* config = nullptr;       // the model, the recipe (schedule, budget, --val-split)
  std::vector<nlohmann::json> metrics;       // metrics.jsonl rows, one per epoch
  const EvalResult* eval = nullptr;          // the last evaluation ...
  const data::Dataset* eval_data = nullptr;  // ... and the images it ran on (validation ones with --val-split)
  // The learning-rate schedule's length, as the run planned it.
  int64_t total_steps = 0, warmup_steps = 0, steps_per_epoch = 1;
  std::optional<BenchmarkTable> benchmark;
};

void write_report(const std::string& path, const ReportInputs& in);

std::string base64(const std::vector<uint8_t>& bytes);

// A number field of a metrics.jsonl row; NaN when missing or null (JSON has no NaN).
double metric(const nlohmann::json& row, const char* key);

}  // namespace vit::train
