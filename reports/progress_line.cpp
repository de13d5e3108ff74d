#include "reports/progress_line.hpp"

#include <cmath>

#include "core/text.hpp"

namespace fp8a {

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::ceil(std::max(0.0, seconds)));
  const long long h = s / 3600, m = (s / 60) % 60, r = s % 60;
  return h > 0 ? format_text("%lld:%02lld:%02lld", h, m, r) : format_text("%lld:%02lld", m, r);
}

std::string progress_line(const ProgressState& s) {
  const bool by_bytes = s.bytes_total > 0;
  const double done = by_bytes ? static_cast<double>(s.bytes_done) : static_cast<double>(s.done);
  const double total = by_bytes ? static_cast<double>(s.bytes_total) : static_cast<double>(s.total);
  const double share = total > 0 ? done / total : 1.0;
  std::string line = format_text("%s %llu/%llu (%d %%)", s.stage.c_str(),
                                 static_cast<unsigned long long>(s.done),
                                 static_cast<unsigned long long>(s.total),
                                 static_cast<int>(std::floor(100.0 * share)));
  const bool finished = s.done >= s.total;
  if (s.elapsed_s > 0 && s.bytes_done > 0) {
    const double mb_s = static_cast<double>(s.bytes_done) / 1e6 / s.elapsed_s;
    line += mb_s >= 1000 ? format_text(", %.2f GB/s", mb_s / 1000) : format_text(", %.3g MB/s", mb_s);
  }
  if (finished)
    line += format_text(", done in %.1f s", s.elapsed_s);
  else if (s.elapsed_s > 0 && done > 0)
    line += ", ETA " + clock_text(s.elapsed_s * (total - done) / done);
  if (!s.current.empty()) line += ", " + s.current;
  return line;
}

}  // namespace fp8a
