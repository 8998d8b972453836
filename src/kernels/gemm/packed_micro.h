// The micro-kernels of the packed float32 GEMM (packed_gemm.cpp's private interface), one entry
// per ISA, each with its own target attributes (packed_micro.cpp) so a baseline x86-64 build
// runs the best one the CPU has:
//   scalar   6 x 16  plain C++ (std::fma in k order: the reference the tests force)
//   avx2     6 x 16  12 ymm accumulators: per k two loads of B, six broadcasts of A
//   avx512   8 x 32  16 zmm accumulators over two adjacent 16-column panels of B (the packed
//                    layout is the same for every ISA): per k two loads, eight broadcasts.
//                    Measured on Zen 5 (one thread, ViT shapes, share of the zmm FMA peak, when
//                    A was still packed): 6x32 0.73-0.87, 8x32 0.74-0.88, 12x32 (MLAS's)
//                    0.73-0.84, 14x32 0.71-0.83, and 8x48 no better than 8x32 after the change
//                    below (0.90-0.94).
// Every entry reads A and B through strides (below): packed, or in place where the driver can (no
// packing of A: it cost 3-8% of a ViT-S run; of B: 8% of the small-model training step, where
// dW = dY^T X packed the whole activation X each call). The AVX2 and AVX-512 entries write whole tiles into C
// themselves, and in the last K block apply alpha, beta and the bias in registers (a tile buffer and the store only for
// GELU and edges: the store through the buffer was 10% of a ViT-S run on the AVX2 path). An entry computes tile = Ap
// (kc x mr, k-major)^T @ B for `panels` panels of 16 columns (the panels panel_stride floats apart), the tile row-major
// with a row stride of panels * 16, and stores finished tiles through the epilogue compiled for the same ISA (the GELU
// and the residual vectorise at that width).
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/gemm/epilogue.h"
#include "kernels/gemm/packed_gemm.h"

namespace vit::kernels::packed {

inline constexpr int64_t kNr = kPanelWidth;  // columns of one packed panel
inline constexpr int64_t kMaxMr = 14;        // the tallest micro-panel of any entry
inline constexpr int64_t kMaxPanels = 2;     // the widest tile, in panels

// How the old C enters the first store of a tile.
enum class Init { Overwrite, Scale, Add };

// The store of a tile: not first, C += alpha t; first, C = alpha t (+ beta C); last, then + bias
// and the activation.
struct Tail {
  Init init;
  bool last;
  float alpha, beta;
  const float* bias;  // at the tile's first column, or null
  Activation act;
};

// Where a micro-kernel puts its sums: in the tile buffer (for the store), or, for a whole tile,
// straight into C: before the last K block (no epilogue yet, alpha 1) C = sums or C += sums; in
// the last one, with no activation (or, for an entry with register_act, GELU or ReLU), the whole
// Tail in registers (C = act(alpha sums (+ beta C) + bias)).
enum class Out { Tile, SetC, AddC, Final };

// tile (mr x panels * 16) from mr rows of op(A) and `panels` 16-column panels of B; with
// Out::SetC / AddC / Final, the mr x (panels * 16) block of C instead (an entry with `direct`
// only). Row r, depth k of op(A) is A[r * a_row + k * a_k]: a packed micro-panel (a_row 1, a_k
// mr), rows of A in place (a_row lda, a_k 1) or columns of a stored A^T in place (a_row 1, a_k
// lda); one of the two strides is 1. Depth k, column c of panel p is B[p * b_panel + k * b_k + c]:
// packed panels (b_panel K * 16, b_k 16), or whole panels of a row-major B in place (b_panel 16,
// b_k ldb). `tail` is read for Out::Final.
struct Operands {
  const float* a;
  int64_t a_row, a_k;
  const float* b;
  int64_t b_panel, b_k;
};
using MicroKernel = void (*)(const Operands& o, int64_t kc, float* tile, float* C, int64_t ldc, Out out,
                             const Tail* tail);
// C tile (rows x cols, cols <= width) from tile t (row stride `width`).
using TileStore = void (*)(const float* t, int64_t width, int64_t rows, int64_t cols, float* C, int64_t ldc,
                           const Tail& tail);

struct MicroKernelEntry {
  Isa isa;
  const char* name;    // "avx512 8x32"
  int64_t mr;          // rows per micro-panel
  int64_t panels;      // panels per full tile
  MicroKernel full;    // mr x (panels * 16)
  MicroKernel single;  // mr x 16 (the last panel when fewer than `panels` are left)
  TileStore store;
  bool direct;  // `full` writes C itself for Out::SetC / AddC / Final
  // The blocking that suits the entry's machines (packed_gemm.cpp's driver reads it):
  // Pack whole micro-panels of A when a block spans at least pack_a_panels panels, and then cut K
  // into equal blocks no deeper than kc_max (else A is read in place, K in blocks of 256).
  int64_t pack_a_panels;
  int64_t kc_max;
  bool register_act;  // Out::Final applies the exact GELU and ReLU too (else only no activation)
};

// The best entry the active ISA allows.
const MicroKernelEntry& pick_micro_kernel();

}  // namespace vit::kernels::packed
