// One field table per JSON-serialised struct: each row names a JSON key and
// says how the member is written and read, so that a writer and a reader
// walk the same list and no field can be written without being read (or
// read under another name).
//
// Reading rules (the model files' safety rules; they are untrusted input):
//   * Types are nlohmann's: get<T>() of a mistyped value throws
//     nlohmann::json::type_error (callers turn it into kCorrupt naming the
//     file); a row's own checks return a Status naming `source` and the key.
//   * kRequired: an absent key throws nlohmann's out_of_range ("key 'x' not
//     found"), exactly as j.at("x") does. kOptional: an absent key leaves
//     the member as the struct initialised it (its default).
//   * A row with a `when` predicate is written only when it holds, and read
//     only when it holds of the fields read before it (table order): e.g.
//     "epsilon" only for a model trained with "dp": true. A row with an
//     `omit` predicate is left out of the output when it holds (an optional
//     value that is not there); reading is unaffected.
//   * Keys the table does not name are ignored.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "util/status.h"

namespace ds {

enum class JsonNeed { kRequired, kOptional };

template <typename S>
struct JsonField {
  const char* key;
  JsonNeed need = JsonNeed::kRequired;
  std::function<nlohmann::json(const S&)> put;
  std::function<Status(const nlohmann::json&, S*, const std::string& source)> get;
  std::function<bool(const S&)> when = nullptr;  // null: always
  std::function<bool(const S&)> omit = nullptr;  // null: never
};

template <typename S>
using JsonFields = std::vector<JsonField<S>>;

// A member written as it is and read with get<T>().
template <typename S, typename T>
JsonField<S> JsonMember(const char* key, T S::*member, JsonNeed need = JsonNeed::kRequired,
                        std::type_identity_t<std::function<bool(const S&)>> when = nullptr) {
  return {key, need, [member](const S& s) { return nlohmann::json(s.*member); },
          [member](const nlohmann::json& j, S* s, const std::string&) {
            s->*member = j.get<T>();
            return Status::Ok();
          },
          std::move(when)};
}

// An std::optional member: left out while empty, read when present (to /
// from convert the value).
template <typename S, typename T>
JsonField<S> JsonOptional(const char* key, std::optional<T> S::*member,
                          std::type_identity_t<std::function<nlohmann::json(const T&)>> to,
                          std::type_identity_t<std::function<T(const nlohmann::json&)>> from) {
  JsonField<S> f{key, JsonNeed::kOptional, [member, to](const S& s) { return to(*(s.*member)); },
                 [member, from](const nlohmann::json& j, S* s, const std::string&) {
                   s->*member = from(j);
                   return Status::Ok();
                 }};
  f.omit = [member](const S& s) { return !(s.*member).has_value(); };
  return f;
}

// Writes the table's fields of s into the object *j.
template <typename S>
void WriteJsonFields(const S& s, const JsonFields<S>& fields, nlohmann::json* j) {
  if (!j->is_object()) *j = nlohmann::json::object();
  for (const auto& f : fields)
    if ((!f.when || f.when(s)) && (!f.omit || !f.omit(s))) (*j)[f.key] = f.put(s);
}

template <typename S>
nlohmann::json ToJsonFields(const S& s, const JsonFields<S>& fields) {
  nlohmann::json j = nlohmann::json::object();
  WriteJsonFields(s, fields, &j);
  return j;
}

// Reads the table's fields from j into *s, in table order (see the rules
// above); throws nlohmann::json::exception for a mistyped or missing value.
template <typename S>
Status ReadJsonFields(const nlohmann::json& j, const JsonFields<S>& fields, S* s,
                      const std::string& source) {
  for (const auto& f : fields) {
    if (f.when && !f.when(*s)) continue;
    auto it = j.is_object() ? j.find(f.key) : j.end();
    if (it == j.end()) {
      if (f.need == JsonNeed::kRequired) (void)j.at(f.key);  // throws, naming the key
      continue;
    }
    DS_RETURN_IF_ERROR(f.get(*it, s, source));
  }
  return Status::Ok();
}

}  // namespace ds
