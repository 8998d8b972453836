// The first half of recognising a ViT in an ONNX graph (onnx.h): the graph's parametric ops as a
// list of events in graph order, each holding its constant tensors. onnx.cpp reads the list as a ViT.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/onnx.h"

namespace vit::model::onnx_pattern {

enum class Kind {
  Conv,    // weight (O, C, K, K), bias or undefined; stride, pad
  Prefix,  // the prefix tokens' constants, in Concat order (each (1, k, D), (k, D) or (D))
  Pos,     // Add of a (1, T, D) table
  Norm,    // weight, bias, eps, axes (1, or 2 over (N, D))
  Linear,  // weight (out, in), bias or undefined
  Scale,   // Mul by a scalar (value) or Div (value = 1 / divisor)
  Gamma,   // Mul by a (D) vector: LayerScale
  Softmax,
  Act,      // name: "gelu", "gelu_tanh", "quick_gelu", "relu", "tanh"
  TakeRow,  // Gather of one token row (index) on axis 1
  Mean,     // ReduceMean over the tokens (pooling)
};

struct Event {
  Event(Kind k, std::string node_label) : kind(k), label(std::move(node_label)) {}
  Kind kind;
  std::string label;  // the node, for messages
  Tensor weight, bias;
  double value = 0.0;
  int64_t stride = 1, pad = 0, axes = 1, index = 0;
  std::string act;
  std::vector<Tensor> tokens;      // Prefix
  std::vector<std::string> names;  // the constants' names (used-weights bookkeeping)
};

struct Events {
  std::vector<Event> list;
  std::set<std::string> used;  // constants the events took
};

// Throws "[onnx] PATH: ..." for an op outside the ones a ViT graph holds.
Events collect_events(const io::OnnxModel& m);

}  // namespace vit::model::onnx_pattern
