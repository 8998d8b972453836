// The restricted unpickler (see torch_pickle.h). A stack machine over an arena of values: the
// stack, the mark stack and the memo hold arena indices; nothing is ever called.
#include "io/torch_pickle.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/check.h"

namespace vit::io::pickle {
namespace {

constexpr size_t kMaxPickleBytes = 512ull << 20;
constexpr size_t kMaxValues = 4'000'000;
constexpr uint16_t kMaxDepth = 1000;
constexpr size_t kMaxDims = 16;

enum class Role { Dict, Tensor, Parameter, Tuple, List, Storage, Opaque };

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

class Machine {
 public:
  Machine(const char* data, size_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  Pickle run() {
    VIT_CHECK(size_ <= kMaxPickleBytes, "pickle", "{}: {} bytes of pickle (at most {} are read)", name_, size_,
              kMaxPickleBytes);
    while (true) {
      VIT_CHECK(pos_ < size_, "pickle", "{}: the pickle ends at byte {} without its STOP opcode (truncated)", name_,
                size_);
      op_pos_ = pos_;
      const auto op = static_cast<uint8_t>(p_[pos_++]);
      if (op == '.') break;  // STOP
      step(op);
    }
    VIT_CHECK(stack_.size() == 1 && marks_.empty(), "pickle",
              "{}: STOP with {} values on the stack and {} open marks (expected one value)", name_, stack_.size(),
              marks_.size());
    out_.root = stack_.back();
    return std::move(out_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> format, Args&&... args) {
    fail("pickle", "{}: byte {}: {}", name_, op_pos_, fmt::format(format, std::forward<Args>(args)...));
  }

  const char* take(uint64_t n) {
    if (n > size_ - pos_)
      bad("the pickle ends inside an opcode's argument ({} bytes needed, {} left)", n, size_ - pos_);
    const char* at = p_ + pos_;
    pos_ += n;
    return at;
  }
  uint64_t le(int n) {
    const auto* b = reinterpret_cast<const uint8_t*>(take(n));
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | b[k];
    return v;
  }
  std::string line() {
    const char* start = p_ + pos_;
    const void* nl = std::memchr(start, '\n', std::min<size_t>(size_ - pos_, 4096));
    if (nl == nullptr && size_ - pos_ < 4096) bad("the pickle ends inside GLOBAL's name (truncated)");
    if (nl == nullptr) bad("GLOBAL's name is not a line of at most 4096 bytes");
    const auto n = static_cast<size_t>(static_cast<const char*>(nl) - start);
    pos_ += n + 1;
    return std::string(start, n);
  }

  uint32_t make(Value v) {
    if (out_.values.size() >= kMaxValues) bad("more than {} values (a state dict needs far fewer)", kMaxValues);
    out_.values.push_back(std::move(v));
    depth_.push_back(0);
    return static_cast<uint32_t>(out_.values.size() - 1);
  }
  uint32_t make(Kind kind) {
    Value v;
    v.kind = kind;
    return make(std::move(v));
  }
  Value& val(uint32_t index) { return out_.values[index]; }
  void push(uint32_t index) {
    if (stack_.size() >= kMaxValues) bad("the stack holds more than {} values", kMaxValues);
    stack_.push_back(index);
  }
  uint32_t pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("opcode needs a value but the stack is empty");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("opcode needs a value but the stack is empty");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) bad("opcode needs a MARK but there is none");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  // Puts `item` into container `c`, keeping the nesting depth within bounds.
  void contain(uint32_t c, uint32_t item) {
    const uint16_t d = static_cast<uint16_t>(std::min<int>(depth_[item] + 1, kMaxDepth + 1));
    if (d > kMaxDepth) bad("containers nested more than {} deep", kMaxDepth);
    depth_[c] = std::max(depth_[c], d);
    val(c).items.push_back(item);
  }
  uint32_t container(Kind kind, const std::vector<uint32_t>& items) {
    const uint32_t c = make(kind);
    for (uint32_t item : items) contain(c, item);
    return c;
  }
  uint32_t string_value(Kind kind, uint64_t n) {
    Value v;
    v.kind = kind;
    const char* at = take(n);
    v.s.assign(at, n);
    return make(std::move(v));
  }
  void memo_put(uint64_t index) {
    if (memo_.size() >= kMaxValues && !memo_.count(index)) bad("more than {} memo entries", kMaxValues);
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) bad("memo reference {} was never stored (memo holds {} entries)", index, memo_.size());
    push(it->second);
  }
  Kind kind(uint32_t index) const { return out_.values[index].kind; }
  const std::string& text(uint32_t index, const char* what) {
    if (kind(index) != Kind::String) bad("{} must be a string, got {}", what, kind_name(kind(index)));
    return val(index).s;
  }
  int64_t integer(uint32_t index, const char* what) {
    if (kind(index) != Kind::Int && kind(index) != Kind::Bool) {
      bad("{} must be an integer, got {}", what, kind_name(kind(index)));
    }
    return val(index).i;
  }
  Shape ints(uint32_t index, const char* what) {
    if (kind(index) != Kind::Tuple && kind(index) != Kind::List) {
      bad("{} must be a tuple of integers, got {}", what, kind_name(kind(index)));
    }
    const Value& v = val(index);
    if (v.items.size() > kMaxDims) bad("{} has {} dimensions (at most {})", what, v.items.size(), kMaxDims);
    Shape out;
    for (uint32_t item : v.items) out.push_back(integer(item, what));
    return out;
  }

  uint32_t global(const std::string& module, const std::string& qualified) {
    const std::string full = module + "." + qualified;
    if (!allowed_globals().count(full)) {
      bad("global '{}' is refused: a checkpoint needs only tensors, containers and a few known data classes, and vit "
          "never runs code from a file",
          full);
    }
    Value v;
    v.kind = Kind::Global;
    v.s = full;
    return make(std::move(v));
  }
  Role role(uint32_t callable) {
    if (kind(callable) != Kind::Global) bad("call of a {}, not of an allowed global", kind_name(kind(callable)));
    return allowed_globals().at(val(callable).s);
  }

  // REDUCE / NEWOBJ: what calling an allowed global yields, without calling anything.
  uint32_t call(uint32_t callable, uint32_t args) {
    const Role r = role(callable);
    const std::string name = val(callable).s;  // a copy: make() below may move the arena
    if (kind(args) != Kind::Tuple) bad("arguments of {} must be a tuple, got {}", name, kind_name(kind(args)));
    const std::vector<uint32_t> a = val(args).items;
    switch (r) {
      case Role::Opaque: {
        Value v;
        v.kind = Kind::Object;
        v.s = name;
        return make(std::move(v));
      }
      case Role::Dict: {
        const uint32_t d = make(Kind::Dict);
        if (a.empty()) return d;
        if (a.size() != 1 || (kind(a[0]) != Kind::List && kind(a[0]) != Kind::Tuple)) {
          bad("{} takes no argument or a list of (key, value) pairs", name);
        }
        const std::vector<uint32_t> pairs = val(a[0]).items;
        for (uint32_t pair : pairs) {
          if ((kind(pair) != Kind::Tuple && kind(pair) != Kind::List) || val(pair).items.size() != 2) {
            bad("{} takes (key, value) pairs", name);
          }
          const std::vector<uint32_t> kv = val(pair).items;
          contain(d, kv[0]);
          contain(d, kv[1]);
        }
        return d;
      }
      case Role::Tuple:
      case Role::List: {
        if (a.size() > 1) bad("{} takes at most one argument, got {}", name, a.size());
        if (a.empty()) return make(r == Role::Tuple ? Kind::Tuple : Kind::List);
        if (kind(a[0]) != Kind::Tuple && kind(a[0]) != Kind::List) bad("{} takes a tuple or a list", name);
        return container(r == Role::Tuple ? Kind::Tuple : Kind::List, val(a[0]).items);
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
    bad("{} is a storage type: it appears only inside a persistent id, never called", name);
  }

  // BINPERSID: torch.save's ('storage', storage_type, key, location, numel).
  uint32_t persistent(uint32_t pid) {
    if (kind(pid) != Kind::Tuple) bad("persistent id must be a tuple, got {}", kind_name(kind(pid)));
    const std::vector<uint32_t> t = val(pid).items;
    if (t.size() != 5 || kind(t[0]) != Kind::String || val(t[0]).s != "storage") {
      bad("persistent id is not ('storage', type, key, location, numel)");
    }
    if (kind(t[1]) != Kind::Global || role(t[1]) != Role::Storage) bad("persistent id's storage type is not a storage");
    Value s;
    s.kind = Kind::Storage;
    s.storage_type = val(t[1]).s.substr(6);  // without "torch."
    s.s = text(t[2], "storage key");
    text(t[3], "storage location");
    s.numel = integer(t[4], "storage numel");
    if (s.numel < 0) bad("storage '{}' has a negative size {}", s.s, s.numel);
    return make(std::move(s));
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t v = le(1);
        if (v < 2 || v > 5) bad("pickle protocol {} (2 to 5 are read)", v);
        return;
      }
      case 0x95:  // FRAME: a length hint
        if (le(8) > size_ - pos_) bad("FRAME runs past the end of the pickle");
        return;
      case '(':
        if (marks_.size() >= kMaxDepth) bad("more than {} open MARKs", kMaxDepth);
        marks_.push_back(stack_.size());
        return;
      case '0':
        pop();
        return;
      case '1':
        pop_mark();
        return;
      case '2':
        push(top());
        return;
      case 'N':
        push(make(Kind::None));
        return;
      case 0x88:
      case 0x89: {
        Value v;
        v.kind = Kind::Bool;
        v.i = op == 0x88;
        push(make(std::move(v)));
        return;
      }
      case 'J':
      case 'K':
      case 'M': {
        Value v;
        v.kind = Kind::Int;
        v.i = op == 'J' ? static_cast<int32_t>(le(4)) : static_cast<int64_t>(le(op == 'K' ? 1 : 2));
        push(make(std::move(v)));
        return;
      }
      case 0x8a:
      case 0x8b: {  // LONG1 / LONG4: little-endian two's complement
        const uint64_t n = le(op == 0x8a ? 1 : 4);
        if (n > 8) bad("integer of {} bytes (at most 64 bits are read)", n);
        const auto* b = reinterpret_cast<const uint8_t*>(take(n));
        uint64_t u = 0;
        for (uint64_t k = 0; k < n; ++k) u |= static_cast<uint64_t>(b[k]) << (8 * k);
        if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
        Value v;
        v.kind = Kind::Int;
        v.i = static_cast<int64_t>(u);
        push(make(std::move(v)));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const auto* b = reinterpret_cast<const uint8_t*>(take(8));
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | b[k];
        Value v;
        v.kind = Kind::Float;
        std::memcpy(&v.f, &u, 8);
        push(make(std::move(v)));
        return;
      }
      case 'X':
        push(string_value(Kind::String, le(4)));
        return;
      case 0x8c:
        push(string_value(Kind::String, le(1)));
        return;
      case 0x8d:
        push(string_value(Kind::String, le(8)));
        return;
      case 'T':
        push(string_value(Kind::String, le(4)));
        return;
      case 'U':
        push(string_value(Kind::String, le(1)));
        return;
      case 'B':
        push(string_value(Kind::Bytes, le(4)));
        return;
      case 'C':
        push(string_value(Kind::Bytes, le(1)));
        return;
      case 0x8e:
      case 0x96:
        push(string_value(Kind::Bytes, le(8)));
        return;
      case ')':
        push(make(Kind::Tuple));
        return;
      case 't':
        push(container(Kind::Tuple, pop_mark()));
        return;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<uint32_t> items(op - 0x84);
        for (size_t k = items.size(); k-- > 0;) items[k] = pop();
        push(container(Kind::Tuple, items));
        return;
      }
      case ']':
        push(make(Kind::List));
        return;
      case 'l':
        push(container(Kind::List, pop_mark()));
        return;
      case 0x8f:  // EMPTY_SET: read as a list
        push(make(Kind::List));
        return;
      case 0x91:  // FROZENSET
        push(container(Kind::List, pop_mark()));
        return;
      case 'a': {
        const uint32_t item = pop();
        const uint32_t list = top();
        if (kind(list) != Kind::List) bad("APPEND to a {}, not a list", kind_name(kind(list)));
        contain(list, item);
        return;
      }
      case 'e':
      case 0x90: {  // APPENDS / ADDITEMS
        const std::vector<uint32_t> items = pop_mark();
        const uint32_t list = top();
        if (kind(list) != Kind::List) bad("APPENDS to a {}, not a list", kind_name(kind(list)));
        for (uint32_t item : items) contain(list, item);
        return;
      }
      case '}':
        push(make(Kind::Dict));
        return;
      case 'd': {
        const std::vector<uint32_t> items = pop_mark();
        if (items.size() % 2 != 0) bad("DICT with an odd number of items");
        push(container(Kind::Dict, items));
        return;
      }
      case 's': {
        const uint32_t value = pop(), key = pop();
        const uint32_t dict = top();
        if (kind(dict) != Kind::Dict) bad("SETITEM on a {}, not a dict", kind_name(kind(dict)));
        contain(dict, key);
        contain(dict, value);
        return;
      }
      case 'u': {
        const std::vector<uint32_t> items = pop_mark();
        if (items.size() % 2 != 0) bad("SETITEMS with an odd number of items");
        const uint32_t dict = top();
        if (kind(dict) != Kind::Dict) bad("SETITEMS on a {}, not a dict", kind_name(kind(dict)));
        for (uint32_t item : items) contain(dict, item);
        return;
      }
      case 'c': {
        const std::string module = line();
        const std::string qualified = line();
        push(global(module, qualified));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        const uint32_t qualified = pop(), module = pop();
        push(global(text(module, "STACK_GLOBAL's module"), text(qualified, "STACK_GLOBAL's name")));
        return;
      }
      case 'R': {
        const uint32_t args = pop(), callable = pop();
        push(call(callable, args));
        return;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
        const uint32_t args = pop(), cls = pop();
        push(call(cls, args));
        return;
      }
      case 0x92: {  // NEWOBJ_EX: keyword arguments are read and dropped (opaque classes only)
        const uint32_t kwargs = pop(), args = pop(), cls = pop();
        (void)kwargs;
        if (role(cls) != Role::Opaque) bad("NEWOBJ_EX of {} (only opaque data classes)", val(cls).s);
        push(call(cls, args));
        return;
      }
      case 'b': {  // BUILD: state for an object that keeps none of it
        pop();
        const uint32_t object = top();
        const Kind k = kind(object);
        if (k != Kind::Dict && k != Kind::Object && k != Kind::Tensor && k != Kind::List) {
          bad("BUILD on a {} (only dicts, tensors and opaque objects take state)", kind_name(k));
        }
        return;
      }
      case 'Q':
        push(persistent(pop()));
        return;
      case 'q':
        memo_put(le(1));
        return;
      case 'r':
        memo_put(le(4));
        return;
      case 0x94:
        memo_put(memo_.size());
        return;
      case 'h':
        memo_get(le(1));
        return;
      case 'j':
        memo_get(le(4));
        return;
      default:
        break;
    }
    if (op == 'i' || op == 'o' || op == 'P' || op == 'I' || op == 'L' || op == 'F' || op == 'S' || op == 'V' ||
        op == 'p' || op == 'g') {
      bad("text-protocol opcode '{}' (protocol 0/1 pickles are not read; torch.save writes protocol 2)",
          static_cast<char>(op));
    }
    bad("unsupported opcode 0x{:02x}", op);
  }

  const char* p_;
  size_t size_;
  size_t pos_ = 0, op_pos_ = 0;
  const std::string& name_;
  Pickle out_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "global";
    case Kind::Object:
      return "object";
    case Kind::Storage:
      return "storage";
    case Kind::Tensor:
      return "tensor";
  }
  return "?";
}

Pickle parse(const char* data, size_t size, const std::string& name) { return Machine(data, size, name).run(); }

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
