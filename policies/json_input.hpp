// A JSON file a person gives fp8-advisor (a policy file, a --price-as shapes file), read as hostile
// input: UTF-8 only, no key twice in one object, no object of over kMaxJsonKeys keys, every value
// checked by type and range as it is read, every failure one line naming the file and the key's
// path ("criteria.mse.max") under the file kind's own error ids.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace fp8a {

using Json = nlohmann::ordered_json;

// Which file it is: the noun every message starts with, its error ids, and where its objects'
// sizes are documented.
struct JsonInputKind {
  const char* noun;      // "policy file"
  InputId invalid;       // not UTF-8, not JSON, not an object
  InputId unknown_key;   // a key the object does not take; an object of over kMaxJsonKeys keys
  InputId wrong_type;    // a value of another type
  InputId out_of_range;  // a value out of range or not one of the names allowed
  InputId repeated_key;  // a key given twice in one object
  const char* size_note; // "a policy's objects have a dozen (docs/POLICY.md)"
};

// The most keys one object may hold: an ordered parse takes time quadratic in them (100,000
// unknown keys: 22 s before refusing).
inline constexpr std::size_t kMaxJsonKeys = 1000;

// The JSON object of `text`; `where` names the file in messages (already quoted).
Json parse_json_input(std::string_view text, const std::string& where, const JsonInputKind& kind);

// Reads one JSON object's keys into a struct, naming each key by its path in messages.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, std::string_view where, const JsonInputKind& kind)
      : object_(object), path_(std::move(path)), where_(where), kind_(kind) {}

  // Every key of the object must be one of `keys`.
  void only(const std::vector<std::string>& keys) const;
  void boolean(const char* key, bool* out) const;
  void text(const char* key, std::string* out) const;
  // A finite number in [lo, hi], or (lo, hi] when lo_open.
  void number(const char* key, double lo, bool lo_open, double hi, double* out) const;
  // Like number(), or null to unset.
  void optional_number(const char* key, double lo, bool lo_open, double hi, std::optional<double>* out) const;
  void integer(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t* out) const;
  // The object under `key` (checked to be an object), or nullptr when absent.
  const Json* object(const char* key) const;
  // The array under `key` (checked: at most max_count integers, each in [lo, hi]), or nullopt
  // when absent.
  std::optional<std::vector<std::int64_t>> integers(const char* key, std::int64_t lo, std::int64_t hi,
                                                    std::size_t max_count) const;
  // The array under `key` (checked to be an array of strings), or nullopt when absent.
  std::optional<std::vector<std::string>> strings(const char* key) const;
  // One of `names`; returns its index, or -1 when the key is absent.
  int choice(const char* key, const std::vector<std::string>& names) const;
  // Like choice(), or null to unset: *out untouched when the key is absent.
  void optional_choice(const char* key, const std::vector<std::string>& names, std::optional<int>* out) const;
  // A reader of the object under `key` (present: check with object() first).
  ObjectReader child(const char* key) const;
  // The key's path from the file's top ("criteria.mse").
  std::string name(std::string_view key) const;
  // "<noun> <where>: ", every message's start.
  std::string prefix() const;
  const JsonInputKind& kind() const { return kind_; }

 private:
  const Json* find(const char* key) const;
  [[noreturn]] void wrong_type(const char* key, const char* expected, const Json& v) const;
  double checked_number(const char* key, const Json& v, double lo, bool lo_open, double hi,
                        const char* or_null = "") const;

  const Json& object_;
  std::string path_;
  std::string_view where_;
  const JsonInputKind& kind_;
};

}  // namespace fp8a
