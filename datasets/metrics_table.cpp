#include "datasets/metrics_table.hpp"

#include <charconv>
#include <map>
#include <string_view>

#include "core/error.hpp"
#include "core/recipe.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

// The columns compare reads, by name.
enum Column {
  kStep, kLayer, kTensor, kRecipe, kFormat, kOrientation, kAmax, kMse, kRelMse, kSqnr, kCos,
  kUnderflow, kOverflow, kSaturated, kColumnCount
};
constexpr const char* kColumnNames[kColumnCount] = {
    "step", "layer",  "tensor",  "recipe",        "format",       "orientation",  "amax",
    "mse",  "rel_mse", "sqnr_db", "cos", "underflow_pct", "overflow_pct", "saturated_pct"};

// One CSV record: its fields and the line it starts on (1-based).
struct Record {
  std::vector<std::string> fields;
  std::size_t line = 0;
};

// RFC 4180 records; a quoted field may hold commas, "" and line breaks.
std::vector<Record> split_records(std::string_view text) {
  std::vector<Record> records;
  std::size_t line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    Record r{{std::string()}, line};
    bool quoted = false;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (quoted) {
        if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') r.fields.back() += text[++i];
        else if (c == '"') quoted = false;
        else {
          if (c == '\n') ++line;
          r.fields.back() += c;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        r.fields.emplace_back();
      } else if (c == '\n') {
        ++line;
        ++i;
        break;
      } else if (c != '\r') {
        r.fields.back() += c;
      }
    }
    records.push_back(std::move(r));
  }
  return records;
}

template <class T>
bool parse_number(const std::string& s, T* out) {
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

}  // namespace

bool is_run_output_folder(const std::string& dir, const FileSystem& fs) {
  return fs.kind(dir) == FileSystem::Kind::kDirectory &&
         fs.kind(dir + "/metrics.csv") == FileSystem::Kind::kFile &&
         fs.kind(dir + "/summary.json") == FileSystem::Kind::kFile;
}

std::vector<MetricsRecord> read_metrics_csv(const std::string& path, const FileSystem& fs) {
  const auto file = fs.map(path);
  const auto bytes = file->bytes();
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const auto records = split_records(text);
  const auto fail = [&](std::size_t line, const std::string& what) {
    return input_error("fp8a.io.105", path + ":" + std::to_string(line) + ": " + what);
  };
  if (records.empty()) throw fail(1, "empty file, expected the metrics.csv header");
  std::size_t at[kColumnCount];
  for (int c = 0; c < kColumnCount; ++c) {
    const auto& head = records[0].fields;
    std::size_t k = 0;
    while (k < head.size() && head[k] != kColumnNames[c]) ++k;
    if (k == head.size())
      throw fail(1, std::string("no column '") + kColumnNames[c] + "' in the header (not a metrics.csv "
                    "written by fp8-advisor run)");
    at[c] = k;
  }
  std::vector<MetricsRecord> rows;
  for (std::size_t n = 1; n < records.size(); ++n) {
    const Record& r = records[n];
    if (r.fields.size() != records[0].fields.size())
      throw fail(r.line, std::to_string(r.fields.size()) + " fields, the header has " +
                             std::to_string(records[0].fields.size()));
    const auto field = [&](Column c) -> const std::string& { return r.fields[at[c]]; };
    const auto bad = [&](Column c) {
      return fail(r.line, std::string("column '") + kColumnNames[c] + "': " +
                              quoted_input(field(c)) + " is not valid there");
    };
    MetricsRecord m;
    if (!parse_number(field(kStep), &m.key.step) || m.key.step < 0) throw bad(kStep);
    // A text field starting with ' had one put there against formulas (reports/csv.hpp).
    m.key.layer = field(kLayer);
    if (m.key.layer.starts_with('\'')) m.key.layer.erase(0, 1);
    if (m.key.layer.empty() || m.key.layer.size() > kMaxNameBytes) throw bad(kLayer);
    int role = 0;
    while (role < 3 && field(kTensor) != kRoleNames[role]) ++role;
    if (role == 3) throw bad(kTensor);
    m.key.role = static_cast<Role>(role);
    // A recipe spec and a training format as `run` writes them: checked here, so that a bad cell
    // is this file's line (exit 3), not a --recipes/--format usage error further on.
    const auto valid = [](const auto& parse, const std::string& cell) {
      try {
        (void)parse(cell);
        return true;
      } catch (const Error&) {
        return false;
      }
    };
    m.recipe = field(kRecipe);
    if (!valid(parse_recipe, m.recipe)) throw bad(kRecipe);
    m.format = field(kFormat);
    if (!valid(parse_training_format, m.format)) throw bad(kFormat);
    m.orientation = field(kOrientation);
    if (m.orientation != orientation_name(Orientation::kRowwise) &&
        m.orientation != orientation_name(Orientation::kColumnwise))
      throw bad(kOrientation);
    float amax = 0;
    if (!parse_number(field(kAmax), &amax)) throw bad(kAmax);
    m.amax = amax;
    const std::pair<Column, double*> doubles[] = {
        {kMse, &m.mse},       {kRelMse, &m.rel_mse},         {kSqnr, &m.sqnr_db},
        {kCos, &m.cos},       {kUnderflow, &m.underflow_pct}, {kOverflow, &m.overflow_pct},
        {kSaturated, &m.saturated_pct}};
    for (const auto& [c, p] : doubles)
      if (!parse_number(field(c), p)) throw bad(c);
    rows.push_back(std::move(m));
  }
  return rows;
}

}  // namespace fp8a
