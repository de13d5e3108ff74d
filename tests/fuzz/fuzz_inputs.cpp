// Coverage-guided fuzzing of every reader of user input (libFuzzer; scripts/fuzz_inputs.sh builds
// and runs it with ASan and UBSan). The first byte of an input picks what the rest is read as: a
// safetensors file, a .npy array, a .npz archive, a torch.save file (dict of tensors, or a
// Transformer Engine DumpTensors dump), a CSV amax trace, an nvdlfw_inspect log, or a --recipes
// list. Each must load (and then every tensor lies inside the file and every element can be read)
// or throw an fp8a input error (a usage error for --recipes, whose canonical specs must read back
// to the same recipes); anything else (another exception, an internal error, a crash, a
// sanitizer report) is a finding. The same property as tests/datasets/test_mutations.cpp, which CI
// runs on random mutations and on every header byte of the fixtures changed to five values; the
// fuzzer searches for inputs that reach new code instead.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/training_log.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/npy.hpp"
#include "datasets/torch_zip.hpp"
#include "core/error.hpp"
#include "core/recipe.hpp"
#include "tests/support/in_file.hpp"

namespace {

enum class Reader {
  kCaptures,   // load_captures on the file (names, steps, ranks and the format's parser)
  kNpy,        // parse_npy alone (the capture's naming rules do not apply)
  kNpz,        // list_npz, then parse_npy on every member
  kTorchSave,  // read_torch_save alone
  kTrace,      // load_training_log (CSV or nvdlfw_inspect log, told apart by content)
  kRecipes,    // the --recipes list: parses, with every canonical spec reading back to itself,
               // or is a usage error
};

struct Target {
  const char* path;  // where the bytes sit in the in-memory file system (the name picks the format)
  Reader reader;
};

// Indexed by the input's first byte (modulo the count): scripts/fuzz_inputs.sh writes the seeds
// with the same indices.
constexpr Target kTargets[] = {
    {"cap/step_000007.safetensors", Reader::kCaptures},
    {"cap/step_000001/layers.0.fc1.activation.npy", Reader::kNpy},
    {"cap/step_000300.npz", Reader::kNpz},
    {"cap/step_000005.pt", Reader::kTorchSave},
    {"cap/tensor_dumps/rank_0/layers_0_fc1_activation_iter_000010.pt", Reader::kCaptures},
    {"trace.csv", Reader::kTrace},
    {"rank0.log", Reader::kTrace},
    {"cap/step_000001/layers.0.fc1.activation.npy", Reader::kCaptures},
    {"cap/step_000300.npz", Reader::kCaptures},
    {"cap/step_000005.pt", Reader::kCaptures},
    {"--recipes", Reader::kRecipes},
};
constexpr std::size_t kTargetCount = sizeof kTargets / sizeof kTargets[0];

[[noreturn]] void finding(const Target& t, const char* what, const char* message) {
  std::fprintf(stderr, "fuzz_inputs: %s: %s: %s\n", t.path, what, message);
  std::abort();
}

// Reads every byte a parser says is data, after checking that they lie in the file: a tensor
// reaching past its storage into the next zip member stays inside the file and is seen by neither
// check, but one past the file's end is a finding with any compiler (ASan alone would see it too).
unsigned touch(const Target& t, std::span<const std::byte> file, const std::byte* p, std::uint64_t n) {
  if (!fp8a::testing::in_file(file, p, n)) finding(t, "data outside the file", "a tensor's bytes reach past the file");
  unsigned sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) sum += static_cast<unsigned>(p[i]);
  return sum;
}

// The bytes of a tensor of this shape and type (a finding if that overflows: the parser must
// have refused it).
std::uint64_t tensor_bytes(const Target& t, const std::vector<std::int64_t>& shape, fp8a::DType dtype) {
  std::uint64_t n = fp8a::dtype_size(dtype);
  for (auto d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n))
      finding(t, "bad shape", "a loaded tensor's shape is negative or its size overflows");
  return n;
}

unsigned read_file(const Target& t, std::span<const std::byte> bytes, const fp8a::FileSystem& fs) {
  unsigned sum = 0;
  switch (t.reader) {
    case Reader::kCaptures: {
      fp8a::CaptureOptions options;
      options.npy_dtype = fp8a::NpyRawDType::kBf16;  // the BF16 .npy fixtures (2-byte void / uint16)
      const auto set = fp8a::load_captures({"cap"}, fs, options);
      for (const auto& tensor : set.tensors) {
        sum += touch(t, bytes, tensor.view.data, tensor_bytes(t, tensor.view.shape, tensor.view.dtype));
        std::vector<float> v(static_cast<std::size_t>(tensor.view.numel()));
        if (!v.empty()) tensor.view.load_floats(0, tensor.view.numel(), v.data());
        for (float f : v) sum += f == f ? 1u : 0u;
      }
      break;
    }
    case Reader::kNpy: {
      const auto a = fp8a::parse_npy(bytes, t.path, fp8a::NpyRawDType::kBf16);
      sum += touch(t, bytes, a.data, a.data_bytes);
      break;
    }
    case Reader::kNpz:
      for (const auto& [name, member] : fp8a::list_npz(bytes, t.path)) {
        const auto a = fp8a::parse_npy(member, name, fp8a::NpyRawDType::kBf16);
        sum += touch(t, bytes, a.data, a.data_bytes);
      }
      break;
    case Reader::kTorchSave:
      for (const auto& tensor : fp8a::read_torch_save(bytes, t.path, nullptr))
        sum += touch(t, bytes, tensor.data, tensor_bytes(t, tensor.shape, tensor.dtype));
      break;
    case Reader::kTrace:
      sum += static_cast<unsigned>(fp8a::load_training_log({t.path}, fs).series.size());
      break;
    case Reader::kRecipes: {
      const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      for (const auto& r : fp8a::parse_recipe_list(text)) {
        const std::string spec = r.spec();
        fp8a::Recipe again;
        try {
          again = fp8a::parse_recipe(spec);
        } catch (const fp8a::Error& e) {
          finding(t, "a canonical spec does not parse", (spec + ": " + e.what()).c_str());
        }
        if (!(again == r)) finding(t, "a canonical spec reads back as another recipe", spec.c_str());
        sum += static_cast<unsigned>(spec.size());
      }
      break;
    }
  }
  return sum;
}

}  // namespace

// Inputs that loaded (the rest were refused with an input error): replay_main.cpp reports it.
std::size_t fp8a_fuzz_inputs_loaded = 0;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const Target& t = kTargets[data[0] % kTargetCount];
  const auto* begin = reinterpret_cast<const std::byte*>(data + 1);
  fp8a::MemoryFileSystem mem;
  mem.add_file(t.path, std::vector<std::byte>(begin, begin + (size - 1)));
  const auto mapped = mem.map(t.path);
  try {
    static volatile unsigned sink = 0;
    sink = sink + read_file(t, mapped->bytes(), mem);
    ++fp8a_fuzz_inputs_loaded;
  } catch (const fp8a::Error& e) {
    const auto expected = t.reader == Reader::kRecipes ? fp8a::ErrorKind::kUsage : fp8a::ErrorKind::kInput;
    if (e.kind() != expected) finding(t, "not the expected kind of error", e.what());
  } catch (const std::exception& e) {
    finding(t, "not an fp8a error", e.what());
  }
  return 0;
}
