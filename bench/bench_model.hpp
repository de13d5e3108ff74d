// The Megatron-like model the selection and table-memory benchmarks generate in memory with the
// synth generator (datasets/synth.hpp): layers / 4 transformer blocks of
// layers.<i>.{self_attention.linear_qkv, self_attention.linear_proj, mlp.linear_fc1,
// mlp.linear_fc2}, X [tokens, in], W [out, in], dY [tokens, out], captured at steps
// step_every * 1, 2, ... steps. Most layers are healthy; block 0's QKV is sensitive-first, the
// last block's FC2 sensitive-last, every 6th block's FC2 has growing outliers and every 8th
// block's FC1 a wide gradient.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "datasets/synth.hpp"

namespace fp8a::bench {

struct ModelShape {
  int layers = 96;  // a multiple of 4
  int steps = 3;
  int step_every = 100;
  std::int64_t tokens = 256, hidden = 256, ffn = 1024;
};

// The names outlive the preset (SynthLayer holds const char*); a deque never moves its strings.
struct ModelPreset {
  std::deque<std::string> names;
  SynthPreset preset;
};

inline ModelPreset make_model_preset(const ModelShape& o) {
  ModelPreset b;
  b.preset.name = "bench-selection";
  b.preset.summary = "Megatron-like blocks for bench_selection";
  b.preset.tokens = o.tokens;
  for (int s = 1; s <= o.steps; ++s) b.preset.default_steps.push_back(static_cast<std::int64_t>(o.step_every) * s);
  const int blocks = o.layers / 4;
  for (int i = 0; i < blocks; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    auto add = [&](const char* suffix, SynthKind kind, std::int64_t in, std::int64_t out) {
      b.names.push_back(p + suffix);
      b.preset.layers.push_back({b.names.back().c_str(), kind, in, out});
    };
    using K = SynthKind;
    add("self_attention.linear_qkv", i == 0 ? K::kSensitiveFirst : K::kHealthy, o.hidden, 3 * o.hidden);
    add("self_attention.linear_proj", K::kHealthy, o.hidden, o.hidden);
    add("mlp.linear_fc1", i % 8 == 4 ? K::kWideGradient : K::kHealthy, o.hidden, o.ffn);
    add("mlp.linear_fc2",
        i == blocks - 1 ? K::kSensitiveLast : (i % 6 == 3 ? K::kOutlierGrowth : K::kHealthy), o.ffn,
        o.hidden);
  }
  return b;
}

}  // namespace fp8a::bench
