// fp8a::Error — user-facing failures that end a run, and FP8A_CHECK for invariants.
//
// Every user error carries a stable id ("fp8a.safetensors.305") that appears in the message as
// "[fp8a.safetensors.305] <text>" and is a row of kErrorIds (core/error_ids.hpp) with its kind.
// main() catches Error once and maps its kind to the process exit code. Expected outcomes (a
// tensor with NaNs, a recipe that does not fit) are values, not exceptions.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error_ids.hpp"

namespace fp8a {

namespace detail {
// Declared, never defined: a compile-time id check that fails calls it, which names it in the
// compiler's error.
void error_id_is_not_in_kErrorIds_with_this_kind();
}  // namespace detail

// An id of kErrorIds whose kind is K, built at compile time from a literal: an id missing from
// the table, or given with another kind (usage_error("fp8a.io.101", ...)), does not compile.
template <ErrorKind K>
class ErrorIdOf {
 public:
  consteval ErrorIdOf(const char* id) : id_(id) {
    const ErrorIdRow* row = find_error_id(id_);
    if (row == nullptr || row->kind != K) detail::error_id_is_not_in_kErrorIds_with_this_kind();
  }
  constexpr std::string_view text() const { return id_; }

 private:
  std::string_view id_;
};
using UsageId = ErrorIdOf<ErrorKind::kUsage>;
using InputId = ErrorIdOf<ErrorKind::kInput>;
using InternalId = ErrorIdOf<ErrorKind::kInternal>;

class Error : public std::runtime_error {
 public:
  ErrorKind kind() const noexcept { return kind_; }
  const std::string& id() const noexcept { return id_; }
  int exit_code() const noexcept { return exit_code_of(kind_); }

 private:
  // id: dotted stable identifier without brackets, e.g. "fp8a.io.101".
  Error(ErrorKind kind, std::string_view id, std::string_view message)
      : std::runtime_error(compose(id, message)),
        kind_(kind),
        id_(id) {}
  friend Error usage_error(UsageId id, std::string_view message);
  friend Error input_error(InputId id, std::string_view message);
  friend Error internal_error(InternalId id, std::string_view message);

  static std::string compose(std::string_view id, std::string_view message);
  ErrorKind kind_;
  std::string id_;
};

inline Error usage_error(UsageId id, std::string_view message) {
  return Error(ErrorKind::kUsage, id.text(), message);
}
inline Error input_error(InputId id, std::string_view message) {
  return Error(ErrorKind::kInput, id.text(), message);
}
inline Error internal_error(InternalId id, std::string_view message) {
  return Error(ErrorKind::kInternal, id.text(), message);
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
