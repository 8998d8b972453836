// The gradient reducer (see gradient_reducer.h).
#include "train/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace vit::train {

GradientReducer::GradientReducer(std::vector<Parameters> replicas, distributed::Comm& comm, int64_t bucket_bytes)
    : replicas_(std::move(replicas)), comm_(comm) {
  VIT_CHECK(!replicas_.empty(), "reducer", "no replicas");
  const Parameters& master = replicas_[0];
  for (const Parameters& r : replicas_) {
    VIT_CHECK(r.size() == master.size(), "reducer", "replicas have {} and {} parameters", r.size(), master.size());
  }
  for (const auto& [name, p] : master) {
    VIT_CHECK(p.dtype() == DType::F32, "reducer", "parameter {} is {}, not float32", name, dtype_name(p.dtype()));
    total_ += p.numel();
  }
  if (bucket_bytes <= 0) {
    bucket_bytes = std::clamp<int64_t>(total_ * static_cast<int64_t>(sizeof(float)) / 8, 64 << 10, 4 << 20);
  }
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  bucket_of_.assign(master.size(), 0);
  // Reverse registration order: the head's gradients are final first, the patch embedding's last.
  for (size_t k = master.size(); k-- > 0;) {
    if (buckets_.empty() || buckets_.back()->size >= cap) buckets_.push_back(std::make_unique<Bucket>());
    Bucket& b = *buckets_.back();
    b.params.push_back(k);
    b.offsets.push_back(b.size);
    b.size += master[k].second.numel();
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (auto& b : buckets_) b->buffer.assign(static_cast<size_t>(b->size), 0.0f);
  for (const Parameters& r : replicas_) {
    std::unordered_map<const Node*, size_t> index;
    for (size_t i = 0; i < r.size(); ++i) index[r[i].second.node().get()] = i;
    index_.push_back(std::move(index));
    marked_.push_back(std::make_unique<std::atomic<bool>[]>(r.size()));
  }
}

void GradientReducer::begin(int active) {
  VIT_CHECK(active >= 1 && active <= static_cast<int>(replicas_.size()), "reducer", "{} active replicas of {}", active,
            replicas_.size());
  active_ = active;
  next_ = 0;
  for (auto& b : buckets_) {
    b->arrived = 0;
    b->ready = false;
    b->handle = -1;
  }
  for (size_t r = 0; r < replicas_.size(); ++r) {
    for (size_t i = 0; i < replicas_[0].size(); ++i) marked_[r][i] = false;
  }
}

void GradientReducer::ready(int replica, const Node* leaf) {
  const auto& index = index_[static_cast<size_t>(replica)];
  const auto it = index.find(leaf);
  if (it != index.end()) mark(replica, it->second);
}

void GradientReducer::mark(int replica, size_t param) {
  if (replica >= active_ || marked_[static_cast<size_t>(replica)][param].exchange(true)) return;
  const size_t b = bucket_of_[param];
  Bucket& bucket = *buckets_[b];
  const auto members = static_cast<int64_t>(bucket.params.size()) * active_;
  if (bucket.arrived.fetch_add(1) + 1 == members) {
    std::lock_guard<std::mutex> lock(mutex_);
    launch_ready(b);
  }
  comm_.progress();
}

void GradientReducer::launch_ready(size_t b) {
  buckets_[b]->ready = true;
  // Start in bucket order only: every rank issues the same collectives in the same order.
  while (next_ < buckets_.size() && buckets_[next_]->ready) {
    Bucket& bucket = *buckets_[next_];
    pack(bucket);
    bucket.handle = comm_.start_sum(bucket.buffer.data(), bucket.size);
    ++next_;
  }
}

void GradientReducer::pack(Bucket& bucket) {
  float* buffer = bucket.buffer.data();
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    const size_t k = bucket.params[j];
    float* dst = buffer + bucket.offsets[j];
    const int64_t n = replicas_[0][k].second.numel();
    std::fill_n(dst, n, 0.0f);
    for (int r = 0; r < active_; ++r) {  // replica order: the same sum on every run
      const Tensor& g = replicas_[static_cast<size_t>(r)][k].second.grad();
      if (!g.defined()) continue;
      VIT_ASSERT(g.numel() == n && g.is_contiguous() && g.dtype() == DType::F32);
      const float* src = g.data<float>();
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    }
  }
}

void GradientReducer::finish() {
  for (int r = 0; r < active_; ++r) {
    for (size_t i = 0; i < replicas_[0].size(); ++i) mark(r, i);
  }
  VIT_ASSERT(next_ == buckets_.size());
  const auto from = std::chrono::steady_clock::now();
  for (auto& b : buckets_) comm_.wait(b->handle);
  exposed_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  ++steps_;
  const Parameters& master = replicas_[0];
  for (auto& b : buckets_) {
    for (size_t j = 0; j < b->params.size(); ++j) {
      const Variable& p = master[b->params[j]].second;
      if (!p.grad().defined()) p.node()->grad = Tensor::zeros(p.shape(), p.dtype());
      std::memcpy(p.grad().data<float>(), b->buffer.data() + b->offsets[j],
                  static_cast<size_t>(p.numel()) * sizeof(float));
    }
  }
}

double GradientReducer::time_alone(int repeats) {
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    comm_.barrier();
    const auto from = std::chrono::steady_clock::now();
    std::vector<int> handles;
    for (auto& b : buckets_) handles.push_back(comm_.start_sum(b->buffer.data(), b->size));
    for (int h : handles) comm_.wait(h);
    seconds.push_back(comm_.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count()));
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace vit::train
