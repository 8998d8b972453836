// io/weights_file.h on archives rewritten by the test itself (minizip's writer): a NaN planted in a
// .pth's float32 storage is found by the search that runs in the same pass as the CRC, named by
// tensor and index; one in the bytes of a storage that no tensor views is not a NaN of the model;
// an entry moved off its alignment is copied, not borrowed, with the same values.
#include "io/weights_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "core/check.h"
#include "infer/load_model.h"
#include "io/npy.h"
#include "support/files.h"
#include "support/torch_files.h"

namespace vit::io {
namespace {

const std::string kPth = std::string(VIT_GOLDEN_DIR) + "/pth/";

// Copies every entry of `from` into a new archive at `to` (stored, in order), letting `edit`
// change an entry's bytes first; `pad` bytes of extra field shift each entry's data.
void rewrite(const std::string& from, const std::string& to,
             const std::function<void(const std::string&, std::string&)>& edit, unsigned pad = 0) {
  const ZipArchive in = ZipArchive::open(from);
  zipFile out = zipOpen64(to.c_str(), 0);
  ASSERT_NE(out, nullptr);
  const std::string extra = pad > 0 ? std::string("\x99\x99", 2) + std::string(1, static_cast<char>(pad - 4)) +
                                          std::string(1, '\0') + std::string(pad - 4, '\0')
                                    : "";
  for (const ZipEntry& e : in.entries()) {
    const ZipBytes b = in.read(e);
    std::string bytes(b.data, b.size);
    edit(e.name, bytes);
    zip_fileinfo info{};
    ASSERT_EQ(zipOpenNewFileInZip64(out, e.name.c_str(), &info, extra.empty() ? nullptr : extra.data(),
                                    static_cast<uInt>(extra.size()), nullptr, 0, nullptr, 0, 0, 0),
              ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(out, bytes.data(), static_cast<unsigned>(bytes.size())), ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(out), ZIP_OK);
  }
  ASSERT_EQ(zipClose(out, nullptr), ZIP_OK);
}

// The entry name of the storage behind `tensor` in a one-file-per-storage torch.save archive
// written by tools/golden/make_golden_pth.py: found by its size and first values.
std::string storage_of(const WeightsFile& file, const ZipArchive& zip, const std::string& tensor) {
  const Tensor& t = file.get(tensor);
  for (const ZipEntry& e : zip.entries()) {
    if (e.name.find("/data/") == std::string::npos || e.size != static_cast<uint64_t>(t.numel()) * 4) continue;
    const ZipBytes b = zip.read(e);
    if (std::memcmp(b.data, t.data<float>(), 16) == 0) return e.name;
  }
  return "";
}

TEST(WeightsFile, ANanInAFloatStorageIsFoundInTheCrcPass) {
  testing::TempDir dir;
  const std::string source = kPth + "timm_train.pth";
  const WeightsFile clean = load_weights_file(source);
  EXPECT_FALSE(clean.torch.prescanned.empty());  // the float32 storages were searched while read
  EXPECT_EQ(clean.torch.prescan.nonfinite_count, 0);
  const std::string entry = storage_of(clean, ZipArchive::open(source), "blocks.1.mlp.fc1.weight");
  ASSERT_FALSE(entry.empty());
  rewrite(source, dir.file("nan.pth"), [&](const std::string& name, std::string& bytes) {
    if (name != entry) return;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data() + 4 * 37, &nan, 4);
  });
  try {
    infer::LoadSettings o;
    o.num_heads = 4;
    infer::load_model(dir.file("nan.pth"), o);
    ADD_FAILURE() << "a NaN weight loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blocks.1.mlp.fc1.weight' holds NaN at index 37"), std::string::npos)
        << e.what();
  }
  infer::LoadSettings allow;
  allow.num_heads = 4;
  allow.allow_nonfinite = true;
  EXPECT_NO_THROW(infer::load_model(dir.file("nan.pth"), allow));
}

TEST(WeightsFile, NanInBytesNoTensorViewsIsNotTheModels) {
  // views.pth's storages hold NaN padding between and around the views (tools/golden/make_golden_pth.py).
  const WeightsFile f = load_weights_file(kPth + "views.pth");
  const ContentScan scan = checkpoint::scan_checkpoint_file(f, false, false);
  EXPECT_EQ(scan.nonfinite_count, 0);
}

TEST(WeightsFile, UnalignedEntriesAreCopiedWithTheSameValues) {
  testing::TempDir dir;
  rewrite(
      kPth + "timm_train.pth", dir.file("shifted.pth"), [](const std::string&, std::string&) {}, 7);
  const WeightsFile a = load_weights_file(kPth + "timm_train.pth");
  const WeightsFile b = load_weights_file(dir.file("shifted.pth"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  bool copied = false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    EXPECT_EQ(a.tensors[i].second.to_vector(), b.tensors[i].second.to_vector()) << a.tensors[i].first;
    copied = copied || !b.tensors[i].second.is_file_mapped();
  }
  EXPECT_TRUE(copied);
}

// Runs `body` in a child process and waits at most `seconds` for it: the child's exit status, or
// -1 when it was still running (then killed).
int exits_within(const std::function<int()>& body, int seconds) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  for (int waited = 0; waited < seconds * 10; ++waited) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    usleep(100000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

TEST(WeightsFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  testing::TempDir dir;
  const std::string fifo = dir.file("model.pth");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::function<void()>>> readers = {
      {"load_weights_file", [&] { load_weights_file(fifo); }},
      {"load_safetensors", [&] { load_safetensors(fifo); }},
      {"ZipArchive::open", [&] { ZipArchive::open(fifo); }},
      {"load_npy", [&] { load_npy(fifo); }},
  };
  for (const auto& [reader, read] : readers) {
    const int status = exits_within(
        [&] {
          try {
            read();
          } catch (const Error& e) {
            return std::string(e.what()).find(fifo + ": not a regular file (a FIFO (named pipe))") != std::string::npos
                       ? 0
                       : 2;
          }
          return 1;
        },
        10);
    EXPECT_EQ(status, 0) << reader << ": -1: still blocked after 10 s; 2: another message";
  }
}

std::string load_error(const std::string& path) {
  try {
    load_weights_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WeightsFile, WhatIsNotAWeightsFileIsNamedAsWhatItIs) {
  testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& bytes) {
    testing::write_bytes(dir.file(name), std::vector<uint8_t>(bytes.begin(), bytes.end()));
    return dir.file(name);
  };
  // A missing file is no format's.
  EXPECT_EQ(load_error(dir.file("none.pth")),
            "[file] " + dir.file("none.pth") + ": cannot open (No such file or directory)");
  // A torch.save archive with bytes written before it.
  const std::vector<testing::TorchStorage> storages = {{"0", "FloatStorage", std::string(8, '\0')}};
  const std::string pickle = testing::state_dict_pickle({{"w", "0", 0, {2}, {1}}}, storages);
  const std::string prefixed =
      write("prefixed.pth", testing::zip_bytes(testing::torch_members(pickle, storages), 64, "#!/bin/sh\nexit 0\n"));
  std::string e = load_error(prefixed);
  EXPECT_NE(e.find("[file] " + prefixed + ": not a file vit reads (it holds a zip archive after 17 bytes of something"),
            std::string::npos)
      << e;
  // An .npz with one member that is not an array: named as an .npz.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
  const std::string npy =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict + std::string(4, '\0');
  const std::string npz = write("weights.npz", testing::zip_bytes({{"a.npy", npy}, {"notes.txt", "hello"}}));
  e = load_error(npz);
  EXPECT_NE(e.find("[npz] " + npz + ": entry 'notes.txt' is not a .npy array"), std::string::npos) << e;
  // A zip that is neither.
  const std::string other = write("other.zip", testing::zip_bytes({{"readme.txt", "hi"}, {"img/cat.png", "x"}}));
  e = load_error(other);
  EXPECT_NE(e.find("[zip] " + other + ": a zip archive that is neither a torch.save file"), std::string::npos) << e;
  EXPECT_NE(e.find("it holds readme.txt, img/cat.png"), std::string::npos) << e;
  // An ONNX model (a protobuf: ir_version 8, then producer_name "pytorch").
  const std::string onnx = write("model.onnx", std::string("\x08\x08\x12\x07pytorch\x1a\x05"
                                                           "2.1.0") +
                                                   std::string(64, '\x01'));
  e = load_error(onnx);
  EXPECT_NE(e.find("[file] " + onnx + ": not a file vit reads (it looks like an ONNX model"), std::string::npos) << e;
  EXPECT_NE(e.find("vit reads safetensors files"), std::string::npos) << e;
  EXPECT_EQ(e.find("safetensors]"), std::string::npos) << e;
  // A PNG, and bytes of nothing known.
  e = load_error(write("photo.pth", std::string("\x89PNG\r\n\x1a\n", 8) + std::string(32, '\0')));
  EXPECT_NE(e.find("not a file vit reads (it is a PNG image)"), std::string::npos) << e;
  e = load_error(write("noise.bin", std::string(64, '\x07')));
  EXPECT_NE(e.find("[file] " + dir.file("noise.bin") + ": not a file vit reads (its first bytes"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace vit::io
