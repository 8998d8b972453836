// ViT blocks against PyTorch (timm formulas) and the fused attention against the same
// computation composed from small autograd ops.
#include "nn/transformer.h"

#include <gtest/gtest.h>

#include "support/golden.h"

namespace vit {
namespace {

using testing::golden;
using testing::load_golden;

// Copies golden parameters into a module by name, so the module's own names are what is tested.
void load_from_golden(nn::Module& m, const io::WeightsFile& f, DType dtype) {
  nn::StateDict state;
  for (const auto& [name, _] : m.named_parameters()) state.emplace_back(name, golden(f, name, dtype));
  m.load_state_dict(state);
}

void check_param_grads(const nn::Module& m, const io::WeightsFile& f, testing::Tolerance tol) {
  for (const auto& [name, p] : m.named_parameters()) {
    EXPECT_TRUE(testing::all_close(p.grad(), golden(f, "grad." + name, DType::F64), tol, "grad." + name));
  }
}

TEST(Golden, PatchEmbed) {
  const auto f = load_golden("patch_embed.safetensors");
  Generator gen(0);
  nn::PatchEmbed embed(28, std::stoll(f.metadata.at("patch_size")), 3, 65, gen);
  load_from_golden(embed, f, DType::F32);
  Variable x(golden(f, "x", DType::F32), true);
  Variable y = embed(x);
  y.backward(golden(f, "grad_out", DType::F32));
  EXPECT_CLOSE(y.data(), golden(f, "out", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(x.grad(), golden(f, "grad.x", DType::F64), testing::kGoldenFloatTol);
  check_param_grads(embed, f, testing::kGoldenFloatTol);
}

TEST(Golden, Mlp) {
  const auto f = load_golden("mlp.safetensors");
  auto gen = std::make_shared<Generator>(0);
  nn::Mlp mlp(65, 260, 65, 0.0, gen);
  load_from_golden(mlp, f, DType::F32);
  Variable x(golden(f, "x", DType::F32), true);
  Variable y = mlp(x);
  y.backward(golden(f, "grad_out", DType::F32));
  EXPECT_CLOSE(y.data(), golden(f, "out", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(x.grad(), golden(f, "grad.x", DType::F64), testing::kGoldenFloatTol);
  check_param_grads(mlp, f, testing::kGoldenFloatTol);
}

TEST(Golden, MultiHeadSelfAttentionModule) {
  const auto f = load_golden("attention.safetensors");
  auto gen = std::make_shared<Generator>(0);
  nn::MultiHeadSelfAttention attn(65, std::stoll(f.metadata.at("num_heads")), true, 0.0, 0.0, gen);
  load_from_golden(attn, f, DType::F32);
  Variable x(golden(f, "x", DType::F32), true);
  Variable y = attn(x);
  y.backward(golden(f, "grad_out", DType::F32));
  EXPECT_CLOSE(y.data(), golden(f, "out", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(x.grad(), golden(f, "grad.x", DType::F64), testing::kGoldenFloatTol);
  check_param_grads(attn, f, testing::kGoldenFloatTol);
}

TEST(Golden, EncoderBlockPreNorm) {
  const auto f = load_golden("encoder_block.safetensors");
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto tol = dtype == DType::F32 ? testing::kGoldenFloatTol : testing::kGoldenDoubleTol;
    nn::EncoderBlockConfig c;
    c.dim = 65;
    c.num_heads = std::stoll(f.metadata.at("num_heads"));
    c.mlp_ratio = std::stod(f.metadata.at("mlp_ratio"));
    c.eps = std::stod(f.metadata.at("eps"));
    nn::EncoderBlock block(c, std::make_shared<Generator>(0));
    block.to(dtype);
    nn::StateDict state;
    for (const auto& [name, _] : block.named_parameters()) state.emplace_back(name, golden(f, name, dtype));
    block.load_state_dict(state);
    Variable x(golden(f, "x", dtype), true);
    Variable y = block(x);
    y.backward(golden(f, "grad_out", dtype));
    EXPECT_CLOSE(y.data(), golden(f, "out", DType::F64), tol);
    EXPECT_CLOSE(x.grad(), golden(f, "grad.x", DType::F64), tol);
    check_param_grads(block, f, tol);
  }
}

TEST(EncoderBlock, TimmParameterNamesAndCount) {
  nn::EncoderBlockConfig c;  // ViT-Ti block: dim 192, 3 heads, mlp 768
  nn::EncoderBlock block(c, std::make_shared<Generator>(0));
  std::vector<std::string> names;
  for (const auto& [name, _] : block.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                                             "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
                                             "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"}));
  // 4*192 (norms) + 192*576+576 (qkv) + 192*192+192 (proj) + 192*768+768 + 768*192+192 (mlp)
  EXPECT_EQ(block.num_parameters(), 444864);
  nn::EncoderBlockConfig bad = c;
  bad.num_heads = 5;
  EXPECT_THROW(nn::EncoderBlock(bad, std::make_shared<Generator>(0)), Error);
}

// The attention core written as a chain of small autograd ops (timm's forward, literally).
Variable composed_attention(const Variable& qkv, int64_t heads, double attn_drop, Generator* gen) {
  const int64_t B = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / 3, HD = D / heads;
  Variable t = qkv.reshape({B, N, 3, heads, HD}).permute({2, 0, 3, 1, 4});  // (3, B, NH, N, HD)
  Variable q = t.select(0, 0), k = t.select(0, 1), v = t.select(0, 2);
  Variable attn = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(HD)));
  attn = softmax(attn, -1);
  if (attn_drop > 0) attn = dropout(attn, attn_drop, true, *gen);
  return matmul(attn, v).transpose(1, 2).reshape({B, N, D});
}

TEST(FusedAttention, MatchesComposedOpsForwardAndBackward) {
  for (double p : {0.0, 0.3}) {
    SCOPED_TRACE(p);
    Generator data(21);
    const Tensor input = Tensor::randn({3, 17, 24}, data, DType::F64);
    const Tensor g = Tensor::randn({3, 17, 8}, data, DType::F64);
    Variable a(input.clone(), true), b(input.clone(), true);
    Generator ga(4), gb(4);  // same seed: identical dropout masks (same draw order)
    Variable fused = self_attention(a, 2, p, true, &ga);
    Variable composed = composed_attention(b, 2, p, &gb);
    fused.backward(g);
    composed.backward(g);
    EXPECT_CLOSE(fused.data(), composed.data(), testing::kGoldenDoubleTol);
    EXPECT_CLOSE(a.grad(), b.grad(), testing::kGoldenDoubleTol);
  }
}

}  // namespace
}  // namespace vit
