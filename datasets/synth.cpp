#include "datasets/synth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "datasets/safetensors_writer.hpp"
#include "core/amax_by_step.hpp"
#include "core/error.hpp"
#include "core/fnv1a.hpp"
#include "core/fp8_codec.hpp"

namespace fp8a {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kOutlierGrowthPerStep = 1.2;  // FC2 outlier gain ratio between steps
constexpr double kOutlierGainAtLast = 20.0;    // at the preset's last default step
constexpr int kOutlierChannels = 16;
constexpr double kLognormalScale = 1e-5;  // kLognormalGradient: |g| = scale * exp(sigma * N(0,1))
constexpr double kLognormalSigma = 2.5;
constexpr double kMassiveTokenGain = 0x1p20;  // kMassiveToken: token 0's gain, calibration's outlier20

const std::map<SynthKind, SynthLayerTruth> kTruth = {
    {SynthKind::kHealthy,
     {"fp8", "current,delayed,block,mxfp8", "",
      "Gaussian operands with a stable amax: every FP8 recipe is accurate"}},
    {SynthKind::kOutlierGrowth,
     {"fp8", "current,block,mxfp8", "delayed",
      "FC2 input outlier channels grow 20 % per step: the delayed-scaling amax history lags and "
      "the largest values saturate; current and block scaling follow the growth"}},
    {SynthKind::kWideGradient,
     {"fp8", "block,mxfp8", "current,delayed",
      "gradient tiles span 2^0..2^-30: one per-tensor E4M3/E5M2 scale flushes the small tiles to "
      "zero, 1x128 / 32-element blocks scale each on its own"}},
    {SynthKind::kSensitiveFirst,
     {"bf16", "", "current,delayed,block,mxfp8",
      "first layer: token embeddings carry a large per-token offset that the zero-sum weight "
      "cancels, so the FP8 rounding error of the input dominates the GEMM output (bf16 by "
      "construction, from the output error; no training case of calibration/ confirms that it "
      "trains worse in FP8)"}},
    {SynthKind::kSensitiveLast,
     {"bf16", "", "current,delayed,block,mxfp8",
      "last layer: the logits gradient carries a large per-token shared component that the "
      "output weight cancels in dgrad, so the FP8 rounding error dominates the input gradient (bf16 "
      "by construction, from the output error; no training case of calibration/ confirms that it "
      "trains worse in FP8)"}},
    {SynthKind::kLognormalGradient,
     {"fp8", "current,delayed,block,mxfp8", "",
      "gradient magnitudes spread lognormally over ~30 binades within every block: E5M2 (hybrid) "
      "keeps them under every recipe; all-E4M3 flushes the smallest to zero, a large share "
      "per-tensor but a small one in energy"}},
    {SynthKind::kMassiveToken,
     {"bf16", "", "current,delayed,block",
      "FC2 input: each sequence's first token 2^20 times the rest (a massive activation): a "
      "per-tensor scale flushes every other token, and 1x128 blocks isolate the token in fprop but "
      "not in wgrad's columnwise copy; in training (calibration/RESULTS.md outlier20x2) current and block FP8 "
      "lost 0.108 and 0.038 in validation loss, with the FC2 GEMMs in BF16 within noise"}},
};

const char* kind_name(SynthKind k) {
  switch (k) {
    case SynthKind::kHealthy: return "healthy";
    case SynthKind::kOutlierGrowth: return "outlier-growth";
    case SynthKind::kWideGradient: return "wide-gradient";
    case SynthKind::kSensitiveFirst: return "sensitive-first";
    case SynthKind::kSensitiveLast: return "sensitive-last";
    case SynthKind::kLognormalGradient: return "lognormal-gradient";
    case SynthKind::kMassiveToken: return "massive-token";
  }
  return "?";
}

constexpr std::int64_t H = kSynthHidden;
constexpr std::int64_t kFfnWide = 2 * kSynthHidden;

// One row per preset.
std::vector<SynthPreset> make_presets() {
  const SynthLayer qkv0{"layers.0.self_attention.linear_qkv", SynthKind::kHealthy, H, H};
  const SynthLayer first{"layers.0.self_attention.linear_qkv", SynthKind::kSensitiveFirst, H, H};
  const SynthLayer fc1_0{"layers.0.mlp.linear_fc1", SynthKind::kHealthy, H, H};
  const SynthLayer fc1_wide{"layers.0.mlp.linear_fc1", SynthKind::kWideGradient, H, kFfnWide};
  const SynthLayer fc2_0{"layers.0.mlp.linear_fc2", SynthKind::kHealthy, H, H};
  const SynthLayer fc2_out{"layers.0.mlp.linear_fc2", SynthKind::kOutlierGrowth, H, H};
  const SynthLayer qkv1{"layers.1.self_attention.linear_qkv", SynthKind::kHealthy, H, H};
  const SynthLayer fc1_1{"layers.1.mlp.linear_fc1", SynthKind::kHealthy, H, H};
  const SynthLayer fc2_1{"layers.1.mlp.linear_fc2", SynthKind::kHealthy, H, H};
  const SynthLayer last{"output_layer", SynthKind::kSensitiveLast, H, H};
  const std::vector<std::int64_t> steps = {50, 100};
  // The shipped sample (datasets/sample): a toy 2-layer transformer, hidden 128, ffn 256, 64
  // tokens, captured at steps 100 and 200.
  constexpr std::int64_t kSampleHidden = 128, kSampleFfn = 256, kSampleTokens = 64;
  const SynthLayer sample_qkv0{"layers.0.self_attention.linear_qkv", SynthKind::kLognormalGradient,
                               kSampleHidden, 3 * kSampleHidden, 2};
  const SynthLayer sample_fc2_0{"layers.0.mlp.linear_fc2", SynthKind::kLognormalGradient, kSampleFfn,
                                kSampleHidden, 1, 0.03};
  const SynthLayer sample_qkv1{"layers.1.self_attention.linear_qkv", SynthKind::kLognormalGradient,
                               kSampleHidden, 3 * kSampleHidden, 2};
  const SynthLayer sample_fc2_1{"layers.1.mlp.linear_fc2", SynthKind::kOutlierGrowth, kSampleFfn,
                                kSampleHidden};
  // The model-shaped sample (scripts/setup.sh, the README's worked example): four layers of a
  // GPT with hidden 1024 and FFN 4096, an 8192-entry LM head, 256 captured tokens of a run with
  // 1024 sequences of 1024 tokens a step. Most of it healthy (lognormal gradients, as real ones
  // are); layers.1's FC2 input carries a massive activation on the first token of each of its 2
  // sequences (the calibrated harm case), the last
  // FC2 input outlier channels growing until delayed scaling saturates.
  constexpr std::int64_t kModelHidden = 1024, kModelFfn = 4096, kModelVocab = 8192, kModelTokens = 256;
  static const std::vector<std::string> names = [] {  // SynthLayer::name points into these
    std::vector<std::string> n;
    for (int l = 0; l < 4; ++l)
      for (const char* m : {"self_attention.linear_qkv", "self_attention.linear_proj", "mlp.linear_fc1",
                            "mlp.linear_fc2"})
        n.push_back("layers." + std::to_string(l) + "." + m);
    return n;
  }();
  std::vector<SynthLayer> model;
  for (int l = 0; l < 4; ++l) {
    const auto name = [&](int m) { return names[static_cast<std::size_t>(4 * l + m)].c_str(); };
    model.push_back({name(0), SynthKind::kLognormalGradient, kModelHidden, 3 * kModelHidden});
    model.push_back({name(1), SynthKind::kLognormalGradient, kModelHidden, kModelHidden});
    model.push_back({name(2), SynthKind::kLognormalGradient, kModelHidden, kModelFfn});
    if (l == 1)  // 2 sequences of 128 tokens: a massive token in every 128-token block
      model.push_back({name(3), SynthKind::kMassiveToken, kModelFfn, kModelHidden, 2});
    else
      model.push_back({name(3), l == 3 ? SynthKind::kOutlierGrowth : SynthKind::kLognormalGradient, kModelFfn,
                       kModelHidden});
  }
  model.push_back({"output_layer", SynthKind::kLognormalGradient, kModelHidden, kModelVocab});
  return {
      {"outlier-growth", "FC2 input outlier channels grow until delayed scaling saturates",
       {qkv0, fc2_out}, steps},
      {"wide-gradient", "a gradient per-tensor FP8 flushes to zero, 1x128 blocks do not",
       {qkv0, fc1_wide}, steps},
      {"sensitive-ends", "a first and a last layer whose FP8 error dominates their GEMM outputs",
       {first, fc1_0, last}, steps},
      {"healthy", "Gaussian layers that must stay FP8", {qkv0, fc1_0, fc2_0}, steps},
      {"all", "every pathology above in one model, plus healthy layers",
       {first, fc1_wide, fc2_out, qkv1, fc1_1, fc2_1, last}, steps},
      {"sample", "the shipped sample: lognormal gradients (one with 3 % exact zeros), 3-D QKV "
       "operands, FC2 input outliers growing",
       {sample_qkv0, sample_fc2_0, sample_qkv1, sample_fc2_1}, {100, 200}, kSampleTokens},
      {"model", "a 4-layer GPT slice shaped like a real model (hidden 1024, FFN 4096), 256 tokens of a "
       "1M-token step: healthy but for a massive-activation FC2 input and a growing FC2 outlier",
       model, {50, 100}, kModelTokens, 1024 * 1024},
  };
}


std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t tensor_seed(std::uint64_t seed, const std::string& name, std::int64_t step) {
  return splitmix(fnv1a(name + "@" + std::to_string(step), splitmix(seed)));
}

// last: the preset's last default step.
double outlier_gain(std::int64_t step, std::int64_t last) {
  return std::max(1.0, kOutlierGainAtLast * std::pow(kOutlierGrowthPerStep, static_cast<double>(step - last)));
}

std::int64_t last_default_step(const SynthPreset& preset) {
  return *std::max_element(preset.default_steps.begin(), preset.default_steps.end());
}

// Values as float64, row-major [rows, cols].
using Matrix = std::vector<double>;

Matrix gaussian(SynthRandom& rng, std::int64_t n, double sigma) {
  Matrix m(static_cast<std::size_t>(n));
  for (auto& v : m) v = sigma * rng.normal();
  return m;
}

// Subtracts row means, then column means: every row and every column sums to ~0.
void double_center(Matrix& w, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += w[static_cast<std::size_t>(r * cols + c)];
    for (std::int64_t c = 0; c < cols; ++c) w[static_cast<std::size_t>(r * cols + c)] -= s / static_cast<double>(cols);
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (std::int64_t r = 0; r < rows; ++r) s += w[static_cast<std::size_t>(r * cols + c)];
    for (std::int64_t r = 0; r < rows; ++r) w[static_cast<std::size_t>(r * cols + c)] -= s / static_cast<double>(rows);
  }
}

// Sets round(share * size) elements, at positions drawn from rng, to exact +0.
void set_zeros(Matrix& m, double share, SynthRandom& rng) {
  const auto count = static_cast<std::size_t>(std::llround(share * static_cast<double>(m.size())));
  std::vector<std::size_t> index(m.size());
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = i;
  for (std::size_t i = 0; i < count; ++i) {  // partial Fisher-Yates with our own uniform
    const std::size_t left = index.size() - i;
    const auto j = i + std::min(left - 1, static_cast<std::size_t>(rng.uniform() * static_cast<double>(left)));
    std::swap(index[i], index[j]);
    m[index[i]] = 0.0;
  }
}

Matrix generate(const SynthPreset& preset, const SynthLayer& layer, char role, std::uint64_t seed,
                std::int64_t step) {
  const std::string name = std::string(layer.name) + "." +
                           (role == 'a' ? "activation" : role == 'w' ? "weight" : "gradient");
  SynthRandom rng(tensor_seed(seed, name, step));
  const std::int64_t T = preset.tokens;
  const bool centered = layer.kind == SynthKind::kSensitiveFirst || layer.kind == SynthKind::kSensitiveLast;
  if (role == 'w') {
    Matrix w = gaussian(rng, layer.out * layer.in, 0.02);
    if (centered) double_center(w, layer.out, layer.in);
    return w;
  }
  if (role == 'a') {
    Matrix a = gaussian(rng, T * layer.in, 1.0);
    if (layer.kind == SynthKind::kOutlierGrowth) {
      const double gain = outlier_gain(step, last_default_step(preset));
      for (std::int64_t t = 0; t < T; ++t)
        for (int k = 0; k < kOutlierChannels; ++k)
        {
          // Outlier channels hold consistently large values: gain * sign * (3 + 0.3 z).
          double& v = a[static_cast<std::size_t>(t * layer.in + 17 + 13 * k)];
          v = gain * (v < 0 ? -1.0 : 1.0) * (3.0 + 0.3 * rng.normal());
        }
    } else if (layer.kind == SynthKind::kMassiveToken) {
      // The first token of every sequence (of the layer's batch), as massive activations sit on
      // the first token in real LLMs.
      for (std::int64_t t = 0; t < T; t += T / layer.batch)
        for (std::int64_t c = 0; c < layer.in; ++c) a[static_cast<std::size_t>(t * layer.in + c)] *= kMassiveTokenGain;
    } else if (layer.kind == SynthKind::kSensitiveFirst) {
      // Heavy-tailed per-token offsets (|offset| 1..8 times the spread, random sign): embeddings of frequent
      // tokens with a large shared component.
      for (std::int64_t t = 0; t < T; ++t) {
        const double off = (rng.uniform() < 0.5 ? -1.0 : 1.0) * std::pow(8.0, rng.uniform());
        for (std::int64_t c = 0; c < layer.in; ++c) a[static_cast<std::size_t>(t * layer.in + c)] += off;
      }
    }
    return a;
  }
  Matrix g;
  if (layer.kind == SynthKind::kLognormalGradient || layer.kind == SynthKind::kMassiveToken) {
    g.resize(static_cast<std::size_t>(T * layer.out));
    for (auto& v : g) {
      const double sign = rng.uniform() < 0.5 ? -1.0 : 1.0;
      v = sign * kLognormalScale * std::exp(kLognormalSigma * rng.normal());
    }
  } else {
    g = gaussian(rng, T * layer.out, 1e-3);
  }
  if (layer.kind == SynthKind::kWideGradient) {
    // One scale per 128x128 tile, log2 spread evenly over 0..-30 in a seeded order.
    const std::int64_t tr = (T + 127) / 128, tc = (layer.out + 127) / 128;
    std::vector<double> exps(static_cast<std::size_t>(tr * tc));
    for (std::size_t i = 0; i < exps.size(); ++i)
      exps[i] = exps.size() == 1 ? 0.0 : -30.0 * static_cast<double>(i) / static_cast<double>(exps.size() - 1);
    for (std::size_t i = exps.size(); i > 1; --i) {  // Fisher-Yates with our own uniform
      const auto j = static_cast<std::size_t>(std::min<double>(static_cast<double>(i) - 1, std::floor(rng.uniform() * static_cast<double>(i))));
      std::swap(exps[i - 1], exps[j]);
    }
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < layer.out; ++c)
        g[static_cast<std::size_t>(t * layer.out + c)] *= std::exp2(exps[static_cast<std::size_t>((t / 128) * tc + c / 128)]);
  } else if (layer.kind == SynthKind::kSensitiveLast) {
    for (std::int64_t t = 0; t < T; ++t) {
      const double off = (rng.uniform() < 0.5 ? -1.0 : 1.0) * 1e-3 * std::pow(8.0, rng.uniform());
      for (std::int64_t c = 0; c < layer.out; ++c) g[static_cast<std::size_t>(t * layer.out + c)] += off;
    }
  }
  if (layer.gradient_zero_share > 0.0) set_zeros(g, layer.gradient_zero_share, rng);
  return g;
}

struct Bf16Tensor {
  std::string bytes;
  float amax = 0.0f;
};

Bf16Tensor to_bf16(const Matrix& m) {
  Bf16Tensor t;
  t.bytes.resize(m.size() * 2);
  for (std::size_t i = 0; i < m.size(); ++i) {
    const std::uint16_t h = float_to_bf16(static_cast<float>(m[i]));
    t.bytes[2 * i] = static_cast<char>(h & 0xFFu);
    t.bytes[2 * i + 1] = static_cast<char>(h >> 8);
    t.amax = std::max(t.amax, std::fabs(bf16_to_float(h)));
  }
  return t;
}

std::string exact_float(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

std::string step_file_name(std::int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "step_%06lld.safetensors", static_cast<long long>(step));
  return buf;
}

std::vector<std::string> split_list(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s; *p; ++p) {
    if (*p == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

double SynthRandom::uniform() {
  return static_cast<double>((engine_() >> 11) + 1) * 0x1.0p-53;
}

double SynthRandom::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * kPi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * kPi * u2);
}

const SynthLayerTruth& synth_truth(SynthKind kind) { return kTruth.at(kind); }
const char* synth_kind_name(SynthKind kind) { return kind_name(kind); }

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> presets = make_presets();
  return presets;
}

const SynthPreset* find_synth_preset(std::string_view name) {
  for (const auto& p : synth_presets())
    if (name == p.name) return &p;
  return nullptr;
}

std::vector<SynthFile> synthesize(const SynthPreset& preset, std::uint64_t seed,
                                  std::vector<std::int64_t> steps) {
  std::vector<SynthFile> files;
  synthesize_to(preset, seed, std::move(steps), [&](const std::string& name, const SynthProducer& produce) {
    std::string contents;
    produce([&](std::string_view piece) { contents.append(piece); });
    files.push_back({name, std::move(contents)});
  });
  return files;
}

void synthesize_to(const SynthPreset& preset, std::uint64_t seed, std::vector<std::int64_t> steps,
                   const std::function<void(const std::string& name, const SynthProducer& produce)>& file) {
  if (steps.empty()) steps = preset.default_steps;
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  FP8A_CHECK(!steps.empty() && steps.front() >= 0, "synth: steps must be non-negative");
  const std::int64_t last = steps.back();
  const std::int64_t outlier_last = last_default_step(preset);

  // amax at captured steps, per tensor name.
  std::map<std::string, AmaxByStep> captured_amax;
  for (const std::int64_t step : steps) {
    std::vector<SafetensorsTensorOut> tensors;
    for (const auto& layer : preset.layers) {
      for (const char role : {'a', 'w', 'g'}) {
        const std::string name = std::string(layer.name) + "." +
                                 (role == 'a' ? "activation" : role == 'w' ? "weight" : "gradient");
        const std::int64_t cols = role == 'g' ? layer.out : layer.in;
        std::vector<std::int64_t> shape = {layer.out, cols};
        if (role != 'w') {
          FP8A_CHECK(layer.batch >= 1 && preset.tokens % layer.batch == 0,
                     "synth: a layer's batch must divide the preset's tokens");
          shape = layer.batch == 1 ? std::vector<std::int64_t>{preset.tokens, cols}
                                   : std::vector<std::int64_t>{layer.batch, preset.tokens / layer.batch, cols};
        }
        Bf16Tensor t = to_bf16(generate(preset, layer, role, seed, step));
        captured_amax[name][step] = t.amax;
        tensors.push_back({name, "BF16", std::move(shape), std::move(t.bytes)});
      }
    }
    std::sort(tensors.begin(), tensors.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    std::map<std::string, std::string> metadata = {
        {"step", std::to_string(step)}, {"generator", "fp8-advisor synth"}, {"preset", preset.name}};
    if (preset.tokens_per_step > 0) {
      metadata["tokens_per_step"] = std::to_string(preset.tokens_per_step);
      metadata["tokens_per_step_source"] = "given";
    }
    const std::string bytes = safetensors_bytes(tensors, metadata);
    file(step_file_name(step), [&](const SynthSink& put) { put(bytes); });
  }

  // The trace: captured steps exact; other steps scaled from the next captured step. In pieces
  // of about 1 MB.
  file("amax_trace.csv", [&](const SynthSink& put) {
    std::string csv = "step,tensor,amax\n";
    for (std::int64_t s = 0; s <= last; ++s) {
      const std::int64_t next = *std::lower_bound(steps.begin(), steps.end(), s);
      for (const auto& layer : preset.layers) {
        for (const char* role : {"activation", "weight", "gradient"}) {
          const std::string name = std::string(layer.name) + "." + role;
          const float at_next = captured_amax[name][next];
          float v = at_next;
          if (s != next) {
            SynthRandom rng(tensor_seed(seed, name + "#trace", s));
            double factor = 1.0 + 0.02 * rng.normal();
            if (role[0] == 'w') factor = 1.0 + 0.002 * rng.normal();
            if (layer.kind == SynthKind::kOutlierGrowth && role[0] == 'a')
              factor = std::max(outlier_gain(s, outlier_last), 4.5) / std::max(outlier_gain(next, outlier_last), 4.5);
            v = static_cast<float>(static_cast<double>(at_next) * factor);
          }
          csv += std::to_string(s) + "," + name + "," + exact_float(v) + "\n";
        }
      }
      if (csv.size() >= (std::size_t{1} << 20)) {
        put(csv);
        csv.clear();
      }
    }
    put(csv);
  });

  nlohmann::ordered_json truth;
  truth["generator"] = "fp8-advisor synth";
  truth["generator_version"] = kSynthGeneratorVersion;
  truth["preset"] = preset.name;
  truth["summary"] = preset.summary;
  truth["seed"] = seed;
  truth["steps"] = steps;
  truth["tokens"] = preset.tokens;
  if (preset.tokens_per_step > 0) truth["tokens_per_step"] = preset.tokens_per_step;
  truth["layers"] = nlohmann::ordered_json::array();
  for (const auto& layer : preset.layers) {
    const auto& t = synth_truth(layer.kind);
    nlohmann::ordered_json l;
    l["layer"] = layer.name;
    l["pathology"] = kind_name(layer.kind);
    l["in_features"] = layer.in;
    l["out_features"] = layer.out;
    l["batch"] = layer.batch;
    l["gradient_zero_share"] = layer.gradient_zero_share;
    l["expected_decision"] = t.decision;
    l["fine_with"] = split_list(t.fine_with);
    l["not_fine_with"] = split_list(t.not_fine_with);
    l["reason"] = t.reason;
    truth["layers"].push_back(l);
  }
  const std::string truth_text = truth.dump(2) + "\n";
  file("ground_truth.json", [&](const SynthSink& put) { put(truth_text); });
}

}  // namespace fp8a
