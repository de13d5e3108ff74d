// Kernel launches of the host emulation (include/cuda_runtime.h): each block's threads run as
// fibers on the calling host thread, one block after another, switching only where CUDA threads
// wait for each other (__syncthreads, warp operations). A fiber runs until it waits; a warp
// operation completes when the last live lane of the warp joins it, a block barrier when the last
// live thread of the block arrives (that one goes on without a switch, the others are queued).
// When no fiber can run and some still wait, or the waits break CUDA's rules, it is what would
// hang or be undefined on a GPU: the launch fails with a message saying who waits where.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/cuda_emu/runtime_internal.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace fp8a_emu {

namespace {

constexpr std::size_t kStackBytes = std::size_t{256} << 10;
constexpr std::size_t kGuardBytes = 4096;  // PROT_NONE below each stack: an overflow faults
constexpr int kWarp = 32;

enum class State { kRunnable, kBlockBarrier, kWarpOp, kDone };

struct Fiber {
  ThreadState ts{};
  int index = 0;
  State state = State::kRunnable;
  const char* barrier_file = nullptr;  // the __syncthreads() it waits at
  int barrier_line = 0;
  WarpOp op = WarpOp::kShflXor;
  unsigned mask = 0;
  int param = 0;
  std::uint64_t value = 0;
  std::uint64_t result = 0;
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t context{};
#endif
  void* stack = nullptr;
};

// One host thread's emulator: at most one launch at a time (launches are synchronous).
struct Emulator {
  Emulator() = default;
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;
  ~Emulator();
  std::vector<void*> stacks;  // reused across launches (grown on demand, unmapped with the thread)
  std::vector<Fiber> fibers;  // the block being run
  Fiber* running = nullptr;
  const std::function<void()>* kernel = nullptr;
  std::vector<int> ready;     // fibers to run, in order, from ready_head on
  std::size_t ready_head = 0;
  int live = 0;               // the block's fibers that have not exited
  int at_barrier = 0;         // ... waiting at __syncthreads()
  std::vector<int> warp_live, warp_waiting;
  std::string failure;        // the first broken rule or escaped exception: ends the launch
  long long waits = 0;        // barriers and warp operations of this launch (for Stats)
#if defined(__x86_64__)
  void* scheduler_sp = nullptr;
#else
  ucontext_t scheduler{};
#endif
#if defined(__SANITIZE_ADDRESS__)
  const void* scheduler_stack_bottom = nullptr;
  std::size_t scheduler_stack_size = 0;
#endif
};

thread_local Emulator tl_emulator;

// FP8A_CUDA_EMULATION_STATS=1 prints, at exit, what the launches cost the emulator.
struct Stats {
  std::atomic<long long> launches{0}, blocks{0}, threads{0}, waits{0};
  ~Stats() {
    if (const char* v = std::getenv("FP8A_CUDA_EMULATION_STATS"); v != nullptr && *v == '1')
      std::fprintf(stderr, "fp8a CUDA emulation: %lld launches, %lld blocks, %lld threads, %lld waits\n",
                   launches.load(), blocks.load(), threads.load(), waits.load());
  }
};
Stats g_stats;
const ThreadState kHostThread{};

Emulator::~Emulator() {
  for (void* s : stacks) munmap(static_cast<char*>(s) - kGuardBytes, kStackBytes + kGuardBytes);
}

void* new_stack() {
  void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("emulated launch: cannot map a fiber stack");
  if (mprotect(p, kGuardBytes, PROT_NONE) != 0) throw std::runtime_error("emulated launch: cannot guard a fiber stack");
  return static_cast<char*>(p) + kGuardBytes;
}

}  // namespace
}  // namespace fp8a_emu

#if defined(__x86_64__)
// fp8a_emu_switch(&save_sp, load_sp): saves the callee-saved registers on the current stack and
// the stack pointer in *save_sp, then continues the context whose stack pointer is load_sp.
extern "C" void fp8a_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .p2align 4
  .globl fp8a_emu_switch
  .hidden fp8a_emu_switch
  .type fp8a_emu_switch, @function
fp8a_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size fp8a_emu_switch, .-fp8a_emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace fp8a_emu {

namespace {

// Scheduler -> fiber and back. ASan is told about every stack switch.
void enter(Emulator& e, Fiber& f) {
  e.running = &f;
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
#endif
#if defined(__x86_64__)
  fp8a_emu_switch(&e.scheduler_sp, f.sp);
#else
  swapcontext(&e.scheduler, &f.context);
#endif
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  e.running = nullptr;
}

void leave(Emulator& e, Fiber& f, bool done) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(done ? nullptr : &fake, e.scheduler_stack_bottom, e.scheduler_stack_size);
#endif
#if defined(__x86_64__)
  fp8a_emu_switch(&f.sp, e.scheduler_sp);
#else
  swapcontext(&f.context, &e.scheduler);
#endif
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake, &e.scheduler_stack_bottom, &e.scheduler_stack_size);
#endif
  static_cast<void>(done);
}

void fail_launch(Emulator& e, const std::string& why) {
  if (e.failure.empty()) e.failure = why;
}

void make_ready(Emulator& e, Fiber& f) {
  f.state = State::kRunnable;
  e.ready.push_back(f.index);
}

// The last live lane of warp w has joined its operation: every lane gets its result.
void resolve_warp(Emulator& e, int w) {
  Fiber* lanes = e.fibers.data() + static_cast<std::ptrdiff_t>(w) * kWarp;
  const int width = std::min<int>(kWarp, static_cast<int>(e.fibers.size()) - w * kWarp);
  if (width != kWarp || e.warp_live[w] != kWarp) {
    fail_launch(e, "warp " + std::to_string(w) + ": a full-mask warp operation with " +
                       std::to_string(e.warp_live[w]) + " of 32 lanes live");
    return;
  }
  for (int l = 0; l < kWarp; ++l) {
    if (lanes[l].mask != 0xFFFFFFFFu || lanes[l].op != lanes[0].op) {
      fail_launch(e, "warp " + std::to_string(w) + ": lanes join different warp operations or masks");
      return;
    }
  }
  for (int l = 0; l < kWarp; ++l) {
    const Fiber& f = lanes[l];
    switch (f.op) {
      case WarpOp::kShflXor:
        lanes[l].result = lanes[(l ^ f.param) & (kWarp - 1)].value;
        break;
      case WarpOp::kShflDown:
        lanes[l].result = l + f.param < kWarp ? lanes[l + f.param].value : f.value;
        break;
      case WarpOp::kReduceMaxU32: {
        std::uint64_t m = 0;
        for (int k = 0; k < kWarp; ++k) m = std::max(m, lanes[k].value & 0xFFFFFFFFu);
        lanes[l].result = m;
        break;
      }
    }
  }
  e.warp_waiting[w] = 0;
  for (int l = 0; l < kWarp; ++l)
    if (e.running != &lanes[l]) make_ready(e, lanes[l]);
}

// Every live thread waits at __syncthreads(): all go on.
void release_block(Emulator& e) {
  const Fiber* first = nullptr;
  for (const Fiber& f : e.fibers) {
    if (f.state != State::kBlockBarrier) continue;
    if (first == nullptr) {
      first = &f;
    } else if (f.barrier_line != first->barrier_line || std::strcmp(f.barrier_file, first->barrier_file) != 0) {
      fail_launch(e, "threads wait at different __syncthreads() calls: " + std::string(first->barrier_file) + ":" +
                         std::to_string(first->barrier_line) + " (thread " + std::to_string(first->index) + ") and " +
                         f.barrier_file + ":" + std::to_string(f.barrier_line) + " (thread " + std::to_string(f.index) + ")");
      return;
    }
  }
  e.at_barrier = 0;
  for (Fiber& f : e.fibers)
    if (f.state == State::kBlockBarrier && e.running != &f) make_ready(e, f);
}

// Where every fiber starts: runs the kernel as its CUDA thread, then never runs again.
[[noreturn]] void fiber_main() {
  Emulator& e = tl_emulator;
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &e.scheduler_stack_bottom, &e.scheduler_stack_size);
#endif
  Fiber& f = *e.running;
  try {
    (*e.kernel)();
  } catch (const std::exception& ex) {
    fail_launch(e, "thread " + std::to_string(f.index) + ": " + ex.what());
  } catch (...) {
    fail_launch(e, "thread " + std::to_string(f.index) + ": unknown exception");
  }
  f.state = State::kDone;
  --e.live;
  const int w = f.index / kWarp;
  --e.warp_live[w];
  // Exited threads no longer hold up a barrier; a warp operation they were needed for fails.
  if (e.warp_waiting[w] > 0 && e.warp_waiting[w] == e.warp_live[w]) resolve_warp(e, w);
  if (e.at_barrier > 0 && e.at_barrier == e.live) release_block(e);
  leave(e, f, true);
  __builtin_trap();  // a finished fiber is never entered again
}

#if !defined(__x86_64__)
void fiber_main_context() { fiber_main(); }
#endif

void start(Emulator& e, Fiber& f) {
#if defined(__SANITIZE_ADDRESS__)
  // A reused stack still carries the poisoned redzones of frames that never returned (fiber_main
  // and the switch out of it, or a fiber dropped after a failed launch): clear them all.
  __asan_unpoison_memory_region(f.stack, kStackBytes);
#endif
#if defined(__x86_64__)
  // Stack tops staggered by fiber: equal offsets modulo the page size would put every fiber's
  // top frames into the same few cache sets (measured 2x slower switches).
  const std::size_t stagger = static_cast<std::size_t>(f.index % 128) * 144;
  auto* sp = reinterpret_cast<std::uintptr_t*>(static_cast<char*>(f.stack) + kStackBytes - stagger);
  *--sp = 0;                                               // fiber_main's return address: none
  *--sp = reinterpret_cast<std::uintptr_t>(&fiber_main);  // what fp8a_emu_switch returns into
  for (int r = 0; r < 6; ++r) *--sp = 0;                   // rbp rbx r12-r15
  f.sp = sp;
  static_cast<void>(e);
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack;
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = &e.scheduler;
  makecontext(&f.context, fiber_main_context, 0);
#endif
}

std::string describe_wait(const Emulator& e) {
  int barrier = 0, warp = 0, done = 0;
  for (const Fiber& f : e.fibers) {
    barrier += f.state == State::kBlockBarrier;
    warp += f.state == State::kWarpOp;
    done += f.state == State::kDone;
  }
  return "deadlock: " + std::to_string(barrier) + " threads wait at __syncthreads(), " + std::to_string(warp) +
         " at a warp operation, " + std::to_string(done) + " exited";
}

Fiber& running_fiber(const char* what) {
  Fiber* f = tl_emulator.running;
  if (f == nullptr) {
    std::fprintf(stderr, "fp8a_emu: %s called outside a kernel\n", what);
    std::abort();
  }
  return *f;
}

// Runs one block to its end (or its first failure).
void run_block(Emulator& e, int block, int blocks, int threads) {
  const int warps = (threads + kWarp - 1) / kWarp;
  e.fibers.assign(static_cast<std::size_t>(threads), Fiber{});
  e.warp_live.assign(static_cast<std::size_t>(warps), 0);
  e.warp_waiting.assign(static_cast<std::size_t>(warps), 0);
  e.ready.clear();
  e.ready_head = 0;
  e.live = threads;
  e.at_barrier = 0;
  for (int t = 0; t < threads; ++t) {
    Fiber& f = e.fibers[t];
    f.index = t;
    f.ts.thread_idx = {static_cast<unsigned>(t), 0, 0};
    f.ts.block_idx = {static_cast<unsigned>(block), 0, 0};
    f.ts.block_dim = {static_cast<unsigned>(threads), 1, 1};
    f.ts.grid_dim = {static_cast<unsigned>(blocks), 1, 1};
    f.stack = e.stacks[t];
    ++e.warp_live[t / kWarp];
    start(e, f);
    e.ready.push_back(t);
  }
  while (e.failure.empty() && e.ready_head < e.ready.size()) {
    enter(e, e.fibers[e.ready[e.ready_head++]]);
    if (e.ready_head == e.ready.size()) {
      e.ready.clear();
      e.ready_head = 0;
    }
  }
  if (e.failure.empty() && e.live > 0) fail_launch(e, describe_wait(e));
  if (!e.failure.empty()) e.failure = "block " + std::to_string(block) + ": " + e.failure;
}

}  // namespace

const ThreadState& current() {
  const Fiber* f = tl_emulator.running;
  return f != nullptr ? f->ts : kHostThread;
}

void sync_block(const char* file, int line) {
  Emulator& e = tl_emulator;
  Fiber& f = running_fiber("__syncthreads");
  f.state = State::kBlockBarrier;
  f.barrier_file = file;
  f.barrier_line = line;
  ++e.waits;
  if (++e.at_barrier == e.live) {
    release_block(e);
    if (e.failure.empty()) {
      f.state = State::kRunnable;  // the last one to arrive goes on without a switch
      return;
    }
  }
  leave(e, f, false);
}

std::uint64_t warp_exchange(unsigned mask, WarpOp op, int param, std::uint64_t value) {
  Emulator& e = tl_emulator;
  Fiber& f = running_fiber("a warp operation");
  f.state = State::kWarpOp;
  ++e.waits;
  f.op = op;
  f.mask = mask;
  f.param = param;
  f.value = value;
  const int w = f.index / kWarp;
  if (++e.warp_waiting[w] == e.warp_live[w]) {
    resolve_warp(e, w);
    if (e.failure.empty()) {
      f.state = State::kRunnable;
      return f.result;
    }
  }
  leave(e, f, false);
  return f.result;
}

namespace {

// Runs a launch that passed its checks: the blocks one after another on this host thread.
cudaError_t run_kernel(int blocks, int threads, const std::function<void()>& kernel) {
  Emulator& e = tl_emulator;
  if (e.kernel != nullptr) {
    report_failure("a kernel launched from inside a kernel");
    return cudaErrorLaunchFailure;
  }
  while (e.stacks.size() < static_cast<std::size_t>(threads)) e.stacks.push_back(new_stack());
  e.kernel = &kernel;
  tl_load_begin = tl_load_end = 0;  // allocations may have changed since the last launch
  e.failure.clear();
  e.waits = 0;
  g_stats.launches.fetch_add(1, std::memory_order_relaxed);
  g_stats.blocks.fetch_add(blocks, std::memory_order_relaxed);
  g_stats.threads.fetch_add(static_cast<long long>(blocks) * threads, std::memory_order_relaxed);
  for (int b = 0; b < blocks && e.failure.empty(); ++b) run_block(e, b, blocks, threads);
  g_stats.waits.fetch_add(e.waits, std::memory_order_relaxed);
  e.kernel = nullptr;
  e.fibers.clear();  // fibers left waiting after a failure are dropped with their stacks' contents
  if (!e.failure.empty()) {
    report_failure(e.failure);
    return cudaErrorLaunchFailure;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launch(int blocks, int threads, cudaStream_t stream, std::initializer_list<ArgCheck> args,
                   const std::function<void()>& kernel) {
  // What CUDA refuses at the launch itself.
  if (blocks < 1 || threads < 1 || threads > 1024) {
    set_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  std::vector<const void*> pointers;
  for (const ArgCheck& a : args) {
    if (a.is_pointer && a.pointer != nullptr && !is_device_pointer(a.pointer)) {
      report_failure("a kernel argument is not device memory");
      set_error(cudaErrorInvalidDevicePointer);
      return cudaErrorInvalidDevicePointer;
    }
    if (a.is_pointer && a.pointer != nullptr) pointers.push_back(a.pointer);
  }
  // The kernel runs when its stream gets there (at once on the default stream); by then its
  // memory must still be allocated.
  static_cast<void>(enqueue(stream, [blocks, threads, kernel, pointers] {
    for (const void* p : pointers)
      if (!is_device_pointer(p)) {
        report_failure("a kernel ran after memory it was given was freed");
        return cudaErrorLaunchFailure;
      }
    return run_kernel(blocks, threads, kernel);
  }));
  return cudaSuccess;
}

}  // namespace fp8a_emu
