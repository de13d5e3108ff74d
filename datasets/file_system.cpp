#include "datasets/file_system.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/fnv1a.hpp"

namespace fp8a {

namespace {

class MmapFile final : public MappedFile {
 public:
  MmapFile(void* addr, std::size_t size, std::string identity)
      : addr_(addr), size_(size), identity_(std::move(identity)) {}
  ~MmapFile() override {
    if (addr_ != nullptr) ::munmap(addr_, size_);
  }
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;
  std::span<const std::byte> bytes() const override {
    return {static_cast<const std::byte*>(addr_), size_};
  }
  std::string identity() const override { return identity_; }
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
  }

 private:
  void* addr_;
  std::size_t size_;
  std::string identity_;
};

class VectorFile final : public MappedFile {
 public:
  explicit VectorFile(std::shared_ptr<const std::vector<std::byte>> data) : data_(std::move(data)) {}
  std::span<const std::byte> bytes() const override { return {data_->data(), data_->size()}; }
  std::string identity() const override {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(bytes())));
    return "size " + std::to_string(data_->size()) + ", fnv1a " + hex;
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
  std::vector<std::string> out;
  std::error_code ec;
  namespace fs = std::filesystem;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) open_failed(dir, ec.value());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) open_failed(dir, ec.value());
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
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
  return std::make_shared<MmapFile>(
      addr, size, "size " + std::to_string(st.st_size) + ", mtime " + std::to_string(st.st_mtim.tv_sec) +
                      "." + std::to_string(st.st_mtim.tv_nsec));
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
