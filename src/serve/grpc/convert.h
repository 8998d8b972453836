// The Open Inference Protocol's gRPC messages (serve/grpc/inference.proto) to and from the
// request and answer every door shares (serve/oip/protocol.h): pure functions, fuzzed
// (tests/fuzz/fuzz_grpc.cpp). A request has one input, "input" (FP32/FP64 [B, C, H, W]) or
// "image" (BYTES [B]: encoded images), its values in raw_input_contents (little-endian bytes;
// BYTES elements length-prefixed as Triton writes them) or in the typed contents list; outputs by
// name, with "classification" (int64_param) for top-k strings. Answers carry the values in
// raw_output_contents, one entry per output.
#pragma once

#include <string>
#include <vector>

#include "serve/grpc/inference.pb.h"
#include "serve/oip/protocol.h"

namespace vit::serve::grpc_door {

// Throws vit::Error naming what is malformed.
oip::InferRequest parse_request(const inference::ModelInferRequest& request, const oip::ModelShape& shape);

void write_response(const std::string& model, const std::string& version, const std::string& id,
                    const std::vector<oip::OutputTensor>& outputs, inference::ModelInferResponse& response);

}  // namespace vit::serve::grpc_door
