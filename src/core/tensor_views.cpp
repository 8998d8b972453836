// Tensor views (see tensor.h): view, reshape, flatten, transpose, permute, (un)squeeze, slice,
// select, expand, unfold, as_strided. View rules follow PyTorch's: a view keeps the storage and
// rewrites (shape, strides, offset); reshape copies only when no view exists.
#include <algorithm>
#include <optional>

#include "core/tensor.h"

namespace vit {

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
  VIT_CHECK(s <= e, "flatten", "start_dim {} comes after end_dim {} for shape {}", start_dim, end_dim,
            shape_str(shape_));
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

}  // namespace vit
