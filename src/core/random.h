// Seeded random numbers. One Generator is passed explicitly to whatever needs randomness
// (initialisation, dropout, shuffling): no global state, so a seeded run is reproducible.
// Bits: PCG32 (O'Neill 2014). Normals: Box-Muller. Both are fixed here, independent of the
// standard library, so the same seed gives the same numbers everywhere.
#pragma once

#include <cstdint>

namespace vit {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint32_t next_u32();
  // Uniform in [0, 1) with 24 random bits (exactly representable in float).
  float uniform_float() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform_double();
  // Standard normal.
  double normal();
  // Uniform integer in [0, n) without modulo bias.
  uint64_t integer(uint64_t n);

 private:
  uint64_t state_ = 0;
  uint64_t increment_ = 0;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

}  // namespace vit
