// Content checks of a parsed safetensors file (see safetensors.h): the checksum and a search
// for NaN/Inf, in one pass over the data section. Each block is hashed, then the float tensors'
// elements that start in it are scanned while it is still in cache. The scan looks at exponent
// bits only (all ones: Inf or NaN), a branch-free max that vectorises, and walks a chunk element
// by element only when that chunk holds a non-finite value.
#include <algorithm>
#include <cstring>
#include <limits>

#include "io/checksum.h"
#include "io/safetensors.h"

namespace vit::io {
namespace {

constexpr uint64_t kBlockBytes = 1 << 20;
constexpr int64_t kChunk = 1024;  // elements per exponent-max test

// The element at p, known to be non-finite: NaN, Inf or -Inf.
template <typename Bits>
double nonfinite_value(Bits bits, Bits exponent, Bits sign) {
  if ((bits & static_cast<Bits>(~(exponent | sign))) != 0) return std::numeric_limits<double>::quiet_NaN();
  return (bits & sign) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

// Scans elements [first, last) of a tensor stored at p whose exponent field is `exponent`.
template <typename Bits>
void scan_run(const char* p, int64_t first, int64_t last, Bits exponent, Bits sign, const std::string& name,
              ContentScan& out) {
  for (int64_t start = first; start < last; start += kChunk) {
    const int64_t end = std::min(last, start + kChunk);
    Bits worst = 0;
    for (int64_t i = start; i < end; ++i) {
      Bits b;
      std::memcpy(&b, p + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
      worst = std::max<Bits>(worst, b & exponent);
    }
    if (worst != exponent) continue;
    for (int64_t i = start; i < end; ++i) {
      Bits b;
      std::memcpy(&b, p + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
      if ((b & exponent) != exponent) continue;
      if (out.nonfinite_count++ == 0) {
        out.nonfinite_tensor = name;
        out.nonfinite_index = i;
        out.nonfinite_value = nonfinite_value<Bits>(b, exponent, sign);
      }
    }
  }
}

// The elements of `span` that start in the data bytes [lo, hi).
void scan_span(const WeightsFile& file, const WeightsFile::Span& span, uint64_t lo, uint64_t hi, ContentScan& out) {
  const std::string& d = span.dtype;
  const uint64_t size = d == "F64" ? 8 : d == "F32" ? 4 : (d == "F16" || d == "BF16") ? 2 : 0;
  if (size == 0) return;  // integers are always finite
  const auto numel = static_cast<int64_t>((span.end - span.begin) / size);
  const auto element = [&](uint64_t byte) {  // first element starting at or after `byte`
    return byte <= span.begin ? int64_t{0} : static_cast<int64_t>((byte - span.begin + size - 1) / size);
  };
  const int64_t first = element(lo), last = std::min(numel, element(hi));
  const char* p = file.data + span.begin;
  if (d == "F32") scan_run<uint32_t>(p, first, last, 0x7f800000u, 0x80000000u, span.name, out);
  if (d == "F64") scan_run<uint64_t>(p, first, last, 0x7ff0000000000000ull, 0x8000000000000000ull, span.name, out);
  if (d == "F16") scan_run<uint16_t>(p, first, last, 0x7c00, 0x8000, span.name, out);
  if (d == "BF16") scan_run<uint16_t>(p, first, last, 0x7f80, 0x8000, span.name, out);
}

}  // namespace

void scan_floats(const char* p, int64_t first, int64_t last, const std::string& dtype, const std::string& name,
                 ContentScan& out) {
  if (dtype == "F32") scan_run<uint32_t>(p, first, last, 0x7f800000u, 0x80000000u, name, out);
  if (dtype == "F64") scan_run<uint64_t>(p, first, last, 0x7ff0000000000000ull, 0x8000000000000000ull, name, out);
  if (dtype == "F16") scan_run<uint16_t>(p, first, last, 0x7c00, 0x8000, name, out);
  if (dtype == "BF16") scan_run<uint16_t>(p, first, last, 0x7f80, 0x8000, name, out);
}

ContentScan scan_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  ContentScan out;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();
    const char* p = static_cast<const char*>(c.raw_data());
    if (c.dtype() == DType::F32) scan_run<uint32_t>(p, 0, c.numel(), 0x7f800000u, 0x80000000u, name, out);
    if (c.dtype() == DType::F64) {
      scan_run<uint64_t>(p, 0, c.numel(), 0x7ff0000000000000ull, 0x8000000000000000ull, name, out);
    }
  }
  return out;
}

ContentScan scan_contents(const WeightsFile& file, bool checksum, bool finite) {
  ContentScan out;
  Xxh64 hash(file.header_hash);
  size_t next = 0;  // the first span that ends after the current block's start
  for (uint64_t lo = 0; lo < file.data_size && (checksum || finite); lo += kBlockBytes) {
    const uint64_t hi = std::min(file.data_size, lo + kBlockBytes);
    if (checksum) hash.update(file.data + lo, hi - lo);
    if (!finite) continue;
    while (next < file.spans.size() && file.spans[next].end <= lo) ++next;
    for (size_t s = next; s < file.spans.size() && file.spans[s].begin < hi; ++s) {
      scan_span(file, file.spans[s], lo, hi, out);
    }
  }
  if (checksum) out.checksum = checksum_str(hash.digest());
  return out;
}

}  // namespace vit::io
