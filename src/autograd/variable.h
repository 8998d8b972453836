// Variable: a Tensor plus what reverse-mode autodiff needs (requires_grad, .grad, the op that
// made it). Ops on Variables (autograd/ops.h) compute their result with kernels and, when
// gradients are wanted, record a backward closure that keeps only what it needs (flashlight's
// style). backward() walks the recorded DAG once in reverse topological order, so a value used
// twice receives the sum of both gradients. The API mirrors PyTorch's Tensor.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vit {

// The backward of one op: grad_out is contiguous with the output's shape; input_grads[i] is
// a contiguous buffer of input i's shape to accumulate (+=) into, or undefined when input i
// needs no gradient.
using BackwardFn = std::function<void(const Tensor& grad_out, std::vector<Tensor>& input_grads)>;

// A tensor a backward reads, with its storage's version when the op ran (Tensor::version).
struct SavedTensor {
  Tensor tensor;
  uint64_t version = 0;
};

struct Node {
  Tensor data;
  Tensor grad;  // accumulated gradient (leaves keep it across backward calls)
  bool requires_grad = false;
  bool retains_grad = false;  // keep .grad on a non-leaf after backward
  std::string grad_fn;        // name of the op that made it ("" for leaves)
  std::vector<std::shared_ptr<Node>> inputs;
  BackwardFn backward;  // released after backward() runs (the graph is freed)
  // What backward reads of memory that others can write (make_result's `saved`): backward()
  // refuses to run when any of it changed in place since, as torch's version counter does.
  std::vector<SavedTensor> saved;
};

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor data, bool requires_grad = false);

  bool defined() const { return node_ != nullptr; }
  const Tensor& data() const;
  // The accumulated gradient; an undefined Tensor until a backward pass reaches this Variable.
  const Tensor& grad() const;
  bool requires_grad() const { return node_ && node_->requires_grad; }
  Variable& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const { return node_ && node_->grad_fn.empty(); }
  const std::string& grad_fn() const;
  void retain_grad();
  void zero_grad();  // fills .grad with zeros when it exists (PyTorch 1.13 set_to_none=False)
  void set_grad(const Tensor& grad);

  // d(this)/d(leaves): this must be a one-element tensor, or grad_output gives the upstream
  // gradient (same shape). Frees the graph (as PyTorch without retain_graph).
  void backward() const;
  void backward(const Tensor& grad_output) const;
  // backward() that calls on_leaf_ready(leaf) as soon as a leaf's .grad is final (no op still to
  // run adds to it), in the order the pass finishes them: a data-parallel gradient reducer starts
  // sending a bucket of parameters while the rest of the pass runs. Leaves the pass never reaches
  // are not reported.
  using LeafReadyFn = std::function<void(Node* leaf)>;
  void backward(const Tensor& grad_output, const LeafReadyFn& on_leaf_ready) const;
  Variable detach() const;  // same data, no history

  // metadata
  const Shape& shape() const { return data().shape(); }
  int64_t dim() const { return data().dim(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  double item() const { return data().item(); }
  std::string to_string() const;

  // views and copies (differentiable)
  Variable view(const Shape& shape) const;
  Variable reshape(const Shape& shape) const;
  Variable flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Variable transpose(int64_t dim0, int64_t dim1) const;
  Variable permute(const std::vector<int64_t>& dims) const;
  Variable contiguous() const;
  Variable unsqueeze(int64_t dim) const;
  Variable squeeze(int64_t dim) const;
  Variable squeeze() const;
  Variable slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Variable select(int64_t dim, int64_t index) const;
  Variable expand(const Shape& shape) const;
  Variable unfold(int64_t dim, int64_t size, int64_t step) const;
  Variable index_select(int64_t dim, const std::vector<int64_t>& indices) const;
  Variable repeat(const Shape& repeats) const;

  // math (differentiable)
  Variable sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Variable mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Variable var(const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Variable std(const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Variable max(int64_t dim, bool keepdim = false) const;  // values; see max_with_indices
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Variable softmax(int64_t dim) const;
  Variable log_softmax(int64_t dim) const;
  Variable matmul(const Variable& other) const;
  Variable pow(double exponent) const;
  Variable exp() const;
  Variable log() const;
  Variable sqrt() const;
  Variable tanh() const;
  Variable relu() const;
  Variable sigmoid() const;
  Variable gelu(bool tanh_approximation = false) const;

  const std::shared_ptr<Node>& node() const { return node_; }
  explicit Variable(std::shared_ptr<Node> node) : node_(std::move(node)) {}

 private:
  std::shared_ptr<Node> node_;
};

std::ostream& operator<<(std::ostream& os, const Variable& v);

// Gradient recording switch (thread-local). NoGradGuard turns it off for a scope.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// For op implementations: wraps `out` as the result of op `name`. When grad mode is on and
// some input requires grad, records `backward` against the inputs; otherwise returns a plain
// Variable and drops `backward`. `saved` lists the tensors `backward` reads that may share memory
// with an input or the output (an input's data, its contiguous() -- the same memory when it was
// contiguous --, a view of it, the output), with their versions now: an in-place change to any of
// them before backward() makes backward() refuse (torch: "modified by an inplace operation")
// instead of computing gradients at the new values. Buffers the op made for itself need no entry.
Variable make_result(Tensor out, const char* name, const std::vector<Variable>& inputs,
                     const std::vector<Tensor>& saved, BackwardFn backward);

}  // namespace vit
