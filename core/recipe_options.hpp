// Recipe options as rows, beside the recipe kinds (core/recipe.hpp): one row per option a recipe
// spec can set, saying how Transformer Engine takes it (a field of the recipe class, or an
// environment variable TE reads at import), from which TE release, and how each consumer file
// carries it. Every renderer, the answer and the candidate exclusions read these rows, so no two
// files can tell a user two stories about one option (issue 38). A new option is a row here, the
// parser's branch (core/recipe.cpp apply_option) and its numerics; a new consumer is a column.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/recipe.hpp"
#include "core/te_version.hpp"

namespace fp8a {

// The files (and the objects in them) that hand a recipe to a trainer.
enum class Consumer : std::uint8_t {
  kTe,               // TE's recipe object: recipe.json's "recipe", te_snippet.py, the answer, the reports
  kMegatronArgs,     // megatron_args.txt: Megatron-LM's flags
  kMegatronBridge,   // megatron_bridge.yaml: Megatron-Bridge's MixedPrecisionConfig
  kPrecisionConfig,  // te_precision_config.yaml: Megatron's per-module TEQuantizationParams
  kTorchao,          // torchao.json: Float8LinearConfig.from_recipe_name
};
inline constexpr Consumer kConsumers[] = {Consumer::kTe, Consumer::kMegatronArgs, Consumer::kMegatronBridge,
                                          Consumer::kPrecisionConfig, Consumer::kTorchao};
inline constexpr int kConsumerCount = 5;
// "TE's recipe object", "megatron_args.txt", ...: the consumer in notes.
const char* consumer_name(Consumer c);

// How a consumer carries an option.
enum class Carrier : std::uint8_t {
  kField,  // a field, flag or key of the consumer's own (name: the field's name there)
  kEnv,    // only through the environment variable TE reads at import (name: the variable): no
           // field sets it; the file says to set it
  kNone,   // not at all: the trainer runs without the option; the file says so
};

struct CarriedBy {
  Carrier carrier;
  const char* name;  // the field (kField) or environment variable (kEnv); "" for kNone
};

using RecipeOptionValue = std::variant<bool, int, std::string>;

// The value as a flag or YAML scalar writes it: 3, most_recent, true.
std::string option_value_text(const RecipeOptionValue& v);

struct RecipeOptionRow {
  const char* name;  // as a spec writes it: "current:pow2", "current:eps", "delayed:margin"
  RecipeKind kind;
  const char* what;  // "power-of-two current scaling", in notes
  // The recipe takes the option away from TE's default (the option is "set").
  bool (*set)(const Recipe& r);
  // The option's value for a field, as the field's Python type (margin: int, algo: str); for an
  // environment variable, the variable's value when set.
  RecipeOptionValue (*value)(const Recipe& r);
  // TE trains no recipe with the option set: it is evaluated for comparison, never the answer
  // (te_cannot_train says why: `without`).
  bool evaluation_only;
  // The first TE release that reads it; {0, 0}: every release --te-version accepts. A release
  // before it trains without the option, and a candidate that sets it is excluded there.
  TeVersion te_since;
  // Indexed by Consumer; [kTe] is how TE itself takes it.
  CarriedBy by[kConsumerCount];
  // What the trainer does without the option, where TE itself cannot take it (kNone in [kTe]):
  // "<name>: <without>" in every file. For an evaluation-only option, why TE trains no such recipe.
  const char* without;
  // Where TE takes it but torchao's recipe names cannot: what torchao trains with instead.
  const char* torchao_without;
  // Before te_since: what that release trains with instead ("Float8CurrentScaling with FP32 scales").
  const char* before_since;
};

// Every row, in the order files list them (per kind, TE's declaration order within one).
const std::vector<RecipeOptionRow>& recipe_option_rows();
// The rows of the recipe's kind that the recipe sets (fields: every row of the kind, set or not,
// is in recipe_field_rows).
std::vector<const RecipeOptionRow*> options_set(const Recipe& r);
// The rows of the kind a consumer carries as fields (TE's DelayedScaling margin, history, algo),
// whether set or not: those consumers write every one of them.
std::vector<const RecipeOptionRow*> field_rows(RecipeKind kind, Consumer c);

// How consumer c carries one option the recipe sets, for TE release te, and the one sentence
// every file says about it ("" for a field: the field says it).
struct OptionCarriage {
  const RecipeOptionRow* row;
  Carrier carrier;          // kNone as well where the release predates the option
  std::string env_name, env_value;  // kEnv
  std::string note;
};
std::vector<OptionCarriage> carry_options(const Recipe& r, Consumer c, TeVersion te);

// The sentences of carry_options, in row order: what a consumer file says about the options that
// are not its fields (the environment to set, what the trainer runs without).
std::vector<std::string> option_notes(const Recipe& r, Consumer c, TeVersion te);

// The training format, carried like an option: a field of TE's recipe (fp8_format: E4M3, HYBRID),
// Megatron's --fp8-format, Bridge's fp8 and the per-module config's fp8_format (e4m3, hybrid);
// torchao's recipe names fix the gradients' FP8 type (RecipeKindTraits::torchao_format), so
// torchao.json carries the format its recipe trains and says so of the other.
struct FormatCarriage {
  Carrier carrier = Carrier::kField;  // kNone: the consumer's recipe trains the other format
  std::string name;                   // the field: "fp8_format", "--fp8-format", "fp8", "recipe_name"
  std::string value;                  // as the consumer spells it: "HYBRID", "hybrid"
  std::string note;                   // kNone: the sentence the file says
};
FormatCarriage carry_format(RecipeKind kind, TrainingFormat format, Consumer c);

// Whether the consumer carries everything the recipe sets as a field of its own: what a
// per-module config needs to give one module the recipe (an environment variable is global).
bool carried_as_fields(const Recipe& r, Consumer c);

}  // namespace fp8a
