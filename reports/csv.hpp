// CSV helpers shared by the CSV writers (RFC 4180 quoting).
#pragma once

#include <string>

namespace fp8a {

// Quotes a field that holds a comma, quote or line break; user data (layer names, paths) may.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
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
