// One epoch's batches; shards dealt to ranks (see epoch_plan.h).
#include "data/epoch_plan.h"

#include <algorithm>

#include "core/check.h"
#include "core/random.h"

namespace vit::data {
namespace {

// The dataset's images grouped by shard, each group in archive order.
std::vector<std::vector<int64_t>> images_by_shard(const Dataset& d) {
  std::vector<std::vector<int64_t>> by_shard(d.shards.size());
  for (int64_t i = 0; i < d.size(); ++i) by_shard[d.members[static_cast<size_t>(i)].shard].push_back(i);
  return by_shard;
}

// The shards of every rank, in reading order: shards shuffled by (seed, epoch) (or in order), each
// dealt to the rank with the fewest images so far.
std::vector<std::vector<uint32_t>> deal(const std::vector<std::vector<int64_t>>& by_shard, bool shuffle, uint64_t seed,
                                        int64_t epoch, int64_t parts) {
  std::vector<uint32_t> order;
  for (size_t s = 0; s < by_shard.size(); ++s) {
    if (!by_shard[s].empty()) order.push_back(static_cast<uint32_t>(s));
  }
  if (shuffle) {
    Generator gen(mix_seed(seed, 0x5348415244ULL, static_cast<uint64_t>(epoch)));
    for (int64_t i = static_cast<int64_t>(order.size()) - 1; i > 0; --i) {
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(gen.integer(i + 1))]);
    }
  }
  std::vector<std::vector<uint32_t>> dealt(static_cast<size_t>(parts));
  std::vector<size_t> images(static_cast<size_t>(parts), 0);
  for (const uint32_t s : order) {
    const auto r = static_cast<size_t>(std::min_element(images.begin(), images.end()) - images.begin());
    dealt[r].push_back(s);
    images[r] += by_shard[s].size();
  }
  return dealt;
}

// A rank's images: its shards front to back, through a shuffle buffer when shuffling.
std::vector<int64_t> rank_stream(const std::vector<std::vector<int64_t>>& by_shard, const std::vector<uint32_t>& shards,
                                 bool shuffle, uint64_t seed, int64_t epoch, int64_t part) {
  std::vector<int64_t> out, buffer;
  Generator gen(mix_seed(mix_seed(seed, 0x42554646ULL, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(part)));
  for (const uint32_t s : shards) {
    for (const int64_t i : by_shard[s]) {
      if (!shuffle) {
        out.push_back(i);
      } else if (static_cast<int64_t>(buffer.size()) < kShuffleBuffer) {
        buffer.push_back(i);
      } else {
        int64_t& pick = buffer[static_cast<size_t>(gen.integer(kShuffleBuffer))];
        out.push_back(pick);
        pick = i;
      }
    }
  }
  for (int64_t k = static_cast<int64_t>(buffer.size()) - 1; k > 0; --k) {
    std::swap(buffer[static_cast<size_t>(k)], buffer[static_cast<size_t>(gen.integer(k + 1))]);
  }
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

}  // namespace

BatchSlice EpochPlan::slice(size_t i, int64_t part, int64_t parts) const {
  return batch_rows(bounds, i, static_cast<int64_t>(batches.at(i).size()), part, parts);
}

std::vector<uint32_t> rank_shards(const Dataset& d, bool shuffle, uint64_t seed, int64_t epoch, int64_t part,
                                  int64_t parts) {
  VIT_CHECK(d.sharded() && parts >= 1 && part >= 0 && part < parts, "data",
            "rank {} of {}: not a sharded dataset's rank", part, parts);
  return deal(images_by_shard(d), shuffle, seed, epoch, parts)[static_cast<size_t>(part)];
}

EpochPlan plan_epoch(const Dataset& d, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed, int64_t epoch,
                     int64_t parts) {
  VIT_CHECK(batch_size > 0, "data", "batch size must be positive, got {}", batch_size);
  VIT_CHECK(parts >= 1, "data", "{} ranks", parts);
  EpochPlan plan;
  if (!d.sharded()) {
    plan.batches = epoch_batches(d.size(), batch_size, shuffle, drop_last, seed, epoch);
    return plan;
  }
  const std::vector<std::vector<int64_t>> by_shard = images_by_shard(d);
  const std::vector<std::vector<uint32_t>> dealt = deal(by_shard, shuffle, seed, epoch, parts);
  std::vector<std::vector<int64_t>> streams;
  std::vector<int64_t> length;
  for (int64_t r = 0; r < parts; ++r) {
    streams.push_back(rank_stream(by_shard, dealt[static_cast<size_t>(r)], shuffle, seed, epoch, r));
    length.push_back(static_cast<int64_t>(streams.back().size()));
  }
  // Each position of the epoch goes to the rank whose next image is most due (taken + 1) / length:
  // the ranks drain in proportion and run out together.
  const int64_t total = d.size();
  VIT_CHECK(total < (int64_t{1} << 31), "data", "{}: {} images; a sharded dataset holds fewer than 2^31", d.source,
            total);
  std::vector<int64_t> taken(static_cast<size_t>(parts), 0);
  std::vector<int> rank_of(static_cast<size_t>(total));
  for (int64_t p = 0; p < total; ++p) {
    int best = -1;
    for (int r = 0; r < parts; ++r) {
      const auto ur = static_cast<size_t>(r);
      if (taken[ur] == length[ur]) continue;
      if (best < 0) {
        best = r;
        continue;
      }
      const auto ub = static_cast<size_t>(best);
      // (taken[r] + 1) / length[r] < (taken[best] + 1) / length[best], in integers (below 2^62: sizes < 2^31)
      if ((taken[ur] + 1) * length[ub] < (taken[ub] + 1) * length[ur]) best = r;
    }
    rank_of[static_cast<size_t>(p)] = best;
    ++taken[static_cast<size_t>(best)];
  }
  std::fill(taken.begin(), taken.end(), 0);
  for (int64_t start = 0; start < total; start += batch_size) {
    const int64_t end = std::min(total, start + batch_size);
    if (drop_last && end - start < batch_size && !plan.batches.empty()) break;
    std::vector<int64_t> count(static_cast<size_t>(parts), 0);
    for (int64_t p = start; p < end; ++p) ++count[static_cast<size_t>(rank_of[static_cast<size_t>(p)])];
    std::vector<int64_t> batch, bounds{0};
    for (size_t r = 0; r < static_cast<size_t>(parts); ++r) {
      VIT_CHECK(parts == 1 || count[r] > 0, "data",
                "{}: its {} shards cannot feed {} ranks: rank {} would get no images of batch {} (each rank reads "
                "whole shards; more, smaller shards even them out: vit shard --shard-size)",
                d.source, d.shards.size(), parts, r, plan.batches.size());
      for (int64_t k = 0; k < count[r]; ++k) batch.push_back(streams[r][static_cast<size_t>(taken[r]++)]);
      bounds.push_back(static_cast<int64_t>(batch.size()));
    }
    plan.batches.push_back(std::move(batch));
    plan.bounds.push_back(std::move(bounds));
  }
  return plan;
}

}  // namespace vit::data
