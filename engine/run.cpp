#include "engine/run.hpp"

#include <tbb/parallel_for.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>

#include "core/scale.hpp"
#include "core/text.hpp"
#include "engine/cluster.hpp"

namespace fp8a {

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

double delayed_vs_current_log2(const EvaluationRow& row) {
  if (!replays_history(row.recipe.kind) || !row.applicability.ok)
    return std::numeric_limits<double>::quiet_NaN();
  return std::log2(static_cast<double>(row.metrics.scale)) -
         std::log2(static_cast<double>(row.current_scale));
}

namespace {

using AmaxHistory = std::map<std::int64_t, float>;
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

}  // namespace

std::vector<EvaluationRow> evaluate_captures(const CaptureSet& captures, const RunConfig& config,
                                             const Backend& backend) {
  const std::size_t n = captures.tensors.size();
  std::vector<TensorStats> stats(n);
  // Shards: consecutive tensors with the same key are ranks of one tensor (sorted by rank).
  std::vector<std::pair<std::size_t, std::size_t>> groups;  // [first, last)
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && captures.tensors[j].key == captures.tensors[i].key) ++j;
    groups.emplace_back(i, j);
    i = j;
  }

  // Each tensor is read once. Delayed scaling at step t reads the amaxes of steps before t only
  // (delayed_replay.hpp), so with delayed recipes the groups are evaluated in waves of one step
  // each, in step order (captures are sorted by step), and each wave's amaxes (from its own
  // evaluation) join the known ones before the next. Without delayed recipes, one wave. Ranks
  // of a sharded tensor reduce their amax first (TE's amax all-reduce): only those are read
  // twice, their statistics pass first.
  AmaxHistories history;
  if (config.training_log != nullptr)
    for (const auto& [key, series] : config.training_log->series) history[key] = series.amax_by_step;
  const AmaxHistory no_history;
  const bool by_step = needs_history(config);
  const auto step_of = [&](std::size_t g) { return captures.tensors[groups[g].first].key.step; };
  std::vector<std::pair<std::size_t, std::size_t>> waves;  // groups [first, last)
  for (std::size_t g = 0; g < groups.size();) {
    std::size_t h = by_step ? g + 1 : groups.size();
    while (h < groups.size() && step_of(h) == step_of(g)) ++h;
    waves.emplace_back(g, h);
    g = h;
  }

  // Per group: its evaluations, and per format the evaluations that are its rows, in row order.
  struct GroupRows {
    std::vector<EvaluationRow> evaluations;
    std::vector<std::vector<std::size_t>> of_format;
  };
  const std::vector<TrainingFormat>& formats = config.formats;
  std::vector<GroupRows> per_group(groups.size());
  // store: where shard evaluations are looked up and saved (config.store, or the exchange's).
  const auto evaluate_group = [&](std::size_t g, UnitStore* store) {
    const auto [first, last] = groups[g];
    const CapturedTensor& t = captures.tensors[first];
    const bool reduce = last - first > 1 && config.amax_reduction == AmaxReduction::kTp;
    float reduced_amax = 0.0f;
    if (reduce)
      for (std::size_t i = first; i < last; ++i)
        reduced_amax = std::max(reduced_amax, evaluate_shard(backend, store, captures.tensors[i], {}).stats.amax);
    std::vector<EvaluationRow>& rows = per_group[g].evaluations;
    per_group[g].of_format.resize(formats.size());
    std::vector<Candidate> candidates;
    std::vector<std::size_t> slots;  // evaluation index of each candidate sent to the backend
    for (const Recipe& recipe : config.recipes) {
      for (Orientation o : orientations_for(recipe, t.key.role)) {
        const std::size_t first_of_copy = rows.size();
        for (std::size_t f = 0; f < formats.size(); ++f) {
          // BF16 casts to no FP8 type: one evaluation serves every format (reported as E4M3).
          const Fp8Format fp8 = !is_fp8(recipe.kind)
                                    ? Fp8Format::kE4M3
                                    : fp8_format_for(formats[f], t.key.role);
          std::size_t e = first_of_copy;
          while (e < rows.size() && rows[e].fp8 != fp8) ++e;
          per_group[g].of_format[f].push_back(e);
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
            row.applicability = recipe_fits(recipe, captures.tensors[i].view);
          Candidate c{recipe, fp8, t.key.role, o};
          if (replays_history(recipe.kind) && row.applicability.ok) {
            const auto known = history.find({t.key.layer, t.key.role});
            row.replay = replay_delayed_scale(known != history.end() ? known->second : no_history,
                                              t.key.step, recipe, fp8);
            if (row.replay.mode == ReplayMode::kUnavailable)
              row.applicability = Applicability::no(row.replay.detail);
            else
              c.given_scale = row.replay.scale;
          }
          if (is_per_tensor(recipe.kind) && !replays_history(recipe.kind) && reduce)
            c.given_scale = per_tensor_scale(recipe, fp8, reduced_amax);  // TE's amax all-reduce
          if (row.applicability.ok) {
            candidates.push_back(c);
            slots.push_back(rows.size());
          }
          rows.push_back(std::move(row));
        }
      }
    }
    // Evaluate every shard and merge: counts and sums add up, stats merge, scale ranges widen.
    TensorEvaluation total;
    for (std::size_t i = first; i < last; ++i) {
      const TensorEvaluation eval = evaluate_shard(backend, store, captures.tensors[i], candidates);
      stats[i] = eval.stats;
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
    for (auto& row : rows) {
      row.stats = total.stats;
      row.current_scale = scale_from_amax(total.stats.amax, fp8_max_finite(row.fp8), false, 0.0f);
    }
    for (std::size_t c = 0; c < slots.size(); ++c) {
      rows[slots[c]].applicability = total.results[c].applicability;
      rows[slots[c]].metrics = total.results[c].metrics;
    }
  };
  const auto group_bytes = [&](std::size_t g) {
    std::uint64_t b = 0;
    for (std::size_t i = groups[g].first; i < groups[g].second; ++i) {
      const TensorView& v = captures.tensors[i].view;
      b += static_cast<std::uint64_t>(v.numel()) * dtype_size(v.dtype);
    }
    return b;
  };
  if (config.progress != nullptr) {
    std::uint64_t total = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) total += group_bytes(g);
    config.progress->begin_stage("tensors", groups.size(), total);
  }
  // Done with a group's bytes: the resident set holds the groups being evaluated, not all read
  // so far.
  const auto release_group = [&](std::size_t g) {
    for (std::size_t i = groups[g].first; i < groups[g].second; ++i) captures.tensors[i].view.release();
  };
  const auto report = [&](std::size_t g) {
    if (config.progress != nullptr)
      config.progress->unit_done(captures.tensors[groups[g].first].key.layer, group_bytes(g));
  };
  // A group evaluated (its shards looked up in and saved to store), unless a stop was requested.
  std::atomic<bool> stopped{false};
  const auto evaluate_and_report = [&](std::size_t g, UnitStore* store) {
    if (stop_requested(config.stop)) {
      stopped = true;
      return;
    }
    evaluate_group(g, store);
    release_group(g);
    report(g);
  };
  // Over several ranks, each wave's groups are shared out by their bytes; each rank evaluates its
  // own (recording the shard evaluations), all are exchanged, and every rank assembles the other
  // ranks' groups from their evaluations: every rank ends with every row and the same history.
  // With a checkpoint on some rank (rank 0's), it first offers what it holds of the others'
  // shards, so that a resumed run over several ranks reuses all of it.
  const bool offers = is_distributed(config.cluster) && any_rank_has_store(*config.cluster, config.store);
  const auto evaluate_wave_shared = [&](std::size_t begin, std::size_t end) {
    Cluster& cluster = *config.cluster;
    std::vector<std::uint64_t> costs;
    for (std::size_t g = begin; g < end; ++g) costs.push_back(group_bytes(g));
    const std::vector<int> owner = assign_balanced(costs, cluster.size());
    const auto mine = [&](std::size_t g) { return owner[g - begin] == cluster.rank(); };
    GatheredUnits offered;
    if (offers) {
      RecordingStore offer(nullptr);
      if (config.store != nullptr)
        for (std::size_t g = begin; g < end; ++g)
          for (std::size_t i = groups[g].first; !mine(g) && i < groups[g].second; ++i) {
            const std::string key = shard_unit_key(captures.tensors[i]);
            if (auto bytes = config.store->load(UnitKind::kShard, key)) offer.save(UnitKind::kShard, key, *bytes);
          }
      offered = exchange_units(cluster, offer, false);
    }
    OfferedStore own_store(offered, config.store);
    RecordingStore recorder(offers ? &own_store : config.store);
    tbb::parallel_for(begin, end, [&](std::size_t g) {
      if (mine(g)) evaluate_and_report(g, &recorder);
    });
    GatheredUnits all = exchange_units(cluster, recorder, stopped);
    if (all.stopped()) throw StopRequested();
    if (config.store != nullptr) all.save_received(*config.store, recorder);
    tbb::parallel_for(begin, end, [&](std::size_t g) {
      if (mine(g)) return;
      evaluate_group(g, &all);
      report(g);
    });
  };
  for (const auto& [begin, end] : waves) {
    if (is_distributed(config.cluster)) {
      evaluate_wave_shared(begin, end);
    } else {
      tbb::parallel_for(begin, end, [&](std::size_t g) { evaluate_and_report(g, config.store); });
      if (stopped) throw StopRequested();
    }
    add_captured_amaxes(captures, stats, config.training_log, groups[begin].first, groups[end - 1].second, &history);
  }
  if (config.progress != nullptr) config.progress->end_stage();
  // The table, filled one group at a time: each evaluation moved into the last row that uses it
  // (copied into the others), then the group's evaluations freed. Never the whole table twice.
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

}  // namespace fp8a
