// Comparison of float64 sums accumulated in different orders by the engine and a test reference.
#pragma once

#include <doctest/doctest.h>

#include <cmath>

namespace fp8a::testing {

// The engine sums each chunk in index order and merges chunks in order; a reference sums
// sequentially.
// For the tensor sizes in the tests the two differ by far less than this relative bound.
constexpr double kSumRelTol = 1e-12;

// NaN matches NaN (a NaN block scale), infinities match exactly (dequantised values that
// overflow), zero matches zero, anything else within kSumRelTol.
inline void check_close(double got, double want, const char* what) {
  INFO(what << ": got " << got << " want " << want);
  if (std::isnan(want)) CHECK(std::isnan(got));
  else if (std::isinf(want)) CHECK(got == want);
  else if (want == 0) CHECK(std::fabs(got) <= 1e-300);
  else CHECK(std::fabs(got - want) <= kSumRelTol * std::fabs(want));
}

}  // namespace fp8a::testing
