#include "datasets/training_log.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/global_control.h>

#include "datasets/capture.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr std::string_view kCsvHeader = "step,tensor,amax";
constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
constexpr std::string_view kIteration = "iteration=";
constexpr std::string_view kValue = "value=";
constexpr std::string_view kCurAmax = "_cur_amax";
constexpr std::string_view kNvdlfwLayout = "'<layer>_<tensor>_<stat> iteration=<N> value=<V>'";
// Most characters of a line quoted in a message, and of a tensor name.
constexpr std::size_t kShownBytes = 60;
constexpr std::size_t kShownNameBytes = 300;
// Skipped tensor names listed in a note, at most.
constexpr std::size_t kListedSkippedTensors = 8;

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// s quoted for a message (quoted_input): at most `limit` characters, control bytes escaped, so a
// binary file still gives a readable line.
std::string shown(std::string_view s, std::size_t limit = kShownBytes) { return quoted_input(s, limit); }

// "path:LINE: ", built only when a message needs it.
std::string at_line(const std::string& path, std::size_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

std::string count_of(std::size_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

// Lines split at \n, a trailing \r removed; numbered from 1.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}
  bool next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    auto end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    *line = text_.substr(pos_, end - pos_);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    pos_ = end + 1;
    ++number_;
    return true;
  }
  std::size_t number() const { return number_; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t number_ = 0;
};

// A non-negative decimal integer: digits only, no sign, no spaces.
bool parse_step(std::string_view s, std::int64_t* out) {
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// An amax: a float32 (nearest to the decimal text), "nan"/"inf" in any case, not negative. Returns
// nullptr on success, else what is wrong with it.
const char* parse_amax(std::string_view s, float* out) {
  float v = 0.0f;
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ptr != end || r.ec == std::errc::invalid_argument) return "is not a number";
  if (s.front() == '-' && (r.ec != std::errc() || v < 0.0f)) return "is negative";
  if (r.ec != std::errc()) return "is outside the float32 range (1.4e-45 to 3.4028235e38)";
  if (std::isnan(v)) v = std::numeric_limits<float>::quiet_NaN();  // "-nan" too
  if (v == 0.0f) v = 0.0f;                                         // -0 reads as 0
  *out = v;
  return nullptr;
}

// NaN on either side wins; otherwise the larger.
float merge_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return std::max(a, b);
}

// One value read from one file, and where.
struct Entry {
  std::int64_t step;
  std::size_t line;
  float amax;
};

// One file's values by series index, each series in line order.
struct FileValues {
  std::vector<std::vector<Entry>> by_series;
  std::size_t count = 0;
  void add(std::uint32_t series, const Entry& e) {
    if (series >= by_series.size()) by_series.resize(series + 1);
    by_series[series].push_back(e);
    ++count;
  }
};

// One value of one series, from any file.
struct Cell {
  std::int64_t step;
  float amax;
};

using SeriesKey = std::pair<std::string, Role>;

// Interns (layer, role) keys as small indices and collects their values across files.
class TraceBuilder {
 public:
  std::uint32_t series_index(std::string layer, Role role) {
    auto [it, inserted] = index_.try_emplace(SeriesKey(std::move(layer), role),
                                             static_cast<std::uint32_t>(keys_.size()));
    if (inserted) {
      keys_.push_back(&it->first);
      cells_.emplace_back();
      auto named = layer_names_.find(it->first.first);
      if (named == layer_names_.end()) named = layer_names_.emplace(names_->emplace_back(it->first.first)).first;
      layers_.push_back(*named);  // one view per layer name, whatever the role
    }
    return it->second;
  }
  const SeriesKey& key(std::uint32_t series) const { return *keys_[series]; }
  // The series' layer name, in storage the log keeps (names()).
  std::string_view layer(std::uint32_t series) const { return layers_[series]; }
  std::shared_ptr<const std::deque<std::string>> names() const { return names_; }
  void add(std::uint32_t series, std::int64_t step, float amax) { cells_[series].push_back({step, amax}); }
  // The values gathered so far by (series, step), merged by max.
  void cells_by_step(std::map<std::pair<std::uint32_t, std::int64_t>, float>* out) const {
    for (std::uint32_t s = 0; s < cells_.size(); ++s)
      for (const Cell& c : cells_[s])
        if (const auto [it, added] = out->try_emplace({s, c.step}, c.amax); !added)
          it->second = merge_max(it->second, c.amax);
  }
  // values: one file's, without repeats.
  void add_file(const FileValues& values) {
    for (std::uint32_t s = 0; s < values.by_series.size(); ++s)
      for (const auto& e : values.by_series[s]) cells_[s].push_back({e.step, e.amax});
  }
  // Moves the values into trace->series, merging equal steps by max; returns how many steps were
  // given by more than one file.
  std::size_t finish(TrainingLog* trace) {
    std::size_t merged = 0;
    for (std::uint32_t s = 0; s < cells_.size(); ++s) {
      auto& cells = cells_[s];
      if (cells.empty()) continue;  // a tensor with statistics but no amax
      const auto by_step = [](const Cell& a, const Cell& b) { return a.step < b.step; };
      if (!std::is_sorted(cells.begin(), cells.end(), by_step))
        std::sort(cells.begin(), cells.end(), by_step);
      auto& out = trace->series[key(s)].amax_by_step;
      out.reserve(cells.size());
      for (std::size_t i = 0; i < cells.size();) {
        float amax = cells[i].amax;
        std::size_t j = i + 1;
        for (; j < cells.size() && cells[j].step == cells[i].step; ++j)
          amax = merge_max(amax, cells[j].amax);
        if (j - i > 1) ++merged;
        out.push_back(cells[i].step, amax);
        i = j;
      }
      std::vector<Cell>().swap(cells);
    }
    return merged;
  }

 private:
  std::map<SeriesKey, std::uint32_t> index_;
  std::vector<const SeriesKey*> keys_;  // into index_, whose nodes never move
  std::vector<std::vector<Cell>> cells_;
  std::shared_ptr<std::deque<std::string>> names_ = std::make_shared<std::deque<std::string>>();
  std::vector<std::string_view> layers_;  // into names_, whose elements never move
  std::unordered_set<std::string_view> layer_names_;  // views into names_, one per name
};

enum class Format { kCsv, kNvdlfw };

// The original name of a series in a file of the given format, for messages.
std::string name_in_file(Format format, const SeriesKey& key) {
  return key.first + (format == Format::kCsv ? "." : "_") + role_name(key.second) +
         (format == Format::kCsv ? "" : std::string(kCurAmax));
}

// Refuses a (series, step) given twice in one capture CSV, naming the earliest repeat. Each series
// is sorted by step (stable: repeats stay in line order); a trace written step by step already is.
// (An nvdlfw_inspect log's repeats are found as its steps are read: StepMerger.)
void check_repeats(const std::string& path, const TraceBuilder& builder, FileValues* values) {
  const auto by_step = [](const Entry& a, const Entry& b) { return a.step < b.step; };
  const Entry* first = nullptr;
  const Entry* repeat = nullptr;
  std::uint32_t repeat_series = 0;
  for (std::uint32_t s = 0; s < values->by_series.size(); ++s) {
    auto& entries = values->by_series[s];
    const auto not_increasing = [](const Entry& a, const Entry& b) { return a.step >= b.step; };
    if (std::adjacent_find(entries.begin(), entries.end(), not_increasing) == entries.end())
      continue;
    std::stable_sort(entries.begin(), entries.end(), by_step);
    for (std::size_t i = 1; i < entries.size(); ++i) {
      if (entries[i - 1].step == entries[i].step &&
          (repeat == nullptr || entries[i].line < repeat->line)) {
        first = &entries[i - 1];
        repeat = &entries[i];
        repeat_series = s;
      }
    }
  }
  if (repeat == nullptr) return;
  const std::string name = name_in_file(Format::kCsv, builder.key(repeat_series));
  throw input_error("fp8a.trace.505", at_line(path, repeat->line) + "duplicate row: step " +
                                          std::to_string(repeat->step) + ", tensor " + shown(name, kShownNameBytes) +
                                          " already given on line " + std::to_string(first->line));
}

// ---- CSV --------------------------------------------------------------------------------------

struct CsvField {
  std::string_view text;  // quotes removed
  bool escaped = false;   // text still holds "" pairs for single quotes
};

// Splits one record (RFC 4180 quoting, no line breaks inside quotes). Keeps the first three
// fields and returns how many there are.
std::size_t split_csv(std::string_view line, CsvField* fields, const std::string& path,
                      std::size_t line_number) {
  std::size_t count = 0;
  std::size_t i = 0;
  while (true) {
    CsvField f;
    if (i < line.size() && line[i] == '"') {
      std::size_t j = i + 1;
      while (true) {
        j = line.find('"', j);
        if (j == std::string_view::npos)
          throw input_error("fp8a.trace.502", at_line(path, line_number) +
                                                  "malformed CSV row: field " +
                                                  std::to_string(count + 1) +
                                                  " opens a double quote that is never closed");
        if (j + 1 < line.size() && line[j + 1] == '"') {
          f.escaped = true;
          j += 2;
          continue;
        }
        break;
      }
      f.text = line.substr(i + 1, j - i - 1);
      i = j + 1;
      if (i < line.size() && line[i] != ',')
        throw input_error("fp8a.trace.502", at_line(path, line_number) +
                                                "malformed CSV row: field " +
                                                std::to_string(count + 1) +
                                                " has text after its closing double quote");
    } else {
      auto comma = line.find(',', i);
      if (comma == std::string_view::npos) comma = line.size();
      f.text = line.substr(i, comma - i);
      i = comma;
    }
    if (count < 3) fields[count] = f;
    ++count;
    if (i >= line.size()) return count;
    ++i;  // the comma
  }
}

std::string unescape_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    out += s[i];
    if (s[i] == '"' && i + 1 < s.size() && s[i + 1] == '"') ++i;
  }
  return out;
}

void parse_csv(std::string_view text, const std::string& path, TraceBuilder* builder,
               FileValues* values) {
  // Tensor name -> series; keys view the file's bytes or `unescaped`, both alive during the parse.
  std::unordered_map<std::string_view, std::uint32_t> series_of;
  std::deque<std::string> unescaped;
  LineReader lines(text);
  std::string_view line;
  lines.next(&line);  // the header, checked by the caller
  while (lines.next(&line)) {
    if (trim_left(line).empty()) continue;
    const std::size_t n = lines.number();
    CsvField f[3];
    const std::size_t count = split_csv(line, f, path, n);
    if (count != 3)
      throw input_error("fp8a.trace.502",
                        at_line(path, n) + "malformed CSV row: expected 3 fields " +
                            std::string(kCsvHeader) + ", found " + std::to_string(count));
    Entry e{};
    e.line = n;
    if (!parse_step(f[0].text, &e.step))
      throw input_error("fp8a.trace.503", at_line(path, n) + "step " + shown(f[0].text) +
                                              " is not a non-negative integer");
    if (const char* why = parse_amax(f[2].text, &e.amax))
      throw input_error("fp8a.trace.503",
                        at_line(path, n) + "amax " + shown(f[2].text) + " " + why);

    std::string_view name = f[1].text;
    if (f[1].escaped) name = unescaped.emplace_back(unescape_quotes(name));
    std::uint32_t series = 0;
    if (auto it = series_of.find(name); it != series_of.end()) {
      series = it->second;
    } else {
      std::string layer;
      Role role = Role::kActivation;
      if (!split_tensor_name(std::string(name), &layer, &role))
        throw input_error("fp8a.trace.504",
                          at_line(path, n) + "tensor " + shown(name, kShownNameBytes) +
                              " is not <layer>.<role> with role activation, weight or gradient");
      series = builder->series_index(std::move(layer), role);
      series_of.emplace(name, series);
    }
    values->add(series, e);
  }
}

// ---- nvdlfw_inspect statistics log --------------------------------------------------------------

struct NvdlfwLine {
  std::string_view name, iteration, value;
};

// The first "iteration=" in line, found by its '=' (a name holds many an 'i', few a '='); npos if none.
std::size_t find_iteration(std::string_view line) {
  constexpr std::size_t kKey = kIteration.size() - 1;  // "iteration" before the '='
  for (std::size_t eq = line.find('=', kKey); eq != std::string_view::npos; eq = line.find('=', eq + 1))
    if (line.substr(eq - kKey, kKey) == kIteration.substr(0, kKey)) return eq - kKey;
  return std::string_view::npos;
}

// Splits "[prefix] <name> iteration=<N> value=<V>" (any blanks between the parts). Returns an
// empty string on success, else what is missing.
std::string split_nvdlfw(std::string_view line, NvdlfwLine* out) {
  const auto at = find_iteration(line);
  if (at == std::string_view::npos) return "no 'iteration='";
  if (at == 0 || !is_blank(line[at - 1])) return "no statistic name before 'iteration='";
  const std::string_view before = trim_right(line.substr(0, at));
  if (before.empty()) return "no statistic name before 'iteration='";
  std::size_t name_begin = before.size();
  while (name_begin > 0 && !is_blank(before[name_begin - 1])) --name_begin;
  out->name = before.substr(name_begin);

  std::string_view rest = line.substr(at + kIteration.size());
  std::size_t n = 0;
  while (n < rest.size() && !is_blank(rest[n])) ++n;
  out->iteration = rest.substr(0, n);
  rest = trim_left(rest.substr(n));
  if (rest.substr(0, kValue.size()) != kValue) return "no 'value=' after the iteration";
  rest.remove_prefix(kValue.size());
  n = 0;
  while (n < rest.size() && !is_blank(rest[n])) ++n;
  out->value = rest.substr(0, n);
  rest = trim_left(rest.substr(n));
  if (!rest.empty()) return "text after the value: " + shown(rest);
  return {};
}

// A value as nvdlfw_inspect's default file logger prints it ("{:.4f}": digits, a point, four
// digits); fp8a_capture.stats_logger writes every digit instead.
bool four_decimals(std::string_view v) {
  if (!v.empty() && v.front() == '-') v.remove_prefix(1);
  const auto point = v.find('.');
  if (point == 0 || point == std::string_view::npos || v.size() - point != 5) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
}

bool is_nvdlfw_line(std::string_view line) {
  const auto at = find_iteration(line);
  return at != std::string_view::npos &&
         line.find(kValue, at + kIteration.size()) != std::string_view::npos;
}

struct NvdlfwCounts {
  std::size_t lines = 0;          // statistics lines
  std::size_t amax_values = 0;    // cur_amax values read
  std::size_t four_decimals = 0;  // cur_amax values printed as nvdlfw's default logger prints them
  std::size_t fp8_stats = 0;      // LogFp8TensorStats values kept
  std::size_t tensor_stats = 0;   // LogTensorStats mean and std kept
  std::size_t other_stats = 0;    // stat other than cur_amax and the FP8 statistics
  std::size_t other_tensors = 0;  // cur_amax / FP8 stat of a tensor other than activation, weight, gradient
  std::set<std::string, std::less<>> other_tensor_names;  // the first kListedSkippedTensors
  bool more_tensor_names = false;                         // and there were others
};

// LogFp8TensorStats names, from the right: "[_<recipe>]_<stat>[_columnwise]".
struct Fp8StatSuffix {
  std::string_view text;
  LoggedStatKind kind;
};
constexpr Fp8StatSuffix kFp8StatSuffixes[] = {
    {"_underflows%", LoggedStatKind::kUnderflowPct}, {"_overflows%", LoggedStatKind::kOverflowPct},
    {"_scale_inv_min", LoggedStatKind::kScaleInvMin}, {"_scale_inv_max", LoggedStatKind::kScaleInvMax},
    {"_mse", LoggedStatKind::kMse}};
struct LoggedRecipeName {
  std::string_view text;
  LoggedRecipe recipe;
};
constexpr LoggedRecipeName kLoggedRecipeNames[] = {
    {"fp8_delayed_scaling", LoggedRecipe::kDelayed},
    {"fp8_current_scaling", LoggedRecipe::kCurrent},
    {"fp8_block_scaling", LoggedRecipe::kBlock},
    {"mxfp8", LoggedRecipe::kMxfp8},
    {"nvfp4", LoggedRecipe::kNvfp4}};
constexpr std::string_view kColumnwise = "_columnwise";

// Splits an FP8 statistic's name into "<layer>_<tensor>" and the rest; false for other names.
bool split_fp8_stat(std::string_view name, std::string_view* layer_tensor, LoggedFp8Stat* out) {
  out->columnwise = name.ends_with(kColumnwise);
  if (out->columnwise) name.remove_suffix(kColumnwise.size());
  const Fp8StatSuffix* stat = nullptr;
  for (const auto& s : kFp8StatSuffixes)
    if (name.ends_with(s.text)) stat = &s;
  if (stat == nullptr) return false;
  name.remove_suffix(stat->text.size());
  out->stat = stat->kind;
  out->recipe = LoggedRecipe::kTraining;
  for (const auto& r : kLoggedRecipeNames) {
    if (name.size() > r.text.size() + 1 && name.ends_with(r.text) &&
        name[name.size() - r.text.size() - 1] == '_') {
      out->recipe = r.recipe;
      name.remove_suffix(r.text.size() + 1);
      break;
    }
  }
  *layer_tensor = name;
  return true;
}

// "<layer>_<tensor>": the tensor is the last "_" part (layer names may hold "_", tensor names do
// not). False, with *tensor set, when it is not activation, weight or gradient.
bool split_layer_tensor(std::string_view layer_tensor, std::string_view* layer,
                        std::string_view* tensor, Role* role) {
  const auto underscore = layer_tensor.rfind('_');
  *tensor = underscore == std::string_view::npos ? layer_tensor : layer_tensor.substr(underscore + 1);
  *layer = underscore == std::string_view::npos ? std::string_view() : layer_tensor.substr(0, underscore);
  return role_from_name(*tensor, role);
}

void count_other_tensor(std::string_view tensor, NvdlfwCounts* counts) {
  ++counts->other_tensors;
  auto& names = counts->other_tensor_names;
  if (names.find(tensor) == names.end()) {
    if (names.size() < kListedSkippedTensors)
      names.emplace(tensor);
    else
      counts->more_tensor_names = true;
  }
}

[[noreturn]] void throw_no_layer(const std::string& path, std::size_t n, std::string_view name) {
  throw input_error("fp8a.trace.502",
                    at_line(path, n) + "malformed nvdlfw_inspect statistics line: " +
                        "statistic " + shown(name, kShownNameBytes) +
                        " names no layer; expected " + std::string(kNvdlfwLayout));
}

[[noreturn]] void throw_bad_iteration(const NvdlfwLine& parts, const std::string& path, std::size_t n) {
  throw input_error("fp8a.trace.503", at_line(path, n) + "iteration " + shown(parts.iteration) +
                                          " is not a non-negative integer");
}

// A statistic's value: a number (from_chars: nan and inf accepted).
bool parse_stat_value(std::string_view text, double* value) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, *value);
  return !text.empty() && r.ptr == end && r.ec == std::errc();
}

[[noreturn]] void throw_bad_value(const NvdlfwLine& parts, const std::string& path, std::size_t n) {
  throw input_error("fp8a.trace.503", at_line(path, n) + "value " + shown(parts.value) + " of " +
                                          shown(parts.name, kShownNameBytes) + " is not a number");
}

// A percentage in [0, 100], any other statistic but a mean >= 0 (NaN passes: TE logs it for a
// tensor holding NaN); else input error 503.
void check_stat_range(double v, bool percent, const NvdlfwLine& parts, const std::string& path, std::size_t n) {
  if (std::isnan(v) || (v >= 0 && (!percent || v <= 100))) return;
  throw input_error("fp8a.trace.503", at_line(path, n) + "value " + shown(parts.value) + " of " +
                                          shown(parts.name, kShownNameBytes) +
                                          (percent ? " is not a percentage from 0 to 100" : " is negative"));
}

// LogTensorStats' mean and std, by name suffix.
struct TensorStatSuffix {
  std::string_view text;
  LoggedTensorStatKind kind;
};
constexpr TensorStatSuffix kTensorStatSuffixes[] = {{"_mean", LoggedTensorStatKind::kMean},
                                                    {"_std", LoggedTensorStatKind::kStd}};

// One statistics line of an nvdlfw_inspect log, parsed.
struct StatLine {
  enum class Kind : std::uint8_t { kFp8, kTensor, kAmax };
  Kind kind = Kind::kAmax;
  std::uint32_t series = 0;
  std::int64_t step = 0;
  std::size_t line = 0;
  double value = 0.0;  // kFp8, kTensor
  float amax = 0.0f;   // kAmax
  bool rounded = false;
  LoggedRecipe recipe = LoggedRecipe::kTraining;  // kFp8
  LoggedStatKind stat = LoggedStatKind::kUnderflowPct;
  bool columnwise = false;
  LoggedTensorStatKind tensor_stat = LoggedTensorStatKind::kMean;  // kTensor
};

// ---- reading ahead ------------------------------------------------------------------------------
// A log is cut into chunks of whole lines; worker threads split and parse the chunks ahead of the
// reader (the pure part of a line's work), and the reader takes their lines in file order, so
// every value, count and error is what a line-by-line read gives.

// A statistics line split, its numbers parsed; its name not yet resolved (the series are the
// reader's).
struct SplitLine {
  NvdlfwLine parts;                // views into the file
  std::size_t line = 0;            // in the chunk, from 1
  std::int64_t step = 0;
  double value = 0.0;              // a statistic's (names not ending in _cur_amax)
  float amax = 0.0f;               // a cur_amax's
  const char* amax_why = nullptr;  // why the cur_amax value is not one
  bool step_ok = false, value_ok = false, rounded = false;
};

struct ParsedChunk {
  std::vector<SplitLine> lines;
  std::size_t line_count = 0;  // the chunk's lines, blank ones too
  std::size_t error_line = 0;  // 0, or the chunk's malformed line (its lines stop before it)
  std::string error;           // what split_nvdlfw found missing there
};

ParsedChunk parse_chunk(std::string_view text) {
  ParsedChunk out;
  LineReader lines(text);
  std::string_view line;
  while (lines.next(&line)) {
    if (trim_left(line).empty()) continue;
    SplitLine l;
    if (auto why = split_nvdlfw(line, &l.parts); !why.empty()) {
      out.error_line = lines.number();
      out.error = std::move(why);
      break;
    }
    l.line = lines.number();
    l.step_ok = parse_step(l.parts.iteration, &l.step);
    if (l.parts.name.ends_with(kCurAmax))
      l.amax_why = parse_amax(l.parts.value, &l.amax);
    else
      l.value_ok = parse_stat_value(l.parts.value, &l.value);
    l.rounded = four_decimals(l.parts.value);
    out.lines.push_back(l);
  }
  out.line_count = lines.number();
  return out;
}

// The chunks of a file being parsed ahead of its reader, in file order.
class ChunkQueue {
 public:
  // ahead: chunks in flight; chunk_bytes: a chunk's size, cut at the next newline.
  ChunkQueue(std::string_view text, std::size_t ahead, std::size_t chunk_bytes)
      : text_(text), ahead_(ahead), chunk_bytes_(chunk_bytes) {}
  ChunkQueue(ChunkQueue&&) = default;
  // The next chunk and its first byte's offset in the file; false past the end.
  bool pop(ParsedChunk* chunk, std::size_t* offset) {
    fill();
    if (pending_.empty()) return false;
    Pending& p = *pending_.front();
    p.group.wait();
    *chunk = std::move(p.chunk);
    *offset = p.offset;
    pending_.pop_front();
    fill();
    return true;
  }

 private:
  struct Pending {
    std::size_t offset = 0;
    ParsedChunk chunk;
    tbb::task_group group;
    ~Pending() {  // a reader that stops early (an input error) lets its chunks go
      group.cancel();
      try {
        group.wait();
      } catch (...) {
      }
    }
  };
  void fill() {
    while (pending_.size() < ahead_ && cut_ < text_.size()) {
      std::size_t end = std::min(text_.size(), cut_ + chunk_bytes_);
      if (end < text_.size()) {
        const std::size_t newline = text_.find('\n', end - 1);
        end = newline == std::string_view::npos ? text_.size() : newline + 1;
      }
      auto p = std::make_unique<Pending>();
      p->offset = cut_;
      Pending* raw = p.get();
      const std::string_view piece = text_.substr(cut_, end - cut_);
      raw->group.run([raw, piece] { raw->chunk = parse_chunk(piece); });
      pending_.push_back(std::move(p));
      cut_ = end;
    }
  }

  std::string_view text_;
  std::size_t ahead_, chunk_bytes_;
  std::size_t cut_ = 0;  // where the next chunk starts
  std::deque<std::unique_ptr<Pending>> pending_;
};

// One nvdlfw_inspect log, read a statistics line at a time.
class NvdlfwCursor {
 public:
  NvdlfwCursor(std::shared_ptr<const MappedFile> mapping, std::string_view text, std::string path, std::size_t file,
               TraceBuilder* builder, std::size_t ahead, std::size_t chunk_bytes)
      : mapping_(std::move(mapping)), text_(text), chunks_(text, ahead, chunk_bytes), path_(std::move(path)),
        file_(file), builder_(builder) {}
  // The next line of an activation, weight or gradient statistic read; false at the end. Other
  // lines are counted.
  bool next(StatLine* out);
  const std::string& path() const { return path_; }
  std::size_t file() const { return file_; }
  const NvdlfwCounts& counts() const { return counts_; }

 private:
  // What a statistic's name asks of the reader: a line of a series, or a count.
  struct Meaning {
    enum class Use : std::uint8_t { kRead, kOtherStat, kOtherTensor };
    Use use = Use::kRead;
    StatLine::Kind kind = StatLine::Kind::kAmax;
    std::uint32_t series = 0;
    LoggedRecipe recipe = LoggedRecipe::kTraining;
    LoggedStatKind stat = LoggedStatKind::kUnderflowPct;
    bool columnwise = false;
    LoggedTensorStatKind tensor_stat = LoggedTensorStatKind::kMean;
    std::string other_tensor;  // kOtherTensor
    std::string_view name;     // into names_
    Meaning* next = nullptr;   // the meaning of the name read after this one, last time
  };
  // n: the line the name is first read at (for the error of a name without a layer).
  Meaning meaning_of(std::string_view name, std::size_t n);
  const Meaning& meaning(std::string_view name, std::size_t n);
  // The next chunk's lines; false at the end of the file. Throws the chunk's input error when its
  // lines are all read.
  bool next_chunk();

  // Lets the pages of the chunks read go every kReleaseBytes, so that a log of any size stays out
  // of memory.
  void release_read(std::size_t upto) {
    constexpr std::size_t kReleaseBytes = std::size_t{64} << 20;
    if (upto - released_ < kReleaseBytes) return;
    mapping_->release(reinterpret_cast<const std::byte*>(text_.data()) + released_, upto - released_);
    released_ = upto;
  }

  std::shared_ptr<const MappedFile> mapping_;
  std::string_view text_;
  std::size_t released_ = 0;
  ChunkQueue chunks_;
  ParsedChunk chunk_;          // the chunk being read
  std::size_t at_ = 0;         // its next line
  std::size_t line_base_ = 0;  // the file's lines before it
  std::string path_;
  std::size_t file_;
  TraceBuilder* builder_;
  NvdlfwCounts counts_;
  // Statistic name -> its meaning; keys view names_ (not the file, whose pages go as it is read).
  std::unordered_map<std::string_view, Meaning> meanings_;
  std::deque<std::string> names_;
  Meaning* previous_ = nullptr;  // the last line's
};

NvdlfwCursor::Meaning NvdlfwCursor::meaning_of(std::string_view name, std::size_t n) {
  Meaning m;
  std::string_view layer_tensor, layer, tensor;
  Role role = Role::kActivation;
  LoggedFp8Stat stat;
  if (split_fp8_stat(name, &layer_tensor, &stat)) {
    m.kind = StatLine::Kind::kFp8;
    m.recipe = stat.recipe;
    m.stat = stat.stat;
    m.columnwise = stat.columnwise;
  } else if (const auto* t = std::find_if(std::begin(kTensorStatSuffixes), std::end(kTensorStatSuffixes),
                                          [&](const TensorStatSuffix& x) { return name.ends_with(x.text); });
             t != std::end(kTensorStatSuffixes)) {
    m.kind = StatLine::Kind::kTensor;
    m.tensor_stat = t->kind;
    layer_tensor = name.substr(0, name.size() - t->text.size());
  } else if (name.size() > kCurAmax.size() && name.ends_with(kCurAmax)) {
    m.kind = StatLine::Kind::kAmax;
    layer_tensor = name.substr(0, name.size() - kCurAmax.size());
  } else {
    m.use = Meaning::Use::kOtherStat;
    return m;
  }
  if (!split_layer_tensor(layer_tensor, &layer, &tensor, &role)) {
    m.use = Meaning::Use::kOtherTensor;
    m.other_tensor = std::string(tensor);
    return m;
  }
  if (layer.empty()) throw_no_layer(path_, n, name);
  m.series = builder_->series_index(std::string(layer), role);
  return m;
}

// A log names the same statistics every step, in the same order: each name is worked out once,
// and the name that followed the last line's last time is tried before the table.
const NvdlfwCursor::Meaning& NvdlfwCursor::meaning(std::string_view name, std::size_t n) {
  Meaning* m = previous_ != nullptr ? previous_->next : nullptr;
  if (m == nullptr || m->name != name) {
    auto it = meanings_.find(name);
    if (it == meanings_.end()) {
      Meaning fresh = meaning_of(name, n);
      fresh.name = names_.emplace_back(name);
      it = meanings_.emplace(fresh.name, std::move(fresh)).first;
    }
    m = &it->second;
    if (previous_ != nullptr) previous_->next = m;
  }
  previous_ = m;
  return *m;
}

bool NvdlfwCursor::next_chunk() {
  if (chunk_.error_line != 0)
    throw input_error("fp8a.trace.502", at_line(path_, line_base_ + chunk_.error_line) +
                                            "malformed nvdlfw_inspect statistics line: " + chunk_.error +
                                            "; expected " + std::string(kNvdlfwLayout));
  line_base_ += chunk_.line_count;
  std::size_t offset = 0;
  if (!chunks_.pop(&chunk_, &offset)) return false;
  release_read(offset);  // the chunks before this one are read
  at_ = 0;
  return true;
}

bool NvdlfwCursor::next(StatLine* out) {
  while (at_ < chunk_.lines.size() || next_chunk()) {
    if (at_ == chunk_.lines.size()) continue;  // a chunk of blank lines, or a malformed first line
    const SplitLine& l = chunk_.lines[at_++];
    const std::size_t n = line_base_ + l.line;
    const NvdlfwLine& parts = l.parts;
    ++counts_.lines;
    const Meaning& m = meaning(parts.name, n);
    if (m.use == Meaning::Use::kOtherStat) {
      ++counts_.other_stats;
      continue;
    }
    if (m.use == Meaning::Use::kOtherTensor) {
      count_other_tensor(m.other_tensor, &counts_);
      continue;
    }
    StatLine& e = *out;
    e.line = n;
    e.kind = m.kind;
    e.series = m.series;
    if (!l.step_ok) throw_bad_iteration(parts, path_, n);
    e.step = l.step;
    e.rounded = l.rounded;
    switch (m.kind) {
      case StatLine::Kind::kFp8:
        if (!l.value_ok) throw_bad_value(parts, path_, n);
        e.value = l.value;
        check_stat_range(e.value, m.stat == LoggedStatKind::kUnderflowPct || m.stat == LoggedStatKind::kOverflowPct,
                         parts, path_, n);
        e.recipe = m.recipe;
        e.stat = m.stat;
        e.columnwise = m.columnwise;
        ++counts_.fp8_stats;
        break;
      case StatLine::Kind::kTensor:
        if (!l.value_ok) throw_bad_value(parts, path_, n);
        e.tensor_stat = m.tensor_stat;
        e.value = l.value;
        if (m.tensor_stat == LoggedTensorStatKind::kStd) check_stat_range(e.value, false, parts, path_, n);
        ++counts_.tensor_stats;
        break;
      case StatLine::Kind::kAmax:
        if (l.amax_why != nullptr)
          throw input_error("fp8a.trace.503",
                            at_line(path_, n) + "cur_amax value " + shown(parts.value) + " " + l.amax_why);
        e.amax = l.amax;
        counts_.four_decimals += e.rounded ? 1 : 0;
        ++counts_.amax_values;
        break;
    }
    return true;
  }
  return false;
}

// Reads the nvdlfw_inspect logs together, a step at a time: every file's lines of the smallest
// step not yet read, then the step's statistics to the sink (or the log) and its amaxes to the
// series. Each file must go step by step, as TE writes it (fp8a.trace.508).
class StepMerger {
 public:
  StepMerger(TrainingLog* log, TraceBuilder* builder, LoggedStepSink* sink,
             const std::map<std::pair<std::uint32_t, std::int64_t>, float>* csv_amax)
      : log_(log), builder_(builder), sink_(sink), csv_amax_(csv_amax) {}
  void run(std::vector<NvdlfwCursor>& cursors);

 private:
  void add(std::size_t file, const StatLine& e);
  void flush(std::int64_t step);

  TrainingLog* log_;
  TraceBuilder* builder_;
  LoggedStepSink* sink_;
  const std::map<std::pair<std::uint32_t, std::int64_t>, float>* csv_amax_;
  // The step being gathered.
  std::vector<LoggedFp8Stat> fp8_;
  std::vector<LoggedTensorStat> tensor_;
  std::vector<LoggedAmax> amax_;
  std::unordered_map<std::uint32_t, std::size_t> amax_of_;  // series -> index into amax_
  // series -> (file, line) of its amax in the step, for the repeat check.
  std::unordered_map<std::uint32_t, std::pair<std::size_t, std::size_t>> amax_line_;
  std::vector<std::uint32_t> stat_series_;  // the series of the step's FP8 and tensor statistics
  const NvdlfwCursor* cursor_ = nullptr;  // the file being read, for messages
};

void StepMerger::add(std::size_t file, const StatLine& e) {
  const SeriesKey& key = builder_->key(e.series);
  const std::string_view layer = builder_->layer(e.series);
  switch (e.kind) {
    case StatLine::Kind::kFp8: {
      stat_series_.push_back(e.series);
      LoggedFp8Stat& s = fp8_.emplace_back();
      s.layer = layer, s.role = key.second, s.step = e.step, s.recipe = e.recipe, s.stat = e.stat;
      s.columnwise = e.columnwise, s.value = e.value, s.rounded = e.rounded, s.file = file, s.line = e.line;
      return;
    }
    case StatLine::Kind::kTensor:
      stat_series_.push_back(e.series);
      tensor_.push_back({layer, key.second, e.step, e.tensor_stat, e.value, e.rounded, file, e.line});
      return;
    case StatLine::Kind::kAmax: {
      const auto [at, first] = amax_line_.try_emplace(e.series, file, e.line);
      if (!first && at->second.first == file)
        throw input_error("fp8a.trace.505", at_line(cursor_->path(), e.line) + "duplicate line: " +
                                                shown(name_in_file(Format::kNvdlfw, key), kShownNameBytes) +
                                                " at iteration " + std::to_string(e.step) +
                                                " already given on line " + std::to_string(at->second.second));
      at->second = {file, e.line};
      builder_->add(e.series, e.step, e.amax);
      const auto [slot, added] = amax_of_.try_emplace(e.series, amax_.size());
      if (added) {
        amax_.push_back({layer, key.second, e.amax, e.rounded});
      } else {
        LoggedAmax& a = amax_[slot->second];
        a.amax = merge_max(a.amax, e.amax);
        a.rounded = a.rounded || e.rounded;
      }
      return;
    }
  }
}

void StepMerger::flush(std::int64_t step) {
  if (sink_ != nullptr && (!fp8_.empty() || !tensor_.empty())) {
    if (csv_amax_ != nullptr && !csv_amax_->empty())  // a capture CSV's amax where no log gave one
      for (const std::uint32_t series : stat_series_) {
        if (amax_of_.contains(series)) continue;
        if (const auto it = csv_amax_->find({series, step}); it != csv_amax_->end()) {
          amax_of_.emplace(series, amax_.size());
          amax_.push_back({builder_->layer(series), builder_->key(series).second, it->second, false});
        }
      }
    sink_->add_step({step, fp8_, tensor_, amax_, log_->files});
  } else if (sink_ == nullptr) {
    log_->fp8_stats.insert(log_->fp8_stats.end(), fp8_.begin(), fp8_.end());
    log_->tensor_stats.insert(log_->tensor_stats.end(), tensor_.begin(), tensor_.end());
  }
  log_->fp8_stat_count += fp8_.size();
  fp8_.clear(), tensor_.clear(), amax_.clear(), amax_of_.clear(), amax_line_.clear(), stat_series_.clear();
}

void StepMerger::run(std::vector<NvdlfwCursor>& cursors) {
  std::vector<StatLine> head(cursors.size());
  std::vector<bool> live(cursors.size());
  for (std::size_t i = 0; i < cursors.size(); ++i) live[i] = cursors[i].next(&head[i]);
  while (true) {
    std::optional<std::int64_t> step;
    for (std::size_t i = 0; i < cursors.size(); ++i)
      if (live[i] && (!step || head[i].step < *step)) step = head[i].step;
    if (!step) return;
    for (std::size_t i = 0; i < cursors.size(); ++i) {
      cursor_ = &cursors[i];
      while (live[i] && head[i].step == *step) {
        add(cursors[i].file(), head[i]);
        live[i] = cursors[i].next(&head[i]);
      }
      if (live[i] && head[i].step < *step)
        throw input_error("fp8a.trace.508",
                          at_line(cursors[i].path(), head[i].line) + "iteration " + std::to_string(head[i].step) +
                              " after iteration " + std::to_string(*step) +
                              ": an nvdlfw_inspect log goes step by step, as TE writes it (sort it by iteration)");
    }
    flush(*step);
  }
}

// ---- one file -----------------------------------------------------------------------------------

struct Mapped {
  std::shared_ptr<const MappedFile> mapping;
  std::string_view text;
};

Mapped map_text(const std::string& path, const FileSystem& fs) {
  Mapped m{fs.map(path), {}};
  const auto bytes = m.mapping->bytes();
  m.text = std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return m;
}

// The file's format, told by its content (fp8a.trace.501 when neither).
Format detect_format(std::string_view text, const std::string& path) {
  LineReader lines(text);
  std::string_view first;
  lines.next(&first);
  if (first == kCsvHeader) return Format::kCsv;
  bool nvdlfw = is_nvdlfw_line(first);
  for (std::string_view line; !nvdlfw && lines.next(&line);) nvdlfw = is_nvdlfw_line(line);
  if (nvdlfw) return Format::kNvdlfw;
  if (text.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos)
    throw input_error("fp8a.trace.501", path + ": not an amax trace: the file is empty");
  if (const std::string bom = utf16_or_utf32_bom(text); !bom.empty())
    throw input_error("fp8a.trace.501", path + ":1: not an amax trace: the file is " + bom +
                                            ", not UTF-8; write it as UTF-8");
  if (first.substr(0, kByteOrderMark.size()) == kByteOrderMark)
    throw input_error("fp8a.trace.501",
                      path +
                          ":1: not an amax trace: the file starts with a UTF-8 byte-order "
                          "mark; write the CSV without one");
  throw input_error("fp8a.trace.501",
                    path + ":1: not an amax trace: expected the CSV header '" +
                        std::string(kCsvHeader) + "' or nvdlfw_inspect statistics lines " +
                        std::string(kNvdlfwLayout) + ", found " + shown(first));
}

// Reads a capture CSV into the builder; returns its note.
std::string load_csv(std::string_view text, const std::string& path, TraceBuilder* builder) {
  FileValues values;
  parse_csv(text, path, builder, &values);
  if (values.count == 0)
    throw input_error("fp8a.trace.506",
                      path + ": no amax rows after the header '" + std::string(kCsvHeader) + "'");
  check_repeats(path, *builder, &values);
  builder->add_file(values);
  return path + ": capture CSV, " + count_of(values.count, "amax value", "amax values");
}

// An nvdlfw_inspect log's note, once it is read (fp8a.trace.506 when it gave nothing to use).
std::string nvdlfw_note(const std::string& path, const NvdlfwCounts& counts) {
  if (counts.amax_values == 0 && counts.fp8_stats == 0)
    throw input_error("fp8a.trace.506",
                      path + ": no cur_amax values and no FP8 statistics of activation, weight "
                             "or gradient among " +
                          count_of(counts.lines, "statistics line", "statistics lines") +
                          "; log them with LogTensorStats, stats [cur_amax], tensors "
                          "[activation, weight, gradient]");
  std::string note = path + ": nvdlfw_inspect statistics log, " +
                     count_of(counts.amax_values, "cur_amax value", "cur_amax values");
  if (counts.fp8_stats > 0)
    note += ", " + count_of(counts.fp8_stats, "FP8 statistic", "FP8 statistics") + " (LogFp8TensorStats)";
  if (counts.tensor_stats > 0)
    note += ", " + count_of(counts.tensor_stats, "mean or std value", "mean and std values");
  if (counts.other_stats > 0)
    note += "; skipped " + count_of(counts.other_stats, "line", "lines") + " of other statistics";
  if (counts.other_tensors > 0) {
    note += "; skipped " + count_of(counts.other_tensors, "line", "lines") + " of other tensors (";
    bool comma = false;
    for (const auto& t : counts.other_tensor_names) {
      note += (comma ? ", " : "") + escaped_input(t, kShownNameBytes);
      comma = true;
    }
    if (counts.more_tensor_names) note += ", ...";
    note += ")";
  }
  return note;
}

}  // namespace

const char* logged_recipe_name(LoggedRecipe r) {
  if (r == LoggedRecipe::kTraining) return "";
  for (const auto& n : kLoggedRecipeNames)
    if (n.recipe == r) return n.text.data();
  return "";
}

const char* logged_stat_name(LoggedStatKind s) {
  for (const auto& n : kFp8StatSuffixes)
    if (n.kind == s) return n.text.data() + 1;  // without the leading "_"
  return "";
}

const AmaxSeries* TrainingLog::find(const std::string& layer, Role role) const {
  const auto it = series.find(SeriesKey(layer, role));
  return it == series.end() ? nullptr : &it->second;
}

TrainingLog load_training_log(const std::vector<std::string>& paths, const FileSystem& fs, LoggedStepSink* sink) {
  TrainingLog trace;
  std::vector<std::string> repeated_notes;
  for (const auto& p : paths) {
    switch (fs.kind(p)) {
      case FileSystem::Kind::kMissing:
        throw input_error("fp8a.io.101", p + ": no such file or directory");
      case FileSystem::Kind::kDirectory:
      case FileSystem::Kind::kOther:
        throw input_error("fp8a.io.102",
                          p + ": not a regular file (give the trace files themselves)");
      case FileSystem::Kind::kFile:
        break;
    }
    if (std::find(trace.files.begin(), trace.files.end(), p) != trace.files.end()) {
      const std::string note = p + ": listed more than once, read once";
      if (std::find(repeated_notes.begin(), repeated_notes.end(), note) == repeated_notes.end())
        repeated_notes.push_back(note);
      continue;
    }
    trace.files.push_back(p);
  }

  // The capture CSVs first, then the nvdlfw_inspect logs together, step by step.
  TraceBuilder builder;
  std::vector<std::pair<Mapped, std::size_t>> logs;  // the nvdlfw_inspect logs, each with its index in files
  std::vector<std::string> notes(trace.files.size());
  for (std::size_t i = 0; i < trace.files.size(); ++i) {
    const std::string& path = trace.files[i];
    Mapped m = map_text(path, fs);
    if (detect_format(m.text, path) == Format::kCsv) {
      notes[i] = load_csv(m.text, path, &builder);
      continue;
    }
    logs.emplace_back(std::move(m), i);
  }
  // Each log parsed ahead of its reader by up to two chunks a thread, in at most kAheadBytes of
  // text over all logs.
  constexpr std::size_t kAheadBytes = std::size_t{256} << 20, kMinChunk = std::size_t{64} << 10,
                        kMaxChunk = std::size_t{4} << 20;
  const std::size_t threads = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  const std::size_t ahead = 2 * std::max<std::size_t>(1, threads);  // --threads limits it
  const std::size_t chunk_bytes =
      logs.empty() ? kMaxChunk : std::clamp(kAheadBytes / (logs.size() * ahead), kMinChunk, kMaxChunk);
  std::vector<NvdlfwCursor> cursors;
  cursors.reserve(logs.size());
  for (const auto& [m, i] : logs)
    cursors.emplace_back(m.mapping, m.text, trace.files[i], i, &builder, ahead, chunk_bytes);
  std::map<std::pair<std::uint32_t, std::int64_t>, float> csv_amax;
  if (sink != nullptr && cursors.size() < trace.files.size()) builder.cells_by_step(&csv_amax);
  StepMerger(&trace, &builder, sink, &csv_amax).run(cursors);
  for (const NvdlfwCursor& c : cursors) {
    notes[c.file()] = nvdlfw_note(c.path(), c.counts());
    if (c.counts().four_decimals > 0) trace.rounded = true;
  }
  trace.notes = std::move(notes);
  trace.notes.insert(trace.notes.end(), repeated_notes.begin(), repeated_notes.end());
  if (trace.rounded)
    trace.notes.push_back(
        "nvdlfw_inspect prints values with 4 decimals (value={:.4f}): amaxes are rounded to 0.0001 "
        "and an amax below 0.00005 reads as 0");
  const std::size_t merged = builder.finish(&trace);
  if (merged > 0)
    trace.notes.push_back(
        count_of(merged, "value", "values") +
        " from several files merged by max (TE reduces amax across ranks with max)");
  trace.names = builder.names();
  return trace;
}

}  // namespace fp8a
