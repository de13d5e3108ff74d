// The checkpoint of a run, DIR/.fp8-advisor-checkpoint/: every finished unit of work
// (engine/unit_store.hpp) in a file of its own under units/, written whole or not at all (a
// temporary file renamed into place, with a checksum over it), so a run killed at any point
// (SIGKILL included) leaves only whole units behind; and manifest.json, the build and what the
// run read with which options, so that a resumed run can say what changed. A unit is reused when
// its key matches exactly: a changed input file or option misses the units it touches and only
// those. The checkpoint stays after the run (it is small: the results, not the tensors), so a
// later --resume with one option changed redoes only what that option changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/unit_store.hpp"

namespace fp8a {

struct CheckpointManifest {
  std::string build;                          // version and git revision: another build's units are not reused
  std::map<std::string, std::string> options;  // the options that change results, by name ("--recipes")
  std::map<std::string, std::string> inputs;   // every file read (captures, logs): path -> identity
};

class Checkpoint final : public UnitStore {
 public:
  static constexpr const char* kDirName = ".fp8-advisor-checkpoint";

  // Opens out_dir's checkpoint, out_dir existing. Without resume an earlier checkpoint is removed
  // first. With resume it is kept, and notes() says what differs from it: another build (nothing
  // reused), changed options and changed input files. Input error fp8a.io.104 when the directory
  // cannot be written.
  Checkpoint(const std::string& out_dir, const CheckpointManifest& manifest, bool resume);

  std::optional<std::string> load(UnitKind kind, std::string_view key) override;
  void save(UnitKind kind, std::string_view key, std::string_view bytes) override;
  void count(UnitKind kind, std::uint64_t reused, std::uint64_t computed) override;

  // Removes the checkpoint (a run that fails on its input: nothing of it is worth resuming).
  void discard();

  // This run started the checkpoint: no earlier one was kept (without --resume, or --resume
  // with nothing it could take). A failed run removes a checkpoint it started (docs/RUNS.md).
  bool started() const { return started_; }
  // What --resume found, a line each ("--resume: ..."); empty without resume.
  const std::vector<std::string>& notes() const { return notes_; }
  // Evaluations (shard x candidate, GEMM layers) taken from the checkpoint, and computed (and
  // kept in it), so far.
  std::uint64_t reused(UnitKind kind) const { return reused_[index(kind)]; }
  std::uint64_t computed(UnitKind kind) const { return computed_[index(kind)]; }
  std::uint64_t done(UnitKind kind) const { return reused(kind) + computed(kind); }
  const std::string& dir() const { return dir_; }

  // The file a unit is kept in, under dir()/units/ (exposed for tests).
  static std::string unit_file_name(UnitKind kind, std::string_view key);

 private:
  static std::size_t index(UnitKind kind) { return static_cast<std::size_t>(kind); }
  bool started_ = true;
  std::string dir_;
  std::vector<std::string> notes_;
  std::atomic<std::uint64_t> reused_[2]{}, computed_[2]{};
};

}  // namespace fp8a
