// The memory `vit serve` lets image decoding use at once. A compressed image is small on the
// wire and large decoded (a 261 KB PNG is 8192x8192 RGBA: 268 MB of pixels, several times that
// at the decoder's peak), so each decode reserves its peak (kPeakBytesPerValue bytes per pixel
// value, from the image's header) before it starts; one that does not fit beside those running
// is refused at once (HTTP 503, retry), never left to exhaust the server's memory.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

namespace vit::serve {

// Decoder output, our planar copy, the channel conversion and the resize source: 4 buffers.
inline constexpr int64_t kPeakBytesPerValue = 4;

class DecodeBudget {
 public:
  explicit DecodeBudget(int64_t bytes) : total_(bytes) {}
  DecodeBudget(const DecodeBudget&) = delete;
  DecodeBudget& operator=(const DecodeBudget&) = delete;

  // Holds its bytes until destroyed.
  class Lease {
   public:
    Lease(DecodeBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    Lease(Lease&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) { other.budget_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (budget_ != nullptr) budget_->release(bytes_);
    }

   private:
    DecodeBudget* budget_;
    int64_t bytes_;
  };

  // A lease of `bytes`, or nothing when they do not fit beside the leases held now.
  std::optional<Lease> try_reserve(int64_t bytes) {
    std::lock_guard lock(mutex_);
    if (bytes < 0 || bytes > total_ - used_) return std::nullopt;
    used_ += bytes;
    return std::optional<Lease>(std::in_place, this, bytes);
  }
  int64_t total() const { return total_; }
  int64_t used() const {
    std::lock_guard lock(mutex_);
    return used_;
  }

 private:
  void release(int64_t bytes) {
    std::lock_guard lock(mutex_);
    used_ -= bytes;
  }
  const int64_t total_;
  int64_t used_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace vit::serve
