// The restricted unpickler's machine, shared by its two files and by nothing else: torch_pickle.cpp
// runs the opcodes, torch_pickle_globals.cpp gives the allowed globals their meaning (see
// torch_pickle.h). A stack machine over an arena of values: the stack, the mark stack and the
// memo hold arena indices; nothing is ever called.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "core/check.h"
#include "core/printable.h"
#include "io/torch_pickle.h"

namespace vit::io::pickle::detail {

inline constexpr size_t kMaxPickleBytes = 512ull << 20;
inline constexpr size_t kMaxValues = 4'000'000;
inline constexpr uint16_t kMaxDepth = 1000;
inline constexpr size_t kMaxDims = 16;
inline constexpr uint64_t kMemoEntryBytes = 64;  // a memo entry: a hash node and its bucket
inline constexpr size_t kMaxArguments = 7;       // the most a call of an allowed global takes

// What an allowed global is (the allow-list is in torch_pickle_globals.cpp).
enum class Role { Dict, Tensor, Parameter, Tuple, List, Storage, Opaque };

class Machine {
 public:
  Machine(const char* data, size_t size, const std::string& name, uint64_t file_bytes)
      : p_(data), size_(size), name_(name), file_bytes_(file_bytes) {
    budget_ =
        file_bytes > (UINT64_MAX - kMemoryFloor) / kMemoryRatio ? UINT64_MAX : kMemoryFloor + kMemoryRatio * file_bytes;
  }

  Pickle run();

 private:
  // One opcode (torch_pickle.cpp: the switch over every opcode read).
  void step(uint8_t op);

  // The globals (torch_pickle_globals.cpp): GLOBAL / STACK_GLOBAL's check against the allow-list,
  // the role of a callable, what REDUCE / NEWOBJ of one yields, BINPERSID's storage.
  uint32_t global(const std::string& module, const std::string& qualified);
  Role role(uint32_t callable);
  uint32_t call(uint32_t callable, uint32_t args);
  uint32_t persistent(uint32_t pid);

  // The input, the arena, the stack and marks, the memo, and typed reads of values.
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

  // Counts `bytes` more of what the pickle builds against the budget (see torch_pickle.h).
  void charge(uint64_t bytes) {
    if (bytes > budget_ - spent_) {
      bad("what the pickle builds exceeds its memory budget of {} bytes ({} MiB + {} x the {}-byte file it came "
          "from; a state dict needs a small part of that)",
          budget_, kMemoryFloor >> 20, kMemoryRatio, file_bytes_);
    }
    spent_ += bytes;
  }
  uint32_t make(Value v) {
    if (out_.values.size() >= kMaxValues) bad("more than {} values (a state dict needs far fewer)", kMaxValues);
    charge(sizeof(Value) + sizeof(uint16_t) + v.s.size() + v.storage_type.size() + 4 * v.items.size() +
           8 * (v.size.size() + v.stride.size()));
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
    charge(sizeof(uint32_t));
    val(c).items.push_back(item);
  }
  // (items: a copy, never an arena value's own items, which make() may move.)
  uint32_t container(Kind kind, const std::vector<uint32_t>& items) {
    const uint32_t c = make(kind);
    for (uint32_t item : items) contain(c, item);
    return c;
  }
  uint32_t string_value(Kind kind, uint64_t n) {
    Value v;
    v.kind = kind;
    const char* at = take(n);
    if (n > budget_ - spent_) charge(n);  // refused before it is copied
    v.s.assign(at, n);
    return make(std::move(v));
  }
  void memo_put(uint64_t index) {
    const auto [it, fresh] = memo_.try_emplace(index, 0);
    if (fresh && memo_.size() > kMaxValues) bad("more than {} memo entries", kMaxValues);
    if (fresh) charge(kMemoEntryBytes);
    it->second = top();
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

  const char* p_;
  size_t size_;
  size_t pos_ = 0, op_pos_ = 0;
  const std::string& name_;
  uint64_t file_bytes_ = 0, budget_ = 0, spent_ = 0;
  Pickle out_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

}  // namespace vit::io::pickle::detail
