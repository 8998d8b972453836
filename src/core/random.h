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

  // Per-sample streams, for data-parallel training. While keyed, an op that draws for a batch
  // (dropout, drop-path: first dimension = the batch) draws sample b's numbers from its own
  // Generator, seeded by (key, the op's call number, first_sample + b), so a sample gets the
  // same masks whichever process, thread or slice of the global batch computes it. key_by_sample
  // restarts the call numbers (one key per training step); unkeyed, ops draw from this Generator
  // in sequence.
  void key_by_sample(uint64_t key, int64_t first_sample);
  void unkey() { keyed_ = false; }
  bool sample_keyed() const { return keyed_; }
  // The call number of the next op drawing per sample (0, 1, ... after key_by_sample).
  uint64_t next_call() { return calls_++; }
  // The stream of row `row` (0-based in the op's batch) for call `call`.
  Generator sample_stream(uint64_t call, int64_t row) const;

 private:
  uint64_t state_ = 0;
  uint64_t increment_ = 0;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
  bool keyed_ = false;
  uint64_t key_ = 0, calls_ = 0;
  int64_t first_sample_ = 0;
};

}  // namespace vit
