// gRPC messages to and from the shared inference request and answer (see convert.h).
#include "serve/grpc/convert.h"

#include <cstring>

#include "core/check.h"

namespace vit::serve::grpc_door {
namespace {

constexpr const char* kOp = "infer";

// The typed contents' values of a tensor input: the list of its datatype, exactly numel long.
Tensor tensor_from_contents(const oip::InputSpec& s, const inference::InferTensorContents& c) {
  const bool fp32 = s.datatype == "FP32";
  const auto given = static_cast<int64_t>(fp32 ? c.fp32_contents_size() : c.fp64_contents_size());
  VIT_CHECK(given == s.numel, kOp, "input '{}': shape {} needs {} values, contents.{} has {}", s.name, s.shape_text,
            s.numel, fp32 ? "fp32_contents" : "fp64_contents", given);
  Tensor x = Tensor::empty(s.dims);
  float* out = x.data<float>();
  if (fp32) {
    std::memcpy(out, c.fp32_contents().data(), static_cast<size_t>(s.numel) * 4);
  } else {
    for (int64_t i = 0; i < s.numel; ++i) out[i] = static_cast<float>(c.fp64_contents(static_cast<int>(i)));
  }
  return x;
}

}  // namespace

oip::InferRequest parse_request(const inference::ModelInferRequest& request, const oip::ModelShape& shape) {
  oip::InferRequest r;
  if (!request.id().empty()) r.id = request.id();
  VIT_CHECK(request.inputs_size() == 1, kOp,
            "the model takes one input, \"{}\" (FP32) or \"{}\" (BYTES); the request has {}", oip::kInputName,
            oip::kImageName, request.inputs_size());
  const inference::ModelInferRequest::InferInputTensor& in = request.inputs(0);
  const Shape dims(in.shape().begin(), in.shape().end());
  const oip::InputSpec spec = oip::check_input_spec(in.name(), in.datatype(), dims, shape);
  if (request.raw_input_contents_size() > 0) {
    VIT_CHECK(request.raw_input_contents_size() == 1, kOp,
              "raw_input_contents has {} entries for the request's 1 input", request.raw_input_contents_size());
    VIT_CHECK(!in.has_contents(), kOp, "input '{}' has both raw_input_contents and contents", spec.name);
    const std::string& raw = request.raw_input_contents(0);
    if (spec.bytes()) {
      r.images = oip::bytes_elements(spec, raw.data(), raw.size());
    } else {
      r.input = oip::tensor_from_raw(spec, raw.data(), raw.size());
    }
  } else {
    VIT_CHECK(in.has_contents(), kOp, "input '{}' has no values (neither raw_input_contents nor contents)", spec.name);
    if (spec.bytes()) {
      const auto given = static_cast<int64_t>(in.contents().bytes_contents_size());
      VIT_CHECK(given == spec.numel, kOp, "input '{}': shape {} needs {} images, contents.bytes_contents has {}",
                spec.name, spec.shape_text, spec.numel, given);
      r.images.assign(in.contents().bytes_contents().begin(), in.contents().bytes_contents().end());
    } else {
      r.input = tensor_from_contents(spec, in.contents());
    }
  }
  for (const auto& o : request.outputs()) {
    oip::RequestedOutput ro{o.name(), false, 0};
    const auto k = o.parameters().find("classification");
    if (k != o.parameters().end()) {
      VIT_CHECK(k->second.has_int64_param() && k->second.int64_param() >= 1, kOp,
                "output '{}': classification must be a positive int64_param (the top-k)", ro.name);
      ro.classification = k->second.int64_param();
    }
    for (const oip::RequestedOutput& seen : r.outputs) {
      VIT_CHECK(seen.name != ro.name, kOp, "output '{}' is asked for twice", ro.name);
    }
    r.outputs.push_back(ro);
  }
  return r;
}

void write_response(const std::string& model, const std::string& version, const std::string& id,
                    const std::vector<oip::OutputTensor>& outputs, inference::ModelInferResponse& response) {
  response.set_model_name(model);
  response.set_model_version(version);
  if (!id.empty()) response.set_id(id);
  for (const oip::OutputTensor& o : outputs) {
    auto* out = response.add_outputs();
    out->set_name(o.name);
    out->set_datatype(o.datatype);
    for (int64_t d : o.shape) out->add_shape(d);
    std::string* raw = response.add_raw_output_contents();
    if (o.datatype == "BYTES") {
      for (const std::string& s : o.strings) oip::append_bytes_element(*raw, s);
    } else {
      const Tensor values = o.values.contiguous();
      raw->assign(static_cast<const char*>(values.raw_data()), static_cast<size_t>(values.numel()) * 4);
    }
  }
}

}  // namespace vit::serve::grpc_door
