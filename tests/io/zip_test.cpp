// io/zip.h on archives written byte by byte (support/torch_files.h): an entry whose local header
// disagrees with the central directory, or whose bytes are another entry's, is refused naming it;
// names are shown escaped; finding an entry costs the same in an archive of 200k entries.
#include "io/zip.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "support/torch_files.h"

namespace vit::io {
namespace {

using testing::ZipMember;

ZipArchive archive(const std::vector<ZipMember>& members, const std::string& name = "t.zip") {
  const std::string bytes = testing::zip_bytes(members);
  return ZipArchive::from_bytes(std::make_shared<std::vector<char>>(bytes.begin(), bytes.end()), name);
}

std::string error_of(const std::vector<ZipMember>& members) {
  try {
    const ZipArchive zip = archive(members);
    for (const ZipEntry& e : zip.entries()) zip.read(e);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Zip, ArchivesWrittenHereAreRead) {
  ZipMember deflated{"b.bin", std::string(1000, 'b'), true};
  const ZipArchive zip = archive({{"a.bin", "AAAA"}, deflated});
  ASSERT_EQ(zip.entries().size(), 2u);
  const ZipBytes a = zip.read(*zip.find("a.bin")), b = zip.read(*zip.find("b.bin"));
  EXPECT_EQ(std::string(a.data, a.size), "AAAA");
  EXPECT_EQ(std::string(b.data, b.size), std::string(1000, 'b'));
  EXPECT_EQ(zip.find("c.bin"), nullptr);
  // Sizes and CRC left to a data descriptor (zeros in the local header), as a streaming writer does.
  ZipMember streamed{"c.bin", "CCCC"};
  streamed.local_flags = 8;
  streamed.local_crc = streamed.local_compressed = streamed.local_size = 0;
  EXPECT_EQ(error_of({streamed}), "");
}

TEST(Zip, ALocalHeaderThatDisagreesIsRefusedNamingTheEntry) {
  // Two central entries, one local header: "b" would read a's bytes (same bytes, same CRC).
  ZipMember b{"b.bin", "AAAA"};
  b.points_at = 0;
  std::string e = error_of({{"a.bin", "AAAA"}, b});
  EXPECT_NE(e.find("[zip] t.zip: entry 'b.bin'"), std::string::npos) << e;
  EXPECT_NE(e.find("local header names 'a.bin'"), std::string::npos) << e;

  ZipMember renamed{"data.pkl", "x"};
  renamed.local_name = "data.pkX";
  e = error_of({renamed});
  EXPECT_NE(e.find("entry 'data.pkl': its local header names 'data.pkX'"), std::string::npos) << e;

  // With "sizes in a data descriptor" set, the local header's sizes and CRC must still be zero or the truth.
  ZipMember size{"s.bin", "SSSS"};
  size.local_flags = 8;
  size.local_size = 999;
  e = error_of({size});
  EXPECT_NE(e.find("entry 's.bin': its local header records 999 bytes uncompressed, the central directory 4"),
            std::string::npos)
      << e;
  ZipMember crc{"c.bin", "CCCC"};
  crc.local_flags = 8;
  crc.local_crc = 0x1234;
  e = error_of({crc});
  EXPECT_NE(e.find("entry 'c.bin': its local header records CRC-32 00001234"), std::string::npos) << e;
  ZipMember method{"m.bin", "MMMM"};
  method.local_method = 8;
  e = error_of({method});
  EXPECT_NE(e.find("entry 'm.bin'"), std::string::npos) << e;
}

TEST(Zip, EntriesThatOverlapAreRefused) {
  // "b.bin" is a whole entry (its local header and bytes) hidden inside the bytes of "a.bin": its
  // headers agree, and its bytes are a's.
  std::string inner = testing::zip_bytes({{"b.bin", "BBBB"}}, 1);
  inner.resize(30 + 5 + 4);  // its local header and data, without its directory
  ZipMember b{"b.bin", "BBBB"};
  b.central_offset = 30 + 5;  // a's data: after a's 30-byte header and 5-byte name
  std::string e;
  try {
    const std::string bytes = testing::zip_bytes({{"a.bin", inner}, b}, 1);
    ZipArchive::from_bytes(std::make_shared<std::vector<char>>(bytes.begin(), bytes.end()), "t.zip");
  } catch (const Error& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("[zip] t.zip: entries 'a.bin' and 'b.bin' overlap"), std::string::npos) << e;
  // The same local header under one name twice: refused as a name that appears twice.
  ZipMember twin{"a.bin", "AAAA"};
  twin.points_at = 0;
  e = error_of({{"a.bin", "AAAA"}, twin});
  EXPECT_NE(e.find("'a.bin' appears twice"), std::string::npos) << e;
}

TEST(Zip, NamesAreShownEscaped) {
  std::string e = error_of({{std::string("a\0b.npy", 7), "x"}});
  EXPECT_NE(e.find("entry 'a\\x00b.npy' is refused: a NUL byte in the name"), std::string::npos) << e;
  e = error_of({{"/\x1b[2J", "x"}});
  EXPECT_NE(e.find("entry '/\\x1B[2J' is refused: an absolute path"), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
}

TEST(Zip, FindingAnEntryDoesNotScanTheArchive) {
  // 200k entries (a zip64 directory): finding each one is a lookup, not a scan of the others
  // (a scan per lookup took minutes here).
  std::vector<ZipMember> members;
  for (int i = 0; i < 200000; ++i) members.push_back({fmt::format("e{:06d}", i), ""});
  const std::string bytes = testing::zip_bytes(members, 1);
  const auto start = std::chrono::steady_clock::now();
  const ZipArchive zip = ZipArchive::from_bytes(std::make_shared<std::vector<char>>(bytes.begin(), bytes.end()), "t");
  ASSERT_EQ(zip.entries().size(), members.size());
  for (const ZipMember& m : members) ASSERT_NE(zip.find(m.name), nullptr) << m.name;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0) << "200k lookups";
}

}  // namespace
}  // namespace vit::io
