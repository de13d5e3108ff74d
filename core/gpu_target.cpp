#include "core/gpu_target.hpp"

#include "core/suggest.hpp"
#include "core/text.hpp"

namespace fp8a {

const GpuTarget* find_gpu_target(std::string_view name, std::string* why) {
  std::vector<std::string> names;
  // Case aside ("H100" is h100): the names are lower-case ASCII.
  std::string lower(name);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  for (const auto& t : kGpuTargets) {
    if (lower == t.name) return &t;
    names.emplace_back(t.name);
  }
  if (why != nullptr) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    *why = "unknown GPU " + quoted_input(name, 200) + did_you_mean(name, names) + "; known: " + known;
  }
  return nullptr;
}

std::vector<const GpuTarget*> gpu_targets_with_sm(int sm) {
  std::vector<const GpuTarget*> out;
  for (const auto& t : kGpuTargets)
    if (t.sm == sm) out.push_back(&t);
  return out;
}

}  // namespace fp8a
