// safetensors reader: the dtypes vit stores otherwise (F16 and BF16 widened to F32, I32 to I64),
// exactly; BF16 written from the caller's bits; mixed dtypes loaded in data-offset order; unaligned
// tensors read right.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vit::io {
namespace {

using namespace vit::io::test;

// ------------------------------------------------------------------------------------ widening

TEST_F(SafetensorsTest, F16IsWidenedToF32) {
  const std::vector<uint16_t> halves = {
      0x3C00,  // 1
      0xC000,  // -2
      0x7BFF,  // 65504 (largest finite)
      0x0001,  // 2^-24 (smallest subnormal)
      0x03FF,  // 1023 * 2^-24 (largest subnormal)
      0x8001,  // -2^-24
      0x0400,  // 2^-14 (smallest normal)
      0x7C00,  // +inf
      0xFC00,  // -inf
      0x7E00,  // nan
      0x8000,  // -0
      0x3555,  // 0.333251953125
  };
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[3,4],"data_offsets":[0,24]},"__metadata__":{"src":"hand"}})";
  const std::string file = path("f16.safetensors");
  write_file(file, craft(header, bytes_of(halves)));
  const WeightsFile loaded = load_safetensors(file);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  const Tensor& t = loaded.get("h");
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.shape(), (Shape{3, 4}));
  const std::vector<float> v = raw_values<float>(t);
  ASSERT_EQ(v.size(), 12u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 65504.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[4], 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(v[5], -std::ldexp(1.0f, -24));
  EXPECT_EQ(v[6], std::ldexp(1.0f, -14));
  EXPECT_EQ(v[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[8], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[9]));
  EXPECT_EQ(v[10], 0.0f);
  EXPECT_TRUE(std::signbit(v[10]));
  EXPECT_FALSE(std::signbit(v[0]));
  EXPECT_EQ(v[11], 0.333251953125f);
  EXPECT_EQ(loaded.metadata.at("src"), "hand");
}

TEST_F(SafetensorsTest, AllF16BitPatternsWidenExactly) {
  // Every finite half is exactly representable in float; compare with a reference built from
  // ldexp, independent of the bit manipulation in the reader.
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  const std::string header = R"({"all":{"dtype":"F16","shape":[65536],"data_offsets":[0,131072]}})";
  const WeightsFile f = parse_safetensors(to_shared(craft(header, bytes_of(halves))), "all_halves");
  const std::vector<float> v = raw_values<float>(f.get("all"));
  ASSERT_EQ(v.size(), 65536u);
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool neg = h & 0x8000;
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    float want;
    if (e == 0)
      want = std::ldexp(static_cast<float>(m), -24);
    else if (e == 31)
      want = m == 0 ? std::numeric_limits<float>::infinity() : std::nanf("");
    else
      want = std::ldexp(static_cast<float>(1024 + m), e - 25);
    if (neg) want = -want;
    const bool ok = std::isnan(want) ? std::isnan(v[h]) : (v[h] == want && std::signbit(v[h]) == neg);
    if (!ok && ++mismatches <= 5) ADD_FAILURE() << "half 0x" << std::hex << h << " -> " << v[h] << ", want " << want;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(SafetensorsTest, BF16IsWidenedToF32) {
  const std::vector<uint16_t> b = {0x3F80, 0xC040, 0x4049, 0x7F80, 0xFF80, 0x7FC0, 0x8000, 0x0001, 0x7F7F};
  const std::string header = R"({"b":{"dtype":"BF16","shape":[9],"data_offsets":[0,18]}})";
  const std::string file = path("bf16.safetensors");
  write_file(file, craft(header, bytes_of(b)));
  const WeightsFile loaded = load_safetensors(file);
  const Tensor& t = loaded.get("b");
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.shape(), (Shape{9}));
  const std::vector<float> v = raw_values<float>(t);
  ASSERT_EQ(v.size(), 9u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -3.0f);
  EXPECT_EQ(v[2], 3.140625f);
  EXPECT_EQ(v[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[4], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[5]));
  EXPECT_EQ(v[6], 0.0f);
  EXPECT_TRUE(std::signbit(v[6]));
  EXPECT_EQ(v[7], std::ldexp(1.0f, -133));
  EXPECT_EQ(v[8], f32_from_bits(0x7F7F0000u));
}

// The writer stores the tensors named in its bf16 argument as BF16, from the bits given (the
// checksum covers them as stored); the reader widens them back.
TEST_F(SafetensorsTest, BF16IsWrittenFromTheBitsGiven) {
  const Tensor w = Tensor::from_data(std::vector<float>{1.0f, -3.0f, 3.140625f, 0.0f}, {2, 2});
  const Tensor b = Tensor::from_data(std::vector<float>{0.1f}, {1});
  const std::string file = path("written.safetensors");
  save_safetensors(file, {{"w", w}, {"b", b}}, {}, true, {{"w", {0x3F80, 0xC040, 0x4049, 0x8000}}});
  const WeightsFile loaded = load_safetensors(file);
  ASSERT_EQ(loaded.spans.size(), 2u);
  EXPECT_EQ(loaded.spans[0].dtype, "BF16");
  EXPECT_EQ(loaded.spans[0].end - loaded.spans[0].begin, 8u);
  EXPECT_EQ(loaded.spans[1].dtype, "F32");
  EXPECT_EQ(raw_values<float>(loaded.get("w")), (std::vector<float>{1.0f, -3.0f, 3.140625f, -0.0f}));
  EXPECT_EQ(raw_values<float>(loaded.get("b")), (std::vector<float>{0.1f}));
  EXPECT_EQ(scan_contents(loaded, true, true).checksum, loaded.metadata.at(kChecksumKey));
  // Bits for a tensor not written, of the wrong count, or for a tensor that is not float32: refused.
  EXPECT_THROW(save_safetensors(file, {{"b", b}}, {}, false, {{"w", {1, 2, 3, 4}}}), Error);
  EXPECT_THROW(save_safetensors(file, {{"w", w}}, {}, false, {{"w", {1, 2, 3}}}), Error);
  EXPECT_THROW(save_safetensors(file, {{"i", Tensor::zeros({1}, DType::I64)}}, {}, false, {{"i", {1}}}), Error);
}

TEST_F(SafetensorsTest, I32IsWidenedToI64) {
  const std::vector<int32_t> ints = {
      std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1, 0, 7, -123456};
  const std::string header = R"({"i":{"dtype":"I32","shape":[2,3],"data_offsets":[0,24]}})";
  const std::string file = path("i32.safetensors");
  write_file(file, craft(header, bytes_of(ints)));
  const WeightsFile loaded = load_safetensors(file);
  const Tensor& t = loaded.get("i");
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(raw_values<int64_t>(t), (std::vector<int64_t>{-2147483648LL, 2147483647LL, -1, 0, 7, -123456}));
}

TEST_F(SafetensorsTest, MixedDtypesLoadInDataOffsetOrder) {
  // JSON key order (alphabetical) differs from the data order; the result follows the offsets.
  const std::string header = R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[16,24]},)"
                             R"("b":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                             R"("c":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]},)"
                             R"("d":{"dtype":"F32","shape":[0,3],"data_offsets":[24,24]}})";
  const std::string data = bytes_of(std::vector<double>{-6.5}) +
                           bytes_of(std::vector<uint16_t>{0x3F80, 0x4000, 0x4040, 0x4080}) +
                           bytes_of(std::vector<int32_t>{5, -5});
  const std::string file = path("mixed.safetensors");
  write_file(file, craft(header, data));
  const WeightsFile loaded = load_safetensors(file);
  EXPECT_EQ(names_of(loaded), (std::vector<std::string>{"b", "c", "a", "d"}));
  EXPECT_EQ(loaded.get("b").dtype(), DType::F64);
  EXPECT_EQ(loaded.get("b").dim(), 0);
  EXPECT_EQ(loaded.get("b").item(), -6.5);
  EXPECT_EQ(loaded.get("c").dtype(), DType::F32);
  EXPECT_EQ(loaded.get("c").to_vector(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(loaded.get("a").dtype(), DType::I64);
  EXPECT_EQ(loaded.get("a").to_vector(), (std::vector<double>{5, -5}));
  EXPECT_EQ(loaded.get("d").shape(), (Shape{0, 3}));
  EXPECT_EQ(loaded.get("d").numel(), 0);
}

TEST_F(SafetensorsTest, UnalignedTensorsLoadCorrectly) {
  // Header length 8k + 4 puts the data section at offset 4 mod 8, and in-section offsets 4 and 12
  // are unaligned too: every zero-copy dtype must be copied and still read right.
  std::string header = R"({"f":{"dtype":"F32","shape":[3],"data_offsets":[4,16]},)"
                       R"("d":{"dtype":"F64","shape":[2],"data_offsets":[20,36]},)"
                       R"("i":{"dtype":"I64","shape":[1],"data_offsets":[36,44]}})";
  for (int pad = 0; pad < 8; ++pad) {
    const std::string h = header + std::string(pad, ' ');
    const std::string data = std::string(4, '\x55') + bytes_of(std::vector<float>{1.25f, -2.5f, 3e38f}) +
                             std::string(4, '\x66') + bytes_of(std::vector<double>{1.0 / 3.0, -1e-300}) +
                             bytes_of(std::vector<int64_t>{-9007199254740993LL});
    const std::string file = path("unaligned" + std::to_string(pad) + ".safetensors");
    write_file(file, craft(h, data));
    const WeightsFile loaded = load_safetensors(file);
    EXPECT_EQ(names_of(loaded), (std::vector<std::string>{"f", "d", "i"})) << "pad " << pad;
    EXPECT_EQ(raw_values<float>(loaded.get("f")), (std::vector<float>{1.25f, -2.5f, 3e38f})) << "pad " << pad;
    EXPECT_EQ(raw_values<double>(loaded.get("d")), (std::vector<double>{1.0 / 3.0, -1e-300})) << "pad " << pad;
    EXPECT_EQ(raw_values<int64_t>(loaded.get("i")), (std::vector<int64_t>{-9007199254740993LL})) << "pad " << pad;
    for (const auto& [name, t] : loaded.tensors) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % dtype_size(t.dtype()), 0u) << name << " pad " << pad;
    }
    // The same bytes in memory give the same result.
    expect_same(parse_safetensors(to_shared(read_file(file)), "mem"), loaded);
  }
}

}  // namespace
}  // namespace vit::io
