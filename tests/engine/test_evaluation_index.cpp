// The one index over the evaluation table (engine/evaluation_index.hpp), on rows built by hand:
// exact look-ups, the rowwise fallback for a GEMM's operand copy, missing rows, and the orders.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/evaluation_index.hpp"

namespace {

using fp8a::CaptureKey;
using fp8a::EvaluationIndex;
using fp8a::EvaluationRow;
using fp8a::Orientation;
using fp8a::Role;
using fp8a::TrainingFormat;
constexpr TrainingFormat kHybrid = TrainingFormat::kHybrid;  // make_row's format

EvaluationRow row(std::int64_t step, const std::string& layer, Role role, const std::string& recipe,
                  Orientation o = Orientation::kRowwise, TrainingFormat f = kHybrid) {
  EvaluationRow r;
  r.key = {step, layer, role};
  r.recipe = fp8a::parse_recipe(recipe);
  r.format = f;
  r.fp8 = fp8a::fp8_format_for(f, role);
  r.orientation = o;
  return r;
}

std::vector<std::string> specs(const std::vector<fp8a::Recipe>& recipes) {
  std::vector<std::string> out;
  for (const auto& r : recipes) out.push_back(r.spec());
  return out;
}

}  // namespace

TEST_CASE("find is exact; find_for_use falls back to the rowwise row, never the other way") {
  const std::vector<EvaluationRow> rows = {
      row(1, "fc1", Role::kActivation, "current"),  // per-tensor: one row for both copies
      row(1, "fc1", Role::kActivation, "mxfp8", Orientation::kRowwise),
      row(1, "fc1", Role::kActivation, "mxfp8", Orientation::kColumnwise),
      row(1, "fc1", Role::kWeight, "block", Orientation::kColumnwise),  // no rowwise row
  };
  const EvaluationIndex index(rows);
  const CaptureKey x{1, "fc1", Role::kActivation}, w{1, "fc1", Role::kWeight};
  const auto current = fp8a::parse_recipe("current"), mxfp8 = fp8a::parse_recipe("mxfp8"),
             block = fp8a::parse_recipe("block");

  CHECK(index.find(x, current, kHybrid, Orientation::kRowwise) == &rows[0]);
  CHECK(index.find(x, current, kHybrid, Orientation::kColumnwise) == nullptr);
  CHECK(index.find_for_use(x, current, kHybrid, Orientation::kColumnwise) == &rows[0]);
  CHECK(index.find_for_use(x, current, kHybrid, Orientation::kRowwise) == &rows[0]);

  // Both copies evaluated: each finds its own.
  CHECK(index.find(x, mxfp8, kHybrid, Orientation::kColumnwise) == &rows[2]);
  CHECK(index.find_for_use(x, mxfp8, kHybrid, Orientation::kColumnwise) == &rows[2]);
  CHECK(index.find_for_use(x, mxfp8, kHybrid, Orientation::kRowwise) == &rows[1]);

  // Only a columnwise row: a rowwise use does not take it.
  CHECK(index.find_for_use(w, block, kHybrid, Orientation::kRowwise) == nullptr);
  CHECK(index.find_for_use(w, block, kHybrid, Orientation::kColumnwise) == &rows[3]);
}

TEST_CASE("missing rows: another step, layer, role or recipe finds nothing") {
  const std::vector<EvaluationRow> rows = {row(1, "fc1", Role::kActivation, "current")};
  const EvaluationIndex index(rows);
  const auto current = fp8a::parse_recipe("current");
  CHECK(index.find_for_use({2, "fc1", Role::kActivation}, current, kHybrid, Orientation::kRowwise) == nullptr);
  CHECK(index.find_for_use({1, "fc2", Role::kActivation}, current, kHybrid, Orientation::kRowwise) == nullptr);
  CHECK(index.find_for_use({1, "fc1", Role::kGradient}, current, kHybrid, Orientation::kRowwise) == nullptr);
  CHECK(index.find_for_use({1, "fc1", Role::kActivation}, fp8a::parse_recipe("current:pow2"), kHybrid,
                           Orientation::kRowwise) == nullptr);
  CHECK(index.has_tensor({1, "fc1", Role::kActivation}));
  CHECK_FALSE(index.has_tensor({1, "fc1", Role::kWeight}));
  CHECK_FALSE(index.has_tensor({2, "fc1", Role::kActivation}));
  CHECK(index.has_recipe(current));
  CHECK_FALSE(index.has_recipe(fp8a::parse_recipe("mxfp8")));
  CHECK(index.rows_of("fc2").empty());

  const EvaluationIndex empty(std::span<const EvaluationRow>{});
  CHECK(empty.recipes().empty());
  CHECK(empty.layers().empty());
  CHECK(empty.find({1, "fc1", Role::kActivation}, current, kHybrid, Orientation::kRowwise) == nullptr);
}

TEST_CASE("recipes in first-seen order, layers in table order, a layer's rows in table order") {
  const std::vector<EvaluationRow> rows = {
      row(10, "layers.2.fc1", Role::kActivation, "mxfp8"),
      row(10, "layers.2.fc1", Role::kActivation, "current"),
      row(10, "layers.10.fc1", Role::kWeight, "current"),
      row(10, "layers.10.fc1", Role::kWeight, "delayed:history=4"),
      row(20, "layers.2.fc1", Role::kGradient, "current:pow2"),
      row(20, "layers.2.fc1", Role::kGradient, "mxfp8"),
  };
  const EvaluationIndex index(rows);
  CHECK(specs(index.recipes()) ==
        std::vector<std::string>{"mxfp8", "current", index.recipes()[2].spec(), "current:pow2"});
  CHECK(index.recipes()[2].kind == fp8a::RecipeKind::kPerTensorDelayed);
  CHECK(index.layers() == std::vector<std::string>{"layers.2.fc1", "layers.10.fc1"});
  const auto fc1 = index.rows_of("layers.2.fc1");
  REQUIRE(fc1.size() == 4);
  CHECK(fc1[0] == &rows[0]);
  CHECK(fc1[1] == &rows[1]);
  CHECK(fc1[2] == &rows[4]);
  CHECK(fc1[3] == &rows[5]);
  REQUIRE(index.rows_of("layers.10.fc1").size() == 2);
  CHECK(index.rows_of("layers.10.fc1")[1] == &rows[3]);
  CHECK(index.rows().data() == rows.data());
}

TEST_CASE("a repeated key: find gives the first row, rows_of lists both") {
  const std::vector<EvaluationRow> rows = {row(1, "fc1", Role::kActivation, "current"),
                                           row(1, "fc1", Role::kActivation, "current")};
  const EvaluationIndex index(rows);
  CHECK(index.find({1, "fc1", Role::kActivation}, fp8a::parse_recipe("current"), kHybrid, Orientation::kRowwise) ==
        &rows[0]);
  CHECK(index.rows_of("fc1").size() == 2);
  CHECK(index.recipes().size() == 1);
}

TEST_CASE("the format is part of the key: each format finds its own row, formats in first-seen order") {
  const std::vector<EvaluationRow> rows = {
      row(1, "fc1", Role::kGradient, "current", Orientation::kRowwise, TrainingFormat::kE4M3),
      row(1, "fc1", Role::kGradient, "current", Orientation::kRowwise, kHybrid),
      row(1, "fc1", Role::kGradient, "mxfp8", Orientation::kColumnwise, kHybrid),
  };
  const EvaluationIndex index(rows);
  const CaptureKey dy{1, "fc1", Role::kGradient};
  const auto current = fp8a::parse_recipe("current"), mxfp8 = fp8a::parse_recipe("mxfp8");
  CHECK(index.formats() == std::vector<TrainingFormat>{TrainingFormat::kE4M3, kHybrid});
  CHECK(index.find(dy, current, TrainingFormat::kE4M3, Orientation::kRowwise) == &rows[0]);
  CHECK(index.find(dy, current, kHybrid, Orientation::kRowwise) == &rows[1]);
  CHECK(index.find_for_use(dy, mxfp8, kHybrid, Orientation::kColumnwise) == &rows[2]);
  CHECK(index.find_for_use(dy, mxfp8, TrainingFormat::kE4M3, Orientation::kColumnwise) == nullptr);
  CHECK(index.recipes().size() == 2);
}
