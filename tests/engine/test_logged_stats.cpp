// Pairing nvdlfw_inspect FP8 statistics with evaluation rows (engine/logged_stats.hpp), on rows
// built by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/logged_stats.hpp"

namespace {

using fp8a::EvaluationRow;
using fp8a::LoggedFp8Stat;
using fp8a::LoggedRecipe;
using fp8a::LoggedStatKind;
using fp8a::Orientation;
using fp8a::Role;

EvaluationRow row(const std::string& layer, Role role, const std::string& recipe,
                  Orientation o = Orientation::kRowwise) {
  EvaluationRow r;
  r.key = {7, layer, role};
  r.recipe = fp8a::parse_recipe(recipe);
  r.orientation = o;
  r.fp8 = fp8a::fp8_format_for(r.format, role);  // as evaluate_captures sets it
  r.metrics.underflow_pct = 1.5;
  r.metrics.overflow_pct = 0.25;
  r.metrics.mse = 3e-6;
  r.metrics.scale_inv_min = 0.0078125;  // 2^-7
  r.metrics.scale_inv_max = 4.0;
  return r;
}

LoggedFp8Stat stat(std::string_view layer, Role role, LoggedRecipe recipe, LoggedStatKind kind,
                   bool columnwise = false) {
  LoggedFp8Stat s;
  s.layer = layer;
  s.role = role;
  s.step = 7;
  s.recipe = recipe;
  s.stat = kind;
  s.columnwise = columnwise;
  return s;
}

}  // namespace

TEST_CASE("logged FP8 statistics pair with the matching recipe, copy and statistic") {
  std::vector<EvaluationRow> rows = {
      row("blocks.0.fc1", Role::kActivation, "current"),
      row("blocks.0.fc1", Role::kActivation, "block:2d"),
      row("blocks.0.fc1", Role::kGradient, "mxfp8", Orientation::kRowwise),
      row("blocks.0.fc1", Role::kGradient, "mxfp8", Orientation::kColumnwise),
      row("blocks.0.fc1", Role::kWeight, "delayed:history=4"),
      row("a.b", Role::kWeight, "current"),
      row("a_b", Role::kWeight, "current"),  // the same sanitised name as "a.b"
  };
  rows[3].metrics.scale_inv_max = 0.5;
  rows[5].metrics.mse = 1.0;
  rows[6].metrics.mse = 2.0;
  const std::vector<LoggedFp8Stat> logged = {
      stat("blocks.0.fc1", Role::kActivation, LoggedRecipe::kCurrent, LoggedStatKind::kMse),
      // DumpTensors-style name; 128x128 tiles report rowwise only.
      stat("blocks_0_fc1", Role::kActivation, LoggedRecipe::kBlock, LoggedStatKind::kUnderflowPct, true),
      // MXFP8 scales as TE logs them: E8M0 codes.
      stat("blocks.0.fc1", Role::kGradient, LoggedRecipe::kMxfp8, LoggedStatKind::kScaleInvMin),
      stat("blocks.0.fc1", Role::kGradient, LoggedRecipe::kMxfp8, LoggedStatKind::kScaleInvMax, true),
      stat("blocks.0.fc1", Role::kWeight, LoggedRecipe::kTraining, LoggedStatKind::kOverflowPct),
      stat("blocks.0.fc1", Role::kWeight, LoggedRecipe::kDelayed, LoggedStatKind::kOverflowPct),
      stat("a.b", Role::kWeight, LoggedRecipe::kCurrent, LoggedStatKind::kMse),
      stat("a_b", Role::kWeight, LoggedRecipe::kCurrent, LoggedStatKind::kMse),
      stat("blocks.9.fc1", Role::kWeight, LoggedRecipe::kCurrent, LoggedStatKind::kMse),
      stat("blocks.0.fc1", Role::kWeight, LoggedRecipe::kMxfp8, LoggedStatKind::kMse),
  };

  SUBCASE("with the training recipe") {
    const auto c = fp8a::compare_logged_stats(logged, rows, fp8a::parse_recipe("delayed:history=4"));
    REQUIRE(c.size() == logged.size());
    CHECK(c[0].paired);
    CHECK(c[0].recipe == "current");
    CHECK(c[0].ours == 3e-6);
    CHECK(c[1].paired);
    CHECK(c[1].recipe == "block:2d");
    CHECK(c[1].orientation == Orientation::kRowwise);
    CHECK(c[1].ours == 1.5);
    CHECK(c[2].ours == -7.0 + 127.0);
    CHECK(c[3].orientation == Orientation::kColumnwise);
    CHECK(c[3].ours == -1.0 + 127.0);
    CHECK(c[4].recipe == "delayed:history=4:algo=max:margin=0");
    CHECK(c[4].ours == 0.25);
    CHECK(c[5].paired);
    CHECK(c[6].ours == 1.0);  // exact names win when sanitised names collide
    CHECK(c[7].ours == 2.0);
    CHECK_FALSE(c[8].paired);
    CHECK(c[8].note == "not captured at this step");
    CHECK(c[9].note == "not evaluated");  // mxfp8 ran on other tensors only
  }
  SUBCASE("without it") {
    const auto c = fp8a::compare_logged_stats(logged, rows, std::nullopt);
    CHECK_FALSE(c[4].paired);
    CHECK(c[4].note == "the training run's recipe: name it with --training-recipe");
    CHECK(c[5].note ==
          "fp8_delayed_scaling is logged for the training recipe only: name it with "
          "--training-recipe delayed:...");
    CHECK(c[0].paired);
  }
  SUBCASE("a training recipe that was not evaluated") {
    const auto c = fp8a::compare_logged_stats(logged, rows, fp8a::parse_recipe("block"));
    CHECK(c[4].note == "recipe block not in --recipes");
  }
  SUBCASE("MXFP8 in e4m3 only (--format auto): E4M3 operands pair, hybrid's E5M2 gradients say why not") {
    for (EvaluationRow& r : rows)
      if (r.recipe.kind == fp8a::RecipeKind::kMx) {
        r.format = fp8a::TrainingFormat::kE4M3;
        r.fp8 = fp8a::Fp8Format::kE4M3;
      }
    rows.push_back(row("blocks.0.fc1", Role::kWeight, "mxfp8"));
    rows.back().format = fp8a::TrainingFormat::kE4M3;
    rows.back().metrics.mse = 5.0;
    const auto c = fp8a::compare_logged_stats(logged, rows, std::nullopt);
    CHECK_FALSE(c[2].paired);
    CHECK(c[2].note == "not evaluated as e5m2 (hybrid): mxfp8 is evaluated in e4m3; add --format e4m3,hybrid");
    CHECK(c[3].note == c[2].note);
    CHECK(c[9].paired);  // the weight: E4M3 under hybrid too
    CHECK(c[9].ours == 5.0);
  }
}

TEST_CASE("TE DumpTensors' sanitised layer names") {
  CHECK(fp8a::sanitized_layer_name("decoder.layers.1/self attention:q*?\"<>|\\x") ==
        "decoder_layers_1_self_attention_q_______x");
}
