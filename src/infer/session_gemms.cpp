// The GEMMs of a session's forward (see session_gemms.h).
#include "infer/session_gemms.h"

#include <cstring>

#include "infer/vit_stages.h"

namespace vit::infer {
namespace {

// Adds one call of `weights` on `rows` rows: to the entry of the same name, shape, kernel and
// epilogue, or as a new entry.
void add(std::vector<SessionGemm>& gemms, const std::string& name, const LinearWeights& weights, int64_t rows,
         const kernels::Epilogue& epilogue) {
  if (!weights) return;
  for (SessionGemm& g : gemms) {
    if (g.name == name && g.rows == rows && g.epilogue == epilogue && g.weights->in == weights.in &&
        g.weights->out == weights.out && std::strcmp(linear_kernel(*g.weights), linear_kernel(weights)) == 0) {
      g.instances.push_back(&weights);
      ++g.calls;
      return;
    }
  }
  gemms.push_back({name, &weights, {&weights}, rows, epilogue, 1});
}

// As vit_stages.cpp's residual(): accumulated into the stream, or stored for a LayerScale gamma.
kernels::Epilogue residual_epilogue(const float* gamma) {
  return gamma == nullptr ? kernels::Epilogue::Accumulate : kernels::Epilogue::Store;
}

// As ffw_vit(): GELU fused into fc1's store; quick_gelu and ReLU are a pass after it.
kernels::Epilogue fc1_epilogue(MlpActivation activation) {
  switch (activation) {
    case MlpActivation::Gelu:
      return kernels::Epilogue::Gelu;
    case MlpActivation::GeluTanh:
      return kernels::Epilogue::GeluTanh;
    case MlpActivation::QuickGelu:
    case MlpActivation::Relu:
      break;
  }
  return kernels::Epilogue::Store;
}

}  // namespace

double SessionGemm::flops() const {
  return 2.0 * static_cast<double>(rows) * static_cast<double>(weights->in) * static_cast<double>(weights->out);
}

std::vector<SessionGemm> session_gemms(const SessionWeights& w, const model::ViTConfig& c, int64_t batch) {
  const VitDims d(c, batch);
  std::vector<SessionGemm> gemms;
  for (const StemLayerWeights& layer : w.stem)
    add(gemms, "stem", layer.conv, batch * c.image_size * c.image_size, layer.epilogue);
  add(gemms, "patch_embed", w.patch, batch * c.num_patches(), kernels::Epilogue::Store);
  for (const LayerWeights& layer : w.layers) {
    add(gemms, "qkv", layer.qkv, d.rows, kernels::Epilogue::Store);
    add(gemms, "proj", layer.proj, d.rows, residual_epilogue(layer.ls1));
    if (layer.fc2) {
      add(gemms, "fc1", layer.fc1, d.rows, fc1_epilogue(layer.activation));
      add(gemms, "fc2", layer.fc2, d.rows, residual_epilogue(layer.ls2));
    } else {  // a one-Linear MLP (D -> D) on the residual
      add(gemms, "fc1", layer.fc1, d.rows, residual_epilogue(layer.ls2));
    }
  }
  add(gemms, "pre_logits", w.pre_logits, batch, kernels::Epilogue::Store);
  add(gemms, "head", w.head, batch, kernels::Epilogue::Store);
  add(gemms, "head_dist", w.head_dist, batch, kernels::Epilogue::Store);
  return gemms;
}

const char* linear_kernel(const LinearWeights& weights) {
  if (weights.int8) return "int8";
  if (weights.bf16) return "bf16";
  return weights.packed ? "fp32" : "fp32-blas";
}

std::string epilogue_name(const kernels::Epilogue& e) {
  if (e == kernels::Epilogue::Store) return "store";
  if (e == kernels::Epilogue::Accumulate) return "residual";
  if (e == kernels::Epilogue::Gelu) return "gelu";
  if (e == kernels::Epilogue::GeluTanh) return "gelu_tanh";
  return "alpha " + std::to_string(e.alpha) + " beta " + std::to_string(e.beta) + " " + kernels::activation_name(e.act);
}

}  // namespace vit::infer
