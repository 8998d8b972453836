// In-memory image classification datasets as 8-bit pixels (N, C, H, W) + int64 labels, read
// from MNIST IDX files (raw or gzip), CIFAR-10 binary batches, or image folders
// (root/<class>/<image>.png|jpg). Every reader validates sizes and magic numbers and names the
// file in its errors.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/image.h"

namespace vit::data {

// How an image folder's decoded image becomes the dataset's (channels, height, width) pixels. By
// default it is converted to the channels and resized to the square (stb_image_resize,
// antialiased); a caller may give its own: `vit eval` shapes each photo by the model's evaluation
// transform (shorter side, centre crop, PIL's filters), as `vit predict` does.
using ImageShaper = std::function<Image(const Image&)>;

// Where one image of a sharded dataset lies: shard index, byte offset and size of its file.
struct ShardMember {
  uint32_t shard = 0;
  uint64_t offset = 0, size = 0;
};

struct Dataset {
  int64_t channels = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // (N, C, H, W); empty when streamed
  std::vector<int64_t> labels;  // (N)
  // An image folder's image files (N): decoded when a batch needs them (read()) when streamed
  // (pixels empty), with the pixel limit they were listed under; held in memory, kept to name the
  // data (a resumed run checks it is the same files, whichever way it is held).
  std::vector<std::string> files;
  // A dataset read from WebDataset tar shards (data/shards.h): the shard files and, per image, where
  // its encoded bytes lie in them. Kept when the images are decoded into memory too: which shard an
  // image came from decides which rank reads it (data/epoch_plan.h).
  std::vector<std::string> shards;
  std::vector<ShardMember> members;
  int64_t max_pixels = kDefaultMaxPixels;
  ImageShaper shaper;  // an image folder's, when not the default (read() applies it too)
  std::vector<std::string> class_names;
  std::string source;
  // Image folders: entries of the class folders that were not read as images although named like
  // one (dangling links, FIFOs, directories named *.png, ...), and other files; callers say so.
  std::vector<std::string> skipped;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
  int64_t image_bytes() const { return channels * height * width; }
  bool streamed() const { return pixels.empty() && (!files.empty() || !members.empty()); }
  bool sharded() const { return !members.empty(); }
  // Image i of a dataset held in memory (not of a streamed one: read() serves both).
  const uint8_t* image(int64_t i) const { return pixels.data() + i * image_bytes(); }
  // Image i (C, H, W) into out (image_bytes()): copied, or decoded from its file, converted to
  // `channels` and resized as load_image_folder does (the same bytes either way). Throws naming the
  // file when it no longer decodes.
  void read(int64_t i, uint8_t* out) const;
  // Image i before it was resized: a streamed folder's photo decoded and converted to `channels`,
  // else the image held (C, H, W).
  Image original(int64_t i) const;
  // Image i's file as it was read (before conversion): a folder's file or a shard's member decoded.
  Image decoded(int64_t i) const;
  // Its encoded bytes (a folder's file, a shard's member).
  std::vector<uint8_t> encoded(int64_t i) const;
  // A streamed image's box (top, left, height, width, drawn by `draw` from the photo's full height
  // and width) converted to `channels` and resized to the dataset's size; the JPEG decoded at the
  // smallest DCT scale that keeps the box at least that size (decode_image_reduced).
  Image cropped(int64_t i, const std::function<std::array<int64_t, 4>(int64_t height, int64_t width)>& draw) const;
  // "PATH" of a folder's image, "SHARD (the file at byte N)" of a shard's.
  std::string image_name(int64_t i) const;
};

// Where an image folder's images live: decoded once into memory, or streamed from disk batch by
// batch; Auto streams a folder whose decoded images would take more than kStreamAboveBytes.
enum class Residency { Auto, Memory, Stream };
inline constexpr double kStreamAboveBytes = 256.0 * 1024 * 1024;
// Whether images that take `decoded_bytes` decoded are streamed under `residency`.
bool streams(double decoded_bytes, Residency residency);
// "auto", "memory", "stream" (the --data-residency values); throws naming the flag for others.
Residency parse_residency(const std::string& text);
// The --data-residency and --loader-threads help of every command that reads image folders.
inline constexpr const char* kResidencyHelp =
    "image folders: memory (decode every image once, hold them all), stream (hold only the file list: loader "
    "threads decode each batch's images as it is needed) or auto (stream when the decoded images would take more "
    "than 256 MiB or half the memory)";
inline constexpr const char* kLoaderThreadsHelp = "threads decoding a streamed image folder's images (0: one per core)";

// "ROOT: skipped N entries of the class folders that are not image files (...): a, b, c, ..." or ""
// when nothing was skipped.
std::string skipped_note(const Dataset& d);

// MNIST IDX: images (magic 0x00000803, N x rows x cols) and labels (0x00000801, N). Files may
// be gzip-compressed (detected by content).
Dataset load_mnist_idx(const std::string& images_path, const std::string& labels_path);
// The same from the two files' bytes (raw or gzip); the paths are used in messages.
Dataset parse_mnist_idx(std::vector<uint8_t> images_file, std::vector<uint8_t> labels_file,
                        const std::string& images_path, const std::string& labels_path);
// CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes (3 x 32 x 32).
Dataset load_cifar10(const std::vector<std::string>& batch_paths);
// Appends one batch file's records (bytes in memory) to a 3x32x32 dataset; all records are
// checked before any is appended.
void append_cifar10_batch(const uint8_t* bytes, size_t size, const std::string& name, Dataset& into);
// root/<class>/<image>: classes are the sorted sub-folder names; every image is converted to
// `channels` and resized to size x size. Images over max_pixels are refused before decoding
// (decompression bombs), and so is a folder held in memory whose resized images would not fit.
// Streamed (Residency: the folder's size decides under Auto), only the file list is read here.
Dataset load_image_folder(const std::string& root, int64_t channels, int64_t size,
                          int64_t max_pixels = kDefaultMaxPixels, Residency residency = Residency::Auto,
                          const ImageShaper& shaper = {});

// The images at `indices` (in that order, repeats allowed) as a dataset of their own named
// `source`: same image shape and class names. Throws on an index out of range.
Dataset subset(const Dataset& d, const std::vector<int64_t>& indices, std::string source);

// An image file's bytes as a dataset of (channels, size, size) holds it: the shaper's (decoded
// whole), or converted and squashed (a JPEG decoded no larger than the squash needs).
Image shape_image_file(const std::vector<uint8_t>& bytes, const std::string& name, int64_t channels, int64_t size,
                       int64_t max_pixels, const ImageShaper& shaper);

// The class names of a names file (classes.txt: one per line, blank lines ignored, each name once);
// empty when there is no such file.
std::vector<std::string> read_names_file(const std::string& file);

enum class Split { Train, Test };
// A dataset directory of any of the three kinds, detected by its contents:
//   MNIST:   {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
//   CIFAR:   data_batch_{1..5}.bin / test_batch.bin (optionally under cifar-10-batches-bin/)
//   folders: train/<class>/... and test/<class>/... (or val/)
// Class names: the folder names; for IDX and CIFAR a `classes.txt` in dir (one name per line,
// e.g. Fashion-MNIST's) replaces the defaults ("0".."9"; CIFAR-10's names, or its archive's
// batches.meta.txt).
// `channels`/`size` apply to image folders (decoded images are converted and resized).
// A split without images is refused, naming its file or folder; so is a directory holding only
// the other split's files (naming what was found and what is missing).
Dataset load_dataset(const std::string& dir, Split split, int64_t channels, int64_t size,
                     int64_t max_pixels = kDefaultMaxPixels, Residency residency = Residency::Auto,
                     const ImageShaper& shaper = {});

// Labels are positions in a dataset's own class list; a model's outputs are positions in the
// list it was trained with. This maps `d` onto `known` by class name: afterwards d.class_names
// is `known` and every label is the position of its class's name there, so a test split with
// fewer classes (test/{a,c} beside train/{a,b,c}), or classes in another order, is scored
// right. A class of `d` that `known` lacks is refused, with both lists; `whose` says whose
// classes `known` are ("the training split (data/train)"). Returns the names of `known` with no
// image in `d`, for the caller to mention.
std::vector<std::string> map_classes(Dataset& d, const std::vector<std::string>& known, const std::string& whose);

}  // namespace vit::data
