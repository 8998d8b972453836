// The Open Inference request parser (serve/oip/protocol.h, request_json.h): the input's numbers are
// read straight into floats (memory bounded by the body, not ~24x it), every count and size
// checked, the binary data size without wrapping.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/check.h"
#include "serve/oip/protocol.h"
#include "serve/oip/request_json.h"

namespace vit::serve::oip {
namespace {

const ModelShape kShape{3, 2, 2};

std::string error_of(const std::string& body, const std::string& header_length = "") {
  try {
    parse_infer_request(body, header_length, kShape);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OipRequest, NestedDataIsReadIntoFloatsAndLeftNullInTheJson) {
  const RequestJson r = parse_request_json(
      R"({"id": "a", "inputs": [{"name": "input", "data": [[1, 2.5], [-3, 4e0]], "shape": [1, 4]}],
          "outputs": [{"name": "logits", "parameters": {"data": [7]}}]})",
      100);
  EXPECT_TRUE(r.data_read);
  EXPECT_TRUE(r.data_numeric);
  EXPECT_EQ(r.data, (std::vector<float>{1, 2.5f, -3, 4}));
  EXPECT_TRUE(r.json["inputs"][0]["data"].is_null());
  EXPECT_EQ(r.json["inputs"][0]["shape"], nlohmann::json::parse("[1, 4]"));
  // Another "data" elsewhere is an ordinary value.
  EXPECT_EQ(r.json["outputs"][0]["parameters"]["data"], nlohmann::json::parse("[7]"));
  const RequestJson mixed = parse_request_json(R"({"inputs": [{"data": [1, "two", [3, {"x": 4}]]}]})", 100);
  EXPECT_FALSE(mixed.data_numeric);
  const RequestJson second = parse_request_json(R"({"inputs": [{"data": [1]}, {"data": [2, 3]}]})", 100);
  EXPECT_EQ(second.data, std::vector<float>{1});  // only the first input's
  EXPECT_EQ(second.json["inputs"][1]["data"], nlohmann::json::parse("[2, 3]"));
}

TEST(OipRequest, ABatchIsParsedAndItsCountsChecked) {
  const std::string head = R"({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 2, 2], "data": )";
  std::string twelve = "[";
  for (int i = 0; i < 12; ++i) twelve += (i ? "," : "") + std::to_string(i);
  const InferRequest r = parse_infer_request(head + twelve + "]}]}", "", kShape);
  ASSERT_EQ(r.input.numel(), 12);
  EXPECT_EQ(r.input.data<float>()[11], 11.0f);
  EXPECT_EQ(error_of(head + "[1, 2]}]}"), "[infer] input 'input': shape [1,3,2,2] needs 12 values, \"data\" has 2");
  EXPECT_EQ(error_of(head + twelve + ", 12]}]}"),
            "[infer] input 'input': shape [1,3,2,2] needs 12 values, \"data\" has 13");
  EXPECT_EQ(error_of(head + "\"text\"}]}"),
            "[infer] input 'input': \"data\" must hold numbers (a flat or nested list)");
  EXPECT_EQ(error_of(head + "[true]}]}"), "[infer] input 'input': \"data\" must hold numbers (a flat or nested list)");
}

TEST(OipRequest, ABinaryDataSizePast2To64IsNamedAsSuch) {
  // FP64 of 192153584101141163 x 3 x 2 x 2 values (just over 2^61) x 8 bytes wraps past 2^64.
  const std::string json =
      R"({"inputs": [{"name": "input", "datatype": "FP64", "shape": [192153584101141163, 3, 2, 2],)"
      R"( "parameters": {"binary_data_size": 8}}]})";
  EXPECT_EQ(error_of(json + "01234567", std::to_string(json.size())),
            "[infer] input 'input': binary_data_size 8 but shape [192153584101141163,3,2,2] of FP64 needs more than "
            "2^64 bytes");
}

// A 24 MB body of numbers parsed in a child process: its peak memory grows by well under what
// JSON values would cost (~24 bytes a number: ~550 MB), close to the floats themselves.
TEST(OipRequest, AJsonBatchCostsAboutItsFloatsWhileParsed) {
  const int64_t batch = 512;  // 512 x 3 x 64 x 64 = 6.3M values, ~24 MB of text
  const ModelShape shape{3, 64, 64};
  std::string body = R"({"inputs": [{"name": "input", "datatype": "FP32", "shape": [512, 3, 64, 64], "data": [)";
  for (int64_t i = 0; i < batch * 3 * 64 * 64; ++i) body += i ? ",0.123" : "0.123";
  body += "]}]}";
  const pid_t pid = fork();
  if (pid == 0) {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const InferRequest r = parse_infer_request(body, "", shape);
    getrusage(RUSAGE_SELF, &after);
    const long grown_mb = (after.ru_maxrss - before.ru_maxrss) / 1024;
    _exit(r.input.numel() == batch * 3 * 64 * 64 && grown_mb < 150 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "parsing a " << body.size() / 1000000 << " MB body grew the peak memory by 150 MB or more";
}

TEST(OipRequest, Base64AndBytesElementsAreDecodedStrictly) {
  EXPECT_EQ(base64_decode("aGVsbG8=", "x"), "hello");
  EXPECT_EQ(base64_decode("aGVsbG8", "x"), "hello");     // padding optional
  EXPECT_EQ(base64_decode("aGVs\nbG8=", "x"), "hello");  // MIME line breaks skipped
  EXPECT_EQ(base64_decode("-_8=", "x"), base64_decode("+/8=", "x"));
  EXPECT_EQ(base64_decode("", "x"), "");
  auto error = [](const std::string& text) {
    try {
      base64_decode(text, "element 3");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error("aGV*"), "[infer] element 3: not base64 (character '*' at offset 3)");
  EXPECT_EQ(error("aG=Vs"), "[infer] element 3: not base64 ('=' padding before offset 3)");
  EXPECT_EQ(error("aGVsb"), "[infer] element 3: not base64 (its length leaves a lone character)");
  EXPECT_EQ(error(std::string("aG\x01", 3)), "[infer] element 3: not base64 (character 0x01 at offset 2)");

  const InputSpec spec = check_input_spec("image", "BYTES", {2}, kShape);
  const std::string two = std::string("\x02\0\0\0ab\x00\0\0\0", 10);
  const std::vector<std::string> elements = bytes_elements(spec, two.data(), two.size());
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0], "ab");
  EXPECT_EQ(elements[1], "");
  EXPECT_THROW(bytes_elements(spec, two.data(), 6), Error);          // one element of two
  EXPECT_THROW(bytes_elements(spec, "\xff\xff\xff\xff", 4), Error);  // a length past the end
  EXPECT_THROW(check_input_spec("image", "BYTES", {2, 2}, kShape), Error);
  EXPECT_THROW(check_input_spec("pixels", "BYTES", {2}, kShape), Error);
}

}  // namespace
}  // namespace vit::serve::oip
