// Runs fuzz_inputs.cpp's check on files, without libFuzzer (any compiler): to reproduce a finding
// of scripts/fuzz_inputs.sh, or to check inputs in CI.
//
//   fuzz_inputs_replay FILE...                 each file a whole fuzz input (first byte = reader)
//   fuzz_inputs_replay --target N FILE...      each file's bytes read by reader N (kTargets)
//
// Prints how many inputs loaded; with --expect-loaded M, exits 1 unless exactly M did. A finding
// aborts, as under the fuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern std::size_t fp8a_fuzz_inputs_loaded;

int main(int argc, char** argv) {
  int target = -1;
  long expect_loaded = -1;
  std::size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--target" || arg == "--expect-loaded") && i + 1 < argc) {
      const long v = std::strtol(argv[++i], nullptr, 10);
      if (arg == "--target") target = static_cast<int>(v);
      else expect_loaded = v;
      continue;
    }
    std::ifstream in(arg, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_inputs_replay: cannot read %s\n", arg.c_str());
      return 2;
    }
    std::vector<std::uint8_t> bytes;
    if (target >= 0) bytes.push_back(static_cast<std::uint8_t>(target));
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++inputs;
  }
  std::printf("%zu inputs, %zu loaded, the others refused with the expected error\n", inputs,
              fp8a_fuzz_inputs_loaded);
  if (expect_loaded >= 0 && fp8a_fuzz_inputs_loaded != static_cast<std::size_t>(expect_loaded)) {
    std::fprintf(stderr, "fuzz_inputs_replay: expected %ld to load\n", expect_loaded);
    return 1;
  }
  return 0;
}
