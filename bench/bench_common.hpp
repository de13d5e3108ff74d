// Pieces shared by the CPU and CUDA benchmarks, so both measure the same candidate sets.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/backend.hpp"

namespace fp8a::bench {

// K candidates cycling through the eight (recipe, FP8 type) pairs that tests/peers/peer_numpy.py and
// bench/peer_torch.py evaluate: current, current:pow2, current:eps=1000, current:pow2:eps=1000,
// each in E4M3 then E5M2.
inline std::vector<Candidate> candidate_cycle(int k) {
  const char* specs[] = {"current", "current:pow2", "current:eps=1000", "current:pow2:eps=1000"};
  std::vector<Candidate> all;
  for (auto f : {Fp8Format::kE4M3, Fp8Format::kE5M2})
    for (const char* s : specs) all.push_back({parse_recipe(s), f});
  std::vector<Candidate> out;
  for (int i = 0; i < k; ++i) out.push_back(all[static_cast<std::size_t>(i) % all.size()]);
  return out;
}

// "1,8,32" -> {1, 8, 32}.
inline std::vector<int> parse_ks(const std::string& s) {
  std::vector<int> ks;
  std::size_t start = 0;
  while (start <= s.size()) {
    const auto comma = s.find(',', start);
    ks.push_back(std::atoi(s.substr(start, comma - start).c_str()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ks;
}

}  // namespace fp8a::bench
