// The JSON of an inference request parsed without building a JSON value for every number of the
// input's "data": a nested list of a batch of images is the bulk of a request, and as nlohmann
// values it costs ~24 bytes per number (a 24 MB body: ~550 MB). The numbers of
// inputs[0].data go straight into a float array as they are read (4 bytes each); the rest of
// the request (small) is parsed as usual, with "data" left as null in it. Strings there (a BYTES
// input's elements: base64 images) are moved out the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vit::serve::oip {

struct RequestJson {
  nlohmann::json json;               // the request, inputs[0].data as null when it was a list or number
  bool data_read = false;            // inputs[0].data was a number or a (nested) list, read into `data`
  bool data_numeric = true;          // ... and it held numbers only
  bool data_textual = true;          // ... or strings only (a BYTES input's elements)
  std::vector<float> data;           // its numbers, row-major
  std::vector<std::string> strings;  // its strings, row-major
  size_t data_values = 0;            // how many it held (all are counted, only the first max_values kept)
};

// Throws nlohmann's parse_error for text that is not JSON. Keeps at most max_values numbers.
RequestJson parse_request_json(const std::string& text, size_t max_values);

}  // namespace vit::serve::oip
