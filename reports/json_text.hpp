// Text in the JSON outputs (recipe.json, summary.json, torchao.json): a JSON string must be valid
// UTF-8 (nlohmann's dump throws type_error.316 on anything else), and a name or a path is bytes.
//   - json_name(): a layer name by core/text.hpp utf8_lossless (lossless: \ as \\, a byte outside
//     UTF-8 as \xNN, every real name unchanged; utf8_lossless_decode reads it back). Control
//     characters stay as they are: JSON writes them as \u00NN itself.
//   - json_document(): the document as text, after every string and key that is still not valid
//     UTF-8 (a reason quoting a name, a path) is written by utf8_lossless too, so no output can fail
//     on a byte.
#pragma once

#include <string>
#include <string_view>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

namespace fp8a {

inline std::string json_name(std::string_view name) { return utf8_lossless(name); }

namespace detail {

inline void make_valid_utf8(nlohmann::ordered_json& j) {
  if (j.is_string()) {
    auto& s = j.get_ref<std::string&>();
    if (!is_valid_utf8(s)) s = utf8_lossless(s);
  } else if (j.is_array()) {
    for (auto& e : j) make_valid_utf8(e);
  } else if (j.is_object()) {
    bool keys_valid = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys_valid = keys_valid && is_valid_utf8(it.key());
      make_valid_utf8(it.value());
    }
    if (keys_valid) return;
    nlohmann::ordered_json fixed = nlohmann::ordered_json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      fixed[is_valid_utf8(it.key()) ? it.key() : utf8_lossless(it.key())] = std::move(it.value());
    j = std::move(fixed);
  }
}

}  // namespace detail

// j.dump(indent) + "\n", every string valid UTF-8 first.
inline std::string json_document(nlohmann::ordered_json j, int indent) {
  detail::make_valid_utf8(j);
  return j.dump(indent) + "\n";
}

}  // namespace fp8a
