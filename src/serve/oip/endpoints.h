// The Open Inference Protocol's endpoints (KServe v2 over HTTP/REST), their requests parsed and
// answers written by serve/oip/protocol.h:
//   GET  /v2                                   server metadata {name, version, extensions}
//   GET  /v2/health/live, /v2/health/ready     200 (ready: 503 while draining)
//   GET  /v2/models/{model}[/versions/{version}]         model metadata {name, versions, platform,
//                                                        inputs, outputs}
//   GET  /v2/models/{model}[/versions/{version}]/ready   200 (503 while draining)
//   POST /v2/models/{model}[/versions/{version}]/infer   (see protocol.h; a tensor, or encoded images)
//   POST /v2/repository/index                  [{name, version?, state, reason?}] ({"ready": true}: READY only)
//   POST /v2/repository/models/{model}/load    (re)load from its file (--model-control explicit)
//   POST /v2/repository/models/{model}/unload  take out of service (--model-control explicit)
// An unknown model or version is 404 (only the serving version of a model answers); the /v2
// endpoints take no query parameters.
#pragma once

#include "serve/context.h"
#include "serve/router.h"

namespace vit::serve::oip {

void add_routes(Router& router, ServeContext& context);

}  // namespace vit::serve::oip
