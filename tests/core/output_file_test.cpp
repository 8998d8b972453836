// The one rule for written files (core/output_file.h): check_output refuses an empty path, a
// directory, a missing folder, the command's own inputs (by device and inode: symlinks and hard
// links too) and an existing file without overwrite; AtomicFile writes whole files or nothing,
// refuses or replaces what is there as asked, names the real path in its errors and leaves no
// temporary file behind.
#include "core/output_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/errors.h"
#include "support/files.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

std::vector<std::string> entries(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_text(const std::string& path, const std::string& text) {
  testing::write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string read_text(const std::string& path) {
  const std::vector<uint8_t> bytes = testing::read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

TEST(OutputFile, ANewFileInAFolderThatExistsIsFine) {
  testing::TempDir dir;
  EXPECT_NO_THROW(check_output("op", {"--out", dir.file("new.npy"), "the file"}, {}, false));
  EXPECT_NO_THROW(check_output("op", {"--out", dir.file("new.npy"), "the file"}, {}, true));
}

TEST(OutputFile, AnExistingFileNeedsOverwrite) {
  testing::TempDir dir;
  const std::string out = dir.file("out.npy");
  write_text(out, "old");
  EXPECT_EQ(error_of([&] {
              check_output("embed", {"--out", out, "the .npy file"}, {}, false);
            }),
            "[embed] --out " + out + " exists (--overwrite replaces it)");
  EXPECT_NO_THROW(check_output("embed", {"--out", out, "the .npy file"}, {}, true));
  // A dangling symlink is something there too.
  const std::string dangling = dir.file("dangling.npy");
  fs::create_symlink(dir.file("nowhere"), dangling);
  EXPECT_EQ(error_of([&] {
              check_output("embed", {"--out", dangling, "the .npy file"}, {}, false);
            }),
            "[embed] --out " + dangling + " exists (--overwrite replaces it)");
}

TEST(OutputFile, AnInputIsRefusedByItsPathASymlinkOrAHardLinkWhateverOverwriteSays) {
  testing::TempDir dir;
  const std::string ck = dir.file("ck.safetensors"), sym = dir.file("sym"), hard = dir.file("hard");
  write_text(ck, "weights");
  fs::create_symlink(ck, sym);
  fs::create_hard_link(ck, hard);
  const std::vector<InputFile> inputs = {{"the --tensor input", ""}, {"the checkpoint", ck}};
  for (bool overwrite : {false, true}) {
    EXPECT_EQ(error_of([&] {
                check_output("embed", {"--out", ck, "the .npy file"}, inputs, overwrite);
              }),
              "[embed] --out " + ck + " is the checkpoint itself: write the .npy file to another path");
    for (const std::string& link : {sym, hard}) {
      EXPECT_EQ(error_of([&] {
                  check_output("embed", {"--out", link, "the .npy file"}, inputs, overwrite);
                }),
                "[embed] --out " + link + " is the checkpoint itself (the same file as " + ck +
                    ", through a link): write the .npy file to another path");
    }
  }
  // The input named through a link, the output by its own name: the same file still.
  EXPECT_NE(error_of([&] {
              check_output("embed", {"--out", ck, "the .npy file"}, {{"the checkpoint", sym}}, true);
            }).find("is the checkpoint itself"),
            std::string::npos);
  // Another file with the same bytes is not an input.
  write_text(dir.file("copy"), "weights");
  EXPECT_NO_THROW(check_output("embed", {"--out", dir.file("copy"), "the .npy file"}, inputs, true));
}

TEST(OutputFile, DirectoriesEmptyPathsAndFoldersThatCannotTakeTheFileAreNamed) {
  testing::TempDir dir;
  EXPECT_EQ(error_of([&] {
              check_output("quantize", {"--out", dir.path(), "the int8 file"}, {}, true);
            }),
            "[quantize] --out " + dir.path() + " is a directory: give the int8 file to write");
  EXPECT_EQ(error_of([&] {
              check_output("quantize", {"--out", "", "the int8 file"}, {}, true);
            }),
            "[quantize] --out is empty: give the int8 file to write");
  const std::string missing = dir.file("no/such/x.npy");
  EXPECT_EQ(error_of([&] {
              check_output("embed", {"--out", missing, "the .npy file"}, {}, false);
            }),
            "[embed] --out " + missing + ": the folder " + dir.file("no/such") + " does not exist");
  write_text(dir.file("file"), "x");
  const std::string under_a_file = dir.file("file/x.npy");
  EXPECT_EQ(error_of([&] {
              check_output("embed", {"--out", under_a_file, "the .npy file"}, {}, false);
            }),
            "[embed] --out " + under_a_file + ": cannot write there (Not a directory)");
  EXPECT_EQ(error_of([&] {
              check_output("embed", {"--out", "/dev/null", "the .npy file"}, {}, true);
            }),
            "[embed] --out /dev/null exists and is not a regular file: give the .npy file to write");
}

TEST(AtomicFile, WritesTheWholeFileAndLeavesNoTemporary) {
  testing::TempDir dir;
  const std::string out = dir.file("out.bin");
  write_file_atomically("op", out, "hello", 5);
  EXPECT_EQ(read_text(out), "hello");
  write_file_atomically("op", out, "bye", 3);  // Existing::Replace, the default
  EXPECT_EQ(read_text(out), "bye");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, RefuseKeepsWhatIsThere) {
  testing::TempDir dir;
  const std::string out = dir.file("out.bin");
  {
    AtomicFile file("npy", out, Existing::Refuse);
    file.write("new", 3);
    write_text(out, "someone else's");  // appears while we write
    EXPECT_EQ(error_of([&] { file.commit(); }),
              "[npy] " + out + ": exists (written meanwhile by someone else; nothing replaced)");
  }
  EXPECT_EQ(read_text(out), "someone else's");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"out.bin"});
  write_file_atomically("npy", dir.file("fresh.bin"), "x", 1, Existing::Refuse);
  EXPECT_EQ(read_text(dir.file("fresh.bin")), "x");
}

TEST(AtomicFile, AnAbandonedFileLeavesThePathUntouched) {
  testing::TempDir dir;
  const std::string out = dir.file("out.bin");
  write_text(out, "old");
  {
    AtomicFile file("op", out);
    file.write("half", 4);
  }  // an exception on the way: never committed
  EXPECT_EQ(read_text(out), "old");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, ErrorsNameThePathNeverTheTemporaryFile) {
  testing::TempDir dir;
  const std::string missing = dir.file("no/out.bin");
  std::string msg = error_of([&] { write_file_atomically("npy", missing, "x", 1); });
  EXPECT_EQ(msg, "[npy] " + missing + ": cannot write (No such file or directory)");
  msg = error_of([&] { write_file_atomically("npy", dir.path(), "x", 1); });
  EXPECT_EQ(msg, "[npy] " + dir.path() + ": is a directory");
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(AtomicFile, ANameAtTheFileSystemsLimitStillGetsATemporaryFile) {
  testing::TempDir dir;
  const std::string out = dir.file(std::string(250, 'n'));
  write_file_atomically("op", out, "long", 4);
  EXPECT_EQ(read_text(out), "long");
  EXPECT_EQ(entries(dir.path()).size(), 1u);
}

TEST(AtomicFile, TemporaryNamesAreUniqueAndLieBesideTheFile) {
  const std::string one = temp_path("/a/b.npy"), two = temp_path("/a/b.npy");
  EXPECT_NE(one, two);
  EXPECT_EQ(one.rfind("/a/b.npy.tmp." + std::to_string(::getpid()) + ".", 0), 0u) << one;
}

}  // namespace
}  // namespace vit
