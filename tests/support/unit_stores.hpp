// Shared by the tests of the units a run keeps and exchanges (tests/engine/test_unit_store.cpp,
// test_cluster.cpp): a UnitStore in memory that counts what it is asked, the CPU backend counting
// its evaluations, and a synth preset read from memory.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/synth.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/unit_store.hpp"

namespace fp8a::testing {

class MapStore final : public UnitStore {
 public:
  std::optional<std::string> load(UnitKind kind, std::string_view key) override {
    const std::lock_guard<std::mutex> l(mutex_);
    ++loads[kind];
    const auto it = units_.find({kind, std::string(key)});
    if (it == units_.end()) return std::nullopt;
    ++hits[kind];
    return it->second;
  }
  void save(UnitKind kind, std::string_view key, std::string_view bytes) override {
    const std::lock_guard<std::mutex> l(mutex_);
    ++saves[kind];
    units_[{kind, std::string(key)}] = std::string(bytes);
  }
  void count(UnitKind kind, std::uint64_t r, std::uint64_t c) override {
    const std::lock_guard<std::mutex> l(mutex_);
    reused[kind] += r;
    computed[kind] += c;
  }
  std::map<UnitKind, int> loads, hits, saves;
  std::map<UnitKind, std::uint64_t> reused, computed;
  std::size_t size() const { return units_.size(); }

 private:
  std::mutex mutex_;
  std::map<std::pair<UnitKind, std::string>, std::string> units_;
};

// The CPU backend, counting its evaluations.
class CountingBackend final : public Backend {
 public:
  std::string name() const override { return inner_.name(); }
  std::string device() const override { return inner_.device(); }
  TensorEvaluation evaluate(std::span<const Candidate> c, const TensorView& t) const override {
    ++calls;
    return inner_.evaluate(c, t);
  }
  mutable std::atomic<int> calls{0};

 private:
  CpuBackend inner_;
};

// A synth preset's captures (default steps, seed 1), read from memory.
struct Synth {
  MemoryFileSystem fs;
  CaptureSet captures;
};

inline void load_synth(Synth& s, const char* preset_name) {
  const SynthPreset* preset = find_synth_preset(preset_name);
  REQUIRE(preset != nullptr);
  std::vector<std::string> paths;
  for (const SynthFile& f : synthesize(*preset, 1, preset->default_steps)) {
    std::vector<std::byte> b(f.contents.size());
    std::memcpy(b.data(), f.contents.data(), b.size());
    s.fs.add_file("s/" + f.name, std::move(b));
    if (f.name.ends_with(".safetensors")) paths.push_back("s/" + f.name);
  }
  s.captures = load_captures(paths, s.fs);
}

}  // namespace fp8a::testing
