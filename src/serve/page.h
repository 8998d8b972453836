// GET /: a page to try the served models in a browser. Self-contained (inline style and script,
// no external scripts or fonts): pick a model, pick or drop an image; it shows the top-5 classes
// as bars (POST /v1/predict), the embedding's size (POST /v1/embed), the latency of each call, and
// the attention map (POST /v1/attention: the last block's CLS attention and the rollout over the image).
#pragma once

#include <string>

namespace vit::serve {

const std::string& page_html();

}  // namespace vit::serve
