// quantize_file (see quantize_file.h).
#include "infer/quantize_file.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "checkpoint/bf16_format.h"
#include "checkpoint/checkpoint.h"
#include "core/check.h"
#include "core/output_file.h"
#include "kernels/gemm/bf16_gemm.h"

namespace vit::infer {

namespace fs = std::filesystem;

namespace {

// What storing the model's Linear and convolution weights as bf16 rounds, measured.
Bf16Summary summarize_bf16(const model::VisionTransformer& model) {
  Bf16Summary s;
  const std::vector<std::string> names = checkpoint::bf16_weight_names(model);
  const std::set<std::string> rounded(names.begin(), names.end());
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor w = p.data().contiguous();
    if (!rounded.count(name)) {
      s.float_values += w.numel();
      continue;
    }
    s.tensors += 1;
    s.bf16_values += w.numel();
    double error2 = 0.0, weight2 = 0.0;
    const float* v = w.data<float>();
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double e = std::abs(static_cast<double>(v[i]) - kernels::from_bf16(kernels::to_bf16(v[i])));
      s.max_abs_error = std::max(s.max_abs_error, e);
      error2 += e * e;
      weight2 += static_cast<double>(v[i]) * v[i];
    }
    if (weight2 > 0) s.max_rel_rms_error = std::max(s.max_rel_rms_error, std::sqrt(error2 / weight2));
  }
  return s;
}

}  // namespace

QuantizeFileResult quantize_file(const std::string& in, const std::string& out, const LoadSettings& options,
                                 bool overwrite, int bits, const QuantizeNames& names, QuantizeDtype dtype) {
  const bool bf16 = dtype == QuantizeDtype::BF16, copy = dtype == QuantizeDtype::F32;
  const char* op = copy ? "convert" : "quantize";
  const auto start = std::chrono::steady_clock::now();
  // The one rule for written files (core/output_file.h): not the input (links too), not a
  // directory, not an existing file without overwrite.
  const OutputFile target{names.out, out, copy ? "the converted file" : (bf16 ? "the bf16 file" : "the int8 file"),
                          names.overwrite};
  check_output(op, target, {{"the input checkpoint", in}}, overwrite);
  LoadedModel m = load_model(in, options);
  VIT_CHECK(copy || !checkpoint::is_quantized(*m.model), "quantize",
            "{}: already an int8 model (written by vit quantize); quantize the float checkpoint it came from", in);
  QuantizeFileResult result;
  result.dtype = dtype;
  try {
    if (bf16) {
      result.bf16 = summarize_bf16(*m.model);
    } else if (!copy) {
      result.summary = quantize_linears(*m.model, bits);
    }
  } catch (const std::exception& e) {
    checkpoint::rethrow_for_file(in, e);
  }
  check_output(op, target, {{"the input checkpoint", in}}, overwrite);  // again: minutes may have passed
  checkpoint::save_checkpoint(out, *m.model, checkpoint_info(m), {},
                              bf16 ? checkpoint::WeightStorage::BF16 : checkpoint::WeightStorage::F32);
  result.layout = m.layout;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.in_bytes = fs::file_size(in);
  result.out_bytes = fs::file_size(out);
  return result;
}

QuantizeFileResult convert_file(const std::string& in, const std::string& out, const LoadSettings& options,
                                bool overwrite, const QuantizeNames& names) {
  return quantize_file(in, out, options, overwrite, 8, names, QuantizeDtype::F32);
}

}  // namespace vit::infer
