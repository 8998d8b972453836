// .npy reader and writer (see npy.h).
#include "io/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <vector>

namespace vit::io {

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VIT_CHECK(in.good(), "npy", "{}: cannot open", path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&path](const std::string& what) { fail("npy", "{}: {}", path, what); };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) bad("not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad("truncated header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    bad(fmt::format("unsupported format version {}", major));
  }
  if (header_len > bytes.size() - offset) bad(fmt::format("header length {} exceeds the file", header_len));
  const std::string header(bytes.data() + offset, header_len);
  static const std::regex descr(R"('descr'\s*:\s*'([<>|=])([fiu])(\d+)')");
  static const std::regex order(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape(R"('shape'\s*:\s*\(([^)]*)\))");
  std::smatch m;
  if (!std::regex_search(header, m, descr)) bad("header has no valid 'descr'");
  const char endian = m[1].str()[0], kind = m[2].str()[0];
  const int width = std::stoi(m[3]);
  if (endian == '>') bad("big-endian data is not supported");
  DType dtype;
  if (kind == 'f' && width == 4) dtype = DType::F32;
  else if (kind == 'f' && width == 8) dtype = DType::F64;
  else if (kind == 'i' && width == 8) dtype = DType::I64;
  else bad(fmt::format("unsupported dtype '{}{}' (float32, float64 or int64)", kind, width));
  if (!std::regex_search(header, m, order)) bad("header has no 'fortran_order'");
  if (m[1] == "True") bad("Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  if (!std::regex_search(header, m, shape)) bad("header has no 'shape'");
  Shape dims;
  const std::string list = m[1];
  static const std::regex number(R"(\s*(\d+)\s*(,|$))");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), number); it != std::sregex_iterator(); ++it) {
    const std::string digits = (*it)[1];
    if (digits.size() > 18) bad("dimension too large");
    dims.push_back(std::stoll(digits));
  }
  int64_t numel;
  try {
    numel = shape_numel(dims);
  } catch (const Error&) {
    bad(fmt::format("shape {} overflows", shape_str(dims)));
  }
  const size_t data_offset = offset + header_len;
  size_t need = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(numel), dtype_size(dtype), &need)) {
    bad(fmt::format("byte size of shape {} overflows", shape_str(dims)));
  }
  if (bytes.size() - data_offset != need) {
    bad(fmt::format("shape {} of {} needs {} data bytes but the file has {}", shape_str(dims), dtype_name(dtype), need,
                    bytes.size() - data_offset));
  }
  Tensor t = Tensor::empty(dims, dtype);
  if (need) std::memcpy(t.raw_data(), bytes.data() + data_offset, need);
  return t;
}

void save_npy(const std::string& path, const Tensor& tensor) {
  const char* descr = tensor.dtype() == DType::F32 ? "<f4" : (tensor.dtype() == DType::F64 ? "<f8" : "<i8");
  // Python tuple syntax: (), (5,), (2, 3)
  const std::string dims = tensor.dim() == 1 ? fmt::format("{},", tensor.size(0))
                                             : fmt::format("{}", fmt::join(tensor.shape(), ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const Tensor c = tensor.contiguous();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    VIT_CHECK(out.good(), "npy", "{}: cannot write", path);
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.write("\x93NUMPY\x01\x00", 8);
    out.put(static_cast<char>(len & 0xff));
    out.put(static_cast<char>(len >> 8));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.numel() * dtype_size(c.dtype())));
    VIT_CHECK(out.good(), "npy", "{}: write failed", tmp);
  }
  VIT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "npy", "{}: cannot rename into place", path);
}

}  // namespace vit::io
