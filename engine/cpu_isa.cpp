#include "engine/cpu_isa.hpp"

#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr CpuIsa kAllIsas[] = {CpuIsa::kBaseline, CpuIsa::kV3, CpuIsa::kV4};

std::string supported_names() {
  std::string s;
  for (CpuIsa isa : supported_cpu_isas()) s += (s.empty() ? "" : ", ") + std::string(cpu_isa_name(isa));
  return s;
}

// The CPU's widest path; the level checks include the OS's support for the AVX/AVX-512 state.
CpuIsa widest_cpu_isa() {
#if FP8A_CPU_X86_PATHS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return CpuIsa::kV4;
  if (__builtin_cpu_supports("x86-64-v3")) return CpuIsa::kV3;
#endif
  return CpuIsa::kBaseline;
}

// `asked` names the request in the message: "FP8A_CPU_ISA=v4".
CpuIsa require_supported(CpuIsa isa, const std::string& asked) {
  if (cpu_isa_supported(isa)) return isa;
  throw usage_error("fp8a.usage.227", asked + ": this CPU lacks the " + std::string(cpu_isa_label(isa)) +
                                          " path (x86-64-" + std::string(cpu_isa_name(isa)) +
                                          "); it runs: " + supported_names());
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kV3: return "v3";
    case CpuIsa::kV4: break;
  }
  return "v4";
}

std::string_view cpu_isa_label(CpuIsa isa) {
#if FP8A_CPU_X86_PATHS
  switch (isa) {
    case CpuIsa::kBaseline: return "SSE2";
    case CpuIsa::kV3: return "AVX2";
    case CpuIsa::kV4: break;
  }
  return "AVX-512";
#else
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kV3: return "x86-64-v3";
    case CpuIsa::kV4: break;
  }
  return "x86-64-v4";
#endif
}

bool cpu_isa_supported(CpuIsa isa) {
  static const CpuIsa widest = widest_cpu_isa();
  return static_cast<int>(isa) <= static_cast<int>(widest);
}

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : kAllIsas)
    if (cpu_isa_supported(isa)) out.push_back(isa);
  return out;
}

CpuIsa parse_cpu_isa(std::string_view text, std::string_view what) {
  for (CpuIsa isa : kAllIsas)
    if (text == cpu_isa_name(isa)) return require_supported(isa, std::string(what) + "=" + std::string(text));
  // The message names all three values, so no "did you mean".
  throw usage_error("fp8a.usage.227", std::string(what) + "=" + quoted_input(text, 200) +
                                          ": expected baseline, v3 or v4");
}

CpuIsa default_cpu_isa() {
  // A value that does not parse is not cached, so every call reports it.
  static const CpuIsa chosen = [] {
    const char* v = std::getenv("FP8A_CPU_ISA");
    return v == nullptr || *v == '\0' ? widest_cpu_isa() : parse_cpu_isa(v, "FP8A_CPU_ISA");
  }();
  return chosen;
}

CpuIsa resolve_cpu_isa(std::optional<CpuIsa> isa) {
  return isa ? require_supported(*isa, "CPU path " + std::string(cpu_isa_name(*isa))) : default_cpu_isa();
}

}  // namespace fp8a
