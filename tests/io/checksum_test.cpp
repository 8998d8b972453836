// XXH64 (io/checksum.h) against the reference implementation's values (python3-xxhash), whole
// and piece by piece.
#include "io/checksum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace vit::io {
namespace {

TEST(Xxh64, MatchesTheReferenceImplementation) {
  auto of = [](const std::string& s, uint64_t seed = 0) { return checksum_str(xxh64(s.data(), s.size(), seed)); };
  EXPECT_EQ(of(""), "xxh64:ef46db3751d8e999");
  EXPECT_EQ(of("a"), "xxh64:d24ec4f1a98c6e5b");
  EXPECT_EQ(of("abc"), "xxh64:44bc2cf5ad770999");
  EXPECT_EQ(of("0123456789abcdef0123456789abcdef"), "xxh64:642a94958e71e6c5");  // one whole stripe
  const uint64_t seed = 0x9E3779B185EBCA87ull;
  EXPECT_EQ(of("", seed), "xxh64:6ec6d05f61c7e7a7");
  EXPECT_EQ(of("abc", seed), "xxh64:a7cb2aac405e36c7");
  std::string long_input;  // stripes, then 8-, 4- and 1-byte tails
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 256; ++i) long_input.push_back(static_cast<char>(i));
  }
  long_input += "xyz";
  EXPECT_EQ(of(long_input), "xxh64:e921a1b45bd779f8");
  EXPECT_EQ(of(long_input, seed), "xxh64:2ce0c272b99a181e");
}

TEST(Xxh64, PiecesGiveTheSameHashAsTheWhole) {
  std::string input;
  for (int i = 0; i < 1000; ++i) input.push_back(static_cast<char>(i * 37 + 11));
  const uint64_t whole = xxh64(input.data(), input.size(), 5);
  for (size_t piece : {1, 3, 7, 31, 32, 33, 64, 999}) {
    Xxh64 state(5);
    for (size_t at = 0; at < input.size(); at += piece)
      state.update(input.data() + at, std::min(piece, input.size() - at));
    EXPECT_EQ(state.digest(), whole) << "pieces of " << piece;
  }
  Xxh64 empty_updates(5);
  empty_updates.update(input.data(), 0);
  empty_updates.update(input.data(), input.size());
  EXPECT_EQ(empty_updates.digest(), whole);
}

}  // namespace
}  // namespace vit::io
