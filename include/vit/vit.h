// <vit/vit.h>: the C++ door to vit (installed with `cmake --install`, found with
// `find_package(vit CONFIG REQUIRED)`, linked as `vit::vit`). It loads any checkpoint `vit`
// reads (our own, int8 ones, timm, torchvision and Hugging Face layouts, ViT's descendants),
// runs it on float32 (B, C, H, W) batches, decodes and preprocesses images as the checkpoint
// says, quantizes, and trains with the flags of `vit train`. Only standard types cross it.
//
// Errors: every function throws vit::Error (a std::runtime_error) with the same message the
// `vit` command prints, e.g. "[checkpoint] model.safetensors: unexpected keys [...]".
// Threads: a Model's calls are serialised (each call uses all the threads set with
// vit::set_num_threads); use one Model per thread to run several at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vit/error.h"
#include "vit/load_options.h"

namespace vit {

namespace infer {
class Predictor;
}

// The library's version ("0.2.0").
std::string version();
// Threads for every following call (0: all cores), as --threads does.
void set_num_threads(int threads);
// The threads the next call will use.
int num_threads();

// A float32 array in NumPy's .npy format: what numpy.save writes and numpy.load reads.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major (C order), product(shape) of them
};
// Reads a little-endian float32 (or float64, narrowed) C-order .npy file.
Array load_npy(const std::string& path);
// Writes values (row-major, product(shape) of them) as a float32 .npy file.
void save_npy(const std::string& path, const std::vector<float>& values, const std::vector<int64_t>& shape);

// An option as a keyword and its values as text: {"heads", {"4"}}, {"mean", {"0.5", "0.5", "0.5"}}
// (a flag's name with '_' for '-'; a flag alone: {"true"}).
struct Keyword {
  std::string name;
  std::vector<std::string> values;
};

// The load options as keywords ({{"heads", {"4"}}, {"strict", {"false"}}}: what Python's
// vit.load(path, **keywords) passes), read by the one table of load options with its messages
// ("[load] heads: must be a whole number >= 1, got 0", "[load] unknown option hedas (known: ...)").
LoadOptions load_options_of(const std::vector<Keyword>& keywords);

struct Prediction {
  int64_t index = 0;
  std::string label;
  double probability = 0.0;
};

class Model {
 public:
  static Model load(const std::string& path, const LoadOptions& options = {});
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // nchw: `batch` images of in_channels() x image_size() x image_size() floats, row-major,
  // preprocessed (load_image / decode_image give them so). Returns the logits, row-major (B, K).
  // A model without a classifier head (DINOv2, a CLIP image tower) refuses: use embed().
  // The pointer must hold batch x in_channels() x image_size()^2 floats: nothing can check that.
  std::vector<float> predict(const float* nchw, int64_t batch) const;
  // The same for an array given with its shape, which is checked: "[predict] input (2, 3, 16, 16)
  // but the model takes (B, 3, 32, 32)". values.size() must be the product of shape.
  std::vector<float> predict(const std::vector<float>& values, const std::vector<int64_t>& shape) const;
  std::vector<float> predict(const float* values, const std::vector<int64_t>& shape) const;
  // Embeddings, row-major: pool "cls" / "avg" give (B, embed_dim()) (CLIP: projected), "tokens"
  // (B, num_tokens(), dim); "" is the model's own pooling. embed_shape() tells the shape.
  std::vector<float> embed(const float* nchw, int64_t batch, const std::string& pool = "") const;
  std::vector<float> embed(const float* values, const std::vector<int64_t>& shape, const std::string& pool = "") const;
  std::vector<int64_t> embed_shape(int64_t batch, const std::string& pool = "") const;
  // Softmax over each row of logits (B x num_classes()) and the k most probable classes.
  std::vector<std::vector<Prediction>> top_k(const std::vector<float>& logits, int64_t k) const;

  int64_t image_size() const;
  int64_t in_channels() const;
  int64_t num_classes() const;  // 0 for a feature extractor; a CLIP model's projection width otherwise
  bool has_classifier() const;  // a head that predicts classes (not a CLIP projection, not features only)
  int64_t embed_dim() const;    // width of embed(pool "cls" / "avg")
  int64_t num_tokens() const;   // tokens in front of the head: prefix tokens + patches
  const std::vector<std::string>& class_names() const;
  std::string layout() const;       // "vit" (ours), "timm", "torchvision", "huggingface", "jax"
  std::string family() const;       // "vit", "deit", "dinov2", "clip"
  std::string config_json() const;  // the architecture, as checkpoints record it
  std::string weights() const;      // a checkpoint holding raw and EMA weights: which were loaded, "ema" or "raw"
  std::vector<std::string> skipped_keys() const;  // with strict = false: what was not loaded

  // An image file (PNG, JPEG, BMP, ...) or its encoded bytes, decoded and preprocessed as the
  // checkpoint says (resize, crop, normalisation): in_channels() x image_size()^2 floats.
  std::vector<float> load_image(const std::string& path) const;
  std::vector<float> decode_image(const void* bytes, size_t size, const std::string& name = "image") const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  infer::Predictor& handle() const;  // throws vit::Error on a moved-from Model
  std::unique_ptr<Impl> impl_;
};

// An int8 copy of a checkpoint (`vit quantize`): Linear weights int8 per output channel.
struct QuantizeReport {
  int64_t tensors = 0;           // Linear weights quantized
  double max_rel_rms_error = 0;  // worst per-tensor RMS error / RMS weight
  uint64_t in_bytes = 0, out_bytes = 0;
};
QuantizeReport quantize(const std::string& in, const std::string& out, const LoadOptions& options = {},
                        bool overwrite = false);

// The model as ONNX (`vit export`): input "input" (batch, C, H, W), outputs "logits" (classifiers)
// and "embedding", a dynamic batch, the class names and preprocessing in its metadata_props;
// opset 13 to 17; precision "float32" or "int8" (ONNX Runtime's dynamic-quantization pattern, which
// it fuses into DynamicQuantizeMatMul). Any file vit loads, .onnx included, may be the input.
struct ExportReport {
  std::vector<std::string> outputs;  // "logits", "embedding"
  std::string precision;             // "float32" or "int8"
  int64_t nodes = 0;
  uint64_t bytes = 0;
};
ExportReport export_onnx(const std::string& in, const std::string& out, const LoadOptions& options = {},
                         int64_t opset = 17, const std::string& precision = "float32", bool overwrite = false);

// Training: the flags of `vit train`, the same configuration (e.g. {"--data", "data/mnist",
// "--preset", "vit_digits", "--epochs", "3", "--out", "runs/x"}). on_epoch, if given, is called
// after each epoch's checkpoint is written; returning false stops the run there (resumable with
// "--resume DIR"). Prints the run's lines to stdout as the command does.
struct EpochReport {
  int64_t epoch = 0, epochs = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0, test_top5 = 0;
  double learning_rate = 0, images_per_second = 0, epoch_seconds = 0, elapsed_seconds = 0;
  int64_t step = 0;
  std::string checkpoint;
};
struct TrainReport {
  int64_t epochs_run = 0;
  double final_test_accuracy = 0, best_test_accuracy = 0, seconds = 0;
};
// Refused flags, values and combinations throw vit::Error with the command's messages
// ("[train] --lr: must be a number, got 'x'", "[train] unknown option --lrr").
TrainReport train_model(const std::vector<std::string>& flags,
                        const std::function<bool(const EpochReport&)>& on_epoch = {});
// The same with the options as keywords: {{"data", {"data/mnist"}}, {"epochs", {"3"}},
// {"hflip", {"false"}}, {"mean", {"0.5", "0.5", "0.5"}}} (a flag's name with '_' for '-'; what
// Python's vit.train(**keywords) passes). Messages name them as given ("[train] lr: ...").
using TrainOption = Keyword;
TrainReport train_keywords(const std::vector<TrainOption>& options,
                           const std::function<bool(const EpochReport&)>& on_epoch = {});

}  // namespace vit
