// How a sampled GEMM output's rows and columns are drawn, and what each drawn unit stands for
// (METRICS.md "Sampling"). One dimension of the output at a time: its units are the rows of one
// operand as the GEMM reads it (tokens or dW rows for the left-hand operand a; output features,
// input features or dW columns for the right-hand operand b).
//
// The design is a stratified one, chosen from the units' energies (squared norms of the operand's
// rows as the GEMM reads them, one pass over the operand):
//   - a certainty stratum: the units that could dominate the output's energy (or error), every
//     one computed, each standing for itself (weight 1). A unit is taken with certainty while its
//     energy times the draws left is at least kGemmCertainty times the energy of the units not yet
//     taken (its inclusion probability under sampling proportional to energy would be >= 1), the
//     largest first, at most half the budget;
//   - the rest, drawn systematically from the list of the rest sorted by energy (so that the
//     sample spans the energies: implicit stratification), each standing for R/n units of the R
//     left.
// Units are drawn in aligned groups (clusters) where a recipe's blocks span several of them (a
// sampled operand keeps its blocks whole): every unit of a drawn cluster is used, and the standard
// error treats the clusters as the sampling units. Sums over the drawn units, weighted, estimate
// the whole output's (a Horvitz-Thompson estimator); the ratio of two such sums (rel_fro_err's R)
// is a combined ratio estimator, its variance from the rest stratum alone (gemm_stats.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor_view.hpp"
#include "engine/cpu_gemm.hpp"

namespace fp8a {

// A unit is taken with certainty while energy * draws_left >= kGemmCertainty * energy of the rest.
inline constexpr double kGemmCertainty = 1.0;

// The units of one dimension of a GEMM's output that are computed.
struct UnitDraw {
  std::vector<std::int64_t> idx;      // the units, ascending (whole clusters, in cluster order)
  std::vector<double> weight;         // per drawn unit: the units it stands for (1 when certain)
  std::vector<std::int32_t> cluster;  // per drawn unit: its rest cluster's number 0..drawn-1, -1 certain
  std::int64_t population = 0;        // units in the whole output
  std::int64_t certain = 0;           // units taken with certainty
  std::int64_t rest_clusters = 0;     // clusters in the rest stratum
  std::int64_t drawn_clusters = 0;    // of which drawn
  std::int64_t size() const { return static_cast<std::int64_t>(idx.size()); }
  // Whether the units are a sample (some unit of the output not computed).
  bool sampled() const { return size() < population; }
  // Whether every drawn unit has the same weight (no certainty stratum, or every unit certain).
  bool uniform() const;
};

// Every unit of a dimension of `population`.
UnitDraw all_units(std::int64_t population);

// `want` units (rounded up to whole clusters of `group`, at least two clusters: one alone has no
// standard error) of energy.size(), drawn as above; every unit when want is 0 or covers them.
UnitDraw draw_units(std::span<const double> energy, std::int64_t want, std::int64_t group);

// `want` units of `population` (at least two groups), evenly spaced in whole aligned groups of
// `group` (group ⌊i G / n⌋ of the G groups for i = 0..n-1), each standing for P / n: layers split
// over ranks, where each rank's rows are drawn on their own.
UnitDraw even_units(std::int64_t population, std::int64_t want, std::int64_t group);

// The energies of a tensor's GEMM rows as the GEMM reads them: with kKMajor its rows' squared
// norms, with kKOuter its columns', in float64, non-finite elements as 0. The same bits on any
// thread count.
std::vector<double> unit_energies(const TensorView& view, GemmLayout layout);

}  // namespace fp8a
