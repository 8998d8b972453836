// safetensors reader: refusal (vit::Error naming the file and the problem, never a crash) of
// missing, malformed or truncated files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vit::io {
namespace {

using namespace vit::io::test;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------- bad input

TEST_F(SafetensorsTest, MissingFileThrows) {
  const std::string file = path("absent.safetensors");
  const std::string msg = error_of([&] { load_safetensors(file); });
  EXPECT_THAT(msg, HasSubstr("[safetensors]"));
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("cannot open"));
}

TEST_F(SafetensorsTest, DirectoryThrows) {
  const std::string msg = error_of([&] { load_safetensors(dir_); });
  EXPECT_THAT(msg, HasSubstr(dir_));
  EXPECT_THAT(msg, HasSubstr("not a regular file"));
}

TEST_F(SafetensorsTest, EmptyFileThrows) {
  const std::string file = path("empty.safetensors");
  write_file(file, "");
  const std::string msg = error_of([&] { load_safetensors(file); });
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("empty"));
  const std::string mem = error_of([&] { parse_safetensors(to_shared(""), "empty-mem"); });
  EXPECT_THAT(mem, HasSubstr("empty-mem"));
  EXPECT_THAT(mem, HasSubstr("0 bytes"));
}

// Writes bytes to a file and expects both load_safetensors and parse_safetensors to throw
// vit::Error naming the file (resp. the buffer name) and containing every one of `problem`.
class BadInput : public SafetensorsTest {
 protected:
  void expect_refused(const std::string& bytes, const std::vector<std::string>& problem, const std::string& tag) {
    SCOPED_TRACE(tag);
    const std::string file = path(tag + ".safetensors");
    write_file(file, bytes);
    const std::string msg = error_of([&] { load_safetensors(file); });
    EXPECT_THAT(msg, HasSubstr("[safetensors] " + file + ": "));
    for (const auto& p : problem) EXPECT_THAT(msg, HasSubstr(p));
    const std::string mem = error_of([&] { parse_safetensors(to_shared(bytes), "mem:" + tag); });
    EXPECT_THAT(mem, HasSubstr("[safetensors] mem:" + tag + ": "));
    for (const auto& p : problem) EXPECT_THAT(mem, HasSubstr(p));
  }
  // One tensor entry `entry` named "w" with `data` bytes.
  void expect_entry_refused(const std::string& entry, const std::string& data, const std::vector<std::string>& problem,
                            const std::string& tag) {
    expect_refused(craft(R"({"w":)" + entry + "}", data), problem, tag);
  }
};

TEST_F(BadInput, ShorterThanEightBytes) {
  expect_refused("abcde", {"5 bytes", "too short"}, "short5");
  expect_refused(std::string(7, '\0'), {"7 bytes", "too short"}, "short7");
}

TEST_F(BadInput, HeaderLengthLargerThanFile) {
  expect_refused(u64_le(100) + "{}", {"header length 100", "longer than the file"}, "hdr_long");
  expect_refused(u64_le(1), {"header length 1", "longer than the file"}, "hdr_long_exact8");
}

TEST_F(BadInput, HeaderLengthOverLimit) {
  expect_refused(u64_le(200000000) + "{}", {"header length 200000000", "100 MB"}, "hdr_200m");
  expect_refused(u64_le(~uint64_t{0}) + "{}", {"100 MB"}, "hdr_max");
  expect_refused(u64_le(uint64_t{1} << 63) + "{}", {"100 MB"}, "hdr_2_63");
}

TEST_F(BadInput, InvalidJson) {
  expect_refused(craft("{not json"), {"not valid JSON"}, "json_garbage");
  expect_refused(craft(R"({"w":{"dtype":"F32",)"), {"not valid JSON"}, "json_cut");
  expect_refused(craft(""), {"not valid JSON"}, "json_empty");
  expect_refused(craft("{}  x"), {"not valid JSON"}, "json_trailing");
  expect_refused(craft(R"({"a":1}{"b":2})"), {"not valid JSON"}, "json_two_values");
}

// A NUL byte is not JSON: "{}\0garbage" must be refused like "{} garbage" (the reference
// implementation, serde_json, reports trailing characters), not read as "{}" with the rest ignored.
TEST_F(BadInput, HeaderWithNulThenGarbageIsRefused) {
  expect_refused(craft(std::string("{}\0garbage", 10)), {"header contains a NUL byte"}, "json_nul_garbage");
  expect_refused(craft(std::string(R"({"__metadata__":{"a":"b"}})", 26) + std::string("\0{\"x\":", 6)),
                 {"header contains a NUL byte"}, "json_nul_cut");
}

TEST_F(BadInput, DeeplyNestedJsonDoesNotCrash) {
  const int depth = 100000;
  expect_refused(craft(std::string(depth, '[') + std::string(depth, ']')), {"not a JSON object"}, "deep_array");
  expect_refused(craft(R"({"__metadata__":{"k":)" + std::string(depth, '[') + std::string(depth, ']') + "}}"),
                 {"__metadata__ value 'k' is not a string"}, "deep_meta");
}

TEST_F(BadInput, JsonNotAnObject) {
  expect_refused(craft("[1,2,3]"), {"not a JSON object"}, "json_array");
  expect_refused(craft("42"), {"not a JSON object"}, "json_number");
  expect_refused(craft(R"("text")"), {"not a JSON object"}, "json_string");
}

TEST_F(BadInput, EntryMissingFields) {
  const std::vector<std::string> problem = {"tensor 'w'", "dtype", "shape", "data_offsets"};
  expect_entry_refused(R"({"shape":[1],"data_offsets":[0,4]})", std::string(4, '\0'), problem, "no_dtype");
  expect_entry_refused(R"({"dtype":"F32","data_offsets":[0,4]})", std::string(4, '\0'), problem, "no_shape");
  expect_entry_refused(R"({"dtype":"F32","shape":[1]})", std::string(4, '\0'), problem, "no_offsets");
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", std::string(4, '\0'), problem, "offsets_1");
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})", std::string(8, '\0'), problem,
                       "offsets_3");
  expect_entry_refused(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})", std::string(4, '\0'), problem,
                       "dtype_number");
  expect_entry_refused(R"({"dtype":"F32","shape":1,"data_offsets":[0,4]})", std::string(4, '\0'), problem,
                       "shape_number");
  expect_entry_refused(R"([1,2,3])", "", problem, "entry_array");
  expect_entry_refused(R"("F32")", "", problem, "entry_string");
}

TEST_F(BadInput, UnsupportedDtype) {
  for (const std::string dtype : {"F8_E4M3", "U8", "BOOL", "I16", "f32", ""}) {
    expect_entry_refused(R"({"dtype":")" + dtype + R"(","shape":[4],"data_offsets":[0,4]})", std::string(4, '\0'),
                         {"tensor 'w'", "unsupported dtype " + dtype}, "dtype_" + dtype);
  }
}

TEST_F(BadInput, BadShapeEntries) {
  const std::vector<std::string> problem = {"tensor 'w'", "shape entries must be non-negative integers"};
  const std::string data(8, '\0');
  expect_entry_refused(R"({"dtype":"F32","shape":[-1,2],"data_offsets":[0,8]})", data, problem, "shape_neg");
  expect_entry_refused(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})", data, problem, "shape_frac");
  expect_entry_refused(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", data, problem, "shape_float");
  expect_entry_refused(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})", data, problem, "shape_string");
  expect_entry_refused(R"({"dtype":"F32","shape":[null],"data_offsets":[0,8]})", data, problem, "shape_null");
  expect_entry_refused(R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})", data, problem, "shape_nested");
  expect_entry_refused(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]})", data, problem,
                       "shape_2_64");
  expect_entry_refused(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]})", data,
                       {"tensor 'w'", "too large"}, "shape_2_63");
}

TEST_F(BadInput, BadDataOffsets) {
  const std::string data(8, '\0');
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", data,
                       {"tensor 'w'", "data_offsets must be non-negative integers"}, "off_neg");
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})", data,
                       {"tensor 'w'", "data_offsets must be non-negative integers"}, "off_float");
  expect_entry_refused(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", data,
                       {"tensor 'w'", "data_offsets [0, 16]", "outside the data section (8 bytes)"}, "off_past_end");
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[8,12]})", data,
                       {"tensor 'w'", "data_offsets [8, 12]", "outside"}, "off_begin_at_end");
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", data,
                       {"tensor 'w'", "data_offsets [8, 0]"}, "off_reversed");
  expect_entry_refused(R"({"dtype":"F32","shape":[0],"data_offsets":[4,0]})", data,
                       {"tensor 'w'", "data_offsets [4, 0]"}, "off_reversed_empty");
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,18446744073709551615]})",
                       data, {"tensor 'w'", "outside"}, "off_huge");
}

TEST_F(BadInput, ByteLengthNotMatchingShape) {
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", std::string(8, '\0'),
                       {"tensor 'w'", "needs 8 bytes", "span 4"}, "len_short");
  expect_entry_refused(R"({"dtype":"F64","shape":[2],"data_offsets":[0,12]})", std::string(16, '\0'),
                       {"tensor 'w'", "needs 16 bytes", "span 12"}, "len_long");
  expect_entry_refused(R"({"dtype":"F16","shape":[],"data_offsets":[0,4]})", std::string(4, '\0'),
                       {"tensor 'w'", "needs 2 bytes", "span 4"}, "len_scalar");
  expect_entry_refused(R"({"dtype":"I32","shape":[0],"data_offsets":[0,4]})", std::string(4, '\0'),
                       {"tensor 'w'", "needs 0 bytes", "span 4"}, "len_empty");
}

TEST_F(BadInput, OverlappingTensors) {
  expect_refused(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       std::string(12, '\0')),
                 {"'a' and 'b' overlap"}, "overlap_partial");
  expect_refused(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                       std::string(8, '\0')),
                 {"overlap"}, "overlap_same");
  expect_refused(craft(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
                       R"("b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
                       std::string(16, '\0')),
                 {"overlap"}, "overlap_inside");
}

TEST_F(BadInput, ShapeProductOverflows) {
  expect_entry_refused(R"({"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]})",
                       std::string(8, '\0'), {"tensor 'w'", "overflows"}, "numel_overflow");
  // numel fits in int64 but the byte count does not fit in 64 bits.
  expect_entry_refused(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]})", std::string(8, '\0'),
                       {"tensor 'w'", "overflows"}, "bytes_overflow");
  // and a byte count that fits but is absurd for an 8-byte file.
  expect_entry_refused(R"({"dtype":"F64","shape":[1000000,1000000],"data_offsets":[0,8]})", std::string(8, '\0'),
                       {"tensor 'w'", "needs 8000000000000 bytes"}, "bytes_huge");
}

TEST_F(BadInput, MetadataNotStrings) {
  expect_refused(craft(R"({"__metadata__":{"ok":"x","n":1}})"), {"__metadata__ value 'n' is not a string"}, "meta_num");
  expect_refused(craft(R"({"__metadata__":{"o":{"a":"b"}}})"), {"__metadata__ value 'o' is not a string"}, "meta_obj");
  expect_refused(craft(R"({"__metadata__":{"z":null}})"), {"__metadata__ value 'z' is not a string"}, "meta_null");
  expect_refused(craft(R"({"__metadata__":"text"})"), {"__metadata__ is not an object"}, "meta_string");
}

TEST_F(BadInput, ValidMinimalFilesAreAccepted) {
  // Guards the helpers above: an empty object, and a header padded with spaces, load fine.
  EXPECT_TRUE(parse_safetensors(to_shared(craft("{}")), "min").tensors.empty());
  const WeightsFile f =
      parse_safetensors(to_shared(craft(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}   )",
                                        bytes_of(std::vector<float>{2.5f}))),
                        "padded");
  EXPECT_EQ(f.get("w").item(), 2.5);
}

// --------------------------------------------------------------------------------- truncation

TEST_F(SafetensorsTest, TruncatedCopiesAreRefused) {
  const std::string file = path("full.safetensors");
  save_safetensors(file,
                   {{"a", Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5}, {5})},
                    {"b", Tensor::from_data(std::vector<int64_t>{6, 7}, {2})},
                    {"c", Tensor::from_data(std::vector<double>{8.5}, {1})}},
                   {{"meta", "data"}});
  const std::string full = read_file(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, full.data(), 8);
  ASSERT_EQ(full.size(), 8 + header_len + 20 + 16 + 8);
  ASSERT_NO_THROW(load_safetensors(file));

  // Every cut position, in memory.
  for (size_t cut = 0; cut < full.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(full.size()));
    const std::string msg = error_of([&] { parse_safetensors(to_shared(full.substr(0, cut)), "truncated"); });
    EXPECT_THAT(msg, HasSubstr("[safetensors] truncated: "));
  }
  // Representative cuts, from disk, with the expected diagnosis.
  const size_t data0 = 8 + header_len;
  struct Cut {
    size_t at;
    std::string problem;
  };
  const std::vector<Cut> cuts = {{0, "empty"},
                                 {3, "too short"},
                                 {8, "longer than the file"},
                                 {8 + header_len / 2, "longer than the file"},
                                 {data0 - 1, "longer than the file"},
                                 {data0, "outside the data section"},
                                 {data0 + 10, "outside the data section"},
                                 {data0 + 20 + 8, "outside the data section"},
                                 {full.size() - 1, "outside the data section"}};
  for (const Cut& c : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(c.at));
    const std::string cut_file = path("cut" + std::to_string(c.at) + ".safetensors");
    write_file(cut_file, full.substr(0, c.at));
    const std::string msg = error_of([&] { load_safetensors(cut_file); });
    EXPECT_THAT(msg, HasSubstr(cut_file));
    EXPECT_THAT(msg, HasSubstr(c.problem));
  }
}

}  // namespace
}  // namespace vit::io
