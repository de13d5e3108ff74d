// fp8a::Error — user-facing failures that end a run, and FP8A_CHECK for invariants.
//
// Every user error carries a stable id ("fp8a.safetensors.305") that appears in the message as
// "[fp8a.safetensors.305] <text>" and is listed in README.md. main() catches Error once and maps its
// kind to the process exit code. Expected outcomes (a tensor with NaNs, a recipe that does not fit)
// are values, not exceptions.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace fp8a {

enum class ErrorKind {
  kUsage,     // bad command line: exit 2
  kInput,     // bad input data or unreadable/unwritable file: exit 3
  kInternal,  // a bug: exit 1
};

enum ExitCode : int { kExitOk = 0, kExitInternal = 1, kExitUsage = 2, kExitInput = 3 };

class Error : public std::runtime_error {
 public:
  // id: dotted stable identifier without brackets, e.g. "fp8a.io.101".
  Error(ErrorKind kind, std::string_view id, std::string_view message)
      : std::runtime_error(compose(id, message)),
        kind_(kind),
        id_(id) {}

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& id() const noexcept { return id_; }
  int exit_code() const noexcept {
    switch (kind_) {
      case ErrorKind::kUsage: return kExitUsage;
      case ErrorKind::kInput: return kExitInput;
      case ErrorKind::kInternal: break;
    }
    return kExitInternal;
  }

 private:
  static std::string compose(std::string_view id, std::string_view message);
  ErrorKind kind_;
  std::string id_;
};

inline Error usage_error(std::string_view id, std::string_view message) {
  return Error(ErrorKind::kUsage, id, message);
}
inline Error input_error(std::string_view id, std::string_view message) {
  return Error(ErrorKind::kInput, id, message);
}

namespace detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line, std::string_view msg);
}  // namespace detail

}  // namespace fp8a

// Always-on invariant check; throws an internal Error naming file:line.
#define FP8A_CHECK(cond, msg)                                               \
  do {                                                                      \
    if (!(cond)) ::fp8a::detail::check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)
