// Views and copies: reshape, view, flatten, transpose, permute, contiguous, (un)squeeze, slice,
// select, expand, unfold, index_select, repeat, cat, stack. A view op's backward replays the
// same view on the input's gradient buffer and accumulates the output gradient into it
// (core's accumulate_into): overlapping (unfold) and stride-0 (expand) views then sum correctly.
#include "autograd/ops.h"

namespace vit {

// y = fn(x) where fn only re-strides; backward: grad_x viewed through fn += g.
template <typename Fn>
static Variable view_op(const Variable& x, const char* name, Fn fn) {
  VIT_CHECK(x.defined(), name, "undefined input");
  Tensor y = fn(x.data());
  return make_result(y, name, {x}, {},
                     [fn](const Tensor& g, std::vector<Tensor>& grads) { accumulate_into(fn(grads[0]), g); });
}

Variable Variable::view(const Shape& s) const {
  return view_op(*this, "view", [s](const Tensor& t) { return t.view(s); });
}
Variable Variable::reshape(const Shape& s) const {
  return view_op(*this, "reshape", [s](const Tensor& t) { return t.reshape(s); });
}
Variable Variable::flatten(int64_t start_dim, int64_t end_dim) const {
  return view_op(*this, "flatten", [=](const Tensor& t) { return t.flatten(start_dim, end_dim); });
}
Variable Variable::transpose(int64_t dim0, int64_t dim1) const {
  return view_op(*this, "transpose", [=](const Tensor& t) { return t.transpose(dim0, dim1); });
}
Variable Variable::permute(const std::vector<int64_t>& dims) const {
  return view_op(*this, "permute", [dims](const Tensor& t) { return t.permute(dims); });
}
Variable Variable::contiguous() const {
  if (data().is_contiguous()) return *this;
  return view_op(*this, "contiguous", [](const Tensor& t) { return t.contiguous(); });
}
Variable Variable::unsqueeze(int64_t d) const {
  return view_op(*this, "unsqueeze", [d](const Tensor& t) { return t.unsqueeze(d); });
}
Variable Variable::squeeze(int64_t d) const {
  return view_op(*this, "squeeze", [d](const Tensor& t) { return t.squeeze(d); });
}
Variable Variable::squeeze() const {
  return view_op(*this, "squeeze", [](const Tensor& t) { return t.squeeze(); });
}
Variable Variable::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return view_op(*this, "slice", [=](const Tensor& t) { return t.slice(d, start, end, step); });
}
Variable Variable::select(int64_t d, int64_t index) const {
  return view_op(*this, "select", [=](const Tensor& t) { return t.select(d, index); });
}
Variable Variable::expand(const Shape& s) const {
  return view_op(*this, "expand", [s](const Tensor& t) { return t.expand(s); });
}
Variable Variable::unfold(int64_t d, int64_t size, int64_t step) const {
  return view_op(*this, "unfold", [=](const Tensor& t) { return t.unfold(d, size, step); });
}

Variable Variable::index_select(int64_t d, const std::vector<int64_t>& indices) const {
  Tensor y = vit::index_select(data(), d, indices);
  const int64_t at = normalize_dim(d, dim(), "index_select");
  return make_result(y, "index_select", {*this}, {}, [at, indices](const Tensor& g, std::vector<Tensor>& grads) {
    for (size_t i = 0; i < indices.size(); ++i) {
      accumulate_into(grads[0].select(at, indices[i]), g.select(at, static_cast<int64_t>(i)));
    }
  });
}

Variable Variable::repeat(const Shape& repeats) const {
  Tensor y = vit::repeat(data(), repeats);
  // The output viewed as (r0, s0, r1, s1, ...) is the input broadcast along every r_i.
  const size_t lead = repeats.size() - shape().size();
  Shape interleaved, source;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t s = i < lead ? 1 : shape()[i - lead];
    interleaved.insert(interleaved.end(), {repeats[i], s});
    source.insert(source.end(), {1, s});
  }
  return make_result(y, "repeat", {*this}, {}, [interleaved, source](const Tensor& g, std::vector<Tensor>& grads) {
    accumulate_into(grads[0].reshape(source).expand(interleaved), g.view(interleaved));
  });
}

Variable cat(const std::vector<Variable>& xs, int64_t dim) {
  std::vector<Tensor> tensors;
  for (const Variable& x : xs) {
    VIT_CHECK(x.defined(), "cat", "undefined input");
    tensors.push_back(x.data());
  }
  Tensor y = cat(tensors, dim);
  const int64_t at = normalize_dim(dim, y.dim(), "cat");
  std::vector<int64_t> sizes;
  for (const Tensor& t : tensors) sizes.push_back(t.size(at));
  return make_result(y, "cat", xs, {}, [at, sizes](const Tensor& g, std::vector<Tensor>& grads) {
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (grads[i].defined()) accumulate_into(grads[i], g.slice(at, start, start + sizes[i]));
      start += sizes[i];
    }
  });
}

Variable stack(const std::vector<Variable>& xs, int64_t dim) {
  VIT_CHECK(!xs.empty(), "stack", "expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) {
    VIT_CHECK(xs[i].defined() && xs[i].shape() == xs[0].shape(), "stack", "tensor {} has shape {}, tensor 0 has {}", i,
              xs[i].defined() ? shape_str(xs[i].shape()) : "undefined", shape_str(xs[0].shape()));
  }
  const int64_t at = normalize_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Variable> expanded;
  for (const Variable& x : xs) expanded.push_back(x.unsqueeze(at));
  return cat(expanded, at);
}

}  // namespace vit
