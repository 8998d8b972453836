// Request kinds (see request.h).
#include "infer/request.h"

#include "core/check.h"

namespace vit::infer {

Pool parse_pool(const std::string& name, const char* op) {
  if (name == "cls") return Pool::Cls;
  if (name == "avg") return Pool::Avg;
  if (name == "tokens") return Pool::Tokens;
  fail(op, "pool must be cls, avg or tokens, got '{}'", name);
}

const char* pool_name(Pool pool) {
  switch (pool) {
    case Pool::Cls:
      return "cls";
    case Pool::Avg:
      return "avg";
    case Pool::Tokens:
      return "tokens";
  }
  return "?";
}

Precision parse_precision(const std::string& name, const char* op) {
  for (const PrecisionName& p : kPrecisionNames) {
    if (name == p.name || name == p.alias) return p.precision;
  }
  fail(op, "precision must be fp32 or bf16, got '{}'", name);
}

const char* precision_name(Precision precision) {
  for (const PrecisionName& p : kPrecisionNames) {
    if (precision == p.precision) return p.name;
  }
  return "?";
}

std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for (const PrecisionName& p : kPrecisionNames) names.emplace_back(p.name);
  return names;
}

std::string request_name(const Request& request) {
  if (request.output == Output::Logits) return "logits";
  return std::string("embed ") + pool_name(request.pool);
}

}  // namespace vit::infer
