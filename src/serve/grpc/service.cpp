// The gRPC door of `vit serve` (see service.h).
#include "serve/grpc/service.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "core/check.h"
#include "serve/grpc/convert.h"
#include "serve/grpc/inference.grpc.pb.h"
#include "serve/oip/infer.h"
#include "serve/router.h"

namespace vit::serve {
namespace {

using Clock = std::chrono::steady_clock;

grpc::StatusCode code_of(int http) {
  switch (http) {
    case 404:
      return grpc::StatusCode::NOT_FOUND;
    case 429:
    case 413:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 503:
    case 408:
      return grpc::StatusCode::UNAVAILABLE;
    default:
      return http >= 500 ? grpc::StatusCode::INTERNAL : grpc::StatusCode::INVALID_ARGUMENT;
  }
}

// Runs a call behind the error wrapper; `http` gets the status HTTP would have answered.
template <typename Body>
grpc::Status guarded(Body body, int& http) {
  try {
    body();
    http = 200;
    return grpc::Status::OK;
  } catch (const HttpError& e) {
    http = e.status;
    return {code_of(e.status), e.message};
  } catch (const Error& e) {
    http = 400;
    return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
  } catch (const std::bad_alloc&) {
    http = 503;
    return {grpc::StatusCode::RESOURCE_EXHAUSTED, "[serve] out of memory for this request; retry"};
  } catch (const std::exception& e) {
    http = 500;
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

template <typename Body>
grpc::Status guarded(Body body) {
  int http = 0;
  return guarded(body, http);
}

class Service final : public inference::GRPCInferenceService::Service {
 public:
  explicit Service(ServeContext& s) : s_(s) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* out) override {
    out->set_live(true);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* out) override {
    out->set_ready(!s_.draining);
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* in,
                          inference::ModelReadyResponse* out) override {
    return guarded([&] {
      oip::find_model(s_, in->name(), in->version());
      out->set_ready(!s_.draining);
    });
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* out) override {
    out->set_name("vit");
    out->set_version(VIT_VERSION);
    for (const char* e : {"binary_tensor_data", "classification", "model_repository"}) out->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* in,
                             inference::ModelMetadataResponse* out) override {
    return guarded([&] {
      const oip::ModelMetadata md = oip::model_metadata(*oip::find_model(s_, in->name(), in->version()));
      out->set_name(md.name);
      out->add_versions(md.version);
      out->set_platform(md.platform);
      auto add = [](const oip::TensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* m) {
        m->set_name(t.name);
        m->set_datatype(t.datatype);
        for (int64_t d : t.shape) m->add_shape(d);
      };
      for (const auto& t : md.inputs) add(t, out->add_inputs());
      for (const auto& t : md.outputs) add(t, out->add_outputs());
    });
  }

  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* in,
                          inference::ModelInferResponse* out) override {
    const auto start = Clock::now();
    ++s_.inflight;
    std::string counted;  // the model the metrics count it under
    int http = 0;
    grpc::Status status = guarded(
        [&] {
          const ModelHandle handle = oip::find_model(s_, in->model_name(), in->model_version());
          ServedModel& m = *handle;
          counted = m.name;
          const model::ViTConfig& c = m.config();
          oip::InferRequest r = grpc_door::parse_request(*in, {c.in_channels, c.image_size, c.image_size});
          const Tensor batch = oip::request_batch(s_, m, r);
          grpc_door::write_response(m.name, m.version, in->id(), oip::run_outputs(s_, m, r, batch), *out);
        },
        http);
    s_.metrics.request(counted, "grpc/ModelInfer", http, std::chrono::duration<double>(Clock::now() - start).count());
    --s_.inflight;
    ++s_.answered;
    return status;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* in,
                               inference::RepositoryIndexResponse* out) override {
    for (const ModelStatus& m : s_.models.index()) {
      if (in->ready() && m.state != "READY") continue;
      auto* e = out->add_models();
      e->set_name(m.name);
      e->set_version(m.version);
      e->set_state(m.state);
      e->set_reason(m.reason);
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const inference::RepositoryModelLoadRequest* in,
                                   inference::RepositoryModelLoadResponse*) override {
    return guarded([&] { s_.repository->load(in->model_name()); });
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext*, const inference::RepositoryModelUnloadRequest* in,
                                     inference::RepositoryModelUnloadResponse*) override {
    return guarded([&] { s_.repository->unload(in->model_name()); });
  }

 private:
  ServeContext& s_;
};

}  // namespace

struct GrpcServer::Impl {
  explicit Impl(ServeContext& s) : service(s) {}
  Service service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag down;
};

GrpcServer::GrpcServer(ServeContext& context, const std::string& host, int port)
    : impl_(std::make_unique<Impl>(context)) {
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  // gRPC's and protobuf's own log lines (a failed bind's stack of causes; a client's message with
  // invalid UTF-8, which gRPC refuses anyway) only with GRPC_VERBOSITY set: vit says what went
  // wrong in one line of its own, and a client cannot fill the server's log.
  if (std::getenv("GRPC_VERBOSITY") == nullptr) {
    gpr_set_log_function([](gpr_log_func_args*) {});
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl_->port);
  builder.RegisterService(&impl_->service);
  const auto limit = static_cast<int>(std::min<int64_t>(context.options.max_body_bytes, INT32_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(-1);
  // A port another server holds is refused, not shared (gRPC would otherwise set SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Calls wait for the model as HTTP workers do: as many threads as HTTP has workers (and a few
  // for the cheap calls), so batches form from concurrent calls.
  grpc::ResourceQuota quota("vit-serve");
  quota.SetMaxThreads(context.options.http_threads + 8);
  builder.SetResourceQuota(quota);
  impl_->server = builder.BuildAndStart();
  VIT_CHECK(impl_->server != nullptr && impl_->port > 0, "serve",
            "cannot listen for gRPC on {} (in use, or not an address of this machine)", address);
}

GrpcServer::~GrpcServer() { shutdown(0); }

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::shutdown(double seconds) {
  std::call_once(impl_->down, [&] {
    impl_->server->Shutdown(
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds)));
    impl_->server->Wait();
  });
}

}  // namespace vit::serve
