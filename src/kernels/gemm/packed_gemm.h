// The float32 GEMM of the hot paths, BLIS-style:
//   C (M, N) = act(alpha * op(A) (M, K) @ B (K, N) + beta * C + bias)
// B is packed into column panels of 16 (PackedMatrix: for each panel, K rows of 16 contiguous
// floats, zero-padded past N), once at load for inference weights, or per call otherwise; the
// layout is the same for every ISA.
// The loops (outermost first): K in blocks of 256; M in blocks of ~200 rows, read in place in
// micro-panels of mr rows (a partial one packed k-major); a group of the micro-kernel's panels
// (one or two 16-column panels of B, 256 deep: stays in L1); every micro-panel of the A block
// (in L2) against it in the micro-kernel. An entry may ask for another blocking of wide blocks:
// the AVX2 one packs every micro-panel of A and cuts K into equal blocks up to 1024 deep once a
// block spans 8 panels (packed_micro.cpp: measured on Zen 3). The micro-kernel is picked per call
// from a table by ISA (kernels/gemm/packed_micro.h: AVX-512 8 x 32, AVX2 + FMA 6 x 16, or a plain
// C++ 6 x 16, whose std::fma chains in k order make every entry bit-identical where their K blocks
// agree), each compiled with its own target attributes: one baseline x86-64 build runs the best
// one the CPU has. The epilogue
// (kernels/gemm/epilogue.h: alpha, beta, bias, GELU) is applied when a tile is stored for the last
// time. The threads and the cut follow kernels/gemm/gemm_driver.h.
#pragma once

#include <cstdint>

#include "kernels/aligned.h"
#include "kernels/gemm/epilogue.h"

namespace vit::kernels {

inline constexpr int64_t kPanelWidth = 16;

// True where the packed kernel has a vector micro-kernel (isa_enabled(Isa::Avx2)); elsewhere it
// runs the plain one (correct, slow: callers then prefer BLAS).
bool packed_gemm_supported();
// The micro-kernel the active ISA runs, e.g. "avx512 8x32" (packed_micro.h lists them).
const char* packed_gemm_kernel_name();

// A (K, N) operand packed into 16-column panels (see above); 64-byte aligned.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // W (N, K) row-major, as a Linear layer stores it: packs B = W^T (K, N).
  static PackedMatrix from_weight(const float* W, int64_t N, int64_t K);
  // B (K, N) row-major with row stride ldb.
  static PackedMatrix from_rows(const float* B, int64_t K, int64_t N, int64_t ldb);

  int64_t rows() const { return k_; }  // K
  int64_t cols() const { return n_; }  // N
  const float* data() const { return data_.get(); }
  size_t bytes() const { return static_cast<size_t>(panels() * k_ * kPanelWidth) * sizeof(float); }
  int64_t panels() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }

 private:
  PackedMatrix(int64_t k, int64_t n);
  int64_t k_ = 0, n_ = 0;
  AlignedArray<float> data_;
};

// Packs into caller storage of packed_size(K, N) floats (64-byte aligned); B^T given if
// transposed (B is then stored (N, K) with row stride ldb).
size_t packed_size(int64_t K, int64_t N);
void pack_b(const float* B, int64_t K, int64_t N, int64_t ldb, bool transposed, float* out);

// C = act(alpha * op(A) @ B + beta * C + bias) (epilogue.h; bias (N) may be null) with B packed (packed_b: K x N as
// PackedMatrix lays it out). op(A) = A (M, K) with row stride lda, or A^T when trans_a (A stored (K, M)). Runs on the
// calling thread when called inside a parallel region.
void packed_gemm(bool trans_a, const float* A, int64_t lda, int64_t M, const float* packed_b, int64_t K, int64_t N,
                 float* C, int64_t ldc, const float* bias, const Epilogue& epilogue);

// B in another storage, made float32 panel by panel as the loops reach them: fill(context, j, k0,
// kc, out) writes rows [k0, k0 + kc) of panel j (columns [16 j, 16 j + 16), zero past N) as kc x 16
// floats. k0 is a multiple of 4. The bf16 weights of CPUs without AVX512_BF16 run this way
// (bf16_gemm.cpp): each panel block converted once per block of rows of A, then the float32
// micro-kernel.
struct PanelSource {
  void (*fill)(const void* context, int64_t j, int64_t k0, int64_t kc, float* out);
  const void* context;
};
void packed_gemm_sourced(const float* A, int64_t lda, int64_t M, const PanelSource& b, int64_t K, int64_t N, float* C,
                         int64_t ldc, const float* bias, const Epilogue& epilogue);

// The general form (a row-major B read in place when it is read once or fits in L2, else packed
// per call into a buffer of the calling thread; A^T read in place): the same contract
// as gemm<float> in gemm.h plus the epilogue's bias and activation.
void gemm_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float* C, int64_t ldc, const float* bias, const Epilogue& epilogue);

}  // namespace vit::kernels
