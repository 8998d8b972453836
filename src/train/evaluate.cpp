// Evaluation (see evaluate.h).
#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "infer/inference.h"
#include "infer/model_io.h"

namespace vit::train {

Tta parse_tta(const std::string& name) {
  if (name == "none") return Tta::None;
  if (name == "flip") return Tta::Flip;
  fail("eval", "--tta {}: unknown test-time augmentation (none or flip)", name);
}

const char* tta_name(Tta tta) { return tta == Tta::Flip ? "flip" : "none"; }

Tensor flip_horizontal(const Tensor& images) {
  VIT_CHECK(images.dim() == 4, "eval", "flip: images must be (B, C, H, W), got {} dims", images.dim());
  const Tensor x = images.contiguous();
  Tensor out = Tensor::empty(x.shape());
  const int64_t W = x.shape()[3], rows = x.numel() / std::max<int64_t>(W, 1);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t w = 0; w < W; ++w) dst[r * W + w] = src[r * W + W - 1 - w];
  }
  return out;
}

EvalResult evaluate(model::VisionTransformer& model, const data::Dataset& data, const data::Normalization& norm,
                    int64_t batch_size, const EvalShard& shard, infer::Precision precision, Tta tta) {
  const int64_t K = model.config().num_classes;
  VIT_CHECK(data.size() > 0, "evaluate", "{}: no images to evaluate on", data.source);
  VIT_CHECK(data.num_classes() <= K, "evaluate", "the data has {} classes but the model predicts {}",
            data.num_classes(), K);
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  EvalResult r;
  r.count = data.size();
  r.confusion.assign(K, std::vector<int64_t>(K, 0));
  r.predictions.assign(data.size(), -1);
  r.confidence.assign(data.size(), 0.0f);
  double loss_sum = 0.0;
  int64_t correct1 = 0, correct5 = 0;
  // The graph-free inference path when the model allows it (float32), else the graph (float32 only).
  std::unique_ptr<infer::InferenceSession> session;
  const bool fast = infer::InferenceSession::supports(model);
  VIT_CHECK(fast || precision == infer::Precision::F32, "evaluate",
            "precision {}: {} has parameters only the float32 graph runs (not contiguous float32)",
            infer::precision_name(precision), model.config().name);
  if (fast) {
    session = std::make_unique<infer::InferenceSession>(model, infer::InferenceSession::WeightPages::Keep, precision);
  }
  const data::BatchSlice mine = data::BatchSlice::share(data.size(), shard.part, shard.parts);
  for (int64_t from = mine.begin; from < mine.end; from += batch_size) {
    std::vector<int64_t> indices(static_cast<size_t>(std::min(batch_size, mine.end - from)));
    std::iota(indices.begin(), indices.end(), from);
    const data::Batch batch = data::make_batch(data, indices, {}, norm, false, 0);
    auto run = [&](const Tensor& images) {
      return session ? Variable(session->forward(images)) : model(Variable(images));
    };
    const Variable logits = run(batch.images);
    const auto B = static_cast<int64_t>(indices.size());
    Tensor probs = softmax(logits, 1).data().contiguous();
    if (tta == Tta::Flip) {  // the mean of the two views' probabilities
      const Tensor mirrored = softmax(run(flip_horizontal(batch.images)), 1).data().contiguous();
      float* p = probs.data<float>();
      const float* q = mirrored.data<float>();
      for (int64_t i = 0; i < B * K; ++i) p[i] = 0.5f * (p[i] + q[i]);
      for (int64_t b = 0; b < B; ++b) {
        const double pt = p[b * K + batch.targets.data<int64_t>()[b]];
        loss_sum -= std::log(std::max(pt, 1e-45));
      }
    } else {
      loss_sum += cross_entropy(logits, batch.targets).item() * static_cast<double>(B);
    }
    const float* p = probs.data<float>();
    for (int64_t b = 0; b < B; ++b) {
      const float* row = p + b * K;
      const std::vector<int64_t> order = infer::top_k_indices(row, K, 5);  // infer's ranking (ties: lower index)
      const int64_t truth = batch.targets.data<int64_t>()[b];
      correct1 += order[0] == truth;
      correct5 += std::find(order.begin(), order.end(), truth) != order.end();
      r.confusion[truth][order[0]] += 1;
      r.predictions[indices[b]] = order[0];
      r.confidence[indices[b]] = row[order[0]];
    }
  }
  model.train(was_training);
  if (shard.parts > 1) {
    // Sums over the processes: each holds its share's counts, predictions and confidences (the
    // others' entries are 0; a prediction is sent as prediction + 1).
    std::vector<double> v = {loss_sum, static_cast<double>(correct1), static_cast<double>(correct5)};
    for (const auto& row : r.confusion) v.insert(v.end(), row.begin(), row.end());
    for (int64_t i = 0; i < data.size(); ++i) {
      const bool own = i >= mine.begin && i < mine.end;
      v.push_back(own ? static_cast<double>(r.predictions[i] + 1) : 0.0);
      v.push_back(own ? static_cast<double>(r.confidence[i]) : 0.0);
    }
    VIT_CHECK(shard.sum != nullptr, "evaluate", "a sharded evaluation needs a sum across processes");
    shard.sum(v);
    size_t at = 0;
    loss_sum = v[at++];
    correct1 = static_cast<int64_t>(v[at++]);
    correct5 = static_cast<int64_t>(v[at++]);
    for (auto& row : r.confusion) {
      for (auto& cell : row) cell = static_cast<int64_t>(v[at++]);
    }
    for (int64_t i = 0; i < data.size(); ++i) {
      r.predictions[i] = static_cast<int64_t>(v[at++]) - 1;
      r.confidence[i] = static_cast<float>(v[at++]);
    }
  }
  const double n = std::max<double>(1.0, static_cast<double>(r.count));
  r.loss = loss_sum / n;
  r.top1 = static_cast<double>(correct1) / n;
  r.top5 = static_cast<double>(correct5) / n;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t total = std::accumulate(r.confusion[k].begin(), r.confusion[k].end(), int64_t{0});
    r.per_class_accuracy.push_back(total ? static_cast<double>(r.confusion[k][k]) / static_cast<double>(total) : NAN);
  }
  return r;
}

}  // namespace vit::train
