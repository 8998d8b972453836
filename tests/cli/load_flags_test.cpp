// The model commands' load flags come from infer's one table (infer/load_options.h), with its
// messages, and each command takes the subset that applies to it.
#include <gtest/gtest.h>

#include "core/parse.h"
#include "infer/load_options.h"
#include "support/run_vit.h"

namespace vit::cli {
namespace {

using testing::vit;

TEST(LoadFlags, PredictTakesEveryLoadOptionOfTheTable) {
  for (const char* command : {"predict", "embed", "serve"}) {
    const testing::CommandResult help = vit(std::string(command) + " --help");
    ASSERT_EQ(help.exit_code, 0) << help.out;
    for (const infer::LoadOption& o : infer::load_option_table()) {
      const std::string flag = flag_of(o.negation.empty() ? o.name : o.negation);
      EXPECT_NE(help.out.find(flag + " "), std::string::npos) << flag << " missing from vit " << command << " --help";
    }
  }
}

TEST(LoadFlags, TheTablesMessagesReachTheCommandLine) {
  testing::expect_error(vit("predict --checkpoint x.safetensors --heads 0 y.png"),
                        "[load] --heads: must be a whole number >= 1, got 0");
  testing::expect_error(vit("quantize --checkpoint x.safetensors --out y.safetensors --eps -1"),
                        "[load] --eps: must be a positive number, got -1");
  testing::expect_error(vit("eval --checkpoint x.safetensors --precision fp16"),
                        "[load] --precision: must be one of fp32, bf16, got 'fp16'");
  // A command takes only the options that apply to it: convert writes a file, never runs it.
  const testing::CommandResult convert = vit("convert a.pth b.safetensors --precision bf16");
  EXPECT_NE(convert.exit_code, 0);
  EXPECT_NE(convert.out.find("--precision"), std::string::npos) << convert.out;
}

}  // namespace
}  // namespace vit::cli
