#include "core/error.hpp"

namespace fp8a {

std::string Error::compose(std::string_view id, std::string_view message) {
  std::string s;
  s.reserve(id.size() + message.size() + 3);
  s.append(1, '[').append(id).append("] ").append(message);
  return s;
}

}  // namespace fp8a

namespace fp8a::detail {

void check_failed(const char* cond, const char* file, int line, std::string_view msg) {
  throw internal_error("fp8a.internal.001", std::string(file) + ":" + std::to_string(line) +
                                                ": check '" + cond + "' failed: " + std::string(msg));
}

}  // namespace fp8a::detail
