// Files vit writes, by one rule (the commands' --out, .npy, images, safetensors): a path is
// checked before any work (not empty, not a directory, not one of the command's own inputs --
// the same file by device and inode, so a symlink or hard link counts -- and not an existing file
// unless replacing is asked), then written whole or not at all: to a temporary file beside it,
// flushed, fsynced and renamed into place. Every message names the user's path, never the
// temporary file. Lives in core so that io (.npy, safetensors) and data (images) share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

// What a writer does with a file already at its path.
enum class Existing { Replace, Refuse };

// A file a command reads, for check_output: `what` names it in messages ("the checkpoint",
// "the --tensor input", "the input image").
struct InputFile {
  std::string what, path;
};

// What a command is about to write with a flag (usually --out).
struct OutputFile {
  std::string flag = "--out";  // the flag that named it, for messages
  std::string path;
  std::string what = "the file";               // "the .npy file", "the int8 file": "give {what} to write"
  std::string overwrite_flag = "--overwrite";  // what replaces an existing file ("overwrite=True" in Python)
};

// Refuses, before anything is computed, with "[op] --out PATH ...": an empty path; a directory;
// a folder that does not exist or is not one; a path that is one of `inputs` (the same file by
// device and inode: through a symlink or a hard link too), whatever `overwrite` says; an existing
// file (or dangling symlink) when !overwrite ("exists (--overwrite replaces it)").
void check_output(const char* op, const OutputFile& out, const std::vector<InputFile>& inputs, bool overwrite);

// A temporary name beside `path` that no other writer uses: path + ".tmp.<pid>.<n>", n counting
// this process's calls, so two processes (or threads) writing the same file never share one.
std::string temp_path(const std::string& path);

// A file written whole or not at all. Bytes go to temp_path(path); commit() flushes, fsyncs,
// closes and moves it into place (Existing::Refuse: only if nothing is there by then, atomically
// where the file system can link), then fsyncs the folder so the rename survives a power cut.
// Destroyed without commit() (an exception on the way), the temporary file is removed and `path`
// is untouched. Errors: "[op] PATH: cannot write (reason)", "[op] PATH: write failed (reason)",
// "[op] PATH: exists", naming `path`, never the temporary file.
class AtomicFile {
 public:
  AtomicFile(const char* op, std::string path, Existing existing = Existing::Replace);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Failures are remembered (the first errno) and reported by commit().
  void write(const void* data, size_t size);
  void commit();

 private:
  const char* op_;
  std::string path_, tmp_;
  Existing existing_;
  int fd_ = -1;
  int first_errno_ = 0;
  bool committed_ = false;
};

// One buffer written as an AtomicFile.
void write_file_atomically(const char* op, const std::string& path, const void* data, size_t size,
                           Existing existing = Existing::Replace);

}  // namespace vit
