// Module bookkeeping (see module.h).
#include "nn/module.h"

#include <set>
#include <unordered_set>

#include "core/printable.h"

namespace vit::nn {

void Module::check_new_name(const std::string& name) const {
  for (const auto* list : {&params_, &buffers_}) {
    for (const auto& [existing, _] : *list) VIT_CHECK(existing != name, "module", "'{}' registered twice", name);
  }
}

Variable Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  Variable p(std::move(value), requires_grad);
  params_.emplace_back(name, p);
  return p;
}

Variable Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  Variable b(std::move(value), false);
  buffers_.emplace_back(name, b);
  return b;
}

void Module::collect(const std::string& prefix, What what, std::vector<std::pair<std::string, Variable>>& out) const {
  if (what != What::Buffers) {
    for (const auto& [name, p] : params_) out.emplace_back(prefix + name, p);
  }
  if (what != What::Parameters) {
    for (const auto& [name, b] : buffers_) out.emplace_back(prefix + name, b);
  }
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", what, out);
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", What::Parameters, out);
  return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", What::Buffers, out);
  return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_state() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", What::Both, out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [_, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const auto& [_, p] : named_parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [_, p] : named_parameters()) p.zero_grad();
}

void Module::to(DType dtype) {
  for (auto& [_, p] : named_state()) {
    Node& node = *p.node();
    if (node.data.dtype() == dtype) continue;
    node.data = node.data.to(dtype);
    node.grad = Tensor();
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [_, child] : children_) child->apply(fn);
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, p] : named_state()) out.emplace_back(name, p.data());
  return out;
}

namespace {

// Where the memory block a tensor views starts: the same for every view of one storage.
const void* storage_start(const Tensor& t) {
  return static_cast<const char*>(t.raw_data()) - t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace

LoadResult Module::load_state_dict(const StateDict& state, bool strict, bool share) {
  LoadResult result;
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) {
    VIT_CHECK(!given.count(name), "load_state_dict", "key '{}' appears twice", printable(name));
    given[name] = &t;
  }
  std::set<std::string> used;
  const auto params = named_state();  // parameters and buffers
  for (const auto& [name, p] : params) {
    auto it = given.find(name);
    if (it == given.end()) {
      result.missing_keys.push_back(name);
      continue;
    }
    used.insert(name);
    VIT_CHECK(it->second->shape() == p.shape(), "load_state_dict", "'{}': expected shape {}, got {}", printable(name),
              shape_str(p.shape()), shape_str(it->second->shape()));
    // Values convert between float types; int8 (quantized) values mean nothing without their
    // scales, so they load only into a parameter already made int8 (checkpoint/int8_format.h).
    VIT_CHECK((it->second->dtype() == DType::I8) == (p.data().dtype() == DType::I8), "load_state_dict",
              "'{}': a {} tensor for a {} parameter", printable(name), dtype_name(it->second->dtype()),
              dtype_name(p.data().dtype()));
  }
  for (const auto& [name, _] : state) {
    if (!used.count(name)) result.unexpected_keys.push_back(name);
  }
  if (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty())) {
    fail("load_state_dict", "missing keys [{}]; unexpected keys [{}]", printable_list(result.missing_keys),
         printable_list(result.unexpected_keys));
  }
  // All checks passed: only now copy, so a failed load changes nothing. A storage is shared with one
  // parameter at most: tensors of a file that view one storage (torch.save keeps such views) become
  // parameters of their own, so training one never changes another.
  std::unordered_set<const void*> shared;
  for (const auto& [name, p] : params) {
    auto it = given.find(name);
    if (it != given.end()) {
      const Tensor& src = *it->second;
      if (share && src.dtype() == p.data().dtype() && src.is_contiguous() && shared.insert(storage_start(src)).second) {
        p.node()->data = src;
      } else {
        Tensor dst = p.data();
        dst.copy_(src);
      }
    }
  }
  return result;
}

}  // namespace vit::nn
