// `vit bench --gemms` end to end: the GEMM rows of ViT-Ti/16 (shapes, epilogues, calls) with
// positive GFLOP/s and shares of the measured peak in (0, 1.2] (fp32, --precision bf16, an int8
// checkpoint written by vit quantize), the probed peaks, the text table, and the refusals. No
// timing assertions beyond sanity: the machine may be shared.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernels/cpu_features.h"
#include "kernels/gemm/bf16_gemm.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tiny_checkpoint.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::vit;

// The JSON of a `vit bench ... --gemms --json` run (threads from OMP_NUM_THREADS).
nlohmann::json bench_gemms(const std::string& args) {
  const CommandResult r = vit("bench " + args + " --iters 1 --warmup 0 --gemms --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

// Every row: positive rate, a share of its peak in (0, 1.2] where its kernel has a peak (every row
// from AVX2 up, unless `peakless` names its kernel), and the sum of calls x time as gemm_ms.
void expect_sane_rows(const nlohmann::json& j, const std::string& peakless = "") {
  ASSERT_TRUE(j.contains("gemms")) << j.dump();
  const bool simd = kernels::isa_enabled(kernels::Isa::Avx2);
  double total_ms = 0;
  for (const auto& row : j["gemms"]) {
    SCOPED_TRACE(row.dump());
    EXPECT_GT(row["gflops"].get<double>(), 0.0);
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    total_ms += row["calls"].get<double>() * row["ms"].get<double>();
    EXPECT_EQ(row.contains("share"), simd && row["kernel"] != peakless);
    if (!row.contains("share")) continue;
    EXPECT_GT(row["share"].get<double>(), 0.0);
    EXPECT_LE(row["share"].get<double>(), 1.2);
    EXPECT_TRUE(j["peaks"].contains(row["peak"].get<std::string>()));
    EXPECT_NEAR(row["share"].get<double>(), row["gflops"].get<double>() / row["peak_gflops"].get<double>(), 1e-9);
  }
  EXPECT_NEAR(j["gemm_ms"].get<double>(), total_ms, 1e-6 * total_ms);
  EXPECT_NEAR(j["gemm_share"].get<double>(), total_ms / j["median_ms"].get<double>(), 1e-6);
  EXPECT_GE(j["gemm_share_of_fastest"].get<double>(), j["gemm_share"].get<double>());
}

TEST(BenchGemms, VitTinyFloat32RowsAndPeaks) {
  const auto j = bench_gemms("--preset vit_tiny_patch16_224 --threads 2");
  expect_sane_rows(j);
  const std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, std::string, int64_t>> expected = {
      {"patch_embed", 196, 768, 192, "store", 1}, {"qkv", 197, 192, 576, "store", 12},
      {"proj", 197, 192, 192, "residual", 12},    {"fc1", 197, 192, 768, "gelu", 12},
      {"fc2", 197, 768, 192, "residual", 12},     {"head", 1, 192, 1000, "store", 1}};
  ASSERT_EQ(j["gemms"].size(), expected.size()) << j.dump();
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& row = j["gemms"][i];
    const auto& [name, m, k, n, epilogue, calls] = expected[i];
    EXPECT_EQ(row["name"], name);
    EXPECT_EQ(row["m"], m);
    EXPECT_EQ(row["k"], k);
    EXPECT_EQ(row["n"], n);
    EXPECT_EQ(row["epilogue"], epilogue);
    EXPECT_EQ(row["calls"], calls);
    if (kernels::isa_enabled(kernels::Isa::Avx2)) {
      EXPECT_EQ(row["kernel"], "fp32");
      EXPECT_EQ(row["peak"], kernels::isa_enabled(kernels::Isa::Avx512) ? "fma512" : "fma256");
    }
  }
  // The peaks of the mixes this CPU has (at the ISA level this process runs), per thread.
  EXPECT_EQ(j["peaks"].contains("fma256"), kernels::isa_enabled(kernels::Isa::Avx2));
  EXPECT_EQ(j["peaks"].contains("fma512"), kernels::isa_enabled(kernels::Isa::Avx512));
  EXPECT_EQ(j["peaks"].contains("vnni"), kernels::isa_enabled(kernels::Isa::Avx512Vnni));
  for (const auto& [key, rate] : j["peaks"].items()) EXPECT_GT(rate.get<double>(), 0.0) << key;
  // Without --gemms the JSON has none of it.
  const CommandResult plain = vit("bench --preset vit_tiny_patch16_224 --iters 1 --warmup 0 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("gemms"));
}

TEST(BenchGemms, Bfloat16RowsRunTheBf16Kernel) {
  const auto j = bench_gemms("--preset vit_tiny_patch16_224 --threads 1 --precision bf16");
  // Without AVX512_BF16 the plain emulation runs: no peak to divide by.
  expect_sane_rows(j, kernels::bf16_gemm_native() ? "" : "bf16");
  EXPECT_EQ(j["precision"], "bf16");
  for (const auto& row : j["gemms"]) {
    EXPECT_EQ(row["kernel"], "bf16") << row.dump();
    if (row.contains("peak")) {
      EXPECT_EQ(row["peak"], "bf16");
    }
  }
}

TEST(BenchGemms, Int8CheckpointRowsRunTheInt8Kernel) {
  testing::TempDir dir;
  testing::write_tiny_checkpoint(dir.file("f32.safetensors"));
  const CommandResult q =
      vit("quantize --checkpoint " + dir.file("f32.safetensors") + " --out " + dir.file("int8.safetensors"));
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const auto j = bench_gemms("--checkpoint " + dir.file("int8.safetensors") + " --threads 1 --batch 4");
  expect_sane_rows(j);
  EXPECT_EQ(j["precision"], "int8");
  ASSERT_EQ(j["gemms"].size(), 6u) << j.dump();
  EXPECT_EQ(j["gemms"][1]["m"], 4 * 16);  // 16 patches (mean-pooled: no class token)
  for (const auto& row : j["gemms"]) {
    if (row["name"] == "patch_embed") continue;  // a convolution: float32
    EXPECT_EQ(row["kernel"], "int8") << row.dump();
    if (row.contains("peak")) {
      EXPECT_EQ(row["peak"], kernels::isa_enabled(kernels::Isa::Avx512Vnni) ? "vnni" : "int8_avx2");
    }
  }
}

TEST(BenchGemms, TextTableAndRefusals) {
  const CommandResult r = vit("bench --preset vit_tiny_patch16_224 --iters 1 --warmup 0 --threads 1 --gemms");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("measured peaks, one thread:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GEMMs of a forward, each timed alone on 1 thread"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc1          fp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a forward's GEMMs at these rates:"), std::string::npos) << r.out;
  if (kernels::isa_enabled(kernels::Isa::Avx2)) {
    EXPECT_NE(r.out.find("ymm FMA (AVX2)"), std::string::npos) << r.out;
  }
  // The default output stays short.
  const CommandResult plain = vit("bench --preset vit_tiny_patch16_224 --iters 1 --warmup 0 --threads 1");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("measured peaks"), std::string::npos) << plain.out;
  expect_error(vit("bench --preset vit_digits --train --gemms --iters 1"),
               "[bench] --gemms times the inference path's GEMMs (not --train or --graph)");
  expect_error(vit("bench --preset vit_digits --graph --gemms --iters 1"),
               "[bench] --gemms times the inference path's GEMMs (not --train or --graph)");
}

// Every run, without --gemms: the whole forward (or training step) as a share of the measured
// float32 FMA rate x threads x the precision's instruction ratio (1, bf16 2, int8 4).
TEST(BenchPeak, TheWholeRunAgainstThePeakOfItsPrecision) {
  const bool simd = kernels::isa_enabled(kernels::Isa::Avx2);
  testing::TempDir dir;
  testing::write_tiny_checkpoint(dir.file("f32.safetensors"));
  ASSERT_EQ(
      vit("quantize --checkpoint " + dir.file("f32.safetensors") + " --out " + dir.file("int8.safetensors")).exit_code,
      0);
  const std::vector<std::pair<std::string, int>> runs = {
      {"--preset vit_digits --threads 2", 1},
      {"--preset vit_digits --threads 1 --precision bf16", 2},
      {"--preset vit_digits --train --batch 8 --threads 2", 1},
      {"--checkpoint " + dir.file("int8.safetensors") + " --threads 1 --batch 4", 4}};
  for (const auto& [args, factor] : runs) {
    SCOPED_TRACE(args);
    const CommandResult r = vit("bench " + args + " --iters 2 --warmup 0 --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.contains("share_of_peak"), simd) << r.out;
    if (!simd) continue;
    const double share = j["share_of_peak"].get<double>();
    EXPECT_GT(share, 0.0);
    EXPECT_LE(share, 1.2);
    EXPECT_NEAR(share, j["gflops"].get<double>() / j["peak_gflops"].get<double>(), 1e-9);
    EXPECT_EQ(j["peak_factor"].get<int>(), factor);
    EXPECT_TRUE(j["peak_basis"] == "fma256" || j["peak_basis"] == "fma512") << j.dump();
    const double ceiling = j["peak_ceiling"].get<double>();
    EXPECT_GT(ceiling, 0.0);
    EXPECT_LE(ceiling, 1.0);
    if (factor == 2) {
      EXPECT_EQ(ceiling == 1.0, kernels::bf16_gemm_native()) << j.dump();
    }
    if (factor == 1) {
      EXPECT_EQ(ceiling, 1.0);
    }
  }
  // The text line, and none where no SIMD FMA may run.
  const CommandResult text = vit("bench --preset vit_digits --iters 1 --warmup 0 --threads 1");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find(simd ? "  share of the peak: " : "  share of the peak: - "), std::string::npos) << text.out;
  const CommandResult scalar = vit("bench --preset vit_digits --iters 1 --warmup 0 --threads 1 --isa scalar --json");
  ASSERT_EQ(scalar.exit_code, 0) << scalar.out;
  EXPECT_FALSE(nlohmann::json::parse(scalar.out).contains("share_of_peak")) << scalar.out;
}

}  // namespace
}  // namespace vit
