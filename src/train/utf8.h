// UTF-8 checks for the text a run records: checkpoints and metrics.jsonl are JSON, which must be
// valid UTF-8, while paths and folder names (class names of an image folder) are any bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"

namespace vit::train {

// True when s is well-formed UTF-8 (no stray or truncated sequences, overlong forms, surrogates
// or code points past U+10FFFF), exactly what the JSON writer accepts.
bool valid_utf8(std::string_view s);
// s with every byte that is not part of a well-formed sequence written as the text "\xHH"
// (valid UTF-8 is returned unchanged): distinct names stay distinct and readable.
std::string escape_invalid_utf8(std::string_view s);
// A dataset's class names as checkpoints record them: names that are not valid UTF-8 escaped as
// above, in place. Training records them so and `vit eval` matches the data the same way, so a
// model is always scored on the data it was trained on. Returns the names it escaped.
std::vector<std::string> escape_class_names(data::Dataset& d);

}  // namespace vit::train
