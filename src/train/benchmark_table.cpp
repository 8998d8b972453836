// Published benchmark tables (see benchmark_table.h).
#include "train/benchmark_table.h"

#include <fmt/format.h>

namespace vit::train {

std::optional<BenchmarkTable> known_benchmark(const std::vector<std::string>& class_names, int64_t train_images,
                                              int64_t test_images) {
  const std::vector<std::string> fashion = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  if (class_names != fashion || train_images != 60000 || test_images != 10000) return std::nullopt;
  return BenchmarkTable{"Fashion-MNIST",
                        "benchmark table of the Fashion-MNIST README (zalandoresearch/fashion-mnist)",
                        {{"Human performance (crowd-sourced, no fashion expertise)", 0.835},
                         {"2 Conv+pooling", 0.876},
                         {"MLP 256-128-100", 0.8833},
                         {"GRU+SVM with dropout", 0.897},
                         {"XgBoost", 0.898},
                         {"2 Conv+pooling+ELU (PyTorch)", 0.903},
                         {"2 Conv+pooling (TensorFlow's doc)", 0.916},
                         {"HOG+SVM", 0.926},
                         {"3 Conv+pooling+2 FC+dropout", 0.926},
                         {"2 Conv+3 FC ~1.8M parameters", 0.932},
                         {"VGG16 26M parameters", 0.935},
                         {"Capsule Network 8M parameters", 0.936},
                         {"GoogleNet with cross-entropy loss", 0.937},
                         {"2 Conv+2 FC, random horizontal flips", 0.939},
                         {"Google AutoML, 24 compute hours", 0.939},
                         {"ResNet18", 0.949},
                         {"MobileNet", 0.95},
                         {"DenseNet-BC 768K parameters", 0.954},
                         {"WRN-28-10", 0.959},
                         {"WRN-28-10 + random erasing", 0.963},
                         {"WRN40-4 8.9M parameters", 0.967}}};
}

std::vector<PlacedRow> place(const BenchmarkTable& table, const std::string& method, double accuracy) {
  std::vector<PlacedRow> out;
  bool placed = false;
  for (const BenchmarkRow& row : table.rows) {
    if (!placed && accuracy < row.accuracy) {
      out.push_back({{method, accuracy}, true});
      placed = true;
    }
    out.push_back({row, false});
  }
  if (!placed) out.push_back({{method, accuracy}, true});
  return out;
}

std::string placement_text(const BenchmarkTable& table, double accuracy) {
  const BenchmarkRow* below = nullptr;
  const BenchmarkRow* above = nullptr;
  for (const BenchmarkRow& row : table.rows) {
    if (accuracy >= row.accuracy) {
      below = &row;
    } else if (!above) {
      above = &row;
    }
  }
  auto name = [](const BenchmarkRow* r) { return fmt::format("{} ({:.1f}%)", r->method, 100 * r->accuracy); };
  if (!below) return fmt::format("below every row, under {}", name(above));
  if (!above) return fmt::format("above every row, over {}", name(below));
  return fmt::format("between {} and {}", name(below), name(above));
}

}  // namespace vit::train
