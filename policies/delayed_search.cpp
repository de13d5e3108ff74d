#include "policies/delayed_search.hpp"

#include <algorithm>
#include <cmath>

#include "core/text.hpp"
#include "policies/choice.hpp"

namespace fp8a {

namespace {

// TE's DelayedScaling() defaults.
Recipe te_default() { return delayed_recipe(1024, DelayedAlgo::kMax, 0); }

// The clip amount as an integer key: equal within kClipTieBinades.
long long clip_key(double binades) { return std::llround(std::ceil(binades / kClipTieBinades)); }

const DelayedOption* find_option(const DelayedSearch& s, const Recipe& r) {
  for (const DelayedOption& o : s.options)
    if (o.recipe == r) return &o;
  return nullptr;
}

// The element-weighted share of `cand`'s evaluated tensor copies that flush and that clip, in
// percent: "its casts flush 0.412 % and clip 0.0000 % of the elements".
std::string cast_cost(std::span<const EvaluationRow> rows, const RunCandidate& cand) {
  double n = 0, flushed = 0, clipped = 0;
  for (const EvaluationRow& r : rows) {
    if (!(r.recipe == cand.recipe) || r.format != cand.format || !r.applicability.ok) continue;
    n += static_cast<double>(r.stats.numel);
    flushed += static_cast<double>(r.metrics.sums.underflow_count);
    clipped += static_cast<double>(r.metrics.sums.saturated_count);
  }
  if (!(n > 0)) return "";
  return format_text("; on the captures its casts flush %.3f %% and clip %.4f %% of the elements",
                     100 * flushed / n, 100 * clipped / n);
}

}  // namespace

DelayedSearch search_delayed_options(const TrainingLog& log, std::span<const TrainingFormat> formats,
                                     const AmaxTrendConfig& config) {
  std::vector<Recipe> recipes;
  for (int margin = 0; margin <= kSearchMaxMargin; ++margin) {
    for (auto h = std::rbegin(kSearchHistories); h != std::rend(kSearchHistories); ++h)
      recipes.push_back(delayed_recipe(*h, DelayedAlgo::kMax, margin));
    recipes.push_back(delayed_recipe(1024, DelayedAlgo::kMostRecent, margin));
  }
  const std::vector<DelayedForecast> forecasts = forecast_delayed_scaling(&log, {}, recipes, formats, config);
  DelayedSearch s;
  for (const Recipe& r : recipes) {
    DelayedOption o;
    o.recipe = r;
    double headroom = 0;
    std::size_t with_headroom = 0;
    const std::string spec = r.spec();
    for (const DelayedForecast& f : forecasts) {
      if (f.recipe != spec) continue;
      ++o.series;
      double clip = 0;
      if (f.judged_steps > 0) clip = std::max(clip, f.worst_jump_binades - r.margin);
      if (f.horizon_excess_binades > 0) clip = std::max(clip, f.horizon_excess_binades);
      o.clip_binades = std::max(o.clip_binades, clip);
      o.clipping_series += clip > 0 ? 1 : 0;
      if (std::isfinite(f.mean_headroom_binades)) {
        headroom += f.mean_headroom_binades;
        ++with_headroom;
      }
    }
    o.mean_headroom_binades = with_headroom > 0 ? headroom / static_cast<double>(with_headroom) : 0.0;
    s.options.push_back(o);
  }
  std::stable_sort(s.options.begin(), s.options.end(), [](const DelayedOption& a, const DelayedOption& b) {
    const long long ka = clip_key(a.clip_binades), kb = clip_key(b.clip_binades);
    if (ka != kb) return ka < kb;
    return a.mean_headroom_binades < b.mean_headroom_binades;
  });
  const auto add = [&](const Recipe& r) {
    if (std::find(s.front_runners.begin(), s.front_runners.end(), r) == s.front_runners.end())
      s.front_runners.push_back(r);
  };
  add(s.options.front().recipe);
  for (const DelayedOption& o : s.options)
    if (o.recipe.margin == 0) {
      add(o.recipe);
      break;
    }
  add(te_default());
  return s;
}

std::vector<Recipe> with_front_runners(std::span<const Recipe> recipes, const DelayedSearch& search) {
  std::vector<Recipe> out;
  bool placed = false;
  for (const Recipe& r : recipes) {
    if (!replays_history(r.kind)) {
      out.push_back(r);
      continue;
    }
    if (!placed) out.insert(out.end(), search.front_runners.begin(), search.front_runners.end());
    placed = true;
  }
  if (!placed) out.insert(out.end(), search.front_runners.begin(), search.front_runners.end());
  return out;
}

std::string delayed_search_summary(const DelayedSearch& search, const std::vector<CandidatePlan>& candidates,
                                   std::span<const EvaluationRow> rows, bool costed) {
  std::string s = format_text("%zu options searched on the trace (history %d..%d with algo max, most_recent; "
                              "margin 0..%d), %zu evaluated",
                              search.options.size(), kSearchHistories[0], std::end(kSearchHistories)[-1],
                              kSearchMaxMargin, search.front_runners.size());
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (replays_history(candidates[i].candidate.recipe.kind) && candidates[i].runnable &&
        (!best || ranks_before(candidates, i, *best, costed)))
      best = i;
  if (!best) return s + "; none of them can be chosen here";
  const CandidatePlan& b = candidates[*best];
  const auto trace = [&](const Recipe& r) {
    const DelayedOption* o = find_option(search, r);
    if (o == nullptr) return std::string();
    return format_text("clips by at most %.3g binades on %zu of %zu series at a mean headroom of %.2f binades "
                       "below current scaling",
                       o->clip_binades, o->clipping_series, o->series, o->mean_headroom_binades);
  };
  // The numbers' share: with a cost model the plan may send GEMMs to BF16 where FP8 does not pay.
  const auto share = [&](const CandidatePlan& c) {
    return c.total_flops > 0 ? 100.0 * (costed ? c.numerics_fp8_flops : c.fp8_flops) / c.total_flops : 0.0;
  };
  s += format_text("; best %s: the numbers allow %.1f %% of the GEMM FLOPs in FP8; on the trace it %s",
                   candidate_name(b.candidate).c_str(), share(b), trace(b.candidate.recipe).c_str());
  s += cast_cost(rows, b.candidate);
  const Recipe def = te_default();
  if (!(b.candidate.recipe == def))
    for (const CandidatePlan& c : candidates)
      if (c.candidate.recipe == def && c.candidate.format == b.candidate.format) {
        s += format_text("; TE's default %s: %.1f %%, %s", candidate_name(c.candidate).c_str(), share(c),
                         trace(def).c_str());
        s += cast_cost(rows, c.candidate);
        break;
      }
  return s + " (one delayed recipe per run: te_precision_config cannot set delayed options per module)";
}

}  // namespace fp8a
