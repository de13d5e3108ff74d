#include "engine/cluster.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace fp8a {

std::vector<int> assign_balanced(std::span<const std::uint64_t> costs, int ranks) {
  FP8A_CHECK(ranks >= 1, "assign_balanced needs at least one rank");
  std::vector<std::size_t> order(costs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return costs[a] > costs[b]; });
  std::vector<std::uint64_t> load(static_cast<std::size_t>(ranks), 0);
  std::vector<int> owner(costs.size(), 0);
  for (const std::size_t u : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equal loads
    owner[u] = static_cast<int>(least - load.begin());
    *least += costs[u];
  }
  return owner;
}

}  // namespace fp8a
