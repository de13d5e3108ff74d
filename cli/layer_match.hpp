// `whatif --layer`: which captured layer names a regular expression finds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8a::cli {

// The compiled pattern's memory budget (RE2's max_mem, bytes): a pattern whose program does not
// fit is refused (fp8a.usage.216), so compiling and matching stay bounded in memory.
inline constexpr std::int64_t kLayerPatternMaxMem = std::int64_t{8} << 20;

// The names, in their order, that `pattern` is found in (a search: anywhere in the name, as
// Python's re.search). The syntax is RE2's (github.com/google/re2/wiki/Syntax): ECMAScript's and
// Python's for the usual patterns, without lookaround or backreferences. RE2 matches in time
// linear in the name and with bounded stack, whatever the pattern and the name (a capture's
// names are someone else's data).
// Throws usage error fp8a.usage.216 when the pattern is not valid RE2 (the pattern and RE2's
// reason named), exceeds kLayerPatternMaxMem, or finds no name (with "did you mean").
std::vector<std::string> matching_layers(const std::string& pattern, const std::vector<std::string>& names);

}  // namespace fp8a::cli
