// What a run prints on stdout: the readable per-layer table, and the line on nvdlfw_inspect's
// statistics.
#pragma once

#include <span>
#include <string>

#include "policies/layer_summary.hpp"
#include "policies/logged_stats_summary.hpp"

namespace fp8a {

// Where a worst value occurred: "gradient/col@20" (tensor, then step).
std::string worst_where(const WorstValue& w);

// One line per (layer, recipe, format); a format column only when the summaries hold several.
std::string render_layer_table(std::span<const LayerSummary> layers);

// One line on the nvdlfw_inspect statistics: how many were paired with ours, the largest
// differences, and what to do about the rest (training_recipe_given: --training-recipe was set).
std::string render_logged_stats_line(const LoggedStatsSummary& s, bool training_recipe_given);

}  // namespace fp8a
