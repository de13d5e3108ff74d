// Run orchestration: every (captured tensor x recipe x orientation) evaluated on a backend, as
// table rows, with delayed scaling replayed over the captured steps and an optional training log.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "datasets/training_log.hpp"
#include "datasets/capture.hpp"
#include "engine/backend.hpp"
#include "engine/delayed_replay.hpp"
#include "engine/evaluation_row.hpp"
#include "engine/schedule.hpp"

namespace fp8a {

// How the per-tensor amax of a tensor captured as several rank shards is formed, as TE does:
// kTp reduces it (max) over the ranks (TE's amax all-reduce for delayed scaling and for
// sequence-parallel inputs), so every shard uses one scale; kNone scales each shard by its own
// amax (current scaling of a tensor-parallel shard). Delayed scaling always replays the reduced
// history. Blocked recipes are per block either way.
enum class AmaxReduction { kTp, kNone };

struct RunConfig {
  std::vector<Recipe> recipes;
  AmaxReduction amax_reduction = AmaxReduction::kTp;
  // The formats evaluated, each once, in this order. A tensor is evaluated once per (recipe, FP8
  // type): activation and weight (E4M3 in every format) and BF16 once, gradients once per
  // distinct type (E4M3 for e4m3, E5M2 for hybrid).
  std::vector<TrainingFormat> formats = kAllTrainingFormats;
  // `--format auto`: each FP8 recipe only in its kind's default_format (core/recipe.hpp), the
  // BF16 round trip in one format (format_of_bf16), so no table lists a recipe twice.
  bool formats_by_kind = false;
  const TrainingLog* training_log = nullptr;  // amaxes of every step: exact delayed replay
};

// Whether the config evaluates the recipe in the format: every format of config.formats, or under
// formats_by_kind, an FP8 recipe's default_format and the BF16 round trip's format_of_bf16.
bool evaluates(const RunConfig& config, const Recipe& recipe, TrainingFormat format);
// Under formats_by_kind, the format the BF16 round trip is listed in: the first of config.formats
// that an FP8 recipe of the config is evaluated in (the first of config.formats if none).
TrainingFormat format_of_bf16(const RunConfig& config);
// `--format` as given: "auto" under formats_by_kind, else the list ("e4m3,hybrid").
std::string format_option(const RunConfig& config);
// The formats the config evaluates recipes of this kind in, in config.formats order.
std::vector<TrainingFormat> formats_of_kind(const RunConfig& config, RecipeKind kind);
// The formats some recipe of the config is evaluated in, in config.formats order.
std::vector<TrainingFormat> evaluated_formats(const RunConfig& config);
// format_option for a reader: under auto, which recipe kinds each format holds
// ("auto (hybrid: current, delayed, block; e4m3: mxfp8)").
std::string describe_formats(const RunConfig& config);

// Whether TE can quantise a tensor of this shape with the recipe, by the row's shape_divisor:
// MXFP8 needs at least 2 dims and both dims of the 2-D view divisible by 32 (TE
// MXFP8Quantizer.is_quantizable); the other recipes take any shape (block scaling pads partial
// blocks).
Applicability recipe_fits(const Recipe& recipe, const TensorView& tensor);

// Rows ordered by format (config order), then tensor (capture order), then recipe (config order),
// then orientation: each format's rows are exactly those of a run of that format alone. The
// result does not depend on the thread count, the rank count, nor on which evaluations came from
// the store. Its units (run_units, stage "tensors") are the tensors, a sharded tensor's ranks as
// one; the store keeps each shard's evaluations. Throws StopRequested on a stop request.
std::vector<EvaluationRow> evaluate_captures(const CaptureSet& captures, const RunConfig& config,
                                             const Backend& backend, const RunContext& context = {});

}  // namespace fp8a
