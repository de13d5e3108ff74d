// The error id table (core/error_ids.hpp) against itself, docs/ERRORS.md and the source tree.
//
// The compiler already refuses an id literal that is not in the table with the kind of the
// function it is given to (ErrorIdOf in core/error.hpp); these tests add what it cannot see: the
// docs/ERRORS.md's table, ids in comments and printed text, and the kind each literal is raised with,
// read from the source as a second, independent look.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/error_ids.hpp"

namespace {

namespace fs = std::filesystem;
using fp8a::ErrorKind;
using fp8a::ErrorIdRow;
using fp8a::kErrorIds;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// "fp8a.npy.602" -> "npy"
std::string family_of(std::string_view id) {
  const auto a = id.find('.') + 1;
  return std::string(id.substr(a, id.find('.', a) - a));
}

struct DocRow {
  std::string id;
  int exit_code;
  std::string meaning;
};

// The rows of docs/ERRORS.md's table: | `id` | exit | meaning |.
std::vector<DocRow> doc_rows() {
  const std::string doc = read_text(fs::path(FP8A_SOURCE_DIR) / "docs/ERRORS.md");
  REQUIRE(doc.find("\n| id | exit | meaning |\n") != std::string::npos);
  const std::regex row(R"(^\| `(fp8a\.[a-z]+\.[0-9]+)` \| ([0-9]) \| (.*) \|$)");
  std::vector<DocRow> rows;
  std::size_t pos = 0;
  while (pos < doc.size()) {
    const auto eol = std::min(doc.find('\n', pos), doc.size());
    const std::string line = doc.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.rfind("| `fp8a.", 0) != 0) continue;
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, row));
    rows.push_back({m[1], std::stoi(m[2]), m[3]});
  }
  return rows;
}

const ErrorKind kKinds[] = {ErrorKind::kUsage, ErrorKind::kInput, ErrorKind::kInternal};
const char* const kKindNames[] = {"UsageId", "InputId", "InternalId"};
const char* const kRaisers[] = {"usage_error", "input_error", "internal_error"};

}  // namespace

TEST_CASE("the error id table: well-formed ids, one kind per family, one-line meanings") {
  static_assert(fp8a::find_error_id("fp8a.io.101")->kind == ErrorKind::kInput);
  static_assert(fp8a::find_error_id("fp8a.io.999") == nullptr);
  CHECK(kErrorIds.size() > 50);
  const std::regex id_form(R"(fp8a\.[a-z]+\.[0-9]{3})");
  std::set<std::string_view> seen;
  std::map<std::string, ErrorKind> family_kind;
  for (const ErrorIdRow& row : kErrorIds) {
    INFO(row.id);
    CHECK(std::regex_match(std::string(row.id), id_form));
    CHECK(seen.insert(row.id).second);
    CHECK(family_kind.emplace(family_of(row.id), row.kind).first->second == row.kind);
    CHECK(!row.meaning.empty());
    CHECK(row.meaning.find_first_of("|\n") == std::string_view::npos);
  }
  CHECK(fp8a::exit_code_of(ErrorKind::kUsage) == 2);
  CHECK(fp8a::exit_code_of(ErrorKind::kInput) == 3);
  CHECK(fp8a::exit_code_of(ErrorKind::kInternal) == 1);
  CHECK(fp8a::usage_error("fp8a.usage.204", "x").exit_code() == 2);
  CHECK(fp8a::input_error("fp8a.io.101", "x").exit_code() == 3);
  CHECK(fp8a::internal_error("fp8a.internal.001", "x").exit_code() == 1);
  CHECK(std::string(fp8a::input_error("fp8a.io.101", "x: gone").what()) == "[fp8a.io.101] x: gone");
}

TEST_CASE("docs/ERRORS.md lists the table's rows, in its order, with the same exit codes and meanings") {
  const auto rows = doc_rows();
  for (const DocRow& r : rows) {
    INFO("docs/ERRORS.md: " << r.id);
    const ErrorIdRow* row = fp8a::find_error_id(r.id);
    REQUIRE_MESSAGE(row != nullptr, "not in core/error_ids.hpp");
    CHECK(r.exit_code == fp8a::exit_code_of(row->kind));
    CHECK(r.meaning == row->meaning);
  }
  std::vector<std::string> table_order, doc_order;
  for (const ErrorIdRow& row : kErrorIds) table_order.emplace_back(row.id);
  for (const DocRow& r : rows) doc_order.push_back(r.id);
  CHECK(doc_order == table_order);
}

TEST_CASE("every id in the source is in the table, raised with its kind") {
  const fs::path root = FP8A_SOURCE_DIR;
  const std::regex any_id(R"(fp8a\.[a-z_]+\.[0-9]+\b)");  // not "fp8a.io.1xx"
  int literals = 0;
  for (const char* dir : {"core", "engine", "datasets", "policies", "reports", "cli", "cuda"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const auto ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp" && ext != ".cuh" && ext != ".cu" && ext != ".in") continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      if (rel == "core/error_ids.hpp") continue;
      const std::string text = read_text(entry.path());
      // Every id named anywhere, code or comment, exists.
      for (std::sregex_iterator it(text.begin(), text.end(), any_id), end; it != end; ++it) {
        INFO(rel << ": " << it->str());
        CHECK(fp8a::find_error_id(it->str()) != nullptr);
      }
      // Every id literal outside comments is given to usage_error/input_error/internal_error, or
      // to a function or variable declared in this file with a UsageId/InputId/InternalId; the
      // id's row has that kind.
      const std::regex literal(R"re("(fp8a\.[a-z_]+\.[0-9]+)")re");
      const std::regex taker_before(R"re((\w+)(\(|\s*=)\s*$)re");
      for (std::sregex_iterator it(text.begin(), text.end(), literal), end; it != end; ++it) {
        const auto at = static_cast<std::size_t>(it->position());
        const auto line_start = text.rfind('\n', at) + 1;  // npos + 1 == 0
        const std::string before = text.substr(line_start, at - line_start);
        if (before.find("//") != std::string::npos) continue;
        const std::string id = (*it)[1];
        ++literals;
        // The taker may end the previous line: throw usage_error(\n "fp8a...".
        const std::string context = text.substr(at > 120 ? at - 120 : 0, at - (at > 120 ? at - 120 : 0));
        std::smatch m;
        INFO(rel << ": " << before << '"' << id << '"');
        REQUIRE_MESSAGE(std::regex_search(context, m, taker_before),
                        "an id literal must be given to an Error factory or be a typed id");
        const std::string taker = m[1];
        const bool call = m[2] == "(";
        int kind = -1;
        for (int k = 0; k < 3; ++k) {
          const std::string declared = call ? taker + R"(\([^,)]*\b)" + kKindNames[k] + R"(\b)"
                                            : R"(\b)" + std::string(kKindNames[k]) + R"(\s+)" + taker + R"(\b)";
          if ((call && taker == kRaisers[k]) || std::regex_search(text, std::regex(declared))) kind = k;
        }
        REQUIRE_MESSAGE(kind >= 0, taker << " takes no UsageId/InputId/InternalId");
        const ErrorIdRow* row = fp8a::find_error_id(id);
        REQUIRE(row != nullptr);
        CHECK(row->kind == kKinds[kind]);
      }
    }
  }
  CHECK(literals > 80);
}
