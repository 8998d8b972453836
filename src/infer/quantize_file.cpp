// quantize_file (see quantize_file.h).
#include "infer/quantize_file.h"

#include <chrono>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/check.h"
#include "core/output_file.h"

namespace vit::infer {

namespace fs = std::filesystem;

QuantizeFileResult quantize_file(const std::string& in, const std::string& out, const LoadOptions& options,
                                 bool overwrite, int bits, const QuantizeNames& names) {
  const auto start = std::chrono::steady_clock::now();
  // The one rule for written files (core/output_file.h): not the input (links too), not a
  // directory, not an existing file without overwrite.
  const OutputFile target{names.out, out, "the int8 file", names.overwrite};
  check_output("quantize", target, {{"the input checkpoint", in}}, overwrite);
  LoadedModel m = load_model(in, options);
  VIT_CHECK(!checkpoint::is_quantized(*m.model), "quantize",
            "{}: already an int8 model (written by vit quantize); quantize the float checkpoint it came from", in);
  QuantizeFileResult result;
  try {
    result.summary = quantize_linears(*m.model, bits);
  } catch (const std::exception& e) {
    checkpoint::rethrow_for_file(in, e);
  }
  check_output("quantize", target, {{"the input checkpoint", in}}, overwrite);  // again: minutes may have passed
  checkpoint::save_checkpoint(out, *m.model, checkpoint_info(m));
  result.layout = m.layout;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.in_bytes = fs::file_size(in);
  result.out_bytes = fs::file_size(out);
  return result;
}

}  // namespace vit::infer
