#include "cli/layer_match.hpp"

#include <re2/re2.h>

#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"

namespace fp8a::cli {

namespace {

// How much of the pattern and of RE2's reason a message shows.
constexpr std::size_t kShownChars = 200;
// "did you mean" costs |pattern| x |name| per name: offered for patterns up to this length.
constexpr std::size_t kSuggestMaxPattern = 256;

// RE2's reason, its piece of the pattern quoted: "missing ) '(fc2'".
std::string reason(const RE2& re) {
  const std::string& what = re.error();
  const std::string& arg = re.error_arg();
  if (arg.empty() || !what.ends_with(": " + arg)) return escaped_input(what, kShownChars);
  return what.substr(0, what.size() - arg.size() - 2) + " " + quoted_input(arg, kShownChars);
}

}  // namespace

std::vector<std::string> matching_layers(const std::string& pattern, const std::vector<std::string>& names) {
  RE2::Options options;
  options.set_log_errors(false);  // the reason goes into the usage error, not to stderr
  options.set_max_mem(kLayerPatternMaxMem);
  const RE2 re(pattern, options);
  if (!re.ok()) {
    const std::string why = re.error_code() == RE2::ErrorPatternTooLarge
                                ? "its compiled form exceeds RE2's memory budget of " +
                                      std::to_string(kLayerPatternMaxMem >> 20) + " MiB"
                                : reason(re);
    throw usage_error("fp8a.usage.216", "--layer " + quoted_input(pattern, kShownChars) +
                                            " is not a valid regular expression: " + why +
                                            " (RE2 syntax: no lookaround, no backreferences)");
  }
  std::vector<std::string> matched;
  for (const std::string& n : names)
    if (RE2::PartialMatch(n, re)) matched.push_back(n);
  if (matched.empty()) {
    constexpr std::size_t kSuggestions = 3;
    throw usage_error("fp8a.usage.216",
                      "--layer " + quoted_input(pattern, kShownChars) + " matches no captured layer" +
                          (pattern.size() <= kSuggestMaxPattern ? did_you_mean(pattern, names, kSuggestions) : "") +
                          "; " + std::to_string(names.size()) +
                          " captured, 'fp8-advisor inspect' lists them");
  }
  return matched;
}

}  // namespace fp8a::cli
