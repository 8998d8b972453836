// The listening socket of `vit serve`'s HTTP server (see serve/http/event_loop.h).
#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "serve/http/event_loop.h"

namespace vit::serve::http {

void raise_descriptor_limit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

int listen_socket(const std::string& host, int& port) {
  int listening = -1;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string where = port == 0 ? host + " (any port)" : fmt::format("{}:{}", host, port);
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  VIT_CHECK(rc == 0, "serve", "cannot listen on {} ({})", where, gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && listening < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR (a quick restart) but not SO_REUSEPORT (a second server sharing a busy port).
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
      listening = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  VIT_CHECK(listening >= 0, "serve", "cannot listen on {} ({}: in use, or not an address of this machine)", where, why);
  sockaddr_storage bound{};
  socklen_t size = sizeof(bound);
  getsockname(listening, reinterpret_cast<sockaddr*>(&bound), &size);
  port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return listening;
}

}  // namespace vit::serve::http
