// The micro-kernels of the direct convolution (direct_conv.cpp's private interface), one entry per
// ISA with its own target attributes (conv_micro.cpp), picked at run time like the GEMM's:
//   igemm  a tile of mr output rows x (panels x 16) columns: over the active taps t and depth k,
//          tile[r][n] += a[t][r][k] * b[t][k][n], every row of A reached through its own pointer (the
//          indirection: a row is an input pixel's channels, or the zero row for padding), B packed in
//          16-column panels. Then + bias, + the old output (a residual), ReLU, in registers.
//   wgrad  a block of wr input channels x (panels x 16) output channels of one tap's weight
//          gradient: dw[c][n] += sum over positions p of a[p][c] * dy[p][n], a[p] the tap's input
//          pixel of position p (or the zero row), accumulated onto the partial dw it is given.
//   scalar 4 x 16 / 4 x 16   plain C++ (the reference the tests force with VIT_ISA=scalar)
//   avx2   6 x 16 / 6 x 16   12 ymm accumulators; per k (per position) two loads, six broadcasts
//   avx512 8 x 32 / 8 x 32   16 zmm accumulators over two panels; one-panel entries for narrow edges
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace vit::kernels::conv {

inline constexpr int64_t kPanel = 16;  // columns of one packed panel of B
inline constexpr int64_t kMaxMr = 8;   // the tallest tile of any entry

struct IgemmArgs {
  int64_t taps = 0;                 // active taps
  const float* const* a = nullptr;  // taps x mr row pointers (row r of tap t: a[t * mr + r]), k floats each
  const float* const* b = nullptr;  // per active tap, its packed B: k rows of 16 floats per panel
  int64_t b_panel = 0;              // floats from one panel of a tap's B to the next
  int64_t k = 0;                    // depth per tap
  float* out = nullptr;             // the tile's first element
  int64_t ldo = 0;                  // floats between output rows
  int64_t rows = 0, cols = 0;       // valid rows (<= mr) and columns (<= panels x 16)
  const float* bias = nullptr;      // at the tile's first column, or null
  bool accumulate = false;          // out = sums (+ bias) + out (a residual added before the ReLU)
  bool relu = false;
};

struct WgradArgs {
  int64_t positions = 0;
  const float* const* a = nullptr;  // per position, the tap's input pixel (or the zero row)
  int64_t a_offset = 0;             // the block's first channel within a pixel
  const float* dy = nullptr;        // dy of position 0 at the block's first output channel
  int64_t ldy = 0;                  // floats between positions of dy
  float* dw = nullptr;              // the block's first element of the (channel, output channel) partial
  int64_t ldw = 0;                  // floats between channels of dw
  int64_t rows = 0, cols = 0;       // channels (<= wr) and output channels (<= panels x 16)
};

using IgemmFn = void (*)(const IgemmArgs&);
using WgradFn = void (*)(const WgradArgs&);

struct ConvMicroKernels {
  Isa isa;
  const char* name;  // "avx2 6x16"
  int64_t mr;        // igemm rows
  int64_t panels;    // igemm panels of the wide entry
  IgemmFn igemm;     // `panels` panels
  IgemmFn igemm1;    // one panel (a narrow edge)
  int64_t wr;        // wgrad channels
  int64_t wpanels;   // wgrad panels of the wide entry
  WgradFn wgrad;
  WgradFn wgrad1;
};

// The entry of the active ISA.
const ConvMicroKernels& pick_conv_micro();

}  // namespace vit::kernels::conv
