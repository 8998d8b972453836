// vit export (see onnx_export.h): the ModelProto around the graph (onnx_export_graph.cpp), its
// metadata, ONNX's checker, the file.
#include "infer/onnx_export.h"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/output_file.h"
#include "core/printable.h"
#include "infer/onnx_builder.h"
#include "infer/onnx_export_graph.h"
#include "infer/quantize.h"
#include "onnx/checker.h"

namespace vit::infer {

namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;
constexpr size_t kExternalAbove = size_t{3} << 29;  // 1.5 GiB

// Every initializer's bytes of 1 KiB and more into `data` (64-byte-aligned offsets), the tensor
// pointing at them by location, offset and length (ONNX's external data).
void move_to_external(onnx::GraphProto& graph, std::string& data, const std::string& location) {
  for (onnx::TensorProto& t : *graph.mutable_initializer()) {
    if (t.raw_data().size() < 1024) continue;
    data.resize((data.size() + 63) / 64 * 64, '\0');
    const size_t offset = data.size(), length = t.raw_data().size();
    data += t.raw_data();
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    const std::pair<const char*, std::string> entries[] = {
        {"location", location}, {"offset", std::to_string(offset)}, {"length", std::to_string(length)}};
    for (const auto& [key, value] : entries) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
  }
}

void tensor_value(onnx::ValueInfoProto& v, const std::string& name, const std::vector<int64_t>& dims) {
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d < 0) {
      dim->set_dim_param("batch");
    } else {
      dim->set_dim_value(d);
    }
  }
}

void metadata(onnx::ModelProto& proto, const std::string& key, const std::string& value) {
  auto* p = proto.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

void check_opset(int64_t opset) {
  VIT_CHECK(opset >= kMinOpset && opset <= kMaxOpset, "export",
            "--opset {}: vit writes opsets {} to {} (17: LayerNormalization; below it, its decomposition)", opset,
            kMinOpset, kMaxOpset);
}

// The model's int8 Linears: how many, and their weights' bits (0 for a float model).
struct Int8Linears {
  int64_t count = 0;
  int bits = 0;
};
Int8Linears int8_linears(const model::VisionTransformer& model) {
  Int8Linears q;
  for (const auto& [_, linear] : checkpoint::named_linears(model)) {
    if (!linear->quantized()) continue;
    ++q.count;
    q.bits = linear->weight_bits;
  }
  return q;
}

}  // namespace

std::string onnx_model_bytes(const LoadedModel& m, const ExportOptions& options, ExportResult* result,
                             std::string* external, const std::string& location) {
  check_opset(options.opset);
  const model::VisionTransformer& model = *m.model;
  const model::ViTConfig& c = model.config();
  onnx::ModelProto proto;
  proto.set_ir_version(8);
  proto.set_producer_name("vit");
  proto.set_producer_version("0.2.0");
  proto.set_doc_string("exported by vit export from " + c.name);
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(c.name);
  onnx_export::GraphBuilder g(graph, options.opset);
  const std::string input = "input";
  tensor_value(*graph.add_input(), input, {-1, c.in_channels, c.image_size, c.image_size});
  const onnx_export::Outputs outs = onnx_export::vit_graph(g, model, input);
  std::vector<std::string> names;
  const auto output = [&](const std::string& value, const std::string& name, int64_t width) {
    if (value.empty()) return;
    // A named output is an Identity of the value the graph ends in.
    g.node("output", "Identity", {value});
    graph.mutable_node(graph.node_size() - 1)->set_output(0, name);
    tensor_value(*graph.add_output(), name, {-1, width});
    names.push_back(name);
  };
  const int64_t features = c.representation_size > 0 ? c.representation_size : c.dim;
  output(outs.logits, "logits", c.num_classes);
  output(outs.embedding, "embedding", c.projection ? c.num_classes : features);
  metadata(proto, "vit.config", c.to_json());
  metadata(proto, "vit.class_names", nlohmann::json(m.class_names).dump());
  metadata(proto, "vit.preprocess", preprocess_json(m.preprocess));
  metadata(proto, "vit.family", model::family_name(m.family));
  metadata(proto, "vit.layout", m.layout);
  metadata(proto, "vit.outputs", nlohmann::json(names).dump());
  const Int8Linears int8 = int8_linears(model);
  const int64_t quantized = int8.count;
  metadata(proto, "vit.precision", quantized > 0 ? "int8" : "float32");
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    fail("export", "the ONNX graph written for {} does not pass ONNX's checker: {}", c.name, e.what());
  }
  if (options.external_data || proto.ByteSizeLong() > kExternalAbove) {
    VIT_CHECK(external != nullptr, "export",
              "{}: {:.2f} GiB of weights: over what one ONNX file holds (2 GiB); write them as external data", c.name,
              static_cast<double>(proto.ByteSizeLong()) / (1 << 30));
    move_to_external(graph, *external, location);
  }
  std::string bytes;
  VIT_CHECK(proto.SerializeToString(&bytes), "export", "{}: the model does not serialise", c.name);
  if (result != nullptr) {
    result->layout = m.layout;
    result->family = model::family_name(m.family);
    result->precision = quantized > 0 ? "int8" : "float32";
    result->outputs = names;
    result->nodes = graph.node_size();
    result->initializers = graph.initializer_size();
    result->quantized_linears = quantized;
    result->weight_bits = int8.bits;
    result->bytes = bytes.size();
  }
  return bytes;
}

bool parse_export_int8(const std::string& precision) {
  VIT_CHECK(precision == "float32" || precision == "int8", "export", "precision must be float32 or int8, got '{}'",
            printable(precision));
  return precision == "int8";
}

ExportResult export_onnx(const std::string& in, const std::string& out, const LoadSettings& load,
                         const ExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  check_output("export", {options.out_flag, out, "the .onnx file", options.overwrite_flag}, {{"the input model", in}},
               options.overwrite);
  check_opset(options.opset);
  const std::string data_path = out + ".data";
  const std::string location = std::filesystem::path(data_path).filename().string();
  if (options.external_data) {  // (above 1.5 GiB without the flag: refused at the write if it exists)
    check_output("export", {options.out_flag, data_path, "the external data file", options.overwrite_flag},
                 {{"the input model", in}}, options.overwrite);
  }
  LoadedModel m = load_model(in, load);
  if (options.int8 && !checkpoint::is_quantized(*m.model)) quantize_linears(*m.model, options.bits);
  ExportResult r;
  std::string external;
  const std::string bytes = onnx_model_bytes(m, options, &r, &external, location);
  const Existing existing = options.overwrite ? Existing::Replace : Existing::Refuse;
  if (!external.empty()) {  // the weights first: the model never names a file that is not there
    AtomicFile data("export", data_path, existing);
    data.write(external.data(), external.size());
    data.commit();
    r.data_file = data_path;
    r.data_bytes = external.size();
  }
  AtomicFile file("export", out, existing);
  file.write(bytes.data(), bytes.size());
  file.commit();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace vit::infer
