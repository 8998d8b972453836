// The <vit/vit.h> facade: a thin translation onto the libraries (infer for loading, the session,
// preprocessing and quantization; the `vit train` command's own flag parsing for training), so the
// C++ package, the Python module and `vit` itself run the same code.
#include "vit/vit.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <mutex>

#include "cli/commands.h"
#include "core/check.h"
#include "data/image.h"
#include "infer/inference.h"
#include "infer/model_io.h"
#include "infer/pretrained.h"
#include "infer/quantize_file.h"
#include "io/npy.h"
#include "train/trainer.h"

namespace vit {

std::string version() { return VIT_VERSION; }

void set_num_threads(int threads) {
  VIT_CHECK(threads >= 0, "threads", "the number of threads must be >= 0 (0: all cores), got {}", threads);
  cli::set_threads(threads);
}

Array load_npy(const std::string& path) {
  const Tensor t = io::load_npy(path).to(DType::F32).contiguous();
  Array a;
  a.shape = t.shape();
  a.values.assign(t.data<float>(), t.data<float>() + t.numel());
  return a;
}

void save_npy(const std::string& path, const std::vector<float>& values, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    VIT_CHECK(d >= 0, "npy", "{}: negative dimension {} in the shape", path, d);
    n *= d;
  }
  VIT_CHECK(n == static_cast<int64_t>(values.size()), "npy", "{}: the shape holds {} values, {} given", path, n,
            values.size());
  Tensor t = Tensor::empty(shape);
  std::copy(values.begin(), values.end(), t.data<float>());
  io::save_npy(path, t);
}

namespace {

infer::LoadOptions to_internal(const LoadOptions& o) {
  infer::LoadOptions options;
  if (!o.layout.empty()) options.layout = model::parse_layout(o.layout);
  VIT_CHECK(o.heads >= 0, "load", "heads must be >= 0 (0: from the file), got {}", o.heads);
  options.num_heads = o.heads;
  if (o.eps != 0.0) {
    VIT_CHECK(o.eps > 0 && std::isfinite(o.eps), "load", "eps must be positive, got {}", o.eps);
    options.eps = o.eps;
  }
  if (!o.act.empty()) options.act = o.act;
  VIT_CHECK(o.image_size >= 0, "load", "image_size must be >= 0 (0: the checkpoint's), got {}", o.image_size);
  options.image_size = o.image_size;
  options.strict = o.strict;
  options.use_ema = o.ema;
  options.allow_nonfinite = o.allow_nonfinite;
  return options;
}

}  // namespace

struct Model::Impl {
  infer::LoadedModel loaded;
  std::unique_ptr<infer::InferenceSession> session;
  mutable std::mutex mutex;  // the session's buffers are one arena: one call at a time

  const model::ViTConfig& config() const { return loaded.model->config(); }
  // A (B, C, H, W) view of caller memory, checked; no copy.
  Tensor input(const float* nchw, int64_t batch, const char* op) const {
    const model::ViTConfig& c = config();
    VIT_CHECK(batch >= 0, op, "batch must be >= 0, got {}", batch);
    VIT_CHECK(nchw != nullptr || batch == 0, op, "the input pointer is null");
    const Shape shape{batch, c.in_channels, c.image_size, c.image_size};
    if (batch == 0) return Tensor::empty(shape);
    infer::check_finite_input(nchw, batch * c.in_channels * c.image_size * c.image_size, op, "the input");
    auto* data = const_cast<float*>(nchw);                                                         // only read
    return Tensor::from_blob(data, shape, DType::F32, std::shared_ptr<void>(data, [](void*) {}));  // borrowed
  }
  // The checkpoint's preprocessing: (C, S, S) floats.
  std::vector<float> preprocessed(const data::Image& image) const {
    const model::ViTConfig& c = config();
    std::vector<float> out(static_cast<size_t>(c.in_channels * c.image_size * c.image_size));
    infer::preprocess_into(image, loaded.preprocess, c.in_channels, out.data());
    return out;
  }
  std::string pool_or_default(const std::string& pool) const {
    if (!pool.empty()) return pool;
    return config().pool == "cls" ? "cls" : "avg";
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path, const LoadOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->loaded = infer::load_model(path, to_internal(options));
  // Keep the mapped weights: the model may be inspected later (config, skipped keys).
  impl->session = std::make_unique<infer::InferenceSession>(*impl->loaded.model);
  return Model(std::move(impl));
}

std::vector<float> Model::predict(const float* nchw, int64_t batch) const {
  VIT_CHECK(has_classifier(), "predict", "{} has no classifier head ({}): it gives embeddings, with embed()",
            impl_->config().name,
            impl_->config().projection ? "its head is CLIP's image projection" : "a feature extractor");
  const Tensor x = impl_->input(nchw, batch, "predict");
  std::lock_guard lock(impl_->mutex);
  const Tensor logits = impl_->session->forward(x);
  return std::vector<float>(logits.data<float>(), logits.data<float>() + logits.numel());
}

std::vector<float> Model::embed(const float* nchw, int64_t batch, const std::string& pool) const {
  const Tensor x = impl_->input(nchw, batch, "embed");
  std::lock_guard lock(impl_->mutex);
  const Tensor out = impl_->session->embed(x, infer::parse_pool(impl_->pool_or_default(pool)));
  return std::vector<float>(out.data<float>(), out.data<float>() + out.numel());
}

std::vector<int64_t> Model::embed_shape(int64_t batch, const std::string& pool) const {
  const std::string p = impl_->pool_or_default(pool);
  VIT_CHECK(p == "cls" || p == "avg" || p == "tokens", "embed", "pool must be cls, avg or tokens, got '{}'", p);
  if (p == "tokens") return {batch, num_tokens(), impl_->config().dim};
  return {batch, embed_dim()};
}

std::vector<std::vector<Prediction>> Model::top_k(const std::vector<float>& logits, int64_t k) const {
  const int64_t K = num_classes();
  VIT_CHECK(K > 0 && logits.size() % static_cast<size_t>(K) == 0, "top_k",
            "{} logits are not rows of the model's {} classes", logits.size(), K);
  VIT_CHECK(k > 0, "top_k", "k must be positive, got {}", k);
  const int64_t B = static_cast<int64_t>(logits.size()) / K;
  std::vector<std::vector<Prediction>> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    for (const infer::ClassScore& s : infer::top_k_softmax(logits.data() + b * K, K, k))
      out[static_cast<size_t>(b)].push_back({s.index, class_names()[static_cast<size_t>(s.index)], s.probability});
  }
  return out;
}

int64_t Model::image_size() const { return impl_->config().image_size; }
int64_t Model::in_channels() const { return impl_->config().in_channels; }
int64_t Model::num_classes() const { return impl_->config().num_classes; }
bool Model::has_classifier() const { return impl_->config().has_head() && !impl_->config().projection; }
int64_t Model::embed_dim() const {
  const model::ViTConfig& c = impl_->config();
  if (c.projection) return c.num_classes;
  return c.representation_size > 0 ? c.representation_size : c.dim;
}
int64_t Model::num_tokens() const { return impl_->config().num_tokens(); }
const std::vector<std::string>& Model::class_names() const { return impl_->loaded.class_names; }
std::string Model::layout() const { return impl_->loaded.layout; }
std::string Model::family() const { return impl_->loaded.family; }
std::string Model::config_json() const { return impl_->config().to_json(); }
std::vector<std::string> Model::skipped_keys() const {
  std::vector<std::string> keys = impl_->loaded.missing_keys;
  keys.insert(keys.end(), impl_->loaded.unexpected_keys.begin(), impl_->loaded.unexpected_keys.end());
  return keys;
}

std::vector<float> Model::load_image(const std::string& path) const {
  return impl_->preprocessed(data::read_image(path));
}

std::vector<float> Model::decode_image(const void* bytes, size_t size, const std::string& name) const {
  VIT_CHECK(bytes != nullptr || size == 0, "image", "{}: null bytes", name);
  return impl_->preprocessed(data::decode_image(static_cast<const uint8_t*>(bytes), size, name));
}

QuantizeReport quantize(const std::string& in, const std::string& out, const LoadOptions& options, bool overwrite) {
  const infer::QuantizeFileResult r = infer::quantize_file(in, out, to_internal(options), overwrite);
  return {r.summary.tensors, r.summary.max_rel_rms_error, r.in_bytes, r.out_bytes};
}

TrainReport train_model(const std::vector<std::string>& flags,
                        const std::function<bool(const EpochReport&)>& on_epoch) {
  CLI::App app("vit", "vit");
  app.require_subcommand(1);
  TrainReport report;
  bool ran = false;
  cli::add_train_command(app, [&](train::TrainConfig& config) {
    if (on_epoch) {
      config.on_epoch = [&on_epoch](const train::EpochReport& e) {
        return on_epoch({e.epoch, e.epochs, e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy, e.test_top5,
                         e.learning_rate, e.images_per_second, e.epoch_seconds, e.elapsed_seconds, e.step,
                         e.checkpoint});
      };
    }
    const train::TrainResult r = train::train(config);
    report = {r.epochs_run, r.final_test_accuracy, r.best_test_accuracy, r.seconds};
    ran = true;
  });
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::reverse(args.begin(), args.end());  // CLI11 takes them last to first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    fail("train", "{}", e.what());
  }
  VIT_CHECK(ran, "train", "no training ran (--help?)");
  return report;
}

}  // namespace vit
