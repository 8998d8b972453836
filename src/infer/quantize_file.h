// `vit quantize` as a library call (the CLI, the C++ facade and the Python module share it):
// load any checkpoint vit reads, quantize its Linears (infer/quantize.h) and write the int8 copy.
#pragma once

#include <cstdint>
#include <string>

#include "infer/pretrained.h"
#include "infer/quantize.h"

namespace vit::infer {

struct QuantizeFileResult {
  QuantizeSummary summary;
  std::string layout;  // of the input file
  double seconds = 0.0;
  uint64_t in_bytes = 0, out_bytes = 0;
};

// Refuses an empty `out`, a directory, the input itself, an existing file without `overwrite`,
// and an input that is already int8, naming the path. bits: the weights' (8, or 7 for the older
// scheme). `names` says how the caller spelled the output and overwrite options in messages (the
// command's flags by default; the library's and Python's keywords).
struct QuantizeNames {
  std::string out = "--out", overwrite = "--overwrite";
};
QuantizeFileResult quantize_file(const std::string& in, const std::string& out, const LoadOptions& options,
                                 bool overwrite, int bits = 8, const QuantizeNames& names = {});

}  // namespace vit::infer
