// One gradient-reduction design for both levels of data parallelism -- threads (weight-sharing
// replicas inside a process, DataParallel) and ranks (processes of an MPI job) -- after PyTorch
// DDP's reducer. Parameters are grouped, in reverse order (the order backward finishes them),
// into buckets of about bucket_bytes. As a bucket's gradients become final in every replica of
// this process (Variable::backward's leaf-ready callback), the replicas' gradients are added into
// the bucket's flat buffer in replica order, and the sum over the ranks (MPI_Iallreduce) starts
// while backward goes on. Buckets start in one fixed order (0, 1, ...) on every rank, whatever
// order their last gradients arrive in. finish() waits for every bucket and writes the total into
// the master's .grad: with each slice's loss scaled by its share of the global batch, that is the
// full global batch's mean gradient, up to floating-point summation order.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "distributed/comm.h"

namespace vit::train {

class GradientReducer {
 public:
  using Parameters = std::vector<std::pair<std::string, Variable>>;
  // replicas[0] are the master's parameters, replicas[r] replica r's (same names, same order).
  // bucket_bytes <= 0: about an eighth of the gradient, between 64 KiB and 4 MiB.
  GradientReducer(std::vector<Parameters> replicas, distributed::Comm& comm, int64_t bucket_bytes = 0);

  // Before a step: the first `active` replicas will run backward.
  void begin(int active);
  // From replica r's backward (any thread): this parameter's gradient is final.
  void ready(int replica, const Node* leaf);
  // After every backward: treats gradients never reported as final (parameters a pass did not
  // reach, a replica that skipped backward), waits for every bucket, and sets the master's .grad
  // to the sum over replicas and ranks.
  void finish();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  int64_t gradient_bytes() const { return total_ * static_cast<int64_t>(sizeof(float)); }
  // Seconds finish() spent waiting for the ranks (communication the backward pass did not hide),
  // summed over steps, and the steps counted.
  double exposed_seconds() const { return exposed_seconds_; }
  int64_t steps() const { return steps_; }
  // Seconds to sum every bucket over the ranks with nothing else running (the median of
  // `repeats`): the communication a step would wait for without the overlap. Collective: every
  // rank calls it. Leaves the gradients alone.
  double time_alone(int repeats = 5);

 private:
  struct Bucket {
    std::vector<size_t> params;  // parameter indices, in the order backward finishes them
    std::vector<int64_t> offsets;
    int64_t size = 0;
    std::vector<float> buffer;
    std::atomic<int64_t> arrived{0};
    bool ready = false;
    int handle = -1;
  };
  void mark(int replica, size_t param);
  void launch_ready(size_t bucket);  // under mutex_
  void pack(Bucket& bucket);

  std::vector<Parameters> replicas_;
  distributed::Comm& comm_;
  std::vector<std::unordered_map<const Node*, size_t>> index_;  // per replica: leaf -> parameter
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<std::unique_ptr<std::atomic<bool>[]>> marked_;  // per replica, per parameter
  int64_t total_ = 0;
  int active_ = 1;
  std::mutex mutex_;
  size_t next_ = 0;  // the next bucket to start
  double exposed_seconds_ = 0.0;
  int64_t steps_ = 0;
};

}  // namespace vit::train
