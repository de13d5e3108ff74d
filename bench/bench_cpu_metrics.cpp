// Throughput of the CPU metric pass: K candidate recipes on one captured tensor.
//
//   bench_cpu_metrics FILE.safetensors [--candidates 1,8] [--repeat 5] [--threads N]
//   bench_cpu_metrics FILE.safetensors --recipes all [--repeat 5] [--threads N]
//
// The CPU code path is the backend's default: FP8A_CPU_ISA=baseline|v3|v4, else the widest.
//
// --recipes all evaluates every default recipe in each orientation TE quantises an activation in
// (rowwise, plus columnwise for block and MXFP8), all together and then each alone; delayed
// scaling gets the tensor's current scale as its replayed scale (the replay itself is host-side
// bookkeeping, not part of the metric pass).
//
// The candidate list cycles through the same eight (recipe, FP8 type) pairs as
// tests/peers/peer_numpy.py --candidates, so the two print comparable rows. Time covers the whole
// evaluate() call: BF16 decode, amax pass, quantise/dequantise and the sums for every candidate.
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "core/error.hpp"
#include "core/scale.hpp"
#include "bench/bench_common.hpp"
#include "engine/cpu_backend.hpp"

namespace {

using fp8a::bench::candidate_cycle;
using fp8a::bench::parse_ks;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.safetensors [--candidates 1,8] [--repeat 5] [--threads N]\n", argv[0]);
    return 2;
  }
  std::string ks_text = "1,8", recipes_text;
  int repeat = 5, threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--candidates") ks_text = argv[i + 1];
    else if (a == "--repeat") repeat = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--recipes") recipes_text = argv[i + 1];
  }
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  static_cast<std::size_t>(threads));
  try {
    fp8a::DiskFileSystem fs;
    const auto captures = fp8a::load_captures({argv[1]}, fs);
    const auto& t = captures.tensors.at(0);
    const fp8a::CpuBackend backend;
    auto time_median = [&](const std::vector<fp8a::Candidate>& cands) {
      backend.evaluate(cands, t.view);  // warm-up
      std::vector<double> times;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        backend.evaluate(cands, t.view);
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2];
    };
    if (!recipes_text.empty()) {
      const auto recipes = fp8a::parse_recipe_list(recipes_text == "all" ? fp8a::default_recipe_list() : recipes_text);
      const auto stats = fp8a::compute_tensor_stats(t.view);
      std::vector<fp8a::Candidate> all;
      for (const auto& r : recipes)
        for (auto o : fp8a::orientations_for(r, fp8a::Role::kActivation)) {
          fp8a::Candidate c{r, fp8a::Fp8Format::kE4M3, fp8a::Role::kActivation, o};
          if (r.kind == fp8a::RecipeKind::kPerTensorDelayed)
            c.given_scale = fp8a::scale_from_amax(stats.amax, 448.0f, false, 0.0f);
          all.push_back(c);
        }
      const auto n = static_cast<double>(t.view.numel());
      const double total = time_median(all);
      std::printf("fp8a_cpu recipes=all candidates=%zu elements=%lld median_s=%.6f elements_x_candidates_per_s=%.4g\n",
                  all.size(), static_cast<long long>(t.view.numel()), total, n * static_cast<double>(all.size()) / total);
      const double stats_only = time_median({});
      std::printf("  statistics pass alone: %.6f s\n", stats_only);
      for (const auto& c : all) {
        const double s1 = time_median({c});
        std::printf("  %-45s %-10s alone %.6f s (%.6f s over the statistics pass)\n", c.recipe.spec().c_str(),
                    fp8a::orientation_name(c.orientation), s1, s1 - stats_only);
      }
      return 0;
    }
    for (int k : parse_ks(ks_text)) {
      const auto cands = candidate_cycle(k);
      fp8a::TensorEvaluation eval = backend.evaluate(cands, t.view);  // warm-up: pages in the file
      std::vector<double> times;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        eval = backend.evaluate(cands, t.view);
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      const auto n = static_cast<double>(t.view.numel());
      std::printf("fp8a_cpu K=%d elements=%lld threads=%s path=%s median_s=%.6f elements_x_candidates_per_s=%.4g\n",
                  k, static_cast<long long>(t.view.numel()), threads > 0 ? std::to_string(threads).c_str() : "all",
                  std::string(fp8a::cpu_isa_name(backend.isa())).c_str(), median, n * k / median);
      for (std::size_t j = 0; j < cands.size() && j < 8; ++j) {
        const auto& m = eval.results[j].metrics;
        std::printf("  %s,%s scale=%.9g mse=%.17g cos=%.17g underflow_pct=%.17g overflow_pct=%.17g\n",
                    cands[j].recipe.spec().c_str(), fp8a::kFp8Traits[static_cast<int>(cands[j].format)].name,
                    m.scale, m.mse, m.cos, m.underflow_pct, m.overflow_pct);
      }
    }
  } catch (const fp8a::Error& e) {
    std::fprintf(stderr, "bench_cpu_metrics: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
