// Resuming a run (--resume DIR): which of the caller's settings a resumed run takes, which must
// agree with its checkpoint (refused, naming the flag and both values), and whether the data is
// still the data the run was trained on (its fingerprint is saved in every checkpoint).
#pragma once

#include <string>

#include "checkpoint/checkpoint.h"
#include "data/dataset.h"
#include "train/train_config.h"

namespace vit::train {

// The run's config from its checkpoint, with what may change taken from `asked`: --data (the same
// data, moved), --epochs (to extend the run), --threads, --checkpoint-every, --max-pixels,
// --skip-nonfinite, --plain. Every other flag in asked.given_flags must agree with the run or is
// refused, and with asked.model_explicit the asked model must equal the checkpoint's field by
// field (model flags are not listed in given_flags: the model they make is compared). Callers
// that list no given_flags get the architecture check of asked.model_explicit only.
TrainConfig resume_config(const TrainConfig& asked, const checkpoint::LoadedCheckpoint& checkpoint,
                          const std::string& checkpoint_path);

// What identifies a run's data: image counts, image shape and a hash of every pixel and label
// (JSON, saved as the checkpoint's "dataset").
std::string dataset_fingerprint(const data::Dataset& train, const data::Dataset& test);

// On resume, before training: refuses data that is not what the run was trained on (its class
// names, and its fingerprint when the checkpoint has one), naming both paths and what differs.
// Returns true when the data is the run's but was moved (data_dir differs from the run's).
bool check_same_data(const checkpoint::CheckpointInfo& run, const std::string& run_data_dir,
                     const std::string& data_dir, const data::Dataset& train, const std::string& fingerprint);

}  // namespace vit::train
