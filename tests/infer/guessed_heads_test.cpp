// Foreign weights carry no head count and the shapes cannot tell it: the standard widths get
// their standard count, any other width is refused with a request for --heads (it once got
// dim / 64 heads silently: a different model's answers). The count may also come from the
// file's metadata (a "num_heads" entry, as some converters write it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "infer/load_model.h"
#include "io/safetensors.h"
#include "model/layouts/config_from_shapes.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::infer {
namespace {

using ::testing::HasSubstr;

const std::string kTimm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";  // 48 wide, 4 heads

using testing::error_of;

// The widths whose head count is standard load without --heads; any other width is refused
// instead of silently getting dim / 64 heads (the fixtures are 48 wide with 4 heads).
TEST(ForeignCheckpoint, ANonStandardWidthNeedsHeads) {
  EXPECT_EQ(error_of([&] { load_model(kTimm); }),
            fmt::format("[checkpoint] {}: width 48 is not a standard ViT width (192, 384, 768, 1024, 1280); its "
                        "number of attention heads cannot be inferred: pass --heads",
                        kTimm));
  EXPECT_EQ(model::default_num_heads(48), 0);
  EXPECT_EQ(model::default_num_heads(384), 6);
  EXPECT_EQ(model::default_num_heads(1024), 16);
  // The head count stored in the file's metadata (a "num_heads" entry).
  testing::TempDir dir;
  const io::WeightsFile f = io::load_safetensors(kTimm);
  const std::string with_meta = dir.file("timm_heads.safetensors");
  io::save_safetensors(with_meta, f.tensors, {{"num_heads", "4"}});
  EXPECT_EQ(load_model(with_meta).model->config().num_heads, 4);
  io::save_safetensors(with_meta, f.tensors, {{"num_heads", "four"}});
  EXPECT_THAT(error_of([&] { load_model(with_meta); }), HasSubstr("metadata 'num_heads' is 'four', not a positive"));
  LoadOptions heads;
  heads.num_heads = 4;
  EXPECT_EQ(load_model(with_meta, heads).model->config().num_heads, 4);  // --heads wins over the metadata
}

}  // namespace
}  // namespace vit::infer
