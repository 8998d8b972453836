// Golden-file helpers: load a reference file written by tools/make_golden.py (PyTorch, float64)
// and compare tensors with the tolerances named here. A failure names the tensor, the largest
// difference, where it is, and the first values of both sides.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "io/safetensors.h"

namespace vit::testing {

// |actual - expected| <= rtol * (|expected| + max|expected|): relative to each element and to the
// tensor's scale, so near-zero entries of a large tensor are not held to an impossible bound.
struct Tolerance {
  double rtol;
};
inline constexpr Tolerance kGoldenF32{1e-5};   // float32 run vs PyTorch's float64 answer
inline constexpr Tolerance kGoldenF64{1e-10};  // float64 run vs PyTorch's float64 answer
inline constexpr Tolerance kKernelF32{2e-6};   // fast float32 kernel vs its reference
inline constexpr Tolerance kExact{0.0};

io::SafetensorsFile load_golden(const std::string& file_name);
// The tensor `key` of a golden file, converted to dtype (contiguous copy).
Tensor golden(const io::SafetensorsFile& file, const std::string& key, DType dtype);
// Integer targets stored as F64.
Tensor golden_targets(const io::SafetensorsFile& file, const std::string& key);

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                                     const std::string& name);

}  // namespace vit::testing

#define EXPECT_CLOSE(actual, expected, tol) EXPECT_TRUE(::vit::testing::all_close(actual, expected, tol, #actual))
