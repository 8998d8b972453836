#!/usr/bin/env bash
# The README's test command (what CI runs): install dependencies, check that the C/C++ sources
# are clang-formatted (scripts/format.sh --check; scripts/format.sh fixes them), then build
# (warnings are errors) and run every test twice: a Release build, and the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` CMake preset; leaks are errors too).
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
if [ "${VIT_SANITIZERS:-1}" != 0 ]; then
  mark "AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
  cmake --preset asan
  cmake --build --preset asan -j "$(nproc)"
  mark "sanitizer tests"
  ctest --preset asan -j "$(nproc)"
fi
mark "done"
