// `vit serve --grpc-port` (issue 44): the Open Inference Protocol's gRPC service answers as HTTP
// does -- health, metadata (the BYTES input listed), ModelInfer with raw or typed contents giving
// HTTP's logits, Triton's classification strings, the repository index -- and every malformed
// call is the matching gRPC status with vit's message, the server up after them all. Calls are
// counted in /metrics beside HTTP's.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "grpc_client.h"
#include "serve_process.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using json = nlohmann::json;
using testing::TempDir;

class ServeGrpc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    server_ = new ServeProcess(*dir_, {"--grpc-port", "0"});
    Generator gen(3);
    const Tensor t = Tensor::randn({2, 3, 32, 32}, gen);
    x_.assign(t.data<float>(), t.data<float>() + t.numel());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  static grpc::Status call(const inference::ModelInferRequest& r, inference::ModelInferResponse& a) {
    grpc::ClientContext context;
    return testing::grpc_stub(server_->grpc_port())->ModelInfer(&context, r, &a);
  }
  static TempDir* dir_;
  static ServeProcess* server_;
  static std::vector<float> x_;
};
TempDir* ServeGrpc::dir_ = nullptr;
ServeProcess* ServeGrpc::server_ = nullptr;
std::vector<float> ServeGrpc::x_;

TEST_F(ServeGrpc, HealthMetadataAndIndexAnswerAsHttpDoes) {
  ASSERT_GT(server_->grpc_port(), 0) << server_->log();
  auto stub = testing::grpc_stub(server_->grpc_port());
  {
    grpc::ClientContext c;
    inference::ServerLiveResponse a;
    ASSERT_TRUE(stub->ServerLive(&c, {}, &a).ok());
    EXPECT_TRUE(a.live());
  }
  {
    grpc::ClientContext c;
    inference::ServerReadyResponse a;
    ASSERT_TRUE(stub->ServerReady(&c, {}, &a).ok());
    EXPECT_TRUE(a.ready());
  }
  {
    grpc::ClientContext c;
    inference::ServerMetadataResponse a;
    ASSERT_TRUE(stub->ServerMetadata(&c, {}, &a).ok());
    EXPECT_EQ(a.name(), "vit");
    EXPECT_EQ(a.extensions_size(), 3);
  }
  {
    grpc::ClientContext c;
    inference::ModelMetadataRequest r;
    r.set_name("timm");
    inference::ModelMetadataResponse a;
    ASSERT_TRUE(stub->ModelMetadata(&c, r, &a).ok());
    EXPECT_EQ(a.versions(0), "1");
    ASSERT_EQ(a.inputs_size(), 2);
    EXPECT_EQ(a.inputs(0).name(), "input");
    EXPECT_EQ(std::vector<int64_t>(a.inputs(0).shape().begin(), a.inputs(0).shape().end()),
              (std::vector<int64_t>{-1, 3, 32, 32}));
    EXPECT_EQ(a.inputs(1).datatype(), "BYTES");
    EXPECT_EQ(a.outputs(0).name(), "logits");
    EXPECT_EQ(a.outputs(0).shape(1), 10);
  }
  {
    grpc::ClientContext c;
    inference::ModelReadyRequest r;
    r.set_name("timm");
    r.set_version("1");
    inference::ModelReadyResponse a;
    ASSERT_TRUE(stub->ModelReady(&c, r, &a).ok());
    EXPECT_TRUE(a.ready());
  }
  {
    grpc::ClientContext c;
    inference::RepositoryIndexResponse a;
    ASSERT_TRUE(stub->RepositoryIndex(&c, {}, &a).ok());
    ASSERT_EQ(a.models_size(), 1);
    EXPECT_EQ(a.models(0).name(), "timm");
    EXPECT_EQ(a.models(0).state(), "READY");
  }
}

TEST_F(ServeGrpc, ModelInferGivesHttpsLogitsFromRawAndTypedContents) {
  httplib::Client http("127.0.0.1", server_->port());
  const json request = {
      {"inputs", {{{"name", "input"}, {"shape", {2, 3, 32, 32}}, {"datatype", "FP32"}, {"data", x_}}}},
      {"outputs", {{{"name", "logits"}}}}};
  const std::vector<float> want =
      testing::first_output(http.Post("/v2/models/timm/infer", request.dump(), "application/json"));
  ASSERT_EQ(want.size(), 20u);
  inference::ModelInferRequest raw = testing::grpc_tensor_request("timm", x_, {2, 3, 32, 32});
  raw.set_id("call-9");
  inference::ModelInferResponse a;
  ASSERT_TRUE(call(raw, a).ok());
  EXPECT_EQ(a.id(), "call-9");
  EXPECT_EQ(a.model_version(), "1");
  EXPECT_EQ(a.outputs(0).datatype(), "FP32");
  EXPECT_EQ(a.outputs(0).shape_size(), 2);
  EXPECT_TRUE(testing::same_logits(testing::grpc_first_output(a), want, 1e-6));
  // The typed list instead of raw bytes.
  inference::ModelInferRequest typed = raw;
  typed.clear_raw_input_contents();
  for (float v : x_) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(v);
  inference::ModelInferResponse b;
  ASSERT_TRUE(call(typed, b).ok());
  EXPECT_TRUE(testing::same_logits(testing::grpc_first_output(b), want, 1e-6));
  // No outputs named: every output (logits, embedding), one raw entry each.
  inference::ModelInferRequest all = raw;
  all.clear_outputs();
  inference::ModelInferResponse c;
  ASSERT_TRUE(call(all, c).ok());
  ASSERT_EQ(c.outputs_size(), 2);
  EXPECT_EQ(c.outputs(1).name(), "embedding");
  EXPECT_EQ(c.raw_output_contents(1).size(), 2u * 48 * 4);
  // Classification: BYTES "score:index:label", length-prefixed.
  inference::ModelInferRequest top = raw;
  (*top.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(3);
  inference::ModelInferResponse d;
  ASSERT_TRUE(call(top, d).ok());
  EXPECT_EQ(d.outputs(0).datatype(), "BYTES");
  const std::string& strings = d.raw_output_contents(0);
  ASSERT_GE(strings.size(), 4u);
  const uint32_t n = static_cast<uint8_t>(strings[0]);
  EXPECT_NE(strings.substr(4, n).find(':'), std::string::npos) << strings.substr(4, n);
  // /metrics counts the calls beside HTTP's.
  EXPECT_NE(http.Get("/metrics")->body.find("endpoint=\"grpc/ModelInfer\",code=\"200\""), std::string::npos);
}

TEST_F(ServeGrpc, MalformedCallsGetTheirStatusAndTheServerStaysUp) {
  struct Case {
    std::string what;
    inference::ModelInferRequest request;
    grpc::StatusCode code;
    std::string text;
  };
  const inference::ModelInferRequest good = testing::grpc_tensor_request("timm", x_, {2, 3, 32, 32});
  std::vector<Case> cases;
  auto edit = [&](std::string what, grpc::StatusCode code, std::string text,
                  const std::function<void(inference::ModelInferRequest&)>& change) {
    inference::ModelInferRequest r = good;
    change(r);
    cases.push_back({std::move(what), r, code, std::move(text)});
  };
  edit("unknown model", grpc::StatusCode::NOT_FOUND, "unknown model 'nope'", [](auto& r) { r.set_model_name("nope"); });
  edit("unknown version", grpc::StatusCode::NOT_FOUND, "unknown version '7'",
       [](auto& r) { r.set_model_version("7"); });
  edit("shape", grpc::StatusCode::INVALID_ARGUMENT, "but the model takes [B, 3, 32, 32]",
       [](auto& r) { r.mutable_inputs(0)->set_shape(1, 1); });
  edit("raw size", grpc::StatusCode::INVALID_ARGUMENT, "binary_data_size 12 but shape",
       [](auto& r) { r.set_raw_input_contents(0, std::string(12, '\0')); });
  edit("two inputs", grpc::StatusCode::INVALID_ARGUMENT, "the request has 2",
       [](auto& r) { *r.add_inputs() = r.inputs(0); });
  edit("no values", grpc::StatusCode::INVALID_ARGUMENT, "has no values", [](auto& r) { r.clear_raw_input_contents(); });
  edit("both", grpc::StatusCode::INVALID_ARGUMENT, "both raw_input_contents and contents",
       [](auto& r) { r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); });
  edit("typed count", grpc::StatusCode::INVALID_ARGUMENT, "contents.fp32_contents has 1", [](auto& r) {
    r.clear_raw_input_contents();
    r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  });
  edit("NaN", grpc::StatusCode::INVALID_ARGUMENT, "NaN", [&](auto& r) {
    std::vector<float> bad = x_;
    bad[5] = std::nanf("");
    r.set_raw_input_contents(0, std::string(reinterpret_cast<const char*>(bad.data()), bad.size() * 4));
  });
  edit("unknown output", grpc::StatusCode::INVALID_ARGUMENT, "unknown output 'probs'",
       [](auto& r) { r.mutable_outputs(0)->set_name("probs"); });
  edit("datatype", grpc::StatusCode::INVALID_ARGUMENT, "datatype INT8",
       [](auto& r) { r.mutable_inputs(0)->set_datatype("INT8"); });
  cases.push_back({"not an image", testing::grpc_image_request("timm", {"not an image"}),
                   grpc::StatusCode::INVALID_ARGUMENT, "cannot decode"});
  for (const Case& c : cases) {
    inference::ModelInferResponse a;
    const grpc::Status s = call(c.request, a);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.text), std::string::npos) << c.what << ": " << s.error_message();
  }
  // Loading under --model-control none is refused.
  grpc::ClientContext context;
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("timm");
  inference::RepositoryModelLoadResponse loaded;
  const grpc::Status refused = testing::grpc_stub(server_->grpc_port())->RepositoryModelLoad(&context, load, &loaded);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("--model-control explicit"), std::string::npos);
  // Up and answering.
  inference::ModelInferResponse a;
  EXPECT_TRUE(call(good, a).ok());
}

// A port another server holds is refused (gRPC would share it with SO_REUSEPORT), in one line.
TEST_F(ServeGrpc, ABusyGrpcPortIsRefusedByName) {
  const std::string port = std::to_string(server_->grpc_port());
  testing::expect_error(testing::vit("serve --checkpoint " + kTimm + " --heads 4 --port 0 --grpc-port " + port),
                        "[serve] cannot listen for gRPC on 127.0.0.1:" + port);
}

// SIGTERM drains the gRPC door beside HTTP's: the server exits 0 at once when nothing is in
// flight, even with a client's idle gRPC connection open (gRPC's own shutdown would wait for it
// until the deadline: --request-timeout + 1 s, 31 s by default).
TEST(ServeGrpcDrain, SigtermWithAnIdleGrpcClientExitsAtOnce) {
  TempDir dir;
  ServeProcess server(dir, {"--grpc-port", "0"});
  ASSERT_GT(server.grpc_port(), 0) << server.log();
  const auto stub = testing::grpc_stub(server.grpc_port());  // its connection stays open
  grpc::ClientContext context;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub->ServerLive(&context, {}, &live).ok());
  EXPECT_EQ(server.terminate_and_wait(10), 0) << server.log();
  EXPECT_NE(server.log().find("vit serve: stopped after answering"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace vit
