// The teacher of DeiT's distillation (train/distillation.h): its classes are the student's by
// name, never by position (reordered, or refused naming the classes it lacks), and a teacher of
// non-standard width loads with its own head count (--teacher-heads).
#include "train/distillation.h"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "infer/inference.h"
#include "support/files.h"

namespace vit::train {
namespace {

model::ViTConfig tiny(int64_t classes, int64_t dim = 16, int64_t heads = 2) {
  model::ViTConfig c = model::preset("vit_digits");
  c.patch_size = 7;
  c.dim = dim;
  c.depth = 1;
  c.num_heads = heads;
  c.num_classes = classes;
  c.drop_path = 0.0;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string save_teacher(const testing::TempDir& dir, const model::ViTConfig& c, std::vector<std::string> names) {
  model::VisionTransformer m(c, std::make_shared<Generator>(3));
  checkpoint::CheckpointInfo info;
  info.model = c;
  info.normalization = {{0.1}, {0.3}};
  info.class_names = std::move(names);
  const std::string path = dir.file("teacher.safetensors");
  checkpoint::save_checkpoint(path, m, info);
  return path;
}

TEST(Teacher, ClassesMatchByNameNeverByPosition) {
  testing::TempDir dir;
  const std::string path = save_teacher(dir, tiny(3), {"bird", "cat", "dog"});
  model::ViTConfig student = tiny(3);
  student.pool = "cls";
  student.dist_token = true;
  // The same names in another order: the teacher's logits come in the student's order.
  Teacher teacher(path, student, {"dog", "bird", "cat"});
  EXPECT_EQ(teacher.columns(), (std::vector<int64_t>{2, 0, 1}));
  const Tensor x = Tensor::ones({2, 1, 28, 28});
  const Tensor mine = teacher.logits(x);  // (2, 3)
  model::VisionTransformer same(tiny(3), std::make_shared<Generator>(3));
  infer::InferenceSession session(same);
  const Tensor theirs = session.forward(x);  // (2, 3) in the teacher's order
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_FLOAT_EQ(mine.at({b, 0}), theirs.at({b, 2}));
    EXPECT_FLOAT_EQ(mine.at({b, 1}), theirs.at({b, 0}));
    EXPECT_FLOAT_EQ(mine.at({b, 2}), theirs.at({b, 1}));
  }
  // As many classes, other names: refused, naming them (it used to be taken by position).
  const std::string e = error_of([&] { Teacher(path, student, {"bird", "cow", "dog"}); });
  EXPECT_NE(e.find("[train] --teacher " + path + ": the teacher does not predict the student's class 'cow'"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("the teacher's classes are [bird, cat, dog]"), std::string::npos) << e;
  // A teacher of more classes, the student's among them: its logits of those.
  model::ViTConfig two = student;
  two.num_classes = 2;
  Teacher cut(path, two, {"cat", "bird"});
  EXPECT_EQ(cut.columns(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(cut.logits(x).shape(), (Shape{2, 2}));
}

TEST(Teacher, NonStandardWidthLoadsWithTeacherHeads) {
  testing::TempDir dir;
  const model::ViTConfig wide = tiny(3, 24, 3);  // width 24: no standard head count
  model::VisionTransformer m(wide, std::make_shared<Generator>(3));
  // A foreign (timm-named) file: no metadata says its heads.
  io::save_safetensors(dir.file("timm.safetensors"), m.state_dict());
  model::ViTConfig student = tiny(3);
  student.pool = "cls";
  student.dist_token = true;
  const std::string e = error_of([&] { Teacher(dir.file("timm.safetensors"), student, {"0", "1", "2"}); });
  EXPECT_NE(e.find("--teacher-heads"), std::string::npos) << e;
  EXPECT_EQ(e.find("--heads"), std::string::npos) << e;  // the student's flag: not the one to give
  Teacher teacher(dir.file("timm.safetensors"), student, {"0", "1", "2"}, /*heads=*/3);
  EXPECT_EQ(teacher.loaded().model->config().num_heads, 3);
}

}  // namespace
}  // namespace vit::train
