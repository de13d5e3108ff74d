#include "engine/run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <span>

#include "core/error.hpp"
#include "core/scale.hpp"
#include "core/text.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/quant_spec.hpp"

namespace fp8a {

bool evaluates(const RunConfig& config, const Recipe& recipe, TrainingFormat format) {
  if (std::find(config.formats.begin(), config.formats.end(), format) == config.formats.end()) return false;
  if (!config.formats_by_kind) return true;
  if (!is_fp8(recipe.kind)) return format == format_of_bf16(config);
  return format == recipe_kind_traits(recipe.kind).default_format;
}

TrainingFormat format_of_bf16(const RunConfig& config) {
  FP8A_CHECK(!config.formats.empty(), "RunConfig: no format to evaluate in");
  for (const TrainingFormat f : config.formats)
    for (const Recipe& r : config.recipes)
      if (is_fp8(r.kind) && recipe_kind_traits(r.kind).default_format == f) return f;
  return config.formats.front();
}

std::string format_option(const RunConfig& config) {
  return config.formats_by_kind ? "auto" : training_format_list(config.formats);
}

std::vector<TrainingFormat> formats_of_kind(const RunConfig& config, RecipeKind kind) {
  Recipe r;
  r.kind = kind;
  std::vector<TrainingFormat> out;
  for (const TrainingFormat f : config.formats)
    if (evaluates(config, r, f)) out.push_back(f);
  return out;
}

std::vector<TrainingFormat> evaluated_formats(const RunConfig& config) {
  std::vector<TrainingFormat> out;
  for (const TrainingFormat f : config.formats)
    if (std::any_of(config.recipes.begin(), config.recipes.end(), [&](const Recipe& r) { return evaluates(config, r, f); }))
      out.push_back(f);
  return out;
}

std::string describe_formats(const RunConfig& config) {
  if (!config.formats_by_kind) return format_option(config);
  std::string s;
  for (const TrainingFormat f : config.formats) {
    std::vector<std::string> kinds;
    for (const Recipe& r : config.recipes) {
      const std::string name = recipe_kind_traits(r.kind).name;
      if (is_fp8(r.kind) && evaluates(config, r, f) && std::find(kinds.begin(), kinds.end(), name) == kinds.end())
        kinds.push_back(name);
    }
    if (kinds.empty()) continue;
    s += (s.empty() ? "" : "; ") + std::string(training_format_name(f)) + ":";
    for (const std::string& k : kinds) s += (k == kinds.front() ? " " : ", ") + k;
  }
  return s.empty() ? "auto" : "auto (" + s + ")";
}

Applicability recipe_fits(const Recipe& recipe, const TensorView& t) {
  const RecipeKindTraits& kind = recipe_kind_traits(recipe.kind);
  const int d = kind.shape_divisor;
  if (d == 0) return Applicability::yes();
  if (t.shape.size() >= 2 && t.rows % d == 0 && t.cols % d == 0) return Applicability::yes();
  return Applicability::no(std::string(kind.short_name) +
                           " needs >= 2 dims with the last dim and the product of the others "
                           "divisible by " + std::to_string(d) + " (TE " + kind.te_quantizer +
                           ".is_quantizable); shape is " + shape_text(t.shape));
}

namespace {

using AmaxHistory = AmaxByStep;
using AmaxHistories = std::map<std::pair<std::string, Role>, AmaxHistory>;

// Adds the captured amaxes of tensors [first, last) to the known ones (the trace's). The trace
// wins where it has the step; several ranks of a captured step reduce by max.
void add_captured_amaxes(const CaptureSet& captures, const std::vector<TensorStats>& stats,
                         const TrainingLog* trace, std::size_t first, std::size_t last, AmaxHistories* known) {
  for (std::size_t i = first; i < last; ++i) {
    const auto& k = captures.tensors[i].key;
    const AmaxSeries* traced = trace != nullptr ? trace->find(k.layer, k.role) : nullptr;
    if (traced != nullptr && traced->amax_by_step.count(k.step) != 0) continue;
    auto [it, inserted] = (*known)[{k.layer, k.role}].try_emplace(k.step, stats[i].amax);
    if (!inserted) it->second = std::max(it->second, stats[i].amax);
  }
}

bool needs_history(const RunConfig& config) {
  for (const auto& r : config.recipes)
    if (replays_history(r.kind)) return true;
  return false;
}

// Shards: consecutive tensors with the same key are ranks of one tensor (sorted by rank).
using Group = std::pair<std::size_t, std::size_t>;  // tensors [first, last)

std::vector<Group> shard_groups(const CaptureSet& captures) {
  const std::size_t n = captures.tensors.size();
  std::vector<Group> groups;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && captures.tensors[j].key == captures.tensors[i].key) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  return groups;
}

// A group's evaluations, and per format the evaluations that are its rows, in row order.
struct GroupRows {
  std::vector<EvaluationRow> evaluations;
  std::vector<std::vector<std::size_t>> of_format;
};

// What a group's evaluation reads besides its shards.
struct GroupInputs {
  const CaptureSet& captures;
  const RunConfig& config;
  const Backend& backend;
  const AmaxHistories& history;  // the amaxes known before the group's step
};

// The group's rows without their results, and the candidates of the applicable ones (slots[c]:
// the evaluation each is for). reduced_amax: the ranks' amax when they share one scale.
GroupRows plan_group(const GroupInputs& in, Group group, std::optional<float> reduced_amax, std::vector<Candidate>* candidates,
                     std::vector<std::size_t>* slots) {
  static const AmaxHistory no_history;
  const auto [first, last] = group;
  const CapturedTensor& t = in.captures.tensors[first];
  const std::vector<TrainingFormat>& formats = in.config.formats;
  GroupRows out;
  std::vector<EvaluationRow>& rows = out.evaluations;
  out.of_format.resize(formats.size());
  for (const Recipe& recipe : in.config.recipes) {
    for (Orientation o : orientations_for(recipe, t.key.role)) {
      const std::size_t first_of_copy = rows.size();
      for (std::size_t f = 0; f < formats.size(); ++f) {
        if (!evaluates(in.config, recipe, formats[f])) continue;
        // BF16 casts to no FP8 type, NVFP4 to E2M1 under E4M3 scales in every format: one
        // evaluation serves every format (reported as E4M3).
        const Fp8Format fp8 = !is_fp8(recipe.kind) || recipe_kind_traits(recipe.kind).fixed_e4m3
                                  ? Fp8Format::kE4M3
                                  : fp8_format_for(formats[f], t.key.role);
        std::size_t e = first_of_copy;
        while (e < rows.size() && rows[e].fp8 != fp8) ++e;
        out.of_format[f].push_back(e);
        if (e < rows.size()) continue;  // an earlier format's evaluation of this FP8 type
        EvaluationRow row;
        row.key = t.key;
        row.file = t.file;
        row.tensor_name = t.tensor_name;
        row.input_dtype = t.view.dtype;
        row.shape = t.view.shape;
        row.ranks = static_cast<int>(last - first);
        row.recipe = recipe;
        row.format = formats[f];
        row.fp8 = fp8;
        row.orientation = o;
        for (std::size_t i = first; i < last && row.applicability.ok; ++i)
          row.applicability = recipe_fits(recipe, in.captures.tensors[i].view);
        Candidate c{recipe, fp8, t.key.role, o};
        if (replays_history(recipe.kind) && row.applicability.ok) {
          const auto known = in.history.find({t.key.layer, t.key.role});
          row.replay = replay_delayed_scale(known != in.history.end() ? known->second : no_history, t.key.step,
                                            recipe, fp8);
          if (row.replay.mode == ReplayMode::kUnavailable)
            row.applicability = Applicability::no(row.replay.detail);
          else
            c.given_scale = row.replay.scale;
        }
        if (is_per_tensor(recipe.kind) && !replays_history(recipe.kind) && reduced_amax)
          c.given_scale = per_tensor_scale(recipe, fp8, *reduced_amax);  // TE's amax all-reduce
        if (two_level_scale(recipe.kind) && reduced_amax && row.applicability.ok) {
          // The ranks share the level-2 scale: the reduced amax, of the transformed copies where
          // the copy is transformed (NVFP4Quantizer's amax reduction).
          float amax = *reduced_amax;
          if (nvfp4_copy_for(recipe, t.key.role, o).rht) {
            amax = 0.0f;
            for (std::size_t i = first; i < last; ++i)
              amax = std::fmax(amax, nvfp4_rht_amax(in.captures.tensors[i].view, o));
          }
          c.given_amax = amax;
        }
        if (row.applicability.ok) {
          candidates->push_back(c);
          slots->push_back(rows.size());
        }
        rows.push_back(std::move(row));
      }
    }
  }
  return out;
}

// Every shard of the group evaluated (stats[i] its statistics) and merged: counts and sums add
// up, stats merge, scale ranges widen.
TensorEvaluation evaluate_shards(const GroupInputs& in, Group group, std::span<const Candidate> candidates,
                                 UnitStore* store, std::vector<TensorStats>* stats) {
  const auto [first, last] = group;
  TensorEvaluation total;
  for (std::size_t i = first; i < last; ++i) {
    const TensorEvaluation eval = evaluate_shard(in.backend, store, in.captures.tensors[i], candidates);
    (*stats)[i] = eval.stats;
    if (i == first) {
      total = eval;
      continue;
    }
    total.stats.merge(eval.stats);
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      auto& m = total.results[c].metrics;
      const auto& e = eval.results[c].metrics;
      m.sums.merge(e.sums);
      m.scale_inv_min = std::min(m.scale_inv_min, e.scale_inv_min);
      m.scale_inv_max = std::max(m.scale_inv_max, e.scale_inv_max);
      if (!(m.scale == e.scale)) m.scale = m.scale_inv = std::numeric_limits<float>::quiet_NaN();
      if (!eval.results[c].applicability.ok) total.results[c].applicability = eval.results[c].applicability;
    }
  }
  if (last - first > 1)
    for (auto& r : total.results) {
      const auto range_min = r.metrics.scale_inv_min, range_max = r.metrics.scale_inv_max;
      r.metrics = finalize_metrics(total.stats, r.metrics.scale, r.metrics.scale_inv, r.metrics.sums);
      r.metrics.scale_inv_min = range_min;
      r.metrics.scale_inv_max = range_max;
    }
  return total;
}

// One group's rows (its shards looked up in and saved to store). Ranks of a sharded tensor
// reduce their amax first (TE's amax all-reduce): only those are read twice, their statistics
// pass first.
GroupRows evaluate_group(const GroupInputs& in, Group group, UnitStore* store, std::vector<TensorStats>* stats) {
  const auto [first, last] = group;
  std::optional<float> reduced_amax;
  if (last - first > 1 && in.config.amax_reduction == AmaxReduction::kTp) {
    reduced_amax = 0.0f;
    for (std::size_t i = first; i < last; ++i)
      reduced_amax = std::max(*reduced_amax, evaluate_shard(in.backend, store, in.captures.tensors[i], {}).stats.amax);
  }
  std::vector<Candidate> candidates;
  std::vector<std::size_t> slots;
  GroupRows out = plan_group(in, group, reduced_amax, &candidates, &slots);
  const TensorEvaluation total = evaluate_shards(in, group, candidates, store, stats);
  for (auto& row : out.evaluations) {
    row.stats = total.stats;
    row.current_scale = scale_from_amax(total.stats.amax, fp8_max_finite(row.fp8), false, 0.0f);
  }
  for (std::size_t c = 0; c < slots.size(); ++c) {
    out.evaluations[slots[c]].applicability = total.results[c].applicability;
    out.evaluations[slots[c]].metrics = total.results[c].metrics;
  }
  return out;
}

// The table, filled one group at a time: each evaluation moved into the last row that uses it
// (copied into the others), then the group's evaluations freed. Never the whole table twice.
std::vector<EvaluationRow> assemble_table(std::vector<GroupRows>& per_group, const std::vector<TrainingFormat>& formats) {
  std::vector<std::size_t> format_begin(formats.size() + 1, 0);  // first row of each format
  for (std::size_t f = 0; f < formats.size(); ++f) {
    format_begin[f + 1] = format_begin[f];
    for (const GroupRows& group : per_group) format_begin[f + 1] += group.of_format[f].size();
  }
  std::vector<EvaluationRow> out(format_begin.back());
  std::vector<std::size_t> next(format_begin.begin(), format_begin.end() - 1);  // per format
  for (GroupRows& group : per_group) {
    std::vector<std::size_t> last_use(group.evaluations.size(), 0);  // the format
    for (std::size_t f = 0; f < formats.size(); ++f)
      for (const std::size_t e : group.of_format[f]) last_use[e] = f;
    for (std::size_t f = 0; f < formats.size(); ++f)
      for (const std::size_t e : group.of_format[f]) {
        EvaluationRow& row = out[next[f]++];
        if (last_use[e] == f) row = std::move(group.evaluations[e]);
        else row = group.evaluations[e];
        row.format = formats[f];
      }
    group = GroupRows{};
  }
  return out;
}

}  // namespace

std::vector<EvaluationRow> evaluate_captures(const CaptureSet& captures, const RunConfig& config,
                                             const Backend& backend, const RunContext& context) {
  const std::vector<Group> groups = shard_groups(captures);
  std::vector<TensorStats> stats(captures.tensors.size());
  // Each tensor is read once. Delayed scaling at step t reads the amaxes of steps before t only
  // (delayed_replay.hpp), so with delayed recipes the groups are evaluated in waves of one step
  // each, in step order (captures are sorted by step), and each wave's amaxes (from its own
  // evaluation) join the known ones before the next. Without delayed recipes, one wave.
  AmaxHistories history;
  if (config.training_log != nullptr)
    for (const auto& [key, series] : config.training_log->series) history[key] = series.amax_by_step;
  const bool by_step = needs_history(config);
  std::vector<Unit> units(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    Unit& u = units[g];
    const CapturedTensor& t = captures.tensors[groups[g].first];
    u.name = t.key.layer;
    u.wave = by_step ? t.key.step : 0;
    u.kind = UnitKind::kShard;
    for (std::size_t i = groups[g].first; i < groups[g].second; ++i) {
      u.inputs.push_back(&captures.tensors[i].view);
      u.keys.push_back(shard_unit_key(captures.tensors[i]));
      u.cost += captures.tensors[i].view.byte_size();
    }
  }
  const GroupInputs in{captures, config, backend, history};
  std::vector<GroupRows> per_group(groups.size());
  UnitWork work;
  work.compute = [&](std::size_t g, UnitStore* store) { per_group[g] = evaluate_group(in, groups[g], store, &stats); };
  work.wave_done = [&](std::size_t first, std::size_t last) {
    add_captured_amaxes(captures, stats, config.training_log, groups[first].first, groups[last - 1].second, &history);
  };
  run_units(context, "tensors", units, work);
  return assemble_table(per_group, config.formats);
}

}  // namespace fp8a
