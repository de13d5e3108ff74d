// parse_safetensors: valid layouts and every fp8a.safetensors.3xx refusal, messages word for word.
// Files are built in the test (safetensors_builder.hpp) from hand-written header JSON, so the
// headers can be as broken as needed.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/safetensors.hpp"
#include "datasets/safetensors_builder.hpp"
#include "core/error.hpp"

using fp8a::Error;
using fp8a::parse_safetensors;
using fp8a::test::raw_file;
using fp8a::test::raw_file_with_length;
using fp8a::test::to_bytes;
using fp8a::test::zero_bytes;

namespace {

// Name passed to the parser; it only appears in messages.
constexpr const char* kFile = "t.safetensors";
// The 8-byte little-endian header length that starts every safetensors file.
constexpr std::uint64_t kLengthField = 8;
// The reference's MAX_HEADER_SIZE (safetensors/src/tensor.rs).
constexpr std::uint64_t kMaxHeader = 100'000'000;
// "hello wo" read as a little-endian u64: 0x6F77206F6C6C6568.
constexpr const char* kHelloText = "hello world, not safetensors";
constexpr std::uint64_t kHelloLength = 0x6F77206F6C6C6568ULL;
static_assert(kHelloLength == 8031924123371070824ULL);

fp8a::SafetensorsFile parse(const std::vector<std::byte>& bytes) {
  return parse_safetensors(std::span<const std::byte>(bytes), kFile);
}

std::string msg(const char* id, const std::string& text) {
  return std::string("[fp8a.safetensors.") + id + "] " + kFile + ": " + text;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Accepted files
// ---------------------------------------------------------------------------------------------

TEST_CASE("a valid file: entries sorted by name with absolute offsets, metadata read") {
  // Written in offset order z.weight (BF16 [2,2] = 8 bytes at 0) then a.activation (F32 [3] =
  // 12 bytes at 8), so the name order the parser returns differs from the file order.
  const std::string header =
      R"({"__metadata__":{"step":"100","note":"hi"},)"
      R"("z.weight":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("a.activation":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}})";
  constexpr std::uint64_t kDataBytes = 20;
  const auto bytes = raw_file(header, zero_bytes(kDataBytes));
  const std::uint64_t data_start = kLengthField + header.size();

  const auto f = parse(bytes);
  REQUIRE(f.entries.size() == 2);
  const auto& a = f.entries[0];
  CHECK(a.name == "a.activation");
  CHECK(a.dtype_name == "F32");
  REQUIRE(a.dtype.has_value());
  CHECK(*a.dtype == fp8a::DType::kF32);
  CHECK(a.shape == std::vector<std::int64_t>{3});
  CHECK(a.numel == 3);
  CHECK(a.begin == data_start + 8);
  CHECK(a.end == data_start + 20);
  CHECK(a.end == bytes.size());

  const auto& z = f.entries[1];
  CHECK(z.name == "z.weight");
  CHECK(z.dtype_name == "BF16");
  REQUIRE(z.dtype.has_value());
  CHECK(*z.dtype == fp8a::DType::kBF16);
  CHECK(z.shape == std::vector<std::int64_t>{2, 2});
  CHECK(z.numel == 4);
  CHECK(z.begin == data_start);
  CHECK(z.end == data_start + 8);

  const std::map<std::string, std::string> expected_meta{{"note", "hi"}, {"step", "100"}};
  CHECK(f.metadata == expected_meta);
}

TEST_CASE("F16 is recognised; a file without __metadata__ has an empty metadata map") {
  const std::string header = R"({"h":{"dtype":"F16","shape":[1,3],"data_offsets":[0,6]}})";
  const auto f = parse(raw_file(header, zero_bytes(6)));
  REQUIRE(f.entries.size() == 1);
  REQUIRE(f.entries[0].dtype.has_value());
  CHECK(*f.entries[0].dtype == fp8a::DType::kF16);
  CHECK(f.entries[0].numel == 3);
  CHECK(f.metadata.empty());
}

TEST_CASE("header padded with whitespace on both sides is accepted") {
  // The reference writer pads the header with trailing spaces to a multiple of 8 bytes.
  const std::string header =
      " \n\t" R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})" "        \n";
  const auto f = parse(raw_file(header, zero_bytes(4)));
  REQUIRE(f.entries.size() == 1);
  CHECK(f.entries[0].name == "t");
  CHECK(f.entries[0].begin == kLengthField + header.size());
  CHECK(f.entries[0].end == kLengthField + header.size() + 4);
}

TEST_CASE("zero tensors: metadata only, and the empty object, are accepted") {
  const auto meta_only = parse(raw_file(R"({"__metadata__":{"format":"pt"}})"));
  CHECK(meta_only.entries.empty());
  const std::map<std::string, std::string> expected{{"format", "pt"}};
  CHECK(meta_only.metadata == expected);

  const auto empty = parse(raw_file("{}"));
  CHECK(empty.entries.empty());
  CHECK(empty.metadata.empty());
}

TEST_CASE("a scalar (shape []) holds one element") {
  const std::string header = R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  const auto f = parse(raw_file(header, zero_bytes(4)));
  REQUIRE(f.entries.size() == 1);
  CHECK(f.entries[0].shape.empty());
  CHECK(f.entries[0].numel == 1);
  CHECK(f.entries[0].end - f.entries[0].begin == 4);
}

TEST_CASE("known dtypes fp8-advisor does not evaluate parse with dtype unset") {
  // I64: 2 elements x 8 bytes.
  const std::string header = R"({"i":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
  const auto f = parse(raw_file(header, zero_bytes(16)));
  REQUIRE(f.entries.size() == 1);
  CHECK(f.entries[0].dtype_name == "I64");
  CHECK_FALSE(f.entries[0].dtype.has_value());
  CHECK(f.entries[0].numel == 2);

  // Sub-byte types: F4 [4] = 16 bits = 2 bytes, F6_E2M3 [4] = 24 bits = 3 bytes.
  const std::string sub =
      R"({"f4":{"dtype":"F4","shape":[4],"data_offsets":[0,2]},)"
      R"("f6":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[2,5]}})";
  const auto g = parse(raw_file(sub, zero_bytes(5)));
  REQUIRE(g.entries.size() == 2);
  CHECK(g.entries[0].dtype_name == "F4");
  CHECK_FALSE(g.entries[0].dtype.has_value());
  CHECK(g.entries[1].dtype_name == "F6_E2M3");
  CHECK(g.entries[1].end - g.entries[1].begin == 3);
}

TEST_CASE("zero-sized tensors may share an offset with their neighbours") {
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
      R"("e":{"dtype":"F32","shape":[0,7],"data_offsets":[2,2]},)"
      R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})";
  const auto f = parse(raw_file(header, zero_bytes(3)));
  REQUIRE(f.entries.size() == 3);
  CHECK(f.entries[2].name == "e");
  CHECK(f.entries[2].numel == 0);
  CHECK(f.entries[2].begin == f.entries[2].end);
}

// ---------------------------------------------------------------------------------------------
// 301-303: the length field
// ---------------------------------------------------------------------------------------------

TEST_CASE("301: fewer than 8 bytes") {
  CHECK_THROWS_WITH_AS(parse(to_bytes("12345")),
                       msg("301",
                           "not a safetensors file: 5 bytes, shorter than the 8-byte header "
                           "length")
                           .c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(parse({}),
                       msg("301",
                           "not a safetensors file: 0 bytes, shorter than the 8-byte header "
                           "length")
                           .c_str(),
                       Error);
  try {
    parse(to_bytes("1234567"));
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.id() == "fp8a.safetensors.301");
    CHECK(e.exit_code() == fp8a::kExitInput);
  }
}

TEST_CASE("302: header length over 100,000,000 bytes") {
  CHECK_THROWS_WITH_AS(
      parse(to_bytes(kHelloText)),
      msg("302", "not a safetensors file: header length " + std::to_string(kHelloLength) +
                     " exceeds the limit of 100000000 bytes")
          .c_str(),
      Error);
  // One past the limit is refused as too large even though the file is short too.
  CHECK_THROWS_WITH_AS(parse(raw_file_with_length(kMaxHeader + 1, "{}", {})),
                       msg("302",
                           "not a safetensors file: header length 100000001 exceeds the limit of "
                           "100000000 bytes")
                           .c_str(),
                       Error);
  // The limit itself is allowed, so that file fails on the next check.
  CHECK_THROWS_WITH_AS(parse(raw_file_with_length(kMaxHeader, "{}", {})),
                       msg("303",
                           "truncated: header of 100000000 bytes but only 2 bytes follow the "
                           "length field")
                           .c_str(),
                       Error);
}

TEST_CASE("303: header length past the end of the file") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file_with_length(64, "{}", {})),
      msg("303", "truncated: header of 64 bytes but only 2 bytes follow the length field").c_str(),
      Error);
  // Exactly the 8 bytes of the length field, declaring a 1-byte header.
  CHECK_THROWS_WITH_AS(
      parse(raw_file_with_length(1, "", {})),
      msg("303", "truncated: header of 1 bytes but only 0 bytes follow the length field").c_str(),
      Error);
}

// ---------------------------------------------------------------------------------------------
// 304: JSON
// ---------------------------------------------------------------------------------------------

TEST_CASE("304: header that is not valid JSON") {
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"a":)")),
                       msg("304",
                           "header is not valid JSON: parse error at line 1, column 6: syntax "
                           "error while parsing value - unexpected end of input; expected '[', "
                           "'{', or a literal")
                           .c_str(),
                       Error);
  // A zero-length header.
  CHECK_THROWS_WITH_AS(parse(raw_file("")),
                       msg("304",
                           "header is not valid JSON: parse error at line 1, column 1: syntax "
                           "error while parsing value - unexpected end of input; expected '[', "
                           "'{', or a literal")
                           .c_str(),
                       Error);
  // Anything after the object other than whitespace.
  CHECK_THROWS_WITH_AS(parse(raw_file("{} x")),
                       msg("304",
                           "header is not valid JSON: parse error at line 1, column 4: syntax "
                           "error while parsing value - invalid literal; last read: '{} x'; "
                           "expected end of input")
                           .c_str(),
                       Error);
}

TEST_CASE("304: invalid UTF-8 inside a string") {
  // 0xC3 opens a two-byte sequence; '(' (0x28) is not a continuation byte.
  const std::string header = "{\"__metadata__\":{\"k\":\"\xC3(\"}}";
  CHECK_THROWS_WITH_AS(parse(raw_file(header)),
                       msg("304",
                           "header is not valid JSON: parse error at line 1, column 24: syntax "
                           "error while parsing value - invalid string: ill-formed UTF-8 byte; "
                           "last read: '\"\\xc3('")
                           .c_str(),
                       Error);
}

TEST_CASE("304: header that is JSON but not an object") {
  const std::string expected = msg("304", "header is not a JSON object");
  CHECK_THROWS_WITH_AS(parse(raw_file("[1,2]")), expected.c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file("\"tensors\"")), expected.c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file("null")), expected.c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// 305: tensor entry fields
// ---------------------------------------------------------------------------------------------

TEST_CASE("305: malformed tensor entries") {
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"t":[1]})")),
                       msg("305", "tensor 't': entry is not an object").c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", zero_bytes(4))),
                       msg("305", "tensor 't': missing or non-string \"dtype\"").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", zero_bytes(4))),
      msg("305", "tensor 't': missing or non-string \"dtype\"").c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", zero_bytes(4))),
                       msg("305", "tensor 't': missing or non-array \"shape\"").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", zero_bytes(4))),
      msg("305", "tensor 't': missing or non-array \"shape\"").c_str(), Error);
}

TEST_CASE("305: data_offsets must be two non-negative integers") {
  const std::string expected =
      msg("305", "tensor 't': \"data_offsets\" must be two non-negative integers");
  const char* bad_offsets[] = {
      R"({"t":{"dtype":"U8","shape":[4]}})",                               // missing
      R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[4]}})",            // one number
      R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4,8]}})",        // three numbers
      R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,-4]}})",         // negative
      R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4.0]}})",        // not an integer
      R"({"t":{"dtype":"U8","shape":[4],"data_offsets":["0","4"]}})",      // strings
      R"({"t":{"dtype":"U8","shape":[4],"data_offsets":{"0":4}}})",        // not an array
  };
  for (const char* header : bad_offsets) {
    CAPTURE(header);
    CHECK_THROWS_WITH_AS(parse(raw_file(header, zero_bytes(4))), expected.c_str(), Error);
  }
}

TEST_CASE("305: shape entries must be non-negative integers") {
  const std::string expected = msg("305", "tensor 't': shape entries must be non-negative integers");
  const char* bad_shapes[] = {
      R"({"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})",
      R"({"t":{"dtype":"U8","shape":[2,-2],"data_offsets":[0,4]}})",
      R"({"t":{"dtype":"U8","shape":[4.0],"data_offsets":[0,4]}})",
      R"({"t":{"dtype":"U8","shape":["4"],"data_offsets":[0,4]}})",
  };
  for (const char* header : bad_shapes) {
    CAPTURE(header);
    CHECK_THROWS_WITH_AS(parse(raw_file(header, zero_bytes(4))), expected.c_str(), Error);
  }
}

// ---------------------------------------------------------------------------------------------
// 306: __metadata__
// ---------------------------------------------------------------------------------------------

TEST_CASE("306: __metadata__ must be an object of strings") {
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"__metadata__":{"step":5}})")),
                       msg("306", "__metadata__ value of 'step' is not a string").c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"__metadata__":{"ok":"1","tags":["a"]}})")),
                       msg("306", "__metadata__ value of 'tags' is not a string").c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"__metadata__":"step=5"})")),
                       msg("306", "__metadata__ must be an object of strings").c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"__metadata__":["step","5"]})")),
                       msg("306", "__metadata__ must be an object of strings").c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// 307: dtype
// ---------------------------------------------------------------------------------------------

TEST_CASE("307: dtype the reference does not know") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", zero_bytes(16))),
      msg("307", "tensor 't': unknown dtype 'F128'").c_str(), Error);
  // Names are case-sensitive, as the reference's serde enum variants are.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}})", zero_bytes(2))),
      msg("307", "tensor 't': unknown dtype 'bf16'").c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// 308: offsets must tile the data buffer
// ---------------------------------------------------------------------------------------------

TEST_CASE("308: end before begin") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", zero_bytes(4))),
      msg("308", "tensor 't': data_offsets [4, 0] end before they begin").c_str(), Error);
}

TEST_CASE("308: gaps, overlaps and a first tensor not at 0") {
  // a covers [0,4); b starts at 8: bytes 4..8 belong to nobody.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
                     zero_bytes(12))),
      msg("308", "tensor 'b': data starts at offset 8 but the previous tensor ends at 4 (gap)")
          .c_str(),
      Error);
  // b starts at 2, inside a.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                     zero_bytes(6))),
      msg("308", "tensor 'b': data starts at offset 2 but the previous tensor ends at 4 (overlap)")
          .c_str(),
      Error);
  // Two tensors over the same bytes.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                     zero_bytes(4))),
      msg("308", "tensor 'b': data starts at offset 0 but the previous tensor ends at 4 (overlap)")
          .c_str(),
      Error);
  // The only tensor starts at 4.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", zero_bytes(8))),
      msg("308", "tensor 'a': data starts at offset 4 but the previous tensor ends at 0 (gap)")
          .c_str(),
      Error);
}

// ---------------------------------------------------------------------------------------------
// 309: shape x dtype vs byte length
// ---------------------------------------------------------------------------------------------

TEST_CASE("309: byte length differs from shape times dtype size") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", zero_bytes(4))),
      msg("309", "tensor 't': shape [2] of F32 needs 8 bytes but data_offsets span 4").c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,24]}})",
                     zero_bytes(24))),
      msg("309", "tensor 't': shape [2,3] of BF16 needs 12 bytes but data_offsets span 24").c_str(),
      Error);
}

TEST_CASE("309: shape products that overflow 64 bits") {
  // 2^32 * 2^32 = 2^64 overflows already in the element count.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(
          R"({"t":{"dtype":"U8","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})")),
      msg("309", "tensor 't': shape [4294967296,4294967296,4] overflows").c_str(), Error);
  // 2^61 elements fit, but 2^61 * 32 bits = 2^66 does not.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,0]}})")),
      msg("309", "tensor 't': shape [2305843009213693952] overflows").c_str(), Error);
}

TEST_CASE("309: sub-byte dtype with a partial last byte") {
  // F4 is 4 bits: 3 elements are 12 bits.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", zero_bytes(2))),
      msg("309", "tensor 't': shape does not fill a whole number of bytes").c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// 310: the data buffer must end where the last tensor ends
// ---------------------------------------------------------------------------------------------

TEST_CASE("310: trailing bytes after the last tensor") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", zero_bytes(5))),
      msg("310", "trailing bytes: tensors end at 4 data bytes but the file holds 5").c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      parse(raw_file("{}", zero_bytes(3))),
      msg("310", "trailing bytes: tensors end at 0 data bytes but the file holds 3").c_str(), Error);
}

TEST_CASE("310: data shorter than the tensors need") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", zero_bytes(4))),
      msg("310", "truncated: tensors need 8 data bytes but the file holds 4").c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// 311: duplicate names
// ---------------------------------------------------------------------------------------------

TEST_CASE("311: a tensor name twice in the header") {
  // Same offsets both times, so only the duplicate itself is wrong.
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                     R"("t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                     zero_bytes(4))),
      msg("311", "tensor name 't' appears twice").c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// Where a lenient JSON parser would disagree with the reference (found in review)
// ---------------------------------------------------------------------------------------------

TEST_CASE("304: a NUL byte or a byte-order mark in the header") {
  using namespace std::string_literals;
  // nlohmann stops at NUL: without the check only "a" would be seen and "b" hidden.
  const std::string with_nul =
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})"s + '\0' + R"({"b":1})";
  CHECK_THROWS_WITH_AS(parse(raw_file(with_nul, zero_bytes(4))),
                       msg("304", "header is not valid JSON: NUL byte at header offset 53").c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(parse(raw_file("\xEF\xBB\xBF{}")),
                       msg("304", "header is not valid JSON: it starts with a byte-order mark").c_str(),
                       Error);
}

TEST_CASE("repeated keys anywhere are refused") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"F32","dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                     zero_bytes(4))),
      msg("305", "tensor 't': field 'dtype' appears twice").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"__metadata__":{"step":"1","step":"2"}})")),
      msg("306", "__metadata__ key 'step' appears twice").c_str(), Error);
  CHECK_THROWS_WITH_AS(parse(raw_file(R"({"__metadata__":{},"__metadata__":{}})")),
                       msg("311", "__metadata__ appears twice").c_str(), Error);
}

TEST_CASE("__metadata__: null means no metadata") {
  const auto f = parse(raw_file(R"({"__metadata__":null})"));
  CHECK(f.metadata.empty());
  CHECK(f.entries.empty());
}

TEST_CASE("309: a dimension above 2^63 - 1") {
  CHECK_THROWS_WITH_AS(
      parse(raw_file(R"({"t":{"dtype":"U8","shape":[0,9223372036854775808],"data_offsets":[0,0]}})")),
      msg("309", "tensor 't': shape dimension 9223372036854775808 exceeds 2^63 - 1").c_str(), Error);
}

// ---------------------------------------------------------------------------------------------
// A wide header (issue 25: the parse was quadratic in the entries; its time is in bench/)
// ---------------------------------------------------------------------------------------------

TEST_CASE("a header of 100,000 entries: every entry read, a repeat of the last name still found") {
  constexpr std::uint64_t kEntries = 100'000;
  std::string header = R"({"__metadata__":{"step":"7"})";
  const auto entry = [](std::uint64_t i, std::uint64_t offset) {
    return ",\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
           std::to_string(offset) + "," + std::to_string(offset + 1) + "]}";
  };
  for (std::uint64_t i = 0; i < kEntries; ++i) header += entry(i, i);
  const auto f = parse(raw_file(header + "}", zero_bytes(kEntries)));
  REQUIRE(f.entries.size() == kEntries);
  CHECK(f.metadata.at("step") == "7");
  const std::uint64_t data_start = kLengthField + header.size() + 1;  // offsets are absolute
  std::vector<bool> seen(kEntries, false);
  std::uint64_t wrong = 0;  // entries not t<i> at data [i, i + 1), or seen twice
  for (const auto& e : f.entries) {
    const std::uint64_t i = std::stoull(e.name.substr(1));
    if (i >= kEntries || seen[i] || e.begin != data_start + i || e.end != data_start + i + 1 || e.numel != 1) {
      ++wrong;
      continue;
    }
    seen[i] = true;
  }
  CHECK(wrong == 0);
  CHECK_THROWS_WITH_AS(parse(raw_file(header + entry(kEntries - 1, kEntries) + "}", zero_bytes(kEntries + 1))),
                       msg("311", "tensor name 't99999' appears twice").c_str(), Error);
}
