// One index over the evaluation table (engine/run.hpp): the rows of a tensor under a recipe in a
// format and copy, the rows of a layer, and which recipes, formats and layers the table holds. Built once; every stage
// that looks rows up (GEMM error, logged statistics, layer summaries, the advice) uses this one.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/run.hpp"

namespace fp8a {

class EvaluationIndex {
 public:
  // Indexes `rows` without copying them.
  // The rows must outlive the index and must not move (pointers into the span are kept).
  // A row is keyed by (step, layer, role, recipe spec, format, orientation).
  // Rows whose key repeats an earlier row's are listed by rows_of() but not found by find().
  // Rows that were not applicable are indexed like the others (callers check applicability).
  explicit EvaluationIndex(std::span<const EvaluationRow> rows);

  // The row of exactly this tensor, recipe, format and copy; nullptr when the table has none.
  // The recipe matches by canonical spec (Recipe::spec()).
  const EvaluationRow* find(const CaptureKey& tensor, const Recipe& recipe, TrainingFormat format,
                            Orientation orientation) const;

  // The row whose numbers a GEMM uses for this operand copy: the requested orientation, else the
  // rowwise row (per-tensor recipes and 128x128 weight tiles evaluate one copy for both).
  // nullptr when the table has neither.
  const EvaluationRow* find_for_use(const CaptureKey& tensor, const Recipe& recipe,
                                    TrainingFormat format, Orientation orientation) const;

  // Whether any row (any recipe, any copy) is of this tensor.
  bool has_tensor(const CaptureKey& tensor) const;

  // Whether any row is of this recipe (matched by canonical spec).
  bool has_recipe(const Recipe& recipe) const;

  // Whether any row is of this recipe (matched by canonical spec) in this format.
  bool has(const Recipe& recipe, TrainingFormat format) const;

  // The recipes of the table, each once, in the order of their first row.
  const std::vector<Recipe>& recipes() const { return recipes_; }

  // The formats of the table, each once, in the order of their first row (for the rows of
  // evaluate_captures, RunConfig::formats).
  const std::vector<TrainingFormat>& formats() const { return formats_; }

  // The layers of the table, each once, in the order of their first row (for the rows of
  // evaluate_captures, the capture order: by step, then layer in natural order).
  const std::vector<std::string>& layers() const { return layers_; }

  // Every row of one layer (all steps, roles, recipes, formats, copies), in table order; empty for a layer
  // the table does not hold.
  std::span<const EvaluationRow* const> rows_of(std::string_view layer) const;

  // The indexed table.
  std::span<const EvaluationRow> rows() const { return rows_; }

 private:
  using RowKey = std::tuple<std::int64_t, std::string, Role, std::string, TrainingFormat, Orientation>;
  using TensorKey = std::tuple<std::int64_t, std::string, Role>;

  std::span<const EvaluationRow> rows_;
  std::map<RowKey, const EvaluationRow*> by_key_;
  std::set<TensorKey> tensors_;
  std::set<std::string, std::less<>> recipe_specs_;
  std::set<std::pair<std::string, TrainingFormat>> recipe_formats_;
  std::vector<Recipe> recipes_;
  std::vector<TrainingFormat> formats_;
  std::vector<std::string> layers_;
  std::map<std::string, std::vector<const EvaluationRow*>, std::less<>> by_layer_;
};

}  // namespace fp8a
