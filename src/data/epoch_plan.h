// The batches of one epoch, and for a sharded dataset which rank reads which rows of each.
//
// A dataset held in memory or a streamed folder: a seeded shuffle of every image cut into
// batches, each rank preparing its BatchSlice::share of every batch (epoch_batches).
//
// WebDataset tar shards are read as WebDataset reads them: every epoch the shards are shuffled
// (seed, epoch) and dealt to the ranks (each shard to the rank with the fewest samples so far), so
// a rank reads only its own shards; each rank reads its shards front to back through a shuffle
// buffer of kShuffleBuffer samples (seed, epoch, rank). The ranks' streams are merged in
// proportion to their lengths, so they run out together and every sample is seen once an epoch;
// each global batch holds the ranks' rows in rank order, and `bounds` says where each rank's start.
// The order depends on the seed and the rank count, never on timing or loader threads.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"

namespace vit::data {

inline constexpr int64_t kShuffleBuffer = 4096;

struct EpochPlan {
  std::vector<std::vector<int64_t>> batches;
  // Sharded: per batch, parts + 1 row offsets (rank r's rows are [bounds[r], bounds[r + 1])); empty
  // otherwise (every rank takes its BatchSlice::share).
  std::vector<std::vector<int64_t>> bounds;
  // Rank `part`'s rows of batch i.
  BatchSlice slice(size_t i, int64_t part, int64_t parts) const;
};

// Throws when a rank would get no rows of some batch (fewer shards than ranks, or shards too
// unequal), saying how to cut smaller shards.
EpochPlan plan_epoch(const Dataset& d, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed, int64_t epoch,
                     int64_t parts = 1);

// Rank `part`'s shards in epoch `epoch` (shard indices, in its reading order), for messages and tests.
std::vector<uint32_t> rank_shards(const Dataset& d, bool shuffle, uint64_t seed, int64_t epoch, int64_t part,
                                  int64_t parts);

}  // namespace vit::data
