// safetensors reader/writer: round trips (names, order, shapes, dtypes, exact values and metadata
// kept; aligned data; overwrite; refused saves), parse vs load, and the lifetime of loaded tensors.
// Widening of other dtypes: safetensors_dtypes_test.cpp; malformed or truncated files:
// safetensors_reject_test.cpp.
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "io/safetensors_test_util.h"

namespace vit::io {
namespace {

using namespace vit::io::test;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------- round trip

TEST_F(SafetensorsTest, RoundTripKeepsNamesOrderShapesDtypesValuesAndMetadata) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor f32 = Tensor::from_data(
      std::vector<float>{1.5f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::denorm_min(), 3.14159274f, -1e30f, 65504.f, 1e-7f, 0.f, 42.f},
      {3, 4});
  const Tensor f64 = Tensor::from_data(
      std::vector<double>{1.0 / 3.0, -1e300, std::numeric_limits<double>::denorm_min(), -0.0, 2.718281828459045},
      {5, 1});
  const Tensor i64 =
      Tensor::from_data(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                                             -1, 0, (int64_t{1} << 53) + 1, 7},
                        {2, 1, 3});
  const Tensor scalar = Tensor::scalar(-2.25, DType::F64);
  const Tensor empty = Tensor::empty({0}, DType::F32);
  Tensor base = Tensor::arange(6, DType::F32).view({2, 3});
  const Tensor transposed = base.transpose(0, 1);  // (3, 2), not contiguous
  ASSERT_FALSE(transposed.is_contiguous());
  const Tensor sliced = Tensor::arange(10, DType::I64).slice(0, 1, 9, 3);  // [1, 4, 7]
  const Tensor scalar_i = Tensor::scalar(-5, DType::I64);
  Tensor i8 = Tensor::empty({3, 5}, DType::I8);  // 15 bytes: what follows starts unaligned
  for (int64_t i = 0; i < 15; ++i) i8.data<int8_t>()[i] = static_cast<int8_t>(i * 17 - 128);

  // Names deliberately not in alphabetical order: the file order must be the save order.
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.weight", f32},  {"a.double", f64}, {"m.index", i64},
      {"scalar", scalar}, {"empty", empty},  {"b.transposed", transposed},
      {"sliced", sliced}, {"q.int8", i8},    {"0", scalar_i}};
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quotes \" and \\ and unicode \xc3\xa9"}, {"empty", ""}};
  const std::string file = path("model.safetensors");
  save_safetensors(file, tensors, metadata);

  const WeightsFile loaded = load_safetensors(file);
  EXPECT_EQ(loaded.path, file);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, want] = tensors[i];
    const auto& [got_name, got] = loaded.tensors[i];
    EXPECT_EQ(got_name, name) << "position " << i;
    ASSERT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_TRUE(got.is_contiguous()) << name;
    switch (want.dtype()) {
      case DType::F32:
        EXPECT_EQ(bits_f32(got), bits_f32(want)) << name;
        break;
      case DType::F64:
        EXPECT_EQ(bits_f64(got), bits_f64(want)) << name;
        break;
      case DType::I64:
        EXPECT_EQ(raw_values<int64_t>(got), raw_values<int64_t>(want)) << name;
        break;
      case DType::I8:
        EXPECT_EQ(raw_values<int8_t>(got), raw_values<int8_t>(want)) << name;
        break;
    }
    EXPECT_TRUE(loaded.contains(name));
    EXPECT_EQ(loaded.get(name).shape(), want.shape());
  }
  EXPECT_EQ(loaded.metadata, metadata);
  // Spot checks that do not depend on the helpers above.
  EXPECT_EQ(loaded.get("scalar").dim(), 0);
  EXPECT_EQ(loaded.get("scalar").item(), -2.25);
  EXPECT_EQ(loaded.get("empty").numel(), 0);
  EXPECT_EQ(loaded.get("b.transposed").to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(loaded.get("sliced").to_vector(), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(loaded.get("m.index").data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(std::isnan(loaded.get("z.weight").at({1, 0})));
  EXPECT_TRUE(std::signbit(loaded.get("z.weight").at({0, 1})));
  EXPECT_FALSE(loaded.contains("missing"));
}

TEST_F(SafetensorsTest, SavedDataSectionIsEightByteAligned) {
  // Several names/metadata of different lengths, so the raw JSON length varies mod 8.
  for (int k = 0; k < 8; ++k) {
    const std::string file = path("aligned" + std::to_string(k) + ".safetensors");
    const std::string name = "t" + std::string(k, 'x');
    save_safetensors(file, {{name, Tensor::ones({3}, DType::F32)}, {"d", Tensor::ones({1}, DType::F64)}},
                     {{"k", std::string(k, 'v')}});
    const std::string bytes = read_file(file);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t header_len = 0;
    for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    EXPECT_EQ(header_len % 8, 0u) << "k=" << k;
    EXPECT_EQ(bytes.size(), 8 + header_len + 3 * 4 + 8) << "k=" << k;
    const WeightsFile loaded = load_safetensors(file);
    EXPECT_EQ(loaded.get(name).to_vector(), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(loaded.get("d").item(), 1.0);
  }
}

TEST_F(SafetensorsTest, SaveWithNoTensorsAndNoMetadataLoadsEmpty) {
  const std::string file = path("nothing.safetensors");
  save_safetensors(file, {});
  const WeightsFile loaded = load_safetensors(file);
  EXPECT_TRUE(loaded.tensors.empty());
  EXPECT_TRUE(loaded.metadata.empty());
}

TEST_F(SafetensorsTest, OverwriteReplacesFileAndLeavesNoTmp) {
  const std::string file = path("w.safetensors");
  save_safetensors(file, {{"a", Tensor::full({4}, 1.0)}, {"b", Tensor::full({2}, 2.0)}}, {{"v", "1"}});
  save_safetensors(file, {{"c", Tensor::full({2, 2}, 3.0, DType::F64)}}, {{"v", "2"}});
  const WeightsFile loaded = load_safetensors(file);
  EXPECT_EQ(names_of(loaded), (std::vector<std::string>{"c"}));
  EXPECT_EQ(loaded.get("c").dtype(), DType::F64);
  EXPECT_EQ(loaded.get("c").to_vector(), (std::vector<double>{3, 3, 3, 3}));
  EXPECT_EQ(loaded.metadata, (std::map<std::string, std::string>{{"v", "2"}}));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, (std::vector<std::string>{"w.safetensors"}));
}

TEST_F(SafetensorsTest, SaveRefusesRepeatedNamesAndUndefinedTensors) {
  const std::string file = path("dup.safetensors");
  std::string msg = error_of([&] { save_safetensors(file, {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}}); });
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("'a' repeated"));
  msg = error_of([&] { save_safetensors(file, {{"u", Tensor()}}); });
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("undefined"));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

TEST_F(SafetensorsTest, SaveIntoMissingDirectoryThrows) {
  const std::string file = path("no/such/dir/model.safetensors");
  const std::string msg = error_of([&] { save_safetensors(file, {{"a", Tensor::ones({2})}}); });
  EXPECT_THAT(msg, HasSubstr("[safetensors]"));
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("cannot write"));
  EXPECT_FALSE(fs::exists(path("no")));
}

// A tensor called "__metadata__" collides with the reserved header key. Saving it must either be
// refused or give a file that loads back; writing a file the reader then refuses is a bug.
TEST_F(SafetensorsTest, TensorNamedMetadataIsRefusedOrRoundTrips) {
  const std::string file = path("reserved.safetensors");
  try {
    save_safetensors(file, {{"__metadata__", Tensor::ones({2})}});
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("__metadata__"));
    return;  // refused at save time: fine
  }
  try {
    const WeightsFile loaded = load_safetensors(file);
    EXPECT_TRUE(loaded.contains("__metadata__"));
  } catch (const Error& e) {
    ADD_FAILURE() << "save_safetensors accepted a tensor named __metadata__ but wrote a file that "
                     "load_safetensors refuses: "
                  << e.what();
  }
}

// ------------------------------------------------------------------------------ parse vs load

TEST_F(SafetensorsTest, ParseInMemoryMatchesLoad) {
  const std::string saved = path("saved.safetensors");
  save_safetensors(saved,
                   {{"w", Tensor::from_data(std::vector<float>{1, -2, 3.5f, 0.125f}, {2, 2})},
                    {"d", Tensor::from_data(std::vector<double>{1e-310, 2}, {2})},
                    {"n", Tensor::from_data(std::vector<int64_t>{-3, 4, 5}, {3, 1})},
                    {"s", Tensor::scalar(9)}},
                   {{"k", "v"}});
  const std::string crafted = path("crafted.safetensors");
  write_file(crafted, craft(R"({"__metadata__":{"x":"y"},"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                            R"("i":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                            bytes_of(std::vector<uint16_t>{0x3C00, 0x0001}) + bytes_of(std::vector<int32_t>{-8})));
  for (const std::string& file : {saved, crafted}) {
    const WeightsFile from_disk = load_safetensors(file);
    const WeightsFile from_mem = parse_safetensors(to_shared(read_file(file)), "in-memory");
    EXPECT_FALSE(from_disk.tensors.empty()) << file;
    EXPECT_EQ(from_mem.path, "in-memory");
    expect_same(from_mem, from_disk);
  }
}

// ------------------------------------------------------------------------------------ lifetime

TEST_F(SafetensorsTest, LoadedTensorsOutliveTheFileObject) {
  const std::string file = path("life.safetensors");
  const std::vector<float> values = {0.5f, 1.5f, -2.5f, 4.0f, 8.0f, 16.0f};
  save_safetensors(
      file, {{"w", Tensor::from_data(values, {2, 3})}, {"i", Tensor::from_data(std::vector<int64_t>{11, 22}, {2})}});
  Tensor w, i, view;
  {
    WeightsFile loaded = load_safetensors(file);
    w = loaded.get("w");
    i = loaded.get("i");
    view = loaded.get("w").transpose(0, 1);
  }                  // file object destroyed
  fs::remove(file);  // and the file unlinked: the mapping must stay valid
  EXPECT_EQ(raw_values<float>(w), values);
  EXPECT_EQ(raw_values<int64_t>(i), (std::vector<int64_t>{11, 22}));
  EXPECT_EQ(view.to_vector(), (std::vector<double>{0.5, 4.0, 1.5, 8.0, -2.5, 16.0}));
}

TEST_F(SafetensorsTest, ParsedTensorsKeepTheBufferAlive) {
  const std::string file = path("buf.safetensors");
  save_safetensors(file, {{"w", Tensor::from_data(std::vector<float>{1, 2, 3}, {3})}});
  auto bytes = to_shared(read_file(file));
  std::weak_ptr<std::vector<char>> weak = bytes;
  Tensor w;
  {
    WeightsFile parsed = parse_safetensors(std::move(bytes), "buf");
    w = parsed.get("w");
  }
  bytes.reset();
  EXPECT_FALSE(weak.expired()) << "nothing keeps the parsed bytes alive";
  EXPECT_EQ(raw_values<float>(w), (std::vector<float>{1, 2, 3}));
  w = Tensor();
  EXPECT_TRUE(weak.expired()) << "the buffer leaks after the last tensor is gone";
}

// Loaded tensors are ordinary mutable Tensors (data<T>(), set, fill_, copy_ all write). Writing
// into one must not crash the process (e.g. by writing into a read-only memory mapping); run in a
// child process so that a crash fails this test instead of killing the suite.
TEST_F(SafetensorsTest, LoadedTensorsCanBeWrittenWithoutCrashing) {
  const std::string file = path("rw.safetensors");
  save_safetensors(file, {{"w", Tensor::from_data(std::vector<float>{1, 2, 3, 4}, {4})}});
  EXPECT_EXIT(
      {
        WeightsFile loaded = load_safetensors(file);
        Tensor w = loaded.get("w");
        w.fill_(7.0);
        std::_Exit(w.to_vector() == std::vector<double>{7, 7, 7, 7} ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
  // Writing must not change the file on disk.
  EXPECT_EQ(load_safetensors(file).get("w").to_vector(), (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(SafetensorsTest, GetOfMissingNameThrowsNamingFileAndTensor) {
  const std::string file = path("g.safetensors");
  save_safetensors(file, {{"a", Tensor::ones({1})}});
  const WeightsFile loaded = load_safetensors(file);
  const std::string msg = error_of([&] { (void)loaded.get("nope"); });
  EXPECT_THAT(msg, HasSubstr("[safetensors]"));
  EXPECT_THAT(msg, HasSubstr(file));
  EXPECT_THAT(msg, HasSubstr("no tensor 'nope'"));
}

}  // namespace
}  // namespace vit::io
