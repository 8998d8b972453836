// `vit serve --grpc-port`: the Open Inference Protocol's gRPC service
// (inference.GRPCInferenceService, serve/grpc/inference.proto) on Debian's gRPC C++ library,
// beside HTTP and sharing with it the models (their batchers and versions), the repository, the
// decode budget and the metrics (endpoint "grpc/ModelInfer", the code the HTTP status the same
// error would have). Errors are gRPC statuses: INVALID_ARGUMENT for a malformed request or a file
// that does not load, NOT_FOUND for an unknown model or version, RESOURCE_EXHAUSTED for a full
// queue, UNAVAILABLE when timed out, draining or short of decoding memory; each with vit's message
// (load/unload under another --model-control: INVALID_ARGUMENT, as HTTP's 400).
#pragma once

#include <memory>
#include <string>

#include "serve/context.h"

namespace vit::serve {

class GrpcServer {
 public:
  // Listens on host:port (0: any free port). Throws "[serve] cannot listen for gRPC on HOST:PORT".
  GrpcServer(ServeContext& context, const std::string& host, int port);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;
  int port() const;
  // Stops taking calls and waits for those in flight, at most `seconds` (then cancels them).
  void shutdown(double seconds);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit::serve
