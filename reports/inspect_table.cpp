#include "reports/inspect_table.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/text.hpp"
#include "reports/text_table.hpp"

namespace fp8a {

namespace {

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string render_inspect_table(const CaptureSet& captures, std::span<const TensorStats> stats) {
  const std::vector<std::string> head = {"step", "layer", "role", "dtype", "shape", "amax",
                                         "amin", "range log2", "nan", "inf", "file"};
  std::vector<std::vector<std::string>> cells;
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const auto& t = captures.tensors[i];
    const auto& s = stats[i];
    cells.push_back({std::to_string(t.key.step), t.key.layer, role_name(t.key.role),
                     dtype_name(t.view.dtype), shape_text(t.view.shape), general(s.amax),
                     general(s.amin_nonzero < INFINITY ? s.amin_nonzero : 0.0f),
                     general(s.dynamic_range_log2()), std::to_string(s.nan_count),
                     std::to_string(s.inf_count), t.file});
  }
  std::string out = render_text_table(head, cells, {false, true, true, true, true, false, false,
                                                    false, false, false, true});
  std::size_t nonfinite = 0;
  for (const auto& s : stats) nonfinite += (s.nan_count + s.inf_count) > 0;
  out += "\n" + std::to_string(captures.tensors.size()) + " tensors in " +
         std::to_string(captures.files.size()) + " file(s): valid";
  if (nonfinite > 0) out += "; " + std::to_string(nonfinite) + " tensor(s) hold NaN or Inf";
  out += "\n";
  // What `run` will miss: whole roles absent from layers, and the tokens per step.
  const MissingRoles m = missing_roles(captures);
  for (const Role r : {Role::kActivation, Role::kWeight, Role::kGradient}) {
    const std::size_t n = m.missing[static_cast<std::size_t>(r)];
    if (n == 0) continue;
    out += format_text("missing: %zu of %zu layer-steps have no %s", n, m.layer_steps, role_name(r));
    if (r == Role::kGradient)
      out += m.none_of(r) ? " (none at all: captured under torch.no_grad() or before backward? capture a training "
                            "step)"
                          : " (their dgrad and wgrad are not judged)";
    else
      out += " (those layers' GEMMs are not judged)";
    out += "\n";
  }
  if (captures.tokens.tokens_per_step > 0)
    out += format_text("tokens per step: %lld (%s%s)\n", static_cast<long long>(captures.tokens.tokens_per_step),
                       captures.tokens.how == "counted" ? "counted by fp8a_capture in " : "recorded in ",
                       visible_text(captures.tokens.file).c_str());
  else
    out += "tokens per step: not recorded (run judges no cost without it: --tokens-per-step N, or "
           "fp8a_capture.json beside the captures)\n";
  return out;
}

}  // namespace fp8a
