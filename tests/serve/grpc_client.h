// A gRPC client of the Open Inference Protocol for the serve tests, on the stub generated from
// vit's inference.proto (whose names and field numbers are the protocol's): requests built as the
// protocol's text describes them (raw_input_contents little-endian, BYTES elements length-prefixed).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "oip_client.h"
#include "serve/grpc/inference.grpc.pb.h"

namespace vit::testing {

inline std::unique_ptr<inference::GRPCInferenceService::Stub> grpc_stub(int port) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

// A request of one tensor input (raw FP32) or of encoded images (raw BYTES), asking for `output`.
inline inference::ModelInferRequest grpc_tensor_request(const std::string& model, const std::vector<float>& x,
                                                        const std::vector<int64_t>& shape,
                                                        const std::string& output = "logits") {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  auto* in = r.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  if (!output.empty()) r.add_outputs()->set_name(output);
  return r;
}

inline inference::ModelInferRequest grpc_image_request(const std::string& model, const std::vector<std::string>& images,
                                                       const std::string& output = "logits") {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  auto* in = r.add_inputs();
  in->set_name("image");
  in->set_datatype("BYTES");
  in->add_shape(static_cast<int64_t>(images.size()));
  std::string raw;
  for (const std::string& image : images) raw += bytes_element(image);
  r.add_raw_input_contents(raw);
  if (!output.empty()) r.add_outputs()->set_name(output);
  return r;
}

// The first output's FP32 values from raw_output_contents.
inline std::vector<float> grpc_first_output(const inference::ModelInferResponse& a) {
  if (a.raw_output_contents_size() < 1) return {};
  const std::string& raw = a.raw_output_contents(0);
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), v.size() * 4);
  return v;
}

}  // namespace vit::testing
