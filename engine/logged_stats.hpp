// nvdlfw_inspect's FP8 statistics (TE LogFp8TensorStats, read from --amax-trace logs) beside
// fp8-advisor's own numbers for the same tensor, step, recipe and copy.
//
// Pairing, per logged value:
//  - tensor: the capture's (step, layer, role); layer names match as they are or after TE
//    DumpTensors' file-name sanitising ('/', '\', ':', '*', '?', '"', '<', '>', '|', ' ', '.' ->
//    '_'), since dumps carry sanitised names and logs the raw ones;
//  - recipe: a bare statistic is the training run's recipe (--training-recipe); the what-if
//    recipes are TE's fresh quantizers: fp8_current_scaling = "current", fp8_block_scaling =
//    "block:2d" (Float8BlockQuantizer's default 128x128 tiles), mxfp8 = "mxfp8";
//    fp8_delayed_scaling exists only as the training recipe;
//  - copy: "_columnwise" is the columnwise copy; a recipe whose copies agree reports rowwise only;
//  - statistic: underflows% = underflow_pct, overflows% = overflow_pct, mse = mse (TE divides by
//    all elements, fp8-advisor by the finite ones: equal without NaN/Inf), scale_inv_min/max =
//    scale_inv_min/max, for mxfp8 as TE logs it: the biased E8M0 exponent log2(scale_inv) + 127.
// Values TE logs are rounded to 4 decimals, computed in the tensor's dtype (mse), accumulated over
// micro-batches and reduced over ranks; a captured tensor is one micro-batch (of one rank), so
// small differences are expected.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "datasets/training_log.hpp"
#include "engine/run.hpp"

namespace fp8a {

struct LoggedComparison {
  const LoggedFp8Stat* logged = nullptr;
  std::string recipe;  // fp8-advisor's recipe spec the value was compared with; "" if none
  Orientation orientation = Orientation::kRowwise;
  bool paired = false;
  double ours = 0.0;   // when paired
  std::string note;    // why not paired ("" when paired)
};

// One comparison per logged value, in the log's order. training_recipe: the recipe the logged
// run trained with (bare statistic names), if known; it must be among the evaluated recipes for
// its values to pair. nvdlfw_inspect does not log the format: values are compared with the hybrid
// rows (TE's default recipe.Format) when the table has them, else with its first format's.
std::vector<LoggedComparison> compare_logged_stats(std::span<const LoggedFp8Stat> logged,
                                                   std::span<const EvaluationRow> rows,
                                                   const std::optional<Recipe>& training_recipe);

// TE DumpTensors' file-name form of a layer name.
std::string sanitized_layer_name(std::string_view layer);

}  // namespace fp8a
