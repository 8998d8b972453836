// Attention for at most 16 tokens per head (see attention_small.h), AVX-512, in transposed form:
// S^T, P^T, dP^T, dS^T are 16 vectors (one per key j) whose lanes are the queries i, so the
// softmax and its backward are elementwise across them (a first version on rows spent its time
// in the horizontal max/sum chains). Every product is vector += broadcast scalar * vector; q, dO,
// P and the results go through 16 x 16 register transposes (gemm/small_gemm.h), lanes past N or HD
// zero. exp is vmath.h's exp_fast, the same polynomial on 16 lanes.
#include "kernels/attention_small.h"

#include <immintrin.h>

#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/gemm/small_gemm.h"
#include "kernels/isa_target.h"

namespace vit::kernels {
namespace {

constexpr int64_t L = kSmallAttentionTokens;

// (GCC 12 warns about the undefined vector inside its own intrinsics.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// exp_fast (vmath.h) on 16 lanes: the same clamps, reduction and polynomial.
VIT_TARGET_AVX512 inline __m512 exp16(__m512 input) {
  const __m512 low = _mm512_max_ps(input, _mm512_set1_ps(-87.33654f));
  const __m512 x = _mm512_min_ps(low, _mm512_set1_ps(88.3f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                         _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, z, r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  const __m512 result = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
  const __mmask16 under = _mm512_cmp_ps_mask(input, _mm512_set1_ps(-87.33654f), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(result, under, _mm512_setzero_ps());  // underflow to 0 as expf does
}

// rows (N, HD) of dst, row stride ld, from their transpose t (HD, 16); add: dst += (scale) rows.
VIT_TARGET_AVX512 inline void store_rows(const float* t, int64_t N, int64_t HD, float* dst, int64_t ld, bool add,
                                         float scale) {
  alignas(64) float buf[L * L];
  transpose16_avx512(t, L, HD, N, buf, L);
  const __mmask16 features = static_cast<__mmask16>((1u << HD) - 1u);
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < N; ++i) {
    float* d = dst + i * ld;
    __m512 x = _mm512_mul_ps(sc, _mm512_load_ps(buf + i * L));
    if (add) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(features, d));
    _mm512_mask_storeu_ps(d, features, x);
  }
}

// The pair in transposed form: S^T[j] (lanes: queries i) = sum_d k[j][d] q^T[d], so the softmax
// over j is elementwise across 16 vectors (no horizontal reductions on the critical path).
VIT_TARGET_AVX512 void forward_avx512(const float* q, const float* k, const float* v, int64_t row, int64_t N,
                                      int64_t HD, float scale, float* probs, float* out, int64_t out_stride) {
  const __mmask16 queries = static_cast<__mmask16>((1u << N) - 1u);
  alignas(64) float qt[L * L], pt[L * L], ot[L * L];
  transpose16_avx512(q, row, N, HD, qt, L);  // q^T (HD, 16)
  __m512 st[L];
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < N; ++j) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t d = 0; d < HD; ++d) s = _mm512_fmadd_ps(_mm512_set1_ps(k[j * row + d]), _mm512_load_ps(qt + d * L), s);
    st[j] = _mm512_mul_ps(s, _mm512_set1_ps(scale));
    mx = _mm512_max_ps(mx, st[j]);
  }
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < N; ++j) {
    st[j] = exp16(_mm512_sub_ps(st[j], mx));
    sum = _mm512_add_ps(sum, st[j]);
  }
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), queries, sum));
  for (int64_t j = 0; j < N; ++j) {
    st[j] = _mm512_mul_ps(st[j], inv);  // P^T[j]
    _mm512_store_ps(pt + j * L, st[j]);
  }
  for (int64_t d = 0; d < HD; ++d) {  // out^T[d] = sum_j v[j][d] P^T[j]
    __m512 o = _mm512_setzero_ps();
    for (int64_t j = 0; j < N; ++j) o = _mm512_fmadd_ps(_mm512_set1_ps(v[j * row + d]), st[j], o);
    _mm512_store_ps(ot + d * L, o);
  }
  store_rows(pt, N, N, probs, N, false, 1.0f);
  store_rows(ot, N, HD, out, out_stride, false, 1.0f);
}

// Transposed as the forward: dP^T[j] (lanes i) = sum_d v[j][d] dO^T[d]; dS^T[j] = P^T[j] (dP^T[j]
// - sum_j dP^T[j] P^T[j]); dq^T[d] = sum_j k[j][d] dS^T[j]; dk^T[d] (lanes j) = sum_i q[i][d]
// dS[i]; dv^T[d] (lanes j) = sum_i dO[i][d] P[i].
VIT_TARGET_AVX512 void backward_avx512(const float* q, const float* k, const float* v, int64_t row, int64_t N,
                                       int64_t HD, float scale, const float* probs, const float* dout,
                                       int64_t dout_stride, float* dq, float* dk, float* dv) {
  const __mmask16 tokens = static_cast<__mmask16>((1u << N) - 1u);
  alignas(64) float dot[L * L], pt[L * L], dst[L * L], ds[L * L], t[L * L];
  transpose16_avx512(dout, dout_stride, N, HD, dot, L);  // dO^T (HD, 16)
  transpose16_avx512(probs, N, N, N, pt, L);             // P^T (N, 16)
  __m512 g[L];
  __m512 rowsum = _mm512_setzero_ps();
  for (int64_t j = 0; j < N; ++j) {
    __m512 dp = _mm512_setzero_ps();
    for (int64_t d = 0; d < HD; ++d)
      dp = _mm512_fmadd_ps(_mm512_set1_ps(v[j * row + d]), _mm512_load_ps(dot + d * L), dp);
    g[j] = dp;
    rowsum = _mm512_fmadd_ps(dp, _mm512_load_ps(pt + j * L), rowsum);
  }
  for (int64_t j = 0; j < N; ++j) {
    g[j] = _mm512_mul_ps(_mm512_load_ps(pt + j * L), _mm512_sub_ps(g[j], rowsum));  // dS^T[j]
    _mm512_store_ps(dst + j * L, g[j]);
  }
  for (int64_t d = 0; d < HD; ++d) {  // dq^T
    __m512 a = _mm512_setzero_ps();
    for (int64_t j = 0; j < N; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(k[j * row + d]), g[j], a);
    _mm512_store_ps(t + d * L, a);
  }
  store_rows(t, N, HD, dq, row, true, scale);
  transpose16_avx512(dst, L, N, N, ds, L);  // dS (N, 16)
  for (int64_t d = 0; d < HD; ++d) {        // dk^T
    __m512 a = _mm512_setzero_ps();
    for (int64_t i = 0; i < N; ++i) a = _mm512_fmadd_ps(_mm512_set1_ps(q[i * row + d]), _mm512_load_ps(ds + i * L), a);
    _mm512_store_ps(t + d * L, a);
  }
  store_rows(t, N, HD, dk, row, true, scale);
  for (int64_t d = 0; d < HD; ++d) {  // dv^T
    __m512 a = _mm512_setzero_ps();
    for (int64_t i = 0; i < N; ++i)
      a = _mm512_fmadd_ps(_mm512_set1_ps(dout[i * dout_stride + d]), _mm512_maskz_loadu_ps(tokens, probs + i * N), a);
    _mm512_store_ps(t + d * L, a);
  }
  store_rows(t, N, HD, dv, row, true, 1.0f);
}

#pragma GCC diagnostic pop

}  // namespace

SmallAttentionForward small_attention_forward() { return isa_enabled(Isa::Avx512) ? forward_avx512 : nullptr; }

SmallAttentionBackward small_attention_backward() { return isa_enabled(Isa::Avx512) ? backward_avx512 : nullptr; }

}  // namespace vit::kernels
