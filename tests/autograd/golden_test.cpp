// Ops against PyTorch: each test loads a golden file (tools/golden/make_golden.py, PyTorch float64),
// runs the forward and backward here in float32 and in float64, and compares outputs and every
// input gradient with the named tolerances.
#include "support/golden.h"

#include <gtest/gtest.h>

#include <map>

#include "autograd/ops.h"
#include "kernels/cpu_features.h"

namespace vit {
namespace {

using testing::all_close;
using testing::golden;
using testing::golden_targets;
using testing::load_golden;
using testing::Tolerance;

class GoldenOps : public ::testing::TestWithParam<DType> {
 public:
  DType dtype() const { return GetParam(); }
  Tolerance tol() const { return dtype() == DType::F32 ? testing::kGoldenFloatTol : testing::kGoldenDoubleTol; }
  Variable input(const io::WeightsFile& f, const std::string& key) { return Variable(golden(f, key, dtype()), true); }
  Tensor expected(const io::WeightsFile& f, const std::string& key) { return golden(f, key, DType::F64); }
  void check(const Tensor& actual, const io::WeightsFile& f, const std::string& key) {
    EXPECT_TRUE(all_close(actual, expected(f, key), tol(), key));
  }
};

TEST_P(GoldenOps, Linear) {
  const auto f = load_golden("linear.safetensors");
  Variable x = input(f, "x"), w = input(f, "weight"), b = input(f, "bias");
  Variable y = linear(x, w, b);
  y.backward(golden(f, "grad_out", dtype()));
  check(y.data(), f, "out");
  check(x.grad(), f, "grad.x");
  check(w.grad(), f, "grad.weight");
  check(b.grad(), f, "grad.bias");
  Variable x2 = input(f, "x"), w2 = input(f, "weight");
  Variable y2 = linear(x2, w2, Variable());
  y2.backward(golden(f, "grad_out", dtype()));
  check(y2.data(), f, "nobias.out");
  check(x2.grad(), f, "nobias.grad.x");
  check(w2.grad(), f, "nobias.grad.weight");
}

TEST_P(GoldenOps, LayerNorm) {
  const auto f = load_golden("layernorm.safetensors");
  for (const std::string p : {"", "nd."}) {
    Variable x = input(f, p + "x"), w = input(f, p + "weight"), b = input(f, p + "bias");
    const double eps = std::stod(f.metadata.at(p + "eps"));
    Variable y = layer_norm(x, w.shape(), w, b, eps);
    y.backward(golden(f, p + "grad_out", dtype()));
    check(y.data(), f, p + "out");
    check(x.grad(), f, p + "grad.x");
    check(w.grad(), f, p + "grad.weight");
    check(b.grad(), f, p + "grad.bias");
  }
}

TEST_P(GoldenOps, Activations) {
  const auto f = load_golden("activations.safetensors");
  const std::vector<std::pair<std::string, Variable (*)(const Variable&)>> cases = {
      {"gelu", [](const Variable& v) { return gelu(v); }},
      {"gelu_tanh", [](const Variable& v) { return gelu(v, true); }},
      {"relu", [](const Variable& v) { return relu(v); }},
      {"tanh", [](const Variable& v) { return tanh(v); }},
      {"sigmoid", [](const Variable& v) { return sigmoid(v); }},
      {"exp", [](const Variable& v) { return exp(v); }},
      {"log", [](const Variable& v) { return log(v); }},
      {"sqrt", [](const Variable& v) { return sqrt(v); }},
  };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    Variable x = input(f, f.contains(name + ".x") ? name + ".x" : "x");
    Variable y = fn(x);
    y.backward(golden(f, "grad_out", dtype()));
    check(y.data(), f, name + ".out");
    check(x.grad(), f, name + ".grad.x");
  }
}

TEST_P(GoldenOps, Softmax) {
  const auto f = load_golden("softmax.safetensors");
  const std::vector<std::pair<std::string, Variable (*)(const Variable&)>> cases = {
      {"softmax_last", [](const Variable& v) { return softmax(v, -1); }},
      {"softmax_dim1", [](const Variable& v) { return softmax(v, 1); }},
      {"log_softmax_last", [](const Variable& v) { return log_softmax(v, -1); }},
  };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    Variable x = input(f, "x");
    Variable y = fn(x);
    y.backward(golden(f, "grad_out", dtype()));
    check(y.data(), f, name + ".out");
    check(x.grad(), f, name + ".grad.x");
  }
}

TEST_P(GoldenOps, Reductions) {
  const auto f = load_golden("reduce.safetensors");
  const std::vector<std::pair<std::string, Variable (*)(const Variable&)>> cases = {
      {"sum_12",
       [](const Variable& v) {
         return v.sum({1, 2});
       }},
      {"mean_0k", [](const Variable& v) { return v.mean({0}, true); }},
      {"var_1u", [](const Variable& v) { return v.var({1}, true); }},
      {"var_1p", [](const Variable& v) { return v.var({1}, false); }},
      {"std_2u", [](const Variable& v) { return v.std({2}, true, true); }},
      {"std_2p", [](const Variable& v) { return v.std({2}, false); }},
      {"max_1", [](const Variable& v) { return v.max(1); }},
      {"std_all", [](const Variable& v) { return v.std(); }},
  };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    Variable x = input(f, "x");
    Variable y = fn(x);
    y.backward(golden(f, name + ".grad_out", dtype()));
    check(y.data(), f, name + ".out");
    check(x.grad(), f, name + ".grad.x");
  }
  EXPECT_TRUE(
      all_close(argmax(input(f, "x"), 1).to(DType::F64), expected(f, "max_1.indices"), testing::kExact, "argmax"));
}

TEST_P(GoldenOps, Matmul) {
  const auto f = load_golden("matmul.safetensors");
  for (const std::string p : {"", "bmm.", "vec."}) {
    SCOPED_TRACE(p);
    Variable a = input(f, p + "a"), b = input(f, p + "b");
    Variable y = p == "bmm." ? bmm(a, b) : matmul(a, b);
    y.backward(golden(f, p + "grad_out", dtype()));
    check(y.data(), f, p + "out");
    check(a.grad(), f, p + "grad.a");
    check(b.grad(), f, p + "grad.b");
  }
}

TEST_P(GoldenOps, Conv2d) {
  const auto f = load_golden("conv2d.safetensors");
  for (const std::string p : {"", "gen."}) {
    SCOPED_TRACE(p);
    Variable x = input(f, p + "x"), w = input(f, p + "weight"), b = input(f, p + "bias");
    Variable y = conv2d(x, w, b, std::stoll(f.metadata.at(p + "stride")), std::stoll(f.metadata.at(p + "padding")));
    y.backward(golden(f, p + "grad_out", dtype()));
    check(y.data(), f, p + "out");
    check(x.grad(), f, p + "grad.x");
    check(w.grad(), f, p + "grad.weight");
    check(b.grad(), f, p + "grad.bias");
  }
}

TEST_P(GoldenOps, CrossEntropy) {
  const auto f = load_golden("cross_entropy.safetensors");
  const Tensor targets = golden_targets(f, "targets");
  for (const std::string p : {"ls0", "ls1"}) {
    SCOPED_TRACE(p);
    Variable logits = input(f, "logits");
    Variable loss = cross_entropy(logits, targets, std::stod(f.metadata.at(p + ".label_smoothing")));
    loss.backward();
    check(loss.data(), f, p + ".loss");
    check(logits.grad(), f, p + ".grad.logits");
  }
}

TEST_P(GoldenOps, AttentionCoreInsideTimmAttention) {
  // timm's Attention = qkv linear -> attention core -> proj linear, composed from our ops.
  const auto f = load_golden("attention.safetensors");
  Variable x = input(f, "x"), qkv_w = input(f, "qkv.weight"), qkv_b = input(f, "qkv.bias");
  Variable proj_w = input(f, "proj.weight"), proj_b = input(f, "proj.bias");
  const int64_t heads = std::stoll(f.metadata.at("num_heads"));
  Variable y = linear(self_attention(linear(x, qkv_w, qkv_b), heads), proj_w, proj_b);
  y.backward(golden(f, "grad_out", dtype()));
  check(y.data(), f, "out");
  check(x.grad(), f, "grad.x");
  check(qkv_w.grad(), f, "grad.qkv.weight");
  check(qkv_b.grad(), f, "grad.qkv.bias");
  check(proj_w.grad(), f, "grad.proj.weight");
  check(proj_b.grad(), f, "grad.proj.bias");
}

TEST_P(GoldenOps, BatchNorm) {
  const auto f = load_golden("batchnorm.safetensors");
  const double momentum = std::stod(f.metadata.at("momentum")), eps = std::stod(f.metadata.at("eps"));
  for (const std::string mode : {"train", "eval"}) {
    SCOPED_TRACE(mode);
    Variable x = input(f, "x"), w = input(f, "weight"), b = input(f, "bias");
    const Tensor rm = golden(f, "running_mean", dtype()), rv = golden(f, "running_var", dtype());
    Variable y = batch_norm(x, rm, rv, w, b, mode == "train", momentum, eps);
    y.backward(golden(f, mode + ".grad_out", dtype()));
    check(y.data(), f, mode + ".out");
    check(x.grad(), f, mode + ".grad.x");
    check(w.grad(), f, mode + ".grad.weight");
    check(b.grad(), f, mode + ".grad.bias");
    check(rm, f, mode == "train" ? "train.running_mean" : "running_mean");
    check(rv, f, mode == "train" ? "train.running_var" : "running_var");
  }
}

// A ResNet basic block that downsamples: 3x3 stride 2, 3x3, and a 1x1 stride-2 shortcut, each
// convolution followed by BatchNorm in training mode; on (B, C, H, W) maps with conv2d and
// batch_norm, and on channels-last maps with their channels-last forms (the hybrid backbone's).
void check_conv_block(GoldenOps& t, bool channels_last) {
  const auto f = load_golden("conv_block.safetensors");
  std::map<std::string, Variable> p;
  for (const char* n : {"conv1.weight", "conv2.weight", "conv3.weight", "bn1.weight", "bn1.bias", "bn2.weight",
                        "bn2.bias", "bn3.weight", "bn3.bias"})
    p[n] = t.input(f, n);
  std::map<std::string, std::pair<Tensor, Tensor>> running;
  for (const char* n : {"bn1", "bn2", "bn3"})
    running[n] = {Tensor::zeros({8}, t.dtype()), Tensor::ones({8}, t.dtype())};
  auto bn = [&](const Variable& v, const std::string& n) {
    const auto& [mean, var] = running[n];
    return channels_last ? batch_norm_channels_last(v, mean, var, p[n + ".weight"], p[n + ".bias"], true)
                         : batch_norm(v, mean, var, p[n + ".weight"], p[n + ".bias"], true);
  };
  auto conv = [&](const Variable& v, const std::string& n, int64_t stride, int64_t padding) {
    return channels_last ? conv2d_channels_last(v, p[n], Variable(), stride, padding)
                         : conv2d(v, p[n], Variable(), stride, padding);
  };
  Variable x = t.input(f, "x");
  const Variable in = channels_last ? x.permute({0, 2, 3, 1}) : x;
  Variable h = relu(bn(conv(in, "conv1.weight", 2, 1), "bn1"));
  h = bn(conv(h, "conv2.weight", 1, 1), "bn2");
  Variable y = relu(h + bn(conv(in, "conv3.weight", 2, 0), "bn3"));
  if (channels_last) y = y.permute({0, 3, 1, 2});
  y.backward(golden(f, "grad_out", t.dtype()));
  t.check(y.data(), f, "out");
  t.check(x.grad(), f, "grad.x");
  for (const auto& [n, v] : p) t.check(v.grad(), f, "grad." + n);
  for (const auto& [n, r] : running) {
    t.check(r.first, f, n + ".running_mean");
    t.check(r.second, f, n + ".running_var");
  }
}

// Each ISA path the CPU has (the GEMMs dispatch: AVX-512 to the packed GEMM, else BLAS).
TEST_P(GoldenOps, ResidualConvBlockWithBatchNorm) {
  for (kernels::Isa isa : {kernels::Isa::Scalar, kernels::Isa::Avx2, kernels::Isa::Avx512}) {
    if (isa > kernels::cpu_isa()) continue;
    SCOPED_TRACE(kernels::isa_name(isa));
    const kernels::ScopedIsaLimit limit(isa);
    check_conv_block(*this, false);
    check_conv_block(*this, true);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, GoldenOps, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& param_info) { return std::string(dtype_name(param_info.param)); });

}  // namespace
}  // namespace vit
