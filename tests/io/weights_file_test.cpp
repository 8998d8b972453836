// io/weights_file.h on archives rewritten by the test itself (minizip's writer): a NaN planted in a
// .pth's float32 storage is found by the search that runs in the same pass as the CRC, named by
// tensor and index; one in the bytes of a storage that no tensor views is not a NaN of the model;
// an entry moved off its alignment is copied, not borrowed, with the same values.
#include "io/weights_file.h"

#include <gtest/gtest.h>
#include <zip.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "core/check.h"
#include "infer/load_model.h"
#include "support/files.h"

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

}  // namespace
}  // namespace vit::io
