// `vit shard SRC OUT`: an image folder dataset written as WebDataset tar shards (data/shards.h),
// which `vit train --data OUT` and `vit eval --data OUT` read (streamed, split over mpirun's ranks).
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "data/shards.h"

namespace vit::cli {

void add_shard_command(CLI::App& app) {
  struct Options {
    std::string src, out;
    int64_t shard_size = 10000;
    uint64_t seed = 0;
    bool overwrite = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "shard",
      "write an image folder dataset (SRC/train/<class>/<image>, SRC/test/...) as WebDataset tar shards "
      "(OUT/train-000000.tar, ..., OUT/test-000000.tar, ..., OUT/classes.txt) that vit train --data OUT streams");
  cmd->add_option("src", o->src, "the image folder dataset (train/ and test/ or val/ class folders)")->required();
  cmd->add_option("out", o->out, "the folder to write the shards into (created if missing)")->required();
  cmd->add_option("--shard-size", o->shard_size, "samples per shard")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--seed", o->seed, "the shuffle of the training samples over the shards");
  cmd->add_flag("--overwrite", o->overwrite, "replace shards already in OUT");
  cmd->callback([o] {
    const auto start = std::chrono::steady_clock::now();
    const data::ShardSetWritten w = data::write_shard_set(o->src, o->out, o->shard_size, o->seed, o->overwrite);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("train: %ld samples in %s\n", w.train_samples, data::shard_pattern(w.train).c_str());
    if (w.test_samples > 0)
      std::printf("test: %ld samples in %s\n", w.test_samples, data::shard_pattern(w.test).c_str());
    std::printf("wrote %.1f MB in %.1f s; train on them with: vit train --data %s\n",
                static_cast<double>(w.bytes) / 1e6, seconds, o->out.c_str());
  });
}

}  // namespace vit::cli
