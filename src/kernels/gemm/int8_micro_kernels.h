// The int8 GEMM's micro-kernels (inside the kernels room: int8_gemm.cpp is the only user), one
// per ISA and weight range, in a table the driver picks from (kernels/gemm/int8_gemm.h has the scheme).
//
// A kernel computes t (panels x mr x 16 int32) = Ap . Bp exactly, where Ap is one micro-panel of
// quantized activations (groups x mr rows x 4 bytes, uint8) and Bp `panels` weight panels
// (groups x 16 channels x 4 bytes, int8), panel_bytes apart; tile p goes to t + p * mr * 16 and
// row r of it to + r * 16. colsum holds the panels' column sums (16 per panel) for the kernels that
// shift the activations to signed bytes and must add 128 x colsum back.
//  - AVX-512 VNNI: vpdpbusd (uint8 x int8 quads straight into int32: no saturation, 7- or 8-bit
//    weights alike), an 8-row x 3-panel (8 x 48) tile: 24 accumulators, 3 weight registers, one
//    broadcast. One thread, ViT-B/16's four GEMMs at M = 197 (1576): 4 x 48 370 (345), 6 x 48 435
//    (397), 8 x 32 429, 8 x 48 440 (402) GMAC/s on a Zen 5 EPYC; 4 x 48 for M <= 4.
//  - AVX2, weights in [-64, 64] (the 7-bit scheme): vpmaddubsw + vpmaddwd, 4 x 16; a pair of
//    products is at most 2 x 255 x 64 = 32640 <= 32767, so the int16 step never saturates.
//  - AVX2, wider weights (the 8-bit scheme, [-127, 127]): vpmaddubsw would saturate (2 x 255 x 127
//    = 64770), so the activations are shifted to signed, a' = a - 128, and the product taken as
//    |a'| (uint8, <= 128) x sign(w, a') (int8, |.| <= 127): pairs at most 2 x 128 x 127 = 32512,
//    exact; sum_k a w = sum_k a' w + 128 colsum. The same integers, about 1.5x the instructions.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace vit::kernels::int8_detail {

inline constexpr int64_t kNr = 16;                // weight channels per panel
inline constexpr int64_t kGroup = 4;              // k per group (4 bytes: one vpdpbusd lane)
inline constexpr int64_t kMaxTile = 8 * 3 * kNr;  // int32 of the largest tile (mr x panels x 16)
inline constexpr int32_t kNarrowWeightMax = 64;   // |w| up to this: the plain AVX2 kernel is exact

using MicroKernel = void (*)(const uint8_t* Ap, const int8_t* Bp, int64_t panel_bytes, int64_t groups, int64_t panels,
                             const int32_t* colsum, int32_t* t);

struct MicroKernelEntry {
  Isa isa;
  bool wide;         // handles weights beyond [-64, 64]
  int64_t mr;        // rows per micro-panel of A (the packing of the activations follows it)
  int64_t panels;    // weight panels per call (at most)
  int64_t min_rows;  // used for GEMMs of at least this many rows (M)
  MicroKernel kernel;
};

// The best kernel the active ISA allows for weights whose largest |value| is weight_max and M rows
// of activations, or null (then the plain path runs).
const MicroKernelEntry* pick_micro_kernel(int32_t weight_max, int64_t M);

}  // namespace vit::kernels::int8_detail
