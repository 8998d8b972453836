// Tensor storage, creation, copies, element access and the copying constructions (index_select,
// repeat, cat, stack); see tensor.h. The views (layouts over the same storage) are in
// tensor_views.cpp.
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "core/block_cache.h"
#include "core/strided.h"

namespace vit {

// ---------------------------------------------------------------------------------- storage

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  data_ = block_allocate(nbytes);  // large blocks are reused across steps (block_cache.h)
  VIT_CHECK(data_ != nullptr, "tensor", "out of memory allocating {} bytes", nbytes);
}

Storage::Storage(void* data, size_t nbytes, std::shared_ptr<void> owner, bool file_mapped)
    : data_(data), nbytes_(nbytes), owner_(std::move(owner)), file_mapped_(file_mapped) {}

Storage::~Storage() {
  if (!owner_) block_free(data_, nbytes_);
}

// ---------------------------------------------------------------------------------- creation

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  size_t nbytes = 0;
  VIT_CHECK(!__builtin_mul_overflow(static_cast<size_t>(t.numel_), dtype_size(dtype), &nbytes), "tensor",
            "byte size of {} overflows", shape_str(shape));
  t.storage_ = std::make_shared<Storage>(nbytes);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.numel_ * dtype_size(dtype));
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }

Tensor Tensor::arange(double start, double end, double step, DType dtype) {
  VIT_CHECK(step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
            "invalid range start={} end={} step={}", start, end, step);
  VIT_CHECK((end - start) / step >= 0, "arange", "step {} has the wrong sign for start={} end={}", step, start, end);
  const double count = std::ceil((end - start) / step);
  // Beyond this the count would not even fit the int64 it is cast to (1e19 once read as negative).
  VIT_CHECK(count < 1e18, "arange", "start={} end={} step={} would make {:g} elements: too large a size", start, end,
            step, count);
  const auto n = static_cast<int64_t>(count);
  Tensor t = empty({n}, dtype);
  dispatch_all(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  dispatch(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel_; ++i) {
      if constexpr (std::is_same_v<T, float>)
        p[i] = gen.uniform_float();
      else
        p[i] = gen.uniform_double();
    }
  });
  return t;
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  dispatch(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel_; ++i) p[i] = static_cast<T>(gen.normal());
  });
  return t;
}

template <typename T>
static Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  const int64_t n = shape_numel(shape);
  VIT_CHECK(n == static_cast<int64_t>(values.size()), "from_data", "{} values do not fill shape {} ({} elements)",
            values.size(), shape_str(shape), n);
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

Tensor Tensor::from_data(const std::vector<float>& values, const Shape& shape) { return from_vector(values, shape); }
Tensor Tensor::from_data(const std::vector<double>& values, const Shape& shape) { return from_vector(values, shape); }
Tensor Tensor::from_data(const std::vector<int64_t>& values, const Shape& shape) { return from_vector(values, shape); }

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner, bool file_mapped) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.storage_ = std::make_shared<Storage>(data, t.numel_ * dtype_size(dtype), std::move(owner), file_mapped);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

// ---------------------------------------------------------------------------------- metadata

int64_t Tensor::size(int64_t d) const { return shape_[normalize_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides_[normalize_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

Tensor Tensor::with_layout(Shape shape, Strides strides, int64_t offset) const {
  Tensor t = *this;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

// ---------------------------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype);
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) const {
  VIT_CHECK(defined() && src.defined(), "copy_", "undefined tensor");
  bump_version();
  const Tensor s = src.expand(shape_);
  const Strides& ds = strides_;
  const Strides& ss = s.strides_;
  dispatch_all(dtype_, [&]<typename D>() {
    D* dst = data<D>();
    dispatch_all(s.dtype_, [&]<typename S>() {
      const S* from = s.data<S>();
      for_each_row<2>(shape_, {&ds, &ss},
                      [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& in) {
                        D* d = dst + off[0];
                        const S* f = from + off[1];
                        for (int64_t i = 0; i < n; ++i) d[i * in[0]] = convert_element<D>(f[i * in[1]]);
                      });
    });
  });
}

void Tensor::fill_(double value) const {
  bump_version();
  const Strides& ds = strides_;
  dispatch_all(dtype_, [&]<typename T>() {
    T* dst = data<T>();
    const auto v = convert_element<T>(value);
    for_each_row<1>(shape_, {&ds}, [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& in) {
      for (int64_t i = 0; i < n; ++i) dst[off[0] + i * in[0]] = v;
    });
  });
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  VIT_CHECK(dst.shape() == src.shape(), "accumulate", "destination {} and source {} differ", shape_str(dst.shape()),
            shape_str(src.shape()));
  VIT_CHECK(dst.dtype() == src.dtype(), "accumulate", "dtype {} vs {}", dtype_name(dst.dtype()),
            dtype_name(src.dtype()));
  dst.bump_version();
  dispatch_all(dst.dtype(), [&]<typename T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    if (dst.is_contiguous() && src.is_contiguous()) {  // the common case (a gradient into another): one loop
      const int64_t n = dst.numel();
      for (int64_t i = 0; i < n; ++i) d[i] += s[i];
      return;
    }
    for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()},
                    [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& in) {
                      for (int64_t i = 0; i < n; ++i) d[off[0] + i * in[0]] += s[off[1] + i * in[1]];
                    });
  });
}

// ---------------------------------------------------------------------------------- element access

int64_t Tensor::element_offset(const std::vector<int64_t>& index, const char* op) const {
  VIT_CHECK(static_cast<int64_t>(index.size()) == dim(), op, "index of {} dims for a tensor of shape {}", index.size(),
            shape_str(shape_));
  int64_t off = offset_;
  for (size_t i = 0; i < index.size(); ++i) {
    VIT_CHECK(index[i] >= 0 && index[i] < shape_[i], op, "index {} out of range for dim {} of shape {}", index[i], i,
              shape_str(shape_));
    off += index[i] * strides_[i];
  }
  return off - offset_;
}

double Tensor::at(const std::vector<int64_t>& index) const {
  const int64_t off = element_offset(index, "at");
  return dispatch_all(dtype_, [&]<typename T>() { return static_cast<double>(data<T>()[off]); });
}

void Tensor::set(const std::vector<int64_t>& index, double value) const {
  const int64_t off = element_offset(index, "set");
  bump_version();
  dispatch_all(dtype_, [&]<typename T>() { data<T>()[off] = convert_element<T>(value); });
}

double Tensor::item() const {
  VIT_CHECK(numel_ == 1, "item", "a tensor of shape {} has {} elements, not 1", shape_str(shape_), numel_);
  return dispatch_all(dtype_, [&]<typename T>() { return static_cast<double>(*data<T>()); });
}

std::vector<double> Tensor::to_vector() const {
  Tensor c = contiguous().to(DType::F64);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + numel_);
}

// ---------------------------------------------------------------------------------- copying constructions

Tensor index_select(const Tensor& t, int64_t dim, const std::vector<int64_t>& indices) {
  const int64_t at = normalize_dim(dim, t.dim(), "index_select");
  Shape shape = t.shape();
  shape[at] = static_cast<int64_t>(indices.size());
  Tensor out = Tensor::empty(shape, t.dtype());
  for (size_t i = 0; i < indices.size(); ++i) {
    VIT_CHECK(indices[i] >= 0 && indices[i] < t.size(at), "index_select",
              "index {} out of range for dim {} of size {} (shape {})", indices[i], dim, t.size(at),
              shape_str(t.shape()));
    out.select(at, static_cast<int64_t>(i)).copy_(t.select(at, indices[i]));
  }
  return out;
}

Tensor repeat(const Tensor& t, const Shape& repeats) {
  VIT_CHECK(repeats.size() >= t.shape().size(), "repeat", "{} repeats for a {}-d tensor of shape {}", repeats.size(),
            t.dim(), shape_str(t.shape()));
  // Pad t's shape with leading 1s, then view the output as (r0, s0, r1, s1, ...) and broadcast-copy.
  const size_t lead = repeats.size() - t.shape().size();
  Shape padded(lead, 1);
  padded.insert(padded.end(), t.shape().begin(), t.shape().end());
  Shape out_shape(repeats.size()), interleaved, source_shape;
  for (size_t i = 0; i < repeats.size(); ++i) {
    VIT_CHECK(repeats[i] >= 0, "repeat", "negative repeat {}", repeats[i]);
    out_shape[i] = repeats[i] * padded[i];
    interleaved.push_back(repeats[i]);
    interleaved.push_back(padded[i]);
    source_shape.push_back(1);
    source_shape.push_back(padded[i]);
  }
  Tensor out = Tensor::empty(out_shape, t.dtype());
  out.view(interleaved).copy_(t.reshape(source_shape));
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  VIT_CHECK(!tensors.empty(), "cat", "expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  const int64_t at = normalize_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[at] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    VIT_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype(), "cat",
              "tensor {} has shape {} {}, tensor 0 has {} {}", i, shape_str(t.shape()), dtype_name(t.dtype()),
              shape_str(first.shape()), dtype_name(first.dtype()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      VIT_CHECK(d == at || t.size(d) == first.size(d), "cat",
                "sizes must match except in dim {}: tensor {} has shape {}, tensor 0 has {}", at, i,
                shape_str(t.shape()), shape_str(first.shape()));
    }
    shape[at] += t.size(at);
  }
  Tensor out = Tensor::empty(shape, first.dtype());
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    out.slice(at, start, start + t.size(at)).copy_(t);
    start += t.size(at);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  VIT_CHECK(!tensors.empty(), "stack", "expected a non-empty list of tensors");
  const int64_t at = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (size_t i = 0; i < tensors.size(); ++i) {
    VIT_CHECK(tensors[i].shape() == tensors[0].shape(), "stack", "tensor {} has shape {}, tensor 0 has {}", i,
              shape_str(tensors[i].shape()), shape_str(tensors[0].shape()));
    expanded.push_back(tensors[i].unsqueeze(at));
  }
  return cat(expanded, at);
}

}  // namespace vit
