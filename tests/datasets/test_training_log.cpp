// load_training_log over an in-memory file system: the capture CSV and nvdlfw_inspect statistics
// logs, format detection, merging of per-rank files by max, notes, and every error message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/training_log.hpp"
#include "core/error.hpp"

using fp8a::AmaxSeries;
using fp8a::TrainingLog;
using fp8a::Error;
using fp8a::load_training_log;
using fp8a::MemoryFileSystem;
using fp8a::Role;

namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

MemoryFileSystem one_file(const std::string& path, std::string_view text) {
  MemoryFileSystem fs;
  fs.add_file(path, bytes_of(text));
  return fs;
}

// One line exactly as nvdlfw_inspect's FileLogger.log_scalar writes it (without the logging
// prefix): "{} \t\t\t\t iteration={:06d} \t\t\t\t value={:.4f}".
std::string stat_line(const std::string& name, int iteration, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%06d", iteration);
  std::string line = name + " \t\t\t\t iteration=" + buf + " \t\t\t\t value=";
  std::snprintf(buf, sizeof buf, "%.4f", value);
  return line + buf + "\n";
}

// The prefix of Python logging's "%(asctime)s - %(levelname)s - %(message)s" formatter.
constexpr std::string_view kLogPrefix = "2025-01-01 12:00:00,123 - INFO - ";

const AmaxSeries& series_of(const TrainingLog& t, const std::string& layer, Role role) {
  const AmaxSeries* s = t.find(layer, role);
  REQUIRE(s != nullptr);
  return *s;
}

}  // namespace

TEST_CASE("CSV: several tensors and steps, exact float32 values, nan and inf") {
  const auto fs = one_file("trace.csv",
                           "step,tensor,amax\n"
                           "0,layers.0.fc1.activation,0.5\n"
                           "0,layers.0.fc1.weight,1e-30\n"
                           "0,layers.0.fc1.gradient,3.4028235e38\n"
                           "1,layers.0.fc1.activation,nan\n"
                           "1,layers.0.fc1.weight,inf\n"
                           "1,layers.0.fc1.gradient,0\n"
                           "7,layers.0.fc1.activation,NaN\n"
                           "7,layers.0.fc1.weight,INF\n"
                           "7,layers.0.fc1.gradient,-0\n"
                           "3,layers.10.fc2.weight,1.4e-45\n"
                           "2,layers.10.fc2.weight,448\n");
  const TrainingLog t = load_training_log({"trace.csv"}, fs);
  CHECK(t.files == std::vector<std::string>{"trace.csv"});
  CHECK_FALSE(t.rounded);
  CHECK(t.notes == std::vector<std::string>{"trace.csv: capture CSV, 11 amax values"});
  REQUIRE(t.series.size() == 4);

  const auto& act = series_of(t, "layers.0.fc1", Role::kActivation).amax_by_step;
  REQUIRE(act.size() == 3);
  CHECK(act.at(0) == 0.5f);
  CHECK(std::isnan(act.at(1)));
  CHECK(std::isnan(act.at(7)));

  const auto& w = series_of(t, "layers.0.fc1", Role::kWeight).amax_by_step;
  REQUIRE(w.size() == 3);
  CHECK(w.at(0) == 1e-30f);
  CHECK(w.at(1) == std::numeric_limits<float>::infinity());
  CHECK(w.at(7) == std::numeric_limits<float>::infinity());

  const auto& g = series_of(t, "layers.0.fc1", Role::kGradient).amax_by_step;
  REQUIRE(g.size() == 3);
  CHECK(g.at(0) == std::numeric_limits<float>::max());
  CHECK(g.at(1) == 0.0f);
  CHECK(g.at(7) == 0.0f);
  CHECK_FALSE(std::signbit(g.at(7)));  // -0 reads as 0

  // Steps need not be in order in the file; the series is ordered by step.
  const auto& w2 = series_of(t, "layers.10.fc2", Role::kWeight).amax_by_step;
  REQUIRE(w2.size() == 2);
  CHECK(w2.begin()->first == 2);
  CHECK(w2.at(2) == 448.0f);
  CHECK(w2.at(3) == std::numeric_limits<float>::denorm_min());

  CHECK(t.find("layers.10.fc2", Role::kActivation) == nullptr);
  CHECK(t.find("layers.1.fc1", Role::kWeight) == nullptr);
}

TEST_CASE("CSV: CRLF line ends, blank lines, quoted tensor names") {
  const auto fs = one_file("t.csv",
                           "step,tensor,amax\r\n"
                           "\r\n"
                           "5,\"model.blocks[0,1].proj.activation\",2.25\r\n"
                           "\n"
                           "   \r\n"
                           "5,\"say \"\"hi\"\".weight\",1.5\r\n"
                           "\"6\",plain.gradient,\"0.125\"\r\n"
                           "6,\"model.blocks[0,1].proj.activation\",4\r\n");  // same key, next step
  const TrainingLog t = load_training_log({"t.csv"}, fs);
  REQUIRE(t.series.size() == 3);
  const auto& a = series_of(t, "model.blocks[0,1].proj", Role::kActivation).amax_by_step;
  REQUIRE(a.size() == 2);
  CHECK(a.at(5) == 2.25f);
  CHECK(a.at(6) == 4.0f);
  CHECK(series_of(t, "say \"hi\"", Role::kWeight).amax_by_step.at(5) == 1.5f);
  CHECK(series_of(t, "plain", Role::kGradient).amax_by_step.at(6) == 0.125f);
  CHECK(t.notes == std::vector<std::string>{"t.csv: capture CSV, 4 amax values"});
}

TEST_CASE("CSV without a final newline") {
  const auto fs = one_file("t.csv", "step,tensor,amax\n3,a.b.weight,1.75");
  const TrainingLog t = load_training_log({"t.csv"}, fs);
  CHECK(series_of(t, "a.b", Role::kWeight).amax_by_step.at(3) == 1.75f);
}

TEST_CASE("nvdlfw_inspect log: cur_amax of activation, weight, gradient; the rest skipped") {
  const std::string qkv = "decoder.layers.1.self_attention.linear_qkv";
  const std::string fc2 = "decoder.layers.1.mlp.linear_fc2";
  std::string log;
  // Without a prefix, exactly the template.
  log += stat_line(qkv + "_activation_cur_amax", 120, 3.5);
  log += stat_line(qkv + "_activation_underflows%", 120, 0.25);
  log += stat_line(qkv + "_activation_mse", 120, 0.00001);
  log += stat_line(qkv + "_activation_fp8_delayed_scaling_overflows%", 120, 0.0);
  log += stat_line(qkv + "_output_cur_amax", 120, 9.0);
  log += stat_line(qkv + "_weight_cur_amax", 120, 0.0625);
  log += stat_line(qkv + "_gradient_cur_amax", 120, 0.00003);  // prints 0.0000
  // With the logging prefix (timestamp and level), and CRLF.
  std::string l = std::string(kLogPrefix) + stat_line(qkv + "_activation_cur_amax", 121, 4.0);
  l.insert(l.size() - 1, "\r");
  log += l;
  log += std::string(kLogPrefix) + stat_line(fc2 + "_weight_cur_amax", 121, 123456.78125);
  log += std::string(kLogPrefix) + stat_line(fc2 + "_wgrad_cur_amax", 121, 1.0);
  log += std::string(kLogPrefix) + stat_line(fc2 + "_dgrad_cur_amax", 121, 1.0);
  log += std::string(kLogPrefix) + stat_line(fc2 + "_weight_scale_inv_min", 121, 1.0);
  // Other spacing is fine too.
  log += "\n" + fc2 + "_activation_cur_amax iteration=000122\tvalue=inf  \n";
  log += "  " + fc2 + "_gradient_cur_amax\titeration=1000000 value=nan\n";

  const auto fs = one_file("logs/nvdlfw_inspect_globalrank-0.log", log);
  const TrainingLog t = load_training_log({"logs/nvdlfw_inspect_globalrank-0.log"}, fs);
  CHECK(t.rounded);
  CHECK(t.notes ==
        std::vector<std::string>{
            "logs/nvdlfw_inspect_globalrank-0.log: nvdlfw_inspect statistics log, 7 cur_amax "
            "values, 4 FP8 statistics (LogFp8TensorStats); skipped 3 lines of other tensors "
            "(dgrad, output, wgrad)",
            "nvdlfw_inspect prints values with 4 decimals (value={:.4f}): amaxes are rounded to "
            "0.0001 and an amax below 0.00005 reads as 0"});
  REQUIRE(t.series.size() == 6);
  const auto& a = series_of(t, qkv, Role::kActivation).amax_by_step;
  REQUIRE(a.size() == 2);
  CHECK(a.at(120) == 3.5f);
  CHECK(a.at(121) == 4.0f);
  CHECK(series_of(t, qkv, Role::kWeight).amax_by_step.at(120) == 0.0625f);
  CHECK(series_of(t, qkv, Role::kGradient).amax_by_step.at(120) == 0.0f);
  CHECK(series_of(t, fc2, Role::kWeight).amax_by_step.at(121) == 123456.78125f);
  CHECK(std::isinf(series_of(t, fc2, Role::kActivation).amax_by_step.at(122)));
  CHECK(std::isnan(series_of(t, fc2, Role::kGradient).amax_by_step.at(1000000)));
}

TEST_CASE("per-rank logs merged by max, NaN wins; a CSV can join them") {
  MemoryFileSystem fs;
  const std::string a = "layers.0.fc1";
  fs.add_file("r/nvdlfw_inspect_globalrank-0.log",
              bytes_of(stat_line(a + "_activation_cur_amax", 1, 2.0) +
                       stat_line(a + "_weight_cur_amax", 1, 1.0) +
                       stat_line(a + "_gradient_cur_amax", 1, 0.5) +
                       stat_line(a + "_activation_cur_amax", 2, 5.0)));
  fs.add_file("r/nvdlfw_inspect_globalrank-1.log",
              bytes_of(stat_line(a + "_activation_cur_amax", 1, 3.0) +
                       stat_line(a + "_weight_cur_amax", 1, 1.0) +
                       stat_line(a + "_gradient_cur_amax", 1, std::nan("")) +
                       stat_line(a + "_activation_cur_amax", 2, 4.0) +
                       stat_line(a + "_gradient_cur_amax", 2, 0.25)));
  fs.add_file("extra.csv", bytes_of("step,tensor,amax\n2,layers.0.fc1.activation,4.5\n"
                                    "9,layers.0.fc1.weight,8\n"));
  const TrainingLog t =
      load_training_log({"r/nvdlfw_inspect_globalrank-1.log", "r/nvdlfw_inspect_globalrank-0.log",
                       "extra.csv", "r/nvdlfw_inspect_globalrank-1.log"},
                      fs);
  CHECK(t.files == std::vector<std::string>{"r/nvdlfw_inspect_globalrank-1.log",
                                            "r/nvdlfw_inspect_globalrank-0.log", "extra.csv"});
  CHECK(t.rounded);
  CHECK(t.notes ==
        std::vector<std::string>{
            "r/nvdlfw_inspect_globalrank-1.log: nvdlfw_inspect statistics log, 5 cur_amax values",
            "r/nvdlfw_inspect_globalrank-0.log: nvdlfw_inspect statistics log, 4 cur_amax values",
            "extra.csv: capture CSV, 2 amax values",
            "r/nvdlfw_inspect_globalrank-1.log: listed more than once, read once",
            "nvdlfw_inspect prints values with 4 decimals (value={:.4f}): amaxes are rounded to "
            "0.0001 and an amax below 0.00005 reads as 0",
            "4 values from several files merged by max (TE reduces amax across ranks with max)"});
  const auto& act = series_of(t, a, Role::kActivation).amax_by_step;
  REQUIRE(act.size() == 2);
  CHECK(act.at(1) == 3.0f);
  CHECK(act.at(2) == 5.0f);  // 5, 4 and 4.5 from three files
  const auto& w = series_of(t, a, Role::kWeight).amax_by_step;
  REQUIRE(w.size() == 2);
  CHECK(w.at(1) == 1.0f);
  CHECK(w.at(9) == 8.0f);
  const auto& g = series_of(t, a, Role::kGradient).amax_by_step;
  REQUIRE(g.size() == 2);
  CHECK(std::isnan(g.at(1)));
  CHECK(g.at(2) == 0.25f);
}

TEST_CASE("io: missing path, directory") {
  MemoryFileSystem fs;
  fs.add_file("dir/a.csv", bytes_of("step,tensor,amax\n0,a.weight,1\n"));
  CHECK_THROWS_WITH_AS(load_training_log({"nope.csv"}, fs),
                       "[fp8a.io.101] nope.csv: no such file or directory", Error);
  CHECK_THROWS_WITH_AS(load_training_log({"dir"}, fs),
                       "[fp8a.io.102] dir: not a regular file (give the trace files themselves)",
                       Error);
  // Paths are all checked before any file is read.
  fs.add_file("bad.csv", bytes_of("nonsense\n"));
  CHECK_THROWS_WITH_AS(load_training_log({"bad.csv", "nope.csv"}, fs),
                       "[fp8a.io.101] nope.csv: no such file or directory", Error);
}

TEST_CASE("501: neither format") {
  CHECK_THROWS_WITH_AS(
      load_training_log({"x.csv"}, one_file("x.csv", "step,tensor,amax,rank\n0,a.weight,1,0\n")),
      "[fp8a.trace.501] x.csv:1: not an amax trace: expected the CSV header 'step,tensor,amax' or "
      "nvdlfw_inspect statistics lines '<layer>_<tensor>_<stat> iteration=<N> value=<V>', found "
      "'step,tensor,amax,rank'",
      Error);
  // Long first lines are cut at 60 characters, with the line's length; control bytes escaped.
  CHECK_THROWS_WITH_AS(
      load_training_log({"x.log"}, one_file("x.log",
                                          "2025-01-01 12:00:00,123 - INFO - Loaded config "
                                          "file\tconfig.yaml for all layers of the model\n"
                                          "more\n")),
      "[fp8a.trace.501] x.log:1: not an amax trace: expected the CSV header 'step,tensor,amax' or "
      "nvdlfw_inspect statistics lines '<layer>_<tensor>_<stat> iteration=<N> value=<V>', found "
      "'2025-01-01 12:00:00,123 - INFO - Loaded config file\\tconfig.y...' (91 bytes)",
      Error);
  CHECK_THROWS_WITH_AS(
      load_training_log({"x.st"}, one_file("x.st", std::string_view("\x10\0\0\0\0\0\0\0{}", 10))),
      "[fp8a.trace.501] x.st:1: not an amax trace: expected the CSV header 'step,tensor,amax' or "
      "nvdlfw_inspect statistics lines '<layer>_<tensor>_<stat> iteration=<N> value=<V>', found "
      "'\\x10\\x00\\x00\\x00\\x00\\x00\\x00\\x00{}'",
      Error);
  CHECK_THROWS_WITH_AS(load_training_log({"e.csv"}, one_file("e.csv", "")),
                       "[fp8a.trace.501] e.csv: not an amax trace: the file is empty", Error);
  CHECK_THROWS_WITH_AS(load_training_log({"e.csv"}, one_file("e.csv", "\n \r\n\n")),
                       "[fp8a.trace.501] e.csv: not an amax trace: the file is empty", Error);
  CHECK_THROWS_WITH_AS(
      load_training_log({"b.csv"}, one_file("b.csv", "\xEF\xBB\xBFstep,tensor,amax\n0,a.weight,1\n")),
      "[fp8a.trace.501] b.csv:1: not an amax trace: the file starts with a UTF-8 byte-order mark; "
      "write the CSV without one",
      Error);
}

TEST_CASE("502: malformed CSV rows") {
  const auto load = [](std::string_view rows) {
    return load_training_log(
        {"t.csv"}, one_file("t.csv", "step,tensor,amax\n0,a.weight,1\n" + std::string(rows)));
  };
  CHECK_THROWS_WITH_AS(load("1,a.weight\n"),
                       "[fp8a.trace.502] t.csv:3: malformed CSV row: expected 3 fields "
                       "step,tensor,amax, found 2",
                       Error);
  CHECK_THROWS_WITH_AS(load("\n1,a.weight,1,\n"),
                       "[fp8a.trace.502] t.csv:4: malformed CSV row: expected 3 fields "
                       "step,tensor,amax, found 4",
                       Error);
  CHECK_THROWS_WITH_AS(load("1,layers.0,1.activation,2\n"),
                       "[fp8a.trace.502] t.csv:3: malformed CSV row: expected 3 fields "
                       "step,tensor,amax, found 4",
                       Error);
  CHECK_THROWS_WITH_AS(load("1,\"a,b.weight,2\n"),
                       "[fp8a.trace.502] t.csv:3: malformed CSV row: field 2 opens a double quote "
                       "that is never closed",
                       Error);
  CHECK_THROWS_WITH_AS(load("1,\"a\"b.weight,2\n"),
                       "[fp8a.trace.502] t.csv:3: malformed CSV row: field 2 has text after its "
                       "closing double quote",
                       Error);
}

TEST_CASE("502: malformed nvdlfw_inspect lines") {
  const std::string good = stat_line("l_weight_cur_amax", 1, 1.0);
  const auto load = [&](const std::string& bad) {
    return load_training_log({"r.log"}, one_file("r.log", good + bad));
  };
  const std::string expected = "; expected '<layer>_<tensor>_<stat> iteration=<N> value=<V>'";
  CHECK_THROWS_WITH_AS(
      load("2025-01-01 12:00:00,123 - WARNING - something else\n"),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: no 'iteration='" +
       expected)
          .c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      load("l_weight_cur_amax \t\t\t\t iteration=000002\n"),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: no 'value=' after "
       "the iteration" +
       expected)
          .c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      load("l_weight_cur_amax \t\t\t\t iteration=000002 \t\t\t\t value=1.0000 (rank 3)\n"),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: text after the "
       "value: '(rank 3)'" +
       expected)
          .c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      load(" \t iteration=000002 value=1.0000\n"),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: no statistic name "
       "before 'iteration='" +
       expected)
          .c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      load("l_weight_cur_amaxiteration=000002 value=1.0000\n"),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: no statistic name "
       "before 'iteration='" +
       expected)
          .c_str(),
      Error);
  // A log is recognised by any statistics line; then every non-blank line must be one.
  CHECK_THROWS_WITH_AS(
      load_training_log({"r.log"}, one_file("r.log", "\nconfig loaded\n" + good)),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: no 'iteration='" +
       expected)
          .c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      load(stat_line("activation_cur_amax", 2, 1.0)),
      ("[fp8a.trace.502] r.log:2: malformed nvdlfw_inspect statistics line: statistic "
       "'activation_cur_amax' names no layer" +
       expected)
          .c_str(),
      Error);
}

TEST_CASE("503: bad numbers") {
  const auto csv = [](std::string_view row) {
    return load_training_log({"t.csv"}, one_file("t.csv", "step,tensor,amax\n" + std::string(row)));
  };
  CHECK_THROWS_WITH_AS(csv("-1,a.weight,1\n"),
                       "[fp8a.trace.503] t.csv:2: step '-1' is not a non-negative integer", Error);
  CHECK_THROWS_WITH_AS(csv("+1,a.weight,1\n"),
                       "[fp8a.trace.503] t.csv:2: step '+1' is not a non-negative integer", Error);
  CHECK_THROWS_WITH_AS(csv("1.0,a.weight,1\n"),
                       "[fp8a.trace.503] t.csv:2: step '1.0' is not a non-negative integer", Error);
  CHECK_THROWS_WITH_AS(csv("99999999999999999999,a.weight,1\n"),
                       "[fp8a.trace.503] t.csv:2: step '99999999999999999999' is not a "
                       "non-negative integer",
                       Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,-0.5\n"),
                       "[fp8a.trace.503] t.csv:2: amax '-0.5' is negative", Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,-inf\n"),
                       "[fp8a.trace.503] t.csv:2: amax '-inf' is negative", Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,-1e39\n"),
                       "[fp8a.trace.503] t.csv:2: amax '-1e39' is negative", Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,\n"), "[fp8a.trace.503] t.csv:2: amax '' is not a number",
                       Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight, 1\n"),
                       "[fp8a.trace.503] t.csv:2: amax ' 1' is not a number", Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,1.5x\n"),
                       "[fp8a.trace.503] t.csv:2: amax '1.5x' is not a number", Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,0x10\n"),
                       "[fp8a.trace.503] t.csv:2: amax '0x10' is not a number", Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,1e39\n"),
                       "[fp8a.trace.503] t.csv:2: amax '1e39' is outside the float32 range "
                       "(1.4e-45 to 3.4028235e38)",
                       Error);
  CHECK_THROWS_WITH_AS(csv("1,a.weight,1e-50\n"),
                       "[fp8a.trace.503] t.csv:2: amax '1e-50' is outside the float32 range "
                       "(1.4e-45 to 3.4028235e38)",
                       Error);

  const auto log = [](const std::string& line) {
    return load_training_log({"r.log"}, one_file("r.log", line));
  };
  CHECK_THROWS_WITH_AS(log("l_weight_cur_amax \t\t\t\t iteration=-00001 \t\t\t\t value=1.0000\n"),
                       "[fp8a.trace.503] r.log:1: iteration '-00001' is not a non-negative integer",
                       Error);
  CHECK_THROWS_WITH_AS(log("l_weight_cur_amax \t\t\t\t iteration= \t\t\t\t value=1.0000\n"),
                       "[fp8a.trace.503] r.log:1: iteration '' is not a non-negative integer",
                       Error);
  CHECK_THROWS_WITH_AS(
      log("l_weight_cur_amax \t\t\t\t iteration=000001 \t\t\t\t value=tensor(1.)\n"),
      "[fp8a.trace.503] r.log:1: cur_amax value 'tensor(1.)' is not a number", Error);
  CHECK_THROWS_WITH_AS(log("l_weight_cur_amax \t\t\t\t iteration=000001 \t\t\t\t value=-2.0000\n"),
                       "[fp8a.trace.503] r.log:1: cur_amax value '-2.0000' is negative", Error);
  // Numbers of skipped statistics are not read; those of FP8 statistics are.
  CHECK_NOTHROW(log("l_weight_l1_norm \t\t\t\t iteration=x \t\t\t\t value=y\n" +
                    stat_line("l_weight_cur_amax", 1, 1.0)));
  CHECK_THROWS_WITH_AS(log("l_weight_mse \t\t\t\t iteration=x \t\t\t\t value=y\n"),
                       "[fp8a.trace.503] r.log:1: iteration 'x' is not a non-negative integer",
                       Error);
}

TEST_CASE("504: CSV tensor name is not <layer>.<role>") {
  const auto csv = [](std::string_view row) {
    return load_training_log({"t.csv"}, one_file("t.csv", "step,tensor,amax\n" + std::string(row)));
  };
  CHECK_THROWS_WITH_AS(csv("0,layers.0.fc1.output,1\n"),
                       "[fp8a.trace.504] t.csv:2: tensor 'layers.0.fc1.output' is not "
                       "<layer>.<role> with role activation, weight or gradient",
                       Error);
  CHECK_THROWS_WITH_AS(csv("0,weight,1\n"),
                       "[fp8a.trace.504] t.csv:2: tensor 'weight' is not <layer>.<role> with role "
                       "activation, weight or gradient",
                       Error);
  CHECK_THROWS_WITH_AS(csv("0,.weight,1\n"),
                       "[fp8a.trace.504] t.csv:2: tensor '.weight' is not <layer>.<role> with role "
                       "activation, weight or gradient",
                       Error);
  // Names are shown whole, however long.
  const std::string long_name =
      "model.language_model.decoder.layers.10.self_attention.linear_qkv.out";
  CHECK_THROWS_WITH_AS(csv("0," + long_name + ",1\n"),
                       ("[fp8a.trace.504] t.csv:2: tensor '" + long_name +
                        "' is not <layer>.<role> with role activation, weight or gradient")
                           .c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(csv("0,layers.0.fc1_weight,1\n"),
                       "[fp8a.trace.504] t.csv:2: tensor 'layers.0.fc1_weight' is not "
                       "<layer>.<role> with role activation, weight or gradient",
                       Error);
}

TEST_CASE("505: the same (layer, role, step) twice in one file") {
  CHECK_THROWS_WITH_AS(
      load_training_log({"t.csv"}, one_file("t.csv",
                                          "step,tensor,amax\n"
                                          "0,a.weight,1\n"
                                          "0,a.activation,1\n"
                                          "1,a.weight,1\n"
                                          "1,a.activation,1\n"
                                          "0,a.weight,2\n"
                                          "1,a.activation,1\n"
                                          "0,a.weight,3\n")),
      "[fp8a.trace.505] t.csv:6: duplicate row: step 0, tensor 'a.weight' already given on line 2",
      Error);
  // Quoted and unquoted spellings of one name are the same tensor.
  CHECK_THROWS_WITH_AS(
      load_training_log({"t.csv"}, one_file("t.csv",
                                          "step,tensor,amax\n"
                                          "4,\"a,b.gradient\",1\n"
                                          "4,\"a,b.gradient\",1\n")),
      "[fp8a.trace.505] t.csv:3: duplicate row: step 4, tensor 'a,b.gradient' already given on "
      "line 2",
      Error);
  CHECK_THROWS_WITH_AS(
      load_training_log({"r.log"},
                      one_file("r.log", stat_line("l.fc1_gradient_cur_amax", 7, 1.0) +
                                            stat_line("l.fc1_weight_cur_amax", 7, 1.0) +
                                            std::string(kLogPrefix) +
                                            stat_line("l.fc1_gradient_cur_amax", 7, 2.0))),
      "[fp8a.trace.505] r.log:3: duplicate line: 'l.fc1_gradient_cur_amax' at iteration 7 already "
      "given on line 1",
      Error);
}

TEST_CASE("508: an nvdlfw_inspect log whose iterations go back") {
  // Each rank's log is read step by step beside the others; a line of an earlier step after a
  // later one's is refused, naming it (TE writes every step's lines before the next step's).
  MemoryFileSystem fs;
  fs.add_file("r0.log", bytes_of(stat_line("l_weight_cur_amax", 1, 1.0) + stat_line("l_weight_cur_amax", 2, 1.0)));
  fs.add_file("r1.log", bytes_of(stat_line("l_weight_cur_amax", 1, 1.0) + stat_line("l_weight_cur_amax", 3, 1.0) +
                                 stat_line("l_activation_underflows%", 2, 1.0)));
  CHECK_THROWS_WITH_AS(load_training_log({"r0.log", "r1.log"}, fs),
                       "[fp8a.trace.508] r1.log:3: iteration 2 after iteration 3: an nvdlfw_inspect log goes step "
                       "by step, as TE writes it (sort it by iteration)",
                       Error);
  // Steps need not be contiguous, nor the same in every file.
  fs.add_file("r2.log", bytes_of(stat_line("l_weight_cur_amax", 0, 1.0) + stat_line("l_weight_cur_amax", 5, 2.0)));
  const TrainingLog t = load_training_log({"r0.log", "r2.log"}, fs);
  CHECK(series_of(t, "l", Role::kWeight).amax_by_step == fp8a::AmaxByStep{{0, 1.0f}, {1, 1.0f}, {2, 1.0f}, {5, 2.0f}});
}

TEST_CASE("506: no amax entries") {
  CHECK_THROWS_WITH_AS(load_training_log({"t.csv"}, one_file("t.csv", "step,tensor,amax\r\n\r\n")),
                       "[fp8a.trace.506] t.csv: no amax rows after the header 'step,tensor,amax'",
                       Error);
  CHECK_THROWS_WITH_AS(
      load_training_log({"r.log"}, one_file("r.log", stat_line("l_output_underflows%", 1, 0.5) +
                                                       stat_line("l_activation_min", 1, 0.5) +
                                                       stat_line("l_output_cur_amax", 1, 2.0))),
      "[fp8a.trace.506] r.log: no cur_amax values and no FP8 statistics of activation, weight or "
      "gradient among 3 statistics lines; log them with LogTensorStats, stats [cur_amax], "
      "tensors [activation, weight, gradient]",
      Error);
}

TEST_CASE("nvdlfw_inspect log: at most 8 skipped tensor names are listed") {
  std::string log = stat_line("l_weight_cur_amax", 0, 1.0);
  for (const char* t : {"a", "b", "c", "d", "e", "f", "g", "h", "i", "a"})
    log += stat_line(std::string("l_") + t + "_cur_amax", 0, 1.0);
  const TrainingLog t = load_training_log({"r.log"}, one_file("r.log", log));
  REQUIRE(!t.notes.empty());
  CHECK(t.notes[0] ==
        "r.log: nvdlfw_inspect statistics log, 1 cur_amax value; skipped 10 lines of other "
        "tensors (a, b, c, d, e, f, g, h, ...)");
}

TEST_CASE("nvdlfw_inspect log: LogFp8TensorStats values are kept as logged") {
  // Names as TE's stats_buffer logs them: f"{layer}_{tensor}_{stat}", stat =
  // "[<recipe>_]<stat>[_columnwise]" (debug/features/log_fp8_tensor_stats.py).
  std::string log;
  log += stat_line("decoder.layers.0.mlp.linear_fc1_activation_underflows%", 10, 1.25);
  log += stat_line("decoder.layers.0.mlp.linear_fc1_gradient_mxfp8_underflows%_columnwise", 10, 0.5);
  log += stat_line("decoder.layers.0.mlp.linear_fc1_weight_fp8_block_scaling_scale_inv_min", 10, 0.0001);
  log += stat_line("my_layer_with_mse_weight_fp8_current_scaling_mse", 11, 2.5);
  log += stat_line("lin_activation_fp8_delayed_scaling_overflows%", 12, 0.03);
  log += stat_line("lin_gradient_scale_inv_max", 12, 1024.0);
  log += stat_line("lin_wgrad_underflows%", 12, 1.0);   // not a GEMM operand: skipped
  log += stat_line("lin_activation_l1_norm", 12, 1.0);  // LogTensorStats: skipped
  const TrainingLog t = load_training_log({"r.log"}, one_file("r.log", log));
  CHECK(t.series.empty());
  CHECK_FALSE(t.rounded);  // no amax was read from the log
  CHECK(t.notes == std::vector<std::string>{
                       "r.log: nvdlfw_inspect statistics log, 0 cur_amax values, 6 FP8 statistics "
                       "(LogFp8TensorStats); skipped 1 line of other statistics; skipped 1 line of "
                       "other tensors (wgrad)"});
  REQUIRE(t.fp8_stats.size() == 6);
  const auto& a = t.fp8_stats[0];
  CHECK(a.layer == "decoder.layers.0.mlp.linear_fc1");
  CHECK(a.role == Role::kActivation);
  CHECK(a.step == 10);
  CHECK(a.recipe == fp8a::LoggedRecipe::kTraining);
  CHECK(a.stat == fp8a::LoggedStatKind::kUnderflowPct);
  CHECK_FALSE(a.columnwise);
  CHECK(a.value == 1.25);
  CHECK(a.file == 0);
  CHECK(a.line == 1);
  const auto& b = t.fp8_stats[1];
  CHECK(b.role == Role::kGradient);
  CHECK(b.recipe == fp8a::LoggedRecipe::kMxfp8);
  CHECK(b.columnwise);
  CHECK(t.fp8_stats[2].recipe == fp8a::LoggedRecipe::kBlock);
  CHECK(t.fp8_stats[2].stat == fp8a::LoggedStatKind::kScaleInvMin);
  CHECK(t.fp8_stats[2].value == 0.0001);
  CHECK(t.fp8_stats[3].layer == "my_layer_with_mse");
  CHECK(t.fp8_stats[3].recipe == fp8a::LoggedRecipe::kCurrent);
  CHECK(t.fp8_stats[3].stat == fp8a::LoggedStatKind::kMse);
  CHECK(t.fp8_stats[4].recipe == fp8a::LoggedRecipe::kDelayed);
  CHECK(t.fp8_stats[4].stat == fp8a::LoggedStatKind::kOverflowPct);
  CHECK(t.fp8_stats[5].stat == fp8a::LoggedStatKind::kScaleInvMax);
  CHECK(t.fp8_stats[5].line == 6);
  CHECK(std::string(fp8a::logged_recipe_name(fp8a::LoggedRecipe::kBlock)) == "fp8_block_scaling");
  // LogNvfp4TensorStats names its stats "nvfp4_<stat>" (get_stat_with_prefix): the run's own NVFP4.
  const TrainingLog nv = load_training_log(
      {"n.log"}, one_file("n.log", stat_line("lin_gradient_nvfp4_underflows%", 3, 7.5) + stat_line("lin_gradient_nvfp4_mse", 3, 0.25)));
  REQUIRE(nv.fp8_stats.size() == 2);
  CHECK(nv.fp8_stats[0].layer == "lin");
  CHECK(nv.fp8_stats[0].role == Role::kGradient);
  CHECK(nv.fp8_stats[0].recipe == fp8a::LoggedRecipe::kNvfp4);
  CHECK(nv.fp8_stats[1].stat == fp8a::LoggedStatKind::kMse);
  CHECK(std::string(fp8a::logged_stat_name(fp8a::LoggedStatKind::kScaleInvMin)) == "scale_inv_min");

  CHECK_THROWS_WITH_AS(
      load_training_log({"r.log"}, one_file("r.log", "l_activation_mse iteration=1 value=x\n")),
      "[fp8a.trace.503] r.log:1: value 'x' of 'l_activation_mse' is not a number", Error);
  CHECK_THROWS_WITH_AS(
      load_training_log({"r.log"}, one_file("r.log", "_activation_mse iteration=1 value=1\n")),
      "[fp8a.trace.502] r.log:1: malformed nvdlfw_inspect statistics line: statistic "
      "'_activation_mse' names no layer; expected '<layer>_<tensor>_<stat> iteration=<N> "
      "value=<V>'",
      Error);
}

TEST_CASE("nvdlfw_inspect log: LogTensorStats mean and std are kept, with their rounding") {
  std::string log;
  log += stat_line("decoder.layers.0.mlp.linear_fc2_activation_mean", 10, 0.125);    // 0.1250: rounded
  log += "decoder.layers.0.mlp.linear_fc2_activation_std iteration=000010 value=1.0000000000000002\n";
  log += stat_line("decoder.layers.0.mlp.linear_fc2_gradient_underflows%", 10, 50.0);
  log += stat_line("a_b_weight_std", 11, 2.0);
  log += stat_line("lin_output_std", 11, 1.0);   // not a GEMM operand: skipped
  log += stat_line("lin_activation_l1_norm", 11, 1.0);  // skipped
  const TrainingLog t = load_training_log({"r.log"}, one_file("r.log", log));
  CHECK(t.notes == std::vector<std::string>{
                       "r.log: nvdlfw_inspect statistics log, 0 cur_amax values, 1 FP8 statistic "
                       "(LogFp8TensorStats), 3 mean and std values; skipped 1 line of other statistics; "
                       "skipped 1 line of other tensors (output)"});
  REQUIRE(t.tensor_stats.size() == 3);
  CHECK(t.tensor_stats[0].layer == "decoder.layers.0.mlp.linear_fc2");
  CHECK(t.tensor_stats[0].role == Role::kActivation);
  CHECK(t.tensor_stats[0].stat == fp8a::LoggedTensorStatKind::kMean);
  CHECK(t.tensor_stats[0].value == 0.125);
  CHECK(t.tensor_stats[0].rounded);
  CHECK(t.tensor_stats[1].stat == fp8a::LoggedTensorStatKind::kStd);
  CHECK(t.tensor_stats[1].value == 1.0000000000000002);
  CHECK_FALSE(t.tensor_stats[1].rounded);
  CHECK(t.tensor_stats[1].line == 2);
  CHECK(t.tensor_stats[2].layer == "a_b");
  CHECK(t.tensor_stats[2].role == Role::kWeight);
  CHECK(t.tensor_stats[2].step == 11);
  REQUIRE(t.fp8_stats.size() == 1);
  CHECK(t.fp8_stats[0].rounded);
  CHECK_THROWS_WITH_AS(load_training_log({"r.log"}, one_file("r.log", "l_activation_std iteration=1 value=x\n")),
                       "[fp8a.trace.503] r.log:1: value 'x' of 'l_activation_std' is not a number", Error);
  // Values no tensor can have: a percentage past 0..100, a negative std, mse or scale.
  CHECK_THROWS_WITH_AS(load_training_log({"r.log"}, one_file("r.log", "l_activation_underflows% iteration=1 value=100.5\n")),
                       "[fp8a.trace.503] r.log:1: value '100.5' of 'l_activation_underflows%' is not a percentage from "
                       "0 to 100", Error);
  CHECK_THROWS_WITH_AS(load_training_log({"r.log"}, one_file("r.log", "l_gradient_std iteration=1 value=-1\n")),
                       "[fp8a.trace.503] r.log:1: value '-1' of 'l_gradient_std' is negative", Error);
  CHECK_THROWS_AS(load_training_log({"r.log"}, one_file("r.log", "l_weight_mxfp8_mse iteration=1 value=-inf\n")), Error);
  CHECK_NOTHROW(load_training_log({"r.log"}, one_file("r.log", "l_weight_mxfp8_mse iteration=1 value=nan\n")));
  CHECK_NOTHROW(load_training_log({"r.log"}, one_file("r.log", "l_weight_mean iteration=1 value=-3\nl_weight_cur_amax iteration=1 value=3\n")));
}

TEST_CASE("501: a trace in UTF-16 or UTF-32 is named as such") {
  const std::string csv = "step,tensor,amax\n0,a.weight,1\n";
  std::string le = "\xFF\xFE", be = "\xFE\xFF";
  for (const char c : csv) {
    le += std::string{c, '\0'};
    be += std::string{'\0', c};
  }
  CHECK_THROWS_WITH_AS(load_training_log({"le.csv"}, one_file("le.csv", le)),
                       "[fp8a.trace.501] le.csv:1: not an amax trace: the file is UTF-16LE (it starts "
                       "with the byte order mark FF FE), not UTF-8; write it as UTF-8",
                       Error);
  CHECK_THROWS_WITH_AS(load_training_log({"be.csv"}, one_file("be.csv", be)),
                       "[fp8a.trace.501] be.csv:1: not an amax trace: the file is UTF-16BE (it starts "
                       "with the byte order mark FE FF), not UTF-8; write it as UTF-8",
                       Error);
  CHECK_THROWS_WITH_AS(load_training_log({"32.csv"}, one_file("32.csv", std::string("\xFF\xFE\0\0s\0\0\0", 8))),
                       "[fp8a.trace.501] 32.csv:1: not an amax trace: the file is UTF-32LE (it starts "
                       "with the byte order mark FF FE 00 00), not UTF-8; write it as UTF-8",
                       Error);
}

TEST_CASE("nvdlfw_inspect log: skipped tensor names in the note are escaped, not raw bytes") {
  std::string log = stat_line("l_weight_cur_amax", 0, 1.0);
  log += stat_line("l_\x1b[31mred\xff_cur_amax", 0, 1.0);
  const TrainingLog t = load_training_log({"r.log"}, one_file("r.log", log));
  REQUIRE(!t.notes.empty());
  CHECK(t.notes[0] ==
        "r.log: nvdlfw_inspect statistics log, 1 cur_amax value; skipped 1 line of other tensors "
        "(\\x1b[31mred\\xff)");
}

TEST_CASE("nvdlfw_inspect log in full precision (fp8a_capture.stats_logger): read exactly, not rounded") {
  // The lines check_stats_logger.py has fp8a_capture.stats_logger write: nvdlfw's layout, the
  // value as Python's repr.
  std::string log;
  log += "model.decoder.layers.1.mlp.linear_fc1_gradient_cur_amax \t\t\t\t iteration=000020 \t\t\t\t value=1.2345678e-05\n";
  log += "model.decoder.layers.1.mlp.linear_fc1_activation_cur_amax \t\t\t\t iteration=000020 \t\t\t\t value=3.25\n";
  log += "model.decoder.layers.1.mlp.linear_fc1_gradient_fp8_block_scaling_mse_columnwise \t\t\t\t iteration=000020 "
         "\t\t\t\t value=3.0517578125e-12\n";
  const TrainingLog t = load_training_log({"r.log"}, one_file("r.log", log));
  CHECK_FALSE(t.rounded);
  CHECK(series_of(t, "model.decoder.layers.1.mlp.linear_fc1", Role::kGradient).amax_by_step.at(20) == 1.2345678e-05f);
  REQUIRE(t.fp8_stats.size() == 1);
  CHECK(t.fp8_stats[0].value == 3.0517578125e-12);
  CHECK(t.notes.size() == 1);  // no rounding note
  // One value in the default's form marks the log rounded.
  const TrainingLog r = load_training_log(
      {"d.log"}, one_file("d.log", log + "model.decoder.layers.1.mlp.linear_fc1_weight_cur_amax \t\t\t\t "
                                         "iteration=000020 \t\t\t\t value=0.0625\n"));
  CHECK(r.rounded);
}

TEST_CASE("a log read in chunks ahead of the reader: every value and line number as read line by line") {
  // A log is cut into chunks of whole lines (4 MB each with up to 32 threads) that worker threads
  // parse ahead of the reader; what is read, and the line an error names, must not show the cuts.
  constexpr int kLayers = 8;
  constexpr std::size_t kChunk = std::size_t{4} << 20;
  std::string text;
  std::vector<std::size_t> starts;  // each line's first byte
  int steps = 0;
  const auto amax = [](int step, int layer) { return 1.0 + (step % 97) * 0.25 + layer; };  // exact in 4 decimals
  while (text.size() < 2 * kChunk + kChunk / 2) {
    for (int l = 0; l < kLayers; ++l) {
      starts.push_back(text.size());
      text += stat_line("layers." + std::to_string(l) + ".fc1_weight_cur_amax", steps, amax(steps, l));
    }
    ++steps;
  }
  SUBCASE("every value, every line counted") {
    const TrainingLog t = load_training_log({"r.log"}, one_file("r.log", text));
    for (const int l : {0, 7}) {
      const auto& s = series_of(t, "layers." + std::to_string(l) + ".fc1", Role::kWeight).amax_by_step;
      REQUIRE(s.size() == static_cast<std::size_t>(steps));
      int wrong = 0;
      for (int step = 0; step < steps; ++step) wrong += s.at(step) == static_cast<float>(amax(step, l)) ? 0 : 1;
      CHECK(wrong == 0);
    }
    REQUIRE(!t.notes.empty());
    CHECK(t.notes[0].find(std::to_string(steps * kLayers) + " cur_amax values") != std::string::npos);
  }
  SUBCASE("an error names its line wherever the cuts fall") {
    // The first line, the lines about each 4 MB mark (a chunk ends at the first newline after
    // it), and the last.
    std::vector<std::size_t> lines = {0, starts.size() - 1};
    for (const std::size_t mark : {kChunk, 2 * kChunk}) {
      const auto k = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), mark - 1) - starts.begin()) - 1;
      lines.insert(lines.end(), {k - 1, k, k + 1});
    }
    for (const std::size_t k : lines) {
      CAPTURE(k);
      const std::string line = std::to_string(k + 1);
      std::string malformed = text;  // same length: the cuts stay where they were
      malformed[malformed.find("iteration=", starts[k]) + 8] = 'N';
      CHECK_THROWS_WITH_AS(load_training_log({"r.log"}, one_file("r.log", malformed)),
                           ("[fp8a.trace.502] r.log:" + line +
                            ": malformed nvdlfw_inspect statistics line: no 'iteration='; expected "
                            "'<layer>_<tensor>_<stat> iteration=<N> value=<V>'")
                               .c_str(),
                           Error);
      std::string bad_step = text;
      const std::size_t digits = bad_step.find("iteration=", starts[k]) + 10;
      bad_step[digits] = 'x';
      CHECK_THROWS_WITH_AS(load_training_log({"r.log"}, one_file("r.log", bad_step)),
                           ("[fp8a.trace.503] r.log:" + line + ": iteration '" + bad_step.substr(digits, 6) +
                            "' is not a non-negative integer")
                               .c_str(),
                           Error);
    }
  }
}
