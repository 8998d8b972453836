// The Open Inference Protocol's endpoints (see endpoints.h).
#include "serve/oip/endpoints.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "serve/oip/infer.h"
#include "serve/oip/protocol.h"

namespace vit::serve::oip {
namespace {

using json = nlohmann::json;

json tensors_json(const std::vector<TensorMetadata>& list) {
  json out = json::array();
  for (const TensorMetadata& t : list) out.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  return out;
}

class V2 {
 public:
  explicit V2(ServeContext& context) : s_(context) {}

  // The model a path names, at the version it names (404 for either unknown).
  ModelHandle model(const Call& call) const {
    try {
      return find_model(s_, call.capture("model"), call.capture("version"));
    } catch (const HttpError& e) {
      throw HttpError{e.status, "[serve] " + e.message};
    }
  }

  void server_metadata(const Call&, http::Response& res) const {
    reply(res, 200,
          {{"name", "vit"},
           {"version", VIT_VERSION},
           {"extensions", {"binary_tensor_data", "classification", "model_repository"}}});
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
    const ModelMetadata md = oip::model_metadata(*model(call));
    reply(res, 200,
          {{"name", md.name},
           {"versions", {md.version}},
           {"platform", md.platform},
           {"inputs", tensors_json(md.inputs)},
           {"outputs", tensors_json(md.outputs)}});
  }

  void infer(const Call& call, http::Response& res) const {
    const ModelHandle handle = model(call);  // held to the answer: a swapped-out version finishes it
    ServedModel& m = *handle;
    const model::ViTConfig& c = m.config();
    const http::Request& req = call.request;
    InferRequest r = parse_infer_request(req.body, req.header("inference-header-content-length"),
                                         {c.in_channels, c.image_size, c.image_size});
    const Tensor batch = request_batch(s_, m, r);
    const EncodedResponse e = encode_infer_response(m.name, m.version, r.id, run_outputs(s_, m, r, batch));
    res.status = 200;
    res.body = e.body;
    if (e.header_length) {
      res.content_type = "application/octet-stream";
      res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*e.header_length));
    } else {
      res.content_type = "application/json";
    }
  }

  // POST /v2/repository/index: every model the repository knows, with its state.
  void repository_index(const Call& call, http::Response& res) const {
    bool ready_only = false;
    const std::string& body = call.request.body;
    if (!body.empty()) {
      check_json_depth(body, "the request");
      json j;
      try {
        j = json::parse(body);
      } catch (const json::exception& e) {
        throw HttpError{400, fmt::format("[serve] the index request is not valid JSON ({})", e.what())};
      }
      if (!j.is_object()) throw HttpError{400, "[serve] the index request must be a JSON object {\"ready\"?: bool}"};
      if (j.contains("ready")) {
        if (!j["ready"].is_boolean()) throw HttpError{400, "[serve] \"ready\" must be true or false"};
        ready_only = j["ready"].get<bool>();
      }
    }
    json list = json::array();
    for (const ModelStatus& m : s_.models.index()) {
      if (ready_only && m.state != "READY") continue;
      json entry = {{"name", m.name}, {"state", m.state}};
      if (!m.version.empty()) entry["version"] = m.version;
      if (!m.reason.empty()) entry["reason"] = m.reason;
      list.push_back(entry);
    }
    reply(res, 200, list);
  }

  void repository_load(const Call& call, http::Response& res) const {
    try {
      s_.repository->load(call.capture("model"));
    } catch (const Error& e) {
      throw HttpError{400, e.what()};
    }
    reply(res, 200, json::object());
  }

  void repository_unload(const Call& call, http::Response& res) const {
    s_.repository->unload(call.capture("model"));
    reply(res, 200, json::object());
  }

 private:
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
  router.add({"POST", "/v2/repository/index", bind(&V2::repository_index), {}, false, ""});
  router.add(
      {"POST", "/v2/repository/models/{model}/load", bind(&V2::repository_load), {}, true, "/v2/repository/load"});
  router.add({"POST",
              "/v2/repository/models/{model}/unload",
              bind(&V2::repository_unload),
              {},
              true,
              "/v2/repository/unload"});
}

}  // namespace vit::serve::oip
