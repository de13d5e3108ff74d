// compare.csv and compare.md from hand-built comparisons, golden files out (tests/golden/reports/
// compare_*), diffed exactly. Refresh on purpose with FP8A_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>

#include "reports/compare_fixture.hpp"
#include "reports/compare_report.hpp"
#include "support/golden.hpp"

using namespace fp8a;
using fp8a::testing::check_golden;

TEST_CASE("compare.csv and compare.md: NVIDIA's FC2 example on top, nearest steps, one-side groups") {
  const CompareResult r = testing::nvidia_comparison();
  const Artifact csv = render_compare_csv(r);
  CHECK(csv.name == "compare.csv");
  CHECK(csv.note == "8 matches");
  check_golden("compare_nvidia.csv", csv.contents);
  const Artifact md = render_compare_md(r, testing::fixed_compare_info(), 20);
  CHECK(md.name == "compare.md");
  check_golden("compare_nvidia.md", md.contents);
  // The top 3 only: the table stops, the counts do not.
  check_golden("compare_nvidia_top3.md", render_compare_md(r, testing::fixed_compare_info(), 3).contents);
}

TEST_CASE("compare.csv and compare.md: a non-finite score and names that need escaping") {
  const CompareResult r = testing::escaping_comparison();
  CompareInfo info = testing::fixed_compare_info();
  info.backend = "";  // two run folders: no backend line
  check_golden("compare_escaping.csv", render_compare_csv(r).contents);
  check_golden("compare_escaping.md", render_compare_md(r, info, 20).contents);
}
