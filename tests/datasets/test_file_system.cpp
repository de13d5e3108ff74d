// MappedFile::release on the real disk: the released pages leave the process's resident set (as
// the kernel counts it in /proc/self/smaps), and the bytes still read the same afterwards; in
// memory it changes nothing. Loaded captures carry their file as the views' storage. A file that
// changes under its mapping (truncated, rewritten in place) is fp8a.io.110 naming it, and a fault
// address in it is described for the SIGBUS handler (issue 25).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/safetensors_builder.hpp"

namespace {

// The Rss of the mapping holding p, in kB, from /proc/self/smaps; -1 when not found.
long rss_kb_of_mapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

// A scratch file of `pages` pages, byte i = i * 7 mod 251, removed on destruction.
struct ScratchFile {
  std::string path;
  std::vector<std::byte> contents;
  explicit ScratchFile(std::size_t pages) {
    path = "/tmp/fp8a_test_file_system_" + std::to_string(::getpid()) + ".bin";
    contents.resize(pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
    for (std::size_t i = 0; i < contents.size(); ++i) contents[i] = std::byte(i * 7 % 251);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(contents.data()), static_cast<std::streamsize>(contents.size()));
  }
  ~ScratchFile() { std::remove(path.c_str()); }
};

// "size S, mtime T.N" of a file as stat gives it (MappedFile::identity()'s form).
std::string version_text(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return "size " + std::to_string(st.st_size) + ", mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

// Moves path's modification time by `seconds`.
void shift_mtime(const std::string& path, long seconds) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_sec += seconds;
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

std::string changed_error(const std::string& path, const std::string& was, const std::string& now) {
  return "[fp8a.io.110] " + path + ": changed while the run read it (was " + was + "; now " + now +
         "): rerun once nothing writes to it";
}

std::uint64_t checksum(std::span<const std::byte> b) {
  std::uint64_t s = 0;
  for (std::byte x : b) s = s * 31 + static_cast<std::uint64_t>(x);
  return s;
}

}  // namespace

TEST_CASE("DiskFileSystem: release drops the touched pages, the bytes read the same after") {
  const std::size_t pages = 64;
  const ScratchFile file(pages);
  const auto mapped = fp8a::DiskFileSystem().map(file.path);
  const auto bytes = mapped->bytes();
  REQUIRE(bytes.size() == file.contents.size());
  const std::uint64_t expected = checksum(file.contents);
  CHECK(checksum(bytes) == expected);  // every page touched
  const long page_kb = ::sysconf(_SC_PAGESIZE) / 1024;
  CHECK(rss_kb_of_mapping(bytes.data()) == static_cast<long>(pages) * page_kb);
  // An unaligned range inside the file: the pages it touches (widened to whole pages) go.
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  mapped->release(bytes.data() + page + 100, 10 * page);  // pages 1..11
  CHECK(rss_kb_of_mapping(bytes.data()) == static_cast<long>(pages - 11) * page_kb);
  mapped->release(bytes.data(), bytes.size());
  CHECK(rss_kb_of_mapping(bytes.data()) == 0);
  CHECK(checksum(bytes) == expected);  // read back from the file
  // Outside the mapping: ignored.
  const std::byte other[4]{};
  mapped->release(other, sizeof other);
  CHECK(checksum(bytes) == expected);
}

TEST_CASE("MemoryFileSystem: release is a no-op; captured views carry their file as storage") {
  fp8a::MemoryFileSystem fs;
  fs.add_file("c/step_1.safetensors",
              fp8a::test::build_file({{"layers.0.fc1.weight", "BF16", {2}, {1.0f, -1.0f}}}, {}));
  const fp8a::CaptureSet set = fp8a::load_captures({"c"}, fs);
  REQUIRE(set.tensors.size() == 1);
  REQUIRE(set.mappings.size() == 1);
  const fp8a::TensorView& v = set.tensors[0].view;
  CHECK(v.storage == set.mappings[0].get());
  CHECK(v.byte_size() == 4);
  v.release();
  CHECK(v.load_float(0) == 1.0f);
  CHECK(v.load_float(1) == -1.0f);
}

TEST_CASE("DiskFileSystem: a file truncated or rewritten in place under its mapping is fp8a.io.110") {
  const ScratchFile file(4);
  const std::string was = version_text(file.path);
  const auto mapped = fp8a::DiskFileSystem().map(file.path);
  CHECK(mapped->identity() == was);
  CHECK_NOTHROW(mapped->check_unchanged());
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  SUBCASE("truncated: check_unchanged and release (the end of a tensor's pass) throw") {
    REQUIRE(::truncate(file.path.c_str(), 100) == 0);
    const std::string expected = changed_error(file.path, was, version_text(file.path));
    CHECK(expected.find("; now size 100, mtime ") != std::string::npos);
    CHECK_THROWS_WITH_AS(mapped->check_unchanged(), expected.c_str(), fp8a::Error);
    CHECK_THROWS_WITH_AS(mapped->release(mapped->bytes().data(), 10), expected.c_str(), fp8a::Error);
    try {
      mapped->check_unchanged();
    } catch (const fp8a::Error& e) {
      CHECK(e.exit_code() == 3);
    }
  }
  SUBCASE("rewritten at the same size: the modification time tells") {
    shift_mtime(file.path, 10);
    CHECK_THROWS_WITH_AS(mapped->check_unchanged(), changed_error(file.path, was, version_text(file.path)).c_str(),
                         fp8a::Error);
  }
  SUBCASE("replaced by a rename, or removed: no change, the mapping keeps the old file whole") {
    {
      std::ofstream other(file.path + ".new", std::ios::binary);
      other << "another file";
    }
    REQUIRE(std::rename((file.path + ".new").c_str(), file.path.c_str()) == 0);
    CHECK_NOTHROW(mapped->check_unchanged());
    CHECK(checksum(mapped->bytes()) == checksum(file.contents));
    REQUIRE(std::remove(file.path.c_str()) == 0);
    CHECK_NOTHROW(mapped->check_unchanged());
    CHECK(mapped->bytes()[page + 1] == file.contents[page + 1]);
  }
}

TEST_CASE("describe_mapped_file_fault: the error line for a fault address in a mapped file") {
  const ScratchFile file(4);
  const std::string was = version_text(file.path);
  auto mapped = fp8a::DiskFileSystem().map(file.path);
  REQUIRE(::truncate(file.path.c_str(), 100) == 0);
  const std::string expected = changed_error(file.path, was, version_text(file.path));
  char line[1024];
  const auto* last = mapped->bytes().data() + mapped->bytes().size() - 1;
  for (const std::byte* at : {mapped->bytes().data(), last}) {
    const std::size_t n = fp8a::describe_mapped_file_fault(at, line, sizeof line);
    CHECK(std::string(line, n) == expected);
    CHECK(line[n] == '\0');
  }
  // Cut to the buffer, NUL-terminated.
  char small[21];
  CHECK(fp8a::describe_mapped_file_fault(last, small, sizeof small) == 20);
  CHECK(std::string(small) == expected.substr(0, 20));
  // Outside every mapped file (one past the end, a stack address): none.
  CHECK(fp8a::describe_mapped_file_fault(last + 1, line, sizeof line) == 0);
  CHECK(fp8a::describe_mapped_file_fault(&small, line, sizeof line) == 0);
  // A file unmapped is no longer named.
  const void* first = mapped->bytes().data();
  mapped.reset();
  CHECK(fp8a::describe_mapped_file_fault(first, line, sizeof line) == 0);
}

TEST_CASE("DiskFileSystem: a symlinked folder is read, each folder once; a link loop ends") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("fp8a_links_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "capture" / "sub");
  fs::create_directories(root / "elsewhere");
  std::ofstream(root / "capture" / "a.safetensors") << "x";
  std::ofstream(root / "elsewhere" / "b.safetensors") << "x";
  fs::create_directory_symlink(root / "elsewhere", root / "capture" / "linked");  // before: skipped
  fs::create_directory_symlink(root / "elsewhere", root / "capture" / "linked_again");
  fs::create_directory_symlink(root / "capture", root / "capture" / "sub" / "loop");
  const auto files = fp8a::DiskFileSystem().list_files_recursive((root / "capture").string());
  const std::string c = (root / "capture").string();
  CHECK(files == std::vector<std::string>{c + "/a.safetensors", c + "/linked/b.safetensors"});
  fs::remove_all(root);
}
