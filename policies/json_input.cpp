#include "policies/json_input.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/suggest.hpp"
#include "core/text.hpp"

namespace fp8a {
namespace {

// A SAX pass over the text that keeps the path of keys to the current value
// ("criteria.mse.max", "criteria[0]"), to name the number nlohmann's parser refused as beyond a
// double's range (its out_of_range.406 carries only the offset), and stops at the first key given
// twice in one object (nlohmann keeps the last silently) or at an object of over kMaxJsonKeys.
class KeyPathSax : public nlohmann::json_sax<Json> {
 public:
  // The path at the refused value, once sax_parse has returned.
  std::string path() const { return path_of(frames_.size()); }
  // The path of the object being read, "" at the top level.
  std::string object_path() const { return path_of(frames_.empty() ? 0 : frames_.size() - 1); }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    frames_.push_back({false, 0, {}, {}});
    return true;
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    if (frames_.back().keys.size() >= kMaxJsonKeys) {
      crowded_ = true;
      return false;
    }
    if (frames_.back().keys.insert(k).second) return true;
    repeated_ = true;
    return false;
  }
  // Whether the pass stopped at a key given twice; path() then names it.
  bool repeated() const { return repeated_; }
  // Whether it stopped at an object with more than kMaxJsonKeys keys.
  bool crowded() const { return crowded_; }
  bool end_object() override { return end(); }
  bool start_array(std::size_t) override {
    frames_.push_back({true, 0, {}, {}});
    return true;
  }
  bool end_array() override { return end(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool in_array = false;
    std::size_t index = 0;  // of the next element, in an array
    std::string key;        // of the current value, in an object
    std::set<std::string> keys;  // every key of the object so far
  };
  bool value() {
    if (!frames_.empty() && frames_.back().in_array) ++frames_.back().index;
    return true;
  }
  bool end() {
    frames_.pop_back();
    return value();
  }
  // The path through the first `depth` frames.
  std::string path_of(std::size_t depth) const {
    std::string s;
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      s += f.in_array ? "[" + std::to_string(f.index) + "]" : (s.empty() ? "" : ".") + f.key;
    }
    return s;
  }
  std::vector<Frame> frames_;
  bool repeated_ = false;
  bool crowded_ = false;
};

// Text that is not UTF-8 (RFC 8259 JSON is): the kind's `invalid` error saying what it is
// instead, so that no raw byte of it reaches the one-line message.
void require_utf8(std::string_view text, const std::string& file, const JsonInputKind& kind) {
  if (const std::string bom = utf16_or_utf32_bom(text); !bom.empty())
    throw input_error(kind.invalid, file + " is " + bom + ", not UTF-8; save it as UTF-8");
  // UTF-16 without a byte order mark: a NUL byte beside each ASCII character ("{\0" or "\0{").
  const auto ascii = [](char c) { return c >= 0x20 && c < 0x7F; };
  if (text.size() >= 2 && ((ascii(text[0]) && text[1] == '\0') || (text[0] == '\0' && ascii(text[1]))))
    throw input_error(kind.invalid, file + " is UTF-16 (a NUL byte beside each character), not UTF-8; save it as UTF-8");
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw input_error(kind.invalid, file + " holds a NUL byte at byte offset " + std::to_string(nul) + "; a " +
                                        kind.noun + " is UTF-8 JSON text");
  if (const auto bad = first_invalid_utf8(text)) {
    constexpr std::size_t kExcerpt = 16;
    throw input_error(kind.invalid, file + " is not UTF-8 at byte offset " + std::to_string(*bad) + " (" +
                                        quoted_input(text.substr(*bad, kExcerpt), kExcerpt) +
                                        " there); save it as UTF-8");
  }
}

// A JSON integer as int64; an unsigned one above hi reads as hi + 1 (out of range, not wrapped).
std::int64_t integer_at_most_past(const Json& v, std::int64_t hi) {
  return v.is_number_unsigned()
             ? static_cast<std::int64_t>(std::min<std::uint64_t>(v.get<std::uint64_t>(), static_cast<std::uint64_t>(hi) + 1))
             : v.get<std::int64_t>();
}

}  // namespace

Json parse_json_input(std::string_view text, const std::string& where, const JsonInputKind& kind) {
  const std::string file = std::string(kind.noun) + " " + where;
  require_utf8(text, file, kind);
  // Keys first (a set per object, not the ordered parse's linear search): a key given twice, or
  // an object past any such file's size, refused before the parse.
  if (KeyPathSax keys; !Json::sax_parse(text.begin(), text.end(), &keys)) {
    if (keys.repeated())
      throw input_error(kind.repeated_key,
                        file + ": key " + escaped_input(keys.path(), 200) + " is given twice in one object; keep one");
    if (keys.crowded())
      throw input_error(kind.unknown_key, file + ": " +
                                              (keys.object_path().empty() ? std::string("the top-level object")
                                                                          : escaped_input(keys.object_path(), 200)) +
                                              " has over " + std::to_string(kMaxJsonKeys) + " keys; " +
                                              kind.size_note);
  }
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    if (const auto at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      what = what.substr(at + 2);
    // The parser quotes what it last read, as raw bytes and at any length: escaped and cut.
    constexpr std::size_t kShownBytes = 300;
    const std::string shown =
        what.size() > kShownBytes ? printable_text(what.substr(0, kShownBytes)) + "..." : printable_text(what);
    throw input_error(kind.invalid, file + " is not valid JSON: " + shown);
  } catch (const Json::out_of_range&) {
    // A number beyond a double's range (1e400): nlohmann refuses it while parsing; a second pass
    // finds its key.
    KeyPathSax keys;
    (void)Json::sax_parse(text.begin(), text.end(), &keys);
    const std::string path = keys.path();
    throw input_error(kind.out_of_range, file + ": " +
                                             (path.empty() ? std::string("the value") : escaped_input(path, 200)) +
                                             " is a number beyond the range of a double (about 1.8e308); "
                                             "expected a finite number");
  }
  if (!j.is_object()) throw input_error(kind.invalid, file + " is not a JSON object");
  return j;
}

void ObjectReader::only(const std::vector<std::string>& keys) const {
  for (const auto& [key, value] : object_.items()) {
    (void)value;
    bool known = false;
    for (const auto& k : keys) known = known || k == key;
    if (!known)
      throw input_error(kind_.unknown_key, prefix() + "unknown key " + quoted_input(name(key)) + did_you_mean(key, keys));
  }
}

void ObjectReader::boolean(const char* key, bool* out) const {
  if (const Json* v = find(key)) {
    if (!v->is_boolean()) wrong_type(key, "true or false", *v);
    *out = v->get<bool>();
  }
}

void ObjectReader::text(const char* key, std::string* out) const {
  if (const Json* v = find(key)) {
    if (!v->is_string()) wrong_type(key, "a string", *v);
    *out = v->get<std::string>();
  }
}

void ObjectReader::number(const char* key, double lo, bool lo_open, double hi, double* out) const {
  if (const Json* v = find(key)) *out = checked_number(key, *v, lo, lo_open, hi);
}

void ObjectReader::optional_number(const char* key, double lo, bool lo_open, double hi,
                                   std::optional<double>* out) const {
  if (const Json* v = find(key)) {
    if (v->is_null()) *out = std::nullopt;
    else *out = checked_number(key, *v, lo, lo_open, hi, " or null");
  }
}

void ObjectReader::integer(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t* out) const {
  if (const Json* v = find(key)) {
    if (!v->is_number_integer()) wrong_type(key, "an integer", *v);
    const std::int64_t x = integer_at_most_past(*v, hi);
    if (x < lo || x > hi)
      throw input_error(kind_.out_of_range, prefix() + name(key) + " is " + v->dump() + ", expected an integer in [" +
                                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = x;
  }
}

const Json* ObjectReader::object(const char* key) const {
  const Json* v = find(key);
  if (v != nullptr && !v->is_object()) wrong_type(key, "an object", *v);
  return v;
}

std::optional<std::vector<std::int64_t>> ObjectReader::integers(const char* key, std::int64_t lo, std::int64_t hi,
                                                                std::size_t max_count) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array() || v->size() > max_count)
    wrong_type(key, ("an array of at most " + std::to_string(max_count) + " integers").c_str(), *v);
  std::vector<std::int64_t> out;
  for (const Json& x : *v) {
    if (!x.is_number_integer()) wrong_type(key, "an array of integers", *v);
    const std::int64_t n = integer_at_most_past(x, hi);
    if (n < lo || n > hi)
      throw input_error(kind_.out_of_range, prefix() + name(key) + " holds " + x.dump() + ", expected integers in [" +
                                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(n);
  }
  return out;
}

std::optional<std::vector<std::string>> ObjectReader::strings(const char* key) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) wrong_type(key, "an array of strings", *v);
  std::vector<std::string> out;
  for (const Json& s : *v) {
    if (!s.is_string()) wrong_type(key, "an array of strings", *v);
    out.push_back(s.get<std::string>());
  }
  return out;
}

int ObjectReader::choice(const char* key, const std::vector<std::string>& names) const {
  const Json* v = find(key);
  if (v == nullptr) return -1;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  const auto s = v->get<std::string>();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<int>(i);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw input_error(kind_.out_of_range,
                    prefix() + name(key) + " is " + quoted_input(s) + ", expected one of " + list + did_you_mean(s, names));
}

void ObjectReader::optional_choice(const char* key, const std::vector<std::string>& names,
                                   std::optional<int>* out) const {
  const Json* v = find(key);
  if (v == nullptr) return;
  if (v->is_null()) {
    out->reset();
    return;
  }
  if (!v->is_string()) wrong_type(key, "a string or null", *v);
  *out = choice(key, names);
}

ObjectReader ObjectReader::child(const char* key) const {
  const Json* o = object(key);
  FP8A_CHECK(o != nullptr, "ObjectReader::child of a key the object holds");
  return ObjectReader(*o, name(key), where_, kind_);
}

std::string ObjectReader::name(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::string ObjectReader::prefix() const { return std::string(kind_.noun) + " " + std::string(where_) + ": "; }

const Json* ObjectReader::find(const char* key) const {
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

namespace {
std::string type_of(const Json& v) {
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}
}  // namespace

void ObjectReader::wrong_type(const char* key, const char* expected, const Json& v) const {
  throw input_error(kind_.wrong_type, prefix() + name(key) + " must be " + expected + ", not " + type_of(v));
}

double ObjectReader::checked_number(const char* key, const Json& v, double lo, bool lo_open, double hi,
                                    const char* or_null) const {
  if (!v.is_number()) {
    const std::string expected = std::string("a number") + or_null;
    wrong_type(key, expected.c_str(), v);
  }
  const double x = v.get<double>();
  const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
  if (!ok) {
    const auto bound = [](double b) {
      return b == std::numeric_limits<double>::max() ? std::string("inf") : Json(b).dump();
    };
    throw input_error(kind_.out_of_range, prefix() + name(key) + " is " + v.dump() + ", expected a number in " +
                                              (lo_open ? "(" : "[") + bound(lo) + ", " + bound(hi) +
                                              (hi == std::numeric_limits<double>::max() ? ")" : "]"));
  }
  return x;
}

}  // namespace fp8a
