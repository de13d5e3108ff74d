// The logging plan (reports/consumers/log_config.hpp) against TE's debug features as their source
// states them (transformer_engine/debug/features/log_fp8_tensor_stats.py check_if_stat_is_supported,
// update_aux_dict; TE 2.4's _get_supported_stats_list), and its YAML as golden files, which
// tests/consumers/check_log_config.py loads with nvdlfw_inspect and TE's own feature checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/gpu_target.hpp"
#include "datasets/training_log.hpp"
#include "engine/logged_rows.hpp"
#include "reports/consumers/log_config.hpp"
#include "support/golden.hpp"

using fp8a::LogPlan;
using fp8a::LogRequest;

namespace {

LogRequest request(const char* recipe, const char* gpu, fp8a::TeVersion te = fp8a::kTeNewest) {
  LogRequest q;
  q.training = fp8a::parse_recipe(recipe);
  std::string why;
  q.gpu = fp8a::find_gpu_target(gpu, &why);
  REQUIRE(q.gpu != nullptr);
  q.te = te;
  return q;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

bool left_out(const LogPlan& p, const std::string& what) {
  return std::any_of(p.left_out.begin(), p.left_out.end(), [&](const fp8a::LeftOut& l) { return l.what == what; });
}

}  // namespace

TEST_CASE("current scaling on an H100: its own statistics, block what-ifs, no MXFP8 and no delayed") {
  const LogRequest q = request("current", "h100");
  const LogPlan p = fp8a::plan_logging(q);
  // The training recipe's own: no cast; scale_inv and mse from TE 2.7.
  for (const char* s : {"fp8_current_scaling_underflows%", "fp8_current_scaling_mse", "fp8_current_scaling_scale_inv_min",
                        "fp8_current_scaling_scale_inv_max"})
    CHECK(has(p.fp8_stats, s));
  // overflows% is delayed scaling's alone; _columnwise is refused for per-tensor recipes.
  CHECK_FALSE(has(p.fp8_stats, "fp8_current_scaling_overflows%"));
  CHECK_FALSE(has(p.fp8_stats, "fp8_current_scaling_underflows%_columnwise"));
  // Block scaling what-ifs on sm_90 (major >= 9), rowwise and columnwise (wgrad's copies).
  for (const char* s : {"fp8_block_scaling_underflows%", "fp8_block_scaling_mse", "fp8_block_scaling_underflows%_columnwise",
                        "fp8_block_scaling_mse_columnwise"})
    CHECK(has(p.fp8_stats, s));
  CHECK(p.what_if_casts == 4);  // update_aux_dict casts once per what-if statistic
  CHECK(p.fp8_stats.size() == 8);
  // MXFP8 needs major >= 10; delayed scaling cannot be a what-if.
  CHECK(left_out(p, "mxfp8_*"));
  CHECK(left_out(p, "fp8_delayed_scaling_*"));
  CHECK(p.nvfp4_stats.empty());
  CHECK(p.tensor_stats == std::vector<std::string>{"cur_amax", "mean", "std"});
  fp8a::testing::check_golden("log_config_current_h100.yaml", fp8a::render_log_config(q, p, "x.yaml").contents);
}

TEST_CASE("MXFP8 on a B200: every FP8 what-if but delayed") {
  const LogPlan p = fp8a::plan_logging(request("mxfp8", "b200"));
  CHECK(has(p.fp8_stats, "mxfp8_underflows%_columnwise"));
  CHECK(has(p.fp8_stats, "fp8_current_scaling_mse"));
  CHECK(has(p.fp8_stats, "fp8_block_scaling_mse_columnwise"));
  CHECK_FALSE(has(p.fp8_stats, "fp8_current_scaling_scale_inv_min"));  // a what-if: the criteria's two
  CHECK(p.what_if_casts == 2 + 4);
  CHECK(p.left_out.size() == 1);
  fp8a::testing::check_golden("log_config_mxfp8_b200.yaml",
                              fp8a::render_log_config(request("mxfp8", "b200"), p, "x.yaml").contents);
}

TEST_CASE("delayed scaling: overflows% and its own statistics; TE 2.4 logs underflows% alone") {
  const LogPlan p = fp8a::plan_logging(request("delayed", "h100"));
  CHECK(has(p.fp8_stats, "fp8_delayed_scaling_overflows%"));
  CHECK_FALSE(left_out(p, "fp8_delayed_scaling_*"));
  fp8a::testing::check_golden("log_config_delayed_h100.yaml",
                              fp8a::render_log_config(request("delayed", "h100"), p, "x.yaml").contents);
  LogRequest old = request("delayed", "h100", fp8a::TeVersion{2, 4});
  old.freq = 5;
  old.end_step = 40;
  const LogPlan p24 = fp8a::plan_logging(old);
  CHECK(p24.fp8_stats == std::vector<std::string>{"underflows%"});
  CHECK(p24.what_if_casts == 0);
  CHECK(p24.left_out.size() == 1);
  CHECK(fp8a::plan_logging(request("current", "b200", fp8a::TeVersion{2, 6})).fp8_stats.size() == 1);
  CHECK(fp8a::plan_logging(request("current", "b200", fp8a::TeVersion{2, 7})).fp8_stats.size() > 1);
  fp8a::testing::check_golden("log_config_delayed_te2.4.yaml", fp8a::render_log_config(old, p24, "x.yaml").contents);
}

TEST_CASE("NVFP4 from TE 2.13: LogNvfp4TensorStats and the FP8 what-ifs; before, nothing quantised") {
  const LogPlan p = fp8a::plan_logging(request("nvfp4", "b200"));
  CHECK(p.nvfp4_stats == std::vector<std::string>{"underflows%", "mse"});
  CHECK(has(p.fp8_stats, "mxfp8_mse"));
  CHECK(p.what_if_casts == 2 + 4 + 4);
  fp8a::testing::check_golden("log_config_nvfp4_b200.yaml",
                              fp8a::render_log_config(request("nvfp4", "b200"), p, "x.yaml").contents);
  const LogPlan old = fp8a::plan_logging(request("nvfp4", "b200", fp8a::TeVersion{2, 12}));
  CHECK(old.fp8_stats.empty());
  CHECK(old.nvfp4_stats.empty());
  CHECK(old.left_out.size() == 1);
}

TEST_CASE("BF16 training: LogTensorStats alone, the FP8 statistics said to be missing") {
  const LogRequest q = request("bf16", "h100");
  const LogPlan p = fp8a::plan_logging(q);
  CHECK(p.fp8_stats.empty());
  CHECK(left_out(p, "every FP8 statistic"));
  const std::string yaml = fp8a::render_log_config(q, p, "x.yaml").contents;
  CHECK(yaml.find("LogFp8TensorStats:") == std::string::npos);
  CHECK(yaml.find("LogTensorStats:") != std::string::npos);
  fp8a::testing::check_golden("log_config_bf16.yaml", yaml);
}

TEST_CASE("the layers pattern reaches the YAML as one quoted scalar") {
  LogRequest q = request("current", "h100");
  q.layers = "it's: #not a comment";
  const std::string yaml = fp8a::render_log_config(q, fp8a::plan_logging(q), "x.yaml").contents;
  CHECK(yaml.find("layer_name_regex_pattern: 'it''s: #not a comment'") != std::string::npos);
}

TEST_CASE("the plan asks for exactly what run --training-log reads: nothing skipped, every copy judged") {
  for (const auto& [recipe, gpu] : {std::pair{"current", "h100"}, std::pair{"delayed", "h100"},
                                    std::pair{"mxfp8", "b200"}, std::pair{"block", "h100"},
                                    std::pair{"nvfp4", "b200"}}) {
    CAPTURE(std::string(recipe));
    const LogRequest q = request(recipe, gpu);
    const LogPlan p = fp8a::plan_logging(q);
    // A line per planned statistic of each tensor, as TE names them ("<layer>_<tensor>_<stat>";
    // LogNvfp4TensorStats logs its stats as "nvfp4_<stat>": get_stat_with_prefix).
    std::string log;
    std::size_t lines = 0;
    for (const char* tensor : {"activation", "weight", "gradient"})
      for (const auto* list : {&p.tensor_stats, &p.fp8_stats, &p.nvfp4_stats})
        for (const std::string& stat : *list) {
          log += std::string("decoder.layers.0.mlp.linear_fc1_") + tensor + "_" + (list == &p.nvfp4_stats ? "nvfp4_" : "") + stat +
                 " \t\t\t\t iteration=000010 \t\t\t\t value=" + (stat.find("scale_inv") != std::string::npos ? "127.0" : "0.5") + "\n";
          ++lines;
        }
    fp8a::MemoryFileSystem fs;
    std::vector<std::byte> bytes(log.size());
    std::transform(log.begin(), log.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
    fs.add_file("r.log", std::move(bytes));
    const fp8a::TrainingLog t = fp8a::load_training_log({"r.log"}, fs);
    REQUIRE(t.notes.size() == 1);
    CHECK(t.notes[0].find("skipped") == std::string::npos);  // every line read
    CHECK(t.series.size() == 3);                              // cur_amax of each tensor
    CHECK(t.fp8_stats.size() + t.tensor_stats.size() + t.series.size() == lines);
    // Every statistic becomes part of a row: each candidate copy judged on underflow and rel_mse.
    const fp8a::LoggedRows r = fp8a::rows_from_logged_stats(t, q.training, fp8a::TrainingFormat::kHybrid);
    // NVFP4's own statistics are logged for nvdlfw_stats.csv beside a capture, and judge nothing
    // (engine/logged_rows.hpp): the one note says so.
    if (std::string(recipe) == "nvfp4") {
      REQUIRE(r.notes.size() == 1);
      CHECK(r.notes[0].rfind("6 logged statistics left out: nvfp4_underflows%", 0) == 0);
    } else {
      CHECK_MESSAGE(r.notes.empty(), (r.notes.empty() ? "" : r.notes.front()));
    }
    REQUIRE_FALSE(r.rows.empty());
    for (const fp8a::EvaluationRow& row : r.rows) {
      CAPTURE(row.recipe.spec());
      CHECK(row.logged->underflow);
      CHECK(row.logged->rel_mse);
      CHECK(row.logged->energy_bound);
    }
  }
}
