// The one route table of `vit serve`: every endpoint (/v1, /v2, the page, health, metrics) is a
// method, a path pattern whose `{name}` segments capture (/v2/models/{model}/versions/{version}/infer),
// the query parameters it takes, and whether it runs a model (on a worker, counted in /metrics) or
// is cheap (answered on the event loop, so health and metrics answer while every worker waits).
// Dispatch refuses what matches nothing: 404 naming the endpoints for an unknown path, 405 with
// Allow for a known path and another method (HEAD goes with GET), 400 for an unknown or repeated
// query parameter. A handler throws HttpError for a status of its own; every other failure
// becomes a JSON error: vit::Error 400, memory exhausted 503, anything else 500.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "serve/http/message.h"

namespace vit::serve {

// An error with its HTTP status, thrown by handlers.
struct HttpError {
  int status;
  std::string message;
};

// A request as its handler sees it: the request and what the route's pattern captured.
struct Call {
  const http::Request& request;
  http::Fields captures;  // {"model", "vit_b16"}, {"version", "1"}
  // A captured segment ("" when the pattern has no such name).
  const std::string& capture(const std::string& name) const;
  // A query parameter's value, or nullptr.
  const std::string* query(const std::string& name) const;
};

using RouteHandler = std::function<void(const Call&, http::Response&)>;

struct Route {
  std::string method;   // "GET" (answers HEAD too) or "POST"
  std::string pattern;  // "/v1/predict", "/v2/models/{model}/infer"
  RouteHandler handler;
  std::vector<std::string> query;  // the query parameters it takes
  bool runs_model = false;
  std::string metrics_name;  // its endpoint label in /metrics ("/v1/predict", "/v2/infer")
};

class Router {
 public:
  void add(Route route);
  const std::vector<Route>& routes() const { return routes_; }

  // The route a request takes with its captures, or (route == nullptr) the refusal to answer.
  struct Match {
    const Route* route = nullptr;
    http::Fields captures;
    http::Response refusal;
  };
  Match match(const http::Request& request) const;
  // Runs a matched route's handler behind the error wrapper (the query checked first).
  http::Response run(const Match& match, const http::Request& request) const;
  // Whether a request is answered on the event loop: it runs no model (or matches nothing).
  bool quick(const http::Request& request) const;

 private:
  std::vector<Route> routes_;
};

// A JSON answer.
void reply(http::Response& response, int status, const nlohmann::json& body);

}  // namespace vit::serve
