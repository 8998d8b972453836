// Dynamic batching (see batcher.h).
#include "serve/batcher.h"

#include <algorithm>
#include <vector>

#include "core/check.h"

namespace vit::serve {

Batcher::Batcher(BatcherOptions options, RunBatch run, OnBatch on_batch)
    : options_(options), run_(std::move(run)), on_batch_(std::move(on_batch)) {
  VIT_CHECK(options_.max_batch >= 1, "serve", "--max-batch must be >= 1, got {}", options_.max_batch);
  VIT_CHECK(options_.max_delay_us >= 0, "serve", "--max-delay-us must be >= 0, got {}", options_.max_delay_us);
  VIT_CHECK(options_.max_queue >= 1, "serve", "--max-queue must be >= 1, got {}", options_.max_queue);
  worker_ = std::thread([this] { work(); });
}

Batcher::~Batcher() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Batcher::Ticket Batcher::submit(const Kind& kind, Tensor images) {
  auto job = std::make_unique<Job>();
  job->kind = kind;
  job->images = std::move(images);
  job->cancelled = std::make_shared<std::atomic<bool>>(false);
  job->arrived = std::chrono::steady_clock::now();
  Ticket ticket{job->result.get_future(), job->cancelled};
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw ShuttingDown("the server is shutting down");
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue)
      throw QueueFull("the queue is full (" + std::to_string(options_.max_queue) + " requests waiting); retry later");
    queue_.push_back(std::move(job));
  }
  wake_.notify_all();
  return ticket;
}

void Batcher::cancel(const Ticket& ticket) {
  ticket.cancelled->store(true);
  std::unique_ptr<Job> dropped;  // destroyed after the lock is released
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(queue_.begin(), queue_.end(),
                                 [&](const std::unique_ptr<Job>& job) { return job->cancelled == ticket.cancelled; });
    if (it == queue_.end()) return;
    dropped = std::move(*it);
    queue_.erase(it);
    if (queue_.empty() && !busy_) idle_.notify_all();
  }
  dropped->result.set_exception(std::make_exception_ptr(Error("[serve] cancelled")));
}

int64_t Batcher::queue_depth() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(queue_.size());
}

void Batcher::drain() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  wake_.notify_all();
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void Batcher::work() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (stopping_) return;
      continue;
    }
    // The oldest request sets the kind and the deadline; same-kind requests join until the
    // batch is full or the deadline passes (at once when draining: nobody else is coming).
    const Kind kind = queue_.front()->kind;
    const auto deadline = queue_.front()->arrived + std::chrono::microseconds(options_.max_delay_us);
    auto images_of_kind = [&] {
      int64_t n = 0;
      for (const auto& job : queue_) {
        if (job->kind == kind) n += job->images.size(0);
      }
      return n;
    };
    while (!stopping_ && images_of_kind() < options_.max_batch && Clock::now() < deadline) {
      wake_.wait_until(lock, deadline);
    }
    std::vector<std::unique_ptr<Job>> batch;
    int64_t images = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const int64_t n = (*it)->images.size(0);
      if ((*it)->kind == kind && (batch.empty() || images + n <= options_.max_batch)) {
        images += n;
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    busy_ = true;
    lock.unlock();
    // Requests whose callers gave up are not run.
    std::erase_if(batch, [](const std::unique_ptr<Job>& job) {
      if (!job->cancelled->load()) return false;
      job->result.set_exception(std::make_exception_ptr(Error("[serve] cancelled")));
      return true;
    });
    if (!batch.empty()) {
      const auto started = Clock::now();
      std::vector<double> waited;  // each request's time in the queue
      for (const auto& job : batch) waited.push_back(std::chrono::duration<double>(started - job->arrived).count());
      std::vector<Tensor> inputs;
      for (const auto& job : batch) inputs.push_back(job->images);
      try {
        const Tensor all = inputs.size() == 1 ? inputs[0] : cat(inputs, 0);
        const Tensor out = run_(kind, all);
        // Counted before anyone is answered: a client that reads the metrics after its answer sees its batch.
        if (on_batch_) on_batch_(all.size(0), waited);
        int64_t row = 0;
        for (const auto& job : batch) {
          const int64_t n = job->images.size(0);
          job->result.set_value(out.slice(0, row, row + n).contiguous());
          row += n;
        }
      } catch (...) {
        for (const auto& job : batch) job->result.set_exception(std::current_exception());
      }
    }
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace vit::serve
