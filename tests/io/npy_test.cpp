// .npy reading and writing: round trips for float32 / float64 / int64 and every refusal.
#include "io/npy.h"

#include <gtest/gtest.h>

#include "support/files.h"

namespace vit::io {
namespace {

std::vector<uint8_t> npy_bytes(const std::string& header_dict, size_t data_bytes) {
  std::string header = header_dict;
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(1);
  bytes += static_cast<char>(0);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(data_bytes, '\0');
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

std::string error_of(const std::string& path) {
  try {
    load_npy(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Npy, RoundTrips) {
  testing::TempDir dir;
  const Tensor f = Tensor::arange(6).reshape({2, 3});
  save_npy(dir.file("f.npy"), f);
  const Tensor g = load_npy(dir.file("f.npy"));
  EXPECT_EQ(g.shape(), (Shape{2, 3}));
  EXPECT_EQ(g.to_vector(), f.to_vector());
  save_npy(dir.file("d.npy"), Tensor::arange(5, DType::F64));
  EXPECT_EQ(load_npy(dir.file("d.npy")).dtype(), DType::F64);
  save_npy(dir.file("i.npy"), Tensor::from_data(std::vector<int64_t>{7, -1}, {2}));
  EXPECT_EQ(load_npy(dir.file("i.npy")).to_vector(), (std::vector<double>{7, -1}));
  save_npy(dir.file("s.npy"), Tensor::scalar(2.5));
  EXPECT_EQ(load_npy(dir.file("s.npy")).dim(), 0);
  save_npy(dir.file("t.npy"), f.transpose(0, 1));  // non-contiguous input is written in C order
  EXPECT_EQ(load_npy(dir.file("t.npy")).to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Npy, RefusesBadFiles) {
  testing::TempDir dir;
  auto check = [&](const std::string& name, const std::vector<uint8_t>& bytes, const std::string& problem) {
    testing::write_bytes(dir.file(name), bytes);
    const std::string e = error_of(dir.file(name));
    EXPECT_NE(e.find("[npy] " + dir.file(name) + ": " + problem), std::string::npos) << e;
  };
  check("magic.npy", {'N', 'O', 'P', 'E', 0, 0, 0, 0, 0, 0, 0}, "not a .npy file");
  check("big_endian.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), "big-endian");
  check("dtype.npy", npy_bytes("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 4), "unsupported dtype");
  check("fortran.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16), "Fortran-order");
  check("short.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20),
        "shape (2, 3) of float32 needs 24 data bytes but the file has 20");
  check("overflow.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3000000000, 1000000000), }", 0),
        "byte size of shape");
  auto header_too_long = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 0);
  header_too_long[8] = 0xff;
  header_too_long[9] = 0xff;
  check("header.npy", header_too_long, "header length 65535 exceeds the file");
  EXPECT_NE(error_of(dir.file("missing.npy")).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace vit::io
