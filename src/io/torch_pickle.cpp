// The restricted unpickler's opcodes (see torch_pickle.h; the machine is torch_pickle_machine.h,
// the allowed globals torch_pickle_globals.cpp): one opcode at a time onto the stack, STOP ends.
#include "io/torch_pickle.h"

#include "io/torch_pickle_machine.h"

namespace vit::io::pickle {
namespace detail {

Pickle Machine::run() {
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

void Machine::step(uint8_t op) {
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

}  // namespace detail

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

Pickle parse(const char* data, size_t size, const std::string& name, uint64_t file_bytes) {
  return detail::Machine(data, size, name, file_bytes == 0 ? size : file_bytes).run();
}

}  // namespace vit::io::pickle
