// The GEMMs one forward of the inference session runs (logits of a batch), each distinct call once
// with how many times a forward makes it: for `vit bench --gemms`, which times each alone through
// the same entry point (LinearWeights::forward) and weights. The list follows the stages'
// calls (vit_stages.cpp: the stem's convolutions, the patch projection, per block qkv, proj, fc1,
// fc2, then pre_logits and the head) with their rows M and fused epilogues (GELU in fc1's store,
// the residual accumulated by proj and fc2 unless a LayerScale is in between).
#pragma once

#include <string>
#include <vector>

#include "infer/session_weights.h"
#include "model/vit_config.h"

namespace vit::infer {

struct SessionGemm {
  std::string name;                             // "patch_embed", "qkv", "proj", "fc1", "fc2", "head", ...
  const LinearWeights* weights = nullptr;       // the session's, of the first call
  std::vector<const LinearWeights*> instances;  // every call's weights (each block's), in forward order
  int64_t rows = 0;                             // M; K = weights->in, N = weights->out
  kernels::Epilogue epilogue;
  int64_t calls = 0;  // per forward (instances.size())
  // 2 M K N: multiply-adds counted twice.
  double flops() const;
};

// The distinct GEMMs of a forward of `batch` images, in the order the forward first runs them.
std::vector<SessionGemm> session_gemms(const SessionWeights& weights, const model::ViTConfig& config, int64_t batch);

// Which kernel runs the Linear: "int8", "bf16", "fp32" (the packed GEMM) or "fp32-blas" (unpacked:
// BLAS, below AVX2).
const char* linear_kernel(const LinearWeights& weights);

// "store", "residual" (C +=), "gelu", "gelu_tanh"; another epilogue as "alpha a beta b act".
std::string epilogue_name(const kernels::Epilogue& epilogue);

}  // namespace vit::infer
