// An Open Inference request run on a model, whichever door it came by (HTTP JSON, HTTP binary,
// gRPC): the model's metadata as the protocol states it, the request's input batch (a tensor
// checked against the model, or encoded images decoded within the decode budget and preprocessed
// as `vit predict IMAGE` does), and its outputs through the model's batcher.
#pragma once

#include <string>
#include <vector>

#include "serve/context.h"
#include "serve/oip/protocol.h"

namespace vit::serve::oip {

struct TensorMetadata {
  std::string name, datatype;
  Shape shape;  // -1: any size
};

struct ModelMetadata {
  std::string name, version, platform;
  std::vector<TensorMetadata> inputs, outputs;
};

ModelMetadata model_metadata(const ServedModel& m);

// The model a request names at the version it names ("" for the serving one); HttpError 404 for an
// unknown or unserved model, or a version that is not the serving one.
ModelHandle find_model(const ServeContext& s, const std::string& name, const std::string& version);

// The request's input batch (B, C, H, W): its tensor checked, or its images decoded and
// preprocessed (their bytes freed as they are used).
Tensor request_batch(ServeContext& s, const ServedModel& m, InferRequest& r);

// The outputs asked for (every output the model has when none are), run through the batcher.
std::vector<OutputTensor> run_outputs(ServeContext& s, ServedModel& m, const InferRequest& r, const Tensor& batch);

}  // namespace vit::serve::oip
