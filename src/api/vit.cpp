// The <vit/vit.h> facade: a thin translation onto the libraries (infer::Predictor for loading,
// running and preprocessing; infer for quantization; train's options table and rules for training),
// so the C++ package, the Python module and `vit` itself run the same code.
#include "vit/vit.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/check.h"
#include "data/image.h"
#include "infer/load_options.h"
#include "infer/onnx_export.h"
#include "infer/predictor.h"
#include "infer/quantize_file.h"
#include "io/npy.h"
#include "kernels/threads.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace vit {

std::string version() { return VIT_VERSION; }

void set_num_threads(int threads) { kernels::set_num_threads(threads); }
int num_threads() { return kernels::num_threads(); }

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

LoadOptions load_options_of(const std::vector<Keyword>& keywords) {
  OptionArgs args;
  args.spelling = Spelling::Keywords;
  for (const Keyword& k : keywords) args.set(k.name, k.values);
  const LoadOptions options = infer::read_load_options(args);
  infer::resolve_load_options(options, Spelling::Keywords);  // every check now, naming the keywords
  return options;
}

struct Model::Impl {
  infer::Predictor model;
  explicit Impl(infer::Predictor m) : model(std::move(m)) {}
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

infer::Predictor& Model::handle() const {
  VIT_CHECK(impl_ != nullptr, "model", "this vit::Model was moved from: it holds no model");
  return impl_->model;
}

Model Model::load(const std::string& path, const LoadOptions& options) {
  VIT_CHECK(!path.empty(), "load", "no path given: name a checkpoint file (.safetensors)");
  infer::Predictor p = infer::Predictor::load(path, infer::resolve_load_options(options, Spelling::Keywords),
                                              infer::Predictor::WeightPages::Keep);
  p.prepare();  // the weights packed now, not at the first call
  return Model(std::make_unique<Impl>(std::move(p)));
}

namespace {

std::vector<float> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

infer::Pool pool_or_default(const infer::Predictor& m, const std::string& pool) {
  return pool.empty() ? m.default_pool() : infer::parse_pool(pool);
}

}  // namespace

std::vector<float> Model::predict(const float* nchw, int64_t batch) const {
  infer::Predictor& m = handle();
  m.require_classifier("predict", "", "it gives embeddings, with embed()");
  return values_of(m.predict(m.borrow_input(nchw, batch, "predict")));
}

std::vector<float> Model::predict(const float* values, const std::vector<int64_t>& shape) const {
  infer::Predictor& m = handle();
  m.require_classifier("predict", "", "it gives embeddings, with embed()");
  return values_of(m.predict(m.borrow_input(values, Shape(shape.begin(), shape.end()), "predict")));
}

std::vector<float> Model::predict(const std::vector<float>& values, const std::vector<int64_t>& shape) const {
  int64_t n = 1;
  for (int64_t d : shape) n *= std::max<int64_t>(d, 0);
  VIT_CHECK(static_cast<int64_t>(values.size()) == n, "predict", "{} values given for an input of shape {}",
            values.size(), shape_str(Shape(shape.begin(), shape.end())));
  return predict(values.data(), shape);
}

std::vector<float> Model::embed(const float* values, const std::vector<int64_t>& shape, const std::string& pool) const {
  infer::Predictor& m = handle();
  const infer::Pool p = pool_or_default(m, pool);
  m.check_pool(p, "embed");
  return values_of(m.embed(m.borrow_input(values, Shape(shape.begin(), shape.end()), "embed"), p));
}

std::vector<float> Model::embed(const float* nchw, int64_t batch, const std::string& pool) const {
  infer::Predictor& m = handle();
  const infer::Pool p = pool_or_default(m, pool);
  m.check_pool(p, "embed");
  return values_of(m.embed(m.borrow_input(nchw, batch, "embed"), p));
}

std::vector<int64_t> Model::embed_shape(int64_t batch, const std::string& pool) const {
  const infer::Predictor& m = handle();
  return m.embed_shape(batch, pool_or_default(m, pool));
}

std::vector<std::vector<Prediction>> Model::top_k(const std::vector<float>& logits, int64_t k) const {
  const infer::Predictor& m = handle();
  const int64_t K = m.num_classes();
  VIT_CHECK(K > 0, "top_k", "{} has no classifier head: its outputs are not class scores", m.config().name);
  VIT_CHECK(logits.size() % static_cast<size_t>(K) == 0, "top_k", "{} logits are not rows of the model's {} classes",
            logits.size(), K);
  const auto B = static_cast<int64_t>(logits.size()) / K;
  const Tensor t = Tensor::from_data(logits, {B, K});
  std::vector<std::vector<Prediction>> out;
  for (const auto& row : m.top_k(t, k)) {
    std::vector<Prediction> predictions;
    for (const infer::ClassScore& s : row) predictions.push_back({s.index, m.label(s.index), s.probability});
    out.push_back(std::move(predictions));
  }
  return out;
}

int64_t Model::image_size() const { return handle().config().image_size; }
int64_t Model::in_channels() const { return handle().config().in_channels; }
int64_t Model::num_classes() const { return handle().config().num_classes; }
bool Model::has_classifier() const { return handle().has_classifier(); }
int64_t Model::embed_dim() const { return handle().embed_dim(); }
int64_t Model::num_tokens() const { return handle().config().num_tokens(); }
const std::vector<std::string>& Model::class_names() const { return handle().loaded().class_names; }
std::string Model::layout() const { return handle().loaded().layout; }
std::string Model::family() const { return model::family_name(handle().loaded().family); }
std::string Model::config_json() const { return handle().config().to_json(); }
std::string Model::weights() const {
  const infer::LoadedModel& m = handle().loaded();
  if (m.layout != "vit" || m.weights_note.empty()) return "";
  return m.ema ? "ema" : "raw";
}
std::vector<std::string> Model::skipped_keys() const {
  const infer::LoadedModel& m = handle().loaded();
  std::vector<std::string> keys = m.missing_keys;
  keys.insert(keys.end(), m.unexpected_keys.begin(), m.unexpected_keys.end());
  return keys;
}

std::vector<float> Model::load_image(const std::string& path) const {
  return handle().preprocess(data::read_image(path));
}

std::vector<float> Model::decode_image(const void* bytes, size_t size, const std::string& name) const {
  VIT_CHECK(bytes != nullptr || size == 0, "image", "{}: null bytes", name);
  return handle().preprocess(data::decode_image(static_cast<const uint8_t*>(bytes), size, name));
}

QuantizeReport quantize(const std::string& in, const std::string& out, const LoadOptions& options, bool overwrite) {
  const infer::QuantizeFileResult r =
      infer::quantize_file(in, out, infer::resolve_load_options(options, Spelling::Keywords), overwrite, 8,
                           {.out = "out", .overwrite = "overwrite"});
  return {r.summary.tensors, r.summary.max_rel_rms_error, r.in_bytes, r.out_bytes};
}

ExportReport export_onnx(const std::string& in, const std::string& out, const LoadOptions& options, int64_t opset,
                         const std::string& precision, bool overwrite) {
  infer::ExportOptions o;
  o.opset = opset;
  o.int8 = infer::parse_export_int8(precision);
  o.overwrite = overwrite;
  o.out_flag = "out";
  o.overwrite_flag = "overwrite";
  const infer::ExportResult r =
      infer::export_onnx(in, out, infer::resolve_load_options(options, Spelling::Keywords), o);
  return {r.outputs, r.precision, r.nodes, r.bytes};
}

namespace {

TrainReport run_training(const train::TrainArgs& args, const std::function<bool(const EpochReport&)>& on_epoch) {
  train::TrainConfig config = train::make_train_config(args);
  if (on_epoch) {
    config.on_epoch = [&on_epoch](const train::EpochReport& e) {
      return on_epoch({e.epoch, e.epochs, e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy, e.test_top5,
                       e.learning_rate, e.images_per_second, e.epoch_seconds, e.elapsed_seconds, e.step, e.checkpoint});
    };
  }
  const train::TrainResult r = train::train(config);
  return {r.epochs_run, r.final_test_accuracy, r.best_test_accuracy, r.seconds};
}

}  // namespace

TrainReport train_model(const std::vector<std::string>& flags,
                        const std::function<bool(const EpochReport&)>& on_epoch) {
  return run_training(train::parse_train_flags(flags), on_epoch);
}

TrainReport train_keywords(const std::vector<TrainOption>& options,
                           const std::function<bool(const EpochReport&)>& on_epoch) {
  train::TrainArgs args;
  args.spelling = train::Spelling::Keywords;
  for (const TrainOption& o : options) args.set(o.name, o.values);
  return run_training(args, on_epoch);
}

}  // namespace vit
