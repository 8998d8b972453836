// Module: the base of every layer (torch.nn.Module's shape). Holds named parameters, named
// buffers (state that is not trained: BatchNorm's running statistics) and named children in
// registration order, so names are timm's dotted paths ("blocks.0.attn.qkv.weight"); train()/eval()
// propagate to children; state dicts are name -> Tensor (parameters and buffers, each module's own
// then its children's, as PyTorch orders them) and load with shape checks.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace vit::nn {

using GeneratorPtr = std::shared_ptr<Generator>;
using StateDict = std::vector<std::pair<std::string, Tensor>>;  // ordered, as PyTorch's OrderedDict

struct LoadResult {
  std::vector<std::string> missing_keys;     // parameters the state dict did not provide
  std::vector<std::string> unexpected_keys;  // state dict entries no parameter matches
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Single-input forward (every layer here). Variable operator() calls it.
  virtual Variable forward(const Variable& x) = 0;
  Variable operator()(const Variable& x) { return forward(x); }

  // Every parameter with its dotted name, depth first in registration order.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  // Every buffer with its dotted name (Variables that never require grad; optimisers never see them).
  std::vector<std::pair<std::string, Variable>> named_buffers() const;
  // Parameters and buffers in state-dict order (each module's own, then its children's).
  std::vector<std::pair<std::string, Variable>> named_state() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // Number of scalar parameters (trainable only: those with requires_grad).
  int64_t num_parameters(bool trainable_only = true) const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Converts every parameter to dtype in place (PyTorch's module.double() / .float()); the
  // Variables keep their identity, so references held elsewhere see the new values.
  void to(DType dtype);
  // Calls fn on this module and every descendant, depth first (torch.nn.Module.apply).
  void apply(const std::function<void(Module&)>& fn);

  StateDict state_dict() const;
  // Copies values into the parameters (so optimisers holding them see the change). Shapes must
  // match exactly; strict refuses missing and unexpected keys with an error listing them.
  // share: a float32-into-float32 contiguous value becomes the parameter's storage instead of
  // being copied (for inference on memory-mapped weights: no copy, no extra memory), once per
  // storage: values that view one storage are copied for every parameter after the first, so no
  // two parameters alias. Only for models nobody else holds parameter references to (no optimiser
  // yet).
  LoadResult load_state_dict(const StateDict& state, bool strict = true, bool share = false);

 protected:
  Variable register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  Variable register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  enum class What { Parameters, Buffers, Both };
  void collect(const std::string& prefix, What what, std::vector<std::pair<std::string, Variable>>& out) const;
  void check_new_name(const std::string& name) const;
  std::vector<std::pair<std::string, Variable>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace vit::nn
