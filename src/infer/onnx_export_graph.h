// The ViT forward as ONNX nodes (onnx_export_graph.cpp): internal to vit export (onnx_export.h).
#pragma once

#include <string>

#include "infer/onnx_builder.h"
#include "model/vision_transformer.h"

namespace vit::infer::onnx_export {

// The values a model's graph ends in: "" where the model has no such output (a feature extractor
// has no logits).
struct Outputs {
  std::string logits;     // (B, K)
  std::string embedding;  // (B, E)
};

// Writes the model's forward from `input` (B, C, H, W) into g.
Outputs vit_graph(GraphBuilder& g, const model::VisionTransformer& m, const std::string& input);

}  // namespace vit::infer::onnx_export
