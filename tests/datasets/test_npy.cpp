// parse_npy / list_npz: files written by NumPy itself (tests/golden/npy, made by
// scripts/make_npy_fixtures.py; expected.json holds what NumPy wrote and the first values), plus
// files and zip archives built here byte by byte so they can be as broken as needed. Every
// fp8a.npy.6xx refusal is checked with its exact message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "datasets/npy.hpp"
#include "core/error.hpp"

using fp8a::DType;
using fp8a::Error;
using fp8a::NpyArray;
using fp8a::NpyRawDType;
using fp8a::parse_npy;

namespace {

// Names passed to the readers; they only appear in messages.
constexpr const char* kNpy = "t.npy";
constexpr const char* kNpz = "t.npz";

using Bytes = std::vector<std::byte>;

Bytes to_bytes(std::string_view s) {
  Bytes out;
  for (char c : s) out.push_back(static_cast<std::byte>(static_cast<unsigned char>(c)));
  return out;
}

void append(Bytes* out, const Bytes& more) { out->insert(out->end(), more.begin(), more.end()); }

void put_le(Bytes* out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

void patch_le(Bytes* out, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) (*out)[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

std::uint64_t get_le(const Bytes& b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(b[at + i]);
  return v;
}

std::string fixture_path(const std::string& name) {
  return std::string(FP8A_SOURCE_DIR) + "/tests/golden/npy/" + name;
}

Bytes read_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing fixture " << name << " (run scripts/make_npy_fixtures.py)");
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return to_bytes(s);
}

const nlohmann::json& expected_json() {
  static const nlohmann::json j = [] {
    std::ifstream in(fixture_path("expected.json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
  }();
  return j;
}

// A .npy file: magic, version major.0, header length (2 bytes for 1.0, else 4), header as given
// (no padding added), data.
Bytes npy(std::string_view header, const Bytes& data = {}, int major = 1) {
  Bytes out = to_bytes("\x93NUMPY");
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  put_le(&out, header.size(), major == 1 ? 2 : 4);
  append(&out, to_bytes(header));
  append(&out, data);
  return out;
}

// The header NumPy writes (keys sorted, trailing ", " before '}'), without padding.
std::string header(std::string_view descr, std::string_view shape,
                   std::string_view fortran = "False") {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(fortran) +
         ", 'shape': " + std::string(shape) + ", }\n";
}

NpyArray parse(const Bytes& bytes, NpyRawDType raw = NpyRawDType::kNone, const char* where = kNpy) {
  return parse_npy(std::span<const std::byte>(bytes), where, raw);
}

std::string msg(const char* id, const std::string& where, const std::string& text) {
  return std::string("[fp8a.npy.") + id + "] " + where + ": " + text;
}
std::string msg(const char* id, const std::string& text) { return msg(id, kNpy, text); }

// Message of a header complaint at a header offset.
std::string bad_header(const std::string& text, std::size_t at) {
  return msg("602", "bad header: " + text + " at header offset " + std::to_string(at));
}

std::string thrown(const Bytes& bytes, NpyRawDType raw = NpyRawDType::kNone) {
  try {
    parse(bytes, raw);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::int64_t> shape_of(const nlohmann::json& j) {
  return j.get<std::vector<std::int64_t>>();
}

DType dtype_of_descr(const std::string& descr) {
  if (descr.substr(1) == "f4") return DType::kF32;
  if (descr.substr(1) == "f2") return DType::kF16;
  return DType::kBF16;
}

// Checks an array against its expected.json entry: descr, shape, dtype, sizes, values.
void check_array(const NpyArray& a, const nlohmann::json& want) {
  const auto shape = shape_of(want["shape"]);
  CHECK(a.descr == want["descr"].get<std::string>());
  CHECK(a.shape == shape);
  CHECK(a.dtype == dtype_of_descr(a.descr));
  std::uint64_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::uint64_t>(d);
  CHECK(a.data_bytes == numel * fp8a::dtype_size(a.dtype));
  const auto view = fp8a::make_tensor_view(a.data, a.dtype, a.shape);
  CHECK(static_cast<std::uint64_t>(view.numel()) == numel);
  const auto& values = want["values"];
  REQUIRE(values.size() == std::min<std::uint64_t>(numel, 16));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto expected = static_cast<float>(values[i].get<double>());
    const float got = view.load_float(static_cast<std::int64_t>(i));
    INFO("element " << i);
    CHECK(got == expected);
    CHECK(std::signbit(got) == std::signbit(expected));
  }
}

NpyRawDType raw_of(const nlohmann::json& j) {
  return j["npy_dtype"].get<std::string>() == "bf16" ? NpyRawDType::kBf16 : NpyRawDType::kNone;
}

// ---------------------------------------------------------------------------------------------
// Zip archives built here (PKWARE APPNOTE 4.3.7, 4.3.12, 4.3.14-16, 4.5.3). CRCs are left 0:
// the reader does not check them.
// ---------------------------------------------------------------------------------------------

struct ZipEntry {
  ZipEntry(std::string n, Bytes d, std::uint16_t m = 0, std::uint16_t f = 0, bool z64 = false,
           std::string ln = {})
      : name(std::move(n)),
        data(std::move(d)),
        method(m),
        flags(f),
        zip64_central(z64),
        local_name(std::move(ln)) {}
  std::string name;
  Bytes data;
  std::uint16_t method;  // 0 stored, 8 deflate, ...
  std::uint16_t flags;   // general purpose bits (bit 0: encrypted)
  bool zip64_central;  // sizes and offset 0xFFFFFFFF in the central directory, real ones in a ZIP64
                       // extra
  std::string local_name;  // name in the local header when it should differ
};

struct ZipLayout {
  Bytes bytes;
  std::vector<std::size_t> local_offsets;
  std::vector<std::size_t> central_offsets;
  std::size_t cd_offset = 0;
  std::size_t cd_size = 0;
  std::size_t eocd = 0;
};

ZipLayout build_zip(const std::vector<ZipEntry>& entries, std::string_view comment = "",
                    bool zip64_end = false) {
  ZipLayout z;
  Bytes& b = z.bytes;
  for (const auto& e : entries) {
    z.local_offsets.push_back(b.size());
    const std::string& lname = e.local_name.empty() ? e.name : e.local_name;
    put_le(&b, 0x04034b50, 4);
    put_le(&b, 20, 2);  // version needed
    put_le(&b, e.flags, 2);
    put_le(&b, e.method, 2);
    put_le(&b, 0, 2);     // time
    put_le(&b, 0x21, 2);  // date 1980-01-01
    put_le(&b, 0, 4);     // crc
    put_le(&b, e.data.size(), 4);
    put_le(&b, e.data.size(), 4);
    put_le(&b, lname.size(), 2);
    put_le(&b, 0, 2);  // extra length
    append(&b, to_bytes(lname));
    append(&b, e.data);
  }
  z.cd_offset = b.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    z.central_offsets.push_back(b.size());
    Bytes extra;
    std::uint64_t size = e.data.size();
    std::uint64_t offset = z.local_offsets[i];
    if (e.zip64_central) {
      put_le(&extra, 1, 2);
      put_le(&extra, 24, 2);
      put_le(&extra, size, 8);    // uncompressed
      put_le(&extra, size, 8);    // compressed
      put_le(&extra, offset, 8);  // local header offset
      size = 0xFFFFFFFF;
      offset = 0xFFFFFFFF;
    }
    put_le(&b, 0x02014b50, 4);
    put_le(&b, 45, 2);  // made by
    put_le(&b, 20, 2);  // needed
    put_le(&b, e.flags, 2);
    put_le(&b, e.method, 2);
    put_le(&b, 0, 2);
    put_le(&b, 0x21, 2);
    put_le(&b, 0, 4);
    put_le(&b, size, 4);
    put_le(&b, size, 4);
    put_le(&b, e.name.size(), 2);
    put_le(&b, extra.size(), 2);
    put_le(&b, 0, 2);  // comment
    put_le(&b, 0, 2);  // disk
    put_le(&b, 0, 2);  // internal attributes
    put_le(&b, 0, 4);  // external attributes
    put_le(&b, offset, 4);
    append(&b, to_bytes(e.name));
    append(&b, extra);
  }
  z.cd_size = b.size() - z.cd_offset;
  std::uint64_t count = entries.size(), cd_size = z.cd_size, cd_offset = z.cd_offset;
  if (zip64_end) {
    const std::size_t record = b.size();
    put_le(&b, 0x06064b50, 4);
    put_le(&b, 44, 8);
    put_le(&b, 45, 2);
    put_le(&b, 45, 2);
    put_le(&b, 0, 4);
    put_le(&b, 0, 4);
    put_le(&b, count, 8);
    put_le(&b, count, 8);
    put_le(&b, cd_size, 8);
    put_le(&b, cd_offset, 8);
    put_le(&b, 0x07064b50, 4);  // locator
    put_le(&b, 0, 4);
    put_le(&b, record, 8);
    put_le(&b, 1, 4);
    count = 0xFFFF;
    cd_size = 0xFFFFFFFF;
    cd_offset = 0xFFFFFFFF;
  }
  z.eocd = b.size();
  put_le(&b, 0x06054b50, 4);
  put_le(&b, 0, 2);
  put_le(&b, 0, 2);
  put_le(&b, count, 2);
  put_le(&b, count, 2);
  put_le(&b, cd_size, 4);
  put_le(&b, cd_offset, 4);
  put_le(&b, comment.size(), 2);
  append(&b, to_bytes(comment));
  return z;
}

using Members = std::vector<std::pair<std::string, std::span<const std::byte>>>;

Members list(const Bytes& bytes) { return fp8a::list_npz(std::span<const std::byte>(bytes), kNpz); }

std::string zip_thrown(const Bytes& bytes) {
  try {
    list(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string bad_zip(const std::string& text) {
  return msg("605", kNpz, "bad zip archive: " + text);
}

std::string span_text(std::span<const std::byte> s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// NumPy's own files
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy: every accepted fixture reads as NumPy wrote it (descr, shape, values)") {
  const auto& accepted = expected_json()["accepted"];
  REQUIRE(accepted.size() == 10);
  for (const auto& item : accepted.items()) {
    const std::string name = item.key();
    const auto& want = item.value();
    INFO(name);
    const auto bytes = read_fixture(name);
    const auto a = parse(bytes, raw_of(want), name.c_str());
    check_array(a, want);
    // The data is the tail of the file, not a copy.
    CHECK(a.data == bytes.data() + bytes.size() - a.data_bytes);
  }
}

TEST_CASE("npy: fixture details: 2-D, 3-D, float16, 0-D, empty, versions 2.0 and 3.0") {
  const auto f32 = read_fixture("f32_2d.npy");
  const auto a = parse(f32);
  CHECK(a.descr == "<f4");
  CHECK(a.dtype == DType::kF32);
  CHECK(a.shape == std::vector<std::int64_t>{3, 4});
  CHECK(a.data_bytes == 48);
  CHECK(f32.size() == 176);  // 128-byte preamble and header (64-byte aligned), 48 data bytes
  CHECK(fp8a::make_tensor_view(a.data, a.dtype, a.shape).load_float(11) == 2.57f);

  const auto d3_bytes = read_fixture("f32_3d.npy");  // the arrays point into their bytes
  const auto d3 = parse(d3_bytes);
  CHECK(d3.shape == std::vector<std::int64_t>{2, 3, 4});
  const auto v3 = fp8a::make_tensor_view(d3.data, d3.dtype, d3.shape);
  CHECK(v3.rows == 6);
  CHECK(v3.cols == 4);
  CHECK(v3.load_float(23) == 100.0f - 23 * 8.125f);

  const auto h_bytes = read_fixture("f16.npy");
  const auto h = parse(h_bytes);
  CHECK(h.descr == "<f2");
  CHECK(h.dtype == DType::kF16);
  const auto hv = fp8a::make_tensor_view(h.data, h.dtype, h.shape);
  CHECK(hv.load_float(6) == 65504.0f);
  CHECK(hv.load_float(7) == std::ldexp(1.0f, -24));

  const auto s_bytes = read_fixture("f32_scalar.npy");
  const auto s = parse(s_bytes);
  CHECK(s.shape.empty());
  CHECK(s.data_bytes == 4);
  CHECK(fp8a::make_tensor_view(s.data, s.dtype, s.shape).load_float(0) == 3.14159265f);

  const auto e_bytes = read_fixture("f32_empty.npy");
  const auto e = parse(e_bytes);
  CHECK(e.shape == std::vector<std::int64_t>{0, 4});
  CHECK(e.data_bytes == 0);
  CHECK(fp8a::make_tensor_view(e.data, e.dtype, e.shape).numel() == 0);

  const auto v2 = read_fixture("f32_v2.npy");
  CHECK(static_cast<int>(v2[6]) == 2);
  CHECK(parse(v2).shape == std::vector<std::int64_t>{3, 4});
  const auto v3f = read_fixture("f32_v3.npy");
  CHECK(static_cast<int>(v3f[6]) == 3);
  CHECK(parse(v3f).shape == std::vector<std::int64_t>{3, 4});
}

TEST_CASE(
    "npy: bfloat16 as ml_dtypes void '<V2', plain void '|V2' and uint16 '<u2' with --npy-dtype "
    "bf16") {
  const auto& acc = expected_json()["accepted"];
  CHECK(acc["bf16_void.npy"]["descr"] == "<V2");
  CHECK(acc["bf16_void_pipe.npy"]["descr"] == "|V2");
  CHECK(acc["bf16_u16.npy"]["descr"] == "<u2");
  for (const char* name : {"bf16_void.npy", "bf16_void_pipe.npy", "bf16_u16.npy"}) {
    INFO(name);
    const auto bytes = read_fixture(name);
    const auto a = parse(bytes, NpyRawDType::kBf16);
    CHECK(a.dtype == DType::kBF16);
    const auto v = fp8a::make_tensor_view(a.data, a.dtype, a.shape);
    CHECK(v.load_float(5) == 3.3895313892515355e38f);  // largest finite bfloat16
    CHECK(v.load_float(6) == std::ldexp(1.0f, -133));  // a subnormal
    CHECK(std::signbit(v.load_float(7)));              // -0.0
  }
}

TEST_CASE("npy 603: bfloat16 files without --npy-dtype bf16") {
  CHECK(thrown(read_fixture("bf16_void.npy")) ==
        msg("603",
            "unsupported dtype '<V2': 2 raw bytes per element (how np.save writes "
            "ml_dtypes.bfloat16); pass --npy-dtype bf16 to read them as bfloat16"));
  CHECK(thrown(read_fixture("bf16_void_pipe.npy")) ==
        msg("603",
            "unsupported dtype '|V2': 2 raw bytes per element (how np.save writes "
            "ml_dtypes.bfloat16); pass --npy-dtype bf16 to read them as bfloat16"));
  CHECK(thrown(read_fixture("bf16_u16.npy")) ==
        msg("603",
            "unsupported dtype '<u2': uint16; if it holds bfloat16 bit patterns "
            "(arr.view(np.uint16)), pass --npy-dtype bf16 to read them as bfloat16"));
  try {
    parse(read_fixture("bf16_void.npy"));
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.id() == "fp8a.npy.603");
    CHECK(e.exit_code() == fp8a::kExitInput);
  }
}

TEST_CASE("npy 603: refused NumPy files: float64, big-endian, Fortran order, object, int32") {
  const auto& refused = expected_json()["refused"];
  CHECK(refused["f64.npy"]["descr"] == "<f8");
  CHECK(refused["f32_big_endian.npy"]["descr"] == ">f4");
  CHECK(refused["f32_fortran.npy"]["fortran_order"] == true);
  CHECK(refused["object.npy"]["descr"] == "|O");
  CHECK(refused["i32.npy"]["descr"] == "<i4");

  // The --npy-dtype option changes nothing for these.
  for (auto raw : {NpyRawDType::kNone, NpyRawDType::kBf16}) {
    CHECK(thrown(read_fixture("f64.npy"), raw) ==
          msg("603",
              "unsupported dtype '<f8': float64 is not a capture dtype; convert to float32 "
              "(arr.astype(np.float32))"));
    CHECK(thrown(read_fixture("f32_big_endian.npy"), raw) ==
          msg("603",
              "unsupported dtype '>f4': big-endian data is not supported; convert to "
              "little-endian with arr.astype('<f4')"));
    CHECK(thrown(read_fixture("f32_fortran.npy"), raw) ==
          msg("603",
              "unsupported layout: Fortran-ordered array of shape (2, 3); save "
              "np.ascontiguousarray(arr) instead"));
    CHECK(thrown(read_fixture("object.npy"), raw) ==
          msg("603",
              "unsupported dtype '|O': object arrays hold pickled Python objects, which are "
              "never unpickled; save a float32, float16 or bfloat16 array"));
    CHECK(thrown(read_fixture("i32.npy"), raw) ==
          msg("603",
              "unsupported dtype '<i4'; captures must be float32 ('<f4'), float16 ('<f2') or "
              "bfloat16 (saved as '<V2' or '<u2' and read with --npy-dtype bf16)"));
  }
}

// ---------------------------------------------------------------------------------------------
// 604: sizes
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy 604: truncated and extended copies of a NumPy file") {
  const auto good = read_fixture("f32_2d.npy");  // 128 bytes of preamble and header, 48 of data
  REQUIRE(good.size() == 176);

  Bytes shorter(good.begin(), good.end() - 1);
  CHECK(thrown(shorter) ==
        msg("604",
            "truncated: shape (3, 4) of '<f4' needs 48 data bytes but the file holds 47 after "
            "the header"));
  Bytes no_data(good.begin(), good.begin() + 128);
  CHECK(thrown(no_data) ==
        msg("604",
            "truncated: shape (3, 4) of '<f4' needs 48 data bytes but the file holds 0 after the "
            "header"));
  Bytes longer = good;
  longer.push_back(std::byte{0});
  CHECK(thrown(longer) ==
        msg("604",
            "trailing bytes: shape (3, 4) of '<f4' needs 48 data bytes but the file holds 49 "
            "after the header"));
  Bytes much_longer = good;
  append(&much_longer, Bytes(48));  // a second copy of the data would still be trailing bytes
  CHECK(thrown(much_longer) ==
        msg("604",
            "trailing bytes: shape (3, 4) of '<f4' needs 48 data bytes but the file holds 96 "
            "after the header"));

  // Inside the header (118 bytes declared after the 10-byte preamble).
  Bytes in_header(good.begin(), good.begin() + 60);
  CHECK(thrown(in_header) ==
        msg("604", "truncated: header of 118 bytes but only 50 bytes follow the header length"));
  // Inside the preamble.
  Bytes in_length(good.begin(), good.begin() + 9);
  CHECK(thrown(in_length) ==
        msg("604", "truncated: 9 bytes end inside the 10-byte preamble of format version 1.0"));
  Bytes v2(read_fixture("f32_v2.npy"));
  Bytes v2_in_length(v2.begin(), v2.begin() + 11);
  CHECK(thrown(v2_in_length) ==
        msg("604", "truncated: 11 bytes end inside the 12-byte preamble of format version 2.0"));
  Bytes in_version(good.begin(), good.begin() + 7);
  CHECK(thrown(in_version) ==
        msg("604", "truncated: 7 bytes end inside the magic string and version"));
  Bytes in_magic(good.begin(), good.begin() + 3);
  CHECK(thrown(in_magic) ==
        msg("604", "truncated: 3 bytes end inside the magic string and version"));
}

TEST_CASE("npy 604: data size of hand-built headers") {
  // float16 (2, 3): 12 bytes; bfloat16 (5,): 10 bytes.
  CHECK(parse(npy(header("<f2", "(2, 3)"), Bytes(12))).data_bytes == 12);
  CHECK(thrown(npy(header("<f2", "(2, 3)"), Bytes(24))) ==
        msg("604",
            "trailing bytes: shape (2, 3) of '<f2' needs 12 data bytes but the file holds 24 "
            "after the header"));
  CHECK(parse(npy(header("<V2", "(5,)"), Bytes(10)), NpyRawDType::kBf16).data_bytes == 10);
  CHECK(thrown(npy(header("<V2", "(5,)"), Bytes(9)), NpyRawDType::kBf16) ==
        msg("604",
            "truncated: shape (5,) of '<V2' needs 10 data bytes but the file holds 9 after the "
            "header"));
  // 0-D needs one element.
  CHECK(thrown(npy(header("<f4", "()"))) ==
        msg("604",
            "truncated: shape () of '<f4' needs 4 data bytes but the file holds 0 after the "
            "header"));
}

TEST_CASE("npy 604: shapes too large for 64-bit sizes") {
  CHECK(thrown(npy(header("<f4", "(9223372036854775808,)"))) ==
        msg("604", "shape dimension 9223372036854775808 exceeds 2^63 - 1"));
  CHECK(thrown(npy(header("<f4", "(2, 123456789012345678901234567890)"))) ==
        msg("604", "shape dimension 123456789012345678901234567890 exceeds 2^63 - 1"));
  const std::string too_large = " is too large: its size in bytes exceeds 2^63 - 1";
  // Each dimension fits, the byte count does not (as NumPy: at most 2^63 - 1 bytes).
  // 2^62 * 4 * 4 bytes wraps to 0 in 64 bits; 2^60 * 2 * 4 = 2^63 is one byte too many.
  CHECK(thrown(npy(header("<f4", "(4611686018427387904, 4)"))) ==
        msg("604", "shape (4611686018427387904, 4) of '<f4'" + too_large));
  CHECK(thrown(npy(header("<f4", "(1152921504606846976, 2)"))) ==
        msg("604", "shape (1152921504606846976, 2) of '<f4'" + too_large));
  CHECK(thrown(npy(header("<f4", "(9223372036854775807,)"))) ==
        msg("604", "shape (9223372036854775807,) of '<f4'" + too_large));
  CHECK(thrown(npy(header("<f2", "(9223372036854775807,)"))) ==
        msg("604", "shape (9223372036854775807,) of '<f2'" + too_large));
  // Just below the limit: (2^60 - 1) * 2 * 4 = 2^63 - 8 bytes, then only the data is missing.
  CHECK(thrown(npy(header("<f4", "(1152921504606846975, 2)"))) ==
        msg("604",
            "truncated: shape (1152921504606846975, 2) of '<f4' needs 9223372036854775800 data "
            "bytes but the file holds 0 after the header"));
  // A zero dimension empties the array, but the other dimensions must still fit (as NumPy).
  const auto z = parse(npy(header("<f4", "(0, 2305843009213693951)")));
  CHECK(z.data_bytes == 0);
  CHECK(z.shape == std::vector<std::int64_t>{0, 2305843009213693951});
  CHECK(thrown(npy(header("<f4", "(0, 2305843009213693952)"))) ==
        msg("604", "shape (0, 2305843009213693952) of '<f4'" + too_large));
  CHECK(thrown(npy(header("<f4", "(4611686018427387904, 4, 0)"))) ==
        msg("604", "shape (4611686018427387904, 4, 0) of '<f4'" + too_large));
}

// ---------------------------------------------------------------------------------------------
// 601: magic and version
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy 601: not an .npy file") {
  const std::string no_magic =
      "not a .npy file: it does not start with the magic string \\x93NUMPY";
  CHECK(thrown({}) == msg("601", "not a .npy file: it is empty"));
  CHECK(thrown(to_bytes("PK\x03\x04 a zip file")) == msg("601", no_magic));
  CHECK(thrown(to_bytes("\x93NUMPx\x01\x00")) == msg("601", no_magic));
  CHECK(thrown(to_bytes("\x93NUMPY")) ==
        msg("604", "truncated: 6 bytes end inside the magic string and version"));
  CHECK(thrown(to_bytes("NUMPY")) == msg("601", no_magic));
  // An .npz handed to the .npy reader.
  CHECK(thrown(read_fixture("arrays.npz")) == msg("601", no_magic));

  auto with_version = [](int major, int minor) {
    auto b = npy(header("<f4", "(1,)"), Bytes(4));
    b[6] = static_cast<std::byte>(major);
    b[7] = static_cast<std::byte>(minor);
    return b;
  };
  CHECK(thrown(with_version(4, 0)) ==
        msg("601", "not a .npy file: unknown format version 4.0 (known: 1.0, 2.0, 3.0)"));
  CHECK(thrown(with_version(0, 0)) ==
        msg("601", "not a .npy file: unknown format version 0.0 (known: 1.0, 2.0, 3.0)"));
  CHECK(thrown(with_version(1, 1)) ==
        msg("601", "not a .npy file: unknown format version 1.1 (known: 1.0, 2.0, 3.0)"));
  CHECK(parse(with_version(1, 0)).shape == std::vector<std::int64_t>{1});
}

// ---------------------------------------------------------------------------------------------
// 602: the header literal
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy: header variants NumPy's reader accepts") {
  const Bytes f4x2(8);
  // Key order, quotes, whitespace, trailing commas, no padding, no final newline.
  const std::vector<std::string> headers = {
      "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
      "{'descr':'<f4','fortran_order':False,'shape':(2,),}",
      "  {\n 'descr' : '<f4' ,\t'fortran_order' : False ,\r\n 'shape' : ( 2 , ) }  \n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" + std::string(100, ' ') + "\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': ((2),)}",  // (2) is just 2
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1, 1,)}",
  };
  for (const auto& h : headers) {
    INFO(h);
    const auto a = parse(npy(h, f4x2));
    CHECK(a.descr == "<f4");
    CHECK(a.data_bytes == 8);
  }
  // Versions 2.0 and 3.0 take the same header after a 4-byte length.
  CHECK(parse(npy(header("<f4", "(2,)"), f4x2, 2)).data_bytes == 8);
  CHECK(parse(npy(header("<f4", "(2,)"), f4x2, 3)).data_bytes == 8);
  // -0 is 0 in Python.
  CHECK(parse(npy(header("<f4", "(-0,)"))).shape == std::vector<std::int64_t>{0});
}

TEST_CASE("npy 602: syntax errors in the header, with their offset") {
  const Bytes d(4);
  struct Case {
    std::string header;
    std::string complaint;
    std::size_t at;
  };
  const Case cases[] = {
      {"", "expected '{' (the header must be a dict), found end of header", 0},
      {"   \n", "expected '{' (the header must be a dict), found end of header", 4},
      {"['descr', '<f4']", "expected '{' (the header must be a dict), found character '['", 0},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
       "expected ',' or '}', found end of header", 54},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
       "expected ',' or '}', found character '''", 16},
      {"{descr: '<f4'}", "expected a string key or '}', found character 'd'", 1},
      {"{'descr' '<f4'}", "expected ':', found character '''", 9},
      {"{'descr': }", "expected a value, found character '}'", 10},
      {"{'descr': '<f4', 'fortran_order': None, 'shape': (1,)}",
       "unexpected name 'None' (only True and False are allowed)", 34},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}",
       "unexpected name 'false' (only True and False are allowed)", 34},
      {"{'descr': b'<f4', 'fortran_order': False, 'shape': (1,)}",
       "unexpected name 'b' (only True and False are allowed)", 10},
      {"{'descr': \"<f4'}", "unterminated string", 10},
      {"{'descr': '<f4\n', 'fortran_order': False, 'shape': (1,)}", "unterminated string", 10},
      {"{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (1,)}",
       "escape sequences in strings are not supported", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}",
       "only plain integers are allowed, found character '.' in a number", 52},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1L,)}",
       "only plain integers are allowed, found character 'L' in a number", 52},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1_0,)}",
       "only plain integers are allowed, found character '_' in a number", 52},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", "integer with leading zeros",
       51},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-,)}",
       "expected a digit, found character ','", 52},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (+1,)}",
       "expected a value, found character '+'", 51},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}",
       "expected ',' or ')', found character '2'", 53},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
       "expected a value, found character ','", 51},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1,}",
       "expected a value, found character '}'", 53},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x",
       "unexpected character 'x' after the dict", 56},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}}",
       "unexpected character '}' after the dict", 55},
      {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\0", 56),
       "unexpected byte \\x00 after the dict", 55},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} # comment",
       "unexpected character '#' after the dict", 56},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': {}}",
       "expected a value, found character '{'", 50},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)\\\n}",
       "expected ',' or '}', found character '\\'", 54},
  };
  for (const auto& c : cases) {
    INFO(c.header);
    CHECK(thrown(npy(c.header, d)) == bad_header(c.complaint, c.at));
  }
}

TEST_CASE("npy 602/603: input bytes in a message are escaped, so it stays one printable line") {
  const Bytes d(4);
  // A damaged header: a key with a carriage return (a line break on a terminal), NUL, an escape
  // and bytes that are not UTF-8; then the same bytes in 'descr'.
  const std::string key = std::string("sh\rape\0\x1b[2J\xff\xfe", 13);
  const std::string bad_key =
      thrown(npy("{'descr': '<f4', 'fortran_order': False, '" + key + "': (1,)}", d));
  CHECK(bad_key == bad_header("unexpected key 'sh\\rape\\x00\\x1b[2J\\xff\\xfe'", 41));
  const std::string bad_descr =
      thrown(npy("{'descr': '" + key + "', 'fortran_order': False, 'shape': (1,)}", d));
  const std::string descr_head = "[fp8a.npy.603] t.npy: unsupported dtype 'sh\\rape\\x00\\x1b[2J\\xff\\xfe'; ";
  CHECK(bad_descr.rfind(descr_head, 0) == 0);
  for (const std::string& m : {bad_key, bad_descr}) {
    INFO(m);
    CHECK(std::all_of(m.begin(), m.end(), [](char c) { return c >= 0x20 && c < 0x7F; }));
  }
  // A long key is cut, with its length.
  CHECK(thrown(npy("{'" + std::string(100, 'k') + "': 1}", d)) ==
        bad_header("unexpected key '" + std::string(80, 'k') + "...' (100 bytes)", 1));
}

TEST_CASE("npy 602: keys and value types") {
  const Bytes d(4);
  CHECK(thrown(npy("{'descr': '<f4', 'shape': (1,)}", d)) ==
        msg("602", "bad header: missing key 'fortran_order'"));
  CHECK(thrown(npy("{}", d)) == msg("602", "bad header: missing key 'descr'"));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False}", d)) ==
        msg("602", "bad header: missing key 'shape'"));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", d)) ==
        bad_header("unexpected key 'extra'", 56));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'descr': '<f4'}", d)) ==
        bad_header("key 'descr' appears twice", 56));
  CHECK(thrown(npy("{'Descr': '<f4', 'fortran_order': False, 'shape': (1,)}", d)) ==
        bad_header("unexpected key 'Descr'", 1));

  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", d)) ==
        bad_header("'fortran_order' must be True or False", 34));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': 'False', 'shape': (1,)}", d)) ==
        bad_header("'fortran_order' must be True or False", 34));
  // (1) is the integer 1, not a tuple.
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", d)) ==
        bad_header("'shape' must be a tuple of integers", 51));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", d)) ==
        bad_header("'shape' must be a tuple of integers", 50));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': 1}", d)) ==
        bad_header("'shape' must be a tuple of integers", 50));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, True)}", d)) ==
        bad_header("'shape' must be a tuple of integers", 54));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': ((1,),)}", d)) ==
        bad_header("'shape' must be a tuple of integers", 51));
  CHECK(thrown(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}", d)) ==
        bad_header("'shape' dimension -1 is negative", 54));
  CHECK(thrown(npy("{'descr': 4, 'fortran_order': False, 'shape': (1,)}", d)) ==
        bad_header("'descr' must be a dtype string", 10));
  CHECK(thrown(npy("{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (1,)}", d)) ==
        bad_header("'descr' must be a dtype string", 10));

  // 64 dimensions are NumPy's limit.
  std::string dims64 = "(";
  for (int i = 0; i < 64; ++i) dims64 += "1, ";
  dims64 += ")";
  CHECK(parse(npy(header("<f4", dims64), d)).shape.size() == 64);
  const std::string dims65 = "(1, " + dims64.substr(1);
  CHECK(thrown(npy(header("<f4", dims65), d)) ==
        bad_header("'shape' has 65 dimensions, more than NumPy's limit of 64", 50));
}

TEST_CASE("npy 602: nesting is limited to 32 levels") {
  auto nested = [](int levels) {
    return "{'descr': " + std::string(levels, '[') + std::string(levels, ']') +
           ", 'fortran_order': False, 'shape': (1,)}";
  };
  // 32 levels parse (and the list is then refused as a structured dtype); 33 do not.
  CHECK(thrown(npy(nested(32), Bytes(4))).rfind("[fp8a.npy.603]", 0) == 0);
  CHECK(thrown(npy(nested(33), Bytes(4))) == bad_header("nesting deeper than 32 levels", 42));
  CHECK(thrown(npy(nested(4900), Bytes(4))) == bad_header("nesting deeper than 32 levels", 42));
}

TEST_CASE("npy 602: headers longer than NumPy's 10000 characters") {
  const Bytes d(4);
  const std::string base = header("<f4", "(1,)");
  const std::string at_limit =
      base.substr(0, base.size() - 1) + std::string(10000 - base.size(), ' ') + "\n";
  REQUIRE(at_limit.size() == 10000);
  CHECK(parse(npy(at_limit, d, 2)).data_bytes == 4);
  const std::string over = " " + at_limit;
  CHECK(thrown(npy(over, d, 2)) ==
        msg("602", "bad header: 10001 characters, more than NumPy's limit of 10000"));
  // Version 3.0 headers are UTF-8 and NumPy counts characters: 10001 bytes holding a two-byte
  // character are 10000 characters (that header then fails on its dtype); as latin-1 (version 2.0)
  // the same bytes are 10001 characters.
  const std::string utf8 = "{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (1,)}";
  const std::string padded = utf8 + std::string(10001 - utf8.size(), ' ');
  CHECK(thrown(npy(padded, d, 3)) ==
        msg("603",
            "unsupported dtype '<f4\xc3\xa9'; captures must be float32 ('<f4'), float16 ('<f2') "
            "or bfloat16 (saved as '<V2' or '<u2' and read with --npy-dtype bf16)"));
  CHECK(thrown(npy(padded, d, 2)) ==
        msg("602", "bad header: 10001 characters, more than NumPy's limit of 10000"));
  // A version 1.0 length field can say up to 65535; the limit applies once the bytes are there.
  CHECK(thrown(npy(std::string(65535, ' '), d, 1)) ==
        msg("602", "bad header: 65535 characters, more than NumPy's limit of 10000"));
}

// ---------------------------------------------------------------------------------------------
// 603: dtypes and layout
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy 603: the descr table") {
  const Bytes d4(4), d2(2), d8(8);
  const std::string must =
      "; captures must be float32 ('<f4'), float16 ('<f2') or bfloat16 (saved as '<V2' or '<u2' "
      "and read with --npy-dtype bf16)";
  // '=' (native) is taken as little-endian.
  CHECK(parse(npy(header("=f4", "(1,)"), d4)).dtype == DType::kF32);
  CHECK(parse(npy(header("=f2", "(1,)"), d2)).dtype == DType::kF16);
  CHECK(parse(npy(header("=u2", "(1,)"), d2), NpyRawDType::kBf16).dtype == DType::kBF16);
  CHECK(parse(npy(header("=V2", "(1,)"), d2), NpyRawDType::kBf16).dtype == DType::kBF16);
  // The bf16 option does not change float32/float16.
  CHECK(parse(npy(header("<f4", "(1,)"), d4), NpyRawDType::kBf16).dtype == DType::kF32);
  CHECK(parse(npy(header("<f2", "(1,)"), d2), NpyRawDType::kBf16).dtype == DType::kF16);

  struct Case {
    const char* descr;
    std::string text;
  };
  const std::string big =
      ": big-endian data is not supported; convert to little-endian with arr.astype('<";
  const Case cases[] = {
      {"<f8", ": float64 is not a capture dtype; convert to float32 (arr.astype(np.float32))"},
      {">f8", ": float64 is not a capture dtype; convert to float32 (arr.astype(np.float32))"},
      {">f4", big + "f4')"},
      {">f2", big + "f2')"},
      {">u2", big + "u2')"},
      {"|O",
       ": object arrays hold pickled Python objects, which are never unpickled; save a float32, "
       "float16 or bfloat16 array"},
      {"|O8",
       ": object arrays hold pickled Python objects, which are never unpickled; save a float32, "
       "float16 or bfloat16 array"},
      {"|f4", must},  // NumPy writes '|' only for types without byte order
      {"f4", must},
      {"<f", must},
      {"float32", must},
      {"", must},
      {">V2", must},
      {"<V4", must},
      {"|V1", must},  // ml_dtypes float8 types
      {"<f1", must},  // ml_dtypes float8_e5m2 in old versions
      {"|u1", must},
      {"<i2", must},
      {"<c8", must},
      {"<f16", must},
      {"|b1", must},
      {"<U2", must},
  };
  for (const auto& c : cases) {
    INFO(c.descr);
    for (auto raw : {NpyRawDType::kNone, NpyRawDType::kBf16})
      CHECK(thrown(npy(header(c.descr, "(1,)"), d8), raw) ==
            msg("603", "unsupported dtype '" + std::string(c.descr) + "'" + c.text));
  }
  const std::string structured =
      "unsupported dtype: structured arrays (a list of fields in 'descr') are not supported; save "
      "each field as its own array";
  CHECK(thrown(npy("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (1,)}",
                   d8)) == msg("603", structured));
  CHECK(thrown(npy("{'descr': [], 'fortran_order': False, 'shape': (1,)}", d8)) ==
        msg("603", structured));
}

TEST_CASE("npy 603: Fortran order only where it is C order too") {
  const Bytes d(24);
  // At most one dimension above 1: the same element order.
  for (const char* shape : {"()", "(6,)", "(1, 6)", "(6, 1)", "(1, 6, 1)", "(0,)"}) {
    INFO(shape);
    const auto bytes = std::string(shape) == "(0,)" ? npy(header("<f4", shape, "True"))
                       : std::string(shape) == "()" ? npy(header("<f4", shape, "True"), Bytes(4))
                                                    : npy(header("<f4", shape, "True"), d);
    CHECK_NOTHROW(parse(bytes));
  }
  CHECK(thrown(npy(header("<f4", "(2, 3)", "True"), d)) ==
        msg("603",
            "unsupported layout: Fortran-ordered array of shape (2, 3); save "
            "np.ascontiguousarray(arr) instead"));
  CHECK(thrown(npy(header("<f4", "(3, 1, 2)", "True"), d)) ==
        msg("603",
            "unsupported layout: Fortran-ordered array of shape (3, 1, 2); save "
            "np.ascontiguousarray(arr) instead"));
  // The rule looks at the shape only: an empty array with two dimensions above 1 is refused too.
  CHECK(thrown(npy(header("<f4", "(0, 2, 3)", "True"))) ==
        msg("603",
            "unsupported layout: Fortran-ordered array of shape (0, 2, 3); save "
            "np.ascontiguousarray(arr) instead"));
}

// ---------------------------------------------------------------------------------------------
// .npz
// ---------------------------------------------------------------------------------------------

TEST_CASE("npy .npz: np.savez archive: members in order, each a NumPy file") {
  const auto bytes = read_fixture("arrays.npz");
  const auto members = list(bytes);
  const auto& want = expected_json()["npz"]["arrays.npz"];
  REQUIRE(members.size() == 3);
  REQUIRE(want.size() == 3);
  for (std::size_t i = 0; i < members.size(); ++i) {
    const std::string& name = members[i].first;
    const std::span<const std::byte> span = members[i].second;
    INFO(name);
    CHECK(name == want[i]["name"].get<std::string>());
    CHECK(span.size() == want[i]["file_size"].get<std::size_t>());
    CHECK(span.data() >= bytes.data());
    CHECK(span.data() + span.size() <= bytes.data() + bytes.size());
    const std::string where = std::string(kNpz) + ":" + want[i]["zip_name"].get<std::string>();
    const auto a = parse_npy(span, where, raw_of(want[i]));
    check_array(a, want[i]);
  }
  CHECK(members[0].first == "weight");
  CHECK(members[1].first == "bias");
  CHECK(members[2].first == "act");
  // Errors inside a member name it through where.
  CHECK_THROWS_WITH_AS(parse_npy(members[2].second, "t.npz:act.npy", NpyRawDType::kNone),
                       msg("603", "t.npz:act.npy",
                           "unsupported dtype '<V2': 2 raw bytes per element (how np.save writes "
                           "ml_dtypes.bfloat16); pass --npy-dtype bf16 to read them as bfloat16")
                           .c_str(),
                       Error);
}

TEST_CASE("npy .npz 606: np.savez_compressed members are refused") {
  const auto bytes = read_fixture("compressed.npz");
  REQUIRE(expected_json()["npz"]["compressed.npz"][0]["compress_type"] == 8);
  CHECK(zip_thrown(bytes) ==
        msg("606", kNpz,
            "member 'weight.npy' is compressed (DEFLATE, as np.savez_compressed writes); members "
            "are mapped without copying, so only stored members can be read: save with np.savez "
            "instead"));
  try {
    list(bytes);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.id() == "fp8a.npy.606");
    CHECK(e.exit_code() == fp8a::kExitInput);
  }
  auto z = build_zip({{"a.npy", to_bytes("xyz"), 12}});
  CHECK(zip_thrown(z.bytes) ==
        msg("606", kNpz,
            "member 'a.npy' is compressed (method 12); members are mapped without copying, so "
            "only stored members can be read: save with np.savez instead"));
}

TEST_CASE("npy .npz: archives built here: names, empty archive, comment, ZIP64 records") {
  const auto z = build_zip({{"a.npy", to_bytes("first")},
                            {"notes.txt", to_bytes("hello")},
                            {"dir/b.npy", to_bytes("")},
                            {".npy", to_bytes("e")}});
  const auto m = list(z.bytes);
  REQUIRE(m.size() == 4);
  CHECK(m[0].first == "a");
  CHECK(span_text(m[0].second) == "first");
  CHECK(m[1].first == "notes.txt");
  CHECK(span_text(m[1].second) == "hello");
  CHECK(m[2].first == "dir/b");
  CHECK(m[2].second.empty());
  CHECK(m[3].first.empty());
  CHECK(span_text(m[3].second) == "e");

  CHECK(list(build_zip({}).bytes).empty());
  const auto commented =
      build_zip({{"a.npy", to_bytes("first")}}, "a comment with PK\x05\x06 in it");
  REQUIRE(list(commented.bytes).size() == 1);
  CHECK(span_text(list(commented.bytes)[0].second) == "first");
  const std::string long_comment(65535, 'c');
  CHECK(list(build_zip({{"a.npy", to_bytes("x")}}, long_comment).bytes).size() == 1);

  // ZIP64: central directory sizes and offset in the extra field, and the ZIP64 end records.
  const auto z64 = build_zip(
      {{"a.npy", to_bytes("first"), 0, 0, true}, {"b.npy", to_bytes("second"), 0, 0, true}}, "",
      true);
  const auto m64 = list(z64.bytes);
  REQUIRE(m64.size() == 2);
  CHECK(m64[1].first == "b");
  CHECK(span_text(m64[1].second) == "second");
}

TEST_CASE("npy .npz 605: not a zip archive") {
  const std::string none =
      "not a zip archive: no end of central directory record (an .npz is written by np.savez)";
  CHECK(zip_thrown({}) == msg("605", kNpz, none));
  CHECK(zip_thrown(read_fixture("f32_2d.npy")) == msg("605", kNpz, none));
  // Truncated by one byte: the end record no longer reaches the end of the file exactly.
  auto npz = read_fixture("arrays.npz");
  CHECK(zip_thrown(Bytes(npz.begin(), npz.end() - 1)) == msg("605", kNpz, none));
  // Extended by one byte: likewise.
  npz.push_back(std::byte{0});
  CHECK(zip_thrown(npz) == msg("605", kNpz, none));
  // A comment 1 byte longer than the 65535 a record can declare hides the record.
  auto z = build_zip({{"a.npy", to_bytes("x")}}, std::string(65535, 'c'));
  z.bytes.push_back(std::byte{'c'});
  CHECK(zip_thrown(z.bytes) == msg("605", kNpz, none));
}

TEST_CASE("npy .npz 605: corrupted central directory of the NumPy archive") {
  const auto good = read_fixture("arrays.npz");
  const std::size_t eocd = good.size() - 22;  // np.savez writes no comment
  REQUIRE(get_le(good, eocd, 4) == 0x06054b50);
  const std::size_t entries = get_le(good, eocd + 10, 2);
  const std::size_t cd_size = get_le(good, eocd + 12, 4);
  const std::size_t cd_offset = get_le(good, eocd + 16, 4);
  REQUIRE(entries == 3);
  REQUIRE(cd_offset + cd_size == eocd);

  auto b = good;
  b[cd_offset] = std::byte{'X'};
  CHECK(zip_thrown(b) == bad_zip("central directory entry 0 at offset " +
                                 std::to_string(cd_offset) + " has a bad signature"));

  b = good;
  patch_le(&b, eocd + 16, cd_offset + 1, 4);
  CHECK(zip_thrown(b) ==
        bad_zip("central directory of " + std::to_string(cd_size) + " bytes at offset " +
                std::to_string(cd_offset + 1) +
                " does not end where the end record begins (offset " + std::to_string(eocd) + ")"));
  b = good;
  patch_le(&b, eocd + 16, 0xFFFFFFF0, 4);
  CHECK(zip_thrown(b) == bad_zip("central directory of " + std::to_string(cd_size) +
                                 " bytes at offset 4294967280 "
                                 "does not end where the end record begins (offset " +
                                 std::to_string(eocd) + ")"));

  // Central directory entry sizes: 46 fixed bytes, name, extra field, comment.
  auto entry_size = [&](std::size_t at) {
    return 46 + get_le(good, at + 28, 2) + get_le(good, at + 30, 2) + get_le(good, at + 32, 2);
  };
  const std::size_t second_entry = cd_offset + entry_size(cd_offset);
  const std::size_t third_entry = second_entry + entry_size(second_entry);
  REQUIRE(third_entry + entry_size(third_entry) == eocd);

  b = good;
  patch_le(&b, eocd + 8, 4, 2);
  patch_le(&b, eocd + 10, 4, 2);
  CHECK(zip_thrown(b) ==
        bad_zip("the end record announces 4 entries but the central directory holds " +
                std::to_string(cd_size) + " bytes"));
  b = good;
  patch_le(&b, eocd + 8, 2, 2);
  patch_le(&b, eocd + 10, 2, 2);
  CHECK(zip_thrown(b) == bad_zip(std::to_string(entry_size(third_entry)) +
                                 " unused bytes at the end of the central directory"));
  b = good;
  patch_le(&b, second_entry + 28, 200, 2);  // name length past the directory
  CHECK(zip_thrown(b) == bad_zip("central directory entry 1 runs past the central directory"));
  b = good;
  patch_le(&b, eocd + 8, 65535, 2);
  patch_le(&b, eocd + 10, 65535, 2);
  CHECK(zip_thrown(b) ==
        bad_zip("the end record announces 65535 entries but the central directory holds " +
                std::to_string(cd_size) + " bytes"));
  b = good;
  patch_le(&b, eocd + 8, 2, 2);
  CHECK(zip_thrown(b) == bad_zip("archives spanning several disks are not supported"));
  b = good;
  patch_le(&b, eocd + 4, 1, 2);
  CHECK(zip_thrown(b) == bad_zip("archives spanning several disks are not supported"));

  // The local header np.savez writes: sizes 0xFFFFFFFF with a ZIP64 extra field; the reader takes
  // the sizes from the central directory. Pointing entry 0 at the wrong local header:
  b = good;
  patch_le(&b, cd_offset + 42, 1, 4);
  CHECK(zip_thrown(b) == bad_zip("member 'weight.npy': bad local header signature at offset 1"));
  const std::size_t second_local = get_le(good, second_entry + 42, 4);
  b = good;
  patch_le(&b, cd_offset + 42, second_local, 4);
  CHECK(zip_thrown(b) == bad_zip("member 'weight.npy': the local header at offset " +
                                 std::to_string(second_local) + " names another file"));
  // A size that runs into the next member.
  b = good;
  const std::size_t size0 = get_le(good, cd_offset + 24, 4);
  patch_le(&b, cd_offset + 20, size0 + 1, 4);
  patch_le(&b, cd_offset + 24, size0 + 1, 4);
  CHECK(zip_thrown(b) == bad_zip("members 'weight.npy' and 'bias.npy' overlap"));
  b = good;
  patch_le(&b, cd_offset + 20, size0 + 1, 4);
  CHECK(zip_thrown(b) ==
        bad_zip("member 'weight.npy' is stored but its compressed size " +
                std::to_string(size0 + 1) + " differs from its size " + std::to_string(size0)));
}

TEST_CASE("npy .npz 605: structural errors in archives built here") {
  const Bytes one = to_bytes("0123456789");
  {  // local header beyond the member area
    auto z = build_zip({{"a.npy", one}});
    patch_le(&z.bytes, z.central_offsets[0] + 42, z.cd_offset - 29, 4);
    CHECK(zip_thrown(z.bytes) ==
          bad_zip("member 'a.npy': local header at offset " + std::to_string(z.cd_offset - 29) +
                  " lies outside the member area (before offset " + std::to_string(z.cd_offset) +
                  ")"));
    patch_le(&z.bytes, z.central_offsets[0] + 42, 0xFFFFFFF0, 4);
    CHECK(zip_thrown(z.bytes) ==
          bad_zip("member 'a.npy': local header at offset 4294967280 lies outside the member area "
                  "(before offset " +
                  std::to_string(z.cd_offset) + ")"));
  }
  {  // data running into the central directory
    auto z = build_zip({{"a.npy", one}});
    patch_le(&z.bytes, z.central_offsets[0] + 20, 11, 4);
    patch_le(&z.bytes, z.central_offsets[0] + 24, 11, 4);
    CHECK(
        zip_thrown(z.bytes) ==
        bad_zip(
            "member 'a.npy': data of 11 bytes at offset 35 runs past the member area (offset 45)"));
    // A huge local extra length.
    z = build_zip({{"a.npy", one}});
    patch_le(&z.bytes, 28, 0xFFFF, 2);
    CHECK(zip_thrown(z.bytes) == bad_zip("member 'a.npy': data of 10 bytes at offset 65570 runs "
                                         "past the member area (offset 45)"));
  }
  {  // local and central names differ
    auto z = build_zip({{"a.npy", one, 0, 0, false, "b.npy"}});
    CHECK(zip_thrown(z.bytes) ==
          bad_zip("member 'a.npy': the local header at offset 0 names another file"));
  }
  {  // duplicate names, after removing ".npy" or not
    auto z = build_zip({{"a.npy", one}, {"a", one}});
    CHECK(zip_thrown(z.bytes) == bad_zip("members 'a.npy' and 'a' both hold array 'a'"));
    z = build_zip({{"a.npy", one}, {"b.npy", one}, {"a.npy", one}});
    CHECK(zip_thrown(z.bytes) == bad_zip("members 'a.npy' and 'a.npy' both hold array 'a'"));
  }
  {  // two entries sharing one local header
    auto z = build_zip({{"a.npy", one}, {"a.npy", one}});
    patch_le(&z.bytes, z.central_offsets[1] + 42, 0, 4);
    CHECK(zip_thrown(z.bytes) == bad_zip("members 'a.npy' and 'a.npy' overlap"));
  }
  {  // encrypted
    auto z = build_zip({{"a.npy", one, 0, 1}});
    CHECK(zip_thrown(z.bytes) == bad_zip("member 'a.npy' is encrypted"));
  }
  {  // entry name running past the central directory
    auto z = build_zip({{"a.npy", one}});
    patch_le(&z.bytes, z.central_offsets[0] + 28, 6, 2);
    CHECK(zip_thrown(z.bytes) ==
          bad_zip("central directory entry 0 runs past the central directory"));
  }
  {  // disk number in the entry
    auto z = build_zip({{"a.npy", one}});
    patch_le(&z.bytes, z.central_offsets[0] + 34, 1, 2);
    CHECK(zip_thrown(z.bytes) == bad_zip("archives spanning several disks are not supported"));
  }
}

TEST_CASE("npy .npz 605: ZIP64 fields") {
  const Bytes one = to_bytes("0123456789");
  {  // 0xFFFFFFFF without an extra field
    auto z = build_zip({{"a.npy", one}});
    patch_le(&z.bytes, z.central_offsets[0] + 24, 0xFFFFFFFF, 4);
    CHECK(zip_thrown(z.bytes) ==
          bad_zip(
              "member 'a.npy': sizes or offset are 0xFFFFFFFF but there is no ZIP64 extra field"));
  }
  {  // extra field too short for the three values it must hold
    auto z = build_zip({{"a.npy", one, 0, 0, true}});
    const std::size_t extra = z.central_offsets[0] + 46 + 5;
    patch_le(&z.bytes, extra + 2, 16, 2);  // 16 bytes declared inside the 24-byte block
    CHECK(zip_thrown(z.bytes) ==
          bad_zip("member 'a.npy': ZIP64 extra field of 16 bytes, 24 needed"));
    // Extra field length that runs past the extra block.
    patch_le(&z.bytes, extra + 2, 25, 2);
    CHECK(zip_thrown(z.bytes) == bad_zip("member 'a.npy': corrupt extra field"));
    // The ZIP64 values are used: a wrong offset there.
    z = build_zip({{"a.npy", one, 0, 0, true}});
    patch_le(&z.bytes, extra + 4 + 16, 3, 8);
    CHECK(zip_thrown(z.bytes) == bad_zip("member 'a.npy': bad local header signature at offset 3"));
    z = build_zip({{"a.npy", one, 0, 0, true}});
    patch_le(&z.bytes, extra + 4, 0x100000000ULL, 8);
    CHECK(zip_thrown(z.bytes) == bad_zip("member 'a.npy' is stored but its compressed size 10 "
                                         "differs from its size 4294967296"));
  }
  {  // ZIP64 end record
    auto z = build_zip({{"a.npy", one}}, "", true);
    const std::size_t locator = z.eocd - 20;
    const std::size_t record = locator - 56;
    REQUIRE(get_le(z.bytes, record, 4) == 0x06064b50);
    auto b = z.bytes;
    patch_le(&b, locator + 8, record + 1, 8);
    CHECK(zip_thrown(b) ==
          bad_zip("ZIP64 end of central directory record at offset " + std::to_string(record + 1) +
                  " does not fit before its locator at offset " + std::to_string(locator)));
    b = z.bytes;
    patch_le(&b, locator + 8, 0xFFFFFFFFFFFFFFFFULL, 8);
    CHECK(zip_thrown(b) ==
          bad_zip("ZIP64 end of central directory record at offset 18446744073709551615 does not "
                  "fit before its locator at offset " +
                  std::to_string(locator)));
    b = z.bytes;
    patch_le(&b, locator + 8, record - 1, 8);
    CHECK(zip_thrown(b) == bad_zip("no ZIP64 end of central directory record at offset " +
                                   std::to_string(record - 1)));
    b = z.bytes;
    patch_le(&b, record + 4, 45, 8);
    CHECK(zip_thrown(b) ==
          bad_zip("ZIP64 end of central directory record at offset " + std::to_string(record) +
                  " declares 45 bytes, which do not fit before its locator"));
    b = z.bytes;
    patch_le(&b, locator + 16, 2, 4);
    CHECK(zip_thrown(b) == bad_zip("archives spanning several disks are not supported"));
    b = z.bytes;
    patch_le(&b, record + 32, 2, 8);
    CHECK(zip_thrown(b) == bad_zip("archives spanning several disks are not supported"));
    b = z.bytes;
    patch_le(&b, record + 40, 1, 8);
    CHECK(zip_thrown(b) ==
          bad_zip("central directory of 1 bytes at offset " + std::to_string(z.cd_offset) +
                  " does not end where the end record begins (offset " + std::to_string(record) +
                  ")"));
  }
}
