// A bus error in a mapped capture (a page past the end of a file that shrank while the run read
// it: a training job rewriting it in place, a network file system) ends the process with the
// input error fp8a.io.110 naming the file, exit 3, instead of a signal with no message.
//
// Why a message and _exit, not an exception: the fault can come in any thread (TBB workers,
// Eigen kernels, a CUDA copy) in the middle of any read, where unwinding is impossible. Nothing is
// lost that a SIGKILL would keep: the checkpoint holds every finished unit (written whole, never
// in part), the outputs are written only at the end, and the --out lock of a dead process is
// taken over by the next run. A change that faults no page (a file rewritten in place at the same
// size, or grown) is found at the end of each tensor's pass and before the outputs are written
// (MappedFile::check_unchanged), and thrown as the same error.
#pragma once

namespace fp8a::cli {

// Installs the SIGBUS handler for the process (idempotent). A fault outside every mapped capture,
// or a SIGBUS sent by kill, gets the default action (the process dies of SIGBUS).
void install_mapped_fault_handler();

}  // namespace fp8a::cli
