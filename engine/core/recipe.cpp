#include "engine/core/recipe.hpp"

#include <charconv>
#include <cmath>

#include "engine/core/error.hpp"
#include "engine/core/scale.hpp"
#include "engine/core/suggest.hpp"

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
  throw usage_error("fp8a.usage.202", "--format '" + std::string(name) +
                                          "': expected e4m3 or hybrid" +
                                          did_you_mean(name, {"e4m3", "hybrid"}));
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
  throw usage_error("fp8a.usage.201", "--recipes: bad recipe '" + std::string(spec) + "': " + why);
}

}  // namespace

std::string Recipe::spec() const {
  std::string s;
  for (const auto& t : kRecipeKinds)
    if (t.kind == kind) s = t.name;
  if (pow2_scales) s += ":pow2";
  if (amax_epsilon != 0.0f) s += ":eps=" + format_float(amax_epsilon);
  return s;
}

Recipe parse_recipe(std::string_view spec) {
  const auto fields = split(spec, ':');
  Recipe r;
  bool found = false;
  std::vector<std::string> kind_names;
  for (const auto& t : kRecipeKinds) {
    kind_names.emplace_back(t.name);
    if (fields[0] == t.name) {
      r.kind = t.kind;
      found = true;
    }
  }
  if (!found)
    bad_recipe(spec, "unknown kind '" + std::string(fields[0]) + "'" +
                         did_you_mean(fields[0], kind_names));
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string_view f = fields[i];
    if (f == "pow2") {
      r.pow2_scales = true;
    } else if (f.substr(0, 4) == "eps=") {
      const std::string_view v = f.substr(4);
      float eps = 0;
      auto res = std::from_chars(v.data(), v.data() + v.size(), eps);
      if (res.ec != std::errc() || res.ptr != v.data() + v.size() || !std::isfinite(eps) || eps < 0)
        bad_recipe(spec, "eps must be a finite number >= 0, got '" + std::string(v) + "'");
      r.amax_epsilon = eps;
    } else {
      bad_recipe(spec, "unknown option '" + std::string(f) + "'" +
                           did_you_mean(f, {"pow2", "eps="}));
    }
  }
  return r;
}

float per_tensor_scale(const Recipe& recipe, Fp8Format format, float amax) {
  FP8A_CHECK(recipe.kind == RecipeKind::kPerTensorCurrent, "not a per-tensor recipe");
  return scale_from_amax(amax, fp8_max_finite(format), recipe.pow2_scales, recipe.amax_epsilon);
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
