// PCG32 (XSH-RR variant) and the distributions built on it; see random.h.
#include "core/random.h"

#include <cmath>

#include "core/check.h"

namespace vit {

void Generator::manual_seed(uint64_t seed) {
  state_ = 0;
  increment_ = (seed << 1u) | 1u;
  next_u32();
  state_ += 0x853c49e6748fea9bULL ^ seed;
  next_u32();
  has_spare_normal_ = false;
}

uint32_t Generator::next_u32() {
  const uint64_t old = state_;
  state_ = old * 6364136223846793005ULL + increment_;
  const auto xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
  const auto rot = static_cast<uint32_t>(old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

double Generator::uniform_double() {
  const uint64_t hi = next_u32() >> 5;  // 27 bits
  const uint64_t lo = next_u32() >> 6;  // 26 bits
  return static_cast<double>((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

double Generator::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  double u1 = uniform_double();
  while (u1 <= 0.0) u1 = uniform_double();
  const double u2 = uniform_double();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * M_PI * u2;
  spare_normal_ = radius * std::sin(angle);
  has_spare_normal_ = true;
  return radius * std::cos(angle);
}

void Generator::key_by_sample(uint64_t key, int64_t first_sample) {
  keyed_ = true;
  key_ = key;
  calls_ = 0;
  first_sample_ = first_sample;
}

Generator Generator::sample_stream(uint64_t call, int64_t row) const {
  // splitmix64 of (key, call, sample): distinct, well-mixed seeds for every (call, sample).
  uint64_t z = key_ ^ ((call + 1) * 0x9E3779B97F4A7C15ULL) ^
               (static_cast<uint64_t>(first_sample_ + row + 1) * 0xC2B2AE3D27D4EB4FULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return Generator(z ^ (z >> 31));
}

uint64_t Generator::integer(uint64_t n) {
  VIT_CHECK(n > 0, "random", "integer(n) needs n > 0");
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = (static_cast<uint64_t>(next_u32()) << 32) | next_u32();
  } while (x >= limit);
  return x % n;
}

}  // namespace vit
