// A layer name chosen byte by byte, through `fp8-advisor run` (and `compare` of the run with
// itself) on a one-layer capture, and every output read back by a strict parser: the check that
// tests/cli/test_hostile_names.cpp runs on the names and tests/fuzz/fuzz_names.cpp on
// random ones.
//
// The capture: <name>.activation [32, 64] and <name>.weight [32, 64], F32, step 1. A name that
// is valid UTF-8 goes into a safetensors header (JSON: a control character as \u00NN, a NUL
// too); one that is not goes into .npz member names (any byte but '/' and NUL).
//
// What comes back, in the forms docs/SECURITY.md documents, decoded here by
// code of the test's own (never the writer's):
//   recipe.json, summary.json, torchao.json  nlohmann parse; the name, \\ and \xNN undone
//   nvdlfw_inspect.yaml                      yaml-cpp parse; one section with exactly its keys;
//                                            the regex, unescaped, is ^name$; the comment line,
//                                            unescaped, names it
//   megatron_args.txt                        every line a comment or a flag
//   megatron_bridge.yaml                     yaml-cpp parse; mixed_precision, model, tensor_inspect only
//   te_precision_config.yaml                 yaml-cpp parse; configs and matchers only, one
//                                            matcher with its four keys; its glob matches name
//   metrics.csv, compare.csv                 RFC 4180, strictly; the layer field is the name, with
//                                            a leading ' when it starts with = + - @ tab CR or '
//   report.md, compare.md                    no control byte, no tag but <br>, every table row
//                                            with its header's cell count; the layer cell,
//                                            unescaped, is the name (line breaks as \n)
//   report.html, compare.html                well-formed (markup_check.hpp), no control byte but
//                                            \n and \t, valid UTF-8, no <script
//   stdout                                   no control byte but \n and \t, valid UTF-8
// `compare` of the run with itself matches every row by the name it reads back from metrics.csv.
#pragma once

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_support.hpp"
#include "reports/markup_check.hpp"

namespace fp8a::name_test {

using cli_test::fs::path;

// ---- the capture ------------------------------------------------------------------------------

constexpr std::int64_t kRows = 32, kCols = 64;

// X [kRows, kCols]: three in four tokens so small that FP8 flushes them whole (the share of
// tokens that fails the underflow criterion: current scaling's fprop goes to BF16); W [kRows,
// kCols] small and Gaussian-like; dY [kRows, kRows] the same but zero on X's large tokens, so dW
// comes from the flushed tokens alone and every recipe's wgrad loses its direction (cos 0: to
// BF16), while block scaling's fprop and dgrad stay FP8: a plan with a fallback GEMM and FP8
// ones. A fixed LCG, so every run is the same.
enum class Role { kActivation, kWeight, kGradient };
inline std::vector<float> operand(Role role) {
  const std::int64_t cols = role == Role::kGradient ? kRows : kCols;
  std::vector<float> v(static_cast<std::size_t>(kRows * cols));
  std::uint32_t state = role == Role::kActivation ? 12345u : role == Role::kWeight ? 777u : 4242u;
  for (std::size_t i = 0; i < v.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
    v[i] = role == Role::kActivation ? (i / kCols % 4 != 0 ? u * 1e-30f : u * 1e4f)
           : role == Role::kWeight   ? u * 0.05f
                                     : (i / kRows % 4 != 0 ? u * 1e-3f : 0.0f);
  }
  return v;
}

inline std::string float_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// A test-side UTF-8 check (RFC 3629).
inline bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    std::uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

// Whether a capture can carry the name: safetensors for valid UTF-8, else .npz member names
// (any byte but '/' and NUL; the file's own path stays plain).
inline bool capturable(const std::string& name) {
  if (name.empty()) return false;
  if (valid_utf8(name)) return true;
  return name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

inline std::string npy_bytes(const std::vector<float>& v, std::int64_t cols = kCols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(kRows) + ", " +
                       std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + float_bytes(v);
}

inline void put_le(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}

inline std::uint32_t crc32(std::string_view s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (char ch : s) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A zip of stored members (APPNOTE.TXT 4.3: local headers, central directory, end record), as
// np.savez writes an .npz.
inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, directory;
  for (const auto& [name, data] : members) {
    const std::uint64_t offset = out.size();
    const std::uint32_t crc = crc32(data);
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);
    put_le(out, 0, 2 * 3);  // flags, method (stored), time
    put_le(out, 0, 2);      // date
    put_le(out, crc, 4);
    put_le(out, data.size(), 4);
    put_le(out, data.size(), 4);
    put_le(out, name.size(), 2);
    put_le(out, 0, 2);
    out += name + data;
    put_le(directory, 0x02014b50, 4);
    put_le(directory, 20, 2);
    put_le(directory, 20, 2);
    put_le(directory, 0, 2 * 4);  // flags, method, time, date
    put_le(directory, crc, 4);
    put_le(directory, data.size(), 4);
    put_le(directory, data.size(), 4);
    put_le(directory, name.size(), 2);
    put_le(directory, 0, 2 * 4);  // extra, comment, disk, internal attributes
    put_le(directory, 0, 4);      // external attributes
    put_le(directory, offset, 4);
    directory += name;
  }
  const std::uint64_t at = out.size();
  out += directory;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 2 * 2);
  put_le(out, members.size(), 2);
  put_le(out, members.size(), 2);
  put_le(out, directory.size(), 4);
  put_le(out, at, 4);
  put_le(out, 0, 2);
  return out;
}

// Writes the capture into dir; returns what --capture takes.
inline path write_capture(const path& dir, const std::string& name) {
  const std::string act = float_bytes(operand(Role::kActivation)), w = float_bytes(operand(Role::kWeight)),
                    dy = float_bytes(operand(Role::kGradient));
  if (!valid_utf8(name)) {
    cli_test::fs::create_directories(dir);
    cli_test::write_bytes(dir / "step_000001.npz",
                          stored_zip({{name + ".activation.npy", npy_bytes(operand(Role::kActivation))},
                                      {name + ".weight.npy", npy_bytes(operand(Role::kWeight))},
                                      {name + ".gradient.npy", npy_bytes(operand(Role::kGradient), kRows)}}));
    return dir;
  }
  nlohmann::json h;
  h[name + ".activation"] = {{"dtype", "F32"}, {"shape", {kRows, kCols}}, {"data_offsets", {0, act.size()}}};
  h[name + ".weight"] = {{"dtype", "F32"}, {"shape", {kRows, kCols}},
                         {"data_offsets", {act.size(), act.size() + w.size()}}};
  h[name + ".gradient"] = {{"dtype", "F32"}, {"shape", {kRows, kRows}},
                           {"data_offsets", {act.size() + w.size(), act.size() + w.size() + dy.size()}}};
  std::string text = h.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  cli_test::fs::create_directories(dir);
  cli_test::write_bytes(dir / "step_1.safetensors", bytes + text + act + w + dy);
  return dir;
}

// ---- test-side decoders of the documented forms -----------------------------------------------

inline int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// \\ \n \r \t \xNN (visible text) back to bytes; `json_only`: \\ and \xNN only (JSON names).
inline std::string unescape(std::string_view s, bool json_only = false) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[i + 1];
    if (e == '\\') out += '\\';
    else if (!json_only && e == 'n') out += '\n';
    else if (!json_only && e == 'r') out += '\r';
    else if (!json_only && e == 't') out += '\t';
    else if (e == 'x' && i + 3 < s.size() && hex_digit(s[i + 2]) >= 0 && hex_digit(s[i + 3]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 2]) * 16 + hex_digit(s[i + 3]));
      i += 2;
    } else {
      FAIL("a lone backslash escape at " << i << " in " << s);
    }
    ++i;
  }
  return out;
}

// A Python re pattern of the form python_suffix_regex writes back to the name it matches: (^|\.)
// and $ removed, \xNN a byte, \uNNNN a character, \c the character c.
inline std::string unregex(std::string_view p) {
  REQUIRE(p.size() >= 7);
  REQUIRE(p.starts_with("(^|\\.)"));
  REQUIRE(p.back() == '$');
  p = p.substr(6, p.size() - 7);
  std::string out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\') {
      // An unescaped metacharacter would match something else.
      CHECK(std::string_view(".^$*+?()[]{}|").find(p[i]) == std::string_view::npos);
      out += p[i];
      continue;
    }
    REQUIRE(i + 1 < p.size());
    const char e = p[i + 1];
    if (e == 'x') {
      REQUIRE(i + 3 < p.size());
      out += static_cast<char>(hex_digit(p[i + 2]) * 16 + hex_digit(p[i + 3]));
      i += 3;
    } else if (e == 'u') {
      REQUIRE(i + 5 < p.size());
      std::uint32_t cp = 0;
      for (int k = 2; k < 6; ++k) cp = cp * 16 + static_cast<std::uint32_t>(hex_digit(p[i + static_cast<std::size_t>(k)]));
      append_utf8(out, cp);
      i += 5;
    } else {
      CHECK(std::string_view(".^$*+?()[]{}|\\").find(e) != std::string_view::npos);
      out += e;
      ++i;
    }
  }
  return out;
}

// Length of the character at s[i]: 1 for ASCII, a UTF-8 character's, or 1 for a byte outside one.
inline std::size_t char_length(std::string_view s, std::size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return 1;
  for (std::size_t n = 2; n <= 4; ++n)
    if (i + n <= s.size() && valid_utf8(s.substr(i, n))) return n;
  return 1;
}

// fnmatch of the glob against the whole name (fnmatch_exact_glob's form): [c] is c, ? one character.
inline bool glob_matches(std::string_view glob, std::string_view name) {
  std::size_t g = 0, n = 0;
  while (g < glob.size()) {
    if (n >= name.size()) return false;
    if (glob[g] == '?') {
      n += char_length(name, n);
      ++g;
    } else if (glob[g] == '[') {
      if (g + 2 >= glob.size() || glob[g + 2] != ']' || name[n] != glob[g + 1]) return false;
      g += 3;
      ++n;
    } else {
      if (glob[g] == '*' || glob[g] != name[n]) return false;
      ++g;
      ++n;
    }
  }
  return n == name.size();
}

// RFC 4180, strictly: a quoted field ends at a quote followed by , or \n or the end; an unquoted
// field holds no quote, CR or LF; every record ends in \n.
inline std::vector<std::vector<std::string>> strict_csv(std::string_view t) {
  std::vector<std::vector<std::string>> rows;
  std::size_t i = 0;
  while (i < t.size()) {
    std::vector<std::string> row(1);
    while (true) {
      REQUIRE(i < t.size());
      if (t[i] == '"') {
        for (++i;; ++i) {
          REQUIRE_MESSAGE(i < t.size(), "unterminated quoted field");
          if (t[i] == '"' && i + 1 < t.size() && t[i + 1] == '"') {
            row.back() += '"';
            ++i;
          } else if (t[i] == '"') {
            ++i;
            break;
          } else {
            row.back() += t[i];
          }
        }
        REQUIRE_MESSAGE((i < t.size() && (t[i] == ',' || t[i] == '\n')), "a byte after a closing quote");
      } else {
        while (i < t.size() && t[i] != ',' && t[i] != '\n') {
          REQUIRE_MESSAGE((t[i] != '"' && t[i] != '\r'), "a quote or CR in an unquoted field");
          row.back() += t[i++];
        }
        REQUIRE_MESSAGE(i < t.size(), "a record without its \\n");
      }
      if (t[i++] == '\n') break;
      row.emplace_back();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The documented CSV form of a text field.
inline std::string csv_form(const std::string& name) {
  return !name.empty() && std::string_view("=+-@\t\r'").find(name.front()) != std::string_view::npos ? "'" + name
                                                                                                        : name;
}

// A Markdown table row split into its cells at the unescaped |.
inline std::vector<std::string> md_cells(std::string_view line) {
  std::vector<std::string> cells;
  std::string cur;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      cur += line.substr(i, 2);
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(cur.size() >= 2 ? cur.substr(1, cur.size() - 2) : cur);  // the padding spaces
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return cells;
}

// A Markdown text cell back to the text it shows: &lt; &amp; <br>, then \c, then visible text.
inline std::string unmarkdown(std::string_view cell) {
  std::string s;
  for (std::size_t i = 0; i < cell.size(); ++i) {
    if (cell.substr(i, 4) == "&lt;") {
      s += '<';
      i += 3;
    } else if (cell.substr(i, 5) == "&amp;") {
      s += '&';
      i += 4;
    } else if (cell.substr(i, 4) == "<br>") {
      s += "\\n";  // a visible \n, decoded below
      i += 3;
    } else if (cell[i] == '\\' && i + 1 < cell.size()) {
      CHECK(std::string_view("\\`*_[]|~#>-+=").find(cell[i + 1]) != std::string_view::npos);
      s += cell[i + 1];
      ++i;
    } else {
      CHECK(std::string_view("`*[]|~<").find(cell[i]) == std::string_view::npos);
      CHECK((cell[i] != '_' || (i > 0 && i + 1 < cell.size() && std::isalnum(static_cast<unsigned char>(cell[i - 1])) &&
                                std::isalnum(static_cast<unsigned char>(cell[i + 1])))));
      s += cell[i];
    }
  }
  return unescape(s);
}

// The name with its line breaks as Markdown keeps them (\r\n, \r -> \n).
inline std::string md_lines(const std::string& name) {
  std::string s;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '\r' && i + 1 < name.size() && name[i + 1] == '\n') continue;
    s += name[i] == '\r' ? '\n' : name[i];
  }
  return s;
}

// ---- the checks ---------------------------------------------------------------------------------

inline void check_no_controls(const std::string& what, std::string_view text) {
  INFO(what);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) FAIL("control byte " << int(c) << " at " << i);
  }
  CHECK(valid_utf8(text));
}

// `layer_table_head`: how the table with the layer column `layer_column` starts.
inline void check_markdown(const std::string& what, const std::string& md, const std::string& name,
                           const char* layer_table_head, std::size_t layer_column) {
  INFO(what);
  check_no_controls(what, md);
  // No tag but <br>.
  for (std::size_t at = md.find('<'); at != std::string::npos; at = md.find('<', at + 1))
    CHECK(md.compare(at, 4, "<br>") == 0);
  std::size_t columns = 0;
  bool in_layer_table = false;
  int layer_rows = 0;
  std::size_t start = 0;
  while (start < md.size()) {
    const std::size_t end = md.find('\n', start);
    const std::string line = md.substr(start, end - start);
    start = end == std::string::npos ? md.size() : end + 1;
    if (!line.starts_with("|")) {
      columns = 0;
      in_layer_table = false;
      continue;
    }
    const auto cells = md_cells(line);
    if (columns == 0) {
      columns = cells.size();
      in_layer_table = line.starts_with(layer_table_head);
      continue;
    }
    CHECK(cells.size() == columns);
    if (!in_layer_table || line.starts_with("| ---")) continue;
    CHECK(unmarkdown(cells.at(layer_column)) == md_lines(name));
    ++layer_rows;
  }
  CHECK(layer_rows > 0);
}

inline void check_html(const std::string& what, const std::string& page) {
  INFO(what);
  CHECK(test::markup_error(page) == "");
  check_no_controls(what, page);
  std::string lower = page;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  CHECK(lower.find("<script") == std::string::npos);
}

// The keys of a YAML map, in order.
inline std::vector<std::string> yaml_keys(const YAML::Node& m) {
  REQUIRE(m.IsMap());
  std::vector<std::string> k;
  for (const auto& kv : m) k.push_back(kv.first.as<std::string>());
  return k;
}

inline void check_outputs(const path& out, const std::string& name) {
  const auto file = [&](const char* f) { return cli_test::slurp(out / f); };
  // JSON: parses, the layer comes back.
  {
    const auto r = nlohmann::json::parse(file("recipe.json"));
    REQUIRE(r.at("layers").size() == 1);
    CHECK(unescape(r.at("layers").at(0).at("layer").get<std::string>(), true) == name);
    const auto s = nlohmann::json::parse(file("summary.json"));
    REQUIRE(s.at("layers").size() >= 1);
    for (const auto& l : s.at("layers")) CHECK(unescape(l.at("layer").get<std::string>(), true) == name);
    const auto t = nlohmann::json::parse(file("torchao.json"));
    for (const auto& f : t.at("filter_fqns")) CHECK(unescape(f.get<std::string>(), true) == name);
  }
  // nvdlfw_inspect.yaml: one section, its keys only; the regex is the name's.
  {
    const std::string text = file("nvdlfw_inspect.yaml");
    check_no_controls("nvdlfw_inspect.yaml", text);
    const YAML::Node y = YAML::Load(text);
    const auto top = yaml_keys(y);
    REQUIRE(top.size() == 1);
    const YAML::Node section = y[top[0]];
    CHECK(yaml_keys(section) == std::vector<std::string>{"enabled", "layers", "transformer_engine"});
    CHECK(yaml_keys(section["layers"]) == std::vector<std::string>{"layer_name_regex_pattern"});
    // A plan with no FP8 GEMM: one section for every layer, the captured ones listed in comments.
    const bool all_bf16 = top[0] == "every_layer_bf16";
    if (all_bf16) {
      CHECK(section["layers"]["layer_name_regex_pattern"].as<std::string>() == ".*");
    } else {
      CHECK(top[0].starts_with("layer_"));
      CHECK(unregex(section["layers"]["layer_name_regex_pattern"].as<std::string>()) == name);
    }
    // The comment that names the layer: "# <layer> -> <nvdlfw name> (note)".
    const std::size_t at =
        text.find("\n# ", text.find(all_bf16 ? "only under FP8 autocast." : "the captured layers only."));
    REQUIRE(at != std::string::npos);
    const std::string line = text.substr(at + 3, text.find('\n', at + 1) - at - 3);
    CHECK(unescape(line).starts_with(name + " -> " + name + " ("));
  }
  // te_precision_config.yaml: configs and matchers; one matcher for the layer (and "rest").
  {
    const std::string text = file("te_precision_config.yaml");
    check_no_controls("te_precision_config.yaml", text);
    const YAML::Node y = YAML::Load(text);
    CHECK(yaml_keys(y) == std::vector<std::string>{"configs", "matchers"});
    int layer_matchers = 0;
    bool all_bf16 = false;  // a plan with no FP8 GEMM: "*" -> bf16, the captured modules in comments
    for (const auto& kv : y["matchers"]) {
      CHECK(yaml_keys(kv.second) == std::vector<std::string>{"config", "type", "pattern", "enabled"});
      if (kv.first.as<std::string>() == "rest") continue;
      if (kv.first.as<std::string>() == "every_module_bf16") {
        all_bf16 = true;
        CHECK(kv.second["pattern"].as<std::string>() == "*");
        continue;
      }
      ++layer_matchers;
      // A byte outside UTF-8, or a noncharacter (U+FFFE, U+FFFF: YAML readers refuse them), is
      // U+FFFD in the pattern (fnmatch_exact_glob): no glob selects such a name.
      const std::string pattern = kv.second["pattern"].as<std::string>();
      if (pattern.find("\xEF\xBF\xBD") == std::string::npos || name.find("\xEF\xBF\xBD") != std::string::npos)
        CHECK(glob_matches(pattern, name));
    }
    if (all_bf16) {
      const std::size_t at = text.find("\n# ", text.find("the modules never captured too."));
      REQUIRE(at != std::string::npos);
      const std::string line = text.substr(at + 3, text.find('\n', at + 1) - at - 3);
      CHECK(unescape(line).starts_with(name + " -> "));
    }
    CHECK(layer_matchers == (all_bf16 ? 0 : 1));
  }
  // megatron_args.txt: comments and Megatron's flags, one per line; megatron_bridge.yaml: Bridge's
  // three sections, the name in comments only.
  {
    const std::string args = file("megatron_args.txt");
    check_no_controls("megatron_args.txt", args);
    std::istringstream lines(args);
    for (std::string line; std::getline(lines, line);) {
      INFO(line);
      CHECK((line.starts_with("# ") || line.starts_with("--")));
    }
    const std::string bridge = file("megatron_bridge.yaml");
    check_no_controls("megatron_bridge.yaml", bridge);
    const auto keys = yaml_keys(YAML::Load(bridge));
    CHECK(!keys.empty());
    for (const std::string& k : keys) CHECK((k == "mixed_precision" || k == "model" || k == "tensor_inspect"));
  }
  // metrics.csv: strict CSV, the header's field count, the name in its CSV form.
  {
    const auto rows = strict_csv(file("metrics.csv"));
    REQUIRE(rows.size() > 1);
    const auto layer = std::find(rows[0].begin(), rows[0].end(), "layer") - rows[0].begin();
    for (std::size_t r = 1; r < rows.size(); ++r) {
      REQUIRE(rows[r].size() == rows[0].size());
      CHECK(rows[r][static_cast<std::size_t>(layer)] == csv_form(name));
    }
  }
  check_markdown("report.md", file("report.md"), name, "| layer | recipe |", 0);
  check_html("report.html", file("report.html"));
}

// The whole round: capture, run, every output, compare of the run with itself.
inline void check_name(const std::string& name) {
  INFO("name: " << nlohmann::json(std::string(name)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
                << " (" << name.size() << " bytes)");
  if (!capturable(name)) return;
  cli_test::TempDir t;
  const path cap = write_capture(t.path / "cap", name);
  const path out = t.path / "out";
  const auto r = cli_test::run("run --capture " + cli_test::shell_quote(cap.string()) + " --out " +
                               cli_test::shell_quote(out.string()) + " --cost none");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  check_no_controls("stdout", r.out);
  check_no_controls("stderr", r.err);
  check_outputs(out, name);
  const path cmp = t.path / "cmp";
  const auto c = cli_test::run("compare " + cli_test::shell_quote(out.string()) + " " + cli_test::shell_quote(out.string()) +
                               " --out " + cli_test::shell_quote(cmp.string()));
  INFO(c.err);
  REQUIRE(c.rc == 0);
  check_no_controls("compare stdout", c.out);
  const auto rows = strict_csv(cli_test::slurp(cmp / "compare.csv"));
  const auto metrics = strict_csv(cli_test::slurp(out / "metrics.csv"));
  CHECK(rows.size() == metrics.size());  // every row matched: the name read back is the name
  const auto layer = std::find(rows[0].begin(), rows[0].end(), "layer") - rows[0].begin();
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i].at(static_cast<std::size_t>(layer)) == csv_form(name));
  check_markdown("compare.md", cli_test::slurp(cmp / "compare.md"), name, "| rank |", 4);
  check_html("compare.html", cli_test::slurp(cmp / "compare.html"));
}

}  // namespace fp8a::name_test
