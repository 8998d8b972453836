// `vit serve`'s HTTP/1.1 server: epoll event loop, per-connection state with deadlines, a
// bounded worker pool (see serve/http/event_loop.h).
#include "serve/http/event_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/check.h"

namespace vit::serve::http {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kLingerBytes = size_t{16} << 20;  // dropped after a refused request, at most
constexpr auto kLingerTime = std::chrono::seconds(5);
constexpr size_t kReadCap = size_t{1} << 20;  // bytes buffered ahead of the parser
constexpr uint64_t kListenId = 0, kWakeId = 1;

enum class Phase { Head, Body, Busy, Write, Linger };

struct Connection {
  int fd = -1;
  uint64_t id = 0;
  Phase phase = Phase::Head;
  std::string in, out;
  size_t written = 0;
  Clock::time_point deadline;
  Head head;  // the request being read
  ChunkedDecoder chunks;
  uint64_t lingered = 0;
  uint64_t reserved = 0;  // body bytes counted against max_buffered_body_bytes
  uint32_t events = 0;
  bool registered = false, dead = false;
  bool peer_closed = false;  // read() gave 0: the client sends no more (it may still read)
  bool close_after = false, linger_after = false, head_only = false;
};

struct Finished {
  uint64_t id;
  Response response;
};

}  // namespace

struct EventLoop::Loop {
  EventLoopOptions options;
  Handler handle;
  std::function<bool(const Request&)> quick;
  std::atomic<bool>* stopping = nullptr;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections;
  uint64_t next_id = 2;
  std::vector<uint64_t> ready;  // connections whose buffered bytes wait to be parsed
  bool draining = false;
  uint64_t buffered = 0;  // body bytes reserved by all connections
  Clock::duration timeout{};
  Clock::time_point accept_paused_until{};
  // The worker pool: whole requests in, answers out (then the loop is woken through wake_fd).
  std::mutex mutex;
  std::condition_variable work_ready;
  std::deque<std::pair<uint64_t, Request>> jobs;
  std::vector<Finished> finished;
  bool quit = false;
  std::vector<std::thread> workers;

  ~Loop() {
    stop_workers();
    for (auto& [id, c] : connections) ::close(c->fd);
    for (const int fd : {listen_fd, epoll_fd, wake_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  Response safe_handle(const Request& request) {
    try {
      return handle(request);
    } catch (const std::exception& e) {
      return error_response(500, fmt::format("[serve] {}", e.what()));
    }
  }

  void work() {
    std::unique_lock lock(mutex);
    for (;;) {
      work_ready.wait(lock, [this] { return quit || !jobs.empty(); });
      if (quit) return;
      auto [id, request] = std::move(jobs.front());
      jobs.pop_front();
      lock.unlock();
      Response response = safe_handle(request);
      lock.lock();
      finished.push_back({id, std::move(response)});
      wake();
    }
  }
  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof(one));
  }
  void stop_workers() {
    {
      std::lock_guard lock(mutex);
      quit = true;
      jobs.clear();
    }
    work_ready.notify_all();
    for (auto& t : workers) t.join();
    workers.clear();
  }

  void watch(Connection& c, uint32_t events) {
    if (c.registered && c.events == events) return;
    epoll_event e{};
    e.events = events;
    e.data.u64 = c.id;
    epoll_ctl(epoll_fd, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &e);
    c.registered = true;
    c.events = events;
  }
  // Request bodies held at once (being read, or with their handler) are bounded.
  bool reserve(Connection& c, uint64_t bytes) {
    if (buffered + bytes > options.max_buffered_body_bytes) return false;
    buffered += bytes;
    c.reserved += bytes;
    return true;
  }
  void release(Connection& c) {
    buffered -= c.reserved;
    c.reserved = 0;
  }
  void refuse_busy(Connection& c) {
    refuse(c, 503,
           fmt::format("the server holds {} MiB of request bodies (--http-threads x --max-body); retry",
                       options.max_buffered_body_bytes >> 20));
  }

  void close(Connection& c) {
    if (c.dead) return;
    release(c);
    if (c.registered) epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    c.dead = true;
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: the backlog waits; accepting resumes in 100 ms.
          epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      if (connections.size() >= static_cast<size_t>(options.max_connections)) {
        const std::string busy = serialize(
            error_response(503, fmt::format("the server has {} connections open (--max-connections); retry later",
                                            options.max_connections)),
            false, false);
        [[maybe_unused]] const ssize_t n = send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->id = next_id++;
      c->deadline = Clock::now() + timeout;
      watch(*c, EPOLLIN | EPOLLRDHUP);
      connections.emplace(c->id, std::move(c));
    }
  }

  void respond(Connection& c, const Response& response) {
    release(c);  // the request's body is gone with its handler
    if (draining) c.close_after = true;
    c.out = serialize(response, !c.close_after, c.head_only);
    c.written = 0;
    c.phase = Phase::Write;
    c.deadline = Clock::now() + timeout;
    write(c);
  }
  // Answers and closes (after lingering unless `linger` is false).
  void refuse(Connection& c, int status, const std::string& message, bool linger = true) {
    c.close_after = true;
    c.linger_after = linger;
    c.head_only = false;
    respond(c, error_response(status, message));
  }

  void write(Connection& c) {
    while (c.written < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
      if (n > 0) {
        c.written += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c, EPOLLOUT);
        return;
      } else {
        close(c);
        return;
      }
    }
    std::string().swap(c.out);
    if (c.close_after) {
      if (c.linger_after && !c.peer_closed) {  // read (and drop) what the client still sends
        shutdown(c.fd, SHUT_WR);
        c.phase = Phase::Linger;
        c.deadline = std::min(c.deadline, Clock::now() + kLingerTime);
        watch(c, EPOLLIN | EPOLLRDHUP);
      } else {
        close(c);
      }
      return;
    }
    c.phase = Phase::Head;
    c.deadline = Clock::now() + timeout;
    watch(c, EPOLLIN | EPOLLRDHUP);
    // A pipelined request may already be buffered: parsed from the loop (not from here, which
    // would recurse once per pipelined request).
    if (!c.in.empty() || c.peer_closed) ready.push_back(c.id);
  }

  void read(Connection& c) {
    char buffer[65536];
    while (c.in.size() < kReadCap) {
      const ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        if (c.phase == Phase::Linger) {
          c.lingered += static_cast<uint64_t>(n);
          if (c.lingered > kLingerBytes) return close(c);
          continue;
        }
        if (c.phase == Phase::Head && c.in.empty()) c.deadline = Clock::now() + timeout;  // a request begins
        c.in.append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        c.peer_closed = true;
        if (c.phase == Phase::Linger) return close(c);
        break;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else {
        return close(c);
      }
    }
    if (c.phase != Phase::Linger) advance(c);
    // A parser that holds a full read buffer it cannot use would be woken for ever by the
    // readable socket (the head and chunk limits keep this from happening; this keeps it so).
    if (!c.dead && (c.phase == Phase::Head || c.phase == Phase::Body) && c.in.size() >= kReadCap) {
      refuse(c, 400, "the request cannot be parsed within the server's read buffer");
    }
  }

  // Parses what is buffered: the head, then the body; a whole request goes to a handler.
  void advance(Connection& c) {
    if (c.phase == Phase::Head) {
      if (c.in.empty()) {
        if (c.peer_closed || draining) close(c);
        return;
      }
      Head head = parse_head(c.in, options.limits);
      if (head.state == Head::State::Incomplete) {
        if (c.peer_closed) refuse(c, 400, "the connection was closed before the request head was complete", false);
        return;
      }
      if (head.state == Head::State::Error) return refuse(c, head.status, head.error);
      c.in.erase(0, head.bytes);
      c.head = std::move(head);
      c.chunks = ChunkedDecoder();
      if (!c.head.chunked && static_cast<uint64_t>(c.head.content_length) > options.limits.max_body_bytes) {
        return refuse(c, 413,
                      fmt::format("the request body ({} bytes) is larger than the server's limit of {} bytes "
                                  "(--max-body)",
                                  c.head.content_length, options.limits.max_body_bytes));
      }
      if (c.head.expect_continue && c.in.empty() && (c.head.chunked || c.head.content_length > 0)) {
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] const ssize_t n = send(c.fd, kContinue, sizeof(kContinue) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      c.phase = Phase::Body;
    }
    if (c.phase != Phase::Body) return;
    Request& request = c.head.request;
    if (c.head.chunked) {
      const ChunkedDecoder::State state = c.chunks.feed(c.in, request.body, options.limits.max_body_bytes);
      if (state == ChunkedDecoder::State::Error) return refuse(c, c.chunks.status(), c.chunks.error());
      if (request.body.size() > c.reserved && !reserve(c, request.body.size() - c.reserved)) return refuse_busy(c);
      if (state == ChunkedDecoder::State::More) {
        if (c.peer_closed) refuse(c, 400, "the connection was closed before the chunked body was complete", false);
        return;
      }
    } else {
      const size_t want = static_cast<size_t>(c.head.content_length) - request.body.size();
      const size_t take = std::min(want, c.in.size());
      if (request.body.empty() && take == static_cast<size_t>(c.head.content_length)) {
        request.body.reserve(take);
      }
      request.body.append(c.in, 0, take);
      c.in.erase(0, take);
      // Bodies are counted as their bytes arrive, not by their declared length: a client that
      // sends only headers holds nothing of the budget.
      if (request.body.size() > c.reserved && !reserve(c, request.body.size() - c.reserved)) return refuse_busy(c);
      if (request.body.size() < static_cast<size_t>(c.head.content_length)) {
        if (c.peer_closed) refuse(c, 400, "the connection was closed before the body was complete", false);
        return;
      }
    }
    dispatch(c);
  }

  void dispatch(Connection& c) {
    Request request = std::move(c.head.request);
    c.close_after = !request.keep_alive || draining;
    c.linger_after = false;
    c.head_only = request.method == "HEAD";
    c.phase = Phase::Busy;
    watch(c, 0);  // pipelined bytes wait in the socket until this answer is written
    if (quick && quick(request)) return respond(c, safe_handle(request));
    {
      std::lock_guard lock(mutex);
      jobs.emplace_back(c.id, std::move(request));
    }
    work_ready.notify_one();
  }

  void on_event(uint64_t id, uint32_t events) {
    const auto it = connections.find(id);
    if (it == connections.end() || it->second->dead) return;
    Connection& c = *it->second;
    if (c.phase == Phase::Busy) {  // only errors and hang-ups arrive while a handler runs
      epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
      c.registered = false;
      c.peer_closed = true;
      c.close_after = true;
      return;
    }
    if ((events & EPOLLERR) != 0) return close(c);
    if (c.phase == Phase::Write) return write(c);
    read(c);
  }

  void take_finished() {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd, &count, sizeof(count));
    std::vector<Finished> done;
    {
      std::lock_guard lock(mutex);
      done.swap(finished);
    }
    for (Finished& f : done) {
      const auto it = connections.find(f.id);
      if (it == connections.end() || it->second->dead) continue;
      Connection& c = *it->second;
      if (!c.registered && c.peer_closed) {  // hung up while its handler ran
        close(c);
        continue;
      }
      respond(c, f.response);
    }
  }

  // Deadlines: a request late (408), an answer not taken, a connection idle or lingering.
  void sweep(Clock::time_point now) {
    for (auto& [id, p] : connections) {
      Connection& c = *p;
      if (c.dead) continue;
      if (draining && c.phase == Phase::Head && c.in.empty()) {
        close(c);
        continue;
      }
      if (now < c.deadline || c.phase == Phase::Busy) continue;
      if ((c.phase == Phase::Head && !c.in.empty()) || c.phase == Phase::Body) {
        refuse(c, 408,
               fmt::format("the request did not arrive within {} s (--request-timeout)",
                           std::chrono::duration<double>(timeout).count()),
               false);
      } else {
        close(c);
      }
    }
  }

  void run() {
    for (int i = 0; i < options.workers; ++i) workers.emplace_back([this] { work(); });
    std::vector<epoll_event> events(256);
    Clock::time_point drain_end{}, last_sweep = Clock::now();
    for (;;) {
      const auto now = Clock::now();
      if (!draining && stopping->load()) {
        draining = true;
        drain_end = now + timeout + std::chrono::seconds(1);
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        ::close(listen_fd);
        listen_fd = -1;
        sweep(now);
      }
      if (draining && (connections.empty() || now >= drain_end)) break;
      if (!draining && accept_paused_until != Clock::time_point{} && now >= accept_paused_until) {
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u64 = kListenId;
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &e);
        accept_paused_until = {};
      }
      const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 50);
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kListenId) {
          if (!draining) accept_all();
        } else if (id == kWakeId) {
          take_finished();
        } else {
          on_event(id, events[i].events);
        }
      }
      while (!ready.empty()) {
        const uint64_t id = ready.back();
        ready.pop_back();
        const auto it = connections.find(id);
        if (it != connections.end() && !it->second->dead && it->second->phase == Phase::Head) advance(*it->second);
      }
      if (Clock::now() - last_sweep >= std::chrono::milliseconds(50)) {
        last_sweep = Clock::now();
        sweep(last_sweep);
      }
      std::erase_if(connections, [](const auto& entry) { return entry.second->dead; });
    }
    for (auto& [id, c] : connections) close(*c);  // the drain's time is up
    connections.clear();
    stop_workers();
  }
};

EventLoop::EventLoop(EventLoopOptions options, Handler handle, std::function<bool(const Request&)> quick)
    : loop_(std::make_unique<Loop>()) {
  VIT_CHECK(options.workers >= 1, "serve", "--http-threads must be >= 1, got {}", options.workers);
  VIT_CHECK(options.max_connections >= 1, "serve", "--max-connections must be >= 1, got {}", options.max_connections);
  loop_->options = std::move(options);
  loop_->handle = std::move(handle);
  loop_->quick = std::move(quick);
  loop_->stopping = &stopping_;
  loop_->timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(loop_->options.request_timeout));
  loop_->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  loop_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  VIT_CHECK(loop_->epoll_fd >= 0 && loop_->wake_fd >= 0, "serve", "cannot create the event loop: {}",
            std::strerror(errno));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kWakeId;
  epoll_ctl(loop_->epoll_fd, EPOLL_CTL_ADD, loop_->wake_fd, &e);
}

EventLoop::~EventLoop() = default;

int EventLoop::bind() {
  Loop& l = *loop_;
  raise_descriptor_limit();
  int port = l.options.port;
  l.listen_fd = listen_socket(l.options.host, port);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenId;
  epoll_ctl(l.epoll_fd, EPOLL_CTL_ADD, l.listen_fd, &e);
  return port;
}

void EventLoop::serve() {
  VIT_CHECK(loop_->listen_fd >= 0 || stopping_, "serve", "serve() before bind()");
  if (loop_->listen_fd >= 0) loop_->run();
}

void EventLoop::stop() {
  stopping_ = true;
  loop_->wake();
}

}  // namespace vit::serve::http
