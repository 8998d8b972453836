// The large-block cache of tensor storage: blocks are aligned, a freed large block is handed
// out again for the same size, small blocks and clear() go back to the system.
#include "core/block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/tensor.h"

namespace vit {
namespace {

TEST(BlockCache, AlignedAndReusedForTheSameSize) {
  block_cache_clear();
  const size_t big = (size_t(3) << 20) + 5;  // not a page multiple
  void* a = block_allocate(big);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, big);  // the whole request is usable
  block_free(a, big);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_GE(block_cache_bytes(), big);
  void* b = block_allocate(big);
  EXPECT_EQ(b, a);  // the cached block
  EXPECT_EQ(block_cache_bytes(), 0u);
  block_free(b, big);
#endif
  block_cache_clear();
  EXPECT_EQ(block_cache_bytes(), 0u);
}

TEST(BlockCache, SmallBlocksAreNotCached) {
  block_cache_clear();
  void* p = block_allocate(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  block_free(p, 100);
  EXPECT_EQ(block_cache_bytes(), 0u);
}

TEST(BlockCache, TensorsRoundTripThroughIt) {
  block_cache_clear();
  for (int i = 0; i < 3; ++i) {
    Tensor t = Tensor::full({512, 512}, 2.0);  // 1 MiB: cached between iterations
    EXPECT_EQ(t.data<float>()[512 * 512 - 1], 2.0f);
  }
  block_cache_clear();
  EXPECT_EQ(block_cache_bytes(), 0u);
}

}  // namespace
}  // namespace vit
