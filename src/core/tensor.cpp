// Tensor creation, views and copies (see tensor.h). View rules follow PyTorch's: a view keeps the
// storage and rewrites (shape, strides, offset); reshape copies only when no view exists.
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>

#include "core/strided.h"

namespace vit {

// ---------------------------------------------------------------------------------- storage

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = std::max<size_t>((nbytes + kAlign - 1) / kAlign * kAlign, kAlign);
  data_ = std::aligned_alloc(kAlign, rounded);
  VIT_CHECK(data_ != nullptr, "tensor", "out of memory allocating {} bytes", nbytes);
}

Storage::Storage(void* data, size_t nbytes, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (!owner_) std::free(data_);
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
  const auto n = static_cast<int64_t>(std::ceil((end - start) / step));
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
      if constexpr (std::is_same_v<T, float>) p[i] = gen.uniform_float();
      else p[i] = gen.uniform_double();
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

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.storage_ = std::make_shared<Storage>(data, t.numel_ * dtype_size(dtype), std::move(owner));
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

// ---------------------------------------------------------------------------------- views

// Strides for viewing this tensor with a new shape without copying, or empty if impossible.
// Follows PyTorch's computeStride: chunks of dims that are contiguous among themselves may be
// regrouped freely.
static std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape) {
  Strides out(shape.size());
  if (old_shape.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  if (shape_numel(old_shape) == 0) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel_, "view", shape_);
  auto strides = view_strides(shape_, strides_, target);
  VIT_CHECK(strides.has_value(), "view",
            "shape {} is not compatible with the strides of input {} (use reshape, which copies)", shape_str(target),
            shape_str(shape_));
  return with_layout(target, *strides, offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel_, "reshape", shape_);
  if (auto strides = view_strides(shape_, strides_, target)) return with_layout(target, *strides, offset_);
  return contiguous().view(target);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = normalize_dim(start_dim, dim(), "flatten");
  const int64_t e = normalize_dim(end_dim, dim(), "flatten");
  VIT_CHECK(s <= e, "flatten", "start_dim {} comes after end_dim {} for shape {}", start_dim, end_dim, shape_str(shape_));
  Shape target(shape_.begin(), shape_.begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= shape_[d];
  target.push_back(merged);
  target.insert(target.end(), shape_.begin() + e + 1, shape_.end());
  return reshape(target);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  if (dim() == 0) return *this;
  const int64_t a = normalize_dim(dim0, dim(), "transpose");
  const int64_t b = normalize_dim(dim1, dim(), "transpose");
  Shape shape = shape_;
  Strides strides = strides_;
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  VIT_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute", "got {} dims for a {}-d tensor of shape {}",
            dims.size(), dim(), shape_str(shape_));
  Shape shape(dims.size());
  Strides strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], dim(), "permute");
    VIT_CHECK(!seen[d], "permute", "dim {} repeated in ({})", d, fmt::join(dims, ", "));
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t at = normalize_dim(d, dim() + 1, "unsqueeze");
  Shape shape = shape_;
  Strides strides = strides_;
  const int64_t stride = at < dim() ? strides_[at] * shape_[at] : 1;
  shape.insert(shape.begin() + at, 1);
  strides.insert(strides.begin() + at, stride);
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  const int64_t at = normalize_dim(d, dim(), "squeeze");
  if (shape_[at] != 1) return *this;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + at);
  strides.erase(strides.begin() + at);
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::squeeze() const {
  Shape shape;
  Strides strides;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] == 1) continue;
    shape.push_back(shape_[i]);
    strides.push_back(strides_[i]);
  }
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  const int64_t at = normalize_dim(d, dim(), "slice");
  VIT_CHECK(step > 0, "slice", "step must be positive, got {}", step);
  const int64_t n = shape_[at];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  const int64_t s = clamp(start);
  const int64_t e = std::max(clamp(end), s);
  Shape shape = shape_;
  Strides strides = strides_;
  shape[at] = (e - s + step - 1) / step;
  strides[at] = strides_[at] * step;
  return with_layout(shape, strides, offset_ + s * strides_[at]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const int64_t at = normalize_dim(d, dim(), "select");
  const int64_t n = shape_[at];
  VIT_CHECK(index >= -n && index < n, "select", "index {} out of range for dim {} of size {} (shape {})", index, d, n,
            shape_str(shape_));
  const int64_t i = index < 0 ? index + n : index;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + at);
  strides.erase(strides.begin() + at);
  return with_layout(shape, strides, offset_ + i * strides_[at]);
}

Tensor Tensor::expand(const Shape& shape) const {
  VIT_CHECK(shape.size() >= shape_.size(), "expand", "cannot expand {} to fewer dims {}", shape_str(shape_),
            shape_str(shape));
  const size_t lead = shape.size() - shape_.size();
  Shape out(shape.size());
  Strides strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      VIT_CHECK(shape[i] >= 0, "expand", "size -1 not allowed in a new leading dim: {} to {}", shape_str(shape_),
                shape_str(shape));
      out[i] = shape[i];
      strides[i] = 0;
      continue;
    }
    const int64_t have = shape_[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    VIT_CHECK(want == have || have == 1, "expand", "size {} of dim {} cannot expand to {} ({} to {})", have, i - lead,
              want, shape_str(shape_), shape_str(shape));
    out[i] = want;
    strides[i] = (want == have) ? strides_[i - lead] : 0;
  }
  return with_layout(out, strides, offset_);
}

Tensor Tensor::unfold(int64_t d, int64_t size, int64_t step) const {
  const int64_t at = dim() == 0 ? 0 : normalize_dim(d, dim(), "unfold");
  const int64_t n = dim() == 0 ? 1 : shape_[at];
  VIT_CHECK(size >= 0 && size <= n, "unfold", "size {} larger than dim {} of size {} (shape {})", size, d, n,
            shape_str(shape_));
  VIT_CHECK(step > 0, "unfold", "step must be positive, got {}", step);
  Shape shape = shape_;
  Strides strides = strides_;
  if (dim() == 0) return with_layout({1}, {1}, offset_);
  shape[at] = (n - size) / step + 1;
  strides[at] = strides_[at] * step;
  shape.push_back(size);
  strides.push_back(strides_[at]);
  return with_layout(shape, strides, offset_);
}

Tensor Tensor::as_strided(const Shape& shape, const Strides& strides, int64_t offset) const {
  VIT_CHECK(shape.size() == strides.size(), "as_strided", "shape {} and strides {} differ in rank", shape_str(shape),
            shape_str(strides));
  // Every reachable element must lie inside the storage.
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    VIT_CHECK(shape[i] >= 0 && strides[i] >= 0, "as_strided", "negative size or stride in {} / {}", shape_str(shape),
              shape_str(strides));
    if (shape[i] == 0) return with_layout(shape, strides, offset);
    hi += (shape[i] - 1) * strides[i];
  }
  const auto capacity = static_cast<int64_t>(storage_->nbytes() / dtype_size(dtype_));
  VIT_CHECK(lo >= 0 && hi < capacity, "as_strided", "view {} strides {} offset {} leaves storage of {} elements",
            shape_str(shape), shape_str(strides), offset, capacity);
  return with_layout(shape, strides, offset);
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
  const Tensor s = src.expand(shape_);
  const Strides& ds = strides_;
  const Strides& ss = s.strides_;
  dispatch_all(dtype_, [&]<typename D>() {
    D* dst = data<D>();
    dispatch_all(s.dtype_, [&]<typename S>() {
      const S* from = s.data<S>();
      for_each_row<2>(shape_, {&ds, &ss}, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& in) {
        D* d = dst + off[0];
        const S* f = from + off[1];
        for (int64_t i = 0; i < n; ++i) d[i * in[0]] = static_cast<D>(f[i * in[1]]);
      });
    });
  });
}

void Tensor::fill_(double value) const {
  const Strides& ds = strides_;
  dispatch_all(dtype_, [&]<typename T>() {
    T* dst = data<T>();
    const auto v = static_cast<T>(value);
    for_each_row<1>(shape_, {&ds}, [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& in) {
      for (int64_t i = 0; i < n; ++i) dst[off[0] + i * in[0]] = v;
    });
  });
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  VIT_CHECK(dst.shape() == src.shape(), "accumulate", "destination {} and source {} differ", shape_str(dst.shape()),
            shape_str(src.shape()));
  VIT_CHECK(dst.dtype() == src.dtype(), "accumulate", "dtype {} vs {}", dtype_name(dst.dtype()), dtype_name(src.dtype()));
  dispatch_all(dst.dtype(), [&]<typename T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
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
  dispatch_all(dtype_, [&]<typename T>() { data<T>()[off] = static_cast<T>(value); });
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
              "index {} out of range for dim {} of size {} (shape {})", indices[i], dim, t.size(at), shape_str(t.shape()));
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
    VIT_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype(), "cat", "tensor {} has shape {} {}, tensor 0 has {} {}",
              i, shape_str(t.shape()), dtype_name(t.dtype()), shape_str(first.shape()), dtype_name(first.dtype()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      VIT_CHECK(d == at || t.size(d) == first.size(d), "cat", "sizes must match except in dim {}: tensor {} has shape {}, tensor 0 has {}",
                at, i, shape_str(t.shape()), shape_str(first.shape()));
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
