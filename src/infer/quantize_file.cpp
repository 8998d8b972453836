// quantize_file (see quantize_file.h).
#include "infer/quantize_file.h"

#include <chrono>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/check.h"

namespace vit::infer {

namespace fs = std::filesystem;

QuantizeFileResult quantize_file(const std::string& in, const std::string& out, const LoadOptions& options,
                                 bool overwrite) {
  const auto start = std::chrono::steady_clock::now();
  VIT_CHECK(!out.empty(), "quantize", "--out is empty: give the int8 file to write");
  VIT_CHECK(!fs::is_directory(out), "quantize", "--out {} is a directory: give the int8 file to write", out);
  std::error_code ec;
  VIT_CHECK(!fs::exists(out) || !fs::equivalent(in, out, ec), "quantize",
            "--out {} is the input checkpoint itself: write the int8 copy to another file", out);
  VIT_CHECK(overwrite || !fs::exists(out), "quantize", "--out {} exists (--overwrite replaces it)", out);
  LoadedModel m = load_model(in, options);
  VIT_CHECK(!checkpoint::is_quantized(*m.model), "quantize",
            "{}: already an int8 model (written by vit quantize); quantize the float checkpoint it came from", in);
  QuantizeFileResult result;
  try {
    result.summary = quantize_linears(*m.model);
  } catch (const std::exception& e) {
    checkpoint::rethrow_for_file(in, e);
  }
  checkpoint::save_checkpoint(out, *m.model, checkpoint_info(m));
  result.layout = m.layout;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.in_bytes = fs::file_size(in);
  result.out_bytes = fs::file_size(out);
  return result;
}

}  // namespace vit::infer
