// The CPU backend's code paths for the vector units of x86-64 CPUs, chosen once at start-up.
//
// Every hot loop of the metric pass (BF16/FP16 decode, the statistics pass, fake quantisation, the
// float64 sums) is compiled three times from one body: for baseline x86-64 (SSE2, what the build
// targets), for x86-64-v3 (AVX2, FMA, BMI2) and for x86-64-v4 (AVX-512F/BW/CD/DQ/VL). The paths give
// bit-identical results: no FMA contraction (-ffp-contract=off holds for every path), every sum in
// the same fixed order on every path, and only correctly rounded IEEE operations per element.
// Off x86-64 (or with a compiler other than GCC/Clang) only the baseline path exists.
//
// Why function attributes and not one TU compiled with several -march flags: the per-path entry
// points are `target(...)` + `flatten` functions that inline the shared body, so the header inline
// functions and templates they use are emitted out of line only once, for the baseline (no ODR
// clash that could let the linker pick an AVX-512 copy for baseline callers), no per-file -march
// flag reaches CMake (nvcc compiles some of the same headers), and one process can run every path
// (the test compares them).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace fp8a {

enum class CpuIsa { kBaseline, kV3, kV4 };

// Short names, as FP8A_CPU_ISA takes them: "baseline", "v3", "v4".
std::string_view cpu_isa_name(CpuIsa isa);
// What Backend::device() says: "SSE2", "AVX2", "AVX-512" (on x86-64), "baseline" elsewhere.
std::string_view cpu_isa_label(CpuIsa isa);

// Whether this build has the path and this CPU (and OS) can run it; kBaseline always.
bool cpu_isa_supported(CpuIsa isa);
// The paths supported here, baseline first.
std::vector<CpuIsa> supported_cpu_isas();

// The path used when none is asked for: FP8A_CPU_ISA if set (baseline|v3|v4), else the widest the
// CPU runs. Read once, on the first call. A bad value, or a path the CPU lacks, is a usage error
// naming the variable (fp8a.usage.227), thrown on every call.
CpuIsa default_cpu_isa();

// `isa` if given (a usage error, fp8a.usage.227, when the CPU lacks it), else default_cpu_isa().
CpuIsa resolve_cpu_isa(std::optional<CpuIsa> isa);

// Parses an FP8A_CPU_ISA value; `what` names its source in the error ("FP8A_CPU_ISA").
CpuIsa parse_cpu_isa(std::string_view text, std::string_view what);

}  // namespace fp8a

// FP8A_CPU_PATHS(ret, name, params, args, body): defines name_baseline, name_v3 and name_v4, each
// `return body args;` compiled for its path (v3/v4 forward to the baseline where absent), with
// every call inside inlined (flatten), so the whole body is compiled for the path. Use it at
// namespace scope inside an anonymous namespace, with `body` a function of that file.
// FP8A_CPU_PATHS2 takes a second body for v3/v4 (one that must give the baseline body's bits).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define FP8A_CPU_X86_PATHS 1
#define FP8A_CPU_PATHS2(ret, name, params, args, body, vector_body)                       \
  __attribute__((flatten)) ret name##_baseline params { return body args; }              \
  __attribute__((target("arch=x86-64-v3"), flatten)) ret name##_v3 params { return vector_body args; } \
  __attribute__((target("arch=x86-64-v4"), flatten)) ret name##_v4 params { return vector_body args; }
#else
#define FP8A_CPU_X86_PATHS 0
#define FP8A_CPU_PATHS2(ret, name, params, args, body, vector_body)     \
  __attribute__((flatten)) ret name##_baseline params { return body args; } \
  ret name##_v3 params { return name##_baseline args; }               \
  ret name##_v4 params { return name##_baseline args; }
#endif
#define FP8A_CPU_PATHS(ret, name, params, args, body) FP8A_CPU_PATHS2(ret, name, params, args, body, body)

// The entry point of `name` for path `isa`.
#define FP8A_CPU_PICK(isa, name)                             \
  ((isa) == ::fp8a::CpuIsa::kV4   ? &name##_v4               \
   : (isa) == ::fp8a::CpuIsa::kV3 ? &name##_v3               \
                                  : &name##_baseline)
