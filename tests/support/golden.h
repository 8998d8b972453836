// Golden-file helpers: load a reference file written by tools/golden/make_golden.py (PyTorch, float64)
// and compare tensors with the tolerances named in support/tolerances.h (Tolerance: |actual -
// expected| <= rtol * (|expected| + max|expected|)). A failure names the tensor, the largest
// difference, where it is, and the first values of both sides.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "io/safetensors.h"
#include "support/tolerances.h"

namespace vit::testing {

io::WeightsFile load_golden(const std::string& file_name);
// The tensor `key` of a golden file, converted to dtype (contiguous copy).
Tensor golden(const io::WeightsFile& file, const std::string& key, DType dtype);
// Integer targets stored as F64.
Tensor golden_targets(const io::WeightsFile& file, const std::string& key);

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                                     const std::string& name);

// The parity bound of whole-model outputs (logits, embeddings): the same shape, and
// |actual - expected| <= tol * max|expected| everywhere. A failure names the largest difference,
// where it is, both values there, and the largest expected value.
::testing::AssertionResult close_to_largest(const Tensor& actual, const Tensor& expected, double tol,
                                            const std::string& name);

}  // namespace vit::testing

#define EXPECT_CLOSE(actual, expected, tol) EXPECT_TRUE(::vit::testing::all_close(actual, expected, tol, #actual))
