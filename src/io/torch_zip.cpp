// torch.save zips (see weights_file.h): the archive's one pickle read by the restricted unpickler,
// the state dicts found in it, and their storages turned into tensors.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "core/check.h"
#include "io/float16.h"
#include "io/torch_pickle.h"
#include "io/weights_file.h"

namespace vit::io {
namespace {

using pickle::Kind;
using pickle::Pickle;
using pickle::Value;

constexpr const char* kWeightKeys[] = {"state_dict", "model", "module", "model_state_dict", "model_state"};
constexpr const char* kEmaKeys[] = {"state_dict_ema", "model_ema", "ema_state_dict"};

bool is_state_dict(const Pickle& p, uint32_t index) {
  const Value& v = p.at(index);
  if (v.kind != Kind::Dict || v.items.empty()) return false;
  for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
    if (p.at(v.items[k]).kind != Kind::String || p.at(v.items[k + 1]).kind != Kind::Tensor) return false;
  }
  return true;
}

// What a skipped top-level value is, for the listing.
std::string describe(const Pickle& p, uint32_t index) {
  const Value& v = p.at(index);
  if (v.kind == Kind::Object) return fmt::format("{}, never run", v.s);
  if (v.kind == Kind::Dict || v.kind == Kind::List || v.kind == Kind::Tuple) {
    return fmt::format("{} of {}", pickle::kind_name(v.kind),
                       v.kind == Kind::Dict ? v.items.size() / 2 : v.items.size());
  }
  return pickle::kind_name(v.kind);
}

// Reads the storages' entries and turns tensor values into Tensors.
class TensorBuilder {
 public:
  TensorBuilder(const ZipArchive& zip, const std::string& prefix, const Pickle& p)
      : zip_(zip), prefix_(prefix), p_(p) {}

  // How many tensors view each storage key (those seen more than once are copied, never borrowed).
  void count(uint32_t tensor) { ++users_[p_.at(p_.at(tensor).items[0]).s]; }

  // name: the key as stored (for messages); scanned_as: when not empty, a float32 tensor that is its
  // whole storage is searched for NaN/Inf under this name while its bytes are read for their CRC
  // (into prescan / prescanned), so that nobody reads them again for it.
  Tensor build(const std::string& name, uint32_t tensor, const std::string& scanned_as = "",
               ContentScan* prescan = nullptr, std::vector<std::string>* prescanned = nullptr) {
    const View v = check_view(name, tensor);
    ZipArchive::BlockVisitor visit;
    std::mutex found;
    const bool whole = v.dtype == "F32" && v.contiguous && v.offset == 0 && v.numel == v.storage_numel &&
                       users_[v.storage] == 1 && !read_.count(v.entry->name) && prescan != nullptr &&
                       !scanned_as.empty();
    if (whole) {
      visit = prescan_visitor(scanned_as, *prescan, found);
      prescanned->push_back(scanned_as);
    }
    const ZipBytes& bytes = entry_bytes(*v.entry, visit);
    const char* base = bytes.data + static_cast<uint64_t>(v.offset) * v.element;
    if (v.dtype == "F32" && v.contiguous && users_[v.storage] == 1 && reinterpret_cast<uintptr_t>(base) % 8 == 0) {
      return Tensor::from_blob(const_cast<char*>(base), v.shape, DType::F32, bytes.owner, bytes.mapped);
    }
    return gather(v, bytes.data);
  }

 private:
  // A tensor value checked against its storage: a storage type that is read, an archive entry that
  // holds the storage, and a view (offset, size, stride) inside it.
  struct View {
    std::string storage, dtype;  // the storage's key; its element type ("F32", "I64", ...)
    size_t element = 0;          // bytes per element
    const ZipEntry* entry = nullptr;
    int64_t storage_numel = 0, offset = 0, numel = 0;
    Shape shape, stride;
    bool contiguous = true;
  };

  View check_view(const std::string& name, uint32_t tensor) const {
    const Value& t = p_.at(tensor);
    const Value& s = p_.at(t.items[0]);
    const std::string where = fmt::format("{}: tensor '{}'", zip_.name(), name);
    View v;
    v.storage = s.s;
    v.storage_numel = s.numel;
    v.offset = t.offset;
    v.shape = t.size;
    v.stride = t.stride;
    VIT_CHECK(pickle::storage_element(s.storage_type, v.dtype, v.element), "pytorch", "{}: storage type {} is not read",
              where, s.storage_type);
    v.entry = zip_.find(prefix_ + "data/" + s.s);
    VIT_CHECK(v.entry != nullptr, "pytorch", "{}: its storage '{}' has no entry {}data/{} in the archive", where, s.s,
              prefix_, s.s);
    uint64_t storage_bytes = 0;
    VIT_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(s.numel), v.element, &storage_bytes) &&
                  storage_bytes <= v.entry->size,
              "pytorch", "{}: its storage '{}' claims {} elements of {} bytes, but its entry holds {} bytes", where,
              s.s, s.numel, v.element, v.entry->size);
    check_bounds(where, v);
    for (int64_t d = static_cast<int64_t>(v.shape.size()) - 1, expect = 1; d >= 0; --d) {
      if (v.shape[d] != 1 && v.stride[d] != expect) v.contiguous = false;
      expect *= v.shape[d];
    }
    return v;
  }

  // The view must lie inside the storage: offset + sum((size - 1) * stride) < numel.
  static void check_bounds(const std::string& where, View& v) {
    VIT_CHECK(v.offset >= 0, "pytorch", "{}: negative storage offset {}", where, v.offset);
    bool empty = false;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      VIT_CHECK(v.shape[d] >= 0 && v.stride[d] >= 0, "pytorch", "{}: size {} / stride {} (negative)", where,
                shape_str(v.shape), shape_str(v.stride));
      if (v.shape[d] == 0) empty = true;
    }
    try {
      v.numel = shape_numel(v.shape);
    } catch (const Error&) {
      fail("pytorch", "{}: size {} overflows", where, shape_str(v.shape));
    }
    if (empty) return;
    uint64_t last = static_cast<uint64_t>(v.offset);
    for (size_t d = 0; d < v.shape.size(); ++d) {
      uint64_t reach = 0;
      VIT_CHECK(
          !__builtin_mul_overflow(static_cast<uint64_t>(v.shape[d] - 1), static_cast<uint64_t>(v.stride[d]), &reach) &&
              !__builtin_add_overflow(last, reach, &last),
          "pytorch", "{}: size {} with stride {} overflows", where, shape_str(v.shape), shape_str(v.stride));
    }
    VIT_CHECK(last < static_cast<uint64_t>(v.storage_numel), "pytorch",
              "{}: the view (offset {}, size {}, stride {}) reaches element {} of a {}-element storage", where,
              v.offset, shape_str(v.shape), shape_str(v.stride), last, v.storage_numel);
  }

  // Searches each block of a float32 storage for NaN/Inf as the archive reads it (concurrently, for
  // different blocks), keeping the first one found in the tensor that comes first.
  static ZipArchive::BlockVisitor prescan_visitor(const std::string& scanned_as, ContentScan& prescan,
                                                  std::mutex& found) {
    return [&scanned_as, &prescan, &found](const char* block, uint64_t offset, uint64_t size) {
      ContentScan local;
      scan_floats(block - offset, static_cast<int64_t>(offset / 4), static_cast<int64_t>((offset + size) / 4), "F32",
                  scanned_as, local);
      if (local.nonfinite_count == 0) return;
      std::lock_guard lock(found);
      if (prescan.nonfinite_count == 0 ||
          (prescan.nonfinite_tensor == scanned_as && local.nonfinite_index < prescan.nonfinite_index)) {
        prescan.nonfinite_tensor = local.nonfinite_tensor;
        prescan.nonfinite_index = local.nonfinite_index;
        prescan.nonfinite_value = local.nonfinite_value;
      }
      prescan.nonfinite_count += local.nonfinite_count;
    };
  }

  // A copy of the view in row-major order (an odometer over the dimensions), converted to float32
  // (from float16 / bfloat16), float64 or int64.
  static Tensor gather(const View& v, const char* storage) {
    const bool floating = v.dtype == "F32" || v.dtype == "F16" || v.dtype == "BF16";
    Tensor out = Tensor::empty(v.shape, floating ? DType::F32 : (v.dtype == "F64" ? DType::F64 : DType::I64));
    if (v.numel == 0) return out;
    const size_t nd = v.shape.size();
    std::vector<int64_t> index(nd, 0);
    int64_t at = v.offset;
    for (int64_t i = 0; i < v.numel; ++i) {
      store(out, i, v.dtype, storage + static_cast<uint64_t>(at) * v.element);
      for (size_t d = nd; d-- > 0;) {
        at += v.stride[d];
        if (++index[d] < v.shape[d]) break;
        at -= v.stride[d] * v.shape[d];
        index[d] = 0;
      }
    }
    return out;
  }

  static void store(Tensor& out, int64_t i, const std::string& dtype, const char* e) {
    if (dtype == "F32") {
      std::memcpy(out.data<float>() + i, e, 4);
    } else if (dtype == "F16" || dtype == "BF16") {
      uint16_t h;
      std::memcpy(&h, e, 2);
      out.data<float>()[i] = dtype == "F16" ? half_to_float(h) : bf16_to_float(h);
    } else if (dtype == "F64") {
      std::memcpy(out.data<double>() + i, e, 8);
    } else {
      int64_t v = 0;
      if (dtype == "I64") {
        std::memcpy(&v, e, 8);
      } else if (dtype == "I32") {
        int32_t x;
        std::memcpy(&x, e, 4);
        v = x;
      } else if (dtype == "I16") {
        int16_t x;
        std::memcpy(&x, e, 2);
        v = x;
      } else if (dtype == "I8") {
        v = static_cast<int8_t>(*e);
      } else {
        v = static_cast<uint8_t>(*e);  // U8, BOOL
      }
      out.data<int64_t>()[i] = v;
    }
  }

  const ZipBytes& entry_bytes(const ZipEntry& entry, const ZipArchive::BlockVisitor& visit) {
    auto it = read_.find(entry.name);
    if (it == read_.end()) it = read_.emplace(entry.name, zip_.read(entry, visit)).first;  // CRC checked once
    return it->second;
  }

  const ZipArchive& zip_;
  std::string prefix_;
  const Pickle& p_;
  std::map<std::string, int> users_;
  std::map<std::string, ZipBytes> read_;
};

std::string common_prefix_to_strip(const std::vector<std::pair<std::string, uint32_t>>& entries) {
  for (const char* prefix : {"module.", "_orig_mod."}) {
    const std::string p = prefix;
    if (!entries.empty() && std::all_of(entries.begin(), entries.end(), [&](const auto& e) {
          return e.first.size() > p.size() && e.first.compare(0, p.size(), p) == 0;
        })) {
      return p;
    }
  }
  return "";
}

std::vector<std::pair<std::string, uint32_t>> dict_entries(const Pickle& p, uint32_t dict) {
  std::vector<std::pair<std::string, uint32_t>> out;
  const Value& v = p.at(dict);
  std::set<std::string> seen;
  for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
    const std::string& key = p.at(v.items[k]).s;
    if (!seen.insert(key).second) {  // a later SETITEM replaces the value, as in Python
      for (auto& e : out) {
        if (e.first == key) e.second = v.items[k + 1];
      }
      continue;
    }
    out.emplace_back(key, v.items[k + 1]);
  }
  return out;
}

// The archive's one pickle, <archive>/data.pkl (a TorchScript archive refused by name).
std::string find_data_pkl(const ZipArchive& zip) {
  const std::string& name = zip.name();
  // TorchScript (torch.jit.save) archives hold a data.pkl too, beside their compiled code.
  const bool torchscript = std::any_of(zip.entries().begin(), zip.entries().end(), [](const ZipEntry& e) {
    return e.name.find("/constants.pkl") != std::string::npos || e.name.find("/code/") != std::string::npos;
  });
  VIT_CHECK(!torchscript, "pytorch",
            "{}: a TorchScript archive (torch.jit.save): its weights sit inside compiled code; save the model's "
            "state_dict() with torch.save instead",
            name);
  std::string pkl;
  for (const ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      VIT_CHECK(pkl.empty(), "pytorch", "{}: two pickles ({} and {}): not one torch.save file", name, pkl, e.name);
      pkl = e.name;
    }
  }
  VIT_CHECK(!pkl.empty(), "pytorch", "{}: a zip archive without an <archive>/data.pkl entry: not a torch.save file",
            name);
  return pkl;
}

void check_byte_order(const ZipArchive& zip, const std::string& prefix) {
  if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
    const ZipBytes b = zip.read(*order);
    VIT_CHECK(std::string(b.data, b.size) == "little", "pytorch", "{}: byte order '{}' (little-endian files are read)",
              zip.name(), std::string(b.data, std::min<uint64_t>(b.size, 16)));
  }
}

// Where the pickle's state dicts are: the root itself, or entries of a root dict by their usual
// keys (the weights', the EMA's; a file of EMA weights only has them as its weights). The keys
// found and the entries skipped are recorded in file.torch.
struct StateDicts {
  uint32_t weights = 0, ema = 0;
  bool have_ema = false;
};

StateDicts find_state_dicts(const Pickle& p, WeightsFile& file) {
  const std::string& name = file.path;
  StateDicts found;
  if (is_state_dict(p, p.root)) {
    found.weights = p.root;
    return found;
  }
  const Value& root = p.at(p.root);
  VIT_CHECK(root.kind == Kind::Dict, "pytorch", "{}: holds a {}, not a state dict (a dict of tensors)", name,
            pickle::kind_name(root.kind));
  std::vector<std::pair<std::string, uint32_t>> entries;
  for (size_t k = 0; k + 1 < root.items.size(); k += 2) {
    const Value& key = p.at(root.items[k]);
    entries.emplace_back(key.kind == Kind::String ? key.s : fmt::format("<{} key>", pickle::kind_name(key.kind)),
                         root.items[k + 1]);
  }
  auto pick = [&](const auto& keys, uint32_t& index, std::string& key) {
    for (const char* wanted : keys) {
      for (const auto& [k, v] : entries) {
        if (k != wanted) continue;
        VIT_CHECK(is_state_dict(p, v), "pytorch",
                  "{}: entry '{}' is a {}, not a state dict (a dict of tensors by name)", name, k, describe(p, v));
        index = v;
        key = k;
        return true;
      }
    }
    return false;
  };
  bool have_weights = pick(kWeightKeys, found.weights, file.torch.weights_key);
  found.have_ema = pick(kEmaKeys, found.ema, file.torch.ema_key);
  for (const auto& [k, v] : entries) {
    if (k != file.torch.weights_key && k != file.torch.ema_key)
      file.torch.skipped.push_back(fmt::format("{} ({})", k, describe(p, v)));
  }
  if (!have_weights && found.have_ema) {  // a file of EMA weights only: they are its weights
    found.weights = found.ema;
    have_weights = true;
    found.have_ema = false;
    file.torch.weights_key = file.torch.ema_key;
    file.torch.ema_key.clear();
  }
  VIT_CHECK(have_weights, "pytorch",
            "{}: no state dict in this file (looked at the top level and the entries state_dict, model, module, "
            "model_state_dict, model_state, state_dict_ema, model_ema; it holds {})",
            name, entries.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(file.torch.skipped, ", ")));
  return found;
}

// The state dicts' tensors, read from their storages (module. / _orig_mod. prefixes stripped); the
// weights' float32 storages searched for NaN/Inf as they are read (file.torch.prescan).
void build_tensors(const ZipArchive& zip, const std::string& prefix, const Pickle& p, const StateDicts& dicts,
                   WeightsFile& file) {
  TensorBuilder builder(zip, prefix, p);
  const auto weight_entries = dict_entries(p, dicts.weights);
  const auto ema_entries = dicts.have_ema ? dict_entries(p, dicts.ema) : decltype(weight_entries){};
  for (const auto& e : weight_entries) builder.count(e.second);
  for (const auto& e : ema_entries) builder.count(e.second);
  file.torch.stripped_prefix = common_prefix_to_strip(weight_entries);
  for (const auto& [key, tensor] : weight_entries) {
    const std::string stripped = key.substr(file.torch.stripped_prefix.size());
    file.tensors.emplace_back(stripped,
                              builder.build(key, tensor, stripped, &file.torch.prescan, &file.torch.prescanned));
  }
  const std::string ema_prefix = common_prefix_to_strip(ema_entries);
  for (const auto& [key, tensor] : ema_entries) {
    file.torch.ema.emplace_back(key.substr(ema_prefix.size()), builder.build(key, tensor));
  }
}

}  // namespace

WeightsFile read_torch_zip(const ZipArchive& zip) {
  const std::string pkl = find_data_pkl(zip);
  const std::string prefix = pkl.substr(0, pkl.size() - 8);  // "<archive>/"
  check_byte_order(zip, prefix);
  const ZipBytes pkl_bytes = zip.read(*zip.find(pkl));
  const Pickle p = pickle::parse(pkl_bytes.data, pkl_bytes.size, fmt::format("{}: {}", zip.name(), pkl));
  WeightsFile file;
  file.path = zip.name();
  file.format = WeightsFormat::TorchZip;
  const StateDicts dicts = find_state_dicts(p, file);
  build_tensors(zip, prefix, p, dicts, file);
  return file;
}

}  // namespace vit::io
