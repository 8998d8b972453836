// safetensors reader and writer (see safetensors.h).
#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "core/printable.h"
#include "io/checksum.h"
#include "io/float16.h"
#include "io/mapped_file.h"

namespace vit::io {

std::string known_format(const char* base, uint64_t size) {
  auto starts = [&](std::string_view magic) {
    return size >= magic.size() && std::memcmp(base, magic.data(), magic.size()) == 0;
  };
  if (starts("\x89PNG\r\n\x1a\n")) return "a PNG image";
  if (starts("\xff\xd8\xff")) return "a JPEG image";
  if (starts("PK\x03\x04")) {
    return "a zip archive, as PyTorch .pth/.bin and NumPy .npz files are: vit predict, eval and the other model "
           "commands read those, and vit convert writes one as .safetensors";
  }
  if (size >= 2 && static_cast<unsigned char>(base[0]) == 0x80 && base[1] >= 2 && base[1] <= 5) {
    return "a Python pickle, as PyTorch's legacy (pre-1.6) checkpoints are: re-save it with a current PyTorch";
  }
  if (starts("\x93NUMPY")) return "a NumPy .npy array";
  if (starts("\x89HDF\r\n\x1a\n")) return "an HDF5 file";
  if (starts("GGUF")) return "a GGUF model";
  if (starts("\x1f\x8b")) return "gzip-compressed data";
  return "";
}

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

// The header as the checksum covers it: without __metadata__.checksum, keys sorted, no spaces.
uint64_t header_hash(nlohmann::json header) {
  if (auto it = header.find("__metadata__"); it != header.end() && it->is_object()) it->erase(kChecksumKey);
  const std::string text = header.dump();
  return xxh64(text.data(), text.size());
}

size_t stored_size(const std::string& dtype) {
  if (dtype == "I8") return 1;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

// Builds the tensor for one entry: zero-copy for I8, and for F32/F64/I64 when aligned, else converted.
Tensor make_tensor(const std::string& dtype, const Shape& shape, const char* data, std::shared_ptr<void> owner,
                   bool file_mapped) {
  const int64_t n = shape_numel(shape);
  if (dtype == "I8") return Tensor::from_blob(const_cast<char*>(data), shape, DType::I8, std::move(owner), file_mapped);
  const bool aligned = reinterpret_cast<uintptr_t>(data) % 8 == 0;
  if ((dtype == "F32" || dtype == "F64" || dtype == "I64") && aligned) {
    const DType dt = dtype == "F32" ? DType::F32 : (dtype == "F64" ? DType::F64 : DType::I64);
    return Tensor::from_blob(const_cast<char*>(data), shape, dt, std::move(owner), file_mapped);
  }
  if (dtype == "F32" || dtype == "F64" || dtype == "I64") {
    const DType dt = dtype == "F32" ? DType::F32 : (dtype == "F64" ? DType::F64 : DType::I64);
    Tensor t = Tensor::empty(shape, dt);
    std::memcpy(t.raw_data(), data, n * dtype_size(dt));
    return t;
  }
  if (dtype == "I32") {
    Tensor t = Tensor::empty(shape, DType::I64);
    int64_t* out = t.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, data + 4 * i, 4);
      out[i] = v;
    }
    return t;
  }
  Tensor t = Tensor::empty(shape, DType::F32);
  float* out = t.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    out[i] = dtype == "F16" ? half_to_float(h) : bf16_to_float(h);
  }
  return t;
}

[[noreturn]] void bad(const std::string& name, const std::string& what) { fail("safetensors", "{}: {}", name, what); }

// The 8-byte header length, checked against the file's size (and the file against other formats).
uint64_t read_header_length(const char* base, uint64_t size, const std::string& name) {
  if (size < 8) bad(name, fmt::format("file is {} bytes, too short for the 8-byte header length", size));
  uint64_t header_len;
  std::memcpy(&header_len, base, 8);
  // A header length that does not fit and no '{' where the JSON starts: another kind of file.
  if ((header_len > kMaxHeaderBytes || header_len > size - 8) && size > 8 && base[8] != '{') {
    const std::string kind = known_format(base, size);
    bad(name, kind.empty() ? fmt::format("not a safetensors file (its first 8 bytes, read as the header length, give "
                                         "{} for a {}-byte file, and no JSON header follows)",
                                         header_len, size)
                           : fmt::format("not a safetensors file (it is {})", kind));
  }
  if (header_len > kMaxHeaderBytes) bad(name, fmt::format("header length {} exceeds the 100 MB limit", header_len));
  if (header_len > size - 8) {
    bad(name, fmt::format("header length {} is longer than the file ({} bytes)", header_len, size));
  }
  return header_len;
}

// The JSON header: one object, nothing after it (nlohmann stops at a NUL byte; the format forbids
// anything after the JSON, so it is refused here).
nlohmann::json parse_header(const char* text, uint64_t length, const std::string& name) {
  if (std::memchr(text, '\0', length) != nullptr) bad(name, "header contains a NUL byte");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + length);
  } catch (const nlohmann::json::exception& e) {
    bad(name, fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) bad(name, "header is not a JSON object");
  return header;
}

// __metadata__: string values only; the header's hash when it holds a checksum.
void read_metadata(const nlohmann::json& header, const nlohmann::json& metadata, WeightsFile& file) {
  if (!metadata.is_object()) bad(file.path, "__metadata__ is not an object");
  for (auto m = metadata.begin(); m != metadata.end(); ++m) {
    if (!m->is_string()) bad(file.path, fmt::format("__metadata__ value '{}' is not a string", printable(m.key())));
    file.metadata[m.key()] = m->get<std::string>();
  }
  if (metadata.contains(kChecksumKey)) file.header_hash = header_hash(header);
}

struct Entry {
  std::string key, dtype;
  Shape shape;
  uint64_t begin, end;
};

// One tensor's entry: a known dtype, a shape whose byte size does not overflow, and data offsets
// inside the data section spanning exactly that size.
Entry read_entry(const std::string& key, const nlohmann::json& info, uint64_t data_size, const std::string& name) {
  auto bad_entry = [&](const std::string& what) { bad(name, fmt::format("tensor '{}': {}", printable(key), what)); };
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets") ||
      !info["dtype"].is_string() || !info["shape"].is_array() || !info["data_offsets"].is_array() ||
      info["data_offsets"].size() != 2) {
    bad_entry("entry needs dtype (string), shape (array), data_offsets ([begin, end])");
  }
  Entry e{key, info["dtype"].get<std::string>(), {}, 0, 0};
  if (stored_size(e.dtype) == 0) bad_entry(fmt::format("unsupported dtype {}", printable(e.dtype)));
  for (const auto& d : info["shape"]) {
    if (!d.is_number_unsigned()) bad_entry("shape entries must be non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) bad_entry(fmt::format("dimension {} too large", v));
    e.shape.push_back(static_cast<int64_t>(v));
  }
  for (const auto& o : info["data_offsets"]) {
    if (!o.is_number_unsigned()) bad_entry("data_offsets must be non-negative integers");
  }
  e.begin = info["data_offsets"][0].get<uint64_t>();
  e.end = info["data_offsets"][1].get<uint64_t>();
  int64_t numel = 0;
  try {
    numel = shape_numel(e.shape);
  } catch (const Error&) {
    bad_entry(fmt::format("element count of shape {} overflows", shape_str(e.shape)));
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), stored_size(e.dtype), &nbytes)) {
    bad_entry(fmt::format("byte size of shape {} overflows", shape_str(e.shape)));
  }
  if (e.begin > e.end || e.end > data_size) {
    bad_entry(fmt::format("data_offsets [{}, {}] outside the data section ({} bytes)", e.begin, e.end, data_size));
  }
  if (e.end - e.begin != nbytes) {
    bad_entry(fmt::format("{} {} needs {} bytes but data_offsets span {}", e.dtype, shape_str(e.shape), nbytes,
                          e.end - e.begin));
  }
  return e;
}

// The entries in the order of their data, none overlapping another.
void sort_without_overlap(std::vector<Entry>& entries, const std::string& name) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end) {
      bad(name, fmt::format("tensors '{}' and '{}' overlap in the data section", printable(entries[i - 1].key),
                            printable(entries[i].key)));
    }
  }
}

WeightsFile parse(const char* base, uint64_t size, std::shared_ptr<void> owner, const std::string& name,
                  bool file_mapped) {
  const uint64_t header_len = read_header_length(base, size, name);
  const nlohmann::json header = parse_header(base + 8, header_len, name);
  WeightsFile file;
  file.path = name;
  file.bytes = owner;
  file.data = base + 8 + header_len;
  file.data_size = size - 8 - header_len;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      read_metadata(header, *it, file);
    } else {
      entries.push_back(read_entry(it.key(), *it, file.data_size, name));
    }
  }
  sort_without_overlap(entries, name);
  for (const Entry& e : entries) {
    file.tensors.emplace_back(e.key, make_tensor(e.dtype, e.shape, file.data + e.begin, owner, file_mapped));
    file.spans.push_back({e.key, e.dtype, e.begin, e.end});
  }
  return file;
}

}  // namespace

WeightsFile parse_safetensors(std::shared_ptr<std::vector<char>> bytes, const std::string& name) {
  const char* base = bytes->data();
  const uint64_t size = bytes->size();
  return parse(base, size, std::static_pointer_cast<void>(bytes), name, false);
}

WeightsFile load_safetensors(const std::string& path) {
  const MappedFile file = map_file(path, "safetensors");
  return parse(file.data, file.size, file.owner, path, true);
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata, bool checksum, const Bf16Bits& bf16) {
  VIT_CHECK(!checksum || !metadata.count(kChecksumKey), "safetensors",
            "{}: metadata key '{}' is reserved for the checksum", path, kChecksumKey);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  auto& entries = header.get_ref<nlohmann::ordered_json::object_t&>();
  std::unordered_set<std::string> names;
  if (!metadata.empty() || checksum) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<Tensor> contiguous;
  std::vector<std::pair<const void*, size_t>> data;  // each tensor's bytes as stored
  size_t bf16_used = 0;
  for (const auto& [name, t] : tensors) {
    VIT_CHECK(t.defined(), "safetensors", "{}: tensor '{}' is undefined", path, printable(name));
    VIT_CHECK(name != "__metadata__", "safetensors", "{}: '__metadata__' is reserved and cannot name a tensor", path);
    VIT_CHECK(names.insert(name).second, "safetensors", "{}: tensor name '{}' repeated", path, printable(name));
    const auto bits = bf16.find(name);
    const char* dtype = bits != bf16.end()        ? "BF16"
                        : t.dtype() == DType::F32 ? "F32"
                        : t.dtype() == DType::F64 ? "F64"
                        : t.dtype() == DType::I8  ? "I8"
                                                  : "I64";
    uint64_t nbytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    contiguous.push_back(t.contiguous());
    if (bits != bf16.end()) {
      VIT_CHECK(t.dtype() == DType::F32 && bits->second.size() == static_cast<size_t>(t.numel()), "safetensors",
                "{}: tensor '{}' {} {}: {} bfloat16 values given for it (it must be float32, one per element)", path,
                name, dtype_name(t.dtype()), shape_str(t.shape()), bits->second.size());
      nbytes = static_cast<uint64_t>(t.numel()) * 2;
      data.emplace_back(bits->second.data(), nbytes);
      ++bf16_used;
    } else {
      data.emplace_back(contiguous.back().raw_data(), nbytes);
    }
    // Appended to the ordered object as it is (its own insert looks for the key first: quadratic).
    entries.emplace_back(
        name,
        nlohmann::ordered_json{{"dtype", dtype}, {"shape", t.shape()}, {"data_offsets", {offset, offset + nbytes}}});
    offset += nbytes;
  }
  VIT_CHECK(bf16_used == bf16.size(), "safetensors", "{}: {} bfloat16 tensors given, {} of them among the tensors",
            path, bf16.size(), bf16_used);
  std::string text;
  try {
    if (checksum) {  // see safetensors.h: the data section, seeded with the canonical header
      Xxh64 hash(header_hash(nlohmann::json::parse(header.dump())));
      for (const auto& [bytes, size] : data) hash.update(bytes, size);
      header["__metadata__"][kChecksumKey] = checksum_str(hash.digest());
    }
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // names or metadata that are not valid UTF-8
    fail("safetensors", "{}: cannot write the header as JSON ({})", path, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  const uint64_t header_len = text.size();
  AtomicFile f("safetensors", path);
  f.write(&header_len, 8);
  f.write(text.data(), text.size());
  for (const auto& [bytes, size] : data) f.write(bytes, size);
  f.commit();
}

}  // namespace vit::io
