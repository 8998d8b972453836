// The Open Inference Protocol's endpoints (see endpoints.h).
#include "serve/oip/endpoints.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "serve/oip/protocol.h"

namespace vit::serve::oip {
namespace {

using json = nlohmann::json;

class V2 {
 public:
  explicit V2(ServeContext& context) : s_(context) {}

  // The model a path names, at the version it names (404 for either unknown).
  ServedModel& model(const Call& call) const {
    const std::string& name = call.capture("model");
    ServedModel* m = s_.models.find(name);
    if (m == nullptr) {
      throw HttpError{404, fmt::format("unknown model '{}' (served: {})", name, s_.models.names_text())};
    }
    const std::string& version = call.capture("version");
    if (!version.empty() && version != m->version) {
      throw HttpError{404,
                      fmt::format("unknown version '{}' of model '{}' (it has version {})", version, name, m->version)};
    }
    return *m;
  }

  void server_metadata(const Call&, http::Response& res) const {
    reply(res, 200,
          {{"name", "vit"}, {"version", VIT_VERSION}, {"extensions", {"binary_tensor_data", "classification"}}});
  }

  void live(const Call&, http::Response& res) const { reply(res, 200, json::object()); }

  void ready(const Call&, http::Response& res) const {
    if (s_.draining) {
      reply(res, 503, {{"error", "draining"}});
      return;
    }
    reply(res, 200, json::object());
  }

  void model_ready(const Call& call, http::Response& res) const {
    model(call);
    ready(call, res);
  }

  void model_metadata(const Call& call, http::Response& res) const {
    const ServedModel& m = model(call);
    const model::ViTConfig& c = m.config();
    json outputs = json::array();
    if (m.model.has_classifier()) {
      outputs.push_back({{"name", kLogits}, {"datatype", "FP32"}, {"shape", {-1, m.model.num_classes()}}});
    }
    outputs.push_back({{"name", kEmbedding}, {"datatype", "FP32"}, {"shape", {-1, m.model.embed_dim()}}});
    reply(res, 200,
          {{"name", m.name},
           {"versions", {m.version}},
           {"platform", "vit"},
           {"inputs",
            {{{"name", kInputName}, {"datatype", "FP32"}, {"shape", {-1, c.in_channels, c.image_size, c.image_size}}}}},
           {"outputs", outputs}});
  }

  void infer(const Call& call, http::Response& res) const {
    ServedModel& m = model(call);
    const model::ViTConfig& c = m.config();
    const http::Request& req = call.request;
    InferRequest r = parse_infer_request(req.body, req.header("inference-header-content-length"),
                                         {c.in_channels, c.image_size, c.image_size});
    m.model.check_input(r.input, "infer", "input 'input'");
    std::vector<RequestedOutput> wanted = r.outputs;
    if (wanted.empty()) {  // the spec: every output the model has
      if (m.model.has_classifier()) wanted.push_back({kLogits, r.binary_outputs, 0});
      wanted.push_back({kEmbedding, r.binary_outputs, 0});
    }
    std::vector<OutputTensor> outputs;
    for (const RequestedOutput& w : wanted) outputs.push_back(output(m, w, r.input));
    const EncodedResponse e = encode_infer_response(m.name, m.version, r.id, outputs);
    res.status = 200;
    res.body = e.body;
    if (e.header_length) {
      res.content_type = "application/octet-stream";
      res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*e.header_length));
    } else {
      res.content_type = "application/json";
    }
  }

 private:
  // One asked-for output of the batch: logits (or their top-k as Triton's classification
  // strings), or the embedding at the model's default pooling.
  OutputTensor output(ServedModel& m, const RequestedOutput& w, const Tensor& input) const {
    const bool logits = w.name == kLogits, embedding = w.name == kEmbedding;
    if (!(logits && m.model.has_classifier()) && !embedding) {
      throw HttpError{400, fmt::format("[infer] unknown output '{}' (model '{}' has {})", w.name, m.name,
                                       m.model.has_classifier() ? "logits, embedding" : "embedding")};
    }
    VIT_CHECK(w.classification == 0 || logits, "infer", "output '{}': classification applies to the logits only",
              w.name);
    const Tensor y = logits ? s_.run(m, {infer::Output::Logits}, input)
                            : s_.run(m, {infer::Output::Embedding, m.model.default_pool()}, input);
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
      for (const infer::ClassScore& s : row) {
        o.strings.push_back(
            fmt::format("{}:{}:{}", static_cast<float>(s.probability), s.index, m.model.label(s.index)));
      }
    }
    return o;
  }

  ServeContext& s_;
};

}  // namespace

void add_routes(Router& router, ServeContext& context) {
  auto v2 = std::make_shared<V2>(context);
  auto bind = [v2](void (V2::*handler)(const Call&, http::Response&) const) {
    return [v2, handler](const Call& call, http::Response& res) { ((*v2).*handler)(call, res); };
  };
  router.add({"GET", "/v2", bind(&V2::server_metadata), {}, false, ""});
  router.add({"GET", "/v2/health/live", bind(&V2::live), {}, false, ""});
  router.add({"GET", "/v2/health/ready", bind(&V2::ready), {}, false, ""});
  for (const std::string model : {"/v2/models/{model}", "/v2/models/{model}/versions/{version}"}) {
    router.add({"GET", model, bind(&V2::model_metadata), {}, false, ""});
    router.add({"GET", model + "/ready", bind(&V2::model_ready), {}, false, ""});
    router.add({"POST", model + "/infer", bind(&V2::infer), {}, true, "/v2/infer"});
  }
}

}  // namespace vit::serve::oip
