// Read-only file access behind a small interface (like ninja's DiskInterface), so readers can be
// tested on in-memory files. The real implementation memory-maps files: payloads are never copied.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a {

// The bytes of one file, valid while the object lives. As a TensorStorage, release() drops the
// pages of a byte range from the process (madvise MADV_DONTNEED on a disk mapping: the next read
// maps them again from the file); a no-op for in-memory files.
class MappedFile : public TensorStorage {
 public:
  virtual std::span<const std::byte> bytes() const = 0;
  // What tells this version of the file from another, taken when it was mapped: the size and
  // modification time of a file on disk, the size and a hash of the contents in memory. A
  // checkpoint keys its results by it (with the path).
  virtual std::string identity() const = 0;
  // Throws input error fp8a.io.110 when the file is no longer the version that was mapped: its
  // size or modification time changed since (a training job rewriting it in place, a network
  // file system), so bytes already read may not be the file's. A path that now names another
  // file (replaced by a rename) or none is no change: the mapping keeps the old file whole.
  // No-op for in-memory files.
  virtual void check_unchanged() const {}
  // As TensorStorage::release; on a disk file then check_unchanged() (a pass over a tensor ends
  // with it), at most every 20 ms per file.
  void release(const std::byte*, std::size_t) const override {}
};

class FileSystem {
 public:
  enum class Kind { kMissing, kFile, kDirectory, kOther };
  virtual ~FileSystem() = default;
  virtual Kind kind(const std::string& path) const = 0;
  // Regular files below dir, recursively, sorted by path; symlinked folders followed, each folder
  // entered once (a link loop ends).
  virtual std::vector<std::string> list_files_recursive(const std::string& dir) const = 0;
  // Throws input error fp8a.io.102 when the file cannot be opened or mapped.
  virtual std::shared_ptr<const MappedFile> map(const std::string& path) const = 0;
};

// The one-line error (without "fp8-advisor: error: " and the newline) for a bus error at addr
// when addr lies in a file DiskFileSystem mapped: reading a page past the end of a file that
// shrank since. "[fp8a.io.110] <path>: changed while the run read it (was size S, mtime T; now
// ...)". Written to buf, NUL-terminated, cut to size - 1 bytes; returns its length, 0 when addr is
// in no such file. Async-signal-safe (a SIGBUS handler calls it: cli/mapped_fault.hpp).
std::size_t describe_mapped_file_fault(const void* addr, char* buf, std::size_t size) noexcept;

// The real disk, through POSIX open/mmap.
class DiskFileSystem final : public FileSystem {
 public:
  Kind kind(const std::string& path) const override;
  std::vector<std::string> list_files_recursive(const std::string& dir) const override;
  std::shared_ptr<const MappedFile> map(const std::string& path) const override;
};

// In-memory files for tests; directories are implied by path prefixes ("a/b.st" makes "a").
class MemoryFileSystem final : public FileSystem {
 public:
  void add_file(const std::string& path, std::vector<std::byte> contents);
  Kind kind(const std::string& path) const override;
  std::vector<std::string> list_files_recursive(const std::string& dir) const override;
  std::shared_ptr<const MappedFile> map(const std::string& path) const override;

 private:
  std::map<std::string, std::shared_ptr<const std::vector<std::byte>>> files_;
};

}  // namespace fp8a
