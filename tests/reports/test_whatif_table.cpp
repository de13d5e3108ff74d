// whatif's table: the worst value of each metric column marked for a terminal, nothing marked
// in plain text, the columns aligned either way.
#include <doctest/doctest.h>

#include <string>

#include "reports/text_table.hpp"
#include "reports/whatif_table.hpp"
#include "support/rows.hpp"

using namespace fp8a;

TEST_CASE("whatif table: the worst SQNR, underflow and cos marked on a terminal, plain otherwise") {
  const std::vector<EvaluationRow> rows = {
      testing::make_row(10, "layers.0.fc1", Role::kGradient, "current", 18.0, 0.99, 12.5, 0.0),
      testing::make_row(10, "layers.0.fc1", Role::kGradient, "block", 25.5, 0.999, 0.0, 0.0),
      testing::make_row(10, "layers.1.fc2", Role::kGradient, "block", 1.0, 0.5, 90.0, 0.0)};
  const std::string plain = render_whatif_table("layers.0.fc1", rows, {}, false);
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(plain.find("layers.1.fc2") == std::string::npos);
  CHECK(plain.find("  10  gradient  rowwise      current/hybrid  e5m2     18.00  1.585e-02       12.500        0.000  "
                   "0.990000\n") != std::string::npos);
  const std::string marked = render_whatif_table("layers.0.fc1", rows, {}, true);
  const std::string m = kTerminalMark, r = kTerminalReset;
  // The current row: the lowest SQNR and cos, the highest rel_mse and underflow; saturation is 0
  // in both rows, so nothing is marked there.
  CHECK(marked.find("  10  gradient  rowwise      current/hybrid  e5m2     " + m + "18.00" + r + "  " + m +
                    "1.585e-02" + r + "       " + m + "12.500" + r + "        0.000  " + m + "0.990000" + r +
                    "\n") != std::string::npos);
  CHECK(marked.find("GEMM error: none") != std::string::npos);
}
