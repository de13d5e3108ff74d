// compare.html: a comparison for a person to read, one self-contained page like report.html
// (inline CSS and SVG; no script, font, image or link to anything outside the file; printable),
// from one CompareResult (policies/compare.hpp). Sections, in order:
//   Inputs        both sides (path, kind, rows, steps), the counts of matched rows (same step,
//                 nearest step) and unmatched rows and groups, the largest divergence in words,
//                 the provenance
//   Ranking       the top matches as compare_ranked_table() gives them, rank 1 highlighted
//   Heatmaps      per tensor role, layer (model order) x recipe/format/orientation: the divergence
//                 score, Δ underflow (percentage points) and Δ SQNR (dB), cand - base, each cell the
//                 group's highest-scoring match; groups one side lacks hatched
//   Distribution  a histogram of every match's score, the ranked table's range shaded
//   Only one side the groups only base or only cand holds
// Layout only: matching, scores and ranks come from compare_records. Charts come from
// reports/svg_plot.hpp, the page frame, tables and CSS from reports/html_page.hpp.
#pragma once

#include <cstddef>

#include "policies/compare.hpp"
#include "reports/artifact.hpp"
#include "reports/compare_report.hpp"

namespace fp8a {

// Bounds that keep the page small for a large model; what they leave out the page says.
inline constexpr std::size_t kCompareMaxHeatmapRows = 200;     // layers per heatmap
inline constexpr std::size_t kCompareMaxHeatmapCols = 40;      // recipe/format/orientation columns
inline constexpr std::size_t kCompareMaxGroupsListed = 200;    // per side, in "Only one side"
inline constexpr std::size_t kCompareHistogramBins = 20;

// The page, as Artifact "compare.html" (note: its size). `top`: rows of the ranked table.
Artifact render_compare_html(const CompareResult& result, const CompareInfo& info, std::size_t top);

}  // namespace fp8a
