// fp8-advisor synth's generator: deterministic bytes, files that load_captures and
// load_training_log read back, a trace whose captured steps equal the tensors' exact BF16 amax, and
// ground truth for every layer. (That the pathologies are real under the advisor's own metrics is
// tested end to end in tests/cli/test_cli.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "datasets/training_log.hpp"
#include "datasets/capture.hpp"
#include "datasets/safetensors.hpp"
#include "datasets/synth.hpp"

using namespace fp8a;

namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

MemoryFileSystem to_fs(const std::vector<SynthFile>& files) {
  MemoryFileSystem fs;
  for (const auto& f : files) fs.add_file("synth/" + f.name, bytes_of(f.contents));
  return fs;
}

}  // namespace

TEST_CASE("SynthRandom: Box-Muller normals are deterministic with mean 0 and variance 1") {
  SynthRandom a(42), b(42), c(43);
  double sum = 0, sum2 = 0;
  bool differs = false;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = a.normal();
    CHECK(x == b.normal());
    differs = differs || x != c.normal();
    sum += x;
    sum2 += x * x;
  }
  CHECK(differs);
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(std::fabs(sum2 / n - 1.0) < 0.01);
  SynthRandom u(7);
  for (int i = 0; i < 1000; ++i) {
    const double v = u.uniform();
    CHECK(v > 0.0);
    CHECK(v <= 1.0);
  }
}

TEST_CASE("the preset table: unique names, the documented presets, ground truth for every kind") {
  std::set<std::string> names;
  for (const auto& p : synth_presets()) {
    CHECK(names.insert(p.name).second);
    CHECK_FALSE(p.layers.empty());
    std::set<std::string> layers;
    for (const auto& l : p.layers) {
      CHECK(layers.insert(l.name).second);
      const auto& t = synth_truth(l.kind);
      CHECK((std::string(t.decision) == "fp8" || std::string(t.decision) == "bf16"));
      CHECK(std::string(t.reason).size() > 20);
    }
  }
  for (const char* n : {"outlier-growth", "wide-gradient", "sensitive-ends", "healthy", "all", "sample"})
    CHECK(find_synth_preset(n) != nullptr);
  CHECK(find_synth_preset("nope") == nullptr);
}

TEST_CASE("every preset: same bytes every run, small, and readable by load_captures") {
  for (const auto& preset : synth_presets()) {
    INFO(preset.name);
    if (std::string(preset.name) == "model") continue;  // 311 MB: its own test below
    const auto files = synthesize(preset, 1, {});
    const auto again = synthesize(preset, 1, {});
    REQUIRE(files.size() == again.size());
    std::size_t total = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
      CHECK(files[i].name == again[i].name);
      CHECK(files[i].contents == again[i].contents);
      total += files[i].contents.size();
    }
    CHECK(total < 5u * 1000 * 1000);
    const auto other_seed = synthesize(preset, 2, {});
    CHECK(other_seed[0].contents != files[0].contents);

    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.name);
    REQUIRE(preset.default_steps.size() == 2);
    const std::int64_t first_step = preset.default_steps[0], last_step = preset.default_steps[1];
    char first_name[32], last_name[32];
    std::snprintf(first_name, sizeof first_name, "step_%06lld.safetensors", static_cast<long long>(first_step));
    std::snprintf(last_name, sizeof last_name, "step_%06lld.safetensors", static_cast<long long>(last_step));
    const std::vector<std::string> expected = {first_name, last_name, "amax_trace.csv", "ground_truth.json"};
    CHECK(names == expected);

    const MemoryFileSystem fs = to_fs(files);
    const CaptureSet captures = load_captures({"synth"}, fs);
    CHECK(captures.files.size() == 2);
    CHECK(captures.tensors.size() == 2 * 3 * preset.layers.size());
    for (const auto& f : captures.files) CHECK(f.step_source == "metadata");

    const TrainingLog trace = load_training_log({"synth/amax_trace.csv"}, fs);
    CHECK(trace.series.size() == 3 * preset.layers.size());
    for (const auto& [key, series] : trace.series) {
      CHECK(series.amax_by_step.size() == static_cast<std::size_t>(last_step + 1));  // steps 0..last
      CHECK(series.amax_by_step.begin()->first == 0);
      CHECK(series.amax_by_step.rbegin()->first == last_step);
    }
    for (const auto& t : captures.tensors) {
      INFO(t.tensor_name << "@" << t.key.step);
      CHECK(t.view.dtype == DType::kBF16);
      const SynthLayer* layer = nullptr;
      for (const auto& l : preset.layers)
        if (t.key.layer == l.name) layer = &l;
      REQUIRE(layer != nullptr);
      const std::int64_t features = t.key.role == Role::kActivation ? layer->in : layer->out;
      const std::vector<std::int64_t> shape =
          t.key.role == Role::kWeight ? std::vector<std::int64_t>{layer->out, layer->in}
          : layer->batch == 1         ? std::vector<std::int64_t>{preset.tokens, features}
                                      : std::vector<std::int64_t>{layer->batch, preset.tokens / layer->batch, features};
      CHECK(t.view.shape == shape);
      std::int64_t zeros = 0;
      for (std::int64_t i = 0; i < t.view.numel(); ++i) zeros += t.view.load_float(i) == 0.0f;
      const double zero_share = t.key.role == Role::kGradient ? layer->gradient_zero_share : 0.0;
      CHECK(zeros == std::llround(zero_share * static_cast<double>(t.view.numel())));
      float amax = 0;
      for (std::int64_t i = 0; i < t.view.numel(); ++i) amax = std::max(amax, std::fabs(t.view.load_float(i)));
      const AmaxSeries* series = trace.find(t.key.layer, t.key.role);
      REQUIRE(series != nullptr);
      CHECK(series->amax_by_step.at(t.key.step) == amax);  // exact
    }

    const auto truth = nlohmann::json::parse(files.back().contents);
    CHECK(truth["generator_version"] == kSynthGeneratorVersion);
    CHECK(truth["seed"] == 1);
    CHECK(truth["preset"] == preset.name);
    CHECK(truth["tokens"] == preset.tokens);
    REQUIRE(truth["layers"].size() == preset.layers.size());
    for (std::size_t i = 0; i < preset.layers.size(); ++i) {
      const auto& l = truth["layers"][i];
      CHECK(l["layer"] == preset.layers[i].name);
      CHECK(l["expected_decision"] == synth_truth(preset.layers[i].kind).decision);
      CHECK(l["reason"].get<std::string>().size() > 20);
      if (l["expected_decision"] == "bf16") {
        CHECK(l["fine_with"].empty());
      } else {
        CHECK_FALSE(l["fine_with"].empty());
      }
    }
  }
}

TEST_CASE("steps: custom lists are sorted and deduplicated; the trace covers 0..last") {
  const auto files = synthesize(*find_synth_preset("healthy"), 5, {30, 3, 30});
  REQUIRE(files.size() == 4);
  CHECK(files[0].name == "step_000003.safetensors");
  CHECK(files[1].name == "step_000030.safetensors");
  const MemoryFileSystem fs = to_fs(files);
  const TrainingLog trace = load_training_log({"synth/amax_trace.csv"}, fs);
  for (const auto& [key, series] : trace.series) CHECK(series.amax_by_step.size() == 31);
  const auto truth = nlohmann::json::parse(files.back().contents);
  CHECK(truth["steps"] == nlohmann::json::array({3, 30}));
  CHECK(truth["seed"] == 5);
}

TEST_CASE("the sample preset: what datasets/sample is meant to show") {
  const SynthPreset* sample = find_synth_preset("sample");
  REQUIRE(sample != nullptr);
  CHECK(sample->default_steps == std::vector<std::int64_t>{100, 200});
  CHECK(sample->tokens == 64);
  std::map<std::string, const SynthLayer*> by_name;
  for (const auto& l : sample->layers) by_name[l.name] = &l;
  REQUIRE(by_name.size() == 4);
  for (const char* layer : {"layers.0.self_attention.linear_qkv", "layers.1.self_attention.linear_qkv"}) {
    INFO(layer);
    REQUIRE(by_name.count(layer) == 1);
    CHECK(by_name[layer]->batch == 2);  // 3-D [batch, seq, hidden] operands
    CHECK(by_name[layer]->kind == SynthKind::kLognormalGradient);
  }
  REQUIRE(by_name.count("layers.0.mlp.linear_fc2") == 1);
  CHECK(by_name["layers.0.mlp.linear_fc2"]->gradient_zero_share == 0.03);
  REQUIRE(by_name.count("layers.1.mlp.linear_fc2") == 1);
  CHECK(by_name["layers.1.mlp.linear_fc2"]->kind == SynthKind::kOutlierGrowth);

  // The FC2 input's outlier channels grow between the steps: gain 20 at the last default step.
  const auto files = synthesize(*sample, 1, {});
  const MemoryFileSystem fs = to_fs(files);
  const CaptureSet captures = load_captures({"synth"}, fs);
  AmaxByStep outlier_amax;
  for (const auto& t : captures.tensors) {
    if (t.key.layer != "layers.1.mlp.linear_fc2" || t.key.role != Role::kActivation) continue;
    float amax = 0;
    for (std::int64_t i = 0; i < t.view.numel(); ++i) amax = std::max(amax, std::fabs(t.view.load_float(i)));
    outlier_amax[t.key.step] = amax;
  }
  REQUIRE(outlier_amax.size() == 2);
  CHECK(outlier_amax[200] > 10.0f * outlier_amax[100]);
}

TEST_CASE("the model preset: real widths, the recorded token count, a massive activation") {
  const SynthPreset* model = find_synth_preset("model");
  REQUIRE(model != nullptr);
  CHECK(model->tokens == 256);
  CHECK(model->tokens_per_step == 1024 * 1024);
  REQUIRE(model->layers.size() == 17);  // 4 x (qkv, proj, fc1, fc2) and the LM head
  for (const auto& l : model->layers) CHECK(std::min(l.in, l.out) >= 1024);
  const auto files = synthesize(*model, 1, {});
  REQUIRE(files.size() == 4);
  const MemoryFileSystem fs = to_fs(files);
  const CaptureSet captures = load_captures({"synth"}, fs);
  CHECK(captures.tokens.tokens_per_step == 1024 * 1024);
  CHECK(captures.tokens.how == "given");
  CHECK(captures.tensors.size() == 2 * 3 * 17);
  for (const auto& t : captures.tensors) {
    if (t.key.layer != "layers.1.mlp.linear_fc2" || t.key.role != Role::kActivation) continue;
    // [2 sequences, 128 tokens, 4096]: each sequence's first token is 2^20 times a N(0,1) row,
    // its amax over every other token's > 2^17.
    REQUIRE(t.view.shape == std::vector<std::int64_t>{2, 128, 4096});
    float first = 0, rest = 0;
    for (std::int64_t i = 0; i < t.view.numel(); ++i) {
      float& m = (i / 4096) % 128 == 0 ? first : rest;
      m = std::max(m, std::fabs(t.view.load_float(i)));
    }
    CHECK(first > 0x1p17f * rest);
  }
  const auto truth = nlohmann::json::parse(files.back().contents);
  CHECK(truth["tokens_per_step"] == 1024 * 1024);
  int massive = 0;
  for (const auto& l : truth["layers"])
    if (l["pathology"] == "massive-token") {
      ++massive;
      CHECK(l["layer"] == "layers.1.mlp.linear_fc2");
      CHECK(l["expected_decision"] == "bf16");
    }
  CHECK(massive == 1);
}
