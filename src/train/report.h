// report.html: one self-contained file (no network, no scripts): loss and accuracy curves as
// inline SVG, the test confusion matrix, per-class accuracy, and a grid of misclassified test
// images embedded as PNG data URIs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/vit_config.h"
#include "train/evaluate.h"

namespace vit::train {

void write_report(const std::string& path, const model::ViTConfig& model, const std::string& train_config_json,
                  const std::vector<nlohmann::json>& metrics, const EvalResult& eval, const data::Dataset& test_data);

std::string base64(const std::vector<uint8_t>& bytes);

// A number field of a metrics.jsonl row; NaN when missing or null (JSON has no NaN).
double metric(const nlohmann::json& row, const char* key);

}  // namespace vit::train
