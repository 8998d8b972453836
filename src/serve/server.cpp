// `vit serve`'s wiring (see server.h): the models' batchers, the route table, the event loop.
#include "serve/server.h"

#include <malloc.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "infer/load_model.h"
#include "serve/grpc/service.h"
#include "serve/http/event_loop.h"
#include "serve/oip/endpoints.h"
#include "serve/router.h"
#include "serve/v1/endpoints.h"

namespace vit::serve {

using Clock = std::chrono::steady_clock;

struct Server::Impl {
  ServeContext context;
  Router router;
  std::unique_ptr<Repository> repository;
  std::unique_ptr<http::EventLoop> loop;
  std::unique_ptr<GrpcServer> grpc;
  std::thread grpc_stopping;  // stop() begins gRPC's drain beside HTTP's
  // Once a second: when no request is in flight and some were answered since the last look, the
  // allocator's free memory goes back to the system (malloc_trim): the request bodies the workers'
  // arenas cached under load (each model's session keeps its activation arena, grown to the
  // largest batch, by design; a swapped-out version is trimmed when its last handle goes).
  std::mutex housekeeping_mutex;
  std::condition_variable housekeeping_wake;
  bool housekeeping_stop = false;
  std::thread housekeeper;

  Impl(std::vector<NamedModel> models, ServerOptions options) : context(std::move(models), std::move(options)) {
    housekeeper = std::thread([this] {
      int64_t trimmed_at = 0;
      std::unique_lock lock(housekeeping_mutex);
      while (!housekeeping_wake.wait_for(lock, std::chrono::seconds(1), [this] { return housekeeping_stop; })) {
        const int64_t answered = context.answered.load();
        if (context.inflight.load() == 0 && answered != trimmed_at) {
          malloc_trim(0);
          trimmed_at = answered;
        }
      }
    });
  }
  ~Impl() {
    {
      std::lock_guard lock(housekeeping_mutex);
      housekeeping_stop = true;
    }
    housekeeping_wake.notify_all();
    housekeeper.join();
  }

  // A version made servable: its weights packed, its batcher running its batches in the compute
  // turns and reporting them to the metrics.
  void prepare(ServedModel& served) {
    ServeContext& s = context;
    ServedModel* m = &served;
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
        [&s, m](int64_t images, const std::vector<double>& waited) { s.metrics.batch(m->name, images, waited); });
    s.metrics.add_model(m->name);
  }

  void start_repository(std::vector<ModelSpec> specs, LoadModel load) {
    for (const ModelHandle& m : context.models.all()) prepare(*m);
    const RepositoryOptions& o = context.options.repository;
    VIT_CHECK(o.control == ModelControl::None || load, "serve", "--model-control {} needs a way to load models",
              model_control_name(o.control));
    repository = std::make_unique<Repository>(
        context.models, std::move(specs), std::move(load), [this](ServedModel& m) { prepare(m); }, o,
        [](const std::string& line) {
          std::fprintf(stderr, "%s\n", line.c_str());
          std::fflush(stderr);
        });
    repository->on_load([this](const std::string& name, bool ok) { context.metrics.load(name, ok); });
    context.repository = repository.get();
  }

  // The model a request's metrics count under: the one it named, or the only one served; "" when
  // it named none that is served.
  std::string metrics_model(const Router::Match& match, const http::Request& req) const {
    const Call call{req, match.captures};
    const std::string& in_path = call.capture("model");
    const std::string* asked = in_path.empty() ? call.query("model") : &in_path;
    if (asked == nullptr) {
      const std::vector<ModelHandle> all = context.models.all();
      return all.size() == 1 ? all[0]->name : "";
    }
    return context.models.find(*asked) != nullptr ? *asked : "";
  }

  // Every request: matched, run behind the error wrapper; a model endpoint's counted.
  http::Response handle(const http::Request& req) {
    const Router::Match match = router.match(req);
    if (match.route == nullptr) return match.refusal;
    if (!match.route->runs_model) return router.run(match, req);
    const auto start = Clock::now();
    ++context.inflight;
    http::Response res = router.run(match, req);
    context.metrics.request(metrics_model(match, req), match.route->metrics_name, res.status,
                            std::chrono::duration<double>(Clock::now() - start).count());
    --context.inflight;
    ++context.answered;
    return res;
  }

  void start_loop() {
    const ServerOptions& o = context.options;
    http::EventLoopOptions h;
    h.host = o.host;
    h.port = o.port;
    h.workers = o.http_threads;
    h.max_connections = o.max_connections;
    h.request_timeout = o.request_timeout;
    h.limits.max_body_bytes = static_cast<uint64_t>(o.max_body_bytes);
    h.max_buffered_body_bytes = h.limits.max_body_bytes * static_cast<uint64_t>(o.http_threads);
    loop = std::make_unique<http::EventLoop>(
        h, [this](const http::Request& req) { return handle(req); },
        [this](const http::Request& req) { return router.quick(req); });
  }
};

Server::Server(std::vector<NamedModel> models, ServerOptions options, std::vector<ModelSpec> specs, LoadModel load)
    : impl_(std::make_unique<Impl>(std::move(models), std::move(options))) {
  impl_->start_repository(std::move(specs), std::move(load));
  add_v1_routes(impl_->router, impl_->context);
  oip::add_routes(impl_->router, impl_->context);
  impl_->start_loop();
}

Server::~Server() {
  if (impl_) {
    if (impl_->grpc_stopping.joinable()) impl_->grpc_stopping.join();
    impl_->grpc.reset();
    impl_->loop.reset();  // no more requests
    if (impl_->repository) impl_->repository->stop();
    // Each version's batcher drains before its session goes (the last handle frees it).
    for (const ModelHandle& m : impl_->context.models.all()) impl_->context.models.remove(m->name, "stopped");
  }
}

int Server::bind() {
  const int port = impl_->loop->bind();
  const ServerOptions& o = impl_->context.options;
  if (o.grpc_port >= 0) impl_->grpc = std::make_unique<GrpcServer>(impl_->context, o.host, o.grpc_port);
  return port;
}

int Server::grpc_port() const { return impl_->grpc ? impl_->grpc->port() : -1; }

void Server::serve() {
  ServeContext& s = impl_->context;
  impl_->loop->serve();  // returns after stop() and the drain
  s.draining = true;
  if (impl_->grpc_stopping.joinable()) impl_->grpc_stopping.join();
  if (impl_->repository) impl_->repository->stop();
  for (const ModelHandle& m : s.models.all()) m->batcher->drain();
}

void Server::stop() {
  ServeContext& s = impl_->context;
  s.draining = true;
  const auto grace = std::chrono::duration<double>(s.options.request_timeout) + std::chrono::seconds(1);
  s.give_up_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch() + grace).count();
  if (impl_->grpc && !impl_->grpc_stopping.joinable()) {
    // gRPC's Shutdown(deadline) also waits out idle client connections until the deadline: the
    // calls in flight are waited for here instead (within the grace), then it shuts down at once.
    impl_->grpc_stopping = std::thread([this, grace] {
      const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(grace);
      while (impl_->context.inflight.load() > 0 && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      impl_->grpc->shutdown(0);
    });
  }
  impl_->loop->stop();
}

int64_t Server::answered() const { return impl_->context.answered.load(); }

}  // namespace vit::serve
