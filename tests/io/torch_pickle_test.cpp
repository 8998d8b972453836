// The restricted unpickler (io/torch_pickle.h) on hand-assembled pickles: what a state dict
// needs is read, and every hostile construct is refused by name, in bounded time and memory,
// without anything being called.
#include "io/torch_pickle.h"

#include <gtest/gtest.h>

#include <string>

#include "core/check.h"

namespace vit::io::pickle {
namespace {

// Pickle assembly: each helper appends one opcode with its argument.
struct Bytes {
  std::string b;
  Bytes& op(char c) {
    b += c;
    return *this;
  }
  Bytes& raw(const std::string& s) {
    b += s;
    return *this;
  }
  Bytes& proto() { return op('\x80').op('\x02'); }
  Bytes& str(const std::string& s) {  // BINUNICODE
    op('X');
    for (int k = 0; k < 4; ++k) b += static_cast<char>((s.size() >> (8 * k)) & 0xff);
    return raw(s);
  }
  Bytes& i1(int v) { return op('K').op(static_cast<char>(v)); }  // BININT1
  Bytes& global(const std::string& module, const std::string& name) { return op('c').raw(module + "\n" + name + "\n"); }
  Bytes& stop() { return op('.'); }
};

std::string error_of(const std::string& bytes) {
  try {
    parse(bytes.data(), bytes.size(), "t.pkl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A one-tensor state dict as torch.save writes it (protocol 2):
// OrderedDict([("w", _rebuild_tensor_v2(storage('FloatStorage', '0', 'cpu', 6), 0, (2, 3), (3, 1), False,
// OrderedDict()))])
std::string state_dict_pickle() {
  Bytes p;
  p.proto().global("collections", "OrderedDict").op(')').op('R');  // the dict
  p.str("w");
  p.global("torch._utils", "_rebuild_tensor_v2");
  p.op('(');  // args tuple
  p.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").i1(6).op('t').op('Q');
  p.i1(0);
  p.i1(2).i1(3).op('\x86');  // size (2, 3)
  p.i1(3).i1(1).op('\x86');  // stride (3, 1)
  p.op('\x89');              // False
  p.global("collections", "OrderedDict").op(')').op('R');
  p.op('t').op('R');  // the tensor
  p.op('s').stop();   // dict["w"] = tensor
  return p.b;
}

TEST(TorchPickle, ReadsAStateDictWithoutCallingAnything) {
  const std::string bytes = state_dict_pickle();
  const Pickle p = parse(bytes.data(), bytes.size(), "t.pkl");
  const Value& root = p.at(p.root);
  ASSERT_EQ(root.kind, Kind::Dict);
  ASSERT_EQ(root.items.size(), 2u);
  EXPECT_EQ(p.at(root.items[0]).s, "w");
  const Value& t = p.at(root.items[1]);
  ASSERT_EQ(t.kind, Kind::Tensor);
  EXPECT_EQ(t.size, (Shape{2, 3}));
  EXPECT_EQ(t.stride, (Shape{3, 1}));
  const Value& s = p.at(t.items[0]);
  EXPECT_EQ(s.kind, Kind::Storage);
  EXPECT_EQ(s.storage_type, "FloatStorage");
  EXPECT_EQ(s.s, "0");
  EXPECT_EQ(s.numel, 6);
}

TEST(TorchPickle, RefusesEveryGlobalOffTheAllowList) {
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{{"posix", "system"},
                                                                                     {"os", "system"},
                                                                                     {"builtins", "eval"},
                                                                                     {"builtins", "exec"},
                                                                                     {"subprocess", "Popen"},
                                                                                     {"mymodule", "Evil"},
                                                                                     {"torch", "load"},
                                                                                     {"builtins", "getattr"}}) {
    Bytes p;
    p.proto().global(module, name).str("echo pwned").op('\x85').op('R').stop();
    const std::string e = error_of(p.b);
    EXPECT_NE(e.find("global '" + module + "." + name + "' is refused"), std::string::npos) << e;
  }
  // STACK_GLOBAL (protocol 4) is checked the same way.
  Bytes p;
  p.op('\x80').op('\x04').str("builtins").str("eval").op('\x93').stop();
  EXPECT_NE(error_of(p.b).find("global 'builtins.eval' is refused"), std::string::npos);
}

TEST(TorchPickle, RefusesMalformedStreams) {
  Bytes memo;
  memo.proto().op('h').op('\x07').stop();  // BINGET 7, never put
  EXPECT_NE(error_of(memo.b).find("memo reference 7 was never stored"), std::string::npos);

  const std::string whole = state_dict_pickle();
  for (size_t cut : {size_t{1}, size_t{5}, whole.size() / 2, whole.size() - 1}) {
    const std::string e = error_of(whole.substr(0, cut));
    EXPECT_FALSE(e.empty()) << "cut at " << cut;
    EXPECT_NE(e.find("[pickle] t.pkl"), std::string::npos) << e;
  }

  Bytes long_string;  // BINUNICODE claiming 4 GB
  long_string.proto().op('X').raw(std::string("\xff\xff\xff\xff", 4)).stop();
  EXPECT_NE(error_of(long_string.b).find("ends inside an opcode's argument"), std::string::npos);

  Bytes wide;  // LONG1 of 9 bytes
  wide.proto().op('\x8a').op('\x09').raw(std::string(9, '\x01')).stop();
  EXPECT_NE(error_of(wide.b).find("at most 64 bits"), std::string::npos);

  Bytes underflow;
  underflow.proto().op('a').stop();  // APPEND with nothing on the stack
  EXPECT_NE(error_of(underflow.b).find("stack is empty"), std::string::npos);

  Bytes text;  // protocol 0 INT
  text.op('I').raw("1\n").stop();
  EXPECT_NE(error_of(text.b).find("text-protocol opcode 'I'"), std::string::npos);

  Bytes storage_call;  // a storage type called like a function
  storage_call.proto().global("torch", "FloatStorage").op(')').op('R').stop();
  EXPECT_NE(error_of(storage_call.b).find("storage type"), std::string::npos);

  Bytes two;  // STOP with two values
  two.proto().op('N').op('N').stop();
  EXPECT_NE(error_of(two.b).find("expected one value"), std::string::npos);
}

TEST(TorchPickle, NestingBombIsRefusedQuickly) {
  Bytes p;
  p.proto();
  for (int i = 0; i < 100000; ++i) p.op(']');
  for (int i = 0; i < 99999; ++i) p.op('a');
  p.stop();
  EXPECT_NE(error_of(p.b).find("nested more than 1000 deep"), std::string::npos);
  Bytes marks;
  marks.proto();
  for (int i = 0; i < 100000; ++i) marks.op('(');
  EXPECT_NE(error_of(marks.b).find("more than 1000 open MARKs"), std::string::npos);
}

TEST(TorchPickle, SharedAndCyclicContainersCostNothing) {
  // A list appended to itself (memo): Python builds a cycle; we hold indices, nothing recurses.
  Bytes p;
  p.proto().op(']').op('q').op('\x00').op('h').op('\x00').op('a').stop();
  const Pickle out = parse(p.b.data(), p.b.size(), "t.pkl");
  const Value& list = out.at(out.root);
  ASSERT_EQ(list.kind, Kind::List);
  ASSERT_EQ(list.items.size(), 1u);
  EXPECT_EQ(list.items[0], out.root);
}

// A list of n items (memo 0), then `calls` x module.name(list): each call copies the n items.
std::string amplifying_pickle(int n, int calls, const std::string& module, const std::string& name) {
  Bytes p;
  p.proto().op(']').op('q').op('\x00').op('(').i1(0);
  p.b.append(static_cast<size_t>(n) - 1, '2');  // DUP
  p.op('e').global(module, name).op('q').op('\x01').op('0');
  for (int i = 0; i < calls; ++i) p.op('h').op('\x01').op('h').op('\x00').op('\x85').op('R').op('0');
  return p.stop().b;
}

TEST(TorchPickle, CallsThatCopyAListStopAtTheMemoryBudget) {
  // A 1M-item list made into a torch.Size, a set or a frozenset 2000 times: 8 GB of items for a
  // pickle of 1 MB, as if from a 4 KB file (a deflated pickle). The budget (kMemoryFloor + kMemoryRatio
  // x the file) stops it after a few calls.
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"torch", "Size"}, {"builtins", "set"}, {"builtins", "frozenset"}}) {
    const std::string bytes = amplifying_pickle(1 << 20, 2000, module, name);
    std::string e;
    try {
      parse(bytes.data(), bytes.size(), "t.pkl", 4096);
    } catch (const Error& error) {
      e = error.what();
    }
    EXPECT_NE(e.find("[pickle] t.pkl: byte "), std::string::npos) << e;
    EXPECT_NE(e.find("exceeds its memory budget of 67633152 bytes (64 MiB + 128 x the 4096-byte file"),
              std::string::npos)
        << e;
  }
  // OrderedDict(list of pairs): the same list of 1M (key, value) pairs, twice its items per call.
  Bytes pairs;
  pairs.proto().op(']').op('q').op('\x00').op('(').i1(0).i1(1).op('\x86');
  pairs.b.append((1 << 20) - 1, '2');
  pairs.op('e').global("collections", "OrderedDict").op('q').op('\x01').op('0');
  for (int i = 0; i < 2000; ++i) pairs.op('h').op('\x01').op('h').op('\x00').op('\x85').op('R').op('0');
  pairs.stop();
  std::string e;
  try {
    parse(pairs.b.data(), pairs.b.size(), "t.pkl", 4096);
  } catch (const Error& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("exceeds its memory budget"), std::string::npos) << e;
  // The same pickle as its own file (1 MB: a budget of 192 MiB) still stops; a real state dict's
  // pickle (torch.save stores it uncompressed) is far inside its budget.
  const std::string own = amplifying_pickle(1 << 20, 2000, "torch", "Size");
  EXPECT_NE(error_of(own).find("exceeds its memory budget"), std::string::npos);
  const std::string small = amplifying_pickle(1000, 10, "torch", "Size");
  EXPECT_EQ(error_of(small), "");
}

TEST(TorchPickle, ManySmallValuesStopAtTheMemoryBudget) {
  // 3.9M Nones in a list (under the 4M-value cap; 700 MB of values), as from a 4 KB file.
  Bytes p;
  p.proto().op(']').op('(');
  p.b.append(3'900'000, 'N');
  p.op('e').stop();
  std::string e;
  try {
    parse(p.b.data(), p.b.size(), "t.pkl", 4096);
  } catch (const Error& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("exceeds its memory budget"), std::string::npos) << e;
}

TEST(TorchPickle, OpaqueDataClassesAreReadButNeverBuilt) {
  // args = argparse.Namespace(lr=0.1): NEWOBJ + BUILD; kept as an object naming its class.
  Bytes p;
  p.proto().global("argparse", "Namespace").op(')').op('\x81');
  p.op('}').str("lr").op('G').raw(std::string("\x3f\xb9\x99\x99\x99\x99\x99\x9a", 8)).op('s').op('b').stop();
  const Pickle out = parse(p.b.data(), p.b.size(), "t.pkl");
  EXPECT_EQ(out.at(out.root).kind, Kind::Object);
  EXPECT_EQ(out.at(out.root).s, "argparse.Namespace");
}

}  // namespace
}  // namespace vit::io::pickle
