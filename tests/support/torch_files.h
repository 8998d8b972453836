// Hand-made pickles, zip archives and torch.save files for the readers' tests: every byte is
// written here, so a test can make a file as hostile as it likes (headers that disagree, a
// pickle that amplifies, thousands of keys) without committing a binary.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/shape.h"

namespace vit::testing {

// Pickle assembly (protocol 2, as torch.save writes): each helper appends one opcode with its argument.
struct PickleBytes {
  std::string b;
  PickleBytes& op(char c);
  PickleBytes& raw(const std::string& s);
  PickleBytes& proto();
  PickleBytes& str(const std::string& s);                                   // BINUNICODE
  PickleBytes& i1(int v);                                                   // BININT1
  PickleBytes& i4(int32_t v);                                               // BININT
  PickleBytes& global(const std::string& module, const std::string& name);  // GLOBAL
  PickleBytes& put(uint32_t memo);                                          // LONG_BINPUT
  PickleBytes& get(uint32_t memo);                                          // LONG_BINGET
  PickleBytes& stop();
};

// One member of a zip archive, and how its local header may lie about it (the central directory
// always tells the truth about the bytes written).
struct ZipMember {
  ZipMember(std::string name_, std::string data_, bool deflate_ = false)
      : name(std::move(name_)), data(std::move(data_)), deflate(deflate_) {}
  std::string name, data;
  bool deflate = false;
  std::string local_name;         // "" : name
  uint16_t local_flags = 0;       // 8: "sizes and CRC in a data descriptor"
  int64_t local_crc = -1;         // -1: the true value
  int64_t local_compressed = -1;  // -1: the true value
  int64_t local_size = -1;        // -1: the true value
  int64_t local_method = -1;      // -1: the true value
  int points_at = -1;             // >= 0: the central entry points at that member's local header
  int64_t central_offset = -1;    // >= 0: the central entry points at this offset (after the prefix)
};
// The archive's bytes: local headers and data (data aligned to `align` bytes by an extra field, as
// torch.save does), the central directory and its end record, after `prefix`.
std::string zip_bytes(const std::vector<ZipMember>& members, size_t align = 64, const std::string& prefix = "");
// The bytes deflated raw (as a zip's method 8 stores them).
std::string deflate_raw(const std::string& bytes);

// A torch.save state dict, as data.pkl of "archive/": an OrderedDict of tensors (key, storage
// key, offset, size, stride), each storage ('storage', torch.<type>, key, 'cpu', numel) given
// once and memoized as torch.save does.
struct TorchStorage {
  TorchStorage(std::string key_, std::string type_, std::string bytes_, int64_t numel_ = -1)
      : key(std::move(key_)), type(std::move(type_)), bytes(std::move(bytes_)), numel(numel_) {}
  std::string key, type = "FloatStorage";
  std::string bytes;   // its data/<key> entry
  int64_t numel = -1;  // -1: bytes / element size
};
struct TorchTensor {
  TorchTensor(std::string key_, std::string storage_, int64_t offset_, Shape size_, Shape stride_)
      : key(std::move(key_)),
        storage(std::move(storage_)),
        offset(offset_),
        size(std::move(size_)),
        stride(std::move(stride_)) {}
  std::string key, storage;
  int64_t offset = 0;
  Shape size, stride;
};
std::string state_dict_pickle(const std::vector<TorchTensor>& tensors, const std::vector<TorchStorage>& storages);
// The members of a torch.save archive: archive/data.pkl (deflated when asked), archive/byteorder,
// archive/data/<key> for each storage, archive/version.
std::vector<ZipMember> torch_members(const std::string& pickle, const std::vector<TorchStorage>& storages,
                                     bool deflate_pickle = false);

}  // namespace vit::testing
