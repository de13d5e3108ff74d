// The name fuzzer: byte strings as layer names through `fp8-advisor run` on every output writer
// and `compare`, each output read back by a strict parser (name_outputs.hpp): 0 crashes, 0
// injected keys, the name (or its documented form) back. A fixed list of the names that broke or
// could break a format, then random names from a fixed seed, so every run tests the same 50.
// FP8A_FUZZ_NAMES=N (and FP8A_FUZZ_SEED=S) runs N random names instead, for a longer search.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/name_outputs.hpp"

namespace {

std::string b(const char* s, std::size_t n) { return std::string(s, n); }

// The seeds: a CR, LF, NUL, NEL, U+2028/9, 0xFF, ESC, markup, formulas, quotes, a long name.
const std::vector<std::string> kFixed = {
    "x\rinjected: 1", "x\ninjected: 1", b("x\0y", 3), "x\xC2\x85y: 1", "x\xE2\x80\xA8y: 1",
    "x\xE2\x80\xA9y: 1", "x\xFFy", "\xFF", "\x1b[31mx", "<script>alert(1)</script>", "=cmd",
    "+cmd", "-cmd", "@cmd", "'q'", "\"dq\"", "a\\b", "a: b", "- item", "{x: 1}", "[x]", "*x?",
    "&x;", "a|b", "`x`", "_x_", "# h", "%x", "!x", "\t", "\xEF\xBB\xBF" "bom", "\xEF\xBF\xBE",
    "x\xE2\x80\xAE" "evil", std::string(3000, 'w'),
};

// Pieces a random name is made of: hostile ones often, any byte sometimes.
const std::vector<std::string> kPieces = {
    "\r", "\n", b("\0", 1), "\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xFF", "\xC3", "\x1b[", "<", ">",
    "&", "|", "`", "*", "_", "[", "]", "'", "\"", "\\", "=", "+", "-", "@", "#", ":", " ", "{", "}",
    "%", "!", "\t", ".", "a", "layer", "\xE5\xB1\x82", "?",
};

std::uint64_t next(std::uint64_t* s) {  // splitmix64
  std::uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<std::string> random_names(std::size_t n, std::uint64_t seed) {
  std::vector<std::string> names;
  while (names.size() < n) {
    std::string name;
    const std::size_t parts = 1 + next(&seed) % 12;
    for (std::size_t p = 0; p < parts; ++p) {
      if (next(&seed) % 4 == 0) name += static_cast<char>(next(&seed) & 0xFF);
      else name += kPieces[next(&seed) % kPieces.size()];
    }
    if (fp8a::name_test::capturable(name)) names.push_back(name);
  }
  return names;
}

std::size_t env_count(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : fallback;
}

}  // namespace

TEST_CASE("name fuzzer: the fixed hostile names") {
  for (const std::string& name : kFixed) fp8a::name_test::check_name(name);
}

TEST_CASE("name fuzzer: random names from a fixed seed") {
  const std::size_t n = env_count("FP8A_FUZZ_NAMES", 50 - kFixed.size());
  for (const std::string& name : random_names(n, env_count("FP8A_FUZZ_SEED", 25)))
    fp8a::name_test::check_name(name);
}
