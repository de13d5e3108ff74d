#include "datasets/safetensors_writer.hpp"

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"

namespace fp8a {

std::string safetensors_bytes(const std::vector<SafetensorsTensorOut>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    FP8A_CHECK(seen.insert(t.name).second, "safetensors writer: tensor '" + t.name + "' twice");
    const std::uint64_t end = offset + t.bytes.size();
    header[t.name] = {{"dtype", t.dtype_name}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFFu);
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& t : tensors) out += t.bytes;
  return out;
}

}  // namespace fp8a
