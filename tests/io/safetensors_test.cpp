// safetensors reader/writer: round trips, widening of F16/BF16/I32, parse vs load, and refusal
// (vit::Error naming the file and the problem, never a crash) of malformed or truncated files.
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace vit::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// ------------------------------------------------------------------------------------- helpers

// A fresh directory under TempDir(), removed with everything in it when the test ends.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
    tmpl += "vit_safetensors_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr) << "mkdtemp failed for " << tmpl;
    dir_ = buf.data();
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// u64 little-endian header length, the header text, then the data bytes.
std::string craft(const std::string& header, const std::string& data = "") {
  return u64_le(header.size()) + header + data;
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(s.data(), values.data(), s.size());
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  ASSERT_TRUE(out.good()) << "cannot create " << path;
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::shared_ptr<std::vector<char>> to_shared(const std::string& bytes) {
  return std::make_shared<std::vector<char>>(bytes.begin(), bytes.end());
}

// Runs fn, which must throw vit::Error; returns its message ("" and a failure otherwise).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-vit::Error exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

template <typename T>
std::vector<T> raw_values(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

// Bit patterns, so that NaN, -0.0 and denormals compare exactly.
std::vector<uint32_t> bits_f32(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float v : raw_values<float>(t)) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    out.push_back(b);
  }
  return out;
}
std::vector<uint64_t> bits_f64(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : raw_values<double>(t)) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    out.push_back(b);
  }
  return out;
}

// Same names, order, shapes, dtypes, exact (bitwise) values and metadata.
void expect_same(const SafetensorsFile& a, const SafetensorsFile& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    EXPECT_EQ(na, nb) << "tensor " << i;
    ASSERT_EQ(ta.dtype(), tb.dtype()) << na;
    EXPECT_EQ(ta.shape(), tb.shape()) << na;
    switch (ta.dtype()) {
      case DType::F32: EXPECT_EQ(bits_f32(ta), bits_f32(tb)) << na; break;
      case DType::F64: EXPECT_EQ(bits_f64(ta), bits_f64(tb)) << na; break;
      case DType::I64: EXPECT_EQ(raw_values<int64_t>(ta), raw_values<int64_t>(tb)) << na; break;
    }
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

std::vector<std::string> names_of(const SafetensorsFile& f) {
  std::vector<std::string> out;
  for (const auto& kv : f.tensors) out.push_back(kv.first);
  return out;
}

float f32_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// ---------------------------------------------------------------------------------- round trip

TEST_F(SafetensorsTest, RoundTripKeepsNamesOrderShapesDtypesValuesAndMetadata) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor f32 = Tensor::from_data(
      std::vector<float>{1.5f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::denorm_min(), 3.14159274f, -1e30f, 65504.f, 1e-7f, 0.f, 42.f},
      {3, 4});
  const Tensor f64 = Tensor::from_data(
      std::vector<double>{1.0 / 3.0, -1e300, std::numeric_limits<double>::denorm_min(), -0.0, 2.718281828459045},
      {5, 1});
  const Tensor i64 = Tensor::from_data(
      std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, 0,
                           (int64_t{1} << 53) + 1, 7},
      {2, 1, 3});
  const Tensor scalar = Tensor::scalar(-2.25, DType::F64);
  const Tensor empty = Tensor::empty({0}, DType::F32);
  Tensor base = Tensor::arange(6, DType::F32).view({2, 3});
  const Tensor transposed = base.transpose(0, 1);  // (3, 2), not contiguous
  ASSERT_FALSE(transposed.is_contiguous());
  const Tensor sliced = Tensor::arange(10, DType::I64).slice(0, 1, 9, 3);  // [1, 4, 7]
  const Tensor scalar_i = Tensor::scalar(-5, DType::I64);

  // Names deliberately not in alphabetical order: the file order must be the save order.
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.weight", f32},    {"a.double", f64}, {"m.index", i64},       {"scalar", scalar},
      {"empty", empty},     {"b.transposed", transposed}, {"sliced", sliced}, {"0", scalar_i}};
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quotes \" and \\ and unicode \xc3\xa9"}, {"empty", ""}};
  const std::string file = path("model.safetensors");
  save_safetensors(file, tensors, metadata);

  const SafetensorsFile loaded = load_safetensors(file);
  EXPECT_EQ(loaded.path, file);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, want] = tensors[i];
    const auto& [got_name, got] = loaded.tensors[i];
    EXPECT_EQ(got_name, name) << "position " << i;
    ASSERT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_TRUE(got.is_contiguous()) << name;
    switch (want.dtype()) {
      case DType::F32: EXPECT_EQ(bits_f32(got), bits_f32(want)) << name; break;
      case DType::F64: EXPECT_EQ(bits_f64(got), bits_f64(want)) << name; break;
      case DType::I64: EXPECT_EQ(raw_values<int64_t>(got), raw_values<int64_t>(want)) << name; break;
    }
    EXPECT_TRUE(loaded.contains(name));
    EXPECT_EQ(loaded.get(name).shape(), want.shape());
  }
  EXPECT_EQ(loaded.metadata, metadata);
  // Spot checks that do not depend on the helpers above.
  EXPECT_EQ(loaded.get("scalar").dim(), 0);
  EXPECT_EQ(loaded.get("scalar").item(), -2.25);
  EXPECT_EQ(loaded.get("empty").numel(), 0);
  EXPECT_EQ(loaded.get("b.transposed").to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(loaded.get("sliced").to_vector(), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(loaded.get("m.index").data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(std::isnan(loaded.get("z.weight").at({1, 0})));
  EXPECT_TRUE(std::signbit(loaded.get("z.weight").at({0, 1})));
  EXPECT_FALSE(loaded.contains("missing"));
}

TEST_F(SafetensorsTest, SavedDataSectionIsEightByteAligned) {
  // Several names/metadata of different lengths, so the raw JSON length varies mod 8.
  for (int k = 0; k < 8; ++k) {
    const std::string file = path("aligned" + std::to_string(k) + ".safetensors");
    const std::string name = "t" + std::string(k, 'x');
    save_safetensors(file, {{name, Tensor::ones({3}, DType::F32)}, {"d", Tensor::ones({1}, DType::F64)}},
                     {{"k", std::string(k, 'v')}});
    const std::string bytes = read_file(file);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t header_len = 0;
    for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    EXPECT_EQ(header_len % 8, 0u) << "k=" << k;
    EXPECT_EQ(bytes.size(), 8 + header_len + 3 * 4 + 8) << "k=" << k;
    const SafetensorsFile loaded = load_safetensors(file);
    EXPECT_EQ(loaded.get(name).to_vector(), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(loaded.get("d").item(), 1.0);
  }
}

TEST_F(SafetensorsTest, SaveWithNoTensorsAndNoMetadataLoadsEmpty) {
  const std::string file = path("nothing.safetensors");
  save_safetensors(file, {});
  const SafetensorsFile loaded = load_safetensors(file);
  EXPECT_TRUE(loaded.tensors.empty());
  EXPECT_TRUE(loaded.metadata.empty());
}

TEST_F(SafetensorsTest, OverwriteReplacesFileAndLeavesNoTmp) {
  const std::string file = path("w.safetensors");
  save_safetensors(file, {{"a", Tensor::full({4}, 1.0)}, {"b", Tensor::full({2}, 2.0)}}, {{"v", "1"}});
  save_safetensors(file, {{"c", Tensor::full({2, 2}, 3.0, DType::F64)}}, {{"v", "2"}});
  const SafetensorsFile loaded = load_safetensors(file);
  EXPECT_EQ(names_of(loaded), (std::vector<std::string>{"c"}));
  EXPECT_EQ(loaded.get("c").dtype(), DType::F64);
  EXPECT_EQ(loaded.get("c").to_vector(), (std::vector<double>{3, 3, 3, 3}));
  EXPECT_EQ(loaded.metadata, (std::map<std::string, std::string>{{"v", "2"}}));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, (std::vector<std::string>{"w.safetensors"}));
}

TEST_F(SafetensorsTest, SaveRefusesRepeatedNamesAndUndefinedTensors) {
  const std::string file = path("dup.safetensors");
  std::string msg = error_of([&] { save_safetensors(file, {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}}); });
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("'a' repeated"));
  msg = error_of([&] { save_safetensors(file, {{"u", Tensor()}}); });
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("undefined"));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

TEST_F(SafetensorsTest, SaveIntoMissingDirectoryThrows) {
  const std::string file = path("no/such/dir/model.safetensors");
  const std::string msg = error_of([&] { save_safetensors(file, {{"a", Tensor::ones({2})}}); });
  EXPECT_THAT(msg, HasSubstr("[safetensors]"));
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("cannot write"));
  EXPECT_FALSE(fs::exists(path("no")));
}

// A tensor called "__metadata__" collides with the reserved header key. Saving it must either be
// refused or give a file that loads back; writing a file the reader then refuses is a bug.
TEST_F(SafetensorsTest, TensorNamedMetadataIsRefusedOrRoundTrips) {
  const std::string file = path("reserved.safetensors");
  try {
    save_safetensors(file, {{"__metadata__", Tensor::ones({2})}});
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("__metadata__"));
    return;  // refused at save time: fine
  }
  try {
    const SafetensorsFile loaded = load_safetensors(file);
    EXPECT_TRUE(loaded.contains("__metadata__"));
  } catch (const Error& e) {
    ADD_FAILURE() << "save_safetensors accepted a tensor named __metadata__ but wrote a file that "
                     "load_safetensors refuses: "
                  << e.what();
  }
}

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
  const SafetensorsFile loaded = load_safetensors(file);
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
  const SafetensorsFile f = parse_safetensors(to_shared(craft(header, bytes_of(halves))), "all_halves");
  const std::vector<float> v = raw_values<float>(f.get("all"));
  ASSERT_EQ(v.size(), 65536u);
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool neg = h & 0x8000;
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    float want;
    if (e == 0) want = std::ldexp(static_cast<float>(m), -24);
    else if (e == 31) want = m == 0 ? std::numeric_limits<float>::infinity() : std::nanf("");
    else want = std::ldexp(static_cast<float>(1024 + m), e - 25);
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
  const SafetensorsFile loaded = load_safetensors(file);
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

TEST_F(SafetensorsTest, I32IsWidenedToI64) {
  const std::vector<int32_t> ints = {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1, 0,
                                     7, -123456};
  const std::string header = R"({"i":{"dtype":"I32","shape":[2,3],"data_offsets":[0,24]}})";
  const std::string file = path("i32.safetensors");
  write_file(file, craft(header, bytes_of(ints)));
  const SafetensorsFile loaded = load_safetensors(file);
  const Tensor& t = loaded.get("i");
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(raw_values<int64_t>(t),
            (std::vector<int64_t>{-2147483648LL, 2147483647LL, -1, 0, 7, -123456}));
}

TEST_F(SafetensorsTest, MixedDtypesLoadInDataOffsetOrder) {
  // JSON key order (alphabetical) differs from the data order; the result follows the offsets.
  const std::string header =
      R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[16,24]},)"
      R"("b":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
      R"("c":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]},)"
      R"("d":{"dtype":"F32","shape":[0,3],"data_offsets":[24,24]}})";
  const std::string data = bytes_of(std::vector<double>{-6.5}) + bytes_of(std::vector<uint16_t>{0x3F80, 0x4000, 0x4040, 0x4080}) +
                           bytes_of(std::vector<int32_t>{5, -5});
  const std::string file = path("mixed.safetensors");
  write_file(file, craft(header, data));
  const SafetensorsFile loaded = load_safetensors(file);
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
  std::string header =
      R"({"f":{"dtype":"F32","shape":[3],"data_offsets":[4,16]},)"
      R"("d":{"dtype":"F64","shape":[2],"data_offsets":[20,36]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[36,44]}})";
  for (int pad = 0; pad < 8; ++pad) {
    const std::string h = header + std::string(pad, ' ');
    const std::string data = std::string(4, '\x55') + bytes_of(std::vector<float>{1.25f, -2.5f, 3e38f}) +
                             std::string(4, '\x66') + bytes_of(std::vector<double>{1.0 / 3.0, -1e-300}) +
                             bytes_of(std::vector<int64_t>{-9007199254740993LL});
    const std::string file = path("unaligned" + std::to_string(pad) + ".safetensors");
    write_file(file, craft(h, data));
    const SafetensorsFile loaded = load_safetensors(file);
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

// ------------------------------------------------------------------------------ parse vs load

TEST_F(SafetensorsTest, ParseInMemoryMatchesLoad) {
  const std::string saved = path("saved.safetensors");
  save_safetensors(saved,
                   {{"w", Tensor::from_data(std::vector<float>{1, -2, 3.5f, 0.125f}, {2, 2})},
                    {"d", Tensor::from_data(std::vector<double>{1e-310, 2}, {2})},
                    {"n", Tensor::from_data(std::vector<int64_t>{-3, 4, 5}, {3, 1})},
                    {"s", Tensor::scalar(9)}},
                   {{"k", "v"}});
  const std::string crafted = path("crafted.safetensors");
  write_file(crafted,
             craft(R"({"__metadata__":{"x":"y"},"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                   R"("i":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                   bytes_of(std::vector<uint16_t>{0x3C00, 0x0001}) + bytes_of(std::vector<int32_t>{-8})));
  for (const std::string& file : {saved, crafted}) {
    const SafetensorsFile from_disk = load_safetensors(file);
    const SafetensorsFile from_mem = parse_safetensors(to_shared(read_file(file)), "in-memory");
    EXPECT_FALSE(from_disk.tensors.empty()) << file;
    EXPECT_EQ(from_mem.path, "in-memory");
    expect_same(from_mem, from_disk);
  }
}

// ------------------------------------------------------------------------------------ lifetime

TEST_F(SafetensorsTest, LoadedTensorsOutliveTheFileObject) {
  const std::string file = path("life.safetensors");
  const std::vector<float> values = {0.5f, 1.5f, -2.5f, 4.0f, 8.0f, 16.0f};
  save_safetensors(file, {{"w", Tensor::from_data(values, {2, 3})},
                          {"i", Tensor::from_data(std::vector<int64_t>{11, 22}, {2})}});
  Tensor w, i, view;
  {
    SafetensorsFile loaded = load_safetensors(file);
    w = loaded.get("w");
    i = loaded.get("i");
    view = loaded.get("w").transpose(0, 1);
  }  // file object destroyed
  fs::remove(file);  // and the file unlinked: the mapping must stay valid
  EXPECT_EQ(raw_values<float>(w), values);
  EXPECT_EQ(raw_values<int64_t>(i), (std::vector<int64_t>{11, 22}));
  EXPECT_EQ(view.to_vector(), (std::vector<double>{0.5, 4.0, 1.5, 8.0, -2.5, 16.0}));
}

TEST_F(SafetensorsTest, ParsedTensorsKeepTheBufferAlive) {
  const std::string file = path("buf.safetensors");
  save_safetensors(file, {{"w", Tensor::from_data(std::vector<float>{1, 2, 3}, {3})}});
  auto bytes = to_shared(read_file(file));
  std::weak_ptr<std::vector<char>> weak = bytes;
  Tensor w;
  {
    SafetensorsFile parsed = parse_safetensors(std::move(bytes), "buf");
    w = parsed.get("w");
  }
  bytes.reset();
  EXPECT_FALSE(weak.expired()) << "nothing keeps the parsed bytes alive";
  EXPECT_EQ(raw_values<float>(w), (std::vector<float>{1, 2, 3}));
  w = Tensor();
  EXPECT_TRUE(weak.expired()) << "the buffer leaks after the last tensor is gone";
}

// Loaded tensors are ordinary mutable Tensors (data<T>(), set, fill_, copy_ all write). Writing
// into one must not crash the process (e.g. by writing into a read-only memory mapping); run in a
// child process so that a crash fails this test instead of killing the suite.
TEST_F(SafetensorsTest, LoadedTensorsCanBeWrittenWithoutCrashing) {
  const std::string file = path("rw.safetensors");
  save_safetensors(file, {{"w", Tensor::from_data(std::vector<float>{1, 2, 3, 4}, {4})}});
  EXPECT_EXIT(
      {
        SafetensorsFile loaded = load_safetensors(file);
        Tensor w = loaded.get("w");
        w.fill_(7.0);
        std::_Exit(w.to_vector() == std::vector<double>{7, 7, 7, 7} ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
  // Writing must not change the file on disk.
  EXPECT_EQ(load_safetensors(file).get("w").to_vector(), (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(SafetensorsTest, GetOfMissingNameThrowsNamingFileAndTensor) {
  const std::string file = path("g.safetensors");
  save_safetensors(file, {{"a", Tensor::ones({1})}});
  const SafetensorsFile loaded = load_safetensors(file);
  const std::string msg = error_of([&] { (void)loaded.get("nope"); });
  EXPECT_THAT(msg, HasSubstr("[safetensors]"));
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("no tensor 'nope'"));
}

// ---------------------------------------------------------------------------------- bad input

TEST_F(SafetensorsTest, MissingFileThrows) {
  const std::string file = path("absent.safetensors");
  const std::string msg = error_of([&] { load_safetensors(file); });
  EXPECT_THAT(msg, HasSubstr("[safetensors]"));
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("cannot open"));
}

TEST_F(SafetensorsTest, DirectoryThrows) {
  const std::string msg = error_of([&] { load_safetensors(dir_); });
  EXPECT_THAT(msg, HasSubstr(dir_));
  EXPECT_THAT(msg, HasSubstr("not a regular file"));
}

TEST_F(SafetensorsTest, EmptyFileThrows) {
  const std::string file = path("empty.safetensors");
  write_file(file, "");
  const std::string msg = error_of([&] { load_safetensors(file); });
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("empty"));
  const std::string mem = error_of([&] { parse_safetensors(to_shared(""), "empty-mem"); });
  EXPECT_THAT(mem, HasSubstr("empty-mem"));
  EXPECT_THAT(mem, HasSubstr("0 bytes"));
}

// Writes bytes to a file and expects both load_safetensors and parse_safetensors to throw
// vit::Error naming the file (resp. the buffer name) and containing every one of `problem`.
class BadInput : public SafetensorsTest {
 protected:
  void expect_refused(const std::string& bytes, const std::vector<std::string>& problem, const std::string& tag) {
    SCOPED_TRACE(tag);
    const std::string file = path(tag + ".safetensors");
    write_file(file, bytes);
    const std::string msg = error_of([&] { load_safetensors(file); });
    EXPECT_THAT(msg, HasSubstr("[safetensors] " + file + ": "));
    for (const auto& p : problem) EXPECT_THAT(msg, HasSubstr(p));
    const std::string mem = error_of([&] { parse_safetensors(to_shared(bytes), "mem:" + tag); });
    EXPECT_THAT(mem, HasSubstr("[safetensors] mem:" + tag + ": "));
    for (const auto& p : problem) EXPECT_THAT(mem, HasSubstr(p));
  }
  // One tensor entry `entry` named "w" with `data` bytes.
  void expect_entry_refused(const std::string& entry, const std::string& data, const std::vector<std::string>& problem,
                            const std::string& tag) {
    expect_refused(craft(R"({"w":)" + entry + "}", data), problem, tag);
  }
};

TEST_F(BadInput, ShorterThanEightBytes) {
  expect_refused("abcde", {"5 bytes", "too short"}, "short5");
  expect_refused(std::string(7, '\0'), {"7 bytes", "too short"}, "short7");
}

TEST_F(BadInput, HeaderLengthLargerThanFile) {
  expect_refused(u64_le(100) + "{}", {"header length 100", "longer than the file"}, "hdr_long");
  expect_refused(u64_le(1), {"header length 1", "longer than the file"}, "hdr_long_exact8");
}

TEST_F(BadInput, HeaderLengthOverLimit) {
  expect_refused(u64_le(200000000) + "{}", {"header length 200000000", "100 MB"}, "hdr_200m");
  expect_refused(u64_le(~uint64_t{0}) + "{}", {"100 MB"}, "hdr_max");
  expect_refused(u64_le(uint64_t{1} << 63) + "{}", {"100 MB"}, "hdr_2_63");
}

TEST_F(BadInput, InvalidJson) {
  expect_refused(craft("{not json"), {"not valid JSON"}, "json_garbage");
  expect_refused(craft(R"({"w":{"dtype":"F32",)"), {"not valid JSON"}, "json_cut");
  expect_refused(craft(""), {"not valid JSON"}, "json_empty");
  expect_refused(craft("{}  x"), {"not valid JSON"}, "json_trailing");
  expect_refused(craft(R"({"a":1}{"b":2})"), {"not valid JSON"}, "json_two_values");
}

// A NUL byte is not JSON: "{}\0garbage" must be refused like "{} garbage" (the reference
// implementation, serde_json, reports trailing characters), not read as "{}" with the rest ignored.
TEST_F(BadInput, HeaderWithNulThenGarbageIsRefused) {
  expect_refused(craft(std::string("{}\0garbage", 10)), {"header contains a NUL byte"}, "json_nul_garbage");
  expect_refused(craft(std::string(R"({"__metadata__":{"a":"b"}})", 26) + std::string("\0{\"x\":", 6)),
                 {"header contains a NUL byte"}, "json_nul_cut");
}

TEST_F(BadInput, DeeplyNestedJsonDoesNotCrash) {
  const int depth = 100000;
  expect_refused(craft(std::string(depth, '[') + std::string(depth, ']')), {"not a JSON object"}, "deep_array");
  expect_refused(craft(R"({"__metadata__":{"k":)" + std::string(depth, '[') + std::string(depth, ']') + "}}"),
                 {"__metadata__ value 'k' is not a string"}, "deep_meta");
}

TEST_F(BadInput, JsonNotAnObject) {
  expect_refused(craft("[1,2,3]"), {"not a JSON object"}, "json_array");
  expect_refused(craft("42"), {"not a JSON object"}, "json_number");
  expect_refused(craft(R"("text")"), {"not a JSON object"}, "json_string");
}

TEST_F(BadInput, EntryMissingFields) {
  const std::vector<std::string> problem = {"tensor 'w'", "dtype", "shape", "data_offsets"};
  expect_entry_refused(R"({"shape":[1],"data_offsets":[0,4]})", std::string(4, '\0'), problem, "no_dtype");
  expect_entry_refused(R"({"dtype":"F32","data_offsets":[0,4]})", std::string(4, '\0'), problem, "no_shape");
  expect_entry_refused(R"({"dtype":"F32","shape":[1]})", std::string(4, '\0'), problem, "no_offsets");
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", std::string(4, '\0'), problem,
                       "offsets_1");
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})", std::string(8, '\0'), problem,
                       "offsets_3");
  expect_entry_refused(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})", std::string(4, '\0'), problem,
                       "dtype_number");
  expect_entry_refused(R"({"dtype":"F32","shape":1,"data_offsets":[0,4]})", std::string(4, '\0'), problem,
                       "shape_number");
  expect_entry_refused(R"([1,2,3])", "", problem, "entry_array");
  expect_entry_refused(R"("F32")", "", problem, "entry_string");
}

TEST_F(BadInput, UnsupportedDtype) {
  for (const std::string dtype : {"F8_E4M3", "U8", "BOOL", "I16", "f32", ""}) {
    expect_entry_refused(R"({"dtype":")" + dtype + R"(","shape":[4],"data_offsets":[0,4]})", std::string(4, '\0'),
                         {"tensor 'w'", "unsupported dtype " + dtype}, "dtype_" + dtype);
  }
}

TEST_F(BadInput, BadShapeEntries) {
  const std::vector<std::string> problem = {"tensor 'w'", "shape entries must be non-negative integers"};
  const std::string data(8, '\0');
  expect_entry_refused(R"({"dtype":"F32","shape":[-1,2],"data_offsets":[0,8]})", data, problem, "shape_neg");
  expect_entry_refused(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})", data, problem, "shape_frac");
  expect_entry_refused(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", data, problem, "shape_float");
  expect_entry_refused(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})", data, problem, "shape_string");
  expect_entry_refused(R"({"dtype":"F32","shape":[null],"data_offsets":[0,8]})", data, problem, "shape_null");
  expect_entry_refused(R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})", data, problem, "shape_nested");
  expect_entry_refused(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]})", data, problem,
                       "shape_2_64");
  expect_entry_refused(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]})", data,
                       {"tensor 'w'", "too large"}, "shape_2_63");
}

TEST_F(BadInput, BadDataOffsets) {
  const std::string data(8, '\0');
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", data,
                       {"tensor 'w'", "data_offsets must be non-negative integers"}, "off_neg");
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})", data,
                       {"tensor 'w'", "data_offsets must be non-negative integers"}, "off_float");
  expect_entry_refused(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", data,
                       {"tensor 'w'", "data_offsets [0, 16]", "outside the data section (8 bytes)"}, "off_past_end");
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[8,12]})", data,
                       {"tensor 'w'", "data_offsets [8, 12]", "outside"}, "off_begin_at_end");
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", data,
                       {"tensor 'w'", "data_offsets [8, 0]"}, "off_reversed");
  expect_entry_refused(R"({"dtype":"F32","shape":[0],"data_offsets":[4,0]})", data,
                       {"tensor 'w'", "data_offsets [4, 0]"}, "off_reversed_empty");
  expect_entry_refused(
      R"({"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,18446744073709551615]})", data,
      {"tensor 'w'", "outside"}, "off_huge");
}

TEST_F(BadInput, ByteLengthNotMatchingShape) {
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", std::string(8, '\0'),
                       {"tensor 'w'", "needs 8 bytes", "span 4"}, "len_short");
  expect_entry_refused(R"({"dtype":"F64","shape":[2],"data_offsets":[0,12]})", std::string(16, '\0'),
                       {"tensor 'w'", "needs 16 bytes", "span 12"}, "len_long");
  expect_entry_refused(R"({"dtype":"F16","shape":[],"data_offsets":[0,4]})", std::string(4, '\0'),
                       {"tensor 'w'", "needs 2 bytes", "span 4"}, "len_scalar");
  expect_entry_refused(R"({"dtype":"I32","shape":[0],"data_offsets":[0,4]})", std::string(4, '\0'),
                       {"tensor 'w'", "needs 0 bytes", "span 4"}, "len_empty");
}

TEST_F(BadInput, OverlappingTensors) {
  expect_refused(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       std::string(12, '\0')),
                 {"'a' and 'b' overlap"}, "overlap_partial");
  expect_refused(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                       std::string(8, '\0')),
                 {"overlap"}, "overlap_same");
  expect_refused(craft(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
                       R"("b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
                       std::string(16, '\0')),
                 {"overlap"}, "overlap_inside");
}

TEST_F(BadInput, ShapeProductOverflows) {
  expect_entry_refused(R"({"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]})",
                       std::string(8, '\0'), {"tensor 'w'", "overflows"}, "numel_overflow");
  // numel fits in int64 but the byte count does not fit in 64 bits.
  expect_entry_refused(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]})", std::string(8, '\0'),
                       {"tensor 'w'", "overflows"}, "bytes_overflow");
  // and a byte count that fits but is absurd for an 8-byte file.
  expect_entry_refused(R"({"dtype":"F64","shape":[1000000,1000000],"data_offsets":[0,8]})", std::string(8, '\0'),
                       {"tensor 'w'", "needs 8000000000000 bytes"}, "bytes_huge");
}

TEST_F(BadInput, MetadataNotStrings) {
  expect_refused(craft(R"({"__metadata__":{"ok":"x","n":1}})"), {"__metadata__ value 'n' is not a string"}, "meta_num");
  expect_refused(craft(R"({"__metadata__":{"o":{"a":"b"}}})"), {"__metadata__ value 'o' is not a string"}, "meta_obj");
  expect_refused(craft(R"({"__metadata__":{"z":null}})"), {"__metadata__ value 'z' is not a string"}, "meta_null");
  expect_refused(craft(R"({"__metadata__":"text"})"), {"__metadata__ is not an object"}, "meta_string");
}

TEST_F(BadInput, ValidMinimalFilesAreAccepted) {
  // Guards the helpers above: an empty object, and a header padded with spaces, load fine.
  EXPECT_TRUE(parse_safetensors(to_shared(craft("{}")), "min").tensors.empty());
  const SafetensorsFile f =
      parse_safetensors(to_shared(craft(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}   )",
                                        bytes_of(std::vector<float>{2.5f}))),
                        "padded");
  EXPECT_EQ(f.get("w").item(), 2.5);
}

// --------------------------------------------------------------------------------- truncation

TEST_F(SafetensorsTest, TruncatedCopiesAreRefused) {
  const std::string file = path("full.safetensors");
  save_safetensors(file,
                   {{"a", Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5}, {5})},
                    {"b", Tensor::from_data(std::vector<int64_t>{6, 7}, {2})},
                    {"c", Tensor::from_data(std::vector<double>{8.5}, {1})}},
                   {{"meta", "data"}});
  const std::string full = read_file(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, full.data(), 8);
  ASSERT_EQ(full.size(), 8 + header_len + 20 + 16 + 8);
  ASSERT_NO_THROW(load_safetensors(file));

  // Every cut position, in memory.
  for (size_t cut = 0; cut < full.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(full.size()));
    const std::string msg = error_of([&] { parse_safetensors(to_shared(full.substr(0, cut)), "truncated"); });
    EXPECT_THAT(msg, HasSubstr("[safetensors] truncated: "));
  }
  // Representative cuts, from disk, with the expected diagnosis.
  const size_t data0 = 8 + header_len;
  struct Cut {
    size_t at;
    std::string problem;
  };
  const std::vector<Cut> cuts = {{0, "empty"},
                                 {3, "too short"},
                                 {8, "longer than the file"},
                                 {8 + header_len / 2, "longer than the file"},
                                 {data0 - 1, "longer than the file"},
                                 {data0, "outside the data section"},
                                 {data0 + 10, "outside the data section"},
                                 {data0 + 20 + 8, "outside the data section"},
                                 {full.size() - 1, "outside the data section"}};
  for (const Cut& c : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(c.at));
    const std::string cut_file = path("cut" + std::to_string(c.at) + ".safetensors");
    write_file(cut_file, full.substr(0, c.at));
    const std::string msg = error_of([&] { load_safetensors(cut_file); });
    EXPECT_THAT(msg, HasSubstr(cut_file));
    EXPECT_THAT(msg, HasSubstr(c.problem));
  }
}

}  // namespace
}  // namespace vit::io
