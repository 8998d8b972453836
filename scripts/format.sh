#!/usr/bin/env bash
# clang-format for the C/C++ sources, with the repository's .clang-format (clang-format-14, which
# scripts/setup.sh installs). The one place that says which files are formatted:
#   scripts/format.sh [FILE ...]           formats in place (default: every source, see below)
#   scripts/format.sh --check [FILE ...]   changes nothing; lists the files that are not formatted
#                                          and exits 1 (scripts/test.sh runs this first)
#   scripts/format.sh --list               prints the file list
# The sources: the C/C++ files (.c .cc .cpp .cxx .h .hh .hpp) under src/ tests/ bench/ examples/
# python/ that git tracks, or that are new and not ignored; never the fuzz corpus (tests/fuzz/corpus/),
# the golden data (tests/golden/) or generated tables (*.inc, e.g. src/infer/imagenet_classes.inc).
# CLANG_FORMAT=... picks another binary (the result may then differ from CI's).
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format-14}"

mode=format
case "${1:-}" in
  --check) mode=check; shift ;;
  --list) mode=list; shift ;;
  -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "format.sh: unknown option '$1' (see scripts/format.sh --help)" >&2; exit 2 ;;
esac

source_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- src tests bench examples python
  else  # not a git checkout (e.g. an unpacked archive): the same directories, by name
    find src tests bench examples python -type f 2>/dev/null
  fi | grep -E '\.(c|cc|cpp|cxx|h|hh|hpp)$' | grep -vE '^tests/(fuzz/corpus|golden)/' | sort -u |
    while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done  # tracked but deleted: skip
}

if [ "$#" -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(source_files)
fi
if [ "$mode" = list ]; then
  printf '%s\n' "${files[@]}"
  exit 0
fi
if [ "${#files[@]}" -eq 0 ]; then
  echo "[format] no source files found" >&2
  exit 1
fi
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "[format] $CLANG_FORMAT not found: run scripts/setup.sh (installs Debian's clang-format-14)" >&2
  exit 1
fi
[ -f .clang-format ] || { echo "[format] .clang-format missing at the repository root" >&2; exit 1; }

if [ "$mode" = format ]; then
  "$CLANG_FORMAT" -i --style=file "${files[@]}"
  echo "[format] formatted ${#files[@]} file(s) with $CLANG_FORMAT"
  exit 0
fi

# --check: one clang-format run per file, so the report names files rather than every line.
unformatted=()
for f in "${files[@]}"; do
  if ! out=$("$CLANG_FORMAT" --dry-run -Werror --style=file "$f" 2>&1); then
    if grep -q -- '-Wclang-format-violations' <<<"$out"; then
      unformatted+=("$f")
    else  # clang-format itself failed (unreadable file, bad .clang-format, ...)
      printf '[format] %s failed on %s:\n%s\n' "$CLANG_FORMAT" "$f" "$out" >&2
      exit 1
    fi
  fi
done
if [ "${#unformatted[@]}" -gt 0 ]; then
  {
    echo "[format] ${#unformatted[@]} of ${#files[@]} file(s) not formatted as .clang-format says ($CLANG_FORMAT):"
    printf '  %s\n' "${unformatted[@]}"
    echo "[format] fix: scripts/format.sh   (formats them in place; then review and commit)"
  } >&2
  exit 1
fi
echo "[format] ${#files[@]} file(s) formatted as .clang-format says ($CLANG_FORMAT)"
