// A restricted unpickler for the data.pkl of torch.save files: it reads the pickle opcodes a
// state dict needs (protocols 2 to 5; PyTorch writes 2) into a tree of plain values and never
// calls anything. Globals are an allow-list, checked when the GLOBAL / STACK_GLOBAL opcode names
// them; anything else -- posix.system, builtins.eval, subprocess.Popen, a class of the user's own
// -- is refused naming the global.
//
// The allow-list, and what each becomes (nothing is ever imported or run):
//   collections.OrderedDict, builtins.dict            -> a dict
//   torch._utils._rebuild_tensor_v2 / _rebuild_tensor -> a tensor: a view (offset, size, stride)
//                                                        of a storage
//   torch._utils._rebuild_parameter[_with_state]      -> the tensor it wraps
//   torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,Bool}Storage, torch.UntypedStorage
//                                                     -> storage types, only inside a persistent
//                                                        id ('storage', type, key, location, numel)
//   torch.Size, builtins.set, builtins.frozenset      -> a tuple / a list of their items
//   opaque data classes, kept as an "object" whose arguments and state are read but never used:
//     argparse.Namespace (a training script's args), pathlib.PosixPath / WindowsPath / Path,
//     torch.torch_version.TorchVersion, numpy.core.multiarray.scalar / _reconstruct,
//     numpy.ndarray, numpy.dtype, _codecs.encode (numpy scalars' bytes under protocol 2)
//
// Limits (each a clear error): 512 MiB of pickle, 4M values, nesting 1000 deep, 64-bit integers,
// and a memory budget for everything the pickle builds (values, their items and strings, memo
// entries): kMemoryFloor + kMemoryRatio x the size of the file the pickle came from. What costs
// memory is counted where it is built, so no opcode amplifies: REDUCE of torch.Size / set /
// frozenset / OrderedDict copies a list's items and is charged for each, and a 4 KB file whose
// deflated pickle rebuilds a big list again and again stops at the budget. torch.save stores its
// pickle uncompressed, so a real file's pickle is never larger than the file.
// Values live in one arena, referred to by index, so memo references, shared and even cyclic
// containers cost nothing and nothing is freed recursively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace vit::io::pickle {

enum class Kind : uint8_t { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Global, Object, Storage, Tensor };
const char* kind_name(Kind kind);

struct Value {
  Kind kind = Kind::None;
  int64_t i = 0;                // Bool, Int
  double f = 0.0;               // Float
  std::string s;                // String, Bytes; Global and Object: "module.name"; Storage: its key
  std::vector<uint32_t> items;  // Tuple, List: the items; Dict: key, value, key, value, ...
  // Storage: element type as torch names it ("FloatStorage") and element count.
  std::string storage_type;
  int64_t numel = 0;
  // Tensor: a view of items[0] (a Storage).
  int64_t offset = 0;
  Shape size, stride;
};

struct Pickle {
  std::vector<Value> values;
  uint32_t root = 0;
  const Value& at(uint32_t index) const { return values[index]; }
};

inline constexpr uint64_t kMemoryFloor = 64ull << 20;  // 64 MiB
inline constexpr uint64_t kMemoryRatio = 128;          // x the file's bytes

// Reads a pickle. Throws vit::Error "[pickle] NAME: ..." (the opcode, byte offset and reason).
// file_bytes: the size of the file it came from, for the memory budget (0: the pickle's own size).
Pickle parse(const char* data, size_t size, const std::string& name, uint64_t file_bytes = 0);

// The element type and bytes per element of a torch storage type name (e.g. "HalfStorage": F16, 2).
// Known: Float, Half, BFloat16, Double, Long, Int, Short, Char, Byte, Bool; false otherwise.
bool storage_element(const std::string& storage_type, std::string& dtype, size_t& bytes);

}  // namespace vit::io::pickle
