// FNV-1a, 64 bits: the project's one non-cryptographic hash (synth's seeds, in-memory files'
// identities, checkpoint unit names and checksums). Not for anything adversarial.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace fp8a {

inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = kFnv1aBasis) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

inline std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = kFnv1aBasis) {
  return fnv1a(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), h);
}

// The hash as 16 lowercase hex digits, as the checkpoint and the output manifest write it.
inline std::string fnv1a_hex(std::string_view s) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(s)));
  return hex;
}

}  // namespace fp8a
