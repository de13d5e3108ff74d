#include "core/recipe.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.hpp"
#include "core/text.hpp"
#include "core/scale.hpp"
#include "core/suggest.hpp"

namespace fp8a {

bool role_from_name(std::string_view name, Role* out) {
  for (int i = 0; i < 3; ++i) {
    if (name == kRoleNames[i]) {
      *out = static_cast<Role>(i);
      return true;
    }
  }
  return false;
}

const char* training_format_name(TrainingFormat f) {
  return f == TrainingFormat::kE4M3 ? "e4m3" : "hybrid";
}

TrainingFormat parse_training_format(std::string_view name) {
  if (name == "e4m3") return TrainingFormat::kE4M3;
  if (name == "hybrid") return TrainingFormat::kHybrid;
  if (name == "e5m2")
    throw usage_error("fp8a.usage.202",
                      "--format e5m2: Transformer Engine has no all-E5M2 recipe; use e4m3 or hybrid "
                      "(E5M2 for gradients only)");
  throw usage_error("fp8a.usage.202", "--format " + quoted_input(name, 200) +
                                          ": expected auto, or e4m3 and/or hybrid" +
                                          did_you_mean(name, {"auto", "e4m3", "hybrid"}));
}

std::vector<TrainingFormat> parse_training_format_list(std::string_view list) {
  std::vector<TrainingFormat> out;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    const std::string_view item = list.substr(begin, end - begin);
    if (item.empty())
      throw usage_error("fp8a.usage.202", "--format " + quoted_input(list, 200) +
                                              ": empty entry in the list; expected auto, or e4m3 and/or hybrid");
    const TrainingFormat f = parse_training_format(item);
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    if (end == list.size()) return out;
    begin = end + 1;
  }
}

std::string training_format_list(const std::vector<TrainingFormat>& formats) {
  std::string s;
  for (const TrainingFormat f : formats) s += (s.empty() ? "" : ",") + std::string(training_format_name(f));
  return s;
}

Fp8Format fp8_format_for(TrainingFormat f, Role role) {
  return (f == TrainingFormat::kHybrid && role == Role::kGradient) ? Fp8Format::kE5M2
                                                                   : Fp8Format::kE4M3;
}

namespace {

std::string format_float(float v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

[[noreturn]] void bad_recipe(std::string_view spec, const std::string& why) {
  throw usage_error("fp8a.usage.201", "--recipes: bad recipe " + quoted_input(spec, 200) + ": " + why);
}

}  // namespace

const RecipeKindTraits& recipe_kind_traits(RecipeKind kind) {
  for (const auto& t : kRecipeKinds)
    if (t.kind == kind) return t;
  FP8A_CHECK(false, "recipe kind missing from kRecipeKinds");
  return kRecipeKinds[0];
}

std::string Recipe::spec() const {
  std::string s = recipe_kind_traits(kind).name;
  switch (kind) {
    case RecipeKind::kPerTensorCurrent:
      if (pow2_scales) s += ":pow2";
      if (amax_epsilon != 0.0f) s += ":eps=" + format_float(amax_epsilon);
      break;
    case RecipeKind::kPerTensorDelayed:
      s += ":history=" + std::to_string(history) +
           (algo == DelayedAlgo::kMax ? ":algo=max" : ":algo=most_recent") +
           ":margin=" + std::to_string(margin);
      break;
    case RecipeKind::kBlock:
      if (!pow2_scales) s += ":fp32";
      if (block_2d) s += ":2d";
      break;
    case RecipeKind::kMx:
      if (mx_rule == MxScaleRule::kOcpFloor) s += ":floor";
      break;
    case RecipeKind::kNvfp4:
      if (!nvfp4_rht) s += ":no_rht";
      if (!nvfp4_sr) s += ":no_sr";
      if (!nvfp4_2d) s += ":no_2d";
      break;
    case RecipeKind::kBf16:
      break;
  }
  return s;
}

namespace {

bool parse_int(std::string_view v, int lo, int hi, int* out) {
  auto res = std::from_chars(v.data(), v.data() + v.size(), *out);
  return res.ec == std::errc() && res.ptr == v.data() + v.size() && !v.empty() && *out >= lo &&
         *out <= hi;
}

// Applies one ":option" to r; false when the kind does not take it.
bool apply_option(std::string_view spec, std::string_view f, Recipe* r) {
  const auto eq = f.find('=');
  const std::string_view key = f.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? std::string_view() : f.substr(eq + 1);
  switch (r->kind) {
    case RecipeKind::kPerTensorCurrent:
      if (f == "pow2") {
        r->pow2_scales = true;
        return true;
      }
      if (key == "eps" && eq != std::string_view::npos) {
        float eps = 0;
        auto res = std::from_chars(value.data(), value.data() + value.size(), eps);
        if (res.ec != std::errc() || res.ptr != value.data() + value.size() || !std::isfinite(eps) ||
            eps < 0)
          bad_recipe(spec, "eps must be a finite number >= 0, got " + quoted_input(value, 200));
        r->amax_epsilon = eps;
        return true;
      }
      return false;
    case RecipeKind::kPerTensorDelayed:
      if (key == "history" && eq != std::string_view::npos) {
        if (!parse_int(value, 1, 1 << 24, &r->history))
          bad_recipe(spec, "history must be an integer from 1 to 16777216, got " +
                               quoted_input(value, 200));
        return true;
      }
      if (key == "algo" && eq != std::string_view::npos) {
        if (value == "max") r->algo = DelayedAlgo::kMax;
        else if (value == "most_recent") r->algo = DelayedAlgo::kMostRecent;
        else
          bad_recipe(spec, "algo must be max or most_recent, got " + quoted_input(value, 200) +
                               did_you_mean(value, {"max", "most_recent"}));
        return true;
      }
      if (key == "margin" && eq != std::string_view::npos) {
        if (!parse_int(value, 0, 64, &r->margin))
          bad_recipe(spec, "margin must be an integer from 0 to 64, got " + quoted_input(value, 200));
        return true;
      }
      return false;
    case RecipeKind::kBlock:
      if (f == "fp32") {
        r->pow2_scales = false;
        return true;
      }
      if (f == "2d") {
        r->block_2d = true;
        return true;
      }
      return false;
    case RecipeKind::kMx:
      if (f == "floor") {
        r->mx_rule = MxScaleRule::kOcpFloor;
        return true;
      }
      return false;
    case RecipeKind::kNvfp4:
      for (auto [name, on] : {std::pair{"no_rht", &r->nvfp4_rht}, {"no_sr", &r->nvfp4_sr}, {"no_2d", &r->nvfp4_2d}})
        if (f == name) {
          *on = false;
          return true;
        }
      return false;
    case RecipeKind::kBf16:
      return false;
  }
  return false;
}

}  // namespace

Recipe parse_recipe(std::string_view spec) {
  const auto fields = split(spec, ':');
  Recipe r;
  const RecipeKindTraits* kind = nullptr;
  std::vector<std::string> kind_names;
  // Our kind names, or Megatron-Core's --fp8-recipe names for them (tensorwise, blockwise), which
  // the written megatron_args.txt uses.
  for (const auto& t : kRecipeKinds) {
    kind_names.emplace_back(t.name);
    if (fields[0] == t.name || (*t.megatron_recipe != '\0' && fields[0] == t.megatron_recipe)) kind = &t;
  }
  if (kind == nullptr)
    bad_recipe(spec, "unknown kind " + quoted_input(fields[0], 200) +
                         did_you_mean(fields[0], kind_names));
  r.kind = kind->kind;
  r.pow2_scales = kind->scale_type == ScaleType::kPow2;  // TE's default (block scaling's)
  for (std::size_t i = 1; i < fields.size(); ++i) {
    if (apply_option(spec, fields[i], &r)) continue;
    std::vector<std::string> options;
    for (auto o : split(kind->options, ',')) {
      while (!o.empty() && o.front() == ' ') o.remove_prefix(1);
      options.emplace_back(o.substr(0, o.find('=')));
    }
    const std::string_view key = fields[i].substr(0, fields[i].find('='));
    bad_recipe(spec, "unknown option " + quoted_input(fields[i], 200) + " for " + kind->name +
                         (kind->options[0] != '\0' ? std::string(" (takes ") + kind->options + ")"
                                                    : std::string(" (takes no options)")) +
                         did_you_mean(key, options));
  }
  return r;
}

Recipe delayed_recipe(int history, DelayedAlgo algo, int margin) {
  Recipe r = parse_recipe("delayed");
  r.history = history;
  r.algo = algo;
  r.margin = margin;
  return r;
}

std::string default_recipe_list() {
  return "current,current:pow2,delayed,delayed:history=16:algo=most_recent,block,block:fp32,"
         "mxfp8,mxfp8:floor,bf16";
}

bool is_fp8(RecipeKind kind) { return recipe_kind_traits(kind).granularity != Granularity::kNone; }

int operand_bits(RecipeKind kind) { return recipe_kind_traits(kind).element_bits; }

const char* low_precision_name(RecipeKind kind) { return operand_bits(kind) == 4 ? "NVFP4" : "FP8"; }

bool is_per_tensor(RecipeKind kind) {
  return recipe_kind_traits(kind).granularity == Granularity::kPerTensor;
}

bool replays_history(RecipeKind kind) { return recipe_kind_traits(kind).replays_history; }

bool two_level_scale(RecipeKind kind) { return recipe_kind_traits(kind).two_level_scale; }

const Fp8Traits& element_traits(RecipeKind kind, Fp8Format fp8) {
  return operand_bits(kind) == 4 ? kE2M1Traits : kFp8Traits[static_cast<int>(fp8)];  // E2M1: TE's 4-bit type
}

const char* cast_type_name(RecipeKind kind, Fp8Format fp8) {
  return is_fp8(kind) ? element_traits(kind, fp8).name : "bf16";
}

bool te_runs_on(RecipeKind kind, int sm) {
  const RecipeKindTraits& t = recipe_kind_traits(kind);
  return sm >= t.te_min_sm && (t.te_max_sm == 0 || sm <= t.te_max_sm);
}

bool lt_runs_on(RecipeKind kind, int sm) {
  const RecipeKindTraits& t = recipe_kind_traits(kind);
  return sm >= t.lt_min_sm && (t.lt_max_sm == 0 || sm <= t.lt_max_sm);
}

float per_tensor_scale(const Recipe& recipe, Fp8Format format, float amax) {
  FP8A_CHECK(is_per_tensor(recipe.kind) && !replays_history(recipe.kind), "not a current-scaling recipe");
  return scale_from_amax(amax, fp8_max_finite(format), recipe.pow2_scales, recipe.amax_epsilon);
}

BlockShape block_shape(const Recipe& recipe, Role role, Orientation orientation) {
  const RecipeKindTraits& t = recipe_kind_traits(recipe.kind);
  BlockShape s = recipe.block_2d && t.block_2d.rows != 0 ? t.block_2d : t.blocks[static_cast<int>(role)];
  if (!recipe.nvfp4_2d && t.block_1d.rows != 0) s = t.block_1d;
  return orientation == Orientation::kRowwise ? s : BlockShape{s.cols, s.rows};
}

std::vector<Orientation> orientations_for(const Recipe& recipe, Role role) {
  // The columnwise copy differs only where its block is the transpose of a non-square one.
  const BlockShape s = block_shape(recipe, role, Orientation::kRowwise);
  if (s.rows != s.cols) return {Orientation::kRowwise, Orientation::kColumnwise};
  return {Orientation::kRowwise};
}

std::vector<Recipe> parse_recipe_list(std::string_view list) {
  std::vector<Recipe> out;
  for (std::string_view item : split(list, ',')) {
    if (item.empty()) bad_recipe(list, "empty entry in the list");
    Recipe r = parse_recipe(item);
    bool seen = false;
    for (const auto& o : out) seen = seen || o == r;
    if (!seen) out.push_back(r);
  }
  return out;
}

}  // namespace fp8a
