// infer::Predictor: the one model handle every door wraps (the `vit` commands, <vit/vit.h>, the
// Python module, `vit serve`), as gemma.cpp's `Gemma` sits under its CLI, server and bindings.
// It holds a loaded model and its inference session, and answers, once and for all doors:
//   - what the model can do: a classifier or not (a CLIP projection and a feature extractor are
//     not), its default pooling, whether a pooling applies, the embedding shapes;
//   - whether an input is one it takes: (B, C, H, W) shape, finite values; images decoded and
//     preprocessed as the checkpoint says;
//   - predict (logits), embed, top-k with class names.
// Its messages are the ones every door shows ("[op] ..."). Calls that run the model are
// serialised (the session's buffers are one arena); the others only read.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/image.h"
#include "infer/inference.h"
#include "infer/load_model.h"
#include "infer/model_io.h"
#include "infer/request.h"

namespace vit::infer {

class Predictor {
 public:
  using WeightPages = InferenceSession::WeightPages;
  // Loads the file (any layout load_model reads). The weights are packed for the inference session
  // at the first call that runs the model, or by prepare().
  // The session runs at settings.precision.
  static Predictor load(const std::string& path, const LoadSettings& settings = {},
                        WeightPages pages = WeightPages::Keep);
  explicit Predictor(LoadedModel model, WeightPages pages = WeightPages::Keep, Precision precision = Precision::F32);
  Precision precision() const { return precision_; }
  Predictor(Predictor&&) noexcept;
  Predictor& operator=(Predictor&&) noexcept;
  ~Predictor();

  // ---- what the model is ----
  const LoadedModel& loaded() const { return loaded_; }
  const model::ViTConfig& config() const { return loaded_.model->config(); }
  // A head that predicts classes: not CLIP's image projection, not a feature extractor.
  bool has_classifier() const;
  // Throws "[op] SUBJECT: NAME has no classifier head (WHY): HINT" when has_classifier() is false
  // (no "SUBJECT: " when subject is empty).
  void require_classifier(const char* op, const std::string& subject, const std::string& hint) const;
  int64_t num_classes() const { return has_classifier() ? config().num_classes : 0; }
  const std::string& label(int64_t index) const;
  // The model's own pooling: cls for a class-token model, else avg.
  Pool default_pool() const;
  // Throws "[op] NAME has no class token: ..." for Pool::Cls on a model without one.
  void check_pool(Pool pool, const char* op) const;
  int64_t embed_dim() const;                          // width of a cls / avg embedding (CLIP: projected)
  Shape embed_shape(int64_t batch, Pool pool) const;  // (B, E), or (B, N, D) for tokens
  std::string describe(Pool pool) const;              // "the class token, projected by the image projection"

  // ---- inputs ----
  Shape input_shape(int64_t batch) const;  // (B, C, S, S)
  // Refuses a batch that is not (B, C, S, S) with B >= 0, or that holds NaN/Inf:
  // "[op] SUBJECT: input (2, 10) but the model takes (B, 3, 32, 32)".
  void check_input(const Tensor& images, const char* op, const std::string& subject) const;
  // A (B, C, S, S) view of caller memory (not copied), checked as check_input does.
  Tensor borrow_input(const float* nchw, int64_t batch, const char* op) const;
  Tensor borrow_input(const float* values, const Shape& shape, const char* op) const;
  // An image decoded, converted to the model's channels, resized, cropped and normalised as the
  // checkpoint says: (C, S, S) floats into out.
  void preprocess_into(const data::Image& image, float* out) const;
  std::vector<float> preprocess(const data::Image& image) const;
  // Image files as one checked (B, C, S, S) batch; the first file that cannot be read is the error.
  Tensor read_images(const std::vector<std::string>& paths, int64_t max_pixels = data::kDefaultMaxPixels) const;
  // A float32 (or float64, narrowed) .npy batch, checked.
  Tensor read_npy(const std::string& path, const char* op) const;

  // ---- running ----
  // Packs the weights for the session now (a server does it before it listens).
  void prepare();
  // Logits (B, K); refuses a model without a classifier (naming what it is, and `hint`).
  Tensor predict(const Tensor& images, const char* op = "predict",
                 const std::string& hint = "it gives embeddings, with embed");
  Tensor embed(const Tensor& images, Pool pool, const char* op = "embed");
  // What a batcher runs: request.output selects predict or embed(request.pool). Checks nothing
  // beyond the session's own: callers check requests when they arrive.
  Tensor run(const Request& request, const Tensor& images);
  // The k most probable classes of each row of logits (B, K): softmax in double, ties to the
  // lower index. Refuses non-finite logits.
  std::vector<std::vector<ClassScore>> top_k(const Tensor& logits, int64_t k) const;

 private:
  Tensor checked_output(Tensor out, const char* op) const;
  InferenceSession& session();  // created on first use; the caller holds mutex_
  LoadedModel loaded_;
  WeightPages pages_;
  Precision precision_;
  std::unique_ptr<InferenceSession> session_;
  std::unique_ptr<std::mutex> mutex_;  // one run at a time (the session's arena)
};

}  // namespace vit::infer
