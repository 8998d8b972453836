// Config structs that list their fields once, after gemma.cpp's configs.h: a struct declares
//
//   template <class Visitor>
//   void visit_fields(Visitor& visit) {
//     visit("image_size", image_size);
//     visit("mlp_dim", mlp_dim, Presence::Optional);
//     ...
//   }
//
// and fields_to_json / fields_from_json below turn it into a JSON object and back, key by key in
// the order listed. A field whose type has visit_fields itself becomes a nested object.
//   Required: a reader needs the key (nlohmann's "key 'image_size' not found" otherwise).
//   Optional: a missing key keeps the field's current value, i.e. the struct's default.
// Every visitor takes (const char* key, T& field, Presence = Presence::Required).
//
// core links no JSON library: the JSON type is a template parameter (nlohmann::ordered_json to
// write the keys in listed order, nlohmann::json for sorted keys), instantiated by the layers that
// link nlohmann (model, io, train). Readers let the library's exceptions through, so each caller
// wraps them in its own "[op] ..." message.
#pragma once

#include <type_traits>

namespace vit {

enum class Presence { Required, Optional };

namespace detail {
struct AnyFieldVisitor {
  template <class T>
  void operator()(const char*, T&, Presence = Presence::Required) {}
};
}  // namespace detail

template <class T>
concept HasFields = requires(T& object, detail::AnyFieldVisitor& visit) {
  object.visit_fields(visit);
};

// Calls visit(key, field[, presence]) for every field of a const object. The visitor gets
// non-const references (visit_fields has one signature, as in gemma.cpp) and must only read.
template <HasFields T, class Visitor>
void visit_fields_of(const T& object, Visitor& visit) {
  const_cast<T&>(object).visit_fields(visit);
}

// The fields of `object` as a JSON object.
template <class Json, HasFields T>
Json fields_to_json(const T& object) {
  Json json = Json::object();
  auto write = [&json](const char* key, const auto& value, Presence = Presence::Required) {
    if constexpr (HasFields<std::decay_t<decltype(value)>>) {
      json[key] = fields_to_json<Json>(value);
    } else {
      json[key] = value;
    }
  };
  visit_fields_of(object, write);
  return json;
}

// Reads the fields of `object` from a JSON object (Required: json.at(key), Optional:
// json.value(key, current value)); throws the JSON library's exception on a missing required
// key or a value of the wrong type.
template <class Json, HasFields T>
void fields_from_json(const Json& json, T& object) {
  auto read = [&json](const char* key, auto& value, Presence presence = Presence::Required) {
    using Value = std::decay_t<decltype(value)>;
    if constexpr (HasFields<Value>) {
      if (presence == Presence::Required || json.contains(key)) fields_from_json(json.at(key), value);
    } else if (presence == Presence::Optional) {
      value = json.value(key, value);
    } else {
      value = json.at(key).template get<Value>();
    }
  };
  object.visit_fields(read);
}

}  // namespace vit
