// Progress of a long run, reported as the work happens: the engine says what a stage holds and
// when each unit of it is done; the command line decides whether and how to show it. A sink is
// called from worker threads: implementations synchronise themselves.
#pragma once

#include <cstdint>
#include <string_view>

namespace fp8a {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // A stage starts: `units` things to do ("tensors", "GEMM layers"), `bytes` of input in them.
  virtual void begin_stage(std::string_view stage, std::uint64_t units, std::uint64_t bytes) = 0;
  // One unit of the current stage is done: its name (the layer) and its input bytes.
  virtual void unit_done(std::string_view name, std::uint64_t bytes) = 0;
  // The current stage is over.
  virtual void end_stage() = 0;
};

}  // namespace fp8a
