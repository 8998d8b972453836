// `vit serve`: a checkpoint behind HTTP with dynamic batching (serve/server.h). SIGTERM or
// SIGINT drains: no new connections, the requests in flight answered (for at most
// --request-timeout + 1 s; what is still open then is closed), then exit 0.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/validators.h"
#include "serve/server.h"

namespace vit::cli {

void add_serve_command(CLI::App& app) {
  struct Options : ModelOptions {
    serve::ServerOptions server;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "serve a model over HTTP: POST /v1/predict, POST /v1/embed, GET /healthz, GET /metrics");
  add_model_options(cmd, *o);
  serve::ServerOptions& s = o->server;
  cmd->add_option("--host", s.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port, printed)")
      ->capture_default_str()
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
    // Signals go to one watcher thread (blocked everywhere else, before any thread starts).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // The server owns the weights it loaded: it never reads the checkpoint file again (a deploy that
    // rewrites or truncates it cannot change or crash what is being served).
    infer::Predictor m = load_predictor(*o, infer::Predictor::WeightPages::Own);
    const model::ViTConfig c = m.config();
    const std::string family = m.loaded().family, layout = m.loaded().layout;
    o->server.max_pixels = o->max_pixels;
    serve::Server server(std::move(m), o->server);
    const int port = server.bind();
    // An IPv6 address in a URL is bracketed (RFC 3986): http://[::1]:8080
    const std::string& host = o->server.host;
    const std::string url_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    std::printf(
        "vit serve: %s (%s, %s layout, %ldx%ld, %s) on http://%s:%d  (max batch %ld, max delay %ld us, queue %ld)\n",
        c.name.c_str(), family.c_str(), layout.c_str(), c.image_size, c.image_size, o->precision.c_str(),
        url_host.c_str(), port, o->server.batching.max_batch, o->server.batching.max_delay_us,
        o->server.batching.max_queue);
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
