#include "core/te_version.hpp"

#include <charconv>

namespace fp8a {

namespace {

// A decimal number of at most 3 digits at the front of `s`, consumed.
std::optional<int> take_number(std::string_view* s) {
  int v = 0;
  const char* end = s->data() + s->size();
  const auto [p, ec] = std::from_chars(s->data(), end, v);
  if (ec != std::errc() || p == s->data() || p - s->data() > 3) return std::nullopt;
  s->remove_prefix(static_cast<std::size_t>(p - s->data()));
  return v;
}

}  // namespace

std::string te_version_text(TeVersion v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

std::optional<TeVersion> parse_te_version(std::string_view text, std::string* why) {
  const std::string range = te_version_text(kTeOldest) + " to " + te_version_text(kTeNewest);
  std::string_view s = text;
  std::optional<int> major, minor;
  bool ok = (major = take_number(&s)).has_value() && s.starts_with('.');
  if (ok) {
    s.remove_prefix(1);
    ok = (minor = take_number(&s)).has_value();
  }
  if (ok && s.starts_with('.')) {
    s.remove_prefix(1);
    ok = take_number(&s).has_value();
  }
  if (!ok || !s.empty()) {
    *why = "expected a Transformer Engine release X.Y or X.Y.Z, from " + range;
    return std::nullopt;
  }
  const TeVersion v{*major, *minor};
  if (v < kTeOldest || v > kTeNewest) {
    *why = "fp8-advisor writes files for Transformer Engine " + range;
    return std::nullopt;
  }
  return v;
}

}  // namespace fp8a
