// The transport under `vit serve`: an HTTP/1.1 event loop. One thread (epoll) does all socket
// work, a bounded pool of worker threads runs the handler (serve/router.h dispatches it). Only whole requests reach a
// worker, so a client that sends slowly holds a connection slot, never a worker.
//   - Deadlines: a request (head and body) must arrive within request_timeout of its first byte
//     (408 and close beyond), an answer must be written within request_timeout, and a keep-alive
//     connection idle for request_timeout is closed.
//   - Capacity: at most max_connections open connections; one beyond is answered 503 and closed.
//   - Pipelining: requests on one connection are answered one at a time, in order (the next is
//     parsed after the previous answer is written). A client that half-closes (shutdown(SHUT_WR))
//     after sending still gets its answers, then the connection is closed.
//   - Framing: serve/http/message.h (RFC 9112); a refused request is answered and its connection
//     closed after reading (and dropping) at most 16 MiB more for up to 5 s, so a client that
//     sends its whole body before reading gets the answer instead of a reset.
//   - stop(): the listening socket is closed, idle connections are closed, requests in progress
//     may finish until request_timeout + 1 s after stop(); then whatever is left is closed and
//     serve() returns (after the workers finish their handlers).
// Handlers that are cheap (health, metrics) can run on the event loop itself (`quick`), so
// they answer even when every worker waits for the model.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "serve/http/message.h"

namespace vit::serve::http {

struct EventLoopOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  int workers = 64;
  int max_connections = 1024;
  // Request bodies held at once, being read or with their handlers (503 beyond).
  uint64_t max_buffered_body_bytes = uint64_t{4} << 30;
  double request_timeout = 30.0;  // seconds
  Limits limits;
};

using Handler = std::function<Response(const Request&)>;

class EventLoop {
 public:
  // `quick(request)`: run handle on the event loop instead of a worker.
  EventLoop(EventLoopOptions options, Handler handle, std::function<bool(const Request&)> quick);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  // Binds and listens; returns the port. Throws "[serve] cannot listen on HOST:PORT ...".
  int bind();
  // Runs the event loop until stop() and the drain finish.
  void serve();
  // From any thread: begin the drain.
  void stop();
  bool stopping() const { return stopping_.load(); }

 private:
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::atomic<bool> stopping_{false};
};

// A listening socket on host:port (non-blocking; SO_REUSEADDR, not SO_REUSEPORT; backlog
// SOMAXCONN); port 0 picks a free one, and `port` is set to the bound port. Throws
// "[serve] cannot listen on HOST:PORT (...)".
int listen_socket(const std::string& host, int& port);
// Raises the soft limit of open descriptors to the hard one: room for every connection (the soft
// limit is often 1024).
void raise_descriptor_limit();

}  // namespace vit::serve::http
