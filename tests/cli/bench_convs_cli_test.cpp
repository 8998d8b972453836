// `vit bench --convs` end to end: the convolution rows of the hybrid preset (names, shapes, calls,
// the stem without an input gradient) with positive times and shares of the measured peak in
// (0, 1.2], the totals they add up to, the model's share of the peak, the text table, and the
// refusal for a model without a backbone. No timing assertions beyond sanity: the machine may be
// shared.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "kernels/cpu_features.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::vit;

TEST(BenchConvs, HybridRowsTotalsAndShares) {
  const CommandResult r =
      vit("bench --preset vit_hybrid_fashion --batch 4 --threads 2 --train --iters 1 --warmup 0 --convs --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("convs")) << j.dump();
  // name, H, C, OC, kernel, stride, calls
  const std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> expected = {
      {"backbone.stem.conv", 28, 1, 32, 3, 2, 1},
      {"backbone.stages.0.0.conv1", 14, 32, 32, 3, 1, 2},  // conv1 and conv2 share the shape
      {"backbone.stages.1.0.conv1", 14, 32, 64, 3, 2, 1},
      {"backbone.stages.1.0.conv2", 7, 64, 64, 3, 1, 1},
      {"backbone.stages.1.0.downsample.conv", 14, 32, 64, 1, 2, 1},
      {"patch_embed.proj", 7, 64, 64, 1, 1, 1}};
  ASSERT_EQ(j["convs"].size(), expected.size()) << j.dump();
  const bool simd = kernels::isa_enabled(kernels::Isa::Avx2);
  double training_ms = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& row = j["convs"][i];
    SCOPED_TRACE(row.dump());
    const auto& [name, side, channels, out, kernel, stride, calls] = expected[i];
    EXPECT_EQ(row["name"], name);
    EXPECT_EQ(row["batch"], 4);
    EXPECT_EQ(row["height"], side);
    EXPECT_EQ(row["channels"], channels);
    EXPECT_EQ(row["out_channels"], out);
    EXPECT_EQ(row["kernel"], kernel);
    EXPECT_EQ(row["stride"], stride);
    EXPECT_EQ(row["calls"], calls);
    EXPECT_EQ(row.contains("input_grad_ms"), i != 0);  // the images need no gradient
    double ms = 0;
    for (const char* pass : {"forward", "input_grad", "weight_grad"}) {
      if (!row.contains(std::string(pass) + "_ms")) continue;
      EXPECT_GT(row[std::string(pass) + "_ms"].get<double>(), 0.0) << pass;
      ms += row[std::string(pass) + "_ms"].get<double>();
      EXPECT_EQ(row.contains(std::string(pass) + "_share"), simd) << pass;
      if (!simd) continue;
      EXPECT_GT(row[std::string(pass) + "_share"].get<double>(), 0.0) << pass;
      EXPECT_LE(row[std::string(pass) + "_share"].get<double>(), 1.2) << pass;
    }
    training_ms += static_cast<double>(calls) * ms;
  }
  EXPECT_NEAR(j["conv_ms"].get<double>(), training_ms, 1e-6 * training_ms);
  EXPECT_NEAR(j["conv_share_of_median"].get<double>(), training_ms / j["median_ms"].get<double>(), 1e-6);
  if (simd) {
    EXPECT_NEAR(j["model_share_of_peak"].get<double>(), j["gflops"].get<double>() / j["conv_peak_gflops"].get<double>(),
                1e-9);
  }
}

TEST(BenchConvs, TextTableAndRefusal) {
  const CommandResult r = vit("bench --preset vit_hybrid_fashion --batch 2 --threads 1 --iters 1 --warmup 0 --convs");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("backbone.stages.1.0.downsample.conv"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a forward's convolutions at these rates"), std::string::npos) << r.out;
  expect_error(vit("bench --preset vit_fashion --iters 1 --warmup 0 --convs"),
               "[bench] --convs times a hybrid's convolutions: vit_fashion has no convolutional backbone");
}

}  // namespace
}  // namespace vit
