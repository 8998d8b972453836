// The io writers (.npy, safetensors) write through the one rule for written files
// (core/output_file.h): whole files or nothing, Existing::Refuse keeps what is there, and every
// error names the file asked for, never the temporary file ("embed --out DIR" once said "cannot
// rename into place"; a full disk named "last.safetensors.tmp.<pid>.<n>").
#include <gtest/gtest.h>

#include <filesystem>

#include "io/npy.h"
#include "io/safetensors.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::io {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

TEST(WrittenFiles, NpyIntoADirectoryOrAMissingFolderNamesThePath) {
  testing::TempDir dir;
  EXPECT_EQ(error_of([&] { save_npy(dir.path(), Tensor::ones({2})); }), "[npy] " + dir.path() + ": is a directory");
  const std::string missing = dir.file("no/x.npy");
  EXPECT_EQ(error_of([&] { save_npy(missing, Tensor::ones({2})); }),
            "[npy] " + missing + ": cannot write (No such file or directory)");
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(WrittenFiles, NpyReplacesByDefaultAndRefusesWhenAsked) {
  testing::TempDir dir;
  const std::string file = dir.file("x.npy");
  save_npy(file, Tensor::ones({2}));
  save_npy(file, Tensor::zeros({3}));  // the library call replaces (vit::save_npy, Python)
  EXPECT_EQ(load_npy(file).shape(), (Shape{3}));
  EXPECT_EQ(error_of([&] { save_npy(file, Tensor::ones({4}), Existing::Refuse); }),
            "[npy] " + file + ": exists (written meanwhile by someone else; nothing replaced)");
  EXPECT_EQ(load_npy(file).shape(), (Shape{3}));
  save_npy(dir.file("y.npy"), Tensor::ones({4}), Existing::Refuse);
  EXPECT_EQ(load_npy(dir.file("y.npy")).shape(), (Shape{4}));
  // No temporary file left, no fixed "x.npy.tmp" name shared by two writers.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"x.npy", "y.npy"}));
}

TEST(WrittenFiles, SafetensorsErrorsNameTheFileNotTheTemporary) {
  testing::TempDir dir;
  const std::string missing = dir.file("no/model.safetensors");
  EXPECT_EQ(error_of([&] {
              save_safetensors(missing, {{"a", Tensor::ones({2})}});
            }),
            "[safetensors] " + missing + ": cannot write (No such file or directory)");
  EXPECT_EQ(error_of([&] {
              save_safetensors(dir.path(), {{"a", Tensor::ones({2})}});
            }),
            "[safetensors] " + dir.path() + ": is a directory");
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace vit::io
