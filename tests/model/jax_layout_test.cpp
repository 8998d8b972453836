// The JAX layout (model/layouts/jax.cpp) against files built here: 8000 encoder blocks convert in
// linear time (a lookup per key, not a scan of every key), and a tensor of the wrong rank is
// named with the file, its key and the shape expected (not "[size] dim 0 out of range").
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/check.h"
#include "model/layouts/config_from_shapes.h"
#include "model/layouts/layout.h"

namespace vit::model {
namespace {

// A tiny JAX ViT (dim 2, 1 head of 2, MLP 4) with `depth` separate encoderblock_{i}.
NamedTensors jax_tensors(int64_t depth) {
  NamedTensors t;
  auto add = [&t](const std::string& key, const Shape& shape) { t.emplace_back(key, Tensor::zeros(shape)); };
  add("embedding/kernel", {2, 2, 3, 2});
  add("embedding/bias", {2});
  add("cls", {1, 1, 2});
  add("Transformer/posembed_input/pos_embedding", {1, 5, 2});
  for (int64_t i = 0; i < depth; ++i) {
    const std::string b = "Transformer/encoderblock_" + std::to_string(i) + "/";
    for (const char* ln : {"LayerNorm_0/", "LayerNorm_2/"}) {
      add(b + ln + "scale", {2});
      add(b + ln + "bias", {2});
    }
    for (const char* part : {"query", "key", "value"}) {
      add(b + "MultiHeadDotProductAttention_1/" + part + "/kernel", {2, 1, 2});
      add(b + "MultiHeadDotProductAttention_1/" + part + "/bias", {1, 2});
    }
    add(b + "MultiHeadDotProductAttention_1/out/kernel", {1, 2, 2});
    add(b + "MultiHeadDotProductAttention_1/out/bias", {2});
    add(b + "MlpBlock_3/Dense_0/kernel", {2, 4});
    add(b + "MlpBlock_3/Dense_0/bias", {4});
    add(b + "MlpBlock_3/Dense_1/kernel", {4, 2});
    add(b + "MlpBlock_3/Dense_1/bias", {2});
  }
  add("Transformer/encoder_norm/scale", {2});
  add("Transformer/encoder_norm/bias", {2});
  add("head/kernel", {2, 3});
  add("head/bias", {3});
  return t;
}

TEST(JaxLayout, EightThousandBlocksConvertInLinearTime) {
  const int64_t depth = 8000;  // 128k keys: a scan of them per lookup took minutes
  const NamedTensors tensors = jax_tensors(depth);
  const auto start = std::chrono::steady_clock::now();
  const Converted c = to_timm(tensors, Layout::Jax, "big.npz");
  const ViTConfig config = infer_config(c.weights, Layout::Jax, c.num_heads, "big.npz");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(config.depth, depth);
  EXPECT_EQ(c.num_heads, 1);
  EXPECT_TRUE(c.unused.empty());
  EXPECT_LT(seconds, 30.0) << depth << " blocks";
}

std::string error_of(const NamedTensors& tensors) {
  try {
    const Converted c = to_timm(tensors, Layout::Jax, "bad.npz");
    infer_config(c.weights, Layout::Jax, c.num_heads, "bad.npz");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JaxLayout, ATensorOfTheWrongRankIsNamedWithItsFileAndKey) {
  // big_vision's stacked blocks: the depth is the LayerNorm scale's leading axis.
  NamedTensors stacked = {{"params/embedding/kernel", Tensor::zeros({2, 2, 3, 2})},
                          {"params/embedding/bias", Tensor::zeros({2})},
                          {"params/cls", Tensor::zeros({1, 1, 2})},
                          {"params/pos_embedding", Tensor::zeros({1, 4, 2})},
                          {"params/Transformer/encoderblock/LayerNorm_0/scale", Tensor::scalar(1.0)}};
  std::string e = error_of(stacked);
  EXPECT_NE(e.find("[checkpoint] bad.npz: 'params/Transformer/encoderblock/LayerNorm_0/scale' is (): (depth, dim) is "
                   "expected"),
            std::string::npos)
      << e;
  // 0-d head and MLP kernels of a separate-block file.
  for (const char* key : {"head/kernel", "Transformer/encoderblock_0/MlpBlock_3/Dense_0/kernel"}) {
    NamedTensors t = jax_tensors(1);
    for (auto& [name, tensor] : t) {
      if (name == key) tensor = Tensor::scalar(1.0);
    }
    e = error_of(t);
    EXPECT_NE(e.find("bad.npz"), std::string::npos) << e;
    EXPECT_EQ(e.find("[size]"), std::string::npos) << e;
    EXPECT_NE(e.find("is ()"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace vit::model
