// Files a hostile user hands vit in place of a model, as the commands meet them: a FIFO is
// refused at once (never waited on), and names inside a file reach the terminal escaped.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/torch_files.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

const std::string kTimm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";

TEST(HostileFilesCli, AFifoIsRefusedWithoutWaiting) {
  TempDir dir;
  const std::string fifo = dir.file("model.pth");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // `timeout` ends a command that waits for a writer (exit 124, and no "error:" line).
  expect_error(vit("info --checkpoint " + fifo, "timeout 30"),
               "[file] " + fifo + ": not a regular file (a FIFO (named pipe))");
  expect_error(vit("convert " + fifo + " " + dir.file("out.safetensors"), "timeout 30"),
               "[file] " + fifo + ": not a regular file (a FIFO (named pipe))");
  expect_error(vit("predict --checkpoint " + kTimm + " --heads 4 --tensor " + fifo, "timeout 30"),
               "[npy] " + fifo + ": not a regular file (a FIFO (named pipe))");
  expect_error(vit("info --checkpoint " + dir.file("missing.pth")),
               "[file] " + dir.file("missing.pth") + ": cannot open (No such file or directory)");
}

TEST(HostileFilesCli, NamesFromAFileReachTheTerminalEscaped) {
  TempDir dir;
  // A pickle naming a global (STACK_GLOBAL, protocol 4) with a terminal escape and a line break
  // in it, then a line that looks like vit's own.
  testing::PickleBytes p;
  p.op('\x80').op('\x04').str("posix\x1b[2J\r\nerror: all is well").str("system").op('\x93').stop();
  const std::string pth = testing::zip_bytes(testing::torch_members(p.b, {}));
  testing::write_bytes(dir.file("evil.pth"), std::vector<uint8_t>(pth.begin(), pth.end()));
  const CommandResult r = vit("info --checkpoint " + dir.file("evil.pth"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("global 'posix\\x1B[2J\\x0D\\x0Aerror: all is well.system' is refused"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // A tensor key with an escape, in a file of timm weights: `vit info` refuses the unexpected key, escaped.
  io::NamedTensors tensors = io::load_safetensors(kTimm).tensors;
  tensors.emplace_back("blocks.0.\x1b]0;pwned\x07", Tensor::zeros({1}));
  io::save_safetensors(dir.file("key.safetensors"), tensors);
  const CommandResult k = vit("info --heads 4 --checkpoint " + dir.file("key.safetensors"));
  EXPECT_NE(k.exit_code, 0);
  EXPECT_NE(k.out.find("blocks.0.\\x1B]0;pwned\\x07"), std::string::npos) << k.out;
  EXPECT_EQ(k.out.find('\x1b'), std::string::npos) << k.out;
}

}  // namespace
}  // namespace vit
