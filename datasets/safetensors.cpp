#include "datasets/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

struct KnownDType {
  const char* name;
  unsigned bits;
};
// The reference's Dtype enum with bitsize().
constexpr KnownDType kKnownDTypes[] = {
    {"BOOL", 8},   {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6}, {"U8", 8},
    {"I8", 8},     {"F8_E5M2", 8},     {"F8_E4M3", 8},     {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},
    {"F8_E5M2FNUZ", 8}, {"I16", 16},   {"U16", 16},        {"F16", 16},    {"BF16", 16},
    {"I32", 32},   {"U32", 32},        {"F32", 32},        {"C64", 64},    {"F64", 64},
    {"I64", 64},   {"U64", 64},
};

[[noreturn]] void fail(InputId id, std::string_view file, const std::string& what) {
  throw input_error(id, std::string(file) + ": " + what);
}

// nlohmann's SAX interface building the header's DOM (as json::parse does), in time linear in
// its size, noting the first key that repeats in an object.
class HeaderSax {
 public:
  using json = nlohmann::json;
  json root;
  std::string duplicate_error;  // empty: no key repeats
  InputId duplicate_id = "fp8a.safetensors.305";

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) {
    open_.push_back(slot(json::object()));
    return true;
  }
  bool key(json::string_t& k) {
    if (open_.size() == 1) top_key_ = k;
    auto& members = open_.back()->get_ref<json::object_t&>();
    const auto [it, added] = members.try_emplace(std::move(k));
    if (!added && duplicate_error.empty()) note_duplicate(it->first);
    member_ = &it->second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    open_.push_back(slot(json::array()));
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) { throw e; }

 private:
  // Where the value just parsed goes: the root, the next element of an array, or the object's
  // member under the key just read (the last of repeated keys wins, as in json::parse).
  json* slot(json&& v) {
    if (open_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    *member_ = std::move(v);
    return member_;
  }
  template <class V>
  bool put(V&& v) {
    slot(json(std::forward<V>(v)));
    return true;
  }
  void note_duplicate(const std::string& k) {
    if (open_.size() == 1) {
      duplicate_id = "fp8a.safetensors.311";
      duplicate_error = (k == "__metadata__" ? std::string("__metadata__") : "tensor name " + quoted_input(k)) +
                        " appears twice";
    } else if (top_key_ == "__metadata__") {
      duplicate_id = "fp8a.safetensors.306";
      duplicate_error = "__metadata__ key " + quoted_input(k) + " appears twice";
    } else {
      duplicate_id = "fp8a.safetensors.305";
      duplicate_error = "tensor " + quoted_input(top_key_) + ": field " + quoted_input(k) + " appears twice";
    }
  }

  std::vector<json*> open_;  // the objects and arrays being filled, innermost last
  json* member_ = nullptr;    // the member of the innermost object whose key was just read
  std::string top_key_;      // the top-level key whose value is being parsed
};

}  // namespace

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view file) {
  using nlohmann::json;
  if (bytes.size() < 8)
    fail("fp8a.safetensors.301", file,
         "not a safetensors file: " + std::to_string(bytes.size()) +
             " bytes, shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(bytes[i]);
  if (n > kSafetensorsMaxHeaderBytes)
    fail("fp8a.safetensors.302", file,
         "not a safetensors file: header length " + std::to_string(n) + " exceeds the limit of " +
             std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  if (n > bytes.size() - 8)
    fail("fp8a.safetensors.303", file,
         "truncated: header of " + std::to_string(n) + " bytes but only " +
             std::to_string(bytes.size() - 8) + " bytes follow the length field");

  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  // nlohmann's parser stops at a NUL byte and skips a UTF-8 byte-order mark; JSON allows neither
  // (a raw NUL is never valid JSON text), and the reference parser refuses both.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    fail("fp8a.safetensors.304", file,
         "header is not valid JSON: NUL byte at header offset " + std::to_string(nul));
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    fail("fp8a.safetensors.304", file, "header is not valid JSON: it starts with a byte-order mark");

  // Repeated keys: nlohmann keeps the last one silently, so the header is built by a SAX handler
  // that sees every key as it is parsed, in every object (tensor names, entry fields, metadata
  // keys). Not json::parse with a callback: that takes time quadratic in the entries (at each
  // entry's end it scans the whole top-level object for discarded values).
  HeaderSax sax;
  try {
    json::sax_parse(text, &sax);
  } catch (const json::exception& e) {
    std::string why = e.what();
    // nlohmann messages start with "[json.exception.parse_error.101] "; keep the text after it.
    if (auto pos = why.find("] "); pos != std::string::npos) why = why.substr(pos + 2);
    // nlohmann shows the bytes it last read as they are ("last read: '<bytes>'"); quote them.
    constexpr std::string_view kLastRead = "; last read: '";
    if (const auto at = why.find(kLastRead); at != std::string::npos) {
      const auto from = at + kLastRead.size();
      auto to = why.rfind("'; expected ");
      if (to == std::string::npos || to < from) to = why.size() - 1;
      if (to >= from && why[to] == '\'')
        why = why.substr(0, at) + "; last read: " +
              quoted_input(std::string_view(why).substr(from, to - from)) + why.substr(to + 1);
    }
    fail("fp8a.safetensors.304", file, "header is not valid JSON: " + why);
  }
  if (!sax.duplicate_error.empty()) fail(sax.duplicate_id, file, sax.duplicate_error);
  json& header = sax.root;
  if (!header.is_object()) fail("fp8a.safetensors.304", file, "header is not a JSON object");

  SafetensorsFile out;
  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = bytes.size() - data_start;
  for (auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;  // optional field; null means none, as in the reference
      if (!value.is_object())
        fail("fp8a.safetensors.306", file, "__metadata__ must be an object of strings");
      for (auto& [k, v] : value.items()) {
        if (!v.is_string())
          fail("fp8a.safetensors.306", file,
               "__metadata__ value of " + quoted_input(k) + " is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor " + quoted_input(name) + ": ";
    if (!value.is_object()) fail("fp8a.safetensors.305", file, where + "entry is not an object");
    const auto dt = value.find("dtype");
    const auto sh = value.find("shape");
    const auto off = value.find("data_offsets");
    if (dt == value.end() || !dt->is_string())
      fail("fp8a.safetensors.305", file, where + "missing or non-string \"dtype\"");
    if (sh == value.end() || !sh->is_array())
      fail("fp8a.safetensors.305", file, where + "missing or non-array \"shape\"");
    if (off == value.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail("fp8a.safetensors.305", file,
           where + "\"data_offsets\" must be two non-negative integers");

    SafetensorsEntry e;
    e.name = name;
    e.dtype_name = dt->get<std::string>();
    const KnownDType* known = nullptr;
    for (const auto& k : kKnownDTypes)
      if (e.dtype_name == k.name) known = &k;
    if (known == nullptr)
      fail("fp8a.safetensors.307", file, where + "unknown dtype " + quoted_input(e.dtype_name));
    e.dtype = dtype_from_name(e.dtype_name);

    std::uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned())
        fail("fp8a.safetensors.305", file, where + "shape entries must be non-negative integers");
      const auto dim = d.get<std::uint64_t>();
      if (dim > static_cast<std::uint64_t>(INT64_MAX))
        fail("fp8a.safetensors.309", file,
             where + "shape dimension " + std::to_string(dim) + " exceeds 2^63 - 1");
      if (__builtin_mul_overflow(numel, dim, &numel))
        fail("fp8a.safetensors.309", file, where + "shape " + sh->dump() + " overflows");
      e.shape.push_back(static_cast<std::int64_t>(dim));
    }
    std::uint64_t bits = 0;
    if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(known->bits), &bits))
      fail("fp8a.safetensors.309", file, where + "shape " + sh->dump() + " overflows");
    if (bits % 8 != 0)
      fail("fp8a.safetensors.309", file, where + "shape does not fill a whole number of bytes");
    e.numel = numel;
    e.begin = (*off)[0].get<std::uint64_t>();
    e.end = (*off)[1].get<std::uint64_t>();
    if (e.end < e.begin)
      fail("fp8a.safetensors.308", file,
           where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] end before they begin");
    if (e.end - e.begin != bits / 8)
      fail("fp8a.safetensors.309", file,
           where + "shape " + sh->dump() + " of " + e.dtype_name + " needs " +
               std::to_string(bits / 8) + " bytes but data_offsets span " +
               std::to_string(e.end - e.begin));
    out.entries.push_back(std::move(e));
  }

  // The tensors must tile [0, data_size) exactly, in offset order.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : out.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expected = 0;
  for (const auto* e : by_offset) {
    if (e->begin != expected)
      fail("fp8a.safetensors.308", file,
           "tensor " + quoted_input(e->name) + ": data starts at offset " + std::to_string(e->begin) +
               " but the previous tensor ends at " + std::to_string(expected) +
               (e->begin < expected ? " (overlap)" : " (gap)"));
    expected = e->end;
  }
  if (expected != data_size)
    fail("fp8a.safetensors.310", file,
         (expected > data_size ? "truncated: tensors need " : "trailing bytes: tensors end at ") +
             std::to_string(expected) + " data bytes but the file holds " +
             std::to_string(data_size));
  for (auto& e : out.entries) {
    e.begin += data_start;
    e.end += data_start;
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace fp8a
