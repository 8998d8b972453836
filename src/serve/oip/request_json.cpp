// An inference request's JSON with the input's numbers read as floats (see request_json.h): a SAX
// handler that passes every event to nlohmann's own DOM builder, except those of inputs[0].data.
#include "serve/oip/request_json.h"

namespace vit::serve::oip {
namespace {

using json = nlohmann::json;
using Dom = nlohmann::detail::json_sax_dom_parser<json>;

class RequestSax {
 public:
  RequestSax(RequestJson& out, size_t max_values) : out_(out), dom_(out.json), max_values_(max_values) {}

  bool null() { return capturing_ ? other() : (value_starts(), dom_.null()); }
  bool boolean(bool v) { return capturing_ ? other() : (value_starts(), dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return number(static_cast<double>(v)) || dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return number(static_cast<double>(v)) || dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const std::string& s) { return number(v) || dom_.number_float(v, s); }
  bool string(std::string& v) {
    if (capturing_) return text(v);
    if (at_input_data()) {  // one string as the data
      out_.data_read = true;
      text(v);
      value_starts();
      return dom_.null();
    }
    return value_starts(), dom_.string(v);
  }
  bool binary(json::binary_t& v) { return capturing_ ? other() : (value_starts(), dom_.binary(v)); }
  bool start_object(std::size_t n) {
    if (capturing_) return ++depth_, other();
    value_starts();
    frames_.push_back({false, "", 0});
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    if (capturing_) return true;
    frames_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() {
    if (capturing_) return --depth_, true;
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (capturing_) return ++depth_, true;
    if (at_input_data()) {  // the list of numbers: read, not built
      capturing_ = true;
      depth_ = 1;
      out_.data_read = true;
      return true;
    }
    value_starts();
    frames_.push_back({true, "", 0});
    return dom_.start_array(n);
  }
  bool end_array() {
    if (capturing_) {
      if (--depth_ == 0) {
        capturing_ = false;
        value_starts();
        return dom_.null();  // "data" stays a key of the input, its numbers in out_.data
      }
      return true;
    }
    frames_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  struct Frame {
    bool array;
    std::string key;  // an object's key of the value that comes next
    size_t index;     // an array's count of the values started in it
  };

  // Whether the value starting now is inputs[0].data of the root object (inside the inputs' first
  // element: one value started there).
  bool at_input_data() const {
    return frames_.size() == 3 && !frames_[0].array && frames_[0].key == "inputs" && frames_[1].array &&
           frames_[1].index == 1 && !frames_[2].array && frames_[2].key == "data";
  }
  // A value starts in the innermost container: an array counts the values started in it.
  void value_starts() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  // A number: kept when it is (in) inputs[0].data; true when it was taken.
  bool number(double v) {
    if (!capturing_) {
      if (!at_input_data()) return (value_starts(), false);
      out_.data_read = true;
      keep(v);
      value_starts();
      dom_.null();
      return true;
    }
    keep(v);
    return true;
  }
  void keep(double v) {
    out_.data_textual = false;
    if (out_.data_values++ < max_values_) out_.data.push_back(static_cast<float>(v));
  }
  // A string in the data (a BYTES element): moved, not copied.
  bool text(std::string& v) {
    out_.data_numeric = false;
    ++out_.data_values;
    if (out_.strings.size() < max_values_) out_.strings.push_back(std::move(v));
    return true;
  }
  // Anything but a number, a string or a list inside the data.
  bool other() {
    out_.data_numeric = false;
    out_.data_textual = false;
    return true;
  }

  RequestJson& out_;
  Dom dom_;
  size_t max_values_;
  std::vector<Frame> frames_;
  bool capturing_ = false;
  int depth_ = 0;  // nesting inside the captured list
};

}  // namespace

RequestJson parse_request_json(const std::string& text, size_t max_values) {
  RequestJson out;
  RequestSax sax(out, max_values);
  json::sax_parse(text, &sax);
  return out;
}

}  // namespace vit::serve::oip
