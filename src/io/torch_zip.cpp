// torch.save zips (see weights_file.h): the archive's one pickle read by the restricted unpickler,
// the state dicts found in it, and their storages turned into tensors.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/check.h"
#include "core/printable.h"
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

// Reads the storages' entries and turns tensor values into Tensors. Each storage is made a tensor
// once, over the elements its views reach (float32 borrowed from the archive where aligned; float16
// / bfloat16 widened to float32, integers to int64, once), and every tensor is a view of it (offset,
// size, stride), as torch.load gives them: forty keys naming one storage cost that storage once,
// never forty copies. Weights that share a storage alias, as in PyTorch; a model's parameters do
// not (nn::Module::load_state_dict shares a storage with one parameter only).
class TensorBuilder {
 public:
  TensorBuilder(const ZipArchive& zip, const std::string& prefix, const Pickle& p)
      : zip_(zip), prefix_(prefix), p_(p) {}

  // Checks a tensor's view and records the elements it reaches and that it uses its storage, before
  // any is built.
  void plan(const std::string& name, uint32_t tensor) {
    const View v = check_view(name, tensor);
    Use& use = uses_[v.use_key()];
    ++use.users;
    if (v.numel == 0) return;
    use.lo = std::min(use.lo, v.offset);
    use.hi = std::max(use.hi, v.last);
  }

  // name: the key as stored (for messages); scanned_as: when not empty, a float32 tensor that is its
  // whole storage is searched for NaN/Inf under this name while its bytes are read for their CRC
  // (into prescan / prescanned), so that nobody reads them again for it.
  Tensor build(const std::string& name, uint32_t tensor, const std::string& scanned_as = "",
               ContentScan* prescan = nullptr, std::vector<std::string>* prescanned = nullptr) {
    const View v = check_view(name, tensor);
    const Use& use = uses_.at(v.use_key());
    if (v.numel == 0) return Tensor::empty(v.shape, widened(v.dtype));
    ZipArchive::BlockVisitor visit;
    std::mutex found;
    const bool whole = v.dtype == "F32" && v.contiguous && v.offset == 0 && v.numel == v.storage_numel &&
                       use.users == 1 && !read_.count(v.entry->name) && prescan != nullptr && !scanned_as.empty();
    if (whole) {
      visit = prescan_visitor(scanned_as, v.numel, *prescan, found);
      prescanned->push_back(scanned_as);
    }
    const ZipBytes& bytes = entry_bytes(*v.entry, visit);
    auto it = storages_.find(v.use_key());
    if (it == storages_.end()) it = storages_.emplace(v.use_key(), storage_tensor(v, use, bytes)).first;
    return it->second.as_strided(v.shape, v.stride, v.offset - use.lo);
  }

 private:
  // A tensor value checked against its storage: a storage type that is read, an archive entry that
  // holds the storage, and a view (offset, size, stride) inside it.
  struct View {
    std::string storage, dtype;  // the storage's key; its element type ("F32", "I64", ...)
    size_t element = 0;          // bytes per element
    const ZipEntry* entry = nullptr;
    int64_t storage_numel = 0, offset = 0, numel = 0;
    int64_t last = 0;  // the last element it reaches (numel > 0)
    Shape shape, stride;
    bool contiguous = true;
    // A storage as typed by a persistent id (one key could be named with two types).
    std::string use_key() const { return storage + '\0' + dtype; }
  };
  // How a storage is used: by how many tensors, and the elements [lo, hi] their views reach.
  struct Use {
    int users = 0;
    int64_t lo = INT64_MAX, hi = -1;
  };

  static DType widened(const std::string& dtype) {
    if (dtype == "F32" || dtype == "F16" || dtype == "BF16") return DType::F32;
    return dtype == "F64" ? DType::F64 : DType::I64;
  }

  // A storage's elements [use.lo, use.hi] as one tensor: borrowed from the archive (float32, where
  // aligned), else converted once.
  static Tensor storage_tensor(const View& v, const Use& use, const ZipBytes& bytes) {
    const char* first = bytes.data + static_cast<uint64_t>(use.lo) * v.element;
    const Shape elements = {use.hi - use.lo + 1};
    if (v.dtype == "F32" && reinterpret_cast<uintptr_t>(first) % 8 == 0) {
      return Tensor::from_blob(const_cast<char*>(first), elements, DType::F32, bytes.owner, bytes.mapped);
    }
    View all = v;
    all.offset = use.lo;
    all.shape = elements;
    all.stride = {1};
    all.numel = elements[0];
    return gather(all, bytes.data);
  }

  View check_view(const std::string& name, uint32_t tensor) const {
    const Value& t = p_.at(tensor);
    const Value& s = p_.at(t.items[0]);
    const std::string where = fmt::format("{}: tensor '{}'", zip_.name(), printable(name));
    View v;
    v.storage = s.s;
    v.storage_numel = s.numel;
    v.offset = t.offset;
    v.shape = t.size;
    v.stride = t.stride;
    VIT_CHECK(pickle::storage_element(s.storage_type, v.dtype, v.element), "pytorch", "{}: storage type {} is not read",
              where, s.storage_type);
    v.entry = zip_.find(prefix_ + "data/" + s.s);
    VIT_CHECK(v.entry != nullptr, "pytorch", "{}: its storage '{}' has no entry {}data/{} in the archive", where,
              printable(s.s), printable(prefix_), printable(s.s));
    uint64_t storage_bytes = 0;
    VIT_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(s.numel), v.element, &storage_bytes) &&
                  storage_bytes <= v.entry->size,
              "pytorch", "{}: its storage '{}' claims {} elements of {} bytes, but its entry holds {} bytes", where,
              printable(s.s), s.numel, v.element, v.entry->size);
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
    v.last = static_cast<int64_t>(last);
  }

  // Searches each block of a float32 storage for NaN/Inf as the archive reads it (concurrently, for
  // different blocks), keeping the first one found in the tensor that comes first. Only the tensor's
  // numel elements: bytes of the entry past them are no element of it.
  static ZipArchive::BlockVisitor prescan_visitor(const std::string& scanned_as, int64_t numel, ContentScan& prescan,
                                                  std::mutex& found) {
    return [&scanned_as, numel, &prescan, &found](const char* block, uint64_t offset, uint64_t size) {
      ContentScan local;
      const auto first = static_cast<int64_t>(offset / 4);
      const int64_t last = std::min(numel, static_cast<int64_t>((offset + size) / 4));
      if (first >= last) return;
      scan_floats(block - offset, first, last, "F32", scanned_as, local);
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
    Tensor out = Tensor::empty(v.shape, widened(v.dtype));
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
  std::unordered_map<std::string, Use> uses_;
  std::unordered_map<std::string, Tensor> storages_;
  std::unordered_map<std::string, ZipBytes> read_;
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

// A state dict's (key, tensor) entries in order; a key set again keeps its place and takes the
// later value, as in Python (one hash lookup per key).
std::vector<std::pair<std::string, uint32_t>> dict_entries(const Pickle& p, uint32_t dict) {
  std::vector<std::pair<std::string, uint32_t>> out;
  const Value& v = p.at(dict);
  std::unordered_map<std::string_view, size_t> at;  // key -> its place in out
  for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
    const std::string& key = p.at(v.items[k]).s;
    const auto [it, fresh] = at.emplace(key, out.size());
    if (fresh) {
      out.emplace_back(key, v.items[k + 1]);
    } else {
      out[it->second].second = v.items[k + 1];
    }
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
      VIT_CHECK(pkl.empty(), "pytorch", "{}: two pickles ({} and {}): not one torch.save file", name, printable(pkl),
                printable(e.name));
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
              zip.name(), printable(std::string(b.data, std::min<uint64_t>(b.size, 16))));
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
                  "{}: entry '{}' is a {}, not a state dict (a dict of tensors by name)", name, printable(k),
                  describe(p, v));
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
      file.torch.skipped.push_back(fmt::format("{} ({})", printable(k), describe(p, v)));
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
            name, entries.empty() ? std::string("nothing") : short_list(file.torch.skipped));
  return found;
}

// The state dicts' tensors, read from their storages (module. / _orig_mod. prefixes stripped); the
// weights' float32 storages searched for NaN/Inf as they are read (file.torch.prescan).
void build_tensors(const ZipArchive& zip, const std::string& prefix, const Pickle& p, const StateDicts& dicts,
                   WeightsFile& file) {
  TensorBuilder builder(zip, prefix, p);
  const auto weight_entries = dict_entries(p, dicts.weights);
  const auto ema_entries = dicts.have_ema ? dict_entries(p, dicts.ema) : decltype(weight_entries){};
  for (const auto& [key, tensor] : weight_entries) builder.plan(key, tensor);
  for (const auto& [key, tensor] : ema_entries) builder.plan(key, tensor);
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
  const Pickle p = pickle::parse(pkl_bytes.data, pkl_bytes.size, fmt::format("{}: {}", zip.name(), printable(pkl)),
                                 zip.archive_size());
  WeightsFile file;
  file.path = zip.name();
  file.format = WeightsFormat::TorchZip;
  const StateDicts dicts = find_state_dicts(p, file);
  build_tensors(zip, prefix, p, dicts, file);
  return file;
}

}  // namespace vit::io
