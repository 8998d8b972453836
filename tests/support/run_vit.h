// Runs the `vit` binary as a user would (a shell command line) for the CLI tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace vit::testing {

struct CommandResult {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// A shell command line, its stdout and stderr together (add " 2>&1" to the command for stderr).
inline CommandResult run_shell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buffer{};
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) out.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `env` is prepended to the command line (e.g. "VIT_MEMORY_LIMIT=1000000").
inline CommandResult vit(const std::string& args, const std::string& env = "") {
  return run_shell((env.empty() ? "" : env + " ") + std::string(VIT_BINARY) + " " + args + " 2>&1");
}

// One line "error: ..." and a non-zero exit.
inline void expect_error(const CommandResult& r, const std::string& message) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("error: " + message), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

// Starts `vit args...` in the background with stdout+stderr into log; returns the pid.
// file_limit_bytes > 0 sets RLIMIT_FSIZE in the child (writes past it fail with EFBIG, like a
// full disk).
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log, rlim_t file_limit_bytes = 0) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (file_limit_bytes > 0) {
      const rlimit limit{file_limit_bytes, file_limit_bytes};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(VIT_BINARY));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(VIT_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// Exit code, or 128 + signal number when killed by a signal (as a shell reports it).
inline int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A whole text file ("" when missing).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace vit::testing
