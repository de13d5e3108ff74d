// What saturating a tensor at a magnitude does to it: how many elements lie above the threshold,
// and the squared error that clipping them to it leaves. The delayed-scaling forecast's damage
// (policies/amax_trend.hpp, METRICS.md "Amax trend and the delayed-scaling forecast") takes the
// captured tensor's shape and asks what a stale scale would clip; a pass over the tensor on the
// CPU after the evaluation, in the same read as the report's histogram (engine/operand_pass.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a {

// Sums over one tensor (or several shards of it, merged) at one threshold c > 0. NaN and inf
// elements are left out of every sum (the evaluation warns about them apart).
struct ClipDamage {
  std::int64_t finite = 0;        // finite elements
  std::int64_t clipped = 0;       // finite elements with |x| > c
  double clipped_sq_err = 0.0;    // sum of (|x| - c)^2 over those: what saturating them to c costs
  double energy = 0.0;            // sum of x^2 over the finite elements

  // 100 * clipped / finite; 0 without finite elements.
  double clipped_pct() const;
  // clipped_sq_err / energy: clipping's share of rel_mse (the same units); 0 for energy 0.
  double clipped_rel_mse() const;
  // Adds another shard of the tensor at the same threshold.
  void merge(const ClipDamage& other);
};

// One pass over the tensor's elements (read as float), one ClipDamage per threshold, in order.
std::vector<ClipDamage> clip_damage(const TensorView& tensor, std::span<const double> thresholds);

}  // namespace fp8a
