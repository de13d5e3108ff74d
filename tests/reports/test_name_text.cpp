// reports/name_text.hpp, reports/csv.hpp's formula guard, reports/json_text.hpp and svg::escape on
// hostile names: each form written out by hand here.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "reports/csv.hpp"
#include "reports/json_text.hpp"
#include "reports/name_text.hpp"
#include "reports/svg_plot.hpp"

using namespace fp8a;

TEST_CASE("python_suffix_regex: metacharacters escaped, controls as \\xNN, line breaks as \\uNNNN") {
  CHECK(python_suffix_regex("layers.0.fc1") == "(^|\\.)layers\\.0\\.fc1$");
  CHECK(python_suffix_regex("a(b)[c]{d}|e*+?^$\\") == "(^|\\.)a\\(b\\)\\[c\\]\\{d\\}\\|e\\*\\+\\?\\^\\$\\\\$");
  CHECK(python_suffix_regex(std::string("a\r\n\0\x1b\x7f", 6)) == "(^|\\.)a\\x0d\\x0a\\x00\\x1b\\x7f$");
  CHECK(python_suffix_regex("a\xC2\x85" "b\xE2\x80\xA8" "c\xE2\x80\xAE") == "(^|\\.)a\\u0085b\\u2028c\\u202e$");
  CHECK(python_suffix_regex("\xE5\xB1\x82 \xFF") == "(^|\\.)\xE5\xB1\x82 \\xff$");  // valid UTF-8 kept
  CHECK(python_suffix_regex("it's") == "(^|\\.)it's$");  // yaml-cpp doubles the quote of the scalar
}

TEST_CASE("fnmatch_exact_glob: [*] [?] [[], every character kept, U+FFFD for a byte outside UTF-8") {
  CHECK(fnmatch_exact_glob("decoder.layers.0.mlp") == "decoder.layers.0.mlp");
  CHECK(fnmatch_exact_glob("a*b?c[d]") == "a[*]b[?]c[[]d]");
  CHECK(fnmatch_exact_glob(std::string("a\r\0b", 4)) == std::string("a\r\0b", 4));
  // A BOM or U+2028 stays itself: a ? would also match the name's twin with another character there.
  CHECK(fnmatch_exact_glob("\xEF\xBB\xBFproj") == "\xEF\xBB\xBFproj");
  CHECK(fnmatch_exact_glob("a\xE2\x80\xA8" "b\xFF" "c\xC3\xA9") == "a\xE2\x80\xA8" "b\xEF\xBF\xBD" "c\xC3\xA9");
}

TEST_CASE("yaml_key_text: letters, digits, _ and - only") {
  CHECK(yaml_key_text("decoder.layers.0.mlp.linear_fc1") == "decoder_layers_0_mlp_linear_fc1");
  CHECK(yaml_key_text("a: b\r\xFF-c") == "a__b__-c");
}

TEST_CASE("markdown_text: markup escaped, controls visible, line breaks <br>") {
  CHECK(markdown_text("layers.0.mlp.linear_fc1") == "layers.0.mlp.linear_fc1");
  CHECK(markdown_text("<script>a&b</script>") == "&lt;script>a&amp;b&lt;/script>");
  CHECK(markdown_text("a|b*c`d[e](f)~g\\h") == "a\\|b\\*c\\`d\\[e\\](f)\\~g\\\\\\\\h");
  CHECK(markdown_text("_a_ b_c __d") == "\\_a\\_ b_c \\_\\_d");
  CHECK(markdown_text("one\ntwo\r\nthree\rfour") == "one<br>two<br>three<br>four");
  CHECK(markdown_text(std::string("\x1b[2J\0", 5)) == "\\\\x1b\\[2J\\\\x00");
  CHECK(markdown_text("# x") == "\\# x");
  CHECK(markdown_text("# x", false) == "# x");  // a table cell: inline only
  CHECK(markdown_text("-inf", false) == "-inf");
}

TEST_CASE("markdown_code: a fence longer than any backtick run inside") {
  CHECK(markdown_code("fp8-advisor run") == "`fp8-advisor run`");
  CHECK(markdown_code("a`b``c") == "```a`b``c```");
  CHECK(markdown_code("`x") == "`` `x ``");
  CHECK(markdown_code("a|b\n") == "`a\\|b\\n`");
}

TEST_CASE("csv_field: OWASP's formula starts get a leading ' and quotes") {
  CHECK(csv_field("layers.0.fc1") == "layers.0.fc1");
  CHECK(csv_field("=cmd") == "\"'=cmd\"");
  CHECK(csv_field("+1") == "\"'+1\"");
  CHECK(csv_field("-2") == "\"'-2\"");
  CHECK(csv_field("@x") == "\"'@x\"");
  CHECK(csv_field("\tx") == "\"'\tx\"");
  CHECK(csv_field("\rx") == "\"'\rx\"");
  CHECK(csv_field("'x") == "\"''x\"");  // so the reader can always drop one
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("=\"q\"") == "\"'=\"\"q\"\"\"");
}

TEST_CASE("json_name and json_document: every string valid UTF-8, names lossless") {
  CHECK(json_name("layers.0.fc1") == "layers.0.fc1");
  CHECK(json_name("a\xFF" "b") == "a\\xffb");
  CHECK(json_name("a\\b") == "a\\\\b");
  CHECK(json_name(std::string("a\0b", 3)) == std::string("a\0b", 3));  // JSON escapes it as \u0000
  nlohmann::ordered_json j = {{"layer", "x\xFE"}, {"list", {"ok", "\xC0\xAF"}}};
  j["k\xFF"] = 1;
  CHECK(json_document(j, -1) == "{\"layer\":\"x\\\\xfe\",\"list\":[\"ok\",\"\\\\xc0\\\\xaf\"],\"k\\\\xff\":1}\n");
  CHECK(json_document({{"n", std::string("\0\x1b", 2)}}, -1) == "{\"n\":\"\\u0000\\u001b\"}\n");
}

TEST_CASE("svg::escape: control bytes and bytes outside UTF-8 visible in HTML") {
  CHECK(svg::escape(std::string("a\0b\x1b[1m\r\n\t", 10)) == "a\\x00b\\x1b[1m\\r\n\t");
  CHECK(svg::escape("\xFF<\xE2\x80\xAE") == "\\xff&lt;\\xe2\\x80\\xae");
  CHECK(svg::escape("\xC3\xA9 a\\b") == "\xC3\xA9 a\\b");
}
