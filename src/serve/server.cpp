// `vit serve` (see server.h): HTTP translation onto the inference session, through the batcher.
#include "serve/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/image.h"
#include "io/npy.h"
#include "serve/metrics.h"

namespace vit::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// An error with its HTTP status.
struct HttpError {
  int status;
  std::string message;
};

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

const char* reason(int status) {
  switch (status) {
    case 400:
      return "bad request";
    case 404:
      return "no such endpoint (POST /v1/predict, POST /v1/embed, GET /healthz, GET /metrics)";
    case 405:
      return "method not allowed";
    case 408:
      return "the request was not received in time";
    case 413:
      return "the request body is larger than the server's limit (--max-body)";
    case 414:
      return "the request URI is too long";
    case 431:
      return "the request headers are too large";
    default:
      return status >= 500 ? "internal error" : "the request was refused";
  }
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

}  // namespace

struct Server::Impl {
  infer::Predictor model;
  ServerOptions options;
  Metrics metrics;
  std::unique_ptr<Batcher> batcher;
  httplib::Server http;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> inflight{0}, answered{0};
  int port = 0;
  socket_t listen_fd = INVALID_SOCKET;  // the last socket httplib made to bind (the bound one when it succeeds)

  explicit Impl(infer::Predictor m) : model(std::move(m)) {}
  const model::ViTConfig& config() const { return model.config(); }

  // The request body as a (B, C, H, W) float32 batch, checked; `image` tells which kind it was.
  Tensor input(const httplib::Request& req, const std::string& body, bool& image) const {
    const model::ViTConfig& c = config();
    VIT_CHECK(!body.empty(), "serve", "the request body is empty: send an image (PNG/JPEG) or a float32 .npy");
    const std::string type = req.get_header_value("Content-Type");
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
    const data::Image decoded = data::decode_image(
        bytes, body.size(), "the request body", options.max_pixels > 0 ? options.max_pixels : data::kDefaultMaxPixels);
    Tensor x = Tensor::empty(model.input_shape(1));
    model.preprocess_into(decoded, x.data<float>());
    return x;
  }

  // Through the batcher, within the timeout.
  Tensor run(const infer::Request& kind, Tensor x) {
    Batcher::Ticket ticket;
    try {
      ticket = batcher->submit(kind, std::move(x));
    } catch (const QueueFull& e) {
      throw HttpError{429, e.what()};
    } catch (const ShuttingDown& e) {
      throw HttpError{503, e.what()};
    }
    const auto wait = std::chrono::duration<double>(options.request_timeout);
    if (ticket.result.wait_for(wait) != std::future_status::ready) {
      ticket.cancelled->store(true);
      throw HttpError{
          503, fmt::format("timed out after {} s waiting for the model (--request-timeout)", options.request_timeout)};
    }
    return ticket.result.get();
  }

  // POST /v1/predict: an image -> top-k classes; a .npy -> logits.
  void predict(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    if (!model.has_classifier()) {
      try {
        model.require_classifier("serve", "", "POST /v1/embed");
      } catch (const Error& e) {
        throw HttpError{400, e.what()};
      }
    }
    int64_t k = options.top_k;
    if (req.has_param("top_k")) {
      const std::string v = req.get_param_value("top_k");
      VIT_CHECK(!v.empty() && v.size() <= 6 && v.find_first_not_of("0123456789") == std::string::npos, "serve",
                "top_k must be a positive whole number, got '{}'", v);
      k = std::stoll(v);
      VIT_CHECK(k >= 1, "serve", "top_k must be >= 1, got {}", k);
    }
    bool image = false;
    Tensor x = input(req, body, image);
    const Tensor logits = run({infer::Output::Logits}, std::move(x));  // (B, K)
    if (!image) {
      reply(res, 200, {{"logits", rows_json(logits)}});
      return;
    }
    json predictions = json::array();
    const std::vector<std::vector<infer::ClassScore>> top =
        model.top_k(logits, k);  // kept: a row of a temporary dangles
    for (const infer::ClassScore& s : top[0]) {
      predictions.push_back({{"index", s.index}, {"label", model.label(s.index)}, {"probability", s.probability}});
    }
    reply(res, 200, {{"predictions", predictions}});
  }

  // POST /v1/embed: an image -> one embedding; a .npy -> a row per image.
  void embed(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    const infer::Pool pool = req.has_param("pool") && !req.get_param_value("pool").empty()
                                 ? infer::parse_pool(req.get_param_value("pool"), "serve")
                                 : model.default_pool();
    model.check_pool(pool, "serve");
    bool image = false;
    Tensor x = input(req, body, image);
    const Tensor e = run({infer::Output::Embedding, pool}, std::move(x));
    const Shape row(e.shape().begin() + 1, e.shape().end());
    if (image) {
      reply(res, 200, {{"embedding", rows_json(e.slice(0, 0, 1).reshape(row))}, {"shape", row}});
    } else {
      reply(res, 200, {{"embeddings", rows_json(e)}, {"shape", e.shape()}});
    }
  }

  // The one error wrapper (llama.cpp's ex_wrapper): every model endpoint's failure becomes a JSON
  // error with its status, and is counted in the metrics.
  using Handler = void (Impl::*)(const httplib::Request&, const std::string&, httplib::Response&);
  void handle(Handler handler, const httplib::Request& req, const std::string& body, httplib::Response& res,
              const std::string& endpoint) {
    const auto start = Clock::now();
    ++inflight;
    int status = 200;
    try {
      if (draining) throw HttpError{503, "the server is shutting down"};
      (this->*handler)(req, body, res);
    } catch (const HttpError& e) {
      status = e.status;
      reply(res, e.status, {{"error", e.message}});
      if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
    } catch (const Error& e) {
      status = 400;
      reply(res, 400, {{"error", e.what()}});
    } catch (const std::exception& e) {
      status = 500;
      reply(res, 500, {{"error", fmt::format("[serve] {}", e.what())}});
    }
    metrics.request(endpoint, status, std::chrono::duration<double>(Clock::now() - start).count());
    ++answered;
    --inflight;
  }

  // The model endpoints (the route table): POST with an image or a .npy body.
  struct Route {
    const char* path;
    Handler handler;
  };
  static std::vector<Route> routes() { return {{"/v1/predict", &Impl::predict}, {"/v1/embed", &Impl::embed}}; }

  void healthz(httplib::Response& res) const {
    if (draining) {
      reply(res, 503, {{"status", "draining"}});
      return;
    }
    const model::ViTConfig& c = config();
    reply(res, 200,
          {{"status", "ok"},
           {"model", c.name},
           {"layout", model.loaded().layout},
           {"family", model.loaded().family},
           {"weights", model.loaded().weights_note.empty() ? "" : (model.loaded().ema ? "ema" : "raw")},
           {"image_size", c.image_size},
           {"channels", c.in_channels},
           {"classes", model.num_classes()},
           {"max_batch", options.batching.max_batch}});
  }
};

Server::Server(infer::Predictor model, ServerOptions options) : impl_(std::make_unique<Impl>(std::move(model))) {
  Impl& s = *impl_;
  s.options = std::move(options);
  VIT_CHECK(!s.options.host.empty(), "serve",
            "--host is empty: give the address to listen on (127.0.0.1, or 0.0.0.0 for every interface)");
  VIT_CHECK(s.options.request_timeout > 0 && std::isfinite(s.options.request_timeout), "serve",
            "--request-timeout must be positive, got {}", s.options.request_timeout);
  VIT_CHECK(s.options.max_body_bytes >= 1024, "serve", "--max-body must be at least 1024 bytes, got {}",
            s.options.max_body_bytes);
  VIT_CHECK(s.options.http_threads >= 1 && s.options.http_threads <= 4096, "serve",
            "--http-threads must be in [1, 4096], got {}", s.options.http_threads);
  VIT_CHECK(s.options.top_k >= 1, "serve", "--top-k must be >= 1, got {}", s.options.top_k);
  s.model.prepare();  // the weights packed before the first request
  s.batcher = std::make_unique<Batcher>(
      s.options.batching, [&s](const infer::Request& kind, const Tensor& images) { return s.model.run(kind, images); },
      [&s](int64_t images, int64_t requests) { s.metrics.batch(images, requests); });

  httplib::Server& http = s.http;
  const int threads = s.options.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // A body over --max-body is still read, and dropped, for up to kDrainBytes more: a client that
  // sends its whole body before reading the answer then gets the 413 instead of a reset connection.
  // Beyond that (a Content-Length past it, or a stream that goes on) the connection is closed.
  constexpr size_t kDrainBytes = size_t{16} << 20;
  const auto limit = static_cast<size_t>(s.options.max_body_bytes);
  http.set_payload_max_length(limit + kDrainBytes);
  const auto timeout = std::chrono::duration<double>(s.options.request_timeout);
  http.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  http.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  // The bodies are read through a content reader: httplib's own reading parses a body sent as
  // application/x-www-form-urlencoded (curl --data-binary's default type) as a form and refuses
  // it beyond 8 KiB; an image sent that way is still an image here.
  for (const Impl::Route& route : Impl::routes()) {
    const char* path = route.path;
    const auto handler = route.handler;
    http.Post(path, [&s, path, handler, limit](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& read) {
      std::string body;
      size_t received = 0;
      const bool whole = read([&](const char* data, size_t n) {
        received += n;  // a chunked body has no Content-Length for httplib to hold: counted here
        if (received <= limit) {
          body.append(data, n);
        } else {
          std::string().swap(body);  // dropped (and freed) while the rest drains
        }
        return received <= limit + kDrainBytes;
      });
      const bool too_large = received > limit || res.status == 413;
      if (!whole || too_large) {  // too large (413) or the client went away / sent a broken body (400)
        const int status = too_large ? 413 : res.status >= 400 ? res.status : 400;
        reply(res, status, {{"error", reason(status)}});
        s.metrics.request(path, status, 0.0);
        ++s.answered;
        return;
      }
      s.handle(handler, req, body, res, path);
    });
  }
  for (const Impl::Route& route : Impl::routes()) {
    const char* path = route.path;
    http.Get(path, [path](const httplib::Request&, httplib::Response& res) {
      reply(res, 405, {{"error", fmt::format("{} takes POST (an image or a .npy body)", path)}});
      res.set_header("Allow", "POST");
    });
  }
  http.Get("/healthz", [&s](const httplib::Request&, httplib::Response& res) { s.healthz(res); });
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s.metrics.text(s.batcher->queue_depth(), s.inflight.load()), "text/plain; version=0.0.4");
  });
  // Errors httplib answers itself (404, 413, a malformed request) get a JSON body too.
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) reply(res, res.status, {{"error", reason(res.status)}});
  });
  // Answers go out as headers then body: without TCP_NODELAY, Nagle's algorithm holds the body
  // until the client's delayed ACK of the headers (~40 ms on Linux) on every keep-alive request.
  http.set_tcp_nodelay(true);
  // httplib's default sets SO_REUSEPORT, which lets a second server share a busy port and
  // steal half its connections; SO_REUSEADDR alone refuses a port in use but allows a quick restart.
  http.set_socket_options([&s](socket_t sock) {
    s.listen_fd = sock;
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<void*>(&yes), sizeof(yes));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply(res, 500, {{"error", "[serve] " + what}});
  });
}

Server::~Server() {
  if (impl_) impl_->batcher.reset();  // drains before the session goes
}

int Server::bind() {
  Impl& s = *impl_;
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host);
    VIT_CHECK(s.port > 0, "serve", "cannot listen on {} (any port)", s.options.host);
  } else {
    VIT_CHECK(s.options.port > 0 && s.options.port <= 65535, "serve", "--port must be in [0, 65535], got {}",
              s.options.port);
    VIT_CHECK(s.http.bind_to_port(s.options.host, s.options.port), "serve",
              "cannot listen on {}:{} (in use, or not an address of this machine)", s.options.host, s.options.port);
    s.port = s.options.port;
  }
  // httplib listens with a backlog of 5: a burst of clients connecting at once overflows it and
  // some see their connection reset. Listening again on the bound socket raises the backlog.
  if (s.listen_fd != INVALID_SOCKET) ::listen(s.listen_fd, SOMAXCONN);
  return s.port;
}

void Server::serve() {
  Impl& s = *impl_;
  s.http.listen_after_bind();  // returns after stop(), its handlers finished
  s.draining = true;
  s.batcher->drain();
}

void Server::stop() {
  impl_->draining = true;
  impl_->http.stop();
}

int64_t Server::answered() const { return impl_->answered.load(); }

}  // namespace vit::serve
