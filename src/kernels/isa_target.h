// Target attributes for code compiled once per ISA inside a baseline x86-64 build (see
// cpu_features.h): VIT_TARGET_AVX2 / VIT_TARGET_AVX512 on a function let GCC use those
// instructions there only; the caller picks the copy from active_isa(). For a plain loop, the
// pattern is a [[gnu::flatten]] wrapper per ISA around one generic inline body (flatten inlines the
// body, vmath.h's exp/erf included, so it is vectorised at that ISA's width), and per_isa()
// choosing among them.
#pragma once

#include "kernels/cpu_features.h"

#define VIT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define VIT_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl")))
// AVX-512 with AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16): only where cpu_features().avx512bf16.
#define VIT_TARGET_BF16 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")))

namespace vit::kernels {

// The copy for the active level: avx512 from Isa::Avx512, avx2 from Isa::Avx2, else plain.
template <typename Fn>
Fn per_isa(Fn plain, Fn avx2, Fn avx512) {
  return isa_enabled(Isa::Avx512) ? avx512 : isa_enabled(Isa::Avx2) ? avx2 : plain;
}

}  // namespace vit::kernels
