#include "datasets/npy.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "datasets/stored_zip.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr InputId kNotNpy = "fp8a.npy.601";
constexpr InputId kBadHeader = "fp8a.npy.602";
constexpr InputId kBadDType = "fp8a.npy.603";
constexpr InputId kBadSize = "fp8a.npy.604";
constexpr InputId kBadZip = "fp8a.npy.605";
constexpr InputId kCompressed = "fp8a.npy.606";

[[noreturn]] void fail(InputId id, std::string_view where, const std::string& what) {
  throw input_error(id, std::string(where) + ": " + what);
}

std::uint64_t read_le(std::span<const std::byte> bytes, std::uint64_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(bytes[at + i]);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Python literals, as far as .npy headers need them.
// ---------------------------------------------------------------------------------------------

struct PyValue {
  enum class Kind { kStr, kBool, kInt, kTuple, kList };
  Kind kind = Kind::kStr;
  std::string text;   // kStr: the string; kInt: the digits, with a leading '-' when negative
  bool flag = false;  // kBool
  std::vector<PyValue> items;  // kTuple, kList
  std::size_t pos = 0;         // header offset where the value starts
};

constexpr int kMaxNesting = 32;

class LiteralParser {
 public:
  LiteralParser(std::string_view text, std::string_view where) : s_(text), where_(where) {}

  // The whole header: one dict, then only whitespace.
  std::vector<std::pair<PyValue, PyValue>> parse_dict() {
    std::vector<std::pair<PyValue, PyValue>> out;
    skip_space();
    expect('{', "'{' (the header must be a dict)");
    while (true) {
      skip_space();
      if (peek() == '}') break;
      if (peek() != '\'' && peek() != '"')
        complain("expected a string key or '}', found " + describe(pos_), pos_);
      PyValue key = parse_string();
      skip_space();
      expect(':', "':'");
      PyValue value = parse_value(0);
      out.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') complain("expected ',' or '}', found " + describe(pos_), pos_);
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != s_.size()) complain("unexpected " + describe(pos_) + " after the dict", pos_);
    return out;
  }

  [[noreturn]] void complain(const std::string& what, std::size_t at) const {
    fail(kBadHeader, where_, "bad header: " + what + " at header offset " + std::to_string(at));
  }

 private:
  int peek() const { return pos_ < s_.size() ? static_cast<unsigned char>(s_[pos_]) : -1; }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r' || s_[pos_] == '\f'))
      ++pos_;
  }

  std::string describe(std::size_t at) const {
    if (at >= s_.size()) return "end of header";
    const auto c = static_cast<unsigned char>(s_[at]);
    if (c >= 0x20 && c < 0x7F) return std::string("character '") + static_cast<char>(c) + "'";
    static const char* kHex = "0123456789abcdef";
    return std::string("byte \\x") + kHex[c >> 4] + kHex[c & 15];
  }

  void expect(char c, const char* what) {
    if (peek() != static_cast<unsigned char>(c))
      complain(std::string("expected ") + what + ", found " + describe(pos_), pos_);
    ++pos_;
  }

  PyValue parse_value(int depth) {
    skip_space();
    const int c = peek();
    if (c == '\'' || c == '"') return parse_string();
    if (c == '(' || c == '[') return parse_sequence(depth);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_int();
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return parse_name();
    complain("expected a value, found " + describe(pos_), pos_);
  }

  PyValue parse_string() {
    PyValue v;
    v.kind = PyValue::Kind::kStr;
    v.pos = pos_;
    const char q = s_[pos_++];
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') complain("unterminated string", v.pos);
      if (s_[pos_] == '\\') complain("escape sequences in strings are not supported", pos_);
      if (s_[pos_] == q) break;
      v.text.push_back(s_[pos_++]);
    }
    ++pos_;
    return v;
  }

  PyValue parse_int() {
    PyValue v;
    v.kind = PyValue::Kind::kInt;
    v.pos = pos_;
    if (peek() == '-') v.text.push_back(s_[pos_++]);
    const std::size_t first = pos_;
    while (peek() >= '0' && peek() <= '9') v.text.push_back(s_[pos_++]);
    if (pos_ == first) complain("expected a digit, found " + describe(pos_), pos_);
    if (s_[first] == '0' && pos_ - first > 1) complain("integer with leading zeros", v.pos);
    const int c = peek();
    if (c == '.' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      complain("only plain integers are allowed, found " + describe(pos_) + " in a number", pos_);
    return v;
  }

  PyValue parse_name() {
    PyValue v;
    v.kind = PyValue::Kind::kBool;
    v.pos = pos_;
    std::string name;
    while (true) {
      const int c = peek();
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
        break;
      name.push_back(s_[pos_++]);
    }
    if (name == "True")
      v.flag = true;
    else if (name != "False")
      complain("unexpected name " + quoted_input(name) + " (only True and False are allowed)", v.pos);
    return v;
  }

  // "(...)" is a tuple when empty or when it holds a comma, else a parenthesised value;
  // "[...]" is always a list.
  PyValue parse_sequence(int depth) {
    if (depth + 1 > kMaxNesting)
      complain("nesting deeper than " + std::to_string(kMaxNesting) + " levels", pos_);
    PyValue v;
    v.pos = pos_;
    const bool tuple = s_[pos_] == '(';
    const char close = tuple ? ')' : ']';
    v.kind = tuple ? PyValue::Kind::kTuple : PyValue::Kind::kList;
    ++pos_;
    bool comma = false;
    while (true) {
      skip_space();
      if (peek() == static_cast<unsigned char>(close)) break;
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        comma = true;
        continue;
      }
      if (peek() != static_cast<unsigned char>(close))
        complain(std::string("expected ',' or '") + close + "', found " + describe(pos_), pos_);
    }
    ++pos_;
    if (tuple && !comma && v.items.size() == 1) {
      PyValue inner = std::move(v.items[0]);
      return inner;
    }
    return v;
  }

  std::string_view s_;
  std::string_view where_;
  std::size_t pos_ = 0;
};

// Resolves 'descr' to an input type, or throws 603 saying what to do.
DType resolve_dtype(const std::string& descr, NpyRawDType raw, std::string_view where) {
  char order = 0;
  std::string_view type = descr;
  if (!type.empty() && (type[0] == '<' || type[0] == '>' || type[0] == '|' || type[0] == '=')) {
    order = type[0];
    type.remove_prefix(1);
  }
  const std::string head = "unsupported dtype " + quoted_input(descr);
  if (type == "f8")
    fail(kBadDType, where,
         head + ": float64 is not a capture dtype; convert to float32 (arr.astype(np.float32))");
  if (!type.empty() && type[0] == 'O')
    fail(kBadDType, where,
         head +
             ": object arrays hold pickled Python objects, which are never unpickled; save a "
             "float32, float16 or bfloat16 array");
  const bool void2 = type == "V2";
  const bool known = type == "f4" || type == "f2" || type == "u2" || void2;
  const bool order_ok = order == '<' || order == '=' || (void2 && order == '|');
  if (known && order == '>' && !void2)
    fail(kBadDType, where,
         head + ": big-endian data is not supported; convert to little-endian with arr.astype('<" +
             std::string(type) + "')");
  if (!known || !order_ok)
    fail(kBadDType, where,
         head +
             "; captures must be float32 ('<f4'), float16 ('<f2') or bfloat16 (saved as '<V2' "
             "or '<u2' and read with --npy-dtype bf16)");
  if (type == "f4") return DType::kF32;
  if (type == "f2") return DType::kF16;
  if (raw != NpyRawDType::kBf16) {
    if (void2)
      fail(kBadDType, where,
           head +
               ": 2 raw bytes per element (how np.save writes ml_dtypes.bfloat16); pass "
               "--npy-dtype bf16 to read them as bfloat16");
    fail(kBadDType, where,
         head +
             ": uint16; if it holds bfloat16 bit patterns (arr.view(np.uint16)), pass "
             "--npy-dtype bf16 to read them as bfloat16");
  }
  return DType::kBF16;
}

}  // namespace

NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view where, NpyRawDType raw) {
  static constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.empty()) fail(kNotNpy, where, "not a .npy file: it is empty");
  for (std::size_t i = 0; i < 6 && i < bytes.size(); ++i)
    if (static_cast<unsigned char>(bytes[i]) != kMagic[i])
      fail(kNotNpy, where, "not a .npy file: it does not start with the magic string \\x93NUMPY");
  if (bytes.size() < 8)
    fail(kBadSize, where,
         "truncated: " + std::to_string(bytes.size()) +
             " bytes end inside the magic string and version");
  const auto major = static_cast<unsigned>(bytes[6]);
  const auto minor = static_cast<unsigned>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3)
    fail(kNotNpy, where,
         "not a .npy file: unknown format version " + std::to_string(major) + "." +
             std::to_string(minor) + " (known: 1.0, 2.0, 3.0)");
  const int length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t preamble = 8 + static_cast<std::uint64_t>(length_bytes);
  if (bytes.size() < preamble)
    fail(kBadSize, where,
         "truncated: " + std::to_string(bytes.size()) + " bytes end inside the " +
             std::to_string(preamble) + "-byte preamble of format version " +
             std::to_string(major) + ".0");
  const std::uint64_t header_bytes = read_le(bytes, 8, length_bytes);
  if (header_bytes > bytes.size() - preamble)
    fail(kBadSize, where,
         "truncated: header of " + std::to_string(header_bytes) + " bytes but only " +
             std::to_string(bytes.size() - preamble) + " bytes follow the header length");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + preamble), header_bytes);

  // NumPy counts decoded characters: latin-1 in versions 1 and 2, UTF-8 in version 3.
  std::size_t chars = text.size();
  if (major == 3)
    chars = static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
  if (chars > kNpyMaxHeaderChars)
    fail(kBadHeader, where,
         "bad header: " + std::to_string(chars) + " characters, more than NumPy's limit of " +
             std::to_string(kNpyMaxHeaderChars));

  LiteralParser parser(text, where);
  const auto entries = parser.parse_dict();
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [key, value] : entries) {
    const PyValue** slot = key.text == "descr"           ? &descr
                           : key.text == "fortran_order" ? &fortran
                           : key.text == "shape"         ? &shape
                                                         : nullptr;
    if (slot == nullptr) parser.complain("unexpected key " + quoted_input(key.text), key.pos);
    if (*slot != nullptr) parser.complain("key " + quoted_input(key.text) + " appears twice", key.pos);
    *slot = &value;
  }
  for (const auto& [name, slot] :
       {std::pair{"descr", descr}, std::pair{"fortran_order", fortran}, std::pair{"shape", shape}})
    if (slot == nullptr)
      fail(kBadHeader, where, std::string("bad header: missing key '") + name + "'");
  if (fortran->kind != PyValue::Kind::kBool)
    parser.complain("'fortran_order' must be True or False", fortran->pos);
  if (shape->kind != PyValue::Kind::kTuple)
    parser.complain("'shape' must be a tuple of integers", shape->pos);
  if (shape->items.size() > kNpyMaxDims)
    parser.complain("'shape' has " + std::to_string(shape->items.size()) +
                        " dimensions, more than NumPy's limit of " + std::to_string(kNpyMaxDims),
                    shape->pos);
  for (const auto& d : shape->items) {
    if (d.kind != PyValue::Kind::kInt)
      parser.complain("'shape' must be a tuple of integers", d.pos);
    if (d.text[0] == '-' && d.text.find_first_not_of("-0") != std::string::npos)
      parser.complain("'shape' dimension " + d.text + " is negative", d.pos);
  }
  if (descr->kind == PyValue::Kind::kList)
    fail(kBadDType, where,
         "unsupported dtype: structured arrays (a list of fields in 'descr') are not supported; "
         "save each field as its own array");
  if (descr->kind != PyValue::Kind::kStr)
    parser.complain("'descr' must be a dtype string", descr->pos);

  NpyArray out;
  out.descr = descr->text;
  out.dtype = resolve_dtype(out.descr, raw, where);

  std::uint64_t numel = 1;
  std::vector<std::uint64_t> dims;
  for (const auto& d : shape->items) {
    std::uint64_t dim = 0;
    for (char c : d.text) {
      if (c == '-') continue;  // "-0"
      if (__builtin_mul_overflow(dim, std::uint64_t{10}, &dim) ||
          __builtin_add_overflow(dim, static_cast<std::uint64_t>(c - '0'), &dim) ||
          dim > static_cast<std::uint64_t>(INT64_MAX))
        fail(kBadSize, where, "shape dimension " + d.text + " exceeds 2^63 - 1");
    }
    dims.push_back(dim);
    out.shape.push_back(static_cast<std::int64_t>(dim));
  }
  if (fortran->flag &&
      std::count_if(dims.begin(), dims.end(), [](std::uint64_t d) { return d > 1; }) > 1)
    fail(kBadDType, where,
         "unsupported layout: Fortran-ordered array of shape " +
             shape_text(out.shape, ShapeStyle::kTuple) +
             "; save np.ascontiguousarray(arr) instead");
  // As NumPy: the byte size of the non-zero dimensions must fit in a signed 64-bit integer, even
  // when another dimension is 0.
  std::uint64_t nonzero_bytes = dtype_size(out.dtype);
  bool overflow = false;
  for (const auto d : dims) {
    if (d == 0)
      numel = 0;
    else
      overflow |= __builtin_mul_overflow(nonzero_bytes, d, &nonzero_bytes);
  }
  if (overflow || nonzero_bytes > static_cast<std::uint64_t>(INT64_MAX))
    fail(kBadSize, where,
         "shape " + shape_text(out.shape, ShapeStyle::kTuple) + " of " + quoted_input(out.descr) +
             " is too large: its size in bytes exceeds 2^63 - 1");
  const std::uint64_t need = numel == 0 ? 0 : nonzero_bytes;
  const std::uint64_t data_start = preamble + header_bytes;
  const std::uint64_t have = bytes.size() - data_start;
  if (need != have)
    fail(kBadSize, where,
         std::string(need > have ? "truncated" : "trailing bytes") + ": shape " +
             shape_text(out.shape, ShapeStyle::kTuple) + " of " + quoted_input(out.descr) + " needs " + std::to_string(need) +
             " data bytes but the file holds " + std::to_string(have) + " after the header");
  out.data = bytes.data() + data_start;
  out.data_bytes = need;
  return out;
}

// ---------------------------------------------------------------------------------------------
// .npz: zip archives of stored members, read by StoredZip with the messages below.
// ---------------------------------------------------------------------------------------------

namespace {

void raise_npz(const ZipError& e, std::string_view where) {
  const std::string member = "member " + quoted_input(e.name);
  const std::string a = std::to_string(e.a), b = std::to_string(e.b), c = std::to_string(e.c);
  std::string what;
  switch (e.fault) {
    case ZipFault::kNoEndRecord:
      fail(kBadZip, where,
           "not a zip archive: no end of central directory record (an .npz is written by "
           "np.savez)");
    case ZipFault::kCompressed:
      fail(kCompressed, where,
           member + " is compressed (" +
               (e.a == 8 ? std::string("DEFLATE, as np.savez_compressed writes") : "method " + a) +
               "); members are mapped without copying, so only stored members can be read: save "
               "with np.savez instead");
    case ZipFault::kMultiDisk: what = "archives spanning several disks are not supported"; break;
    case ZipFault::kZip64RecordOutside:
      what = "ZIP64 end of central directory record at offset " + a +
             " does not fit before its locator at offset " + b;
      break;
    case ZipFault::kZip64RecordSignature:
      what = "no ZIP64 end of central directory record at offset " + a;
      break;
    case ZipFault::kZip64RecordSize:
      what = "ZIP64 end of central directory record at offset " + a + " declares " + b +
             " bytes, which do not fit before its locator";
      break;
    case ZipFault::kDirectoryBounds:
      what = "central directory of " + a + " bytes at offset " + b +
             " does not end where the end record begins (offset " + c + ")";
      break;
    case ZipFault::kTooManyEntries:
      what = "the end record announces " + a + " entries but the central directory holds " + b +
             " bytes";
      break;
    case ZipFault::kEntryHeaderOverrun:
    case ZipFault::kEntryOverrun: what = e.entry() + " runs past the central directory"; break;
    case ZipFault::kEntrySignature:
      what = e.entry() + " at offset " + a + " has a bad signature";
      break;
    case ZipFault::kExtraTruncated:
    case ZipFault::kExtraOverrun: what = member + ": corrupt extra field"; break;
    case ZipFault::kZip64ExtraShort:
      what = member + ": ZIP64 extra field of " + a + " bytes, " + b + " needed";
      break;
    case ZipFault::kZip64ExtraMissing:
      what = member + ": sizes or offset are 0xFFFFFFFF but there is no ZIP64 extra field";
      break;
    case ZipFault::kUnusedDirectoryBytes:
      what = a + " unused bytes at the end of the central directory";
      break;
    case ZipFault::kEncrypted: what = member + " is encrypted"; break;
    case ZipFault::kSizeMismatch:
      what = member + " is stored but its compressed size " + a + " differs from its size " + b;
      break;
    case ZipFault::kLocalOutside:
      what = member + ": local header at offset " + a +
             " lies outside the member area (before offset " + b + ")";
      break;
    case ZipFault::kLocalSignature:
      what = member + ": bad local header signature at offset " + a;
      break;
    case ZipFault::kLocalName:
      what = member + ": the local header at offset " + a + " names another file";
      break;
    case ZipFault::kDataOverrun:
      what = member + ": data of " + a + " bytes at offset " + b +
             " runs past the member area (offset " + c + ")";
      break;
  }
  fail(kBadZip, where, "bad zip archive: " + what);
}

constexpr ZipDialect kNpz{.raise = raise_npz,
                          .strict_end_records = true,
                          .exact_directory = true,
                          .lazy_extra_fields = true,
                          .local_name_first = false};

struct Member {
  std::string zip_name;
  std::uint64_t header_offset = 0;
  std::span<const std::byte> data;
};

}  // namespace

std::vector<std::pair<std::string, std::span<const std::byte>>> list_npz(
    std::span<const std::byte> bytes, std::string_view where) {
  auto bad = [&](const std::string& what) { fail(kBadZip, where, "bad zip archive: " + what); };
  StoredZip zip(bytes, where, kNpz);
  std::vector<Member> members;
  members.reserve(static_cast<std::size_t>(zip.entry_count()));
  for (std::uint64_t i = 0; i < zip.entry_count(); ++i) {
    StoredZipEntry e = zip.next_entry();
    const auto data = zip.data(e);  // every member is checked, in directory order
    members.push_back({std::move(e.name), e.local_offset, data});
  }
  zip.finish();

  // Members may not share bytes: each one's data ends before the next local header.
  const auto end_of = [&](const Member* m) {
    return static_cast<std::uint64_t>(m->data.data() - bytes.data()) + m->data.size();
  };
  std::vector<const Member*> by_offset;
  for (const auto& m : members) by_offset.push_back(&m);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Member* a, const Member* b) { return a->header_offset < b->header_offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (end_of(by_offset[i - 1]) > by_offset[i]->header_offset)
      bad("members " + quoted_input(by_offset[i - 1]->zip_name) + " and " +
          quoted_input(by_offset[i]->zip_name) + " overlap");

  std::vector<std::pair<std::string, std::span<const std::byte>>> out;
  std::map<std::string, std::string> seen;  // array name -> zip name
  for (const auto& m : members) {
    std::string name = m.zip_name;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    const auto [it, inserted] = seen.emplace(name, m.zip_name);
    if (!inserted)
      bad("members " + quoted_input(it->second) + " and " + quoted_input(m.zip_name) + " both hold array " +
          quoted_input(name));
    out.emplace_back(std::move(name), m.data);
  }
  return out;
}

}  // namespace fp8a
