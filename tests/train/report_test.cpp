// report.html as a person comparing runs reads it (issue 13), from synthetic inputs: for
// Fashion-MNIST the benchmark table with this run's row marked where its accuracy falls; the
// error rate on a log axis and the accuracy against wall time; the learning-rate schedule; the
// per-class bars by class name; the configuration as a table; and for a validation split, no
// benchmark table (its accuracy is not a test accuracy) and "validation" wherever it says which.
#include "train/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "support/files.h"
#include "train/train_config.h"

namespace vit::train {
namespace {

const std::vector<std::string> kFashion = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Fixture {
  data::Dataset images;
  EvalResult eval;
  TrainConfig config = fashion_recipe();
  ReportInputs in;
  Fixture() {
    images.channels = 1, images.height = 4, images.width = 4;
    images.class_names = kFashion;
    for (int i = 0; i < 20; ++i) {
      images.labels.push_back(i % 10);
      images.pixels.insert(images.pixels.end(), 16, static_cast<uint8_t>(i * 10));
      eval.predictions.push_back(i % 7 == 0 ? (i + 1) % 10 : i % 10);  // three mistakes
      eval.confidence.push_back(0.9f);
    }
    eval.count = 20;
    eval.top1 = 0.85, eval.top5 = 1.0, eval.loss = 0.4;
    eval.confusion.assign(10, std::vector<int64_t>(10, 0));
    for (int i = 0; i < 20; ++i) ++eval.confusion[i % 10][eval.predictions[i]];
    for (int k = 0; k < 10; ++k) eval.per_class_accuracy.push_back(eval.confusion[k][k] / 2.0);
    in.config = &config;
    for (int e = 1; e <= 3; ++e) {
      in.metrics.push_back({{"epoch", e},
                            {"train_loss", 1.0 / e},
                            {"train_acc", 0.8 + 0.03 * e},
                            {"test_loss", 0.5 / e},
                            {"test_acc", 0.82 + 0.01 * e},
                            {"test_top5", 0.99},
                            {"elapsed", 200.0 * e},
                            {"images_per_s", 3000},
                            {"threads", 2}});
    }
    in.eval = &eval;
    in.eval_data = &images;
    in.total_steps = 100, in.warmup_steps = 10, in.steps_per_epoch = 40;
    in.benchmark = known_benchmark(kFashion, 60000, 10000);
  }
};

TEST(Report, ShowsTheBenchmarkCurvesClassesAndConfiguration) {
  testing::TempDir dir;
  Fixture f;
  write_report(dir.file("report.html"), f.in);
  const std::string html = read(dir.file("report.html"));
  EXPECT_NE(html.find("test accuracy <b>85.00%</b> (error rate 15.00%"), std::string::npos);
  EXPECT_NE(html.find("of a 600 s budget"), std::string::npos);
  EXPECT_NE(html.find("Fashion-MNIST: where this run sits"), std::string::npos);
  EXPECT_NE(
      html.find(
          "<tr class=\"ours\"><td>vit: this run (vit_hybrid_fashion, 600 s of training on 2 thread(s))</td><td>85.0%"),
      std::string::npos);
  // The run's row sits between the published rows around 85%.
  const size_t ours = html.find("class=\"ours\"");
  EXPECT_LT(html.find("Human performance"), ours);
  EXPECT_GT(html.find("2 Conv+pooling</td>"), ours);
  EXPECT_NE(html.find("Test error rate (log scale) against wall time"), std::string::npos);
  EXPECT_NE(html.find("Accuracy against wall time"), std::string::npos);
  EXPECT_NE(html.find("seconds of training"), std::string::npos);
  EXPECT_NE(html.find("Learning-rate schedule"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"per-class accuracy\""), std::string::npos);
  for (const std::string& name : kFashion) EXPECT_NE(html.find(">" + name + "</text>"), std::string::npos) << name;
  EXPECT_NE(html.find("<tr><th>model.patch_size</th><td>4</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("<tr><th>model.conv_stages</th><td>2</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("<tr><th>augment.hflip</th><td>true</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("<tr><th>time_budget</th><td>600.0</td></tr>"), std::string::npos);
  for (const char* remote : {"src=\"http", "href=\"http", "<script", "<link", "url("}) {
    EXPECT_EQ(html.find(remote), std::string::npos) << "the report must not need the network: " << remote;
  }
}

TEST(Report, AValidationSplitGetsNoBenchmarkTable) {
  testing::TempDir dir;
  Fixture f;
  f.config.val_split = 1000;
  write_report(dir.file("report.html"), f.in);
  const std::string html = read(dir.file("report.html"));
  EXPECT_EQ(html.find("where this run sits"), std::string::npos);
  EXPECT_NE(html.find("validation accuracy <b>85.00%</b>"), std::string::npos);
  EXPECT_NE(html.find("Validation error rate (log scale)"), std::string::npos);
  EXPECT_NE(html.find("Per-class validation accuracy"), std::string::npos);
}

}  // namespace
}  // namespace vit::train
