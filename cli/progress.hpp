// Progress on stderr for `run`: on a terminal one line redrawn in place (at most 10 times a
// second, the last state left on screen when a stage ends); otherwise a plain line every
// `plain_every_s` seconds (0: every unit), so a log of a long run shows where it is. `run --quiet`
// installs none.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/progress.hpp"
#include "reports/progress_line.hpp"

namespace fp8a::cli {

class TerminalProgress final : public ProgressSink {
 public:
  TerminalProgress(std::FILE* out, bool tty, double plain_every_s);
  void begin_stage(std::string_view stage, std::uint64_t units, std::uint64_t bytes) override;
  void unit_done(std::string_view name, std::uint64_t bytes) override;
  void end_stage() override;

 private:
  using Clock = std::chrono::steady_clock;
  double seconds_since(Clock::time_point t) const;
  void draw();  // holds mutex_

  std::FILE* out_;
  bool tty_;
  double plain_every_s_;
  std::mutex mutex_;
  ProgressState state_;
  Clock::time_point began_{}, last_draw_{};
  bool drawn_ = false;  // a line is on the terminal (tty) / printed this stage (plain)
  std::uint64_t shown_done_ = 0;  // units done in the line last drawn
};

}  // namespace fp8a::cli
