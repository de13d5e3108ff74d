// The log2|x| histogram of a captured tensor: how its magnitudes spread over binades, for the
// report's per-operand histogram (reports/report_html.hpp), on which each recipe's representable
// window is drawn. A separate pass over the tensor, on the CPU; the evaluation keeps no histogram.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a {

// Counts of one tensor's elements. Every element is counted exactly once:
// numel = sum(counts) + zeros + nan_count + inf_count.
struct Log2Histogram {
  std::int64_t numel = 0;
  // Bin i counts the finite nonzero |x| with floor(log2 |x|) = min_exp + i, i.e. |x| in
  // [2^(min_exp + i), 2^(min_exp + i + 1)). Bins run from the smallest to the largest such
  // exponent present (empty bins between them included); no bins when there is no finite nonzero
  // element. Float subnormals have their own exponents (down to -149).
  int min_exp = 0;
  std::vector<std::int64_t> counts;
  // The smallest and largest finite nonzero |x| (in the first and last bin); 0 without bins.
  float amin_nonzero = 0.0f;
  float amax_finite = 0.0f;
  std::int64_t zeros = 0;      // +0 and -0
  std::int64_t nan_count = 0;
  std::int64_t inf_count = 0;  // +inf and -inf

  int max_exp() const { return min_exp + static_cast<int>(counts.size()) - 1; }
  std::int64_t nonzero_finite() const;
  // Adds another part of the tensor (a rank shard): counts add, the bins widen to cover both.
  void merge(const Log2Histogram& other);
};

// One pass over the tensor's elements (read as float, exact for BF16/F16/F32).
Log2Histogram log2_histogram(const TensorView& tensor);

}  // namespace fp8a
