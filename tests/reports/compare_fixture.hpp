// Hand-built comparisons for the compare renderers' tests (test_compare_report.cpp's goldens,
// test_compare_html.cpp's structure).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "policies/compare.hpp"
#include "reports/compare_report.hpp"

namespace fp8a::testing {

inline MetricsRecord compare_row(std::int64_t step, const std::string& layer, Role role, const std::string& recipe,
                                 const std::string& orientation, double underflow, double mse, double rel_mse,
                                 double saturated = 0) {
  MetricsRecord r;
  r.key = {step, layer, role};
  r.recipe = recipe;
  r.format = "hybrid";
  r.orientation = orientation;
  r.amax = 448;
  r.mse = mse;
  r.rel_mse = rel_mse;
  r.sqnr_db = -10 * std::log10(rel_mse);
  r.cos = 1 - rel_mse / 2;
  r.underflow_pct = underflow;
  r.saturated_pct = saturated;
  return r;
}

// NVIDIA's published example (an FC2 forward input: 1 % underflow and MSE 1e-2 in the good run,
// 80 % and 1e3 in the bad one) among smaller divergences: the FC2 weight losing 20 dB, its
// gradient saturating 30 % more, an mxfp8 row and columnwise copy of layers.10 (model order after
// layers.3), a QKV input captured at steps 100/200 in base and 100/250 in cand (a nearest-step
// match), and one group each that only base or only cand holds.
inline CompareResult nvidia_comparison() {
  const std::string fc2 = "layers.3.mlp.linear_fc2", fc1 = "layers.10.mlp.linear_fc1",
                    qkv = "layers.0.self_attention.linear_qkv";
  const std::vector<MetricsRecord> good = {
      compare_row(100, fc2, Role::kActivation, "current", "rowwise", 1, 1e-2, 1e-3),
      compare_row(100, fc2, Role::kWeight, "current", "rowwise", 0, 1e-6, 1e-4),
      compare_row(100, fc2, Role::kGradient, "current", "rowwise", 0, 1e-9, 1e-3),
      compare_row(100, fc1, Role::kActivation, "current", "rowwise", 0.5, 1e-3, 2e-3),
      compare_row(100, fc1, Role::kActivation, "mxfp8", "rowwise", 0.1, 1e-3, 1e-3),
      compare_row(100, fc1, Role::kActivation, "mxfp8", "columnwise", 0.1, 1e-3, 1e-3),
      compare_row(100, qkv, Role::kActivation, "current", "rowwise", 0.2, 1e-4, 1e-3),
      compare_row(200, qkv, Role::kActivation, "current", "rowwise", 0.2, 1e-4, 1e-3),
      compare_row(100, "layers.11.mlp.linear_fc1", Role::kWeight, "current", "rowwise", 0, 1e-6, 1e-4)};
  const std::vector<MetricsRecord> bad = {
      compare_row(100, fc2, Role::kActivation, "current", "rowwise", 80, 1e3, 1e-2),
      compare_row(100, fc2, Role::kWeight, "current", "rowwise", 0, 1e-4, 1e-2),
      compare_row(100, fc2, Role::kGradient, "current", "rowwise", 0, 1e-9, 1e-3, 30),
      compare_row(100, fc1, Role::kActivation, "current", "rowwise", 2.5, 2e-3, 4e-3),
      compare_row(100, fc1, Role::kActivation, "mxfp8", "rowwise", 0.1, 1e-3, 1e-3),
      compare_row(100, fc1, Role::kActivation, "mxfp8", "columnwise", 5.1, 1e-3, 1e-3),
      compare_row(100, qkv, Role::kActivation, "current", "rowwise", 0.4, 1e-4, 1e-3),
      compare_row(250, qkv, Role::kActivation, "current", "rowwise", 0.7, 2e-4, 2e-3),
      compare_row(100, fc1, Role::kGradient, "block", "columnwise", 0, 1e-9, 1e-3)};
  return compare_records(good, bad);
}

// A result built field by field, as no matching would give it: a non-finite score, and names
// with the characters each format must escape (| for Markdown, , and " for CSV, < & > for HTML).
inline CompareResult escaping_comparison() {
  CompareResult r;
  CompareMatch m;
  m.base = compare_row(7, "blocks.0.<attn>|\"q,k\"&v", Role::kGradient, "delayed:history=16:algo=most_recent",
                       "rowwise", 0, 1e-6, 1e-4);
  m.cand = m.base;
  m.cand.key.step = 9;
  m.cand.rel_mse = std::numeric_limits<double>::quiet_NaN();
  m.cand.sqnr_db = std::numeric_limits<double>::quiet_NaN();
  m.cand.mse = std::numeric_limits<double>::infinity();
  m.same_step = false;
  m.step_note = "nearest: base 7, cand 9";
  m.terms = {std::numeric_limits<double>::infinity(), 0, 0};
  m.score = std::numeric_limits<double>::infinity();
  m.driver = 0;
  m.rank = 1;
  r.matches = {m};
  r.base_rows = 1;
  r.cand_rows = 2;
  r.cand_unmatched_rows = 1;
  r.cand_only = {{"blocks.1.<mlp>|x", Role::kWeight, "current", "e4m3", "rowwise"}};
  r.base_steps = {7};
  r.cand_steps = {8, 9};
  return r;
}

inline CompareInfo fixed_compare_info() {
  CompareInfo info;
  info.version = "0.1.0";
  info.git_revision = "0123456789ab";
  info.command_line = {"fp8-advisor", "compare", "good", "bad", "--out", "out"};
  info.backend = "cpu";
  info.device = "2 threads (oneTBB)";
  info.base_path = "good";
  info.cand_path = "bad";
  info.base_kind = "capture";
  info.cand_kind = "run folder";
  return info;
}

}  // namespace fp8a::testing
