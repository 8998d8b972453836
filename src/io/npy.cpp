// .npy reader and writer (see npy.h).
#include "io/npy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/printable.h"
#include "io/mapped_file.h"

namespace vit::io {

namespace {

// A tiny reader for the header's Python dict literal: {'key': value, ...} where a value is a
// quoted string, True/False, or a tuple of non-negative integers. Anything else is refused.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : s_(text), name_(name) {}

  struct Fields {
    std::string descr;
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    Shape shape;
  };

  Fields parse() {
    Fields f;
    expect('{');
    skip_space();
    while (peek() != '}') {
      const std::string key = quoted();
      expect(':');
      skip_space();
      if (key == "descr") {
        f.descr = quoted();
        f.have_descr = true;
      } else if (key == "fortran_order") {
        f.fortran = boolean();
        f.have_order = true;
      } else if (key == "shape") {
        f.shape = tuple();
        f.have_shape = true;
      } else {
        bad(fmt::format("unexpected header key '{}'", printable(key)));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != '}') {
        bad("header dict: expected ',' or '}'");
      }
    }
    return f;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { fail("npy", "{}: {}", name_, what); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(fmt::format("header dict: expected '{}' at byte {}", c, pos_));
    ++pos_;
  }
  std::string quoted() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') bad(fmt::format("header dict: expected a quoted string at byte {}", pos_));
    const size_t close = s_.find(q, pos_ + 1);
    if (close == std::string::npos) bad("header dict: unterminated string");
    std::string out = s_.substr(pos_ + 1, close - pos_ - 1);
    pos_ = close + 1;
    return out;
  }
  bool boolean() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    bad("header dict: fortran_order must be True or False");
  }
  Shape tuple() {
    expect('(');
    Shape dims;
    skip_space();
    while (peek() != ')') {
      size_t digits = 0;
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (++digits > 18) bad("dimension too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (digits == 0) bad("header dict: shape must be a tuple of non-negative integers");
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      dims.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        bad("header dict: shape must be a tuple of non-negative integers");
      }
    }
    ++pos_;
    return dims;
  }

  const std::string& s_;
  const std::string& name_;
  size_t pos_ = 0;
};

}  // namespace

Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  const char* bytes = reinterpret_cast<const char*>(data);
  auto bad = [&name](const std::string& what) { fail("npy", "{}: {}", name, what); };
  if (size < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0) bad("not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) bad("truncated header");
    uint32_t len;
    std::memcpy(&len, bytes + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    bad(fmt::format("unsupported format version {}", major));
  }
  if (header_len > size - offset) bad(fmt::format("header length {} exceeds the file", header_len));
  const std::string header(bytes + offset, header_len);
  const HeaderParser::Fields f = HeaderParser(header, name).parse();
  if (!f.have_descr) bad("header has no 'descr'");
  if (!f.have_order) bad("header has no 'fortran_order'");
  if (!f.have_shape) bad("header has no 'shape'");
  const std::string& d = f.descr;
  if (d.size() < 3 || std::string("<>|=").find(d[0]) == std::string::npos) {
    bad(fmt::format("header has no valid 'descr' ('{}')", printable(d)));
  }
  if (d[0] == '>') bad("big-endian data is not supported");
  const std::string type = d.substr(1);
  DType dtype = DType::F32;
  if (type == "f4")
    dtype = DType::F32;
  else if (type == "f8")
    dtype = DType::F64;
  else if (type == "i8")
    dtype = DType::I64;
  else
    bad(fmt::format("unsupported dtype '{}' (float32, float64 or int64)", printable(type)));
  if (f.fortran) bad("Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  int64_t numel = 0;
  try {
    numel = shape_numel(f.shape);
  } catch (const Error&) {
    bad(fmt::format("shape {} overflows", shape_str(f.shape)));
  }
  const size_t data_offset = offset + header_len;
  size_t need = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(numel), dtype_size(dtype), &need)) {
    bad(fmt::format("byte size of shape {} overflows", shape_str(f.shape)));
  }
  if (size - data_offset != need) {
    bad(fmt::format("shape {} of {} needs {} data bytes but the file has {}", shape_str(f.shape), dtype_name(dtype),
                    need, size - data_offset));
  }
  Tensor t = Tensor::empty(f.shape, dtype);
  if (need) std::memcpy(t.raw_data(), bytes + data_offset, need);
  return t;
}

Tensor load_npy(const std::string& path) {
  const int fd = open_regular_file(path, "npy");  // never a FIFO (--tensor): it would block
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : 0;
      ::close(fd);
      VIT_CHECK(error == 0, "npy", "{}: cannot read ({})", path, std::strerror(error));
      break;
    }
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  return parse_npy(bytes.data(), bytes.size(), path);
}

void save_npy(const std::string& path, const Tensor& tensor, Existing existing) {
  const char* descr = tensor.dtype() == DType::F32   ? "<f4"
                      : tensor.dtype() == DType::F64 ? "<f8"
                      : tensor.dtype() == DType::I8  ? "|i1"
                                                     : "<i8";
  // Python tuple syntax: (), (5,), (2, 3)
  const std::string dims =
      tensor.dim() == 1 ? fmt::format("{},", tensor.size(0)) : fmt::format("{}", fmt::join(tensor.shape(), ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const Tensor c = tensor.contiguous();
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char preamble[10] = {
      '\x93', 'N', 'U', 'M', 'P', 'Y', '\x01', '\x00', static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  AtomicFile out("npy", path, existing);
  out.write(preamble, sizeof(preamble));
  out.write(header.data(), header.size());
  out.write(c.raw_data(), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  out.commit();
}

}  // namespace vit::io
