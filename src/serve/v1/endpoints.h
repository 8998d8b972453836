// vit's own HTTP endpoints, beside the Open Inference Protocol (serve/oip/endpoints.h):
//   POST /v1/predict   body: an image (PNG/JPEG/BMP bytes) -> {"predictions": [{index, label,
//                      probability}, ...], "top_k"} (?top_k=N: any positive whole number, at most the
//                      class count given, with a "note" when it was more); or a float32 (B, C, H, W)
//                      .npy (Content-Type: application/x-npy) -> {"logits": [[...], ...]}
//   POST /v1/embed     the same bodies -> {"embedding": [...], "shape"} / {"embeddings": [...], "shape"}
//                      (?pool=cls|avg|tokens; default the model's)
//   POST /v1/attention an image -> image/png: vit attention's picture (the image, the last block's
//                      CLS attention, the rollout); 404 with --no-attention
//   GET  /v1/models    the models: name, file, layout, family, image size, channels, classes, embedding width
//   GET  /healthz      {"status": "ok", models...}; 503 {"status": "draining"} while shutting down
//   GET  /metrics      Prometheus text, labelled by model (serve/metrics.h)
//   GET  /             a page to try the models (serve/page.h)
// With several models, /v1 takes ?model=NAME (needed unless one model is served).
#pragma once

#include "serve/context.h"
#include "serve/router.h"

namespace vit::serve {

void add_v1_routes(Router& router, ServeContext& context);

}  // namespace vit::serve
