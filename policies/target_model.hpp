// The model a plan is priced at (run --price-as): a team judges FP8 on a small proxy model's
// numerics and asks what the plan would buy at the shapes it will train. Each captured layer is
// mapped by its module role (qkv, proj, fc1, fc2, head) to the target's module of that role and
// priced there: its GEMMs at the target's W [n, k] and tokens per step, weighted so that the
// captured layers of a role stand for all of the target's (target count / captured count). The
// numerics (every verdict) stay the proxy's; only FLOPs and GEMM times move.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp8a {

class FileSystem;

enum class ModuleRole : std::uint8_t { kQkv, kProj, kFc1, kFc2, kHead };
inline constexpr std::array<ModuleRole, 5> kModuleRoles = {ModuleRole::kQkv, ModuleRole::kProj, ModuleRole::kFc1,
                                                           ModuleRole::kFc2, ModuleRole::kHead};
// "qkv", "proj", "fc1", "fc2", "head": the shapes file's keys.
const char* module_role_name(ModuleRole role);

// The target's modules of one role: W [n, k] of one module (whole, before any tensor
// parallelism) and how many the model has.
struct RoleShape {
  std::int64_t n = 0, k = 0;
  std::int64_t count = 0;  // 0: the model has no such module
  // Layer names (or dotted suffixes) the shapes file maps to this role besides the built-in ones.
  std::vector<std::string> names;
};

struct TargetModel {
  std::string name;     // "llama-7b", or the shapes file's "name"
  std::string source;   // where the shapes come from
  double tokens_per_step = 0;  // tokens (rows of X and dY) of one training step
  std::string tokens_source;
  std::array<RoleShape, 5> roles;  // indexed by ModuleRole
  const RoleShape& role(ModuleRole r) const { return roles[static_cast<std::size_t>(r)]; }
};

// llama-7b and llama-70b (Llama 2's shapes, Megatron-Core's fused modules).
std::span<const TargetModel> target_model_presets();
const TargetModel* find_target_model(std::string_view name);

// A shapes file (docs/OPTIONS.md "--price-as"): {"name", "source", "tokens_per_step", "layers",
// "roles": {"qkv": {"n", "k", "count", "names"}, ...}}. `origin` names it in messages. Throws
// input errors fp8a.shapes.95x.
TargetModel parse_target_model(std::string_view json_text, std::string_view origin);
// A preset by name, else the shapes file at the path (usage error fp8a.usage.245 for neither).
TargetModel load_target_model(std::string_view name_or_path, const FileSystem& fs);

// The role of a captured layer: the shapes file's names first, then Megatron-Core's, TE's
// TransformerLayer's, Hugging Face Llama/GPT-NeoX's and GPT-2's module names (the last dotted
// component, with the one before it where it decides: attn.c_proj is proj, mlp.c_proj fc2);
// TE dump names as their Megatron module. Unset for any other name.
std::optional<ModuleRole> module_role(const std::string& layer, const TargetModel& target);

// One captured layer priced at the target: its role's W [n, k], at tokens_per_step, counted
// `weight` times.
struct PricedLayer {
  ModuleRole role = ModuleRole::kQkv;
  double n = 0, k = 0;
  double weight = 1;
};

struct TargetPricing {
  TargetModel target;
  double tokens_per_step = 0;  // the target's, or --tokens-per-step
  std::string tokens_source;
  std::map<std::string, PricedLayer> layers;  // by captured layer name
  std::array<int, 5> captured{};              // captured layers per role
  // 2 T n k of the priced layer's GEMMs, weighted; unset for a layer it does not price.
  std::optional<double> gemm_flops(const std::string& layer) const;
};

// Every captured layer priced; `unmapped` (may be null) gets the names no role was found for
// (the pricing leaves them out). Layers of a role the target has none of are unmapped too.
TargetPricing price_at_target(const TargetModel& target, std::span<const std::string> layers, double tokens_per_step,
                              std::string tokens_source, std::vector<std::string>* unmapped);

// The cost line's words: "Llama-2-7B's shapes (--price-as llama-7b: ...): qkv 12288x4096 x32 from 2
// captured, ...; roles not captured are not priced: head".
std::string pricing_basis(const TargetPricing& pricing);

}  // namespace fp8a
