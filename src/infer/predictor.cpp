// The model handle every door wraps (see predictor.h).
#include "infer/predictor.h"

#include <cmath>

#include "core/check.h"
#include "infer/preprocess.h"
#include "io/npy.h"

namespace vit::infer {

Predictor Predictor::load(const std::string& path, const LoadSettings& settings, WeightPages pages) {
  return Predictor(load_model(path, settings), pages, settings.precision);
}

Predictor::Predictor(LoadedModel model, WeightPages pages, Precision precision)
    : loaded_(std::move(model)), pages_(pages), precision_(precision), mutex_(std::make_unique<std::mutex>()) {
  VIT_CHECK(loaded_.model != nullptr, "load", "no model was loaded");
}

Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;
Predictor::~Predictor() = default;

bool Predictor::has_classifier() const { return config().has_head() && !config().projection; }

void Predictor::require_classifier(const char* op, const std::string& subject, const std::string& hint) const {
  VIT_CHECK(has_classifier(), op, "{}{} has no classifier head ({}): {}", subject.empty() ? "" : subject + ": ",
            config().name, config().projection ? "its head is CLIP's image projection" : "a feature extractor", hint);
}

const std::string& Predictor::label(int64_t index) const {
  VIT_CHECK(index >= 0 && index < static_cast<int64_t>(loaded_.class_names.size()), "predict",
            "class index {} is not one of the model's {} classes", index, loaded_.class_names.size());
  return loaded_.class_names[static_cast<size_t>(index)];
}

Pool Predictor::default_pool() const { return config().pool_kind() == model::PoolKind::Cls ? Pool::Cls : Pool::Avg; }

void Predictor::check_pool(Pool pool, const char* op) const {
  VIT_CHECK(pool != Pool::Cls || config().class_token(), op,
            "{} has no class token: pool it with avg (or take the tokens)", config().name);
}

int64_t Predictor::embed_dim() const {
  const model::ViTConfig& c = config();
  if (c.projection) return c.num_classes;
  return c.representation_size > 0 ? c.representation_size : c.dim;
}

Shape Predictor::embed_shape(int64_t batch, Pool pool) const {
  VIT_CHECK(batch >= 0, "embed", "batch must be >= 0, got {}", batch);
  if (pool == Pool::Tokens) return {batch, config().num_tokens(), config().dim};
  return {batch, embed_dim()};
}

std::string Predictor::describe(Pool pool) const {
  const model::ViTConfig& c = config();
  if (pool == Pool::Tokens) return "every token after the final norm";
  std::string what = pool == Pool::Cls
                         ? (c.dist_token ? "the mean of the class and distillation tokens" : "the class token")
                         : "the mean of the patch tokens";
  if (c.representation_size > 0) what += ", through the representation layer";
  if (c.projection) what += ", projected by the image projection";
  return what;
}

Shape Predictor::input_shape(int64_t batch) const {
  const model::ViTConfig& c = config();
  return {batch, c.in_channels, c.image_size, c.image_size};
}

void Predictor::check_input(const Tensor& images, const char* op, const std::string& subject) const {
  const model::ViTConfig& c = config();
  const std::string who = subject.empty() ? "" : subject + ": ";
  VIT_CHECK(images.dim() == 4 && images.size(1) == c.in_channels && images.size(2) == c.image_size &&
                images.size(3) == c.image_size,
            op, "{}input {} but the model takes (B, {}, {}, {})", who, shape_str(images.shape()), c.in_channels,
            c.image_size, c.image_size);
  VIT_CHECK(images.dtype() == DType::F32, op, "{}input holds {}, not float32", who, dtype_name(images.dtype()));
  const Tensor x = images.contiguous();
  check_finite_input(x.data<float>(), x.numel(), op, subject.empty() ? "the input" : subject + ": the input");
}

Tensor Predictor::borrow_input(const float* nchw, int64_t batch, const char* op) const {
  VIT_CHECK(batch >= 0, op, "batch must be >= 0, got {}", batch);
  return borrow_input(nchw, input_shape(batch), op);
}

Tensor Predictor::borrow_input(const float* values, const Shape& shape, const char* op) const {
  for (int64_t d : shape) VIT_CHECK(d >= 0, op, "input {}: negative dimension", shape_str(shape));
  const model::ViTConfig& c = config();
  VIT_CHECK(shape.size() == 4 && shape[1] == c.in_channels && shape[2] == c.image_size && shape[3] == c.image_size, op,
            "input {} but the model takes (B, {}, {}, {})", shape_str(shape), c.in_channels, c.image_size,
            c.image_size);
  if (shape[0] == 0) return Tensor::empty(shape);
  VIT_CHECK(values != nullptr, op, "the input pointer is null");
  auto* data = const_cast<float*>(values);                                                           // only read
  Tensor x = Tensor::from_blob(data, shape, DType::F32, std::shared_ptr<void>(data, [](void*) {}));  // borrowed
  check_finite_input(values, x.numel(), op, "the input");
  return x;
}

void Predictor::preprocess_into(const data::Image& image, float* out) const {
  infer::preprocess_into(image, loaded_.preprocess, config().in_channels, out);
}

std::vector<float> Predictor::preprocess(const data::Image& image) const {
  const model::ViTConfig& c = config();
  std::vector<float> out(static_cast<size_t>(c.in_channels * c.image_size * c.image_size));
  preprocess_into(image, out.data());
  return out;
}

Tensor Predictor::read_images(const std::vector<std::string>& paths, int64_t max_pixels) const {
  const model::ViTConfig& c = config();
  const int64_t per_image = c.in_channels * c.image_size * c.image_size;
  Tensor batch = Tensor::empty(input_shape(static_cast<int64_t>(paths.size())));
  for (size_t i = 0; i < paths.size(); ++i) {
    preprocess_into(data::read_image(paths[i], max_pixels), batch.data<float>() + static_cast<int64_t>(i) * per_image);
  }
  return batch;
}

Tensor Predictor::read_npy(const std::string& path, const char* op) const {
  const Tensor t = io::load_npy(path);
  VIT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, op, "{}: the .npy holds {}, not float32", path,
            dtype_name(t.dtype()));
  const Tensor input = t.to(DType::F32).contiguous();
  check_input(input, op, path);
  return input;
}

InferenceSession& Predictor::session() {
  // The session holds a reference to the model, which lives behind a unique_ptr: moving the
  // Predictor moves neither.
  if (!session_) session_ = std::make_unique<InferenceSession>(*loaded_.model, pages_, precision_);
  return *session_;
}

void Predictor::prepare() {
  std::lock_guard lock(*mutex_);
  session();
}

// Finite inputs and weights can still overflow on the way (a weight near float32's or bfloat16's
// largest value): such outputs are refused, never answered (unless non-finite weights were asked for).
Tensor Predictor::checked_output(Tensor out, const char* op) const {
  if (loaded_.nonfinite_allowed) return out;
  const Tensor x = out.contiguous();
  const float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    VIT_CHECK(std::isfinite(v[i]), op,
              "the model's output holds {} (element {} of {}): its activations overflowed in {}{}", v[i], i, x.numel(),
              precision_name(precision_),
              precision_ == Precision::BF16 ? " (bfloat16's largest finite value is 3.3895e38): try float32" : "");
  }
  return out;
}

Tensor Predictor::predict(const Tensor& images, const char* op, const std::string& hint) {
  require_classifier(op, "", hint);
  std::lock_guard lock(*mutex_);
  return checked_output(session().forward(images), op);
}

Tensor Predictor::embed(const Tensor& images, Pool pool, const char* op) {
  check_pool(pool, op);
  std::lock_guard lock(*mutex_);
  return checked_output(session().embed(images, pool), op);
}

Tensor Predictor::run(const Request& request, const Tensor& images) {
  std::lock_guard lock(*mutex_);
  return checked_output(
      request.output == Output::Logits ? session().forward(images) : session().embed(images, request.pool), "infer");
}

std::vector<std::vector<ClassScore>> Predictor::top_k(const Tensor& logits, int64_t k) const {
  const int64_t K = config().num_classes;
  VIT_CHECK(has_classifier(), "top_k", "{} has no classifier head: its outputs are not class scores", config().name);
  VIT_CHECK(logits.dim() == 2 && logits.size(1) == K, "top_k", "logits {} are not rows of the model's {} classes",
            shape_str(logits.shape()), K);
  VIT_CHECK(k >= 1, "top_k", "k must be positive, got {}", k);
  const Tensor x = logits.to(DType::F32).contiguous();
  check_finite_input(x.data<float>(), x.numel(), "top_k", "the logits");
  std::vector<std::vector<ClassScore>> out;
  for (int64_t b = 0; b < x.size(0); ++b) out.push_back(top_k_softmax(x.data<float>() + b * K, K, k));
  return out;
}

}  // namespace vit::infer
