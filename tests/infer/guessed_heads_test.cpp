// Foreign weights carry no head count and the shapes cannot tell it: the standard widths get
// their standard count, any other width is refused with a request for --heads (it once got
// dim / 64 heads silently: a different model's answers). The count may also come from the
// file's metadata (a "num_heads" entry, as some converters write it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
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
  LoadSettings heads;
  heads.num_heads = 4;
  // A damaged record is refused even with --heads given (it was once skipped silently).
  EXPECT_THAT(error_of([&] { load_model(with_meta, heads); }), HasSubstr("metadata 'num_heads' is 'four'"));
}

// --heads may not contradict a head count the file records: a vit checkpoint's config, a foreign
// file's "num_heads" metadata. It once re-headed such files silently (other answers, exit 0).
TEST(ForeignCheckpoint, HeadsThatContradictTheFileAreRefused) {
  testing::TempDir dir;
  const io::WeightsFile f = io::load_safetensors(kTimm);
  const std::string with_meta = dir.file("timm_heads.safetensors");
  io::save_safetensors(with_meta, f.tensors, {{"num_heads", "4"}});
  LoadSettings two, four;
  two.num_heads = 2;
  four.num_heads = 4;
  EXPECT_EQ(error_of([&] { load_model(with_meta, two); }),
            fmt::format("[load] {}: the file records 4 attention heads; --heads 2 contradicts it (give it only for "
                        "files that record none (a timm/torchvision/Hugging Face file of a non-standard width); vit "
                        "convert --heads N records it in a copy)",
                        with_meta));
  EXPECT_EQ(load_model(with_meta, four).model->config().num_heads, 4);  // agreeing changes nothing
  // Our own checkpoints record their whole config: heads, eps and activation.
  const LoadedModel m = load_model(kTimm, four);
  const std::string ours = dir.file("ours.safetensors");
  checkpoint::save_checkpoint(ours, *m.model, checkpoint_info(m));
  EXPECT_THAT(error_of([&] { load_model(ours, two); }), HasSubstr("the file records 4 attention heads; --heads 2"));
  EXPECT_EQ(load_model(ours, four).model->config().num_heads, 4);
  LoadSettings eps;
  eps.eps = 1e-5;
  EXPECT_THAT(error_of([&] { load_model(ours, eps); }), HasSubstr("records LayerNorm eps 1e-06; --eps 1e-05"));
  LoadSettings act;
  act.act = "relu";
  EXPECT_THAT(error_of([&] { load_model(ours, act); }), HasSubstr("records the activation gelu; --act relu"));
}

}  // namespace
}  // namespace vit::infer
