// A running `vit serve` for the CLI tests (serve_test.cpp, serve_http_test.cpp): started on an
// ephemeral loopback port with the golden timm checkpoint, stopped (SIGKILL if still up) on destruction.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/files.h"
#include "support/run_vit.h"

namespace vit {

inline const std::string kTimm =
    std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";  // 3x32x32, 10 classes, 4 heads

class ServeProcess {
 public:
  ServeProcess(const testing::TempDir& dir, const std::vector<std::string>& flags) : log_(dir.file("serve.log")) {
    // The tests' httplib clients write without MSG_NOSIGNAL: one still sending a body the server
    // already refused (413) and closed must get EPIPE, not end the test (the server ignores it too).
    signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args = {"serve", "--checkpoint", kTimm, "--heads", "4", "--port", "0", "--threads", "2"};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = testing::spawn(args, log_);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const std::regex listening(R"(on http://127\.0\.0\.1:(\d+))");
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string text = testing::read_text(log_);
      if (std::regex_search(text, m, listening)) {
        port_ = std::stoi(m[1]);
        return;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "vit serve did not start: " << testing::read_text(log_);
  }
  ~ServeProcess() {
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  // The gRPC port it printed (started with --grpc-port), or -1.
  int grpc_port() const {
    std::smatch m;
    const std::string text = testing::read_text(log_);
    return std::regex_search(text, m, std::regex(R"(gRPC on 127\.0\.0\.1:(\d+))")) ? std::stoi(m[1]) : -1;
  }
  pid_t pid() const { return pid_; }
  std::string log() const { return testing::read_text(log_); }
  // SIGTERM, then the exit code; -1 (and SIGKILL) when it is still up after `seconds`.
  int terminate_and_wait(double seconds = 120.0) {
    kill(pid_, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;  // the destructor kills it
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace vit
