// The evaluation table's heap: how much memory evaluate_captures holds at its peak against the
// table it returns, on the model of bench_selection (bench/bench_model.hpp), evaluated as
// `fp8-advisor run` does by default (CPU backend, the default recipe list, --format e4m3,hybrid).
//
//   bench_table_memory [--layers 96] [--steps 4] [--tokens 256] [--hidden 256] [--ffn 1024]
//
// Every operator new and delete of the process is counted (bytes from malloc_usable_size): the
// live heap before the call (the in-memory capture), the most live during it, and what is live
// after it (the table). Prints the rows, sizeof(EvaluationRow), the table's bytes, the peak above
// the capture, and the peak over the table (2 would be the whole table held twice).
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "bench/bench_model.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/run.hpp"

namespace {

std::atomic<std::size_t> g_live{0}, g_peak{0};

void* counted(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  const std::size_t now = g_live.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  std::size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void uncounted(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(malloc_usable_size(p));
  std::free(p);
}

void* aligned(std::size_t n, std::align_val_t a) {
  const auto al = static_cast<std::size_t>(a);
  return std::aligned_alloc(al, (n + al - 1) / al * al);
}

}  // namespace

void* operator new(std::size_t n) { return counted(std::malloc(n == 0 ? 1 : n)); }
void* operator new[](std::size_t n) { return counted(std::malloc(n == 0 ? 1 : n)); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(aligned(n == 0 ? 1 : n, a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(aligned(n == 0 ? 1 : n, a)); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

int main(int argc, char** argv) {
  fp8a::bench::ModelShape shape;
  shape.steps = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (a == "--layers") shape.layers = static_cast<int>(v);
    else if (a == "--steps") shape.steps = static_cast<int>(v);
    else if (a == "--tokens") shape.tokens = v;
    else if (a == "--hidden") shape.hidden = v;
    else if (a == "--ffn") shape.ffn = v;
    else {
      std::fprintf(stderr, "usage: %s [--layers 96] [--steps 4] [--tokens 256] [--hidden 256] [--ffn 1024]\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0 || shape.layers < 4 || shape.layers % 4 != 0 || shape.steps < 1) {
    std::fprintf(stderr, "usage: %s [--layers 96 (a multiple of 4)] [--steps 4] ...\n", argv[0]);
    return 2;
  }
  const fp8a::bench::ModelPreset model = fp8a::bench::make_model_preset(shape);
  fp8a::MemoryFileSystem mfs;
  std::vector<std::string> paths;
  for (fp8a::SynthFile& f : fp8a::synthesize(model.preset, 1, model.preset.default_steps)) {
    if (!f.name.ends_with(".safetensors")) continue;
    std::vector<std::byte> bytes(f.contents.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(f.contents[i]);
    mfs.add_file("c/" + f.name, std::move(bytes));
    paths.push_back("c/" + f.name);
  }
  const fp8a::CaptureSet captures = fp8a::load_captures(paths, mfs);
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list(fp8a::default_recipe_list());
  config.formats = fp8a::parse_training_format_list("e4m3,hybrid");
  const fp8a::CpuBackend backend;
  const std::size_t before = g_live.load();
  g_peak.store(before);
  const std::vector<fp8a::EvaluationRow> rows = fp8a::evaluate_captures(captures, config, backend);
  const std::size_t table = g_live.load() - before, peak = g_peak.load() - before;
  const double mib = 1 << 20;
  std::printf("%d layers x %d steps, %zu tensors, recipes %s, formats e4m3,hybrid, CPU backend\n", shape.layers,
              shape.steps, captures.tensors.size(), fp8a::default_recipe_list().c_str());
  std::printf("rows %zu, sizeof(EvaluationRow) %zu B\n", rows.size(), sizeof(fp8a::EvaluationRow));
  std::printf("table (live after the call) %.1f MiB, peak during the call %.1f MiB, peak / table %.2f\n",
              static_cast<double>(table) / mib, static_cast<double>(peak) / mib,
              static_cast<double>(peak) / static_cast<double>(table));
  return 0;
}
