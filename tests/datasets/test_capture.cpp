// load_captures over an in-memory file system: discovery, step resolution, naming, dtype and
// shape checks, ordering, and the values seen through TensorView.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "datasets/safetensors_builder.hpp"
#include "core/error.hpp"

using fp8a::CaptureKey;
using fp8a::Error;
using fp8a::load_captures;
using fp8a::MemoryFileSystem;
using fp8a::natural_less;
using fp8a::Role;
using fp8a::test::build_file;
using fp8a::test::raw_file;
using fp8a::test::raw_file_with_length;
using fp8a::test::TensorSpec;
using fp8a::test::zero_bytes;

namespace {

// Largest finite BF16, bit pattern 0x7F7F: (2 - 2^-7) * 2^127.
constexpr float kBf16Max = 3.3895313892515355e38f;

// One BF16 [2] weight: enough to make a file a valid capture.
std::vector<std::byte> one_weight(const std::string& name = "layers.0.fc1.weight",
                                  const std::map<std::string, std::string>& meta = {}) {
  return build_file({{name, "BF16", {2}, {1.0f, -1.0f}}}, meta);
}

// A file of the source tree (a golden fixture), whole; it must exist and not be empty.
std::vector<std::byte> source_file(const std::string& relative) {
  std::ifstream in(std::string(FP8A_SOURCE_DIR) + "/" + relative, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(!text.empty());
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

}  // namespace

TEST_CASE("files and directories: recursive, *.safetensors only, sorted, de-duplicated") {
  MemoryFileSystem fs;
  const auto a = one_weight("layers.0.fc1.weight");
  const auto b = build_file({{"layers.0.fc1.activation", "F32", {1, 3}, {1.0f, 2.0f, 3.0f}},
                             {"layers.0.fc1.weight", "F32", {3}, {4.0f, 5.0f, 6.0f}}});
  const auto c = one_weight("layers.1.fc1.weight");
  fs.add_file("caps/z/step_000200.safetensors", a);
  fs.add_file("caps/a/deep/step_000100.safetensors", b);
  // Not captures: never opened (their content would fail to parse).
  fs.add_file("caps/notes.txt", raw_file("not json"));
  fs.add_file("caps/a/old.safetensors.bak", raw_file("not json"));
  fs.add_file("extra/run7_step_000300.safetensors", c);

  // The explicit file is listed twice, once as a file and once below its directory.
  const auto set = load_captures({"extra/run7_step_000300.safetensors", "caps", "extra"}, fs);
  REQUIRE(set.files.size() == 3);
  CHECK(set.files[0].path == "caps/a/deep/step_000100.safetensors");
  CHECK(set.files[1].path == "caps/z/step_000200.safetensors");
  CHECK(set.files[2].path == "extra/run7_step_000300.safetensors");
  CHECK(set.files[0].step == 100);
  CHECK(set.files[1].step == 200);
  CHECK(set.files[2].step == 300);
  CHECK(set.files[0].tensor_count == 2);
  CHECK(set.files[1].tensor_count == 1);
  CHECK(set.files[0].bytes == b.size());
  CHECK(set.files[1].bytes == a.size());
  CHECK(set.mappings.size() == 3);

  REQUIRE(set.tensors.size() == 4);
  CHECK(set.tensors[0].key == CaptureKey{100, "layers.0.fc1", Role::kActivation});
  CHECK(set.tensors[0].file == "caps/a/deep/step_000100.safetensors");
  CHECK(set.tensors[0].tensor_name == "layers.0.fc1.activation");
  CHECK(set.tensors[1].key == CaptureKey{100, "layers.0.fc1", Role::kWeight});
  CHECK(set.tensors[2].key == CaptureKey{200, "layers.0.fc1", Role::kWeight});
  CHECK(set.tensors[2].file == "caps/z/step_000200.safetensors");
  CHECK(set.tensors[3].key == CaptureKey{300, "layers.1.fc1", Role::kWeight});
}

TEST_CASE("step: __metadata__ first, then the last number in the file name, then 0") {
  MemoryFileSystem fs;
  // Metadata wins over the number in the name.
  fs.add_file("m/step_000100.safetensors", one_weight("l.weight", {{"step", "42"}}));
  fs.add_file("n/run7_step_000300.safetensors", one_weight());
  // Digits only in the directory name do not count.
  fs.add_file("run5/capture.safetensors", one_weight());
  // Leading zeros in metadata are fine.
  fs.add_file("z/x.safetensors", one_weight("l.weight", {{"step", "007"}}));

  const auto set = load_captures(
      {"m/step_000100.safetensors", "n/run7_step_000300.safetensors", "run5/capture.safetensors",
       "z/x.safetensors"},
      fs);
  REQUIRE(set.files.size() == 4);
  CHECK(set.files[0].path == "m/step_000100.safetensors");
  CHECK(set.files[0].step == 42);
  CHECK(set.files[0].step_source == "metadata");
  CHECK(set.files[1].path == "n/run7_step_000300.safetensors");
  CHECK(set.files[1].step == 300);
  CHECK(set.files[1].step_source == "file name");
  CHECK(set.files[2].path == "run5/capture.safetensors");
  CHECK(set.files[2].step == 0);
  CHECK(set.files[2].step_source == "default");
  CHECK(set.files[3].step == 7);
  CHECK(set.files[3].step_source == "metadata");
  // The tensors carry their file's step.
  REQUIRE(set.tensors.size() == 4);
  CHECK(set.tensors[0].key.step == 0);
  CHECK(set.tensors[1].key.step == 7);
  CHECK(set.tensors[2].key.step == 42);
  CHECK(set.tensors[3].key.step == 300);
}

TEST_CASE("405: step metadata that is not a non-negative integer") {
  for (const char* bad : {"abc", "-5", "", "12x", "+3"}) {
    CAPTURE(bad);
    MemoryFileSystem fs;
    fs.add_file("c/s.safetensors", one_weight("l.weight", {{"step", bad}}));
    CHECK_THROWS_WITH_AS(load_captures({"c/s.safetensors"}, fs),
                         (std::string("[fp8a.capture.405] c/s.safetensors: __metadata__ step '") +
                          bad + "' is not a non-negative integer")
                             .c_str(),
                         Error);
  }
}

TEST_CASE("tokens per step: __metadata__ or fp8a_capture.json, one number for the whole capture") {
  MemoryFileSystem fs;
  fs.add_file("a/s1.safetensors", one_weight("l.weight", {{"step", "1"}, {"tokens_per_step", "4096"},
                                                          {"tokens_per_step_source", "counted"}}));
  fs.add_file("a/s2.safetensors", one_weight("l.weight", {{"step", "2"}, {"tokens_per_step", "4096"}}));
  fs.add_file("a/s3.safetensors", one_weight("l.weight", {{"step", "3"}}));  // silent: fine
  auto set = load_captures({"a"}, fs);
  CHECK(set.tokens.tokens_per_step == 4096);
  CHECK(set.tokens.file == "a/s1.safetensors");
  CHECK(set.tokens.how == "counted");
  // A description agrees, in a folder of its own (in path order it comes first).
  const std::string_view description = "{ \"tokens_per_step\" : 4096 }\n";
  fs.add_file("a/fp8a_capture.json", std::vector<std::byte>(reinterpret_cast<const std::byte*>(description.data()),
                                                            reinterpret_cast<const std::byte*>(description.data()) +
                                                                description.size()));
  set = load_captures({"a"}, fs);
  CHECK(set.tokens.tokens_per_step == 4096);
  CHECK(set.tokens.file == "a/fp8a_capture.json");
  CHECK(set.tokens.how.empty());
  CHECK(set.files.size() == 3);  // the description is not a capture file
  // Without any: unknown.
  CHECK(load_captures({"a/s3.safetensors"}, fs).tokens.tokens_per_step == 0);

  // Two numbers: 412 names both files.
  fs.add_file("b/s1.safetensors", one_weight("l.weight", {{"step", "1"}, {"tokens_per_step", "4096"}}));
  fs.add_file("b/s2.safetensors", one_weight("l.weight", {{"step", "2"}, {"tokens_per_step", "8192"}}));
  CHECK_THROWS_WITH_AS(load_captures({"b"}, fs),
                       "[fp8a.capture.412] b/s2.safetensors: tokens per step 8192 but b/s1.safetensors says "
                       "4096: captures of one run record one number",
                       Error);
  // Not an integer from 1 to 10^12: 411.
  for (const char* bad : {"0", "-5", "1e6", "", "1000000000001", "4096 "}) {
    CAPTURE(bad);
    MemoryFileSystem bad_fs;
    bad_fs.add_file("c/s.safetensors", one_weight("l.weight", {{"tokens_per_step", bad}}));
    CHECK_THROWS_WITH_AS(load_captures({"c/s.safetensors"}, bad_fs),
                         (std::string("[fp8a.capture.411] c/s.safetensors: __metadata__ tokens_per_step '") + bad +
                          "' is not an integer from 1 to 10^12")
                             .c_str(),
                         Error);
  }
  MemoryFileSystem big;
  big.add_file("d/s.safetensors", one_weight("l.weight", {{"tokens_per_step", "1000000000000"}}));
  CHECK(load_captures({"d"}, big).tokens.tokens_per_step == 1'000'000'000'000);
}

TEST_CASE("106: an amax trace or log given as a capture is named for what it is") {
  MemoryFileSystem fs;
  const std::string_view trace = "step,tensor,amax\n0,l.activation,1.5\n";
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(trace.data()),
                                     reinterpret_cast<const std::byte*>(trace.data()) + trace.size());
  for (const char* name : {"c/amax_trace_rank0.csv", "c/nvdlfw.log", "c/notes.txt", "c/other.json"}) {
    CAPTURE(name);
    fs.add_file(name, bytes);
    CHECK_THROWS_WITH_AS(load_captures({name}, fs),
                         (std::string("[fp8a.io.106] ") + name +
                          ": a text file, not a capture (.safetensors, .npy, .npz, .pt); an amax trace or "
                          "nvdlfw_inspect log goes to --training-log")
                             .c_str(),
                         Error);
  }
  // In a folder they are skipped (the folder's captures are read), and fp8a_capture.json is read.
  fs.add_file("c/s.safetensors", one_weight());
  CHECK(load_captures({"c"}, fs).tensors.size() == 1);
}

TEST_CASE("101 and 103: missing paths and directories without captures") {
  MemoryFileSystem fs;
  fs.add_file("d/notes.txt", raw_file("{}"));
  fs.add_file("d/sub/x.safetensors.tmp", raw_file("{}"));
  CHECK_THROWS_WITH_AS(load_captures({"nope"}, fs), "[fp8a.io.101] nope: no such file or directory",
                       Error);
  // A prefix of a real directory name is not that directory.
  CHECK_THROWS_WITH_AS(load_captures({"d/su"}, fs), "[fp8a.io.101] d/su: no such file or directory",
                       Error);
  CHECK_THROWS_WITH_AS(load_captures({"d"}, fs),
                       "[fp8a.io.103] d: directory holds no captures (*.safetensors, *.npy, *.npz, *.pt)", Error);
}

TEST_CASE("safetensors errors name the capture's path") {
  MemoryFileSystem fs;
  fs.add_file("c/bad.safetensors", raw_file_with_length(50, "{}", {}));
  CHECK_THROWS_WITH_AS(load_captures({"c"}, fs),
                       "[fp8a.safetensors.303] c/bad.safetensors: truncated: header of 50 bytes "
                       "but only 2 bytes follow the length field",
                       Error);
}

TEST_CASE("403: tensor names without a role suffix") {
  const char* bad_names[] = {"layers.0.fc1.input", "weight", ".weight", "layers.0.fc1.Weight"};
  for (const char* name : bad_names) {
    CAPTURE(name);
    MemoryFileSystem fs;
    fs.add_file("c.safetensors", one_weight(name));
    CHECK_THROWS_WITH_AS(load_captures({"c.safetensors"}, fs),
                         (std::string("[fp8a.capture.403] c.safetensors: tensor '") + name +
                          "': name must be <layer>.<role> with role activation, weight or gradient")
                             .c_str(),
                         Error);
  }
}

TEST_CASE("split_tensor_name splits at the last dot") {
  std::string layer;
  Role role = Role::kWeight;
  REQUIRE(fp8a::split_tensor_name("layers.3.linear_fc2.gradient", &layer, &role));
  CHECK(layer == "layers.3.linear_fc2");
  CHECK(role == Role::kGradient);
  REQUIRE(fp8a::split_tensor_name("x.activation", &layer, &role));
  CHECK(layer == "x");
  CHECK(role == Role::kActivation);
  CHECK_FALSE(fp8a::split_tensor_name("activation", &layer, &role));
  CHECK_FALSE(fp8a::split_tensor_name("x.activations", &layer, &role));
}

TEST_CASE("401: dtypes other than BF16, F16, F32") {
  MemoryFileSystem fs;
  fs.add_file("c.safetensors",
              raw_file(R"({"l.weight":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                       zero_bytes(8)));
  CHECK_THROWS_WITH_AS(load_captures({"c.safetensors"}, fs),
                       "[fp8a.capture.401] c.safetensors: tensor 'l.weight': dtype I32 is not "
                       "supported (BF16, F16, F32)",
                       Error);
}

TEST_CASE("402: empty tensors") {
  MemoryFileSystem fs;
  fs.add_file("c.safetensors",
              raw_file(R"({"l.weight":{"dtype":"BF16","shape":[0,16],"data_offsets":[0,0]}})"));
  CHECK_THROWS_WITH_AS(load_captures({"c.safetensors"}, fs),
                       "[fp8a.capture.402] c.safetensors: tensor 'l.weight': tensor is empty",
                       Error);
}

TEST_CASE("404: the same (step, layer, role) in two files") {
  MemoryFileSystem fs;
  fs.add_file("a.safetensors", one_weight("layers.0.fc1.weight", {{"step", "5"}}));
  fs.add_file("b.safetensors", one_weight("layers.0.fc1.weight", {{"step", "5"}}));
  CHECK_THROWS_WITH_AS(load_captures({"b.safetensors", "a.safetensors"}, fs),
                       "[fp8a.capture.404] step 5 tensor 'layers.0.fc1.weight' appears in both "
                       "a.safetensors and b.safetensors",
                       Error);
  // Same name at different steps is fine.
  MemoryFileSystem ok;
  ok.add_file("a.safetensors", one_weight("layers.0.fc1.weight", {{"step", "5"}}));
  ok.add_file("b.safetensors", one_weight("layers.0.fc1.weight", {{"step", "6"}}));
  CHECK(load_captures({"a.safetensors", "b.safetensors"}, ok).tensors.size() == 2);
}

TEST_CASE("tensors sort by step, natural layer order, then role") {
  MemoryFileSystem fs;
  // Step 20 file written first in path order, with names in scrambled order.
  fs.add_file("a_step_20.safetensors",
              build_file({{"layers.10.fc.weight", "BF16", {1}, {1.0f}},
                          {"layers.2.fc.gradient", "BF16", {1}, {2.0f}},
                          {"layers.2.fc.weight", "BF16", {1}, {3.0f}},
                          {"layers.2.fc.activation", "BF16", {1}, {4.0f}},
                          {"layers.1.fc.weight", "BF16", {1}, {5.0f}}}));
  fs.add_file("b_step_3.safetensors", build_file({{"layers.9.fc.gradient", "BF16", {1}, {6.0f}}}));
  const auto set = load_captures({"a_step_20.safetensors", "b_step_3.safetensors"}, fs);
  const std::vector<std::string> expected = {
      "layers.9.fc.gradient",    // step 3
      "layers.1.fc.weight",      // step 20 ...
      "layers.2.fc.activation",  // activation < weight < gradient
      "layers.2.fc.weight",
      "layers.2.fc.gradient",
      "layers.10.fc.weight",     // 10 after 2
  };
  std::vector<std::string> got;
  for (const auto& t : set.tensors) got.push_back(t.tensor_name);
  CHECK(got == expected);
  REQUIRE(set.tensors.size() == 6);
  CHECK(set.tensors[0].key.step == 3);
  CHECK(set.tensors[1].key.step == 20);
  // Each view reads its own tensor's bytes.
  CHECK(set.tensors[0].view.load_float(0) == 6.0f);
  CHECK(set.tensors[2].view.load_float(0) == 4.0f);
  CHECK(set.tensors[5].view.load_float(0) == 1.0f);
}

TEST_CASE("N-D tensors are seen as [product of leading dims, last dim]") {
  std::vector<float> twenty_four(24);
  for (int i = 0; i < 24; ++i) twenty_four[static_cast<std::size_t>(i)] = static_cast<float>(i);
  MemoryFileSystem fs;
  fs.add_file("c.safetensors", build_file({{"three.weight", "F32", {2, 3, 4}, twenty_four},
                                           {"one.weight", "F32", {5}, {1, 2, 3, 4, 5}},
                                           {"zero.weight", "F32", {}, {7.0f}}}));
  const auto set = load_captures({"c.safetensors"}, fs);
  REQUIRE(set.tensors.size() == 3);
  const auto& one = set.tensors[0].view;
  const auto& three = set.tensors[1].view;
  const auto& zero = set.tensors[2].view;
  REQUIRE(set.tensors[1].tensor_name == "three.weight");
  CHECK(three.shape == std::vector<std::int64_t>{2, 3, 4});
  CHECK(three.rows == 6);
  CHECK(three.cols == 4);
  CHECK(three.numel() == 24);
  CHECK(three.load_float(23) == 23.0f);
  REQUIRE(set.tensors[0].tensor_name == "one.weight");
  CHECK(one.rows == 1);
  CHECK(one.cols == 5);
  CHECK(one.load_float(4) == 5.0f);
  REQUIRE(set.tensors[2].tensor_name == "zero.weight");
  CHECK(zero.shape.empty());
  CHECK(zero.rows == 1);
  CHECK(zero.cols == 1);
  CHECK(zero.load_float(0) == 7.0f);
}

TEST_CASE("values read back exactly for BF16, F16 and F32") {
  // BF16-representable (at most 8 significant bits): 5/32, -2^-7, and the largest finite BF16.
  const std::vector<float> bf16_values = {1.0f, -2.5f, 0.15625f, -0.0078125f, 256.0f, kBf16Max};
  // Values with hand-written half patterns in the builder.
  const std::vector<float> f16_values = {1.5f, -2.0f, 0.5f, 65504.0f};
  const std::vector<float> f32_values = {0.1f, -123.456f, 1e-30f};
  MemoryFileSystem fs;
  fs.add_file("v.safetensors", build_file({{"b.activation", "BF16", {2, 3}, bf16_values},
                                           {"h.activation", "F16", {4}, f16_values},
                                           {"s.activation", "F32", {3}, f32_values}}));
  const auto set = load_captures({"v.safetensors"}, fs);
  REQUIRE(set.tensors.size() == 3);
  const auto check_values = [](const fp8a::TensorView& v, fp8a::DType dtype,
                               const std::vector<float>& expected) {
    CHECK(v.dtype == dtype);
    REQUIRE(v.numel() == static_cast<std::int64_t>(expected.size()));
    std::vector<float> bulk(expected.size());
    v.load_floats(0, v.numel(), bulk.data());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      CHECK(v.load_float(static_cast<std::int64_t>(i)) == expected[i]);
      CHECK(bulk[i] == expected[i]);
    }
  };
  check_values(set.tensors[0].view, fp8a::DType::kBF16, bf16_values);
  check_values(set.tensors[1].view, fp8a::DType::kF16, f16_values);
  check_values(set.tensors[2].view, fp8a::DType::kF32, f32_values);
  // The views point into the kept mapping.
  REQUIRE(set.mappings.size() == 1);
  const auto bytes = set.mappings[0]->bytes();
  for (const auto& t : set.tensors) {
    CHECK(t.view.data >= bytes.data());
    CHECK(t.view.data < bytes.data() + bytes.size());
  }
}

TEST_CASE("the test builder rounds BF16 to nearest even") {
  // 1 + 2^-8 is halfway between 1 (0x3F80) and 1 + 2^-7 (0x3F81): ties go to the even 0x3F80.
  CHECK(fp8a::test::bf16_rne(1.00390625f) == 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 0x3F81 and 0x3F82: even is 0x3F82.
  CHECK(fp8a::test::bf16_rne(1.01171875f) == 0x3F82);
  // One float above the tie rounds up.
  CHECK(fp8a::test::bf16_rne(std::nextafter(1.00390625f, 2.0f)) == 0x3F81);
  CHECK(fp8a::test::bf16_rne(-2.5f) == 0xC020);
  CHECK(fp8a::test::bf16_rne(kBf16Max) == 0x7F7F);
}

TEST_CASE("natural_less compares digit runs by value") {
  CHECK(natural_less("a2", "a10"));
  CHECK_FALSE(natural_less("a10", "a2"));
  CHECK_FALSE(natural_less("a10", "a9"));
  CHECK(natural_less("a9", "a10"));
  CHECK(natural_less("layers.1.x", "layers.1.y"));
  CHECK(natural_less("layers.2.fc", "layers.10.fc"));
  CHECK_FALSE(natural_less("layers.1.x", "layers.1.x"));
  CHECK_FALSE(natural_less("", ""));
  CHECK(natural_less("a", "a1"));
  CHECK_FALSE(natural_less("a1", "a"));
  // Numbers longer than 64 bits still compare by value.
  CHECK(natural_less("x99999999999999999999", "x100000000000000000000"));
  // Same value with leading zeros: neither is less.
  CHECK_FALSE(natural_less("x01", "x1"));
  CHECK_FALSE(natural_less("x1", "x01"));
}

TEST_CASE("CaptureKey order: step, natural layer, role; ties in value broken by plain order") {
  CHECK(CaptureKey{1, "layers.10", Role::kActivation} < CaptureKey{2, "layers.2", Role::kActivation});
  CHECK(CaptureKey{1, "layers.2", Role::kGradient} < CaptureKey{1, "layers.10", Role::kActivation});
  CHECK(CaptureKey{1, "l", Role::kActivation} < CaptureKey{1, "l", Role::kWeight});
  CHECK(CaptureKey{1, "l", Role::kWeight} < CaptureKey{1, "l", Role::kGradient});
  CHECK_FALSE(CaptureKey{1, "l", Role::kWeight} < CaptureKey{1, "l", Role::kWeight});
  // "x01" and "x1" are equal numerically; the plain string order ('0' < '1') decides.
  CHECK(CaptureKey{1, "x01", Role::kWeight} < CaptureKey{1, "x1", Role::kWeight});
  CHECK_FALSE(CaptureKey{1, "x1", Role::kWeight} < CaptureKey{1, "x01", Role::kWeight});
}

TEST_CASE("405: a step in the file name too large for 64 bits") {
  MemoryFileSystem fs;
  fs.add_file("c/step_99999999999999999999.safetensors", one_weight());
  CHECK_THROWS_WITH_AS(load_captures({"c/"}, fs),
                       "[fp8a.capture.405] c/step_99999999999999999999.safetensors: step "
                       "99999999999999999999 in the file name is out of range",
                       Error);
}

TEST_CASE("404 names the files in path order whatever the sort does with equal keys") {
  MemoryFileSystem fs;
  std::vector<std::string> paths;
  for (int i = 0; i < 40; ++i) {
    const std::string p = "d/f" + std::to_string(100 + i) + ".safetensors";
    fs.add_file(p, one_weight("layers.0.fc1.weight", {{"step", "1"}}));
    paths.push_back(p);
  }
  CHECK_THROWS_WITH_AS(load_captures({"d"}, fs),
                       "[fp8a.capture.404] step 1 tensor 'layers.0.fc1.weight' appears in both "
                       "d/f100.safetensors and d/f101.safetensors",
                       Error);
}

TEST_CASE(".npy in step_N/rank_R/: the step from the folder above the rank folder, the rank from it") {
  // Two tensor-parallel shards of step 100: before, each took its rank folder's number as its step.
  const std::vector<std::byte> npy = source_file("tests/golden/npy/f32_2d.npy");
  MemoryFileSystem fs;
  fs.add_file("c/step_000100/rank_0/layers.0.fc1.weight.npy", npy);
  fs.add_file("c/step_000100/rank1/layers.0.fc1.weight.npy", npy);
  fs.add_file("c/step_000200/layers.0.fc1.weight.npy", npy);
  const auto set = load_captures({"c"}, fs);
  REQUIRE(set.tensors.size() == 3);
  CHECK(set.tensors[0].key.step == 100);
  CHECK(set.tensors[0].rank == 0);
  CHECK(set.tensors[1].key.step == 100);
  CHECK(set.tensors[1].rank == 1);
  CHECK(set.tensors[2].key.step == 200);
  CHECK(set.tensors[2].rank == -1);
}

TEST_CASE("ranks: from __metadata__ or a rank_R folder; two ranks of a key are shards, one rank twice is an error") {
  MemoryFileSystem fs;
  fs.add_file("run/rank_0/step_5.safetensors", one_weight("layers.0.fc1.weight"));
  fs.add_file("run/rank_1/step_5.safetensors", one_weight("layers.0.fc1.weight"));
  fs.add_file("meta/a_step_5.safetensors", one_weight("layers.0.fc2.weight", {{"rank", "3"}}));
  const auto set = load_captures({"run", "meta"}, fs);
  REQUIRE(set.tensors.size() == 3);
  CHECK(set.tensors[0].key.layer == "layers.0.fc1");
  CHECK(set.tensors[0].rank == 0);
  CHECK(set.tensors[1].rank == 1);
  CHECK(set.tensors[2].rank == 3);

  MemoryFileSystem twice;
  twice.add_file("x/step_5.safetensors", one_weight("l.weight", {{"rank", "2"}}));
  twice.add_file("y/step_5.safetensors", one_weight("l.weight", {{"rank", "2"}}));
  CHECK_THROWS_WITH_AS(load_captures({"x", "y"}, twice),
                       "[fp8a.capture.404] step 5 tensor 'l.weight' appears in both "
                       "x/step_5.safetensors and y/step_5.safetensors (same rank 2)",
                       Error);
  MemoryFileSystem bad;
  bad.add_file("b/step_1.safetensors", one_weight("l.weight", {{"rank", "first"}}));
  CHECK_THROWS_WITH_AS(load_captures({"b"}, bad),
                       "[fp8a.capture.408] b/step_1.safetensors: __metadata__ rank 'first' is not a "
                       "non-negative integer",
                       Error);
}

// TE DumpTensors as every release since TE 2.15 writes it (transformer_engine/debug/features/
// dump_tensors.py TensorLogger.save_tensor): tensor_dumps/rank_<R>/iter_<NNNNNN>/<layer>_<tensor>.pt.
// The bytes are a real torch.save of such a dump (scripts/make_torch_fixtures.py); only the path
// differs from the fixture's, which has the pull request's earlier <layer>_<tensor>_iter_<N>.pt.
TEST_CASE("TE DumpTensors' released layout: the step from the iter_ folder, the rank from rank_R") {
  const std::vector<std::byte> pt =
      source_file("tests/golden/torch/tensor_dumps/rank_0/layers_0_fc1_activation_iter_000010.pt");
  MemoryFileSystem fs;
  fs.add_file("log/tensor_dumps/rank_1/iter_000100/model_decoder_layers_1_mlp_linear_fc1_activation.pt", pt);
  fs.add_file("log/tensor_dumps/rank_1/iter_000200/layers_0_fc1_weight.pt", pt);
  fs.add_file("log/tensor_dumps/rank_1/iter_000200/layers_0_fc1_output.pt", pt);  // not a GEMM operand: skipped
  const auto set = load_captures({"log"}, fs);
  REQUIRE(set.tensors.size() == 2);
  CHECK(set.tensors[0].key.step == 100);
  CHECK(set.tensors[0].key.layer == "model_decoder_layers_1_mlp_linear_fc1");
  CHECK(set.tensors[0].key.role == Role::kActivation);
  CHECK(set.tensors[0].rank == 1);
  CHECK(set.tensors[0].view.rows == 8);
  CHECK(set.tensors[0].view.cols == 16);
  CHECK(set.tensors[1].key.step == 200);
  CHECK(set.tensors[1].key.layer == "layers_0_fc1");
  CHECK(set.tensors[1].key.role == Role::kWeight);
}
