// Helpers shared by the safetensors tests (safetensors_test.cpp, safetensors_dtypes_test.cpp,
// safetensors_reject_test.cpp): a fixture with a fresh temporary directory, hand-made files
// (craft: header length, header, data), byte and bit views of tensors, error_of, expect_same.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "io/safetensors.h"

namespace vit::io::test {

namespace fs = std::filesystem;

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

inline std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// u64 little-endian header length, the header text, then the data bytes.
inline std::string craft(const std::string& header, const std::string& data = "") {
  return u64_le(header.size()) + header + data;
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(s.data(), values.data(), s.size());
  return s;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  ASSERT_TRUE(out.good()) << "cannot create " << path;
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::shared_ptr<std::vector<char>> to_shared(const std::string& bytes) {
  return std::make_shared<std::vector<char>>(bytes.begin(), bytes.end());
}

// Runs fn, which must throw vit::Error; returns its message ("" and a failure otherwise).
inline std::string error_of(const std::function<void()>& fn) {
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
inline std::vector<uint32_t> bits_f32(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float v : raw_values<float>(t)) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    out.push_back(b);
  }
  return out;
}
inline std::vector<uint64_t> bits_f64(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : raw_values<double>(t)) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    out.push_back(b);
  }
  return out;
}

// Same names, order, shapes, dtypes, exact (bitwise) values and metadata.
inline void expect_same(const WeightsFile& a, const WeightsFile& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    EXPECT_EQ(na, nb) << "tensor " << i;
    ASSERT_EQ(ta.dtype(), tb.dtype()) << na;
    EXPECT_EQ(ta.shape(), tb.shape()) << na;
    switch (ta.dtype()) {
      case DType::F32:
        EXPECT_EQ(bits_f32(ta), bits_f32(tb)) << na;
        break;
      case DType::F64:
        EXPECT_EQ(bits_f64(ta), bits_f64(tb)) << na;
        break;
      case DType::I64:
        EXPECT_EQ(raw_values<int64_t>(ta), raw_values<int64_t>(tb)) << na;
        break;
      case DType::I8:
        EXPECT_EQ(raw_values<int8_t>(ta), raw_values<int8_t>(tb)) << na;
        break;
    }
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

inline std::vector<std::string> names_of(const WeightsFile& f) {
  std::vector<std::string> out;
  for (const auto& kv : f.tensors) out.push_back(kv.first);
  return out;
}

inline float f32_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace vit::io::test
