// Turning a Dataset into float batches: normalisation, training augmentation (random affine,
// random crop with padding, horizontal flip, random erasing, mixup / cutmix) and a loader that prepares the
// next batches on a background thread. Randomness is keyed by (seed, epoch, batch index, position
// in the batch) -- that is, by (seed, step, global sample index) -- so a batch is the same whatever
// the thread timing, a resumed run sees the same data, and N data-parallel ranks each preparing
// their slice of a global batch see exactly the rows one process would.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "core/fields.h"
#include "core/random.h"
#include "core/tensor.h"
#include "data/dataset.h"

namespace vit::data {

struct AugmentConfig {
  int64_t crop_padding = 0;     // random crop of the image padded by this many zero pixels
  bool hflip = false;           // random horizontal flip (off for digits)
  double rotate_degrees = 0.0;  // random affine: rotation in [-d, d]
  double translate = 0.0;       // shift up to this fraction of the size, each axis
  double scale_min = 1.0, scale_max = 1.0;
  double mixup_alpha = 0.0;   // > 0: mix pairs of images, lam ~ Beta(a, a)
  double cutmix_alpha = 0.0;  // > 0: paste a box from another image (chosen instead of mixup half the time)
  double erase_prob = 0.0;    // random erasing: this share of images gets a box of noise (2-33% of the area)
  // > 0: random resized crop (torchvision's / timm's RandomResizedCrop, first of the augmentations):
  // a box of [rrc_scale, 1] of the image's area and aspect in [3/4, 4/3], resized to the model's
  // size; from the original photo when the folder is streamed, else from the image held.
  double rrc_scale = 0.0;
  // "" (none), "ta_wide" (TrivialAugmentWide) or "rand-mM-nN" (RandAugment): data/auto_augment.h,
  // after the crop, before normalisation.
  std::string auto_augment;
  bool any() const {
    return crop_padding > 0 || hflip || rotate_degrees > 0 || translate > 0 || scale_min != 1.0 || scale_max != 1.0 ||
           mixup_alpha > 0 || cutmix_alpha > 0 || erase_prob > 0 || rrc_scale > 0 || !auto_augment.empty();
  }
  // "random resized crop 0.08-1, flip, ta_wide, ..." in the order applied, or "none" (vit info).
  std::string describe() const;
  // Every field, in the order of the "augment" object of a saved training config (core/fields.h).
  template <class Visitor>
  void visit_fields(Visitor& visit) {
    visit("crop_padding", crop_padding);
    visit("hflip", hflip);
    visit("rotate_degrees", rotate_degrees);
    visit("translate", translate);
    visit("scale_min", scale_min);
    visit("scale_max", scale_max);
    visit("mixup_alpha", mixup_alpha);
    visit("cutmix_alpha", cutmix_alpha);
    visit("erase_prob", erase_prob, Presence::Optional);
    visit("rrc_scale", rrc_scale, Presence::Optional);
    visit("auto_augment", auto_augment, Presence::Optional);
  }
};

struct Normalization {
  std::vector<double> mean, std;  // per channel, applied to pixels scaled to [0, 1]
};
// Pixels are scaled to [0, 1], so a channel's mean lies in [0, 1] and its std in [0, 0.5] (a std
// of 1 leaves pixels unscaled): means outside [0, kMaxNormalizationMean] and stds outside
// (0, kMaxNormalizationStd] are refused (a 0-255 scale mistake, an edited checkpoint).
inline constexpr double kMaxNormalizationMean = 1.0;
inline constexpr double kMaxNormalizationStd = 1.0;
// Per-channel mean and standard deviation of a dataset's pixels (scaled to [0, 1]), computed
// in double over every image (a streamed dataset: over kNormalizationSample images evenly spaced
// through it): the normalisation when a recipe does not fix one.
inline constexpr int64_t kNormalizationSample = 2048;
Normalization compute_normalization(const Dataset& data);

// The loader threads that decode a streamed dataset's images (make_batch, compute_normalization):
// set_loader_threads(n), n > 0; 0 (the default): one per core. check_loader_threads refuses a
// count outside [0, kMaxLoaderThreads], naming --loader-threads (set_loader_threads checks too).
inline constexpr int64_t kMaxLoaderThreads = 256;
void check_loader_threads(int64_t threads);
int loader_threads();
void set_loader_threads(int64_t threads);
// The pixels (C, H, W) of images `indices` of d (Dataset::read), decoded by loader_threads()
// threads; the first error (naming its file) is rethrown after all stop.
std::vector<std::vector<uint8_t>> decode_images(const Dataset& d, const std::vector<int64_t>& indices);

// torchvision's RandomResizedCrop.get_params: a box of [scale_min, 1] of the area with aspect in
// [3/4, 4/3] (ten tries, then the centre crop of the nearest allowed aspect), returned as
// (top, left, height, width) of an image of `height` x `width`.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};
CropBox random_resized_box(int64_t height, int64_t width, double scale_min, Generator& gen);

struct Batch {
  Tensor images;                 // (n, C, H, W) float32, normalised: rows [first, first + n) of the global batch
  Tensor targets;                // (n) int64
  Tensor targets_b;              // (n) int64 partner labels when mixed (lam < 1), else undefined
  double lam = 1.0;              // weight of `targets` in the loss
  std::vector<int64_t> indices;  // dataset indices of the images
  int64_t first = 0;             // position of row 0 in the global batch (data-parallel slices)
  int64_t global_size = 0;       // rows of the global batch (the loss is its mean)
};

// Deterministic 64-bit mixing of (seed, a, b) into a generator seed (splitmix64).
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0);

// Rows [begin, end) of a global batch; end < 0: to its end.
struct BatchSlice {
  int64_t begin = 0, end = -1;
  // Rank `part` of `parts`'s share of a batch of `size` rows (contiguous, as equal as can be).
  static BatchSlice share(int64_t size, int64_t part, int64_t parts) {
    return {size * part / parts, size * (part + 1) / parts};
  }
};

// Rank `part` of `parts`'s rows of batch i (of `size` rows): where `bounds` (a sharded epoch's
// per-batch row offsets, parts + 1 each; data/epoch_plan.h) says, else BatchSlice::share.
BatchSlice batch_rows(const std::vector<std::vector<int64_t>>& bounds, size_t i, int64_t size, int64_t part,
                      int64_t parts);

// The global batch `indices`, or rows [slice.begin, slice.end) of it. Randomness is keyed, not
// drawn in sequence: image b's augmentation comes from a stream seeded by (key, b) and the batch's
// mixup/cutmix draws from one seeded by key, so a slice holds exactly those rows of the full batch
// (a row mixed with a partner outside the slice computes that partner too).
Batch make_batch(const Dataset& data, const std::vector<int64_t>& indices, const AugmentConfig& augment,
                 const Normalization& norm, bool train, uint64_t key, BatchSlice slice = {});

// The order of one epoch: a seeded shuffle (or 0..N-1), cut into batches.
std::vector<std::vector<int64_t>> epoch_batches(int64_t size, int64_t batch_size, bool shuffle, bool drop_last,
                                                uint64_t seed, int64_t epoch);

// How a BatchLoader prepares an epoch's batches (make_batch's settings, and the loader's own).
struct LoaderOptions {
  AugmentConfig augment;  // applied when `train`
  Normalization norm;
  bool train = false;  // augment (training) or not (evaluation)
  uint64_t seed = 0;   // batch i's randomness is keyed by (seed, epoch, i)
  int64_t epoch = 0;
  size_t prefetch = 3;          // batches prepared ahead of the consumer (at least 1)
  size_t first = 0;             // the epoch's first batches to skip (resuming mid-epoch)
  int64_t part = 0, parts = 1;  // this rank's share of every batch (BatchSlice::share)
  // Sharded datasets: per batch, where each rank's rows start (EpochPlan::bounds, parts + 1 offsets);
  // empty: BatchSlice::share.
  std::vector<std::vector<int64_t>> bounds = {};
};

// Prepares the batches of one epoch on a background thread, `prefetch` ahead of the consumer.
// `first` skips the epoch's first batches (resuming mid-epoch): batch i is the same whether the
// epoch started at 0 or at `first`, since its randomness is keyed by (seed, epoch, i) and each
// image's by its position in the batch. With parts > 1 it prepares only share `part` of every
// batch (BatchSlice::share): one rank's rows of the global batch.
class BatchLoader {
 public:
  BatchLoader(const Dataset& data, std::vector<std::vector<int64_t>> batches, LoaderOptions options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;
  // The next batch, or nullopt when the epoch is done. Rethrows an error from the worker.
  std::optional<Batch> next();
  size_t num_batches() const { return batches_.size(); }
  size_t first_batch() const { return options_.first; }

 private:
  void work();
  const Dataset& data_;
  std::vector<std::vector<int64_t>> batches_;
  LoaderOptions options_;  // prefetch >= 1, first <= the number of batches
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<Batch> queue_;
  size_t produced_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace vit::data
