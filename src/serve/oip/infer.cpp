// An Open Inference request run on a model (see infer.h).
#include "serve/oip/infer.h"

#include "core/check.h"
#include "serve/router.h"

namespace vit::serve::oip {

ModelMetadata model_metadata(const ServedModel& m) {
  const model::ViTConfig& c = m.config();
  ModelMetadata md{m.name, m.version, "vit", {}, {}};
  md.inputs.push_back({kInputName, "FP32", {-1, c.in_channels, c.image_size, c.image_size}});
  md.inputs.push_back({kImageName, "BYTES", {-1}});
  if (m.model.has_classifier()) md.outputs.push_back({kLogits, "FP32", {-1, m.model.num_classes()}});
  md.outputs.push_back({kEmbedding, "FP32", {-1, m.model.embed_dim()}});
  return md;
}

ModelHandle find_model(const ServeContext& s, const std::string& name, const std::string& version) {
  ModelHandle m = s.models.find(name);
  if (m == nullptr) throw HttpError{404, s.models.not_served(name)};
  if (!version.empty() && version != m->version) {
    throw HttpError{404,
                    fmt::format("unknown version '{}' of model '{}' (serving version {})", version, name, m->version)};
  }
  return m;
}

Tensor request_batch(ServeContext& s, const ServedModel& m, InferRequest& r) {
  if (r.images.empty()) {
    m.model.check_input(r.input, "infer", "input 'input'");
    return r.input;
  }
  const auto count = static_cast<int64_t>(r.images.size());
  Tensor x = Tensor::empty(m.model.input_shape(count));
  const int64_t per = x.numel() / count;
  for (int64_t i = 0; i < count; ++i) {
    std::string& bytes = r.images[static_cast<size_t>(i)];
    const std::string name = fmt::format("image {} of the request", i);
    VIT_CHECK(!bytes.empty(), "infer", "{} is empty (0 bytes)", name);
    const data::Image image = s.decode(m, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name.c_str());
    std::string().swap(bytes);
    m.model.preprocess_into(image, x.data<float>() + i * per);
  }
  return x;
}

namespace {

// One asked-for output of the batch: logits (or their top-k as Triton's classification strings),
// or the embedding at the model's default pooling.
OutputTensor output(ServeContext& s, ServedModel& m, const RequestedOutput& w, const Tensor& input) {
  const bool logits = w.name == kLogits, embedding = w.name == kEmbedding;
  if (!(logits && m.model.has_classifier()) && !embedding) {
    throw HttpError{400, fmt::format("[infer] unknown output '{}' (model '{}' has {})", w.name, m.name,
                                     m.model.has_classifier() ? "logits, embedding" : "embedding")};
  }
  VIT_CHECK(w.classification == 0 || logits, "infer", "output '{}': classification applies to the logits only", w.name);
  const Tensor y = logits ? s.run(m, {infer::Output::Logits}, input)
                          : s.run(m, {infer::Output::Embedding, m.model.default_pool()}, input);
  OutputTensor o;
  o.name = w.name;
  o.binary = w.binary;
  if (w.classification == 0) {
    o.datatype = "FP32";
    o.shape = y.shape();
    o.values = y;
    return o;
  }
  const int64_t k = std::min(w.classification, m.model.num_classes());
  o.datatype = "BYTES";
  o.shape = {y.size(0), k};
  for (const auto& row : m.model.top_k(y, k)) {
    for (const infer::ClassScore& c : row) {
      o.strings.push_back(fmt::format("{}:{}:{}", static_cast<float>(c.probability), c.index, m.model.label(c.index)));
    }
  }
  return o;
}

}  // namespace

std::vector<OutputTensor> run_outputs(ServeContext& s, ServedModel& m, const InferRequest& r, const Tensor& batch) {
  std::vector<RequestedOutput> wanted = r.outputs;
  if (wanted.empty()) {  // the spec: every output the model has
    if (m.model.has_classifier()) wanted.push_back({kLogits, r.binary_outputs, 0});
    wanted.push_back({kEmbedding, r.binary_outputs, 0});
  }
  std::vector<OutputTensor> outputs;
  for (const RequestedOutput& w : wanted) outputs.push_back(output(s, m, w, batch));
  return outputs;
}

}  // namespace vit::serve::oip
