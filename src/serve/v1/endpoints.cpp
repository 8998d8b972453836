// vit's own endpoints (see endpoints.h): the request bodies (an image or a .npy) checked and turned
// into a batch, run through the model's batcher (serve/context.h), answered as JSON or a PNG.
#include "serve/v1/endpoints.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "infer/attention_map.h"
#include "io/npy.h"
#include "serve/page.h"

namespace vit::serve {
namespace {

using json = nlohmann::json;

// ?top_k: any positive whole number (one beyond int64 counts as the largest).
int64_t parse_top_k(const std::string& v) {
  VIT_CHECK(!v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
                v.find_first_not_of('0') != std::string::npos,
            "serve", "top_k must be a positive whole number, got '{}'", v);
  const std::string digits = v.substr(v.find_first_not_of('0'));
  return digits.size() > 18 ? std::numeric_limits<int64_t>::max() : std::stoll(digits);
}

// Rows of a float tensor as nested JSON arrays (B, ...).
json rows_json(const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* p = c.data<float>();
  if (c.dim() == 1) return json(std::vector<float>(p, p + c.numel()));
  json out = json::array();
  const Shape inner(c.shape().begin() + 1, c.shape().end());
  for (int64_t i = 0; i < c.size(0); ++i) out.push_back(rows_json(c.slice(0, i, i + 1).reshape(inner)));
  return out;
}

json model_json(const ServedModel& m) {
  const model::ViTConfig& c = m.config();
  const infer::LoadedModel& loaded = m.model.loaded();
  return {{"name", m.name},
          {"file", m.file},
          {"model", c.name},
          {"layout", loaded.layout},
          {"family", model::family_name(loaded.family)},
          {"weights", loaded.weights_note.empty() ? "" : (loaded.ema ? "ema" : "raw")},
          {"precision", infer::precision_name(m.model.precision())},
          {"image_size", c.image_size},
          {"channels", c.in_channels},
          {"classes", m.model.num_classes()},
          {"embedding", m.model.embed_dim()}};
}

class V1 {
 public:
  explicit V1(ServeContext& context) : s_(context) {}

  ModelHandle model(const Call& call) const { return s_.models.pick(call.query("model"), "name one with ?model=NAME"); }

  // The request body as a (B, C, H, W) float32 batch, checked; `image` tells which kind it was.
  Tensor input(const ServedModel& m, const http::Request& req, bool& image) const {
    const model::ViTConfig& c = m.config();
    const std::string& body = req.body;
    VIT_CHECK(!body.empty(), "serve", "the request body is empty: send an image (PNG/JPEG) or a float32 .npy");
    const std::string type = req.header("content-type");
    const bool npy = type.rfind("application/x-npy", 0) == 0 || body.rfind("\x93NUMPY", 0) == 0;
    if (type.rfind("application/json", 0) == 0 || type.rfind("text/", 0) == 0)
      throw HttpError{415, fmt::format("Content-Type {}: send an image (PNG/JPEG bytes) or a float32 (B, {}, {}, {}) "
                                       ".npy as application/x-npy",
                                       type, c.in_channels, c.image_size, c.image_size)};
    image = !npy;
    const auto* bytes = reinterpret_cast<const uint8_t*>(body.data());
    if (npy) {
      const Tensor t = io::parse_npy(bytes, body.size(), "the .npy body");
      VIT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, "serve", "the .npy body holds {}, not float32",
                dtype_name(t.dtype()));
      const Tensor f = t.to(DType::F32).contiguous();
      m.model.check_input(f, "serve", "the .npy body");
      VIT_CHECK(f.size(0) >= 1, "serve", "the .npy body holds no images (B = 0)");
      return f;
    }
    Tensor x = Tensor::empty(m.model.input_shape(1));
    m.model.preprocess_into(s_.decode(m, bytes, body.size()), x.data<float>());
    return x;
  }

  // POST /v1/predict: an image -> top-k classes; a .npy -> logits.
  void predict(const Call& call, http::Response& res) const {
    const ModelHandle handle = model(call);  // held to the answer: a swapped-out version finishes it
    ServedModel& m = *handle;
    const infer::Predictor& p = m.model;
    if (!p.has_classifier()) {
      try {
        p.require_classifier("serve", "", "POST /v1/embed");
      } catch (const Error& e) {
        throw HttpError{400, e.what()};
      }
    }
    const std::string* asked = call.query("top_k");
    const int64_t k = asked != nullptr ? parse_top_k(*asked) : s_.options.top_k;
    bool image = false;
    Tensor x = input(m, call.request, image);
    const Tensor logits = s_.run(m, {infer::Output::Logits}, std::move(x));  // (B, K)
    if (!image) {
      reply(res, 200, {{"logits", rows_json(logits)}});
      return;
    }
    // One rule for top_k, said in the answer: at most the class count.
    const int64_t classes = p.num_classes(), given = std::min(k, classes);
    json predictions = json::array();
    const std::vector<std::vector<infer::ClassScore>> top =
        p.top_k(logits, given);  // kept: a row of a temporary dangles
    for (const infer::ClassScore& score : top[0]) {
      predictions.push_back(
          {{"index", score.index}, {"label", p.label(score.index)}, {"probability", score.probability}});
    }
    json answer = {{"predictions", predictions}, {"top_k", given}};
    if (k > classes) {
      answer["note"] =
          fmt::format("top_k {} is more than the model's {} classes: all {} are given", k, classes, classes);
    }
    reply(res, 200, answer);
  }

  // POST /v1/embed: an image -> one embedding; a .npy -> a row per image.
  void embed(const Call& call, http::Response& res) const {
    const ModelHandle handle = model(call);
    ServedModel& m = *handle;
    const std::string* asked = call.query("pool");
    const infer::Pool pool =
        asked != nullptr && !asked->empty() ? infer::parse_pool(*asked, "serve") : m.model.default_pool();
    m.model.check_pool(pool, "serve");
    bool image = false;
    Tensor x = input(m, call.request, image);
    const Tensor e = s_.run(m, {infer::Output::Embedding, pool}, std::move(x));
    const Shape row(e.shape().begin() + 1, e.shape().end());
    if (image) {
      reply(res, 200, {{"embedding", rows_json(e.slice(0, 0, 1).reshape(row))}, {"shape", row}});
    } else {
      reply(res, 200, {{"embeddings", rows_json(e)}, {"shape", e.shape()}});
    }
  }

  // POST /v1/attention: an image -> vit attention's picture as a PNG.
  void attention(const Call& call, http::Response& res) const {
    const ModelHandle handle = model(call);
    ServedModel& m = *handle;
    if (!s_.options.attention) throw HttpError{404, "[serve] attention maps are off (vit serve --no-attention)"};
    const std::string& body = call.request.body;
    VIT_CHECK(!body.empty(), "serve", "the request body is empty: send an image (PNG/JPEG)");
    const data::Image image = s_.decode(m, reinterpret_cast<const uint8_t*>(body.data()), body.size());
    std::lock_guard lock(m.attention);
    FairTurn::Turn turn(s_.compute);
    const infer::AttentionMaps maps =
        infer::attention_maps(*m.model.loaded().model, image, m.model.loaded().preprocess);
    const std::vector<uint8_t> png = data::encode_png(infer::render_attention(image, maps, 224));
    res.status = 200;
    res.content_type = "image/png";
    res.body.assign(png.begin(), png.end());
  }

  // GET /v1/models: what the page lists.
  void list_models(const Call&, http::Response& res) const {
    json list = json::array();
    for (const auto& m : s_.models.all()) list.push_back(model_json(*m));
    reply(res, 200, {{"models", list}});
  }

  void healthz(const Call&, http::Response& res) const {
    if (s_.draining) {
      reply(res, 503, {{"status", "draining"}});
      return;
    }
    const std::vector<ModelHandle> all = s_.models.all();
    json answer = all.size() == 1 ? model_json(*all[0]) : json::object();
    answer["status"] = "ok";
    answer["models"] = s_.models.names();
    answer["max_batch"] = s_.options.batching.max_batch;
    reply(res, 200, answer);
  }

  void metrics_text(const Call&, http::Response& res) const {
    res.content_type = "text/plain; version=0.0.4";
    std::vector<std::pair<std::string, int64_t>> depths;
    for (const ModelHandle& m : s_.models.all()) depths.emplace_back(m->name, m->batcher->queue_depth());
    res.body = s_.metrics.text(depths, s_.inflight.load());
  }

  static void page(const Call&, http::Response& res) {
    res.status = 200;
    res.content_type = "text/html; charset=utf-8";
    res.body = page_html();
  }

 private:
  ServeContext& s_;
};

}  // namespace

void add_v1_routes(Router& router, ServeContext& context) {
  auto v1 = std::make_shared<V1>(context);
  auto bind = [v1](void (V1::*handler)(const Call&, http::Response&) const) {
    return [v1, handler](const Call& call, http::Response& res) { ((*v1).*handler)(call, res); };
  };
  router.add({"POST", "/v1/predict", bind(&V1::predict), {"top_k", "model"}, true, "/v1/predict"});
  router.add({"POST", "/v1/embed", bind(&V1::embed), {"pool", "model"}, true, "/v1/embed"});
  router.add({"POST", "/v1/attention", bind(&V1::attention), {"model"}, true, "/v1/attention"});
  router.add({"GET", "/v1/models", bind(&V1::list_models), {}, false, ""});
  router.add({"GET", "/healthz", bind(&V1::healthz), {}, false, ""});
  router.add({"GET", "/metrics", bind(&V1::metrics_text), {}, false, ""});
  router.add({"GET", "/", &V1::page, {}, false, ""});
}

}  // namespace vit::serve
