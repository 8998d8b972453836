// The original JAX/Flax ViT checkpoints (.npz, io/weights_file.h): google-research/vision_transformer
// (and its AugReg releases) and big_vision, converted into timm's names the way timm's
// _load_weights reads them:
//   [prefix]embedding/kernel (kh, kw, in, out: HWIO)      -> patch_embed.proj.weight (OIHW)
//   [prefix]cls (1, 1, D)                                 -> cls_token
//   [prefix]Transformer/posembed_input/pos_embedding      -> pos_embed (1, 1 + patches, D)
//   big_vision: [prefix]pos_embedding (1, patches, D)     -> pos_embed over the patches only
//   [prefix]Transformer/encoderblock_{i}/ (big_vision: encoderblock/ with a leading depth axis)
//     LayerNorm_0/{scale,bias}                            -> blocks.{i}.norm1.{weight,bias}
//     MultiHeadDotProductAttention_1/{query,key,value}/kernel (D, heads, head_dim), bias (heads, head_dim)
//                                                         -> attn.qkv.{weight,bias} (rows q; k; v)
//     MultiHeadDotProductAttention_1/out/kernel (heads, head_dim, D) -> attn.proj.weight
//     LayerNorm_2 -> norm2, MlpBlock_3/Dense_{0,1}/kernel (in, out) -> mlp.fc{1,2}.weight (transposed)
//     (big_vision numbers them MultiHeadDotProductAttention_0, LayerNorm_1, MlpBlock_0)
//   [prefix]Transformer/encoder_norm -> norm, [prefix]pre_logits/kernel (D, R) -> pre_logits.fc
//   (the representation layer of the ImageNet-21k releases, tanh), [prefix]head/kernel (D, K) -> head
// Prefixes: none, "opt/target/" (old training checkpoints; their optimizer state "opt/state/..."
// is listed as not used), "params/", "params/img/". The query kernel's shape gives the number of
// heads. Refused by name: the hybrid ResNet stem (conv_root), MAP attention pooling (MAPHead_0),
// and models without a class token (Flax's 'gap' pools after the encoder norm, which timm's
// avg pooling does not reproduce). GELU stays timm's exact form (Flax's nn.gelu is the tanh
// approximation: --act gelu_tanh runs that).
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/check.h"
#include "model/layouts/sources.h"

namespace vit::model::layouts {
namespace {

class JaxReader {
 public:
  JaxReader(const NamedTensors& tensors, const std::string& source) : tensors_(tensors), source_(source) {
    for (const auto& [name, t] : tensors_) index_.emplace(name, &t);  // the first of a name, as find() takes
  }

  Converted convert() {
    for (const char* p : {"", "opt/target/", "params/", "params/img/"}) {
      if (has(std::string(p) + "embedding/kernel")) {
        prefix_ = p;
        break;
      }
    }
    VIT_CHECK(has(prefix_ + "embedding/kernel"), "checkpoint",
              "{}: a JAX checkpoint without 'embedding/kernel' (the patch embedding; looked under no prefix, "
              "opt/target/, params/, params/img/)",
              source_);
    refuse_if(prefix_ + "conv_root/kernel", "a hybrid ResNet+ViT checkpoint (its ResNet stem is not supported)");
    refuse_if(prefix_ + "MAPHead_0/probe", "a model with MAP attention pooling (MAPHead_0), which vit does not run");
    VIT_CHECK(has(prefix_ + "cls"), "checkpoint",
              "{}: a JAX model without a class token ('gap' or 'map' pooling): not supported (its encoder norm comes "
              "before the mean, which no vit pooling reproduces)",
              source_);
    stacked_ = has(prefix_ + "Transformer/encoderblock/LayerNorm_0/scale");
    big_vision_ = prefix_.rfind("params/", 0) == 0 || has(prefix_ + "pos_embedding") || stacked_;

    const Tensor& patch = get(prefix_ + "embedding/kernel");
    VIT_CHECK(patch.dim() == 4, "checkpoint",
              "{}: '{}embedding/kernel' is {}: a convolution kernel (kh, kw, in, out) is read (a Dense patch "
              "embedding is not)",
              source_, prefix_, shape_str(patch.shape()));
    put("cls_token", prefix_ + "cls", get(prefix_ + "cls"));
    const std::string pos = big_vision_ && has(prefix_ + "pos_embedding")
                                ? prefix_ + "pos_embedding"
                                : prefix_ + "Transformer/posembed_input/pos_embedding";
    put("pos_embed", pos, get(pos));
    put("patch_embed.proj.weight", prefix_ + "embedding/kernel", patch.permute({3, 2, 0, 1}).contiguous());
    put("patch_embed.proj.bias", prefix_ + "embedding/bias", get(prefix_ + "embedding/bias"));
    blocks();
    put("norm.weight", prefix_ + "Transformer/encoder_norm/scale", get(prefix_ + "Transformer/encoder_norm/scale"));
    put("norm.bias", prefix_ + "Transformer/encoder_norm/bias", get(prefix_ + "Transformer/encoder_norm/bias"));
    if (has(prefix_ + "pre_logits/kernel")) {
      put("pre_logits.fc.weight", prefix_ + "pre_logits/kernel", dense(prefix_ + "pre_logits/kernel"));
      put("pre_logits.fc.bias", prefix_ + "pre_logits/bias", get(prefix_ + "pre_logits/bias"));
    }
    if (has(prefix_ + "head/kernel")) {
      put("head.weight", prefix_ + "head/kernel", dense(prefix_ + "head/kernel"));
      put("head.bias", prefix_ + "head/bias", get(prefix_ + "head/bias"));
    }
    for (const auto& [name, _] : tensors_) {
      if (used_.count(name)) continue;
      // An old training checkpoint's optimizer state: known, never used.
      if (prefix_ == "opt/target/" && name.rfind("opt/", 0) == 0) {
        out_.ignored.push_back(name);
      } else {
        out_.unused.push_back(name);
      }
    }
    return std::move(out_);
  }

 private:
  // A lookup, never a scan of the file's keys (a scan per key made 20k blocks take minutes).
  const Tensor* find_key(const std::string& key) const {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : it->second;
  }
  bool has(const std::string& key) const { return find_key(key) != nullptr; }
  const Tensor& get(const std::string& key) {
    const Tensor* t = find_key(key);
    VIT_CHECK(t != nullptr, "checkpoint", "{}: a JAX checkpoint without '{}'", source_, key);
    used_.insert(key);
    return *t;
  }
  void refuse_if(const std::string& key, const char* what) {
    VIT_CHECK(!has(key), "checkpoint", "{}: {} ('{}')", source_, what, key);
  }
  void put(const std::string& timm, const std::string& jax, Tensor t) {
    out_.weights.emplace_back(timm, t.to(DType::F32).contiguous());
    out_.source_keys[timm] = jax;
  }
  // Block i's tensor `rest` (stacked files: row i of the stacked tensor).
  Tensor block(int64_t i, const std::string& rest) {
    if (!stacked_) return get(fmt::format("{}Transformer/encoderblock_{}/{}", prefix_, i, rest));
    const std::string key = prefix_ + "Transformer/encoderblock/" + rest;
    const Tensor& t = get(key);
    VIT_CHECK(t.dim() >= 1 && t.size(0) == depth_, "checkpoint",
              "{}: '{}' is {}: a leading axis of the depth {} is "
              "expected (the blocks are stacked)",
              source_, key, shape_str(t.shape()), depth_);
    return t.select(0, i).contiguous();
  }
  std::string block_key(int64_t i, const std::string& rest) const {
    return stacked_ ? prefix_ + "Transformer/encoderblock/" + rest
                    : fmt::format("{}Transformer/encoderblock_{}/{}", prefix_, i, rest);
  }
  // A Dense kernel (in, out) as a Linear weight (out, in).
  Tensor dense(const std::string& key) {
    const Tensor& k = get(key);
    VIT_CHECK(k.dim() == 2, "checkpoint", "{}: '{}' is {}, not a Dense kernel (in, out)", source_, key,
              shape_str(k.shape()));
    return k.transpose(0, 1).contiguous();
  }

  void blocks() {
    if (stacked_) {
      const std::string key = prefix_ + "Transformer/encoderblock/LayerNorm_0/scale";
      const Tensor& scale = get(key);
      VIT_CHECK(scale.dim() == 2, "checkpoint",
                "{}: '{}' is {}: (depth, dim) is expected (the blocks' LayerNorm scales, stacked)", source_, key,
                shape_str(scale.shape()));
      depth_ = scale.size(0);
    } else {
      while (has(fmt::format("{}Transformer/encoderblock_{}/LayerNorm_0/scale", prefix_, depth_))) ++depth_;
    }
    VIT_CHECK(depth_ > 0, "checkpoint",
              "{}: a JAX checkpoint without encoder blocks ({}Transformer/encoderblock_0/...)", source_, prefix_);
    const int mha = big_vision_ ? 0 : 1, mlp = big_vision_ ? 0 : 3, ln2 = big_vision_ ? 1 : 2;
    const std::string attn = fmt::format("MultiHeadDotProductAttention_{}/", mha);
    for (int64_t i = 0; i < depth_; ++i) {
      const std::string b = fmt::format("blocks.{}.", i);
      put(b + "norm1.weight", block_key(i, "LayerNorm_0/scale"), block(i, "LayerNorm_0/scale"));
      put(b + "norm1.bias", block_key(i, "LayerNorm_0/bias"), block(i, "LayerNorm_0/bias"));
      std::vector<Tensor> weights, biases;
      for (const char* part : {"query", "key", "value"}) {
        const std::string key = attn + part + "/kernel";
        const Tensor k = block(i, key);  // (D, heads, head_dim)
        VIT_CHECK(k.dim() == 3, "checkpoint", "{}: '{}' is {}: (dim, heads, head_dim) is expected", source_,
                  block_key(i, key), shape_str(k.shape()));
        if (out_.num_heads == 0) out_.num_heads = k.size(1);
        VIT_CHECK(k.size(1) == out_.num_heads, "checkpoint", "{}: '{}' has {} heads, block 0 {}", source_,
                  block_key(i, key), k.size(1), out_.num_heads);
        weights.push_back(k.reshape({k.size(0), k.size(1) * k.size(2)}).transpose(0, 1));  // (heads*head_dim, D)
        const Tensor bias = block(i, attn + part + "/bias");
        biases.push_back(bias.reshape({bias.numel()}));
      }
      const std::string q = block_key(i, attn + "query/kernel");
      put(b + "attn.qkv.weight", q, cat(weights, 0).contiguous());
      put(b + "attn.qkv.bias", block_key(i, attn + "query/bias"), cat(biases, 0).contiguous());
      const Tensor out = block(i, attn + "out/kernel");  // (heads, head_dim, D)
      VIT_CHECK(out.dim() == 3, "checkpoint", "{}: '{}' is {}: (heads, head_dim, dim) is expected", source_,
                block_key(i, attn + "out/kernel"), shape_str(out.shape()));
      put(b + "attn.proj.weight", block_key(i, attn + "out/kernel"),
          out.reshape({out.size(0) * out.size(1), out.size(2)}).transpose(0, 1).contiguous());
      put(b + "attn.proj.bias", block_key(i, attn + "out/bias"), block(i, attn + "out/bias"));
      const std::string norm2 = fmt::format("LayerNorm_{}/", ln2);
      put(b + "norm2.weight", block_key(i, norm2 + "scale"), block(i, norm2 + "scale"));
      put(b + "norm2.bias", block_key(i, norm2 + "bias"), block(i, norm2 + "bias"));
      for (int r = 0; r < 2; ++r) {
        const std::string dense_key = fmt::format("MlpBlock_{}/Dense_{}/", mlp, r);
        const Tensor k = block(i, dense_key + "kernel");
        VIT_CHECK(k.dim() == 2, "checkpoint", "{}: '{}' is {}, not a Dense kernel (in, out)", source_,
                  block_key(i, dense_key + "kernel"), shape_str(k.shape()));
        put(fmt::format("{}mlp.fc{}.weight", b, r + 1), block_key(i, dense_key + "kernel"),
            k.transpose(0, 1).contiguous());
        put(fmt::format("{}mlp.fc{}.bias", b, r + 1), block_key(i, dense_key + "bias"), block(i, dense_key + "bias"));
      }
    }
  }

  const NamedTensors& tensors_;
  const std::string& source_;
  std::string prefix_;
  bool stacked_ = false, big_vision_ = false;
  int64_t depth_ = 0;
  std::unordered_map<std::string_view, const Tensor*> index_;
  std::set<std::string> used_;
  Converted out_;
};

Converted convert_jax(const NamedTensors& tensors, const std::string& source) {
  return JaxReader(tensors, source).convert();
}

}  // namespace

const std::vector<Source>& jax_sources() {
  static const std::vector<Source> sources = {
      {"jax vit", Layout::Jax, nullptr, convert_jax},
  };
  return sources;
}

}  // namespace vit::model::layouts
