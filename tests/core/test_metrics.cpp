// finalize_metrics on sums worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/metrics.hpp"

TEST_CASE("derived metrics from sums") {
  fp8a::TensorStats st;
  st.numel = 10;
  st.nan_count = 1;
  st.inf_count = 1;
  st.sum_sq = 4.0;
  fp8a::QuantSums s;
  s.sum_sq_err = 0.04;
  s.sum_x_deq = 3.9;
  s.sum_deq_sq = 3.8;
  s.underflow_count = 3;
  s.overflow_count = 1;
  const auto m = fp8a::finalize_metrics(st, 2.0f, 0.5f, s);
  CHECK(m.mse == doctest::Approx(0.04 / 8).epsilon(1e-15));      // 8 finite elements
  CHECK(m.rel_mse == doctest::Approx(0.01).epsilon(1e-15));
  CHECK(m.sqnr_db == doctest::Approx(20.0).epsilon(1e-13));
  CHECK(m.cos == doctest::Approx(3.9 / std::sqrt(4.0 * 3.8)).epsilon(1e-15));
  CHECK(m.underflow_pct == 30.0);  // over all 10 elements, as TE's underflows%
  CHECK(m.overflow_pct == 10.0);
}

TEST_CASE("all-zero tensor: no error, cos 1, infinite SQNR") {
  fp8a::TensorStats st;
  st.numel = 4;
  const auto m = fp8a::finalize_metrics(st, 1.0f, 1.0f, fp8a::QuantSums{});
  CHECK(m.mse == 0.0);
  CHECK(m.rel_mse == 0.0);
  CHECK(m.sqnr_db == std::numeric_limits<double>::infinity());
  CHECK(m.cos == 1.0);
}

TEST_CASE("everything underflowed: cos 0, rel_mse 1") {
  fp8a::TensorStats st;
  st.numel = 2;
  st.sum_sq = 2e-12;
  fp8a::QuantSums s;
  s.sum_sq_err = 2e-12;
  s.underflow_count = 2;
  const auto m = fp8a::finalize_metrics(st, 1.0f, 1.0f, s);
  CHECK(m.cos == 0.0);
  CHECK(m.rel_mse == 1.0);
  CHECK(m.sqnr_db == 0.0);
  CHECK(m.underflow_pct == 100.0);
}

TEST_CASE("dynamic range and merging") {
  fp8a::TensorStats a, b;
  a.numel = 2;
  a.amax = a.amax_finite = 8.0f;
  a.amin_nonzero = 0.5f;
  b.numel = 3;
  b.amax = INFINITY;
  b.amax_finite = 2.0f;
  b.amin_nonzero = 0.125f;
  b.inf_count = 1;
  a.merge(b);
  CHECK(a.numel == 5);
  CHECK(a.amax == INFINITY);
  CHECK(a.amax_finite == 8.0f);
  CHECK(a.amin_nonzero == 0.125f);
  CHECK(a.dynamic_range_log2() == 6.0);
  CHECK(fp8a::TensorStats{}.dynamic_range_log2() == 0.0);
}
