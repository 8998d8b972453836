// WebDataset tar shards: the tar reader (ustar, pax, GNU long names; malformed archives refused
// naming the offset), samples grouped by key, shards as a dataset (streamed and in memory the same
// images), `vit shard`'s writer, and the epoch plan that deals shards to ranks: each rank reads only
// its own shards and together they see every image once an epoch.
#include "data/shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <set>

#include "data/epoch_plan.h"
#include "data/tar.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::data {
namespace {

using testing::error_of;
using testing::TempDir;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// A tar archive in memory, written by TarWriter.
struct TarBytes {
  std::vector<uint8_t> bytes;
  TarWriter writer{[this](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  }};
  void add(const std::string& name, const std::string& content) {
    writer.add(name, reinterpret_cast<const uint8_t*>(content.data()), content.size());
  }
  void add(const std::string& name, const std::vector<uint8_t>& content) {
    writer.add(name, content.data(), content.size());
  }
};

// A raw header block of `type` with `size` (the checksum right), for what TarWriter does not write.
std::vector<uint8_t> raw_header(const std::string& name, uint64_t size, char type) {
  std::vector<uint8_t> h(512, 0);
  std::memcpy(h.data(), name.data(), name.size());
  std::snprintf(reinterpret_cast<char*>(h.data()) + 124, 12, "%011llo", static_cast<unsigned long long>(size));
  h[156] = static_cast<uint8_t>(type);
  std::memcpy(h.data() + 257,
              "ustar\0"
              "00",
              8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  std::snprintf(reinterpret_cast<char*>(h.data()) + 148, 8, "%06o", sum);
  return h;
}

void append_padded(std::vector<uint8_t>& tar, const std::vector<uint8_t>& data) {
  tar.insert(tar.end(), data.begin(), data.end());
  tar.resize((tar.size() + 511) / 512 * 512, 0);
}

TEST(Tar, MembersReadBackWithTheirOffsetsAndSizes) {
  TarBytes t;
  t.add("a/0001.jpg", std::string(700, 'x'));
  t.add("a/0001.cls", "3");
  t.add("empty.txt", "");
  t.writer.finish();
  const auto members = read_tar_members(t.bytes.data(), t.bytes.size(), "t.tar");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].name, "a/0001.jpg");
  EXPECT_EQ(members[0].offset, 512u);
  EXPECT_EQ(members[0].size, 700u);
  EXPECT_EQ(members[1].offset, 512u + 1024u + 512u);
  EXPECT_EQ(std::string(t.bytes.begin() + 2048, t.bytes.begin() + 2049), "3");
  EXPECT_EQ(members[2].size, 0u);
  EXPECT_EQ(t.writer.bytes(), t.bytes.size());
}

TEST(Tar, PaxPathsGnuLongNamesAndSkippedEntries) {
  std::vector<uint8_t> tar;
  const std::string long_name = std::string(150, 'k') + ".png";
  const std::string body = " path=" + long_name + "\n";
  size_t length = body.size() + 1;  // a record's length counts its own digits
  while (std::to_string(length).size() + body.size() != length) ++length;
  const std::string pax = std::to_string(length) + body;
  append_padded(tar, raw_header("PaxHeader", pax.size(), 'x'));
  append_padded(tar, bytes_of(pax));
  append_padded(tar, raw_header("short.png", 5, '0'));
  append_padded(tar, bytes_of("12345"));
  append_padded(tar, raw_header("dir/", 0, '5'));
  append_padded(tar, raw_header("link.png", 0, '2'));
  const std::string gnu = std::string(120, 'g') + ".cls";
  append_padded(tar, raw_header("././@LongLink", gnu.size() + 1, 'L'));
  append_padded(tar, bytes_of(gnu + std::string(1, '\0')));
  append_padded(tar, raw_header("cut.cls", 1, '0'));
  append_padded(tar, bytes_of("7"));
  tar.resize(tar.size() + 1024, 0);
  int64_t skipped = 0;
  const auto members =
      read_tar_members([&tar](uint64_t o, uint8_t* out, size_t n) { std::memcpy(out, tar.data() + o, n); }, tar.size(),
                       "p.tar", &skipped);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].name, long_name);
  EXPECT_EQ(members[0].size, 5u);
  EXPECT_EQ(members[1].name, gnu);
  EXPECT_EQ(skipped, 2);
}

TEST(Tar, MalformedArchivesAreRefusedNamingWhere) {
  TarBytes t;
  t.add("a.jpg", std::string(1000, 'x'));
  t.writer.finish();
  std::vector<uint8_t> bad = t.bytes;
  bad[10] ^= 1;  // the header's name, so its checksum fails
  EXPECT_NE(error_of([&] {
              read_tar_members(bad.data(), bad.size(), "bad.tar");
            }).find("bad.tar: not a tar archive, or corrupt: the header at byte 0 fails its checksum"),
            std::string::npos);
  const std::vector<uint8_t> cut(t.bytes.begin(), t.bytes.begin() + 800);
  EXPECT_NE(error_of([&] {
              read_tar_members(cut.data(), cut.size(), "cut.tar");
            }).find("cut.tar: truncated: the member at byte 0 declares 1000 bytes, but only 288 remain"),
            std::string::npos);
  const std::vector<uint8_t> half(t.bytes.begin(), t.bytes.begin() + 300);
  EXPECT_NE(error_of([&] { read_tar_members(half.data(), half.size(), "h.tar"); }).find("not a whole 512-byte header"),
            std::string::npos);
  std::vector<uint8_t> nan_size = raw_header("a.jpg", 0, '0');
  std::memcpy(nan_size.data() + 124, "12x", 3);
  std::memset(nan_size.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : nan_size) sum += b;
  std::snprintf(reinterpret_cast<char*>(nan_size.data()) + 148, 8, "%06o", sum);
  EXPECT_NE(
      error_of([&] { read_tar_members(nan_size.data(), nan_size.size(), "n.tar"); }).find("size that is not a number"),
      std::string::npos);
  std::vector<uint8_t> pax;
  append_padded(pax, raw_header("PaxHeader", 12, 'x'));
  append_padded(pax, bytes_of("99 path=a.b\n"));
  EXPECT_NE(error_of([&] { read_tar_members(pax.data(), pax.size(), "x.tar"); }).find("malformed pax header at byte 0"),
            std::string::npos);
  std::vector<uint8_t> huge = raw_header("PaxHeader", uint64_t{1} << 40, 'x');
  huge.resize(huge.size() + 512, 0);
  EXPECT_NE(error_of([&] { read_tar_members(huge.data(), huge.size(), "u.tar"); }).find("truncated"),
            std::string::npos);
}

TEST(Tar, SamplesGroupByKeyAsWebDatasetDoes) {
  std::string key, ext;
  ASSERT_TRUE(split_sample_name("dir.v1/abc.seg.PNG", key, ext));
  EXPECT_EQ(key, "dir.v1/abc");
  EXPECT_EQ(ext, "seg.png");
  EXPECT_FALSE(split_sample_name("dir/.hidden", key, ext));
  EXPECT_FALSE(split_sample_name("README", key, ext));
  const std::vector<TarMember> members = {
      {"a.jpg", 512, 1}, {"a.cls", 1536, 1}, {"b.png", 2560, 1}, {"b.txt", 3584, 1}};
  const auto samples = group_samples(members, "s.tar");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].key, "b");
  EXPECT_EQ(samples[1].parts[1].first, "txt");
  EXPECT_NE(error_of([] {
              group_samples({{"a.jpg", 0, 1}, {"b.cls", 0, 1}, {"a.cls", 0, 1}}, "s.tar");
            }).find("sample 'a' appears again"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              group_samples({{"a.jpg", 0, 1}, {"a.JPG", 0, 1}}, "s.tar");
            }).find("two .jpg files"),
            std::string::npos);
}

// A shard of `n` PNG images (3 x 6 x 6), image k's pixels all k; labels by .cls (k % 3) or .txt.
void write_shard(const std::string& path, int first, int n, bool by_name = false) {
  TarBytes t;
  for (int k = first; k < first + n; ++k) {
    const std::string key = "s" + std::to_string(k);
    t.add(key + ".png", encode_png(Image{3, 6, 6, std::vector<uint8_t>(108, static_cast<uint8_t>(k))}));
    t.add(key + (by_name ? ".txt" : ".cls"), by_name ? std::string(k % 3 == 0 ? "cat" : "dog") : std::to_string(k % 3));
  }
  t.writer.finish();
  testing::write_bytes(path, t.bytes);
}

TEST(Shards, ReadStreamedOrInMemoryAsTheSameImagesAndLabels) {
  TempDir dir;
  write_shard(dir.file("train-000000.tar"), 0, 5);
  write_shard(dir.file("train-000001.tar"), 5, 4);
  write_shard(dir.file("test-000000.tar"), 20, 3);
  const Dataset streamed = load_dataset(dir.path(), Split::Train, 3, 4, kDefaultMaxPixels, Residency::Stream);
  const Dataset memory = load_dataset(dir.path(), Split::Train, 3, 4, kDefaultMaxPixels, Residency::Memory);
  ASSERT_TRUE(streamed.streamed());
  ASSERT_FALSE(memory.streamed());
  ASSERT_TRUE(memory.sharded());
  ASSERT_EQ(streamed.size(), 9);
  EXPECT_EQ(streamed.class_names, (std::vector<std::string>{"0", "1", "2"}));
  std::vector<uint8_t> a(48), b(48);
  for (int64_t i = 0; i < 9; ++i) {
    streamed.read(i, a.data());
    memory.read(i, b.data());
    EXPECT_EQ(a, b);
    EXPECT_EQ(a[0], static_cast<uint8_t>(i));  // archive order
    EXPECT_EQ(streamed.labels[static_cast<size_t>(i)], i % 3);
  }
  EXPECT_EQ(streamed.members[5].shard, 1u);
  const Dataset test = load_dataset(dir.path(), Split::Test, 3, 4);
  EXPECT_EQ(test.size(), 3);
  // classes.txt names the classes; a .cls at or past their count is refused.
  testing::write_bytes(dir.file("classes.txt"), bytes_of("ant\nbee\ncat\n"));
  EXPECT_EQ(load_dataset(dir.path(), Split::Train, 3, 4).class_names[2], "cat");
  testing::write_bytes(dir.file("classes.txt"), bytes_of("ant\nbee\n"));
  EXPECT_NE(
      error_of([&] { load_dataset(dir.path(), Split::Train, 3, 4); }).find("class number 2 is not below the 2 classes"),
      std::string::npos);
}

TEST(Shards, TxtLabelsMissingPartsAndOtherSplitAreNamed) {
  TempDir dir;
  write_shard(dir.file("train-000000.tar"), 0, 6, true);
  const Dataset d = load_dataset(dir.path(), Split::Train, 3, 4, kDefaultMaxPixels, Residency::Stream);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 1, 1, 0, 1, 1}));
  EXPECT_NE(error_of([&] {
              load_dataset(dir.path(), Split::Test, 3, 4);
            }).find("found " + dir.file("train-000000.tar") + " but no test (or val)-*.tar shards"),
            std::string::npos);
  TarBytes t;
  t.add("x.png", encode_png(Image{1, 2, 2, {1, 2, 3, 4}}));
  t.add("y.cls", "1");
  t.writer.finish();
  testing::write_bytes(dir.file("test-000000.tar"), t.bytes);
  const std::string e = error_of([&] { load_dataset(dir.path(), Split::Test, 3, 4); });
  EXPECT_NE(e.find("sample 'x' has no label (a .cls number or a .txt class name); it has .png"), std::string::npos)
      << e;
  TarBytes u;
  u.add("y.cls", "1");
  u.writer.finish();
  testing::write_bytes(dir.file("test-000000.tar"), u.bytes);
  EXPECT_NE(error_of([&] { load_dataset(dir.path(), Split::Test, 3, 4); }).find("sample 'y' has no image file"),
            std::string::npos);
  // A member that no longer decodes stops its batch naming the shard and the byte.
  TarBytes v;
  v.add("z.png", std::string("\x89PNG\r\n\x1a\nbroken", 14));
  v.add("z.cls", "0");
  v.writer.finish();
  testing::write_bytes(dir.file("test-000000.tar"), v.bytes);
  const Dataset broken = load_dataset(dir.path(), Split::Test, 3, 4, kDefaultMaxPixels, Residency::Stream);
  std::vector<uint8_t> out(48);
  EXPECT_NE(error_of([&] { broken.read(0, out.data()); }).find(dir.file("test-000000.tar") + " (the file at byte 512)"),
            std::string::npos);
}

// Every image once, each rank's rows from its own shards only, the same plan twice.
TEST(EpochPlan, ShardsAreDealtToRanksAndEveryImageIsSeenOnce) {
  TempDir dir;
  const int sizes[] = {8, 5, 9, 7, 8, 3, 8};
  int first = 0;
  for (int s = 0; s < 7; ++s) {
    write_shard(dir.file(fmt::format("train-{:06d}.tar", s)), first, sizes[s]);
    first += sizes[s];
  }
  const Dataset d = load_dataset(dir.path(), Split::Train, 3, 4, kDefaultMaxPixels, Residency::Stream);
  ASSERT_EQ(d.size(), 48);
  for (const int64_t parts : {1, 2, 3}) {
    for (const int64_t epoch : {0, 1}) {
      const EpochPlan plan = plan_epoch(d, 8, true, true, 5, epoch, parts);
      ASSERT_EQ(plan.batches.size(), 6u);
      std::multiset<int64_t> seen;
      for (int64_t r = 0; r < parts; ++r) {
        const std::vector<uint32_t> mine = rank_shards(d, true, 5, epoch, r, parts);
        for (size_t b = 0; b < plan.batches.size(); ++b) {
          const BatchSlice s = plan.slice(b, r, parts);
          ASSERT_LT(s.begin, s.end) << "rank " << r << " batch " << b;
          for (int64_t k = s.begin; k < s.end; ++k) {
            const int64_t i = plan.batches[b][static_cast<size_t>(k)];
            seen.insert(i);
            EXPECT_NE(std::find(mine.begin(), mine.end(), d.members[static_cast<size_t>(i)].shard), mine.end())
                << "rank " << r << " got image " << i << " of another rank's shard";
          }
        }
      }
      EXPECT_EQ(seen.size(), 48u);
      EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 48u);  // each once
      EXPECT_EQ(plan_epoch(d, 8, true, true, 5, epoch, parts).batches, plan.batches);
    }
    EXPECT_NE(plan_epoch(d, 8, true, true, 5, 0, parts).batches, plan_epoch(d, 8, true, true, 5, 1, parts).batches);
  }
  // Unshuffled (evaluation): archive order.
  EXPECT_EQ(plan_epoch(d, 48, false, false, 0, 0).batches.front().front(), 0);
  EXPECT_EQ(plan_epoch(d, 48, false, false, 0, 0).batches.front().back(), 47);
  // More ranks than shards: one would read nothing.
  EXPECT_NE(error_of([&] { plan_epoch(d, 8, true, true, 5, 0, 8); }).find("cannot feed 8 ranks"), std::string::npos);
}

TEST(ShardWriter, WritesAFolderAsShardsThatReadBackAsTheSameImages) {
  TempDir dir;
  testing::write_photo_folder(dir.file("photos"), 3, 5, 2, 8, 10);
  const ShardSetWritten w = write_shard_set(dir.file("photos"), dir.file("shards"), 4, 1, false);
  EXPECT_EQ(w.train_samples, 15);
  EXPECT_EQ(w.train.size(), 4u);
  EXPECT_EQ(w.test.size(), 2u);
  EXPECT_EQ(shard_pattern(w.train), dir.file("shards/train-{000000..000003}.tar (4 shards)"));
  const Dataset folder = load_dataset(dir.file("photos"), Split::Train, 3, 8, kDefaultMaxPixels, Residency::Memory);
  const Dataset shards = load_dataset(dir.file("shards"), Split::Train, 3, 8, kDefaultMaxPixels, Residency::Memory);
  EXPECT_EQ(shards.class_names, folder.class_names);
  // The same (label, image) pairs, shuffled.
  std::multiset<std::pair<int64_t, std::vector<uint8_t>>> a, b;
  for (int64_t i = 0; i < 15; ++i) {
    a.insert({folder.labels[static_cast<size_t>(i)], {folder.image(i), folder.image(i) + folder.image_bytes()}});
    b.insert({shards.labels[static_cast<size_t>(i)], {shards.image(i), shards.image(i) + shards.image_bytes()}});
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(shards.labels, folder.labels);  // shuffled over the shards
  const Dataset test = load_dataset(dir.file("shards"), Split::Test, 3, 8, kDefaultMaxPixels, Residency::Memory);
  const Dataset folder_test = load_dataset(dir.file("photos"), Split::Test, 3, 8, kDefaultMaxPixels, Residency::Memory);
  EXPECT_EQ(test.pixels, folder_test.pixels);  // the test split in order
  EXPECT_NE(error_of([&] { write_shard_set(dir.file("photos"), dir.file("shards"), 4, 1, false); }).find("--overwrite"),
            std::string::npos);
  // A smaller set replacing a larger one leaves no stale shard behind.
  const ShardSetWritten again = write_shard_set(dir.file("photos"), dir.file("shards"), 100, 1, true);
  EXPECT_EQ(find_shards(dir.file("shards"), "train").size(), 1u);
  EXPECT_EQ(again.train.size(), 1u);
}

}  // namespace
}  // namespace vit::data
