// NumPy .npy files (format version 1.0-3.0): a magic string, a Python-dict header
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, then the raw data. Reading accepts
// little-endian float32/float64/int64 (float64 narrowed to float32 on request), C order only,
// and validates the header against the file size. Writing produces version 1.0 files, atomically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/output_file.h"
#include "core/tensor.h"

namespace vit::io {

// Throws "[npy] FILE: ..." naming what is wrong.
Tensor load_npy(const std::string& path);
// The same from bytes in memory; `name` is used in messages.
Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name);
// Written whole or not at all (core/output_file.h: a temporary file beside it, fsynced, renamed);
// Existing::Refuse leaves a file already at `path` alone and throws "[npy] PATH: exists".
void save_npy(const std::string& path, const Tensor& tensor, Existing existing = Existing::Replace);

}  // namespace vit::io
