// MappedFile::release on the real disk: the released pages leave the process's resident set (as
// the kernel counts it in /proc/self/smaps), and the bytes still read the same afterwards; in
// memory it changes nothing. Loaded captures carry their file as the views' storage.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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
