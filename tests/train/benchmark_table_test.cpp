// Fashion-MNIST's published benchmark table: recognised only for that dataset (its class names
// and split sizes), a run's row placed where its accuracy falls, and the sentence saying where.
#include "train/benchmark_table.h"

#include <gtest/gtest.h>

namespace vit::train {
namespace {

const std::vector<std::string> kFashion = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

TEST(BenchmarkTable, OnlyFashionMnistIsRecognised) {
  ASSERT_TRUE(known_benchmark(kFashion, 60000, 10000).has_value());
  EXPECT_FALSE(known_benchmark(kFashion, 59000, 10000).has_value());  // a --val-split or another set
  EXPECT_FALSE(known_benchmark(kFashion, 60000, 2000).has_value());
  EXPECT_FALSE(known_benchmark({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, 60000, 10000).has_value());
  const BenchmarkTable t = *known_benchmark(kFashion, 60000, 10000);
  for (size_t i = 1; i < t.rows.size(); ++i) EXPECT_LE(t.rows[i - 1].accuracy, t.rows[i].accuracy);
}

TEST(BenchmarkTable, ARunIsPlacedWhereItsAccuracyFalls) {
  const BenchmarkTable t = *known_benchmark(kFashion, 60000, 10000);
  const auto rows = place(t, "vit", 0.92);
  ASSERT_EQ(rows.size(), t.rows.size() + 1);
  size_t at = 0;
  while (!rows[at].ours) ++at;
  EXPECT_EQ(rows[at].row.method, "vit");
  EXPECT_LT(rows[at - 1].row.accuracy, 0.92);
  EXPECT_GT(rows[at + 1].row.accuracy, 0.92);
  EXPECT_EQ(placement_text(t, 0.92), "between 2 Conv+pooling (TensorFlow's doc) (91.6%) and HOG+SVM (92.6%)");
  EXPECT_TRUE(place(t, "vit", 0.99).back().ours);
  EXPECT_TRUE(place(t, "vit", 0.5).front().ours);
  EXPECT_EQ(placement_text(t, 0.5),
            "below every row, under Human performance (crowd-sourced, no fashion expertise) (83.5%)");
  EXPECT_EQ(placement_text(t, 0.99), "above every row, over WRN40-4 8.9M parameters (96.7%)");
}

}  // namespace
}  // namespace vit::train
