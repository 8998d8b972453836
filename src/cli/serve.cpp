// `vit serve`: models behind HTTP with dynamic batching and the Open Inference Protocol
// (serve/server.h): --checkpoint FILE (named after the file's stem), --model NAME=FILE (repeatable)
// and --model-dir DIR (every file in it, named after its stem), the load options applying to each.
// A model that fails to load stops the start, naming it (--skip-failed-models: warn and serve the
// others; under --model-control explicit or poll it is reported and may be loaded later).
// --model-control explicit|poll makes the model repository live (serve/models/repository.h). SIGTERM or SIGINT drains:
// no new connections, the requests in flight answered (for at most --request-timeout + 1 s; what is still open then is
// closed), then exit 0.
#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "serve/server.h"

namespace vit::cli {

void add_serve_command(CLI::App& app) {
  struct Options : LoadFlags {
    serve::ServerOptions server;
    std::vector<std::string> models;
    std::string model_dir;
    bool skip_failed = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "serve models over HTTP: the Open Inference Protocol (KServe v2) under /v2, POST /v1/predict, /v1/embed, "
      "/v1/attention, GET /v1/models, /healthz, /metrics, and a page to try them at /");
  add_model_flags(cmd, *o, /*require_checkpoint=*/false);
  cmd->add_option("--model", o->models,
                  "NAME=FILE: serve FILE as model NAME (repeatable; URLs carry NAME: letters, digits, '_', '-', '.')");
  cmd->add_option("--model-dir", o->model_dir,
                  "a model repository: serve every file in DIR (any format vit loads), each named after its stem");
  cmd->add_flag_function(
      "--no-attention", [o](int64_t) { o->server.attention = false; },
      "no POST /v1/attention (the page then shows no attention map): saves the copy of each model's weights its "
      "autograd graph keeps");
  cmd->add_option_function<std::string>(
         "--model-control", [o](const std::string& v) { o->server.repository.control = serve::parse_model_control(v); },
         "none: the models given serve until the end; explicit: POST /v2/repository/models/NAME/load and "
         "/unload (re)load and unload them; poll: files new or changed in --model-dir are loaded as the next "
         "version and swapped in, files removed are unloaded")
      ->default_str("none");
  cmd->add_option("--repository-poll-secs", o->server.repository.poll_secs,
                  "--model-control poll: seconds between looks at the files")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 86400.0));
  cmd->add_flag("--skip-failed-models", o->skip_failed,
                "serve the models that load, with a warning for each that does not (default: refuse to start)");
  serve::ServerOptions& s = o->server;
  cmd->add_option("--host", s.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", s.grpc_port,
                  "also serve the Open Inference Protocol over gRPC (inference.GRPCInferenceService) on this port "
                  "(0: any free port, printed); off when not given")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--max-batch", s.batching.max_batch, "dynamic batching: images per model call (1: no batching)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--max-delay-us", s.batching.max_delay_us,
                  "dynamic batching: how long the oldest request waits for others (microseconds; 0: a batch is "
                  "what queued while the model was busy)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  cmd->add_option("--max-queue", s.batching.max_queue, "requests waiting for the model before answering 429")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd->add_option("--max-body", s.max_body_bytes, "largest request body in bytes (413 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32));
  cmd->add_option("--request-timeout", s.request_timeout,
                  "seconds a whole request may take to arrive (408 beyond), wait for the model (503 beyond) or take "
                  "to be written; also the most a shutdown waits for requests in flight (+1 s)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--http-threads", s.http_threads,
                  "requests handled at once (worker threads; a slow client holds a connection, not a worker)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-connections", s.max_connections, "open connections (one beyond is answered 503)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option_function<int64_t>(
         "--decode-memory", [&s](int64_t mib) { s.decode_memory_bytes = mib << 20; },
         "MiB that image decoding may use at once, counted at each decode's peak (4 bytes per pixel value); an "
         "image that does not fit beside those decoding is answered 503")
      ->default_str(std::to_string(s.decode_memory_bytes >> 20))
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--top-k", s.top_k, "classes answered for an image (?top_k= overrides)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->callback([o] {
    // Sockets are written with MSG_NOSIGNAL; ignoring SIGPIPE as well keeps any other write to a
    // closed peer an error (EPIPE), never the end of the process.
    signal(SIGPIPE, SIG_IGN);
    // Buffers of 4 MiB and more (the sessions' activation arenas, batches) are mapped on their own
    // and returned to the system when freed: a version swapped out leaves no holes in the heap
    // (glibc's threshold otherwise rises with the first such free, up to 32 MiB).
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    // Signals go to one watcher thread (blocked everywhere else, before any thread starts).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // The server owns the weights it loaded: it never reads the checkpoint file again (a deploy
    // that rewrites or truncates it cannot change or crash what is being served).
    const bool live = o->server.repository.control != serve::ModelControl::None;
    o->server.repository.model_dir = o->model_dir;
    const std::vector<serve::ModelSpec> specs = serve::model_specs(o->checkpoint, o->models, o->model_dir, live);
    const serve::LoadModel load = [o](const std::string& file) {
      LoadFlags one = *o;
      one.checkpoint = file;
      return load_predictor(one, infer::Predictor::WeightPages::Own);
    };
    // Under explicit or poll control a model that does not load at the start is reported and tried
    // again later (a request, a changed file), as Triton does.
    std::vector<serve::NamedModel> models =
        serve::load_models(specs, load, o->skip_failed || live,
                           [](const std::string& warning) { std::fprintf(stderr, "%s\n", warning.c_str()); });
    std::vector<std::string> lines;
    for (const serve::NamedModel& m : models) {
      const model::ViTConfig& c = m.model.config();
      lines.push_back(fmt::format("  {}: {} ({}, {} layout, {}x{}, {}) from {}", m.name, c.name,
                                  model::family_name(m.model.loaded().family), m.model.loaded().layout, c.image_size,
                                  c.image_size, infer::precision_name(m.model.precision()), m.file));
    }
    o->server.max_pixels = o->max_pixels;
    serve::Server server(std::move(models), o->server, specs, load);
    const int port = server.bind();
    // An IPv6 address in a URL is bracketed (RFC 3986): http://[::1]:8080
    const std::string& host = o->server.host;
    const std::string url_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    std::printf(
        "vit serve: %zu model%s on http://%s:%d  (max batch %ld, max delay %ld us, queue %ld per model; model control "
        "%s)\n",
        lines.size(), lines.size() == 1 ? "" : "s", url_host.c_str(), port, o->server.batching.max_batch,
        o->server.batching.max_delay_us, o->server.batching.max_queue,
        serve::model_control_name(o->server.repository.control));
    if (server.grpc_port() >= 0) std::printf("vit serve: gRPC on %s:%d\n", url_host.c_str(), server.grpc_port());
    for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    std::atomic<bool> done{false};
    std::atomic<int> received{0};
    std::thread watcher([&] {
      const timespec tick{0, 100'000'000};
      while (!done) {
        const int sig = sigtimedwait(&signals, nullptr, &tick);
        if (sig > 0) {
          received = sig;
          std::printf("vit serve: %s: draining (no new connections; answering the requests in flight)\n",
                      sig == SIGTERM ? "SIGTERM" : "SIGINT");
          std::fflush(stdout);
          server.stop();
          return;
        }
      }
    });
    server.serve();
    done = true;
    watcher.join();
    std::printf("vit serve: stopped after answering %ld requests\n", server.answered());
    std::fflush(stdout);
  });
}

}  // namespace vit::cli
