// Deterministic synthetic captures of transformer-like layers with known pathologies and known
// right answers (`fp8-advisor synth`). Presets are data (kSynthPresets); every preset writes
//   step_NNNNNN.safetensors  BF16 tensors <layer>.<role> for each captured step:
//                            activation [tokens, in], weight [out, in], gradient [tokens, out]
//                            (activation and gradient [batch, tokens/batch, ...] for a layer with
//                            batch > 1);
//   amax_trace.csv           step,tensor,amax for every step 0..last captured step; at captured
//                            steps the value is the captured BF16 tensor's exact amax;
//   ground_truth.json        per layer: expected decision (fp8/bf16), recipes it is fine / not fine
//                            with, a one-line reason; generator version, preset, seed, steps.
// Random numbers: std::mt19937_64 seeded per tensor from (seed, tensor name, step) and our own
// Box-Muller normal (std::normal_distribution differs between standard libraries), so the bytes
// are the same on every platform and run.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp8a {

inline constexpr int kSynthGeneratorVersion = 1;
inline constexpr std::int64_t kSynthTokens = 128;
inline constexpr std::int64_t kSynthHidden = 256;

// What a layer's tensors look like.
enum class SynthKind : std::uint8_t {
  kHealthy,        // activation N(0,1), weight N(0,0.02), gradient N(0,1e-3)
  kOutlierGrowth,  // FC2 input: 16 outlier channels whose gain grows 20 % per step
  kWideGradient,   // gradient: each 128x128 tile has its own scale, 2^0 .. 2^-30
  kSensitiveFirst, // first layer: token embeddings with a large per-token offset that the
                   // (zero-sum) weight cancels: FP8 error of X swamps the GEMM output
  kSensitiveLast,  // last layer (output projection): logits gradient with a large per-token
                   // shared component that the weight cancels in dgrad
  kLognormalGradient,  // gradient sign * 1e-5 * exp(N(0, 2.5)): a wide range spread within every
                       // block; activation N(0,1), weight N(0,0.02)
  kMassiveToken,   // FC2 input: each sequence's first token x2^20 (a massive activation), the
                   // rest N(0,1); lognormal gradient; calibration/ case outlier20x2 trained it
};

struct SynthLayer {
  const char* name;
  SynthKind kind;
  std::int64_t in;
  std::int64_t out;
  // > 1: activation and gradient are stored 3-D, [batch, tokens / batch, features] (the 2-D view
  // readers take is unchanged). Must divide the preset's tokens.
  std::int64_t batch = 1;
  // Share of the gradient's elements set to exact +0 (rounded to a count; positions drawn from
  // the tensor's generator). Exact zeros are exact in every format: never underflow.
  double gradient_zero_share = 0.0;
};

struct SynthLayerTruth {
  const char* decision;       // "fp8" or "bf16"
  const char* fine_with;      // comma-separated recipe kinds
  const char* not_fine_with;  // comma-separated recipe kinds
  const char* reason;
};

const SynthLayerTruth& synth_truth(SynthKind kind);
const char* synth_kind_name(SynthKind kind);

struct SynthPreset {
  const char* name;
  const char* summary;
  std::vector<SynthLayer> layers;
  // The captured steps without --steps. kOutlierGrowth's outlier channels reach gain 20 at the
  // last of them (and grow 20 % a step up to it), whatever steps are captured.
  std::vector<std::int64_t> default_steps;
  std::int64_t tokens = kSynthTokens;  // rows of every activation and gradient
  // The training run's tokens per step that the captured rows sample (global batch x sequence
  // length), written as each step file's __metadata__ tokens_per_step; 0: not recorded.
  std::int64_t tokens_per_step = 0;
};

const std::vector<SynthPreset>& synth_presets();
// nullptr when unknown.
const SynthPreset* find_synth_preset(std::string_view name);

struct SynthFile {
  std::string name;      // file name inside the output directory
  std::string contents;
};

// Generates a preset. steps: captured steps (empty = the preset's default); sorted and
// deduplicated here. Pure function of (preset, seed, steps).
std::vector<SynthFile> synthesize(const SynthPreset& preset, std::uint64_t seed,
                                  std::vector<std::int64_t> steps);

// The same files, each handed to `file` as it is made: its name and a producer that gives its
// bytes to a sink in pieces, in order. The amax trace has a line per tensor for every step up to
// the last captured one (gigabytes for --steps 0,10000000): it is made a piece at a time, never
// held whole.
using SynthSink = std::function<void(std::string_view)>;
using SynthProducer = std::function<void(const SynthSink&)>;
void synthesize_to(const SynthPreset& preset, std::uint64_t seed, std::vector<std::int64_t> steps,
                   const std::function<void(const std::string& name, const SynthProducer& produce)>& file);

// Exposed for tests: the generator's random numbers.
class SynthRandom {
 public:
  explicit SynthRandom(std::uint64_t seed) : engine_(seed) {}
  double uniform();  // in (0, 1], 53 random bits
  double normal();   // N(0, 1), Box-Muller (both values of a pair are used)

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace fp8a
