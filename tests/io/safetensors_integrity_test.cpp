// safetensors content checks: the checksum save_safetensors writes (pinned against an
// independent computation with Python's json + xxhash, so the format is what safetensors.h
// says), and scan_contents finding NaN/Inf in every float dtype and across its blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "io/checksum.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vit::io {
namespace {

using namespace vit::io::test;
using ::testing::HasSubstr;

TEST_F(SafetensorsTest, ChecksumIsWrittenAsDocumented) {
  const std::string file = path("sum.safetensors");
  save_safetensors(file, {{"w", Tensor::from_data(std::vector<float>{1.0f, -2.5f, 3.0f}, {3})}}, {{"note", "hi"}},
                   /*checksum=*/true);
  const WeightsFile f = load_safetensors(file);
  // /usr/bin/python3: h = {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}, "__metadata__": {"note":
  // "hi"}}; seed = xxh64(json.dumps(h, sort_keys=True, separators=(",", ":"))); xxh64(pack("<3f", 1, -2.5, 3), seed)
  EXPECT_EQ(f.metadata.at(kChecksumKey), "xxh64:f58bd3e5e32866a6");
  EXPECT_EQ(scan_contents(f, true, false).checksum, "xxh64:f58bd3e5e32866a6");
  // Without asking, nothing is added; asking twice for the key is refused.
  save_safetensors(file, {{"w", Tensor::zeros({2})}}, {{"note", "hi"}});
  EXPECT_EQ(load_safetensors(file).metadata.count(kChecksumKey), 0u);
  EXPECT_THAT(error_of([&] { save_safetensors(file, {}, {{kChecksumKey, "x"}}, true); }), HasSubstr("reserved"));
}

TEST_F(SafetensorsTest, ChecksumChangesWithAnyDataByteOrMetadataValue) {
  const std::string file = path("sum.safetensors");
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  save_safetensors(file, {{"a", Tensor::from_data(values, {1000})}, {"b", Tensor::ones({3, 3})}}, {{"k", "0.25"}},
                   true);
  const std::string good = read_file(file);
  const std::string stored = load_safetensors(file).metadata.at(kChecksumKey);
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  for (size_t at : {size_t{0}, size_t{1999}, size_t{4035}}) {  // first, middle and last data byte
    std::string bad = good;
    bad[8 + header_len + at] ^= 0x01;
    const WeightsFile f = parse_safetensors(to_shared(bad), "flipped");
    EXPECT_EQ(f.metadata.at(kChecksumKey), stored);
    EXPECT_NE(scan_contents(f, true, false).checksum, stored) << "byte " << at;
  }
  std::string edited = good;
  edited.replace(edited.find("0.25"), 4, "0.35");
  EXPECT_NE(scan_contents(parse_safetensors(to_shared(edited), "edited"), true, false).checksum, stored);
  EXPECT_EQ(scan_contents(parse_safetensors(to_shared(good), "good"), true, false).checksum, stored);
}

TEST_F(SafetensorsTest, ScanFindsNonFiniteValuesInEveryFloatDtype) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // F32 larger than one 1 MiB scan block: non-finite values at the block edge and at the end.
  std::vector<float> big(300000, 0.5f);
  big[262144] = -inf;
  big[299999] = nan;
  const std::string file = path("scan.safetensors");
  save_safetensors(file, {{"ints", Tensor::from_data(std::vector<int64_t>{-1, 0, 1}, {3})},
                          {"clean", Tensor::ones({17})},
                          {"big", Tensor::from_data(big, {300000})}});
  ContentScan s = scan_contents(load_safetensors(file), false, true);
  EXPECT_EQ(s.nonfinite_count, 2);
  EXPECT_EQ(s.nonfinite_tensor, "big");
  EXPECT_EQ(s.nonfinite_index, 262144);
  EXPECT_EQ(s.nonfinite_value, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(s.checksum.empty());
  EXPECT_EQ(scan_contents(load_safetensors(file), false, false).nonfinite_count, 0);  // not asked

  save_safetensors(file, {{"d", Tensor::from_data(std::vector<double>{1.0, 2.0, std::nan("")}, {3})}});
  s = scan_contents(load_safetensors(file), false, true);
  EXPECT_EQ(s.nonfinite_tensor, "d");
  EXPECT_EQ(s.nonfinite_index, 2);
  EXPECT_TRUE(std::isnan(s.nonfinite_value));

  // F16 (0x7c00: +Inf) at index 1 and BF16 (0x7fc0: NaN) at index 2, at odd offsets.
  const std::string half = bytes_of(std::vector<uint16_t>{0x3c00, 0x7c00, 0x0000});
  const std::string bf16 = bytes_of(std::vector<uint16_t>{0x3f80, 0x4000, 0x7fc0});
  const std::string crafted = craft(R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
                                    R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[6,12]}})",
                                    half + bf16);
  s = scan_contents(parse_safetensors(to_shared(crafted), "halves"), false, true);
  EXPECT_EQ(s.nonfinite_count, 2);
  EXPECT_EQ(s.nonfinite_tensor, "h");
  EXPECT_EQ(s.nonfinite_index, 1);
  EXPECT_EQ(s.nonfinite_value, std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace vit::io
