// The autograd engine: graph recording (make_result), backward() in reverse topological order,
// gradient accumulation into leaves, and the no-grad switch.
#include "autograd/variable.h"

#include <algorithm>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

namespace vit {
namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

Variable::Variable(Tensor data, bool requires_grad) : node_(std::make_shared<Node>()) {
  VIT_CHECK(data.defined(), "variable", "cannot wrap an undefined tensor");
  VIT_CHECK(!requires_grad || data.dtype() != DType::I64, "variable", "only float tensors can require gradients");
  node_->data = std::move(data);
  node_->requires_grad = requires_grad;
}

const Tensor& Variable::data() const {
  VIT_CHECK(node_ != nullptr, "variable", "use of an undefined Variable");
  return node_->data;
}

const Tensor& Variable::grad() const {
  VIT_CHECK(node_ != nullptr, "variable", "use of an undefined Variable");
  return node_->grad;
}

const std::string& Variable::grad_fn() const {
  VIT_CHECK(node_ != nullptr, "variable", "use of an undefined Variable");
  return node_->grad_fn;
}

Variable& Variable::requires_grad_(bool on) {
  VIT_CHECK(is_leaf(), "requires_grad_", "can only change requires_grad of a leaf (this came from {})", grad_fn());
  VIT_CHECK(!on || dtype() != DType::I64, "requires_grad_", "only float tensors can require gradients");
  node_->requires_grad = on;
  return *this;
}

void Variable::retain_grad() {
  VIT_CHECK(requires_grad(), "retain_grad", "the Variable does not require grad");
  node_->retains_grad = true;
}

void Variable::zero_grad() {
  if (node_ && node_->grad.defined()) node_->grad.fill_(0.0);
}

void Variable::set_grad(const Tensor& grad) {
  VIT_CHECK(node_ != nullptr, "set_grad", "use of an undefined Variable");
  VIT_CHECK(!grad.defined() || grad.shape() == shape(), "set_grad", "gradient shape {} != variable shape {}",
            shape_str(grad.shape()), shape_str(shape()));
  node_->grad = grad.defined() ? grad.contiguous() : Tensor();
}

Variable Variable::detach() const { return Variable(data(), false); }

std::string Variable::to_string() const {
  std::string suffix;
  if (requires_grad()) suffix = is_leaf() ? ", requires_grad=True" : ", grad_fn=<" + grad_fn() + ">";
  return format_tensor(data(), {}, "tensor(", suffix);
}

std::ostream& operator<<(std::ostream& os, const Variable& v) { return os << v.to_string(); }

Variable make_result(Tensor out, const char* name, const std::vector<Variable>& inputs,
                     const std::vector<Tensor>& saved, BackwardFn backward) {
  bool needs_grad = false;
  if (g_grad_enabled) {
    for (const Variable& v : inputs) needs_grad = needs_grad || v.requires_grad();
  }
  if (!needs_grad) return Variable(std::move(out), false);
  auto node = std::make_shared<Node>();
  node->data = std::move(out);
  node->requires_grad = true;
  node->grad_fn = std::string(name) + "Backward";
  for (const Variable& v : inputs) node->inputs.push_back(v.node());
  node->backward = std::move(backward);
  for (const Tensor& t : saved) {
    if (t.defined()) node->saved.push_back({t, t.version()});
  }
  return Variable(std::move(node));
}

namespace {

// Refuses a pass when an op's saved tensor changed in place after the op ran (before any
// gradient is touched, so a refused pass leaves every .grad as it was).
void check_saved_versions(const std::vector<std::shared_ptr<Node>>& order) {
  for (const auto& node : order) {
    for (const SavedTensor& s : node->saved) {
      VIT_CHECK(s.tensor.version() == s.version, "backward",
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                "the {} tensor that {} saved is at version {}; expected version {} (changed after the forward by "
                "copy_, an optimiser step, ...: run the forward again after changing it, or change a clone)",
                shape_str(s.tensor.shape()), node->grad_fn, s.tensor.version(), s.version);
    }
  }
}

}  // namespace

void Variable::backward() const {
  VIT_CHECK(defined() && numel() == 1, "backward",
            "grad can be implicitly created only for one-element outputs; this has shape {} (pass grad_output)",
            defined() ? shape_str(shape()) : "undefined");
  backward(Tensor::ones(shape(), dtype()));
}

void Variable::backward(const Tensor& grad_output) const { backward(grad_output, LeafReadyFn()); }

void Variable::backward(const Tensor& grad_output, const LeafReadyFn& on_leaf_ready) const {
  VIT_CHECK(requires_grad(), "backward", "the Variable does not require grad and has no grad_fn");
  VIT_CHECK(grad_output.shape() == shape(), "backward", "grad_output shape {} != output shape {}",
            shape_str(grad_output.shape()), shape_str(shape()));
  VIT_CHECK(grad_output.dtype() == dtype(), "backward", "grad_output dtype {} != output dtype {}",
            dtype_name(grad_output.dtype()), dtype_name(dtype()));
  VIT_CHECK(is_leaf() || node_->backward, "backward",
            "the graph behind this {} result was already freed by an earlier backward()", grad_fn());

  // Post-order DFS (iterative: deep graphs must not overflow the stack). `order` owns the nodes:
  // running a node releases its inputs, which may be the last other reference to them.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{node_, 0}};
  visited.insert(node_.get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      std::shared_ptr<Node> child = node->inputs[next++];
      if (child->requires_grad && child->backward && !visited.count(child.get())) {
        visited.insert(child.get());
        stack.emplace_back(std::move(child), 0);
      }
      continue;
    }
    order.push_back(std::move(node));
    stack.pop_back();
  }
  check_saved_versions(order);

  auto accumulate = [](Node* node, const Tensor& g) {
    if (!node->grad.defined()) {
      node->grad = g.contiguous().clone();
    } else {
      accumulate_into(node->grad, g);
    }
  };
  accumulate(node_.get(), grad_output);

  // For on_leaf_ready: after the k-th node to run, the leaves it was the last consumer of.
  std::vector<std::vector<Node*>> leaves_done(on_leaf_ready ? order.size() : 0);
  if (on_leaf_ready) {
    std::unordered_map<Node*, size_t> last_use;
    for (size_t k = 0; k < order.size(); ++k) {
      const Node* node = order[order.size() - 1 - k].get();
      if (!node->backward) continue;
      for (const auto& input : node->inputs) {
        if (input->requires_grad && !input->backward) last_use[input.get()] = k;
      }
    }
    for (const auto& [leaf, k] : last_use) leaves_done[k].push_back(leaf);
    // unordered_map order is arbitrary: report each node's leaves in input order.
    for (size_t k = 0; k < order.size(); ++k) {
      if (leaves_done[k].size() < 2) continue;
      std::vector<Node*> ordered;
      for (const auto& input : order[order.size() - 1 - k]->inputs) {
        if (std::find(leaves_done[k].begin(), leaves_done[k].end(), input.get()) != leaves_done[k].end() &&
            std::find(ordered.begin(), ordered.end(), input.get()) == ordered.end())
          ordered.push_back(input.get());
      }
      leaves_done[k] = std::move(ordered);
    }
  }

  size_t k = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it, ++k) {
    Node* node = it->get();
    if (!node->backward) continue;  // a leaf root
    Tensor g = node->grad;
    if (g.defined()) {
      std::vector<Tensor> input_grads(node->inputs.size());
      for (size_t i = 0; i < node->inputs.size(); ++i) {
        Node* input = node->inputs[i].get();
        if (!input->requires_grad) continue;
        if (!input->grad.defined()) input->grad = Tensor::zeros(input->data.shape(), input->data.dtype());
        input_grads[i] = input->grad;
      }
      node->backward(g, input_grads);
    }
    if (!node->retains_grad) node->grad = Tensor();
    node->backward = nullptr;  // free the graph: saved tensors go with the closure
    node->inputs.clear();
    node->saved.clear();
    if (on_leaf_ready) {
      for (Node* leaf : leaves_done[k]) on_leaf_ready(leaf);
    }
  }
}

}  // namespace vit
