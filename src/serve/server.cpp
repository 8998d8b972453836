// `vit serve` (see server.h): the route table and its handlers, translating HTTP requests
// (serve/http_server.h) onto the inference session through the batcher.
#include "serve/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/image.h"
#include "infer/attention_map.h"
#include "infer/pretrained.h"
#include "io/npy.h"
#include "serve/decode_budget.h"
#include "serve/fair_turn.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/open_inference.h"
#include "serve/page.h"

namespace vit::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// An error with its HTTP status.
struct HttpError {
  int status;
  std::string message;
};

void reply(http::Response& res, int status, const json& body) {
  res.status = status;
  res.content_type = "application/json";
  res.body = http::json_text(body);
}

// The value of a query parameter, or nullptr.
const std::string* param(const http::Request& req, const std::string& name) {
  for (const auto& [key, value] : req.query) {
    if (key == name) return &value;
  }
  return nullptr;
}

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

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// One model and its queue.
struct Served {
  std::string name, file;
  infer::Predictor model;
  std::unique_ptr<Batcher> batcher;
  std::mutex attention;  // attention maps run the autograd model: one at a time
  Served(std::string n, std::string f, infer::Predictor m)
      : name(std::move(n)), file(std::move(f)), model(std::move(m)) {}
  const model::ViTConfig& config() const { return model.config(); }
};

bool valid_model_name(const std::string& name) {
  return !name.empty() && name.size() <= 128 && name != "." && name != ".." &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
             std::string::npos;
}

// Path segments of /a/b/c: {"a", "b", "c"}.
std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

struct Server::Impl {
  std::vector<std::unique_ptr<Served>> models;
  ServerOptions options;
  std::unique_ptr<Metrics> metrics;
  FairTurn compute;  // model calls take turns on all cores, first ready first served
  std::unique_ptr<DecodeBudget> decode_budget;
  std::unique_ptr<http::Server> http;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> inflight{0}, answered{0};  // model requests
  // After stop(): nobody waits for the model beyond this (the HTTP drain's end).
  std::atomic<int64_t> give_up_ns{std::numeric_limits<int64_t>::max()};

  std::string model_names() const {
    std::vector<std::string> names;
    for (const auto& m : models) names.push_back(m->name);
    return fmt::format("{}", fmt::join(names, ", "));
  }
  Served* find_model(const std::string& name) const {
    for (const auto& m : models) {
      if (m->name == name) return m.get();
    }
    return nullptr;
  }
  // /v1's model: ?model=NAME, or the only one.
  Served& v1_model(const http::Request& req) const {
    const std::string* asked = param(req, "model");
    if (asked == nullptr) {
      if (models.size() == 1) return *models[0];
      throw HttpError{400, fmt::format("[serve] {} models are served ({}): name one with ?model=NAME", models.size(),
                                       model_names())};
    }
    Served* m = find_model(*asked);
    if (m == nullptr) throw HttpError{404, fmt::format("[serve] no model '{}' (served: {})", *asked, model_names())};
    return *m;
  }

  // An image decoded within the decode budget.
  data::Image decode(const Served& m, const uint8_t* bytes, size_t size) const {
    const char* name = "the request body";
    const int64_t max_pixels = options.max_pixels > 0 ? options.max_pixels : data::kDefaultMaxPixels;
    const data::ImageHeader header = data::read_image_header(bytes, size, name);
    if (header.height * header.width > max_pixels) return data::decode_image(bytes, size, name, max_pixels);  // refuses
    const int64_t need = kPeakBytesPerValue * header.height * header.width *
                         std::max<int64_t>({header.channels, m.config().in_channels, 1});
    const std::optional<DecodeBudget::Lease> lease = decode_budget->try_reserve(need);
    if (!lease) {
      throw HttpError{503,
                      fmt::format("[serve] the server is short of image-decoding memory: this {}x{} image needs {} "
                                  "MiB at its peak, {} of {} MiB (--decode-memory) are in use; retry",
                                  header.width, header.height, need >> 20, decode_budget->used() >> 20,
                                  decode_budget->total() >> 20)};
    }
    try {
      return data::decode_image(bytes, size, name, max_pixels);
    } catch (const Error& e) {  // stb's allocation failure: the server is short, not the image bad
      if (std::strstr(e.what(), "(outofmem)") != nullptr) throw std::bad_alloc();
      throw;
    }
  }

  // The request body as a (B, C, H, W) float32 batch, checked; `image` tells which kind it was.
  Tensor input(const Served& m, const http::Request& req, bool& image) const {
    const infer::Predictor& model = m.model;
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
      model.check_input(f, "serve", "the .npy body");
      VIT_CHECK(f.size(0) >= 1, "serve", "the .npy body holds no images (B = 0)");
      return f;
    }
    Tensor x = Tensor::empty(model.input_shape(1));
    model.preprocess_into(decode(m, bytes, body.size()), x.data<float>());
    return x;
  }

  // Through the batcher, within the timeout (and the drain's end): a request given up on leaves
  // the queue at once.
  Tensor run(Served& m, const infer::Request& kind, Tensor x) {
    Batcher::Ticket ticket;
    try {
      ticket = m.batcher->submit(kind, std::move(x));
    } catch (const QueueFull& e) {
      throw HttpError{429, e.what()};
    } catch (const ShuttingDown& e) {
      throw HttpError{503, e.what()};
    }
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(options.request_timeout));
    for (;;) {
      const auto now = Clock::now();
      const auto give_up = Clock::time_point(std::chrono::nanoseconds(give_up_ns.load()));
      if (now >= deadline || now >= give_up) break;
      const auto slice = std::min({deadline - now, give_up - now, Clock::duration(std::chrono::milliseconds(100))});
      if (ticket.result.wait_for(slice) == std::future_status::ready) return ticket.result.get();
    }
    m.batcher->cancel(ticket);
    throw HttpError{
        503, fmt::format("timed out after {} s waiting for the model (--request-timeout)", options.request_timeout)};
  }

  // POST /v1/predict: an image -> top-k classes; a .npy -> logits.
  void predict(const http::Request& req, http::Response& res) {
    Served& m = v1_model(req);
    const infer::Predictor& model = m.model;
    if (!model.has_classifier()) {
      try {
        model.require_classifier("serve", "", "POST /v1/embed");
      } catch (const Error& e) {
        throw HttpError{400, e.what()};
      }
    }
    const std::string* asked = param(req, "top_k");
    const int64_t k = asked != nullptr ? parse_top_k(*asked) : options.top_k;
    bool image = false;
    Tensor x = input(m, req, image);
    const Tensor logits = run(m, {infer::Output::Logits}, std::move(x));  // (B, K)
    if (!image) {
      reply(res, 200, {{"logits", rows_json(logits)}});
      return;
    }
    // One rule for top_k, said in the answer: at most the class count.
    const int64_t classes = model.num_classes(), given = std::min(k, classes);
    json predictions = json::array();
    const std::vector<std::vector<infer::ClassScore>> top =
        model.top_k(logits, given);  // kept: a row of a temporary dangles
    for (const infer::ClassScore& s : top[0]) {
      predictions.push_back({{"index", s.index}, {"label", model.label(s.index)}, {"probability", s.probability}});
    }
    json answer = {{"predictions", predictions}, {"top_k", given}};
    if (k > classes) {
      answer["note"] =
          fmt::format("top_k {} is more than the model's {} classes: all {} are given", k, classes, classes);
    }
    reply(res, 200, answer);
  }

  // POST /v1/embed: an image -> one embedding; a .npy -> a row per image.
  void embed(const http::Request& req, http::Response& res) {
    Served& m = v1_model(req);
    const std::string* asked = param(req, "pool");
    const infer::Pool pool =
        asked != nullptr && !asked->empty() ? infer::parse_pool(*asked, "serve") : m.model.default_pool();
    m.model.check_pool(pool, "serve");
    bool image = false;
    Tensor x = input(m, req, image);
    const Tensor e = run(m, {infer::Output::Embedding, pool}, std::move(x));
    const Shape row(e.shape().begin() + 1, e.shape().end());
    if (image) {
      reply(res, 200, {{"embedding", rows_json(e.slice(0, 0, 1).reshape(row))}, {"shape", row}});
    } else {
      reply(res, 200, {{"embeddings", rows_json(e)}, {"shape", e.shape()}});
    }
  }

  // POST /v1/attention: an image -> vit attention's picture as a PNG.
  void attention(const http::Request& req, http::Response& res) {
    Served& m = v1_model(req);
    if (!options.attention) throw HttpError{404, "[serve] attention maps are off (vit serve --no-attention)"};
    const std::string& body = req.body;
    VIT_CHECK(!body.empty(), "serve", "the request body is empty: send an image (PNG/JPEG)");
    const data::Image image = decode(m, reinterpret_cast<const uint8_t*>(body.data()), body.size());
    std::lock_guard lock(m.attention);
    FairTurn::Turn turn(compute);
    const infer::AttentionMaps maps =
        infer::attention_maps(*m.model.loaded().model, image, m.model.loaded().preprocess);
    const std::vector<uint8_t> png = data::encode_png(infer::render_attention(image, maps, 224));
    res.status = 200;
    res.content_type = "image/png";
    res.body.assign(png.begin(), png.end());
  }

  json model_json(const Served& m) const {
    const model::ViTConfig& c = m.config();
    return {{"name", m.name},
            {"file", m.file},
            {"model", c.name},
            {"layout", m.model.loaded().layout},
            {"family", m.model.loaded().family},
            {"weights", m.model.loaded().weights_note.empty() ? "" : (m.model.loaded().ema ? "ema" : "raw")},
            {"precision", infer::precision_name(m.model.precision())},
            {"image_size", c.image_size},
            {"channels", c.in_channels},
            {"classes", m.model.num_classes()},
            {"embedding", m.model.embed_dim()}};
  }

  // GET /v1/models: what the page lists.
  void list_models(const http::Request&, http::Response& res) {
    json list = json::array();
    for (const auto& m : models) list.push_back(model_json(*m));
    reply(res, 200, {{"models", list}});
  }

  void page(const http::Request&, http::Response& res) {
    res.status = 200;
    res.content_type = "text/html; charset=utf-8";
    res.body = page_html();
  }

  void healthz(const http::Request&, http::Response& res) {
    if (draining) {
      reply(res, 503, {{"status", "draining"}});
      return;
    }
    json answer = models.size() == 1 ? model_json(*models[0]) : json::object();
    json list = json::array();
    for (const auto& m : models) list.push_back(m->name);
    answer["status"] = "ok";
    answer["models"] = list;
    answer["max_batch"] = options.batching.max_batch;
    reply(res, 200, answer);
  }

  void metrics_text(const http::Request&, http::Response& res) {
    res.content_type = "text/plain; version=0.0.4";
    std::vector<int64_t> depths;
    for (const auto& m : models) depths.push_back(m->batcher->queue_depth());
    res.body = metrics->text(depths, inflight.load());
  }

  // ---- the Open Inference Protocol (serve/open_inference.h) ----

  // /v2/models/{name}[/versions/{v}][/ready|/infer]: the model, and what follows (""/"ready"/"infer").
  Served& v2_target(const std::vector<std::string>& seg, std::string& rest, std::string& version) const {
    Served* m = find_model(seg[2]);
    if (m == nullptr) throw HttpError{404, fmt::format("unknown model '{}' (served: {})", seg[2], model_names())};
    size_t at = 3;
    version = "1";
    if (seg.size() > at && seg[at] == "versions") {
      if (seg.size() == at + 1) throw HttpError{404, fmt::format("no such endpoint {}", "versions/ without a version")};
      if (seg[at + 1] != "1") {
        throw HttpError{404, fmt::format("unknown version '{}' of model '{}' (it has version 1)", seg[at + 1], seg[2])};
      }
      at += 2;
    }
    rest = seg.size() > at ? seg[at] : "";
    if (seg.size() > at + 1) throw HttpError{404, "no such endpoint"};
    return *m;
  }

  json v2_metadata(const Served& m) const {
    const model::ViTConfig& c = m.config();
    json outputs = json::array();
    if (m.model.has_classifier()) {
      outputs.push_back({{"name", oip::kLogits}, {"datatype", "FP32"}, {"shape", {-1, m.model.num_classes()}}});
    }
    outputs.push_back({{"name", oip::kEmbedding}, {"datatype", "FP32"}, {"shape", {-1, m.model.embed_dim()}}});
    return {{"name", m.name},
            {"versions", {"1"}},
            {"platform", "vit"},
            {"inputs",
             {{{"name", oip::kInputName},
               {"datatype", "FP32"},
               {"shape", {-1, c.in_channels, c.image_size, c.image_size}}}}},
            {"outputs", outputs}};
  }

  void v2_infer(Served& m, const std::string& version, const http::Request& req, http::Response& res) {
    const model::ViTConfig& c = m.config();
    oip::InferRequest r = oip::parse_infer_request(req.body, req.header("inference-header-content-length"),
                                                   {c.in_channels, c.image_size, c.image_size});
    m.model.check_input(r.input, "infer", "input 'input'");
    std::vector<oip::RequestedOutput> wanted = r.outputs;
    if (wanted.empty()) {  // the spec: every output the model has
      if (m.model.has_classifier()) wanted.push_back({oip::kLogits, r.binary_outputs, 0});
      wanted.push_back({oip::kEmbedding, r.binary_outputs, 0});
    }
    std::vector<oip::OutputTensor> outputs;
    for (const oip::RequestedOutput& w : wanted) {
      const bool logits = w.name == oip::kLogits, embedding = w.name == oip::kEmbedding;
      if (!(logits && m.model.has_classifier()) && !embedding) {
        throw HttpError{400, fmt::format("[infer] unknown output '{}' (model '{}' has {})", w.name, m.name,
                                         m.model.has_classifier() ? "logits, embedding" : "embedding")};
      }
      VIT_CHECK(w.classification == 0 || logits, "infer", "output '{}': classification applies to the logits only",
                w.name);
      const Tensor y = logits ? run(m, {infer::Output::Logits}, r.input)
                              : run(m, {infer::Output::Embedding, m.model.default_pool()}, r.input);
      oip::OutputTensor o;
      o.name = w.name;
      o.binary = w.binary;
      if (w.classification > 0) {
        const int64_t k = std::min(w.classification, m.model.num_classes());
        o.datatype = "BYTES";
        o.shape = {y.size(0), k};
        for (const auto& row : m.model.top_k(y, k)) {
          for (const infer::ClassScore& s : row) {
            o.strings.push_back(
                fmt::format("{}:{}:{}", static_cast<float>(s.probability), s.index, m.model.label(s.index)));
          }
        }
      } else {
        o.datatype = "FP32";
        o.shape = y.shape();
        o.values = y;
      }
      outputs.push_back(std::move(o));
    }
    const oip::EncodedResponse e = oip::encode_infer_response(m.name, version, r.id, outputs);
    res.status = 200;
    res.body = e.body;
    if (e.header_length) {
      res.content_type = "application/octet-stream";
      res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*e.header_length));
    } else {
      res.content_type = "application/json";
    }
  }

  // Every /v2 path.
  void v2(const http::Request& req, http::Response& res) {
    const std::vector<std::string> seg = segments(req.path);
    const bool get = req.method == "GET" || req.method == "HEAD";
    auto method = [&](bool ok, const char* allowed) {
      if (!ok) {
        HttpError e{405, fmt::format("{} takes {}", req.path, allowed)};
        throw e;
      }
    };
    if (seg.size() == 1) {  // /v2
      method(get, "GET");
      reply(res, 200,
            {{"name", "vit"}, {"version", VIT_VERSION}, {"extensions", {"binary_tensor_data", "classification"}}});
      return;
    }
    if (seg.size() == 3 && seg[1] == "health" && (seg[2] == "live" || seg[2] == "ready")) {
      method(get, "GET");
      if (seg[2] == "ready" && draining) {
        reply(res, 503, {{"error", "draining"}});
        return;
      }
      reply(res, 200, json::object());
      return;
    }
    if (seg.size() >= 3 && seg[1] == "models") {
      std::string rest, version;
      Served& m = v2_target(seg, rest, version);
      if (rest.empty()) {
        method(get, "GET");
        reply(res, 200, v2_metadata(m));
        return;
      }
      if (rest == "ready") {
        method(get, "GET");
        if (draining) {
          reply(res, 503, {{"error", "draining"}});
          return;
        }
        reply(res, 200, json::object());
        return;
      }
      if (rest == "infer") {
        method(req.method == "POST", "POST");
        v2_infer(m, version, req, res);
        return;
      }
    }
    throw HttpError{404, fmt::format("no such endpoint {} (the Open Inference Protocol: GET /v2, /v2/health/live, "
                                     "/v2/health/ready, /v2/models/NAME[/versions/1][/ready], POST "
                                     "/v2/models/NAME[/versions/1]/infer)",
                                     req.path)};
  }
  static bool is_v2(const http::Request& req) { return req.path == "/v2" || req.path.rfind("/v2/", 0) == 0; }
  static bool v2_runs_model(const http::Request& req) {
    return is_v2(req) && req.method == "POST" && req.path.size() >= 6 &&
           req.path.compare(req.path.size() - 6, 6, "/infer") == 0;
  }

  // The route table: method, path, handler, the query parameters it takes, and whether it runs
  // the model (through the error wrapper, on a worker) or is cheap (answered on the event loop).
  using Handler = void (Impl::*)(const http::Request&, http::Response&);
  struct Route {
    const char* method;
    const char* path;
    Handler handler;
    std::vector<std::string> params;
    bool runs_model;
  };
  static const std::vector<Route>& routes() {
    static const std::vector<Route> table = {{"POST", "/v1/predict", &Impl::predict, {"top_k", "model"}, true},
                                             {"POST", "/v1/embed", &Impl::embed, {"pool", "model"}, true},
                                             {"POST", "/v1/attention", &Impl::attention, {"model"}, true},
                                             {"GET", "/v1/models", &Impl::list_models, {}, false},
                                             {"GET", "/healthz", &Impl::healthz, {}, false},
                                             {"GET", "/metrics", &Impl::metrics_text, {}, false},
                                             {"GET", "/", &Impl::page, {}, false}};
    return table;
  }
  static const Route* find_route(const http::Request& req) {
    for (const Route& r : routes()) {
      if (req.path == r.path && (req.method == r.method || (req.method == "HEAD" && std::strcmp(r.method, "GET") == 0)))
        return &r;
    }
    return nullptr;
  }

  // Unknown or repeated query parameters are refused, naming the known ones.
  static void check_query(const Route& route, const http::Request& req) {
    std::vector<std::string> seen;
    for (const auto& [key, value] : req.query) {
      if (std::find(route.params.begin(), route.params.end(), key) == route.params.end()) {
        const std::string known =
            route.params.empty() ? "it takes none" : fmt::format("known: {}", fmt::join(route.params, ", "));
        throw HttpError{400, fmt::format("[serve] unknown query parameter '{}' for {} {} ({})", key, route.method,
                                         route.path, known)};
      }
      VIT_CHECK(std::find(seen.begin(), seen.end(), key) == seen.end(), "serve", "query parameter '{}' given twice",
                key);
      seen.push_back(key);
    }
  }

  // The one error wrapper (llama.cpp's ex_wrapper): every failure becomes a JSON error with its
  // status, and a model endpoint's is counted in the metrics.
  http::Response handle(const http::Request& req) {
    http::Response res;
    const bool v2_path = is_v2(req);
    const Route* route = v2_path ? nullptr : find_route(req);
    if (route == nullptr && !v2_path) return refuse_route(req);
    const bool runs_model = v2_path ? v2_runs_model(req) : route->runs_model;
    const auto start = Clock::now();
    if (runs_model) ++inflight;
    int status = 200;
    try {
      if (v2_path) {
        VIT_CHECK(req.query.empty(), "serve", "the /v2 endpoints take no query parameters");
        v2(req, res);
      } else {
        check_query(*route, req);
        (this->*route->handler)(req, res);
      }
      status = res.status;
    } catch (const HttpError& e) {
      status = e.status;
      res = http::error_response(e.status, e.message);
    } catch (const Error& e) {
      status = 400;
      res = http::error_response(400, e.what());
    } catch (const std::bad_alloc&) {
      status = 503;
      res = http::error_response(503, "[serve] the server is short of memory for this request; retry");
    } catch (const std::exception& e) {
      status = 500;
      res = http::error_response(500, fmt::format("[serve] {}", e.what()));
    }
    if (runs_model) {
      metrics->request(metrics_model(req), v2_path ? "/v2/infer" : route->path, status,
                       std::chrono::duration<double>(Clock::now() - start).count());
      --inflight;
      ++answered;
    }
    return res;
  }

  // The model a request's metrics count under: its own, or "" when it named none that is served.
  std::string metrics_model(const http::Request& req) const {
    if (is_v2(req)) {
      const std::vector<std::string> seg = segments(req.path);
      return seg.size() >= 3 && find_model(seg[2]) != nullptr ? seg[2] : "";
    }
    const std::string* asked = param(req, "model");
    if (asked == nullptr) return models.size() == 1 ? models[0]->name : "";
    return find_model(*asked) != nullptr ? *asked : "";
  }

  // 404 for an unknown path, 405 (with Allow) for a known path and another method.
  static http::Response refuse_route(const http::Request& req) {
    std::vector<std::string> allowed;
    for (const Route& r : routes()) {
      if (req.path == r.path) allowed.push_back(r.method);
    }
    if (allowed.empty()) {
      return http::error_response(404,
                                  "no such endpoint (POST /v1/predict, POST /v1/embed, POST /v1/attention, GET "
                                  "/v1/models, GET /healthz, GET /metrics, GET /, and the Open Inference Protocol "
                                  "under /v2)");
    }
    if (allowed[0] == "GET") allowed.push_back("HEAD");
    http::Response res = http::error_response(
        405,
        fmt::format("{} takes {}{}", req.path, allowed[0], allowed[0] == "POST" ? " (an image or a .npy body)" : ""));
    res.headers.emplace_back("Allow", fmt::format("{}", fmt::join(allowed, ", ")));
    return res;
  }
};

Server::Server(std::vector<NamedModel> models, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  VIT_CHECK(!models.empty(), "serve",
            "no model to serve (give --checkpoint FILE, --model NAME=FILE or --model-dir DIR)");
  std::vector<std::string> names;
  for (NamedModel& m : models) {
    VIT_CHECK(valid_model_name(m.name), "serve",
              "model name '{}' ({}): use letters, digits, '_', '-' and '.' (at most 128), as URLs carry it", m.name,
              m.file);
    VIT_CHECK(std::find(names.begin(), names.end(), m.name) == names.end(), "serve",
              "two models are named '{}' ({}): give each its own name (--model NAME=FILE)", m.name, m.file);
    names.push_back(m.name);
    s.models.push_back(std::make_unique<Served>(m.name, m.file, std::move(m.model)));
  }
  VIT_CHECK(!s.options.host.empty(), "serve",
            "--host is empty: give the address to listen on (127.0.0.1, or 0.0.0.0 for every interface)");
  VIT_CHECK(s.options.request_timeout > 0 && std::isfinite(s.options.request_timeout), "serve",
            "--request-timeout must be positive, got {}", s.options.request_timeout);
  VIT_CHECK(s.options.max_body_bytes >= 1024, "serve", "--max-body must be at least 1024 bytes, got {}",
            s.options.max_body_bytes);
  VIT_CHECK(s.options.http_threads >= 1 && s.options.http_threads <= 4096, "serve",
            "--http-threads must be in [1, 4096], got {}", s.options.http_threads);
  VIT_CHECK(s.options.top_k >= 1, "serve", "--top-k must be >= 1, got {}", s.options.top_k);
  const int64_t max_pixels = s.options.max_pixels > 0 ? s.options.max_pixels : data::kDefaultMaxPixels;
  const int64_t largest = kPeakBytesPerValue * 4 * max_pixels;  // an RGBA image at the pixel limit
  VIT_CHECK(s.options.decode_memory_bytes >= largest, "serve",
            "--decode-memory {} MiB cannot decode one image at the pixel limit ({} pixels: {} MiB at its peak); "
            "raise it or lower --max-pixels",
            s.options.decode_memory_bytes >> 20, max_pixels, largest >> 20);
  s.decode_budget = std::make_unique<DecodeBudget>(s.options.decode_memory_bytes);
  s.metrics = std::make_unique<Metrics>(names);
  for (auto& served : s.models) {
    Served* m = served.get();
    // The attention maps' autograd model must not read the file again once the session has
    // released its pages: it gets weights of its own first.
    if (s.options.attention) infer::own_file_weights(*m->model.loaded().model);
    m->model.prepare();  // the weights packed before the first request
    m->batcher = std::make_unique<Batcher>(
        s.options.batching,
        [&s, m](const infer::Request& kind, const Tensor& images) {
          FairTurn::Turn turn(s.compute);
          return m->model.run(kind, images);
        },
        [&s, m](int64_t images, int64_t requests) { s.metrics->batch(m->name, images, requests); });
  }
  http::ServerOptions h;
  h.host = s.options.host;
  h.port = s.options.port;
  h.workers = s.options.http_threads;
  h.max_connections = s.options.max_connections;
  h.request_timeout = s.options.request_timeout;
  h.limits.max_body_bytes = static_cast<uint64_t>(s.options.max_body_bytes);
  h.max_buffered_body_bytes = h.limits.max_body_bytes * static_cast<uint64_t>(s.options.http_threads);
  s.http = std::make_unique<http::Server>(
      h, [&s](const http::Request& req) { return s.handle(req); },
      [](const http::Request& req) {  // cheap: everything but a model endpoint
        if (Impl::is_v2(req)) return !Impl::v2_runs_model(req);
        const Impl::Route* route = Impl::find_route(req);
        return route == nullptr || !route->runs_model;
      });
}

Server::~Server() {
  if (impl_) {
    impl_->http.reset();                               // no more requests
    for (auto& m : impl_->models) m->batcher.reset();  // each drains before its session goes
  }
}

int Server::bind() {
  Impl& s = *impl_;
  VIT_CHECK(s.options.port >= 0 && s.options.port <= 65535, "serve", "--port must be in [0, 65535], got {}",
            s.options.port);
  return s.http->bind();
}

void Server::serve() {
  Impl& s = *impl_;
  s.http->serve();  // returns after stop() and the drain
  s.draining = true;
  for (auto& m : s.models) m->batcher->drain();
}

void Server::stop() {
  Impl& s = *impl_;
  s.draining = true;
  const auto grace = std::chrono::duration<double>(s.options.request_timeout) + std::chrono::seconds(1);
  s.give_up_ns = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count();
  s.http->stop();
}

int64_t Server::answered() const { return impl_->answered.load(); }

}  // namespace vit::serve
