// Int8 models (see quantize.h).
#include "infer/quantize.h"

#include <cmath>

#include "kernels/gemm/int8_gemm.h"
#include "nn/layers.h"

namespace vit::infer {

QuantizeSummary quantize_linears(model::VisionTransformer& model, int bits) {
  VIT_CHECK(bits == 7 || bits == 8, "quantize", "--bits {}: the int8 schemes have 8-bit or 7-bit weights", bits);
  VIT_CHECK(!checkpoint::is_quantized(model), "quantize",
            "the model is already quantized (int8); quantize its float checkpoint");
  QuantizeSummary s;
  s.bits = bits;
  for (const auto& [name, l] : checkpoint::named_linears(model)) {
    const std::string weight_name = name + ".weight";
    const Tensor w = l->weight.data().to(DType::F32).contiguous();
    const int64_t N = l->out_features, K = l->in_features;
    VIT_CHECK(w.dim() == 2 && w.size(0) == N && w.size(1) == K, "quantize", "'{}' is {}, expected ({}, {})",
              weight_name, shape_str(w.shape()), N, K);
    Tensor q = Tensor::empty({N, K}, DType::I8);
    Tensor scale = Tensor::empty({N});
    const float* wp = w.data<float>();
    const int64_t bad = kernels::quantize_weight(wp, N, K, q.data<int8_t>(), scale.data<float>(), bits);
    VIT_CHECK(bad < 0, "quantize", "'{}' holds {} at ({}, {}): refusing to quantize non-finite weights", weight_name,
              bad >= 0 ? number_str(wp[bad]) : "", bad / std::max<int64_t>(K, 1), bad % std::max<int64_t>(K, 1));
    double sum_sq = 0, err_sq = 0;
    for (int64_t n = 0; n < N; ++n) {
      const float sn = scale.data<float>()[n];
      for (int64_t k = 0; k < K; ++k) {
        const double x = wp[n * K + k], d = x - static_cast<double>(q.data<int8_t>()[n * K + k]) * sn;
        sum_sq += x * x;
        err_sq += d * d;
        s.max_abs_error = std::max(s.max_abs_error, std::fabs(d));
      }
    }
    VIT_CHECK(sum_sq > 0, "quantize",
              "'{}' is all zeros ({} x {}): nothing to quantize (an untrained or damaged checkpoint?)", weight_name, N,
              K);
    s.max_rel_rms_error = std::max(s.max_rel_rms_error, std::sqrt(err_sq / sum_sq));
    l->weight.node()->data = q;
    l->weight.node()->requires_grad = false;
    l->weight_scale = scale;
    l->weight_bits = bits;
    ++s.tensors;
    s.int8_values += N * K;
  }
  for (const auto& [name, p] : model.named_parameters()) {
    if (p.data().dtype() != DType::I8) s.float_values += p.data().numel();
  }
  for (const auto& [name, l] : checkpoint::named_linears(model)) s.float_values += l->weight_scale.numel();
  return s;
}

}  // namespace vit::infer
