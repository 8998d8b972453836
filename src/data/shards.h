// WebDataset tar shards as a dataset: DIR/train-000000.tar, DIR/train-000001.tar, ... (and test-
// or val- for the test split), each sample a group of files with one key: an image (.jpg, .jpeg,
// .png or .bmp) and its label, .cls (the class's number) or .txt (the class's name). Class names
// come from DIR/classes.txt (one per line) when it is there; else from the .txt names (sorted), or
// "0".."N-1" for numbers. Listing reads only the archives' headers and labels; the images stay in
// the shards and are read when a batch needs them (or decoded into memory once, as for folders).
// `vit shard` writes such a set from an image folder dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace vit::data {

// The shards of one split: DIR/<prefix>-*.tar, sorted by name; empty when there are none.
std::vector<std::string> find_shards(const std::string& dir, const std::string& prefix);

// The samples of `shards` as a dataset of (channels, size, size) images, their labels read from
// each sample's .cls or .txt; `classes_file` (may not exist) names the classes. Streamed or
// decoded into memory as `residency` says (Auto: by the decoded size, as image folders).
Dataset load_shards(const std::vector<std::string>& shards, const std::string& classes_file, int64_t channels,
                    int64_t size, int64_t max_pixels = kDefaultMaxPixels, Residency residency = Residency::Auto,
                    const ImageShaper& shaper = {});

// One shard's bytes in memory listed as load_shards lists a file (the fuzz target's door): a
// dataset whose members say where each image lies in `bytes` and whose labels are resolved
// without a classes file; its images are not readable through Dataset::read.
Dataset list_shard_bytes(const uint8_t* bytes, size_t size, const std::string& name);

// The encoded bytes of image i of a sharded dataset (as its shard holds them).
std::vector<uint8_t> read_shard_member(const Dataset& d, int64_t i);

// `vit shard`: an image folder dataset (SRC/train/<class>/..., SRC/test|val/<class>/...) written as
// shards into OUT: OUT/train-000000.tar ... and OUT/test-000000.tar ... of at most
// `samples_per_shard` samples (train in an order shuffled by `seed`, as shards should be: a
// shuffle buffer cannot mix a shard of one class), and OUT/classes.txt. Each sample: the image
// file's bytes as they were (KEY.jpg/.png/.bmp) and KEY.cls; keys are the sample's position
// ("000000042"). Every shard is written whole or not at all.
struct ShardSetWritten {
  std::vector<std::string> train, test;  // the shard files
  int64_t train_samples = 0, test_samples = 0;
  uint64_t bytes = 0;
};
ShardSetWritten write_shard_set(const std::string& src, const std::string& out, int64_t samples_per_shard,
                                uint64_t seed, bool overwrite);

// "DIR/train-{000000..000146}.tar" for a list of shards named by write_shard_set.
std::string shard_pattern(const std::vector<std::string>& shards);

}  // namespace vit::data
