#!/usr/bin/env bash
# Prints the OpenBLAS core type to test besides the one OpenBLAS picks for this CPU, so that the
# test command checks a kernel family this machine does not get by default (a Zen 4 gets
# Cooperlake kernels, a Zen 3 or Zen 5 Haswell or Zen ones). Only core types whose instructions
# this CPU has are candidates (OpenBLAS's forced kernels would otherwise die of SIGILL), tried in
# the order Cooperlake, SkylakeX, Haswell, Zen, Sandybridge. Prints nothing when none differs.
#   scripts/blas_coretype.sh NATIVE      (NATIVE: what OPENBLAS_VERBOSE=2 printed as "Core: ...")
set -euo pipefail
native="${1:-}"
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
candidates=()
has avx512_bf16 && candidates+=(Cooperlake)
has avx512f && has avx512vl && candidates+=(SkylakeX)
has avx2 && has fma && candidates+=(Haswell Zen)
has avx && candidates+=(Sandybridge)
for c in "${candidates[@]}"; do
  if [ "${c,,}" != "${native,,}" ]; then
    echo "$c"
    exit 0
  fi
done
