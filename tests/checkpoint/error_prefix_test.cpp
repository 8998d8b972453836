// An error met inside a step that adds "[checkpoint] FILE: " names the file once: it once read
// "[checkpoint] F: [checkpoint] F: negative epoch/step/batch in its metadata" (a check inside the
// wrapper that prefixed every error it caught).
#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "infer/load_model.h"
#include "support/files.h"
#include "support/tiny_checkpoint.h"

namespace vit::checkpoint {
namespace {

using infer::load_model;

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(CheckpointErrors, NameTheFileOnce) {
  testing::TempDir dir;
  const std::string file = dir.file("tiny.safetensors");
  const std::vector<std::function<void(nlohmann::json&)>> edits = {
      [](nlohmann::json& m) { m["epoch"] = "-1"; },
      [](nlohmann::json& m) { m.erase("train_config"); },
      [](nlohmann::json& m) { m["model_config"] = R"({"dim": 30})"; },
      [](nlohmann::json& m) { m["class_names"] = "[1, 2]"; },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    testing::write_tiny_checkpoint(file);
    testing::edit_metadata(file, edits[i]);
    for (const bool through_load_model : {false, true}) {
      std::string e = "(no error)";
      try {
        if (through_load_model) {
          load_model(file);
        } else {
          load_checkpoint(file);
        }
      } catch (const Error& error) {
        e = error.what();
      }
      EXPECT_EQ(e.rfind("[checkpoint] " + file + ": ", 0), 0u) << "edit " << i << ": " << e;
      EXPECT_EQ(count_of(e, "[checkpoint]"), 1u) << "edit " << i << ": " << e;
      EXPECT_EQ(count_of(e, file), 1u) << "edit " << i << ": " << e;
    }
  }
}

}  // namespace
}  // namespace vit::checkpoint
