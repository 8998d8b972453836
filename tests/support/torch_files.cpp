// Hand-made pickles, zips and torch.save files (see torch_files.h).
#include "support/torch_files.h"

#include <zlib.h>

#include <map>
#include <stdexcept>

namespace vit::testing {

PickleBytes& PickleBytes::op(char c) {
  b += c;
  return *this;
}
PickleBytes& PickleBytes::raw(const std::string& s) {
  b += s;
  return *this;
}
PickleBytes& PickleBytes::proto() { return op('\x80').op('\x02'); }
PickleBytes& PickleBytes::str(const std::string& s) {
  op('X');
  for (int k = 0; k < 4; ++k) b += static_cast<char>((s.size() >> (8 * k)) & 0xff);
  return raw(s);
}
PickleBytes& PickleBytes::i1(int v) { return op('K').op(static_cast<char>(v)); }
PickleBytes& PickleBytes::i4(int32_t v) {
  op('J');
  for (int k = 0; k < 4; ++k) b += static_cast<char>((static_cast<uint32_t>(v) >> (8 * k)) & 0xff);
  return *this;
}
PickleBytes& PickleBytes::global(const std::string& module, const std::string& name) {
  return op('c').raw(module + "\n" + name + "\n");
}
PickleBytes& PickleBytes::put(uint32_t memo) {
  op('r');
  for (int k = 0; k < 4; ++k) b += static_cast<char>((memo >> (8 * k)) & 0xff);
  return *this;
}
PickleBytes& PickleBytes::get(uint32_t memo) {
  op('j');
  for (int k = 0; k < 4; ++k) b += static_cast<char>((memo >> (8 * k)) & 0xff);
  return *this;
}
PickleBytes& PickleBytes::stop() { return op('.'); }

namespace {

void le(std::string& out, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
}

int64_t element_size(const std::string& type) {
  static const std::map<std::string, int64_t> sizes = {
      {"FloatStorage", 4}, {"HalfStorage", 2},  {"BFloat16Storage", 2}, {"DoubleStorage", 8}, {"LongStorage", 8},
      {"IntStorage", 4},   {"ShortStorage", 2}, {"CharStorage", 1},     {"ByteStorage", 1},   {"BoolStorage", 1}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 1 : it->second;
}

}  // namespace

std::string deflate_raw(const std::string& bytes) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zip_bytes(const std::vector<ZipMember>& members, size_t align, const std::string& prefix) {
  std::string out = prefix, central;
  std::vector<uint64_t> local_at;
  for (const ZipMember& m : members) {
    const std::string stored = m.deflate ? deflate_raw(m.data) : m.data;
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(crc32_z(0, Z_NULL, 0), reinterpret_cast<const Bytef*>(m.data.data()), m.data.size()));
    const std::string local_name = m.local_name.empty() ? m.name : m.local_name;
    local_at.push_back(out.size() - prefix.size());
    const size_t unpadded = out.size() + 30 + local_name.size();
    size_t pad = align > 1 ? (align - unpadded % align) % align : 0;
    if (pad > 0 && pad < 4) pad += align;  // an extra field is at least its 4-byte header
    const uint16_t method = m.deflate ? 8 : 0;
    out += "PK\x03\x04";
    le(out, 20, 2);
    le(out, m.local_flags, 2);
    le(out, m.local_method >= 0 ? static_cast<uint64_t>(m.local_method) : method, 2);
    le(out, 0, 4);  // time, date
    le(out, m.local_crc >= 0 ? static_cast<uint64_t>(m.local_crc) : crc, 4);
    le(out, m.local_compressed >= 0 ? static_cast<uint64_t>(m.local_compressed) : stored.size(), 4);
    le(out, m.local_size >= 0 ? static_cast<uint64_t>(m.local_size) : m.data.size(), 4);
    le(out, local_name.size(), 2);
    le(out, pad, 2);
    out += local_name;
    if (pad > 0) {
      le(out, 0x9999, 2);
      le(out, pad - 4, 2);
      out.append(pad - 4, '\0');
    }
    out += stored;
    // The central entry: the truth, but for where it points.
    central += "PK\x01\x02";
    le(central, 20, 2);
    le(central, 20, 2);
    le(central, 0, 2);
    le(central, method, 2);
    le(central, 0, 4);
    le(central, crc, 4);
    le(central, stored.size(), 4);
    le(central, m.data.size(), 4);
    le(central, m.name.size(), 2);
    le(central, 0, 2);                // extra
    le(central, 0, 2);                // comment
    le(central, 0, 2);                // disk
    le(central, 0, 2);                // internal attributes
    le(central, 0, 4);                // external attributes
    central += std::string(4, '\0');  // the local header's offset, filled in below
    central += m.name;
  }
  // Fill in the offsets (a member may point at another's local header).
  size_t at = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const int target = members[i].points_at >= 0 ? members[i].points_at : static_cast<int>(i);
    std::string offset;
    le(offset,
       members[i].central_offset >= 0 ? static_cast<uint64_t>(members[i].central_offset)
                                      : local_at[static_cast<size_t>(target)],
       4);
    central.replace(at + 42, 4, offset);
    at += 46 + members[i].name.size();
  }
  const uint64_t central_at = out.size() - prefix.size();
  out += central;
  const bool zip64 = members.size() > 0xfffe;  // the end record counts entries in 16 bits
  if (zip64) {
    const uint64_t record_at = out.size() - prefix.size();
    out += "PK\x06\x06";
    le(out, 44, 8);  // the record's size after this field
    le(out, 45, 2);
    le(out, 45, 2);
    le(out, 0, 8);  // disks
    le(out, members.size(), 8);
    le(out, members.size(), 8);
    le(out, central.size(), 8);
    le(out, central_at, 8);
    out += "PK\x06\x07";  // its locator
    le(out, 0, 4);
    le(out, record_at, 8);
    le(out, 1, 4);
  }
  out += "PK\x05\x06";
  le(out, 0, 4);  // disks
  le(out, zip64 ? 0xffff : members.size(), 2);
  le(out, zip64 ? 0xffff : members.size(), 2);
  le(out, central.size(), 4);
  le(out, central_at, 4);
  le(out, 0, 2);  // comment
  return out;
}

std::string state_dict_pickle(const std::vector<TorchTensor>& tensors, const std::vector<TorchStorage>& storages) {
  std::map<std::string, const TorchStorage*> by_key;
  for (const TorchStorage& s : storages) by_key[s.key] = &s;
  PickleBytes p;
  uint32_t memo = 0;
  p.proto().global("collections", "OrderedDict").op(')').op('R').put(memo++);
  uint32_t rebuild = 0, empty_dict = 0;
  std::map<std::string, uint32_t> storage_memo;
  bool first = true;
  size_t in_batch = 0;
  for (const TorchTensor& t : tensors) {
    if (in_batch == 0) p.op('(');
    p.str(t.key);
    if (first) {
      rebuild = memo;
      p.global("torch._utils", "_rebuild_tensor_v2").put(memo++);
    } else {
      p.get(rebuild);
    }
    p.op('(');
    if (const auto it = storage_memo.find(t.storage); it != storage_memo.end()) {
      p.get(it->second);
    } else {
      const TorchStorage& s = *by_key.at(t.storage);
      const int64_t numel = s.numel >= 0 ? s.numel : static_cast<int64_t>(s.bytes.size()) / element_size(s.type);
      p.op('(').str("storage").global("torch", s.type).str(s.key).str("cpu").i4(static_cast<int32_t>(numel));
      p.op('t').op('Q').put(memo);
      storage_memo[t.storage] = memo++;
    }
    p.i4(static_cast<int32_t>(t.offset));
    p.op('(');
    for (int64_t d : t.size) p.i4(static_cast<int32_t>(d));
    p.op('t').op('(');
    for (int64_t d : t.stride) p.i4(static_cast<int32_t>(d));
    p.op('t').op('\x89');
    if (first) {
      empty_dict = memo;
      p.global("collections", "OrderedDict").op(')').op('R').put(memo++);
    } else {
      p.get(empty_dict);
    }
    p.op('t').op('R');
    first = false;
    if (++in_batch == 1000) {
      p.op('u');
      in_batch = 0;
    }
  }
  if (in_batch > 0) p.op('u');
  return p.stop().b;
}

std::vector<ZipMember> torch_members(const std::string& pickle, const std::vector<TorchStorage>& storages,
                                     bool deflate_pickle) {
  std::vector<ZipMember> members;
  members.push_back({"archive/data.pkl", pickle, deflate_pickle});
  members.push_back({"archive/byteorder", "little"});
  for (const TorchStorage& s : storages) members.push_back({"archive/data/" + s.key, s.bytes});
  members.push_back({"archive/version", "3\n"});
  return members;
}

}  // namespace vit::testing
