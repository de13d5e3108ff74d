#include "datasets/file_system.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/error.hpp"
#include "core/fnv1a.hpp"

namespace fp8a {

namespace {

constexpr InputId kChangedWhileRead = "fp8a.io.110";

// What a file on disk is, from stat: which file (device, inode) and which version (size, mtime).
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_s = 0;
  std::int64_t mtime_ns = 0;
};

FileVersion version_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, static_cast<std::uint64_t>(st.st_size), st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

// Text built into a fixed buffer with no allocation, for a signal handler.
class FixedText {
 public:
  FixedText(char* buf, std::size_t size) : buf_(buf), cap_(size == 0 ? 0 : size - 1) {}
  FixedText& operator<<(std::string_view s) {
    for (char c : s)
      if (len_ < cap_) buf_[len_++] = c;
    return *this;
  }
  FixedText& operator<<(std::uint64_t v) {
    char digits[24];
    std::size_t n = 0;
    do digits[n++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0) *this << std::string_view(&digits[--n], 1);
    return *this;
  }
  FixedText& operator<<(std::int64_t v) {
    if (v < 0) return *this << std::string_view("-") << static_cast<std::uint64_t>(-(v + 1)) + 1;
    return *this << static_cast<std::uint64_t>(v);
  }
  // "size S, mtime T.N": MappedFile::identity()'s form.
  FixedText& operator<<(const FileVersion& v) {
    return *this << std::string_view("size ") << v.size << std::string_view(", mtime ") << v.mtime_s
                 << std::string_view(".") << v.mtime_ns;
  }
  std::size_t finish() {
    if (cap_ > 0 || len_ == 0) buf_[len_] = '\0';
    return len_;
  }

 private:
  char* buf_;
  std::size_t cap_;
  std::size_t len_ = 0;
};

class MmapFile;

// The files mapped now, for a SIGBUS handler to name the one a fault is in. Guarded by a spin
// flag: the handler runs on the thread that touched a mapped page, which never holds the flag
// (no mapped byte is read under it), so it waits at most for another thread's insert or erase.
struct MappedRange {
  std::uintptr_t begin, end;
  const MmapFile* file;
};
std::atomic_flag g_ranges_busy = ATOMIC_FLAG_INIT;
std::vector<MappedRange>* g_ranges = new std::vector<MappedRange>();  // never freed: a handler may run at exit

class RangesLock {
 public:
  RangesLock() noexcept {
    while (g_ranges_busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~RangesLock() { g_ranges_busy.clear(std::memory_order_release); }
  RangesLock(const RangesLock&) = delete;
  RangesLock& operator=(const RangesLock&) = delete;
};

class MmapFile final : public MappedFile {
 public:
  MmapFile(void* addr, std::size_t size, std::string path, const FileVersion& version)
      : addr_(addr), size_(size), path_(std::move(path)), version_(version) {
    if (addr_ == nullptr) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(addr_);
    const RangesLock lock;
    g_ranges->push_back({begin, begin + size_, this});
  }
  ~MmapFile() override {
    if (addr_ == nullptr) return;
    {
      const RangesLock lock;
      std::erase_if(*g_ranges, [&](const MappedRange& r) { return r.file == this; });
    }
    ::munmap(addr_, size_);
  }
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;
  std::span<const std::byte> bytes() const override {
    return {static_cast<const std::byte*>(addr_), size_};
  }
  std::string identity() const override {
    return "size " + std::to_string(version_.size) + ", mtime " + std::to_string(version_.mtime_s) + "." +
           std::to_string(version_.mtime_ns);
  }
  void check_unchanged() const override {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return;  // gone: the mapping keeps the file
    const FileVersion now = version_of(st);
    if (now.device != version_.device || now.inode != version_.inode) return;  // replaced
    if (now.size == version_.size && now.mtime_s == version_.mtime_s && now.mtime_ns == version_.mtime_ns) return;
    char buf[256];
    throw input_error(kChangedWhileRead, path_ + ": " + std::string(describe_change(&st, buf, sizeof buf)));
  }
  // Whole pages, widened to the pages the range touches: the mapping is read-only, so a page
  // shared with a neighbouring tensor is only faulted in again from the file when read.
  void release(const std::byte* data, std::size_t size) const override {
    const auto* base = static_cast<const std::byte*>(addr_);
    if (size == 0 || data < base || data + size > base + size_) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(data) & ~(page - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(data) + size + page - 1) & ~(page - 1);
    // Advice only: a failure leaves the pages resident, nothing else.
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    // At most every kCheckEvery per file: a stat per tensor of a header of 100k one-element
    // tensors is a tenth of `inspect`'s time. The check before the outputs is never skipped.
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch()).count();
    std::int64_t last = last_check_ns_.load(std::memory_order_relaxed);
    if ((last == 0 || now - last >= kCheckEvery.count()) &&
        last_check_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed))
      check_unchanged();
  }

  // "changed while the run read it (was ...; now ...)" after the path, into buf; now: the file's
  // stat, null when it cannot be read. Async-signal-safe.
  std::string_view describe_change(const struct stat* now, char* buf, std::size_t size) const noexcept {
    FixedText t(buf, size);
    t << std::string_view("changed while the run read it (was ") << version_ << std::string_view("; now ");
    if (now == nullptr) t << std::string_view("it cannot be read");
    else t << version_of(*now);
    t << std::string_view("): rerun once nothing writes to it");
    const std::size_t n = t.finish();
    return {buf, n};
  }
  const std::string& path() const { return path_; }

 private:
  void* addr_;
  std::size_t size_;
  static constexpr std::chrono::nanoseconds kCheckEvery = std::chrono::milliseconds(20);
  std::string path_;
  FileVersion version_;
  mutable std::atomic<std::int64_t> last_check_ns_{0};  // steady clock; 0: never
};

class VectorFile final : public MappedFile {
 public:
  explicit VectorFile(std::shared_ptr<const std::vector<std::byte>> data) : data_(std::move(data)) {}
  std::span<const std::byte> bytes() const override { return {data_->data(), data_->size()}; }
  std::string identity() const override {
    const auto b = bytes();
    return "size " + std::to_string(data_->size()) + ", fnv1a " +
           fnv1a_hex(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
  }

 private:
  std::shared_ptr<const std::vector<std::byte>> data_;
};

[[noreturn]] void open_failed(const std::string& path, int err) {
  throw input_error("fp8a.io.102", path + ": cannot read: " + std::strerror(err));
}

}  // namespace

FileSystem::Kind DiskFileSystem::kind(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Kind::kMissing;
  if (S_ISREG(st.st_mode)) return Kind::kFile;
  if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
  return Kind::kOther;
}

std::vector<std::string> DiskFileSystem::list_files_recursive(const std::string& dir) const {
  namespace fs = std::filesystem;
  // Symlinked folders are followed (a capture assembled from links reads as its files do), each
  // folder entered once, by device and inode, in name order (so the path a folder is read by
  // does not depend on the directory's order): a link loop or a second link adds nothing.
  std::vector<std::string> out;
  std::set<std::pair<dev_t, ino_t>> entered;
  const auto walk = [&](const auto& self, const fs::path& folder) -> void {
    struct stat st {};
    if (::stat(folder.c_str(), &st) != 0 || !entered.emplace(st.st_dev, st.st_ino).second) return;
    std::error_code ec;
    fs::directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
    if (ec) open_failed(folder.string(), ec.value());  // permission denied is skipped, not an error
    std::vector<fs::path> entries;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) open_failed(folder.string(), ec.value());
      entries.push_back(it->path());
    }
    std::sort(entries.begin(), entries.end());
    for (const fs::path& e : entries) {
      if (fs::is_directory(e, ec)) self(self, e);
      else if (fs::is_regular_file(e, ec)) out.push_back(e.string());
    }
  };
  walk(walk, fs::path(dir));
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t describe_mapped_file_fault(const void* addr, char* buf, std::size_t size) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(addr);
  const RangesLock lock;
  for (const MappedRange& r : *g_ranges) {
    if (at < r.begin || at >= r.end) continue;
    struct stat st {};
    const bool readable = ::stat(r.file->path().c_str(), &st) == 0;  // async-signal-safe (POSIX)
    char change[256];
    FixedText t(buf, size);
    t << std::string_view("[") << kChangedWhileRead.text() << std::string_view("] ") << r.file->path() << std::string_view(": ")
      << r.file->describe_change(readable ? &st : nullptr, change, sizeof change);
    return t.finish();
  }
  return 0;
}

std::shared_ptr<const MappedFile> DiskFileSystem::map(const std::string& path) const {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) open_failed(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    open_failed(path, err);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* addr = nullptr;
  if (size > 0) {
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      open_failed(path, err);
    }
  }
  ::close(fd);
  return std::make_shared<MmapFile>(addr, size, path, version_of(st));
}

void MemoryFileSystem::add_file(const std::string& path, std::vector<std::byte> contents) {
  files_[path] = std::make_shared<const std::vector<std::byte>>(std::move(contents));
}

namespace {
std::string without_trailing_slash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}
}  // namespace

FileSystem::Kind MemoryFileSystem::kind(const std::string& raw) const {
  const std::string path = without_trailing_slash(raw);
  if (files_.count(path) != 0) return Kind::kFile;
  const std::string prefix = path + "/";
  auto it = files_.lower_bound(prefix);
  if (it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0) return Kind::kDirectory;
  return Kind::kMissing;
}

std::vector<std::string> MemoryFileSystem::list_files_recursive(const std::string& dir) const {
  std::vector<std::string> out;
  const std::string prefix = without_trailing_slash(dir) + "/";
  for (auto it = files_.lower_bound(prefix);
       it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    out.push_back(it->first);
  return out;
}

std::shared_ptr<const MappedFile> MemoryFileSystem::map(const std::string& path) const {
  auto it = files_.find(path);
  if (it == files_.end()) open_failed(path, ENOENT);
  return std::make_shared<VectorFile>(it->second);
}

}  // namespace fp8a
