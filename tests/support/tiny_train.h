// The tiny training run the trainer tests share: the digits recipe on a one-block, width-16 model
// over write_toy_mnist's 28x28 images (support/files.h), one thread and no augmentation, EMA or
// drop-path, so that a run takes a second or two and is bit-reproducible.
#pragma once

#include <cstdint>
#include <string>

#include "train/train_config.h"

namespace vit::testing {

inline train::TrainConfig tiny_train_config(const std::string& data, const std::string& out, int64_t epochs) {
  train::TrainConfig c = train::digits_recipe();
  c.data_dir = data;
  c.out_dir = out;
  c.epochs = epochs;
  c.model.patch_size = 7;
  c.model.dim = 16;
  c.model.depth = 1;
  c.model.num_heads = 2;
  c.model.pool = "mean";
  c.model.drop_path = 0.0;
  c.ema_decay = 0.0;  // 120 steps are too few for the recipe's EMA to catch up
  c.batch_size = 32;
  c.lr = 3e-3;
  c.threads = 1;  // bit-reproducible
  c.progress = 0;
  c.augment = {};  // keep the toy task fast and exact
  return c;
}

}  // namespace vit::testing
