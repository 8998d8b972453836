// Model calls of several served models take turns on all cores: a FIFO ticket lock. Each call
// (a batch, an attention map) takes a ticket when it is ready and runs when its number comes up,
// on every core (the kernels' OpenMP pool); so no model's queue starves another's, and two calls
// never split the cores between them (each would run slower than half speed).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace vit::serve {

class FairTurn {
 public:
  class Turn {
   public:
    explicit Turn(FairTurn& fair) : fair_(fair) {
      std::unique_lock lock(fair_.mutex_);
      const uint64_t mine = fair_.next_ticket_++;
      fair_.turn_.wait(lock, [&] { return fair_.serving_ == mine; });
    }
    ~Turn() {
      {
        std::lock_guard lock(fair_.mutex_);
        ++fair_.serving_;
      }
      fair_.turn_.notify_all();
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    FairTurn& fair_;
  };

 private:
  std::mutex mutex_;
  std::condition_variable turn_;
  uint64_t next_ticket_ = 0, serving_ = 0;
};

}  // namespace vit::serve
