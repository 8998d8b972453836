// The route table (serve/router.h): path patterns with captures, 404 / 405 with Allow / query
// refusals from the one table, the error wrapper's statuses; and the model registry's naming
// and loading rules (serve/models/registry.h).
#include "serve/router.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "serve/models/registry.h"

namespace vit::serve {
namespace {

http::Request request(const std::string& method, const std::string& path, http::Fields query = {}) {
  http::Request r;
  r.method = method;
  r.path = path;
  r.target = path;
  r.query = std::move(query);
  return r;
}

std::string header(const http::Response& r, const std::string& name) {
  for (const auto& [key, value] : r.headers) {
    if (key == name) return value;
  }
  return "";
}

Router table() {
  Router router;
  auto echo = [](const Call& call, http::Response& res) {
    res.body = call.capture("model") + "|" + call.capture("version");
  };
  router.add({"GET", "/v2/models/{model}", echo, {}, false, ""});
  router.add({"GET", "/v2/models/{model}/versions/{version}", echo, {}, false, ""});
  router.add({"POST", "/v2/models/{model}/infer", echo, {}, true, "/v2/infer"});
  router.add({"POST", "/v1/predict", echo, {"top_k"}, true, "/v1/predict"});
  router.add({"GET", "/boom", [](const Call&, http::Response&) { fail("test", "bad input"); }, {}, false, ""});
  router.add({"GET",
              "/teapot",
              [](const Call&, http::Response&) {
                throw HttpError{418, "short and stout"};
              },
              {},
              false,
              ""});
  return router;
}

TEST(Router, CapturesPathSegments) {
  const Router router = table();
  const http::Request req = request("GET", "/v2/models/vit_b16/versions/3");
  const Router::Match m = router.match(req);
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(router.run(m, req).body, "vit_b16|3");
  const http::Request plain = request("HEAD", "/v2/models/tiny");  // HEAD goes with GET
  EXPECT_EQ(router.run(router.match(plain), plain).body, "tiny|");
}

TEST(Router, AnUnknownPathIs404NamingTheEndpoints) {
  const Router router = table();
  for (const char* path : {"/nothing", "/v2/models//infer", "/v2/models/a/b/c/d/e/f", "/v1/predict/"}) {
    const Router::Match m = router.match(request("POST", path));
    EXPECT_EQ(m.route, nullptr) << path;
    EXPECT_EQ(m.refusal.status, 404) << path;
    EXPECT_NE(m.refusal.body.find("POST /v2/models/{model}/infer"), std::string::npos) << m.refusal.body;
  }
}

TEST(Router, AnotherMethodIs405WithAllowUnderV1AndV2Alike) {
  const Router router = table();
  const Router::Match infer = router.match(request("GET", "/v2/models/m/infer"));
  ASSERT_EQ(infer.route, nullptr);
  EXPECT_EQ(infer.refusal.status, 405);
  EXPECT_EQ(header(infer.refusal, "Allow"), "POST");
  const Router::Match meta = router.match(request("DELETE", "/v2/models/m"));
  EXPECT_EQ(meta.refusal.status, 405);
  EXPECT_EQ(header(meta.refusal, "Allow"), "GET, HEAD");
  const Router::Match predict = router.match(request("GET", "/v1/predict"));
  EXPECT_EQ(predict.refusal.status, 405);
  EXPECT_NE(predict.refusal.body.find("takes POST (an image or a .npy body)"), std::string::npos);
}

TEST(Router, QueryParametersAreCheckedAgainstTheRoute) {
  const Router router = table();
  const http::Request unknown = request("POST", "/v1/predict", {{"topk", "3"}});
  const http::Response a = router.run(router.match(unknown), unknown);
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("unknown query parameter 'topk' for POST /v1/predict (known: top_k)"), std::string::npos);
  const http::Request twice = request("POST", "/v1/predict", {{"top_k", "3"}, {"top_k", "4"}});
  EXPECT_NE(router.run(router.match(twice), twice).body.find("given twice"), std::string::npos);
  const http::Request v2 = request("POST", "/v2/models/m/infer", {{"x", "1"}});
  EXPECT_NE(router.run(router.match(v2), v2).body.find("it takes none"), std::string::npos);
}

// A GET route that takes no parameters answers whatever query a probe or cache adds.
TEST(Router, ParameterlessGetRoutesIgnoreCacheBusters) {
  const Router router = table();
  const http::Request probe = request("GET", "/v2/models/m", {{"_", "1712345678"}, {"_", "again"}});
  const http::Response a = router.run(router.match(probe), probe);
  EXPECT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.body, "m|");
}

TEST(Router, HandlerFailuresBecomeJsonErrorsWithTheirStatus) {
  const Router router = table();
  const http::Request boom = request("GET", "/boom"), teapot = request("GET", "/teapot");
  const http::Response a = router.run(router.match(boom), boom);
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("[test] bad input"), std::string::npos);
  const http::Response b = router.run(router.match(teapot), teapot);
  EXPECT_EQ(b.status, 418);
  EXPECT_NE(b.body.find("short and stout"), std::string::npos);
}

TEST(Router, OnlyModelRoutesLeaveTheEventLoop) {
  const Router router = table();
  EXPECT_FALSE(router.quick(request("POST", "/v2/models/m/infer")));
  EXPECT_FALSE(router.quick(request("POST", "/v1/predict")));
  EXPECT_TRUE(router.quick(request("GET", "/v2/models/m")));
  EXPECT_TRUE(router.quick(request("GET", "/nowhere")));
}

TEST(ModelRegistry, SkipFailedModelsSkipsBadNamesAndRepeatsToo) {
  // Loading is not reached for a bad name: the loader fails the test if it sees one.
  auto load = [](const std::string& file) -> infer::Predictor {
    ADD_FAILURE() << "loaded " << file;
    throw std::runtime_error("not a model");
  };
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  const std::vector<ModelSpec> specs = {{"with space", "a.safetensors"}, {"caf\xc3\xa9", "b.safetensors"}};
  try {
    load_models(specs, load, /*skip_failed=*/true, warn);
    FAIL() << "no model loaded, yet no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none of the 2 models loaded"), std::string::npos) << e.what();
  }
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("model name 'with space'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("serving without it"), std::string::npos) << warnings[0];
  // Without skip_failed, the first bad name stops the start.
  EXPECT_THROW(load_models(specs, load, /*skip_failed=*/false, warn), Error);
}

TEST(ModelRegistry, SpecsComeFromTheThreeWaysOfNamingModels) {
  const std::vector<ModelSpec> specs = model_specs("dir/a.safetensors", {"b=x/b.pth"}, "");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "a");
  EXPECT_EQ(specs[1].name, "b");
  EXPECT_EQ(specs[1].file, "x/b.pth");
  EXPECT_THROW(model_specs("", {"=b.pth"}, ""), Error);
  EXPECT_THROW(model_specs("", {}, ""), Error);
  EXPECT_THROW(model_specs("", {}, "/no/such/dir"), Error);
}

}  // namespace
}  // namespace vit::serve
