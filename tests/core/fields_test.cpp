// core/fields.h: a struct listing its fields once in visit_fields becomes JSON and back, in
// listed order (ordered_json) or sorted (json), nested structs as objects, Optional fields
// keeping their defaults when absent and Required ones refused when absent.
#include "core/fields.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace vit {
namespace {

struct Inner {
  int64_t count = 1;
  bool on = false;
  template <class Visitor>
  void visit_fields(Visitor& visit) {
    visit("count", count);
    visit("on", on);
  }
};

struct Outer {
  std::string name = "n";
  double rate = 0.5;
  uint64_t seed = 7;
  Inner inner;
  Inner extra;
  int64_t later = 3;  // a field added after files were written
  template <class Visitor>
  void visit_fields(Visitor& visit) {
    visit("name", name);
    visit("rate", rate);
    visit("seed", seed);
    visit("inner", inner);
    visit("extra", extra, Presence::Optional);
    visit("later", later, Presence::Optional);
  }
};

static_assert(HasFields<Outer> && HasFields<Inner> && !HasFields<std::string>);

TEST(Fields, WritesInListedOrderOrSorted) {
  const Outer o;  // a const object: writing only reads
  EXPECT_EQ(fields_to_json<nlohmann::ordered_json>(o).dump(),
            R"({"name":"n","rate":0.5,"seed":7,"inner":{"count":1,"on":false},"extra":{"count":1,"on":false},)"
            R"("later":3})");
  EXPECT_EQ(fields_to_json<nlohmann::json>(o).dump(),
            R"({"extra":{"count":1,"on":false},"inner":{"count":1,"on":false},"later":3,"name":"n","rate":0.5,)"
            R"("seed":7})");
}

TEST(Fields, ReadsBackRequiredAndOptional) {
  Outer o;
  o.name = "m";
  o.rate = 1e-6;
  o.seed = 18446744073709551615ull;
  o.inner = {5, true};
  o.extra = {6, true};
  o.later = -2;
  Outer back;
  fields_from_json(nlohmann::json::parse(fields_to_json<nlohmann::ordered_json>(o).dump()), back);
  EXPECT_EQ(fields_to_json<nlohmann::ordered_json>(back), fields_to_json<nlohmann::ordered_json>(o));
  // Optional keys absent: the defaults stay.
  Outer old;
  fields_from_json(nlohmann::json::parse(R"({"name":"a","rate":2,"seed":1,"inner":{"count":4,"on":true}})"), old);
  EXPECT_EQ(old.name, "a");
  EXPECT_EQ(old.rate, 2.0);
  EXPECT_EQ(old.inner.count, 4);
  EXPECT_EQ(old.extra.count, 1);
  EXPECT_EQ(old.later, 3);
}

TEST(Fields, RequiredKeysAndTypesAreChecked) {
  auto error_of = [](const std::string& text) -> std::string {
    Outer o;
    try {
      fields_from_json(nlohmann::json::parse(text), o);
    } catch (const nlohmann::json::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of(R"({"name":"a","rate":2,"seed":1})"), "[json.exception.out_of_range.403] key 'inner' not found");
  EXPECT_EQ(error_of(R"({"name":"a","rate":2,"seed":1,"inner":{"on":true}})"),
            "[json.exception.out_of_range.403] key 'count' not found");
  EXPECT_EQ(error_of(R"({"name":"a","rate":"x","seed":1,"inner":{"count":4,"on":true}})"),
            "[json.exception.type_error.302] type must be number, but is string");
  EXPECT_EQ(error_of(R"({"name":"a","rate":2,"seed":1,"inner":{"count":4,"on":true},"later":"x"})"),
            "[json.exception.type_error.302] type must be number, but is string");
  EXPECT_EQ(error_of(R"({"name":"a","rate":2,"seed":1,"inner":{"count":4,"on":true},"extra":{}})"),
            "[json.exception.out_of_range.403] key 'count' not found");
  EXPECT_EQ(error_of(R"({"name":"a","rate":2,"seed":1,"inner":{"count":4,"on":true}})"), "(no error)");
}

}  // namespace
}  // namespace vit
