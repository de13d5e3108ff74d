#include "cli/progress.hpp"

namespace fp8a::cli {

namespace {
constexpr double kRedrawSeconds = 0.1;
}  // namespace

TerminalProgress::TerminalProgress(std::FILE* out, bool tty, double plain_every_s)
    : out_(out), tty_(tty), plain_every_s_(plain_every_s) {}

double TerminalProgress::seconds_since(Clock::time_point t) const {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void TerminalProgress::begin_stage(std::string_view stage, std::uint64_t units, std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  state_ = ProgressState{};
  state_.stage = std::string(stage);
  state_.total = units;
  state_.bytes_total = bytes;
  began_ = last_draw_ = Clock::now();
  drawn_ = false;
}

void TerminalProgress::unit_done(std::string_view name, std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  ++state_.done;
  state_.bytes_done += bytes;
  state_.current = std::string(name);
  const double since = seconds_since(last_draw_);
  if (tty_ ? since >= kRedrawSeconds : since >= plain_every_s_) draw();
}

void TerminalProgress::end_stage() {
  const std::lock_guard lock(mutex_);
  // A terminal keeps the finished stage's line; a log gets one only if it showed the stage and
  // not yet its end.
  if (tty_ || (drawn_ && shown_done_ != state_.done)) {
    state_.current.clear();
    draw();
  }
  if (tty_ && drawn_) std::fputc('\n', out_);
  std::fflush(out_);
  drawn_ = false;
}

void TerminalProgress::draw() {
  state_.elapsed_s = seconds_since(began_);
  const std::string line = progress_line(state_);
  if (tty_)
    std::fprintf(out_, "\r\x1b[K%s", line.c_str());  // back to column 0, clear, redraw
  else
    std::fprintf(out_, "progress: %s\n", line.c_str());
  std::fflush(out_);
  last_draw_ = Clock::now();
  drawn_ = true;
  shown_done_ = state_.done;
}

}  // namespace fp8a::cli
