// vit.nn's transformer layers, the engine's own (nn/transformer.h, model/vision_transformer.h):
// PatchEmbed, MultiHeadSelfAttention, EncoderBlock and VisionTransformer (a preset with keyword
// overrides).
#include "nn/transformer.h"

#include "core/check.h"
#include "layer.h"
#include "model/vision_transformer.h"

namespace vit::python {
namespace {

void bind_blocks(py::module_& m) {
  LayerClass<nn::PatchEmbed> patch(m, "PatchEmbed");
  patch
      .def(py::init([](int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t embed_dim) {
             return std::make_shared<nn::PatchEmbed>(img_size, patch_size, in_chans, embed_dim, *generator());
           }),
           py::arg("img_size"), py::arg("patch_size"), py::arg("in_chans"), py::arg("embed_dim"))
      .def_property_readonly("proj", [](const nn::PatchEmbed& p) { return p.proj; });
  bind_module_methods(patch);
  LayerClass<nn::MultiHeadSelfAttention> mhsa(m, "MultiHeadSelfAttention");
  mhsa.def(py::init([](int64_t dim, int64_t num_heads, bool qkv_bias) {
             return std::make_shared<nn::MultiHeadSelfAttention>(dim, num_heads, qkv_bias, 0.0, 0.0, generator());
           }),
           py::arg("dim"), py::arg("num_heads"), py::arg("qkv_bias") = true)
      .def_property_readonly("qkv", [](const nn::MultiHeadSelfAttention& a) { return a.qkv; })
      .def_property_readonly("proj", [](const nn::MultiHeadSelfAttention& a) { return a.proj; });
  bind_module_methods(mhsa);
  LayerClass<nn::EncoderBlock> block(m, "EncoderBlock");
  block.def(py::init([](int64_t dim, int64_t num_heads, double mlp_ratio, bool qkv_bias, double eps) {
              nn::EncoderBlockConfig c;
              c.dim = dim;
              c.num_heads = num_heads;
              c.mlp_ratio = mlp_ratio;
              c.qkv_bias = qkv_bias;
              c.eps = eps;
              return std::make_shared<nn::EncoderBlock>(c, generator());
            }),
            py::arg("dim"), py::arg("num_heads"), py::arg("mlp_ratio") = 4.0, py::arg("qkv_bias") = true,
            py::arg("eps") = 1e-6);
  bind_module_methods(block);
}

// vit.nn.VisionTransformer("vit_notebook", depth=2, ...): a preset, then the keywords.
std::shared_ptr<model::VisionTransformer> vision_transformer(const std::string& preset, const py::kwargs& overrides) {
  model::ViTConfig c = model::preset(preset);
  for (const auto& [key, value] : overrides) {
    const std::string k = py::str(key);
    if (k == "image_size")
      c.image_size = integer_of(value, "VisionTransformer", k);
    else if (k == "patch_size")
      c.patch_size = integer_of(value, "VisionTransformer", k);
    else if (k == "in_channels")
      c.in_channels = integer_of(value, "VisionTransformer", k);
    else if (k == "num_classes")
      c.num_classes = integer_of(value, "VisionTransformer", k);
    else if (k == "dim")
      c.dim = integer_of(value, "VisionTransformer", k);
    else if (k == "depth")
      c.depth = integer_of(value, "VisionTransformer", k);
    else if (k == "num_heads")
      c.num_heads = integer_of(value, "VisionTransformer", k);
    else if (k == "mlp_ratio")
      c.mlp_ratio = real_of(value, "VisionTransformer", k);
    else if (k == "dropout")
      c.dropout = real_of(value, "VisionTransformer", k);
    else
      fail("VisionTransformer",
           "unknown option '{}' (image_size, patch_size, in_channels, num_classes, dim, depth, num_heads, mlp_ratio, "
           "dropout)",
           k);
  }
  c.validate();
  return std::make_shared<model::VisionTransformer>(c, generator());
}

}  // namespace

void bind_transformer(py::module_& nn) {
  bind_blocks(nn);
  LayerClass<model::VisionTransformer> model(nn, "VisionTransformer");
  model.def(py::init(&vision_transformer), py::arg("preset") = "vit_notebook");
  bind_module_methods(model);
}

}  // namespace vit::python
