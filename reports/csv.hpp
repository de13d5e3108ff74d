// CSV helpers shared by the CSV writers (RFC 4180 quoting, and OWASP's guard against formulas).
#pragma once

#include <string>
#include <string_view>

namespace fp8a {

// Whether a spreadsheet would take a text field for a formula (OWASP "CSV Injection"): it starts
// with = + - @, a tab or a carriage return. A field starting with ' is included so the guard
// below can be undone exactly.
inline bool csv_guarded_start(std::string_view s) {
  return !s.empty() && std::string_view("=+-@\t\r'").find(s.front()) != std::string_view::npos;
}

// A text field (a layer name, a path, a note; never a number): one that csv_guarded_start
// gives a leading ' (so "=cmd" reads "'=cmd"; datasets/metrics_table.cpp's reader drops it
// again) and is quoted; any field that holds a comma, quote or line break is quoted, "" for a
// quote. Numeric columns are written bare, so a negative number keeps its '-'.
inline std::string csv_field(const std::string& s) {
  const bool guarded = csv_guarded_start(s);
  if (!guarded && s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = guarded ? "\"'" : "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

// The header line of a column list.
template <std::size_t N>
std::string csv_header(const char* const (&columns)[N]) {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += (i ? "," : "") + std::string(columns[i]);
  return s + "\n";
}

}  // namespace fp8a
