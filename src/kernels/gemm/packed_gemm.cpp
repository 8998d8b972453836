// The packed float32 GEMM (see packed_gemm.h).
#include "kernels/gemm/packed_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/gemm/packed_micro.h"

namespace vit::kernels {
namespace {

using packed::Init;
using packed::kMaxMr;
using packed::kMaxPanels;
using packed::kNr;
using packed::MicroKernelEntry;
using packed::Tail;

constexpr int64_t kKc = 256;      // depth of a block: a B panel is kKc x 16 floats = 16 KiB (L1)
constexpr int64_t kKcMax = 1024;  // the deepest K block of an entry that packs A (packed_micro.cpp's kc_max)
constexpr int64_t kMcRows =
    198;  // rows of an A block, rounded up to micro-panels: ~200 x 256 floats (L2); 197 tokens fit
constexpr int64_t kMcMax = kMcRows + kMaxMr;
constexpr int64_t kInPlaceBFloats = 1 << 16;  // a row-major B up to 256 KiB (L2) is read in place

// Rows of an A block for micro-panels of mr rows.
constexpr int64_t block_rows(int64_t mr) { return (kMcRows + mr - 1) / mr * mr; }

// Rows m0 .. m0+mc, depth k0 .. k0+kc of op(A) into micro-panels of MR rows (zero past mc).
template <int64_t MR>
void pack_a(bool trans_a, const float* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
            float* __restrict out) {
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t rows = std::min(MR, mc - i);
    float* __restrict p = out + i * kc;
    if (trans_a) {       // A stored (K, M): the MR rows of one k are contiguous
      if (rows == MR) {  // a whole micro-panel: a fixed-size copy (a runtime one became a memmove call per k)
        for (int64_t k = 0; k < kc; ++k) {
          const float* a = A + (k0 + k) * lda + m0 + i;
#pragma GCC unroll 16
          for (int64_t r = 0; r < MR; ++r) p[k * MR + r] = a[r];
        }
        continue;
      }
      for (int64_t k = 0; k < kc; ++k) {
        const float* a = A + (k0 + k) * lda + m0 + i;
        for (int64_t r = 0; r < rows; ++r) p[k * MR + r] = a[r];
        for (int64_t r = rows; r < MR; ++r) p[k * MR + r] = 0.0f;
      }
      continue;
    }
    if (rows == MR) {
      const float* a[MR];
      for (int64_t r = 0; r < MR; ++r) a[r] = A + (m0 + i + r) * lda + k0;
      for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 16
        for (int64_t r = 0; r < MR; ++r) p[k * MR + r] = a[r][k];
      }
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t r = 0; r < rows; ++r) p[k * MR + r] = A[(m0 + i + r) * lda + k0 + k];
      for (int64_t r = rows; r < MR; ++r) p[k * MR + r] = 0.0f;
    }
  }
}

void pack_a_for(int64_t mr, bool trans_a, const float* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                float* out) {
  switch (mr) {
    case 6:
      return pack_a<6>(trans_a, A, lda, m0, mc, k0, kc, out);
    case 8:
      return pack_a<8>(trans_a, A, lda, m0, mc, k0, kc, out);
    case 12:
      return pack_a<12>(trans_a, A, lda, m0, mc, k0, kc, out);
    case 14:
      return pack_a<14>(trans_a, A, lda, m0, mc, k0, kc, out);
    default:
      VIT_ASSERT(mr == 6 || mr == 8 || mr == 12 || mr == 14);
  }
}

struct Problem {
  bool trans_a;
  const float* A;
  int64_t lda, M;
  // Panels j < b_whole: at B + j * b_panel, rows b_k floats apart (packed: b_panel K * 16, b_k
  // 16; a row-major B in place: b_panel 16, b_k ldb); the rest packed at b_tail.
  const float* B;
  int64_t b_panel, b_k, b_whole;
  const float* b_tail;
  int64_t K, N;
  float* C;
  int64_t ldc;
  const float* bias;
  Epilogue e;
  const MicroKernelEntry* kernel;
  const PanelSource* source = nullptr;  // B made panel by panel instead (B, b_panel, ... unused)
};

// The calling thread's buffer for the panels of one group made by a PanelSource.
float* source_buffer() {
  thread_local AlignedArray<float> storage =
      aligned_array<float>(static_cast<size_t>(kKcMax * kNr * kMaxPanels), false);
  return storage.get();
}

// The depth of the K blocks: K cut into equal blocks (multiples of 4) no deeper than kc_max.
int64_t block_depth(int64_t K, int64_t kc_max) {
  const int64_t blocks = (K + kc_max - 1) / kc_max;
  return std::min(kc_max, ((K + blocks - 1) / blocks + 3) / 4 * 4);
}

// Rows [m_begin, m_end) x panels [j_begin, j_end) of C; abuf holds kMcMax x kKcMax floats.
void run_block(const Problem& p, int64_t m_begin, int64_t m_end, int64_t j_begin, int64_t j_end, float* abuf) {
  const MicroKernelEntry& mk = *p.kernel;
  const int64_t mr = mk.mr, mc_max = block_rows(mr), packed_stride = p.K * kNr;
  // Wide blocks whose entry asks for it: A packed, K in blocks up to the entry's depth; else whole
  // micro-panels of A read in place, K in blocks of kKc (a B panel in L1).
  const bool pack_all = j_end - j_begin >= mk.pack_a_panels;
  const int64_t depth = pack_all ? block_depth(p.K, std::min(mk.kc_max, kKcMax)) : kKc;
  // The next B panels are prefetched only when all of B is packed (contiguous panels).
  const bool prefetch = p.b_k == kNr && p.b_panel == packed_stride && p.b_tail == nullptr;
  for (int64_t k0 = 0; k0 < p.K; k0 += depth) {
    const int64_t kc = std::min(depth, p.K - k0);
    Tail tail{};
    tail.init = k0 > 0 ? Init::Add : p.e.beta == 0.0f ? Init::Overwrite : p.e.beta == 1.0f ? Init::Add : Init::Scale;
    tail.last = k0 + kc >= p.K;
    tail.alpha = p.e.alpha;
    tail.beta = p.e.beta;
    tail.act = p.e.act;
    // Whole tiles go straight to C when the kernel can: before the last K block (no epilogue yet),
    // and in the last one when the kernel applies the activation too (it applies the tail itself).
    const bool register_act = p.e.act == Activation::None ||
                              (mk.register_act && (p.e.act == Activation::Gelu || p.e.act == Activation::Relu));
    const bool direct = mk.direct && (tail.last ? register_act : p.e.alpha == 1.0f && tail.init != Init::Scale);
    const packed::Out direct_out = tail.last                ? packed::Out::Final
                                   : tail.init == Init::Add ? packed::Out::AddC
                                                            : packed::Out::SetC;
    for (int64_t m0 = m_begin; m0 < m_end; m0 += mc_max) {
      const int64_t mc = std::min(mc_max, m_end - m0), micro = (mc + mr - 1) / mr;
      // Whole micro-panels of A are read in place (rows of A, or columns of a stored A^T) unless
      // the entry packs them for wide blocks; a last, partial one is always packed.
      if (pack_all) {
        pack_a_for(mr, p.trans_a, p.A, p.lda, m0, mc, k0, kc, abuf);
      } else if (mc % mr) {
        pack_a_for(mr, p.trans_a, p.A, p.lda, m0 + mc / mr * mr, mc % mr, k0, kc, abuf + mc / mr * mr * kc);
      }
      // Column groups of up to mk.panels panels, none across b_whole (one B layout per group).
      for (int64_t j = j_begin, np = 0; j < j_end; j += np) {
        np = std::min(mk.panels, j_end - j);
        if (j < p.b_whole && j + np > p.b_whole) np = p.b_whole - j;
        packed::Operands o{};
        if (p.source) {  // this group's panels made now, for every micro-panel of the block
          float* made = source_buffer();
          for (int64_t q = 0; q < np; ++q) p.source->fill(p.source->context, j + q, k0, kc, made + q * kc * kNr);
          o.b = made;
          o.b_panel = kc * kNr;
          o.b_k = kNr;
        } else if (j < p.b_whole) {
          o.b = p.B + j * p.b_panel + k0 * p.b_k;
          o.b_panel = p.b_panel;
          o.b_k = p.b_k;
        } else {
          o.b = p.b_tail + (j - p.b_whole) * packed_stride + k0 * kNr;
          o.b_panel = packed_stride;
          o.b_k = kNr;
        }
        const int64_t next_np = prefetch ? std::min(mk.panels, j_end - j - np) : 0;
        const float* next = next_np > 0 ? o.b + np * packed_stride : nullptr;
        const int64_t n0 = j * kNr, cols = std::min(np * kNr, p.N - n0);
        const packed::MicroKernel kernel = np == mk.panels ? mk.full : mk.single;
        tail.bias = p.bias ? p.bias + n0 : nullptr;
        // The next B panels come from memory (a model's weights do not fit in cache): each
        // micro-panel call first asks for its share of their lines, so the fetch is spread over
        // this group's whole sweep instead of stalling the next one.
        // (Counters, not l / lines and l % lines: two divisions a line cost ~3% of a ViT-B run.)
        const int64_t lines = kc * kNr * static_cast<int64_t>(sizeof(float)) / 64, all = lines * next_np;
        int64_t line = 0, in_panel = 0;  // the next line to ask for: its index, and its place in its panel
        const char* panel_lines = reinterpret_cast<const char*>(next);
        for (int64_t i = 0; i < micro; ++i) {
          alignas(64) float t[kMaxMr * kMaxPanels * kNr];
          if (next) {
            for (const int64_t stop = all * (i + 1) / micro; line < stop; ++line) {
              _mm_prefetch(panel_lines + 64 * in_panel, _MM_HINT_T1);
              if (++in_panel == lines) {
                in_panel = 0;
                panel_lines += packed_stride * static_cast<int64_t>(sizeof(float));
              }
            }
          }
          const int64_t rows = std::min(mr, mc - i * mr), m = m0 + i * mr;
          if (rows < mr || pack_all) {
            o.a = abuf + i * mr * kc, o.a_row = 1, o.a_k = mr;
          } else if (p.trans_a) {
            o.a = p.A + k0 * p.lda + m, o.a_row = 1, o.a_k = p.lda;
          } else {
            o.a = p.A + m * p.lda + k0, o.a_row = p.lda, o.a_k = 1;
          }
          float* c = p.C + m * p.ldc + n0;
          if (direct && rows == mr && cols == mk.panels * kNr) {  // a whole tile
            kernel(o, kc, t, c, p.ldc, direct_out, &tail);
            continue;
          }
          kernel(o, kc, t, nullptr, 0, packed::Out::Tile, nullptr);
          mk.store(t, np * kNr, rows, cols, c, p.ldc, tail);
        }
      }
    }
  }
}

// `floats` of scratch in `storage` (grown, never shrunk), starting on a 64-byte boundary.
float* aligned_scratch(std::vector<float>& storage, size_t floats) {
  if (storage.size() < floats + 16) storage.resize(floats + 16);
  float* p = storage.data();
  return p + (16 - (reinterpret_cast<uintptr_t>(p) / sizeof(float)) % 16) % 16;
}

// The calling thread's A block (kMcMax x kKcMax floats).
float* a_buffer() {
  thread_local std::vector<float> storage;
  return aligned_scratch(storage, static_cast<size_t>(kMcMax * kKcMax));
}

// K = 0: C = act(beta C + bias).
void epilogue_only(int64_t M, int64_t N, float* C, int64_t ldc, const float* bias, const Epilogue& e) {
  const float zeros[kNr] = {};
  const packed::TileStore store = packed::pick_micro_kernel().store;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; n += kNr) {
      const Tail tail{
          e.beta == 0.0f ? Init::Overwrite : Init::Scale, true, e.alpha, e.beta, bias ? bias + n : nullptr, e.act};
      store(zeros, 0, 1, std::min(kNr, N - n), C + m * ldc + n, ldc, tail);
    }
  }
}

// Packs 16 rows of B^T (stride ldb) into the panel, 8 k at a time through two 8 x 8 register
// transposes; returns how many k it did (a multiple of 8).
__attribute__((target("avx2,fma"))) int64_t transpose_panel(const float* B, int64_t ldb, int64_t K, float* out) {
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    for (int half = 0; half < 2; ++half) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(B + (half * 8 + i) * ldb + k);
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      // Row j of the transpose: element i = r[i][j].
      const __m256 c[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                           _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                           _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                           _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (k + j) * kNr + half * 8, c[j]);
    }
  }
  return k;
}

}  // namespace

bool packed_gemm_supported() { return isa_enabled(Isa::Avx2); }

const char* packed_gemm_kernel_name() { return packed::pick_micro_kernel().name; }

size_t packed_size(int64_t K, int64_t N) { return static_cast<size_t>(((N + kNr - 1) / kNr) * K * kNr); }

void pack_b(const float* B, int64_t K, int64_t N, int64_t ldb, bool transposed, float* out) {
  const int64_t panels = (N + kNr - 1) / kNr;
#pragma omp parallel for schedule(static) if (panels > 1 && K * N > (1 << 16) && !omp_in_parallel())
  for (int64_t j = 0; j < panels; ++j) {
    const int64_t n0 = j * kNr, cols = std::min(kNr, N - n0);
    float* __restrict p = out + j * K * kNr;
    if (!transposed && cols == kNr) {  // a whole panel: a fixed-size copy per k
      for (int64_t k = 0; k < K; ++k) {
#pragma GCC unroll 16
        for (int64_t c = 0; c < kNr; ++c) p[k * kNr + c] = B[k * ldb + n0 + c];
      }
      continue;
    }
    if (!transposed) {
      for (int64_t k = 0; k < K; ++k) {
        const float* b = B + k * ldb + n0;
        for (int64_t c = 0; c < cols; ++c) p[k * kNr + c] = b[c];
        for (int64_t c = cols; c < kNr; ++c) p[k * kNr + c] = 0.0f;
      }
      continue;
    }
    // B^T stored (N, K): column n0 + c of B is row n0 + c of the storage.
    if (cols < kNr) {
      std::fill(p, p + K * kNr, 0.0f);
      for (int64_t c = 0; c < cols; ++c) {
        const float* b = B + (n0 + c) * ldb;
        for (int64_t k = 0; k < K; ++k) p[k * kNr + c] = b[k];
      }
      continue;
    }
    int64_t k = 0;
    if (packed_gemm_supported()) k = transpose_panel(B + n0 * ldb, ldb, K, p);
    for (; k < K; ++k) {
      for (int64_t c = 0; c < kNr; ++c) p[k * kNr + c] = B[(n0 + c) * ldb + k];
    }
  }
}

PackedMatrix::PackedMatrix(int64_t k, int64_t n) : k_(k), n_(n) {
  // (Transparent huge pages were tried: with this kernel's synchronous defrag they made packing a
  // model vary from 0.1 to 0.8 s, and rounding each matrix to 2 MiB cost ~18% more memory.)
  data_ = aligned_array<float>(packed_size(k, n), false);
}

PackedMatrix PackedMatrix::from_weight(const float* W, int64_t N, int64_t K) {
  VIT_CHECK(N >= 0 && K >= 0, "packed_gemm", "invalid weight shape ({}, {})", N, K);
  PackedMatrix m(K, N);
  pack_b(W, K, N, K, true, m.data_.get());
  return m;
}

PackedMatrix PackedMatrix::from_rows(const float* B, int64_t K, int64_t N, int64_t ldb) {
  VIT_CHECK(N >= 0 && K >= 0 && ldb >= N, "packed_gemm", "invalid matrix ({}, {}) ldb={}", K, N, ldb);
  PackedMatrix m(K, N);
  pack_b(B, K, N, ldb, false, m.data_.get());
  return m;
}

namespace {

// Checks the sizes, then runs p (B set) on the grid of gemm_driver.h.
void run_problem(Problem& p) {
  VIT_CHECK(p.M >= 0 && p.K >= 0 && p.N >= 0 && p.ldc >= p.N && p.lda >= (p.trans_a ? p.M : p.K), "packed_gemm",
            "invalid sizes M={} K={} N={} lda={} ldc={}", p.M, p.K, p.N, p.lda, p.ldc);
  if (p.M == 0 || p.N == 0) return;
  if (p.K == 0) return epilogue_only(p.M, p.N, p.C, p.ldc, p.bias, p.e);
  run_gemm_grid(
      p.M, (p.N + kNr - 1) / kNr, p.kernel->mr, p.M * p.N * p.K, [](int64_t, int64_t) {},
      [&](int64_t m0, int64_t m1, int64_t j0, int64_t j1) { run_block(p, m0, m1, j0, j1, a_buffer()); });
}

}  // namespace

void packed_gemm(bool trans_a, const float* A, int64_t lda, int64_t M, const float* packed_b, int64_t K, int64_t N,
                 float* C, int64_t ldc, const float* bias, const Epilogue& e) {
  Problem p{trans_a, A, lda, M, packed_b, K * kNr, kNr, (N + kNr - 1) / kNr,
            nullptr, K, N,   C, ldc,      bias,    e,   &packed::pick_micro_kernel()};
  run_problem(p);
}

void packed_gemm_sourced(const float* A, int64_t lda, int64_t M, const PanelSource& b, int64_t K, int64_t N, float* C,
                         int64_t ldc, const float* bias, const Epilogue& e) {
  Problem p{false, A, lda, M, nullptr, 0, 0, 0, nullptr, K, N, C, ldc, bias, e, &packed::pick_micro_kernel(), &b};
  run_problem(p);
}

void gemm_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float* C, int64_t ldc, const float* bias, const Epilogue& e) {
  VIT_CHECK(M >= 0 && K >= 0 && N >= 0 && ldb >= (trans_b ? K : N), "packed_gemm", "invalid sizes K={} N={} ldb={}", K,
            N, ldb);
  if (M == 0 || N == 0) return;
  Problem p{trans_a, A, lda, M, nullptr, 0, 0, 0, nullptr, K, N, C, ldc, bias, e, &packed::pick_micro_kernel()};
  thread_local std::vector<float> storage;
  // A row-major B is read in place (whole panels; a last partial one is packed) when it is read
  // once (one block of rows of A) or fits in L2: packing it would cost more than the stride.
  if (!trans_b && (M <= block_rows(p.kernel->mr) || K * ldb <= kInPlaceBFloats)) {
    const int64_t whole = N / kNr;
    p.B = B, p.b_panel = kNr, p.b_k = ldb, p.b_whole = whole;
    if (whole * kNr < N) {
      float* tail = aligned_scratch(storage, packed_size(K, N - whole * kNr));
      pack_b(B + whole * kNr, K, N - whole * kNr, ldb, false, tail);
      p.b_tail = tail;
    }
    return run_problem(p);
  }
  float* packed = aligned_scratch(storage, packed_size(K, N));
  pack_b(B, K, N, ldb, trans_b, packed);
  p.B = packed, p.b_panel = K * kNr, p.b_k = kNr, p.b_whole = (N + kNr - 1) / kNr;
  run_problem(p);
}

}  // namespace vit::kernels
