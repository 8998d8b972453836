#!/usr/bin/env bash
# The README's test command (what CI runs): install dependencies, check that the C/C++ sources
# are clang-formatted (scripts/format.sh --check; scripts/format.sh fixes them), then build
# (warnings are errors) and run every test twice: a Release build, and the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` CMake preset; leaks are errors too).
# Between the two, the BLAS-using suites run once more under another CPU class's OpenBLAS kernels
# (scripts/blas_coretype.sh picks one this CPU can execute).
# ctest replays the fuzz corpus (tests/fuzz/corpus) in both. VIT_SANITIZERS=0 skips the
# sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
mark() { echo "[test] $1 (at $((SECONDS - START)) s)"; }
./scripts/setup.sh
mark "format check"
./scripts/format.sh --check
BUILD_DIR="${BUILD_DIR:-build}"
mark "Release build and tests"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)"
mark "Release tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
# The BLAS-using suites again under the OpenBLAS kernels of another CPU class (the Release tests
# above ran the ones OpenBLAS picks here): what our kernels promise must not depend on them.
core_of() { sed -n 's/^Core: //p' | head -n 1; }
native=$(OPENBLAS_VERBOSE=2 "$BUILD_DIR/tests/test_kernels" --gtest_list_tests 2>&1 | core_of)
alt=$(./scripts/blas_coretype.sh "$native")
if [ -n "$alt" ]; then
  got=$(OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE="$alt" "$BUILD_DIR/tests/test_kernels" --gtest_list_tests 2>&1 | core_of)
  mark "BLAS-using tests with OPENBLAS_CORETYPE=$alt (OpenBLAS runs $got kernels; native: $native)"
  for t in kernels autograd nn optim model infer; do
    OPENBLAS_CORETYPE="$alt" "$BUILD_DIR/tests/test_$t" --gtest_brief=1
  done
fi
if [ "${VIT_SANITIZERS:-1}" != 0 ]; then
  mark "AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
  cmake --preset asan
  cmake --build --preset asan -j "$(nproc)"
  mark "sanitizer tests"
  ctest --preset asan -j "$(nproc)"
fi
mark "done"
