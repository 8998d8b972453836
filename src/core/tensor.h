// Tensor: a float32, float64 (or int64 index) n-d array, row-major, with shape + strides + offset over shared
// storage, so views (reshape, transpose, slice, expand, unfold, ...) share memory as PyTorch's
// do. It knows nothing of gradients: autograd::Variable wraps it. Math lives in kernels/autograd;
// here are creation, views, copies and element access.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/random.h"
#include "core/shape.h"

namespace vit {

// A block of 64-byte aligned memory, or memory owned by someone else (a memory-mapped file).
class Storage {
 public:
  Storage(size_t nbytes);  // allocates, uninitialised
  // Borrows, keeps owner alive; file_mapped: the memory is a private mapping of a file (see
  // Tensor::is_file_mapped).
  Storage(void* data, size_t nbytes, std::shared_ptr<void> owner, bool file_mapped = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  bool file_mapped() const { return file_mapped_; }
  // How many in-place writes the memory has had (torch's version counter; see Tensor::version).
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> version_{0};
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  std::shared_ptr<void> owner_;  // null when we allocated data_ ourselves
  bool file_mapped_ = false;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() == false

  // ---- creation (PyTorch names) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32);
  static Tensor ones(const Shape& shape, DType dtype = DType::F32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32);
  static Tensor scalar(double value, DType dtype = DType::F32);  // 0-d
  static Tensor arange(double end, DType dtype = DType::F32);
  static Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::F32);
  static Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::F32);   // U[0, 1)
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::F32);  // N(0, 1)
  static Tensor from_data(const std::vector<float>& values, const Shape& shape);
  static Tensor from_data(const std::vector<double>& values, const Shape& shape);
  static Tensor from_data(const std::vector<int64_t>& values, const Shape& shape);
  // Wraps external memory without copying; `owner` is kept alive as long as any view exists.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner,
                          bool file_mapped = false);

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return numel_; }
  int64_t offset() const { return offset_; }
  bool is_contiguous() const;
  // True when both tensors view the same storage block.
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }
  // True when the data is a private (copy-on-write) mapping of a file, as load_safetensors makes:
  // its untouched pages can be dropped from this process and read back from the file.
  bool is_file_mapped() const { return storage_ && storage_->file_mapped(); }
  // The storage's count of in-place writes, shared by every view of it (torch's version counter):
  // copy_, fill_, set and accumulate_into count themselves; code that writes through data<T>()
  // into memory an autograd graph may have saved (an optimiser's step) calls bump_version().
  // Autograd records it when an op saves a tensor and refuses a backward that would read changed
  // values.
  uint64_t version() const { return storage_ ? storage_->version() : 0; }
  void bump_version() const {
    if (storage_) storage_->bump_version();
  }

  // Typed pointer to the first element (offset applied). Throws if T does not match dtype.
  template <typename T>
  T* data() const {
    VIT_CHECK(defined(), "tensor", "data() of an undefined tensor");
    VIT_CHECK(dtype_of<T>() == dtype_, "tensor", "data<{}>() of a {} tensor", dtype_name(dtype_of<T>()),
              dtype_name(dtype_));
    return static_cast<T*>(storage_->data()) + offset_;
  }
  void* raw_data() const { return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_); }

  // ---- views: share storage (PyTorch semantics) ----
  Tensor view(const Shape& shape) const;     // needs compatible strides; one -1 allowed
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a contiguous copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;  // no-op if size(dim) != 1, as in PyTorch
  Tensor squeeze() const;             // all size-1 dims
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  // Python-style bounds
  Tensor select(int64_t dim, int64_t index) const;  // removes dim: t.select(1, 0) is t[:, 0]
  Tensor expand(const Shape& shape) const;          // -1 keeps a size; stride 0 on broadcast dims
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;
  Tensor as_strided(const Shape& shape, const Strides& strides, int64_t offset) const;

  // ---- copies ----
  Tensor contiguous() const;  // *this if already contiguous
  Tensor clone() const;       // always a new contiguous tensor
  Tensor to(DType dtype) const;
  // Copies src (broadcast to this shape, same or other dtype) into this tensor's elements.
  void copy_(const Tensor& src) const;  // const: writes the shared storage, not the handle
  void fill_(double value) const;

  // ---- element access (for tests, printing, small data; not for hot loops) ----
  double item() const;  // the single element of a one-element tensor
  double at(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, double value) const;
  std::vector<double> to_vector() const;  // row-major values as double
  template <typename T>
  std::vector<T> values() const {
    std::vector<double> v = to_vector();
    return std::vector<T>(v.begin(), v.end());
  }

  std::string to_string() const;  // PyTorch-style: tensor([[0., 1.], ...])

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  Tensor with_layout(Shape shape, Strides strides, int64_t offset) const;
  int64_t element_offset(const std::vector<int64_t>& index, const char* op) const;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- copying constructions (new storage) ----
Tensor index_select(const Tensor& t, int64_t dim, const std::vector<int64_t>& indices);
Tensor repeat(const Tensor& t, const Shape& repeats);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

// dst[i] += src[i] over dst's (possibly overlapping or broadcast, stride-0) layout, sequentially:
// overlapping destination elements receive the sum of everything mapped onto them. This is the
// one backward of every view op (slice, select, expand, unfold, ...).
void accumulate_into(const Tensor& dst, const Tensor& src);

// Options for Tensor::to_string (PyTorch's print options).
struct PrintOptions {
  int precision = 4;
  int64_t threshold = 1000;
  int64_t edgeitems = 3;
  int64_t linewidth = 80;
};
std::string format_tensor(const Tensor& t, const PrintOptions& options = {}, const std::string& prefix = "tensor(",
                          const std::string& suffix = "");

}  // namespace vit
