// The route table and its dispatch (see router.h).
#include "serve/router.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace vit::serve {
namespace {

// Path segments of /a/b/c: {"a", "b", "c"} ("/" is one empty segment).
std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool is_capture(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// Whether a path fits a pattern; its captures go to `captures`. A capture takes one non-empty segment.
bool fits(const std::string& pattern, const std::string& path, http::Fields& captures) {
  const std::vector<std::string> want = segments(pattern), got = segments(path);
  if (want.size() != got.size()) return false;
  http::Fields found;
  for (size_t i = 0; i < want.size(); ++i) {
    if (is_capture(want[i])) {
      if (got[i].empty()) return false;
      found.emplace_back(want[i].substr(1, want[i].size() - 2), got[i]);
    } else if (want[i] != got[i]) {
      return false;
    }
  }
  captures = std::move(found);
  return true;
}

bool method_fits(const std::string& route, const std::string& asked) {
  return asked == route || (asked == "HEAD" && route == "GET");
}

// Unknown or repeated query parameters are refused, naming the known ones. A GET route that takes
// none (health, metrics, metadata, the page) ignores any: probes and caches add cache-busters.
void check_query(const Route& route, const http::Request& request) {
  if (route.method == "GET" && route.query.empty()) return;
  std::vector<std::string> seen;
  for (const auto& [key, value] : request.query) {
    if (std::find(route.query.begin(), route.query.end(), key) == route.query.end()) {
      const std::string known =
          route.query.empty() ? "it takes none" : fmt::format("known: {}", fmt::join(route.query, ", "));
      throw HttpError{400, fmt::format("[serve] unknown query parameter '{}' for {} {} ({})", key, route.method,
                                       route.pattern, known)};
    }
    VIT_CHECK(std::find(seen.begin(), seen.end(), key) == seen.end(), "serve", "query parameter '{}' given twice", key);
    seen.push_back(key);
  }
}

}  // namespace

const std::string& Call::capture(const std::string& name) const {
  static const std::string none;
  for (const auto& [key, value] : captures) {
    if (key == name) return value;
  }
  return none;
}

const std::string* Call::query(const std::string& name) const {
  for (const auto& [key, value] : request.query) {
    if (key == name) return &value;
  }
  return nullptr;
}

void reply(http::Response& response, int status, const nlohmann::json& body) {
  response.status = status;
  response.content_type = "application/json";
  response.body = http::json_text(body);
}

void Router::add(Route route) { routes_.push_back(std::move(route)); }

Router::Match Router::match(const http::Request& request) const {
  Match m;
  std::vector<std::string> allowed;
  for (const Route& r : routes_) {
    http::Fields captures;
    if (!fits(r.pattern, request.path, captures)) continue;
    if (method_fits(r.method, request.method)) {
      m.route = &r;
      m.captures = std::move(captures);
      return m;
    }
    if (std::find(allowed.begin(), allowed.end(), r.method) == allowed.end()) allowed.push_back(r.method);
  }
  if (allowed.empty()) {
    std::vector<std::string> endpoints;
    for (const Route& r : routes_) endpoints.push_back(r.method + " " + r.pattern);
    m.refusal = http::error_response(
        404, fmt::format("no such endpoint {} (the endpoints: {})", request.path, fmt::join(endpoints, ", ")));
    return m;
  }
  if (std::find(allowed.begin(), allowed.end(), "GET") != allowed.end()) allowed.push_back("HEAD");
  const bool post_only = allowed.size() == 1 && allowed[0] == "POST";
  m.refusal = http::error_response(
      405, fmt::format("{} takes {}{}", request.path, fmt::join(allowed, ", "),
                       post_only && request.path.rfind("/v1/", 0) == 0 ? " (an image or a .npy body)" : ""));
  m.refusal.headers.emplace_back("Allow", fmt::format("{}", fmt::join(allowed, ", ")));
  return m;
}

http::Response Router::run(const Match& match, const http::Request& request) const {
  http::Response response;
  try {
    check_query(*match.route, request);
    match.route->handler(Call{request, match.captures}, response);
  } catch (const HttpError& e) {
    response = http::error_response(e.status, e.message);
  } catch (const Error& e) {
    response = http::error_response(400, e.what());
  } catch (const std::bad_alloc&) {
    response = http::error_response(503, "[serve] the server is short of memory for this request; retry");
  } catch (const std::exception& e) {
    response = http::error_response(500, fmt::format("[serve] {}", e.what()));
  }
  return response;
}

bool Router::quick(const http::Request& request) const {
  const Match m = match(request);
  return m.route == nullptr || !m.route->runs_model;
}

}  // namespace vit::serve
