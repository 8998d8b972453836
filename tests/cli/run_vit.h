// Runs the `vit` binary as a user would (a shell command line) for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

namespace vit::testing {

struct CommandResult {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// `env` is prepended to the command line (e.g. "VIT_MEMORY_LIMIT=1000000").
inline CommandResult vit(const std::string& args, const std::string& env = "") {
  const std::string command = (env.empty() ? "" : env + " ") + std::string(VIT_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buffer{};
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) out.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// One line "error: ..." and a non-zero exit.
inline void expect_error(const CommandResult& r, const std::string& message) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("error: " + message), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

}  // namespace vit::testing
