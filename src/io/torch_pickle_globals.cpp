// The restricted unpickler's globals (see torch_pickle.h): the allow-list of every global a state
// dict file may name, and what each becomes when the machine (torch_pickle_machine.h) meets it:
// GLOBAL / STACK_GLOBAL, REDUCE / NEWOBJ and BINPERSID build plain values; nothing is imported or run.
#include "io/torch_pickle_machine.h"

namespace vit::io::pickle {
namespace detail {
namespace {

// The allow-list: every global a state dict file may name, and what it is.
const std::unordered_map<std::string, Role>& allowed_globals() {
  static const std::unordered_map<std::string, Role> globals = [] {
    std::unordered_map<std::string, Role> g = {
        {"collections.OrderedDict", Role::Dict},
        {"builtins.dict", Role::Dict},
        {"torch._utils._rebuild_tensor_v2", Role::Tensor},
        {"torch._utils._rebuild_tensor", Role::Tensor},
        {"torch._utils._rebuild_parameter", Role::Parameter},
        {"torch._utils._rebuild_parameter_with_state", Role::Parameter},
        {"torch.Size", Role::Tuple},
        {"builtins.set", Role::List},
        {"builtins.frozenset", Role::List},
        {"torch.UntypedStorage", Role::Storage},
        {"argparse.Namespace", Role::Opaque},
        {"pathlib.PosixPath", Role::Opaque},
        {"pathlib.WindowsPath", Role::Opaque},
        {"pathlib.Path", Role::Opaque},
        {"torch.torch_version.TorchVersion", Role::Opaque},
        {"numpy.core.multiarray.scalar", Role::Opaque},
        {"numpy.core.multiarray._reconstruct", Role::Opaque},
        {"numpy._core.multiarray.scalar", Role::Opaque},
        {"numpy._core.multiarray._reconstruct", Role::Opaque},
        {"numpy.ndarray", Role::Opaque},
        {"numpy.dtype", Role::Opaque},
        {"_codecs.encode", Role::Opaque},
    };
    for (const char* t : {"Float", "Half", "BFloat16", "Double", "Long", "Int", "Short", "Char", "Byte", "Bool"}) {
      g.emplace(fmt::format("torch.{}Storage", t), Role::Storage);
    }
    return g;
  }();
  return globals;
}

}  // namespace

uint32_t Machine::global(const std::string& module, const std::string& qualified) {
  const std::string full = module + "." + qualified;
  if (!allowed_globals().count(full)) {
    bad("global '{}' is refused: a checkpoint needs only tensors, containers and a few known data classes, and vit "
        "never runs code from a file",
        printable(full));
  }
  Value v;
  v.kind = Kind::Global;
  v.s = full;
  return make(std::move(v));
}
Role Machine::role(uint32_t callable) {
  if (kind(callable) != Kind::Global) bad("call of a {}, not of an allowed global", kind_name(kind(callable)));
  return allowed_globals().at(val(callable).s);
}

// REDUCE / NEWOBJ: what calling an allowed global yields, without calling anything. Every item
// copied out of an argument (a list's items into a tuple, a set, a dict) is charged by contain(),
// so calling a global again and again on one big memoized list stops at the memory budget.
uint32_t Machine::call(uint32_t callable, uint32_t args) {
  const Role r = role(callable);
  const std::string name = val(callable).s;  // a copy: make() below may move the arena
  if (kind(args) != Kind::Tuple) bad("arguments of {} must be a tuple, got {}", name, kind_name(kind(args)));
  if (r == Role::Opaque) {  // its arguments are never read
    Value v;
    v.kind = Kind::Object;
    v.s = name;
    return make(std::move(v));
  }
  if (val(args).items.size() > kMaxArguments) bad("{} called with {} arguments", name, val(args).items.size());
  const std::vector<uint32_t> a = val(args).items;  // a copy (at most kMaxArguments): make() may move the arena
  switch (r) {
    case Role::Opaque:
      break;
    case Role::Dict: {
      const uint32_t d = make(Kind::Dict);
      if (a.empty()) return d;
      if (a.size() != 1 || (kind(a[0]) != Kind::List && kind(a[0]) != Kind::Tuple)) {
        bad("{} takes no argument or a list of (key, value) pairs", name);
      }
      for (size_t k = 0; k < val(a[0]).items.size(); ++k) {  // by index: contain(d) never moves a[0]'s items
        const uint32_t pair = val(a[0]).items[k];
        if ((kind(pair) != Kind::Tuple && kind(pair) != Kind::List) || val(pair).items.size() != 2) {
          bad("{} takes (key, value) pairs", name);
        }
        const uint32_t key = val(pair).items[0], value = val(pair).items[1];
        contain(d, key);
        contain(d, value);
      }
      return d;
    }
    case Role::Tuple:
    case Role::List: {
      if (a.size() > 1) bad("{} takes at most one argument, got {}", name, a.size());
      if (a.empty()) return make(r == Role::Tuple ? Kind::Tuple : Kind::List);
      if (kind(a[0]) != Kind::Tuple && kind(a[0]) != Kind::List) bad("{} takes a tuple or a list", name);
      const uint32_t c = make(r == Role::Tuple ? Kind::Tuple : Kind::List);
      for (size_t k = 0; k < val(a[0]).items.size(); ++k) contain(c, val(a[0]).items[k]);
      return c;
    }
    case Role::Parameter:
      if (a.size() < 3 || a.size() > 4 || kind(a[0]) != Kind::Tensor) {
        bad("{} takes (tensor, requires_grad, hooks[, state])", name);
      }
      return a[0];
    case Role::Tensor: {
      if (a.size() < 4 || a.size() > 7 || kind(a[0]) != Kind::Storage) {
        bad("{} takes (storage, storage_offset, size, stride, ...)", name);
      }
      Value t;
      t.kind = Kind::Tensor;
      t.offset = integer(a[1], "storage_offset");
      t.size = ints(a[2], "size");
      t.stride = ints(a[3], "stride");
      if (t.size.size() != t.stride.size()) bad("size has {} dimensions, stride {}", t.size.size(), t.stride.size());
      const uint32_t index = make(std::move(t));
      contain(index, a[0]);
      return index;
    }
    case Role::Storage:
      break;
  }
  bad("{} is a storage type: it appears only inside a persistent id, never called", printable(name));
}

// BINPERSID: torch.save's ('storage', storage_type, key, location, numel).
uint32_t Machine::persistent(uint32_t pid) {
  if (kind(pid) != Kind::Tuple) bad("persistent id must be a tuple, got {}", kind_name(kind(pid)));
  if (val(pid).items.size() != 5) bad("persistent id is not ('storage', type, key, location, numel)");
  const std::vector<uint32_t> t = val(pid).items;
  if (kind(t[0]) != Kind::String || val(t[0]).s != "storage") {
    bad("persistent id is not ('storage', type, key, location, numel)");
  }
  if (kind(t[1]) != Kind::Global || role(t[1]) != Role::Storage) bad("persistent id's storage type is not a storage");
  Value s;
  s.kind = Kind::Storage;
  s.storage_type = val(t[1]).s.substr(6);  // without "torch."
  s.s = text(t[2], "storage key");
  text(t[3], "storage location");
  s.numel = integer(t[4], "storage numel");
  if (s.numel < 0) bad("storage '{}' has a negative size {}", printable(s.s), s.numel);
  return make(std::move(s));
}

}  // namespace detail

bool storage_element(const std::string& storage_type, std::string& dtype, size_t& bytes) {
  static const std::unordered_map<std::string, std::pair<const char*, size_t>> types = {
      {"FloatStorage", {"F32", 4}},  {"HalfStorage", {"F16", 2}},   {"BFloat16Storage", {"BF16", 2}},
      {"DoubleStorage", {"F64", 8}}, {"LongStorage", {"I64", 8}},   {"IntStorage", {"I32", 4}},
      {"ShortStorage", {"I16", 2}},  {"CharStorage", {"I8", 1}},    {"ByteStorage", {"U8", 1}},
      {"BoolStorage", {"BOOL", 1}},  {"UntypedStorage", {"U8", 1}},
  };
  const auto it = types.find(storage_type);
  if (it == types.end()) return false;
  dtype = it->second.first;
  bytes = it->second.second;
  return true;
}

}  // namespace vit::io::pickle
