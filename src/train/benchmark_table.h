// Published results a run can be placed among: Fashion-MNIST's benchmark table (the README of
// zalandoresearch/fashion-mnist, shipped by Debian's dataset-fashion-mnist as
// /usr/share/doc/dataset-fashion-mnist/README.md.gz; 21 of its rows, from human performance to
// WRN40-4), recognised by the dataset's class names and split sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vit::train {

struct BenchmarkRow {
  std::string method;
  double accuracy;  // test accuracy in [0, 1]
};

struct BenchmarkTable {
  std::string dataset;
  std::string source;
  std::vector<BenchmarkRow> rows;  // ascending accuracy
};

// The table for a known dataset (same class names, 60,000 / 10,000 images), else nullopt.
std::optional<BenchmarkTable> known_benchmark(const std::vector<std::string>& class_names, int64_t train_images,
                                              int64_t test_images);

// The table's rows with this run's inserted where its accuracy falls (ties: after the published
// row); `ours` marks it.
struct PlacedRow {
  BenchmarkRow row;
  bool ours = false;
};
std::vector<PlacedRow> place(const BenchmarkTable& table, const std::string& method, double accuracy);

// "between 2-conv CNN (best listed, 93.9%) and ResNet18 (94.9%)": where an accuracy sits.
std::string placement_text(const BenchmarkTable& table, double accuracy);

}  // namespace vit::train
