// What goes into a model and what comes out of it, checked and read the same way by `vit predict`,
// `vit serve` and the library (<vit/vit.h>, the Python module).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vit::infer {

// Refuses the first NaN or infinity of an input batch:
// "[op] {subject} contains NaN or infinity (element i of n)".
void check_finite_input(const float* values, int64_t n, const char* op, const std::string& subject);

struct ClassScore {
  int64_t index = 0;
  double probability = 0.0;
};
// The indices of the k largest of `n` scores, largest first (equal ones: the lower index first);
// k is clamped to n. The one ranking of classes: top_k_softmax's, and training's evaluation
// (top-1 / top-5 of float probabilities). For float and double.
template <class T>
std::vector<int64_t> top_k_indices(const T* scores, int64_t n, int64_t k);
// Softmax (in double) over one row of `num_classes` logits, and its k most probable classes, most
// probable first (equal ones: the lower index first); k is clamped to num_classes.
std::vector<ClassScore> top_k_softmax(const float* logits, int64_t num_classes, int64_t k);

}  // namespace vit::infer
