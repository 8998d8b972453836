// The files commands write (issue 29, data loss): `vit embed`, `vit predict --out`, `vit attention`
// and `vit quantize` refuse an existing --out without --overwrite (the file left unchanged), refuse
// their own inputs (the checkpoint, --tensor, an image; through a symlink or a hard link too, and
// with --overwrite), refuse a directory and a folder they cannot write in naming --out's path, and
// leave no temporary file behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/image.h"
#include "io/npy.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tiny_checkpoint.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_error;
using testing::read_bytes;
using testing::vit;

class OutputFilesCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::write_tiny_checkpoint(ck());
    io::save_npy(input(), Tensor::zeros({2, 1, 28, 28}));
    data::Image digit{1, 28, 28, std::vector<uint8_t>(784, 0)};
    for (int y = 5; y < 23; ++y) digit.pixels[y * 28 + 14] = 255;
    data::write_png(image(), digit);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string ck() { return dir_->file("ck.safetensors"); }
  static std::string input() { return dir_->file("input.npy"); }
  static std::string image() { return dir_->file("digit.png"); }
  // Each command's line with --out OUT (and flags).
  static CommandResult embed(const std::string& out, const std::string& flags = "") {
    return vit("embed --checkpoint " + ck() + " --threads 1 --tensor " + input() + " --out " + out + flags);
  }
  static CommandResult embed_image(const std::string& out, const std::string& flags = "") {
    return vit("embed --checkpoint " + ck() + " --threads 1 " + image() + " --out " + out + flags);
  }
  static CommandResult predict(const std::string& out, const std::string& flags = "") {
    return vit("predict --checkpoint " + ck() + " --threads 1 --tensor " + input() + " --out " + out + flags);
  }
  static CommandResult attention(const std::string& out, const std::string& flags = "") {
    return vit("attention --checkpoint " + ck() + " --threads 1 --size 32 " + image() + " --out " + out + flags);
  }
  // A fresh file with known bytes.
  static std::string existing(const std::string& name) {
    const std::string path = dir_->file(name);
    testing::write_bytes(path, {'k', 'e', 'e', 'p'});
    return path;
  }
  // Nothing but the named entries in a folder (no temporary file left behind).
  static std::vector<std::string> entries(const std::string& folder) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  static testing::TempDir* dir_;
};
testing::TempDir* OutputFilesCli::dir_ = nullptr;

const std::vector<uint8_t> kKeep = {'k', 'e', 'e', 'p'};

TEST_F(OutputFilesCli, AnExistingOutIsKeptWithoutOverwriteAndReplacedWithIt) {
  struct Case {
    std::string name;
    std::function<CommandResult(const std::string&, const std::string&)> run;
    std::string op, file;
  };
  const std::vector<Case> cases = {
      {"embed", embed, "embed", "e.npy"},
      {"embed images", embed_image, "embed", "ei.npy"},
      {"predict", predict, "predict", "p.npy"},
      {"attention", attention, "attention", "a.png"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string out = existing(c.file);
    expect_error(c.run(out, ""), "[" + c.op + "] --out " + out + " exists (--overwrite replaces it)");
    EXPECT_EQ(read_bytes(out), kKeep);
    const CommandResult r = c.run(out, " --overwrite");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(read_bytes(out), kKeep);
  }
  EXPECT_EQ(io::load_npy(dir_->file("p.npy")).shape(), (Shape{2, 10}));
  EXPECT_EQ(data::read_image(dir_->file("a.png")).height, 32);
  // quantize: as before.
  const std::string q = existing("q.safetensors");
  expect_error(vit("quantize --checkpoint " + ck() + " --out " + q), "[quantize] --out " + q + " exists");
  EXPECT_EQ(read_bytes(q), kKeep);
  EXPECT_EQ(vit("quantize --checkpoint " + ck() + " --out " + q + " --overwrite").exit_code, 0);
  EXPECT_NE(read_bytes(q), kKeep);
  for (const std::string& name : entries(dir_->path())) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
}

TEST_F(OutputFilesCli, TheCheckpointIsNeverOverwrittenNotEvenThroughALink) {
  const std::vector<uint8_t> before = read_bytes(ck());
  const std::string symlink = dir_->file("ck_symlink.safetensors"), hardlink = dir_->file("ck_hardlink.safetensors");
  fs::create_symlink(ck(), symlink);
  fs::create_hard_link(ck(), hardlink);
  for (const std::string& out : {ck(), symlink, hardlink}) {
    SCOPED_TRACE(out);
    const std::string what = out == ck() ? "the checkpoint itself: " : "the checkpoint itself (the same file as ";
    for (const std::string& flags : {std::string(""), std::string(" --overwrite")}) {
      expect_error(embed(out, flags), "[embed] --out " + out + " is " + what);
      expect_error(embed_image(out, flags), "[embed] --out " + out + " is " + what);
      expect_error(predict(out, flags), "[predict] --out " + out + " is " + what);
      expect_error(attention(out, flags), "[attention] --out " + out + " is " + what);
      expect_error(vit("quantize --checkpoint " + ck() + " --out " + out + flags),
                   "[quantize] --out " + out + " is the input checkpoint itself");
    }
  }
  EXPECT_EQ(read_bytes(ck()), before);
  EXPECT_TRUE(fs::is_symlink(symlink));
  EXPECT_EQ(fs::hard_link_count(ck()), 2u);
}

TEST_F(OutputFilesCli, TheInputsAreNeverOverwrittenNotEvenThroughALink) {
  const std::vector<uint8_t> tensor_before = read_bytes(input()), image_before = read_bytes(image());
  const std::string symlink = dir_->file("input_symlink.npy"), hardlink = dir_->file("input_hardlink.npy");
  fs::create_symlink(input(), symlink);
  fs::create_hard_link(input(), hardlink);
  for (const std::string& out : {input(), symlink, hardlink}) {
    SCOPED_TRACE(out);
    const std::string what = out == input() ? "is the --tensor input itself: write the .npy file to another path"
                                            : "is the --tensor input itself (the same file as " + input();
    expect_error(embed(out, " --overwrite"), "[embed] --out " + out + " " + what);
    expect_error(predict(out, " --overwrite"), "[predict] --out " + out + " " + what);
  }
  const std::string image_link = dir_->file("digit_link.png");
  fs::create_symlink(image(), image_link);
  for (const std::string& out : {image(), image_link}) {
    expect_error(attention(out, " --overwrite"), "[attention] --out " + out + " is the input image itself");
    expect_error(embed_image(out, " --overwrite"), "[embed] --out " + out + " is the input image itself");
  }
  EXPECT_EQ(read_bytes(input()), tensor_before);
  EXPECT_EQ(read_bytes(image()), image_before);
}

TEST_F(OutputFilesCli, ADirectoryOrAFolderThatCannotTakeTheFileIsNamed) {
  const std::string folder = dir_->file("folder");
  fs::create_directories(folder);
  for (const std::string& flags : {std::string(""), std::string(" --overwrite")}) {
    expect_error(embed(folder, flags), "[embed] --out " + folder + " is a directory: give the .npy file to write");
    expect_error(predict(folder, flags), "[predict] --out " + folder + " is a directory: give the .npy file to write");
    expect_error(attention(folder, flags),
                 "[attention] --out " + folder + " is a directory: give the image file to write");
  }
  const std::string missing = dir_->file("no/such/folder/out.npy");
  expect_error(embed(missing),
               "[embed] --out " + missing + ": the folder " + dir_->file("no/such/folder") + " does not exist");
  expect_error(predict(missing),
               "[predict] --out " + missing + ": the folder " + dir_->file("no/such/folder") + " does not exist");
  const std::string under_a_file = input() + "/out.png";
  expect_error(attention(under_a_file), "[attention] --out " + under_a_file + ": cannot write there (Not a directory)");
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string locked = dir_->file("locked");
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    expect_error(embed(locked + "/e.npy"),
                 "[embed] --out " + locked + "/e.npy: cannot write in the folder " + locked + " (Permission denied)");
    fs::permissions(locked, fs::perms::owner_all);
  }
  expect_error(vit("embed --checkpoint " + ck() + " --tensor " + input() + " --out ''"),
               "[embed] --out is empty: give the .npy file to write");
  EXPECT_TRUE(fs::is_empty(folder));
  EXPECT_FALSE(fs::exists(dir_->file("no")));
}

TEST_F(OutputFilesCli, AttentionKeepsAnExistingDefaultOutput) {
  testing::TempDir cwd;
  testing::write_bytes(cwd.file("attention.png"), kKeep);
  const std::string line = "cd " + cwd.path() + " && " + std::string(VIT_BINARY) + " attention --checkpoint " + ck() +
                           " --threads 1 --size 32 " + image();
  const CommandResult kept = testing::run_shell(line + " 2>&1");
  expect_error(kept, "[attention] --out attention.png exists (--overwrite replaces it)");
  EXPECT_EQ(read_bytes(cwd.file("attention.png")), kKeep);
  const CommandResult replaced = testing::run_shell(line + " --overwrite 2>&1");
  ASSERT_EQ(replaced.exit_code, 0) << replaced.out;
  EXPECT_EQ(data::read_image(cwd.file("attention.png")).height, 32);
  EXPECT_EQ(entries(cwd.path()), std::vector<std::string>{"attention.png"});
  const CommandResult help = vit("attention --help");
  EXPECT_NE(help.out.find("attention.png too, is kept unless --overwrite"), std::string::npos) << help.out;
}

TEST_F(OutputFilesCli, PredictOverwriteNeedsOut) {
  expect_error(vit("predict --checkpoint " + ck() + " --tensor " + input() + " --overwrite"),
               "[predict] --overwrite replaces --out: give --out too");
}

}  // namespace
}  // namespace vit
