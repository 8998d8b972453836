#!/usr/bin/env bash
# Fuzzes the file readers and the network parsers (HTTP requests, inference requests) with libFuzzer +
# AddressSanitizer + UndefinedBehaviorSanitizer.
#   scripts/fuzz.sh [SECONDS] [TARGET ...]      (default: 600 s each; all targets)
# Targets: safetensors checkpoint npy idx cifar image pickle pth npz tar http oip oip_image grpc onnx (sources in tests/fuzz/). Each run starts from the
# committed seeds in tests/fuzz/corpus/<target>/ and grows a working corpus in
# build-fuzz/corpus/<target>/. Every libFuzzer artifact (crash-, leak-, timeout-, oom-<sha1>), from the
# fuzzing run and from the merge alike, is written to tests/fuzz/corpus/<target>/ (-artifact_prefix),
# never to the current directory (commit it with the fix: ctest replays the whole corpus). Memory is
# bounded: 2 GB resident (-rss_limit_mb) and no single allocation over 2 GB (-malloc_limit_mb), so
# an input that makes a reader allocate out of proportion to its size is an oom- artifact. With
# MERGE=1 the inputs that add coverage are merged back into the committed corpus at the end.
# Installs clang, libFuzzer and clang's OpenMP from Debian when missing. Not part of CI, which
# only replays the corpus (ctest -R fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-600}"
shift || true
TARGETS=("$@")
[ "${#TARGETS[@]}" -gt 0 ] || TARGETS=(safetensors checkpoint npy idx cifar image pickle pth npz tar http oip oip_image grpc onnx)

missing=()
for p in clang libclang-rt-14-dev libomp-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD=build-fuzz
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DVIT_FUZZ=ON -DVIT_NATIVE=OFF -DVIT_WERROR=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target $(printf 'fuzz_%s ' "${TARGETS[@]}")

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for t in "${TARGETS[@]}"; do
  seeds="tests/fuzz/corpus/$t"
  work="$BUILD/corpus/$t"
  mkdir -p "$work" "$seeds"
  artifacts="$PWD/$seeds/"   # absolute, so the prefix holds whatever libFuzzer's working directory is
  echo "=== fuzz_$t: ${SECONDS_EACH}s ==="
  set +e
  "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -print_final_stats=1 \
      -artifact_prefix="$artifacts" "$work" "$seeds" >"$BUILD/fuzz_$t.log" 2>&1
  rc=$?
  set -e
  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|ERROR|SUMMARY" \
    "$BUILD/fuzz_$t.log" || true
  if [ $rc -ne 0 ]; then
    echo "fuzz_$t: FAILED with exit $rc (log: $BUILD/fuzz_$t.log; a crashing input is saved in $seeds/)"
    status=1
  fi
  if [ "${MERGE:-0}" = 1 ]; then
    "$BUILD/tests/fuzz/fuzz_$t" -merge=1 -artifact_prefix="$artifacts" "$seeds" "$work" 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true
  fi
done
exit $status
