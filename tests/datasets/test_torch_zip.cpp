// read_torch_save: files written by a real torch.save (tests/golden/torch/, made by
// scripts/make_torch_fixtures.py; manifest.json holds what PyTorch says they contain) and
// hand-built archives and pickles for every fp8a.torch.70x refusal, messages word for word.
// The zip writer and pickle assembler below are test-side and independent of the reader.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "datasets/torch_zip.hpp"
#include "core/error.hpp"
#include "core/tensor_view.hpp"

using fp8a::DType;
using fp8a::Error;
using fp8a::TorchTensor;

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

const fs::path kGolden = fs::path(FP8A_SOURCE_DIR) / "tests/golden/torch";
// Name passed to the reader for hand-built files; it only appears in messages.
constexpr const char* kFile = "t.pt";

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path.string());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Bytes out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

Bytes to_bytes(std::string_view s) {
  Bytes out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<TorchTensor> read(const Bytes& bytes, std::vector<std::string>* skipped = nullptr,
                              std::string_view where = kFile) {
  return fp8a::read_torch_save(std::span<const std::byte>(bytes), where, skipped);
}

std::string msg(const char* id, const std::string& text, std::string_view where = kFile) {
  return std::string("[fp8a.torch.") + id + "] " + std::string(where) + ": " + text;
}

std::vector<float> values_of(const TorchTensor& t) {
  const auto view = fp8a::make_tensor_view(t.data, t.dtype, t.shape);
  std::vector<float> out;
  for (std::int64_t i = 0; i < view.numel(); ++i) out.push_back(view.load_float(i));
  return out;
}

// ---- a stored-zip writer (APPNOTE 4.3), optionally with ZIP64 records for every size ----------
struct Member {
  std::string name;
  Bytes data;
  std::uint16_t method = 0;
  std::uint16_t flags = 0;
};

void put(Bytes* out, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

void put_text(Bytes* out, std::string_view s) {
  for (char c : s) out->push_back(static_cast<std::byte>(static_cast<unsigned char>(c)));
}

std::uint32_t crc32(const Bytes& data) {  // CRC-32/ISO-HDLC, bit by bit
  std::uint32_t c = 0xFFFFFFFF;
  for (std::byte x : data) {
    c ^= static_cast<std::uint8_t>(x);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// Valid for Python's zipfile and torch.load (checked by hand), though the reader ignores CRCs.
Bytes make_zip(const std::vector<Member>& members, bool zip64 = false) {
  Bytes out;
  std::vector<std::uint64_t> offsets;
  for (const auto& m : members) {
    offsets.push_back(out.size());
    put(&out, 0x04034b50, 4);
    put(&out, zip64 ? 45 : 20, 2);
    put(&out, m.flags, 2);
    put(&out, m.method, 2);
    put(&out, 0, 4);  // time, date
    put(&out, crc32(m.data), 4);
    put(&out, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
    put(&out, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
    put(&out, m.name.size(), 2);
    put(&out, zip64 ? 20 : 0, 2);
    put_text(&out, m.name);
    if (zip64) {
      put(&out, 1, 2);
      put(&out, 16, 2);
      put(&out, m.data.size(), 8);
      put(&out, m.data.size(), 8);
    }
    out.insert(out.end(), m.data.begin(), m.data.end());
  }
  const std::uint64_t cd_offset = out.size();
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& m = members[i];
    put(&out, 0x02014b50, 4);
    put(&out, 45, 2);
    put(&out, zip64 ? 45 : 20, 2);
    put(&out, m.flags, 2);
    put(&out, m.method, 2);
    put(&out, 0, 4);
    put(&out, crc32(m.data), 4);
    put(&out, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
    put(&out, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
    put(&out, m.name.size(), 2);
    put(&out, zip64 ? 28 : 0, 2);
    put(&out, 0, 2);  // comment
    put(&out, 0, 2);  // disk
    put(&out, 0, 2);  // internal attributes
    put(&out, 0, 4);  // external attributes
    put(&out, zip64 ? 0xFFFFFFFF : offsets[i], 4);
    put_text(&out, m.name);
    if (zip64) {
      put(&out, 1, 2);
      put(&out, 24, 2);
      put(&out, m.data.size(), 8);
      put(&out, m.data.size(), 8);
      put(&out, offsets[i], 8);
    }
  }
  const std::uint64_t cd_size = out.size() - cd_offset;
  if (zip64) {
    const std::uint64_t eocd64 = out.size();
    put(&out, 0x06064b50, 4);
    put(&out, 44, 8);
    put(&out, 45, 2);
    put(&out, 45, 2);
    put(&out, 0, 4);
    put(&out, 0, 4);
    put(&out, members.size(), 8);
    put(&out, members.size(), 8);
    put(&out, cd_size, 8);
    put(&out, cd_offset, 8);
    put(&out, 0x07064b50, 4);
    put(&out, 0, 4);
    put(&out, eocd64, 8);
    put(&out, 1, 4);
  }
  put(&out, 0x06054b50, 4);
  put(&out, 0, 2);
  put(&out, 0, 2);
  put(&out, zip64 ? 0xFFFF : members.size(), 2);
  put(&out, zip64 ? 0xFFFF : members.size(), 2);
  put(&out, zip64 ? 0xFFFFFFFF : cd_size, 4);
  put(&out, zip64 ? 0xFFFFFFFF : cd_offset, 4);
  put(&out, 0, 2);
  return out;
}

// ---- a pickle assembler
// --------------------------------------------------------------------------
struct Pickle {
  Bytes b;
  Pickle& op(std::uint8_t c) {
    b.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Pickle& ops(std::string_view s) {
    put_text(&b, s);
    return *this;
  }
  Pickle& str(std::string_view s) {  // BINUNICODE
    op('X');
    put(&b, s.size(), 4);
    return ops(s);
  }
  Pickle& int1(std::uint8_t v) { return op('K').op(v); }
  Pickle& int4(std::int32_t v) {
    op('J');
    put(&b, static_cast<std::uint32_t>(v), 4);
    return *this;
  }
  Pickle& global(std::string_view module, std::string_view name) {
    op('c').ops(module).op('\n').ops(name).op('\n');
    return *this;
  }
  Pickle& ints(const std::vector<std::int64_t>& v) {  // a tuple of ints
    op('(');
    for (auto x : v) int4(static_cast<std::int32_t>(x));
    return op('t');
  }
  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()) as
  // torch.save writes it.
  Pickle& tensor(std::string_view storage_class, std::string_view key, std::int64_t numel,
                 std::int64_t offset, const std::vector<std::int64_t>& shape,
                 const std::vector<std::int64_t>& stride, std::string_view location = "cpu") {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", storage_class).str(key).str(location);
    int4(static_cast<std::int32_t>(numel)).op('t').op('Q');
    int4(static_cast<std::int32_t>(offset)).ints(shape).ints(stride).op(0x89);
    global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  Pickle& proto2() { return op(0x80).op(2); }
  Bytes done() { return op('.').b; }
};

Bytes floats(const std::vector<float>& v) {
  Bytes out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A torch.save-like archive: archive/data.pkl, archive/data/<i> for each storage, byteorder,
// version (which torch.load requires).
Bytes archive(const Bytes& pkl, const std::vector<Bytes>& storages = {}, bool zip64 = false) {
  std::vector<Member> m{{"archive/data.pkl", pkl}};
  for (std::size_t i = 0; i < storages.size(); ++i)
    m.push_back({"archive/data/" + std::to_string(i), storages[i]});
  m.push_back({"archive/byteorder", to_bytes("little")});
  m.push_back({"archive/version", to_bytes("3\n")});
  return make_zip(m, zip64);
}

// A bare float32 tensor [2, 3] in storage "0" of 6 elements.
Bytes simple_f32_pickle() {
  return Pickle().proto2().tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1}).done();
}
const std::vector<float> kSix{1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 8.0f};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Files written by torch.save
// ---------------------------------------------------------------------------------------------

TEST_CASE(
    "torch fixtures: every file of manifest.json reads back PyTorch's keys, dtypes, shapes and "
    "values") {
  const auto manifest = nlohmann::json::parse(read_file(kGolden / "manifest.json"));
  REQUIRE(manifest["files"].size() == 11);
  for (const auto& f : manifest["files"]) {
    const std::string name = f["file"];
    INFO(name);
    const auto bytes = read_file(kGolden / name);
    std::vector<std::string> skipped;
    const auto tensors = read(bytes, &skipped, name);
    REQUIRE(tensors.size() == f["tensors"].size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& want = f["tensors"][i];
      const auto& got = tensors[i];
      INFO("tensor " << i << " " << got.key);
      CHECK(got.key == want["key"].get<std::string>());
      CHECK(std::string(fp8a::dtype_name(got.dtype)) == want["dtype"].get<std::string>());
      CHECK(got.shape == want["shape"].get<std::vector<std::int64_t>>());
      const auto values = values_of(got);
      const auto expected = want["values"].get<std::vector<double>>();
      REQUIRE(values.size() == expected.size());
      for (std::size_t k = 0; k < values.size(); ++k)
        CHECK(values[k] == static_cast<float>(expected[k]));
      // The data pointer lies inside the file, as promised.
      if (!values.empty()) {
        CHECK(got.data >= bytes.data());
        CHECK(got.data < bytes.data() + bytes.size());
      }
    }
    CHECK(skipped == f["skipped"].get<std::vector<std::string>>());
  }
}

TEST_CASE("torch fixtures: a Transformer Engine DumpTensors file where TE writes it") {
  // TensorLogger.save_tensor's file (a release puts it at tensor_dumps/rank_R/iter_N/<layer>_<tensor>.pt,
  // tests/datasets/test_capture.cpp; this fixture keeps the pre-release name).
  const auto path = kGolden / "tensor_dumps/rank_0/layers_0_fc1_activation_iter_000010.pt";
  std::vector<std::string> skipped;
  const auto bytes = read_file(path);  // the tensors point into it
  const auto tensors = read(bytes, &skipped);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].key == "high_precision");
  CHECK(tensors[0].dtype == DType::kBF16);
  CHECK(tensors[0].shape == std::vector<std::int64_t>{8, 16});
  const auto v = values_of(tensors[0]);
  CHECK(v.front() == -4.0f);
  CHECK(v.back() == -4.0f + 127 * 0.0625f);
  CHECK(skipped == std::vector<std::string>{
                       "quantized: transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor"});
}

TEST_CASE("torch fixtures: storage_offset > 0 reads the view, not the start of the storage") {
  const auto bytes = read_file(kGolden / "storage_offset.pt");
  const auto tensors = read(bytes);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].shape == std::vector<std::int64_t>{3, 6});
  CHECK(values_of(tensors[0]).front() == -1.0f + 6 * 0.125f);
}

TEST_CASE("torch fixtures: skipped may be null") {
  const auto tensors = read(read_file(kGolden / "dict_plain_fp8.pt"), nullptr);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].key == "high_precision");
}

TEST_CASE("torch fixtures: refused files, messages word for word") {
  auto error_of = [](const std::string& name) {
    return std::make_pair(read_file(kGolden / name), name);
  };
  {
    const auto [bytes, name] = error_of("non_contiguous.pt");
    CHECK_THROWS_WITH_AS(read(bytes, nullptr, name),
                         msg("704",
                             "top-level tensor (shape [3, 2], stride [1, 3], storage offset 0) is "
                             "not contiguous; save tensor.contiguous() instead",
                             name)
                             .c_str(),
                         Error);
  }
  {
    const auto [bytes, name] = error_of("only_fp8.pt");
    CHECK_THROWS_WITH_AS(
        read(bytes, nullptr, name),
        msg("706", "no bfloat16, float16 or float32 tensor in the file (skipped: q: float8_e5m2)",
            name)
            .c_str(),
        Error);
  }
  {
    const auto [bytes, name] = error_of("legacy.pt");
    CHECK_THROWS_WITH_AS(read(bytes, nullptr, name),
                         msg("701",
                             "legacy torch.save format (_use_new_zipfile_serialization=False) is "
                             "not supported; re-save it with torch.save(obj, path) in the default "
                             "zip format",
                             name)
                             .c_str(),
                         Error);
  }
  {
    const auto [bytes, name] = error_of("malicious_os_system.pt");
    CHECK_THROWS_WITH_AS(read(bytes, nullptr, name),
                         msg("703",
                             "pickle global 'os.system' is not allowed: only tensors, storages, "
                             "dtypes and (Ordered)dicts, lists and tuples of them are read, and no "
                             "pickle code is run",
                             name)
                             .c_str(),
                         Error);
  }
  {
    const auto [bytes, name] = error_of("compressed.pt");
    CHECK_THROWS_WITH_AS(read(bytes, nullptr, name),
                         msg("705",
                             "member 'archive/data.pkl' is compressed (zip method 8); only stored "
                             "members, as torch.save writes them, are read",
                             name)
                             .c_str(),
                         Error);
  }
}

TEST_CASE("torch fixtures: every truncated copy is refused with fp8a.torch.701") {
  for (const char* name :
       {"bare_f32.pt", "tensor_dumps/rank_0/layers_0_fc1_activation_iter_000010.pt"}) {
    const auto full = read_file(kGolden / name);
    for (std::size_t n = 0; n < full.size(); ++n) {
      INFO(name << " cut to " << n << " bytes");
      const Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK_THROWS_WITH_AS(
          read(cut),
          msg("701", n >= 4 ? "truncated zip archive: it starts like a zip but has no "
                              "end-of-central-directory record"
                            : "not a torch.save zip archive: no end-of-central-directory record")
              .c_str(),
          Error);
    }
  }
}

TEST_CASE(
    "torch fixtures: any single corrupted byte loads or is refused with an fp8a.torch error") {
  int refused = 0;
  for (const char* name :
       {"tensor_dumps/rank_0/layers_0_fc2_activation_iter_000020.pt", "nested.pt"}) {
    const auto full = read_file(kGolden / name);
    for (std::size_t i = 0; i < full.size(); ++i) {
      for (std::uint8_t x : {0x01, 0x80, 0xFF}) {
        Bytes bad = full;
        bad[i] ^= static_cast<std::byte>(x);
        try {
          std::vector<std::string> skipped;
          const auto tensors = read(bad, &skipped);
          for (const auto& t : tensors) values_of(t);  // in bounds (sanitizer builds check)
        } catch (const Error& e) {
          INFO(name << " byte " << i << ": " << e.what());
          CHECK(e.id().rfind("fp8a.torch.70", 0) == 0);
          ++refused;
        }
      }
    }
  }
  CHECK(refused > 0);
}

// ---------------------------------------------------------------------------------------------
// Hand-built archives: the zip layer
// ---------------------------------------------------------------------------------------------

TEST_CASE("torch zip: ZIP64 extra fields and end records are followed") {
  const auto file = archive(simple_f32_pickle(), {floats(kSix)}, /*zip64=*/true);
  const auto tensors = read(file);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].key.empty());
  CHECK(tensors[0].shape == std::vector<std::int64_t>{2, 3});
  CHECK(values_of(tensors[0]) == kSix);
  // And the same archive without ZIP64 records, under another top folder name.
  std::vector<Member> m{{"my_ckpt/data.pkl", simple_f32_pickle()},
                        {"my_ckpt/data/0", floats(kSix)}};
  CHECK(values_of(read(make_zip(m))[0]) == kSix);
}

TEST_CASE("torch zip: not a zip, no data.pkl, two top folders, big-endian") {
  CHECK_THROWS_WITH_AS(
      read(to_bytes("hello, not a zip at all")),
      msg("701", "not a torch.save zip archive: no end-of-central-directory record").c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      read({}),
      msg("701", "not a torch.save zip archive: no end-of-central-directory record").c_str(),
      Error);
  CHECK_THROWS_WITH_AS(read(make_zip({{"archive/version", to_bytes("3\n")}})),
                       msg("701", "not a torch.save archive: no <folder>/data.pkl member").c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(read(make_zip({{"data.pkl", simple_f32_pickle()}})),
                       msg("701", "not a torch.save archive: no <folder>/data.pkl member").c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(
      read(make_zip({{"a/data.pkl", simple_f32_pickle()}, {"b/data.pkl", simple_f32_pickle()}})),
      msg("701", "not a torch.save archive: data.pkl in several top folders ('a', 'b')").c_str(),
      Error);
  CHECK_THROWS_WITH_AS(
      read(make_zip(
          {{"archive/data.pkl", simple_f32_pickle()}, {"archive/byteorder", to_bytes("big")}})),
      msg("701", "byteorder is 'big'; only little-endian torch.save archives are read").c_str(),
      Error);
}

TEST_CASE("torch zip: malformed structures") {
  const auto good = archive(simple_f32_pickle(), {floats(kSix)});
  // The central directory offset of the end record (its bytes 16..19) pointing past the file.
  auto far = good;
  const std::size_t eocd = far.size() - 22;
  const auto byte = [&](std::size_t k) { return static_cast<std::uint32_t>(far[eocd + k]); };
  far[eocd + 19] = std::byte{0x7F};
  const std::uint32_t cd_size = byte(12) | byte(13) << 8;
  const std::uint32_t cd_offset = byte(16) | byte(17) << 8 | byte(18) << 16 | byte(19) << 24;
  CHECK(cd_offset > 0x7F000000u);
  CHECK_THROWS_WITH_AS(
      read(far),
      msg("701", "malformed zip archive: the central directory (" + std::to_string(cd_size) +
                     " bytes at offset " + std::to_string(cd_offset) + ") lies outside the file")
          .c_str(),
      Error);
  // A duplicated member name.
  CHECK_THROWS_WITH_AS(
      read(make_zip(
          {{"archive/data.pkl", simple_f32_pickle()}, {"archive/data.pkl", simple_f32_pickle()}})),
      msg("701", "malformed zip archive: member 'archive/data.pkl' appears twice").c_str(), Error);
  // A stored member whose compressed size differs from its size.
  auto sizes = make_zip({{"archive/data.pkl", simple_f32_pickle()}});
  const std::size_t cd = sizes.size() - 22 - (46 + 16);
  sizes[cd + 20] = static_cast<std::byte>(static_cast<std::uint8_t>(sizes[cd + 20]) - 1);
  CHECK_THROWS_WITH_AS(
      read(sizes),
      msg("701",
          "malformed zip archive: member 'archive/data.pkl' is stored but its "
          "compressed size " +
              std::to_string(simple_f32_pickle().size() - 1) + " differs from its size " +
              std::to_string(simple_f32_pickle().size()))
          .c_str(),
      Error);
}

TEST_CASE("torch zip: encrypted or compressed members that are needed are refused with 705") {
  Member enc{"archive/data.pkl", simple_f32_pickle()};
  enc.flags = 1;
  CHECK_THROWS_WITH_AS(read(make_zip({enc})),
                       msg("705",
                           "member 'archive/data.pkl' is encrypted; only plain stored members, "
                           "as torch.save writes them, are read")
                           .c_str(),
                       Error);
  Member deflated{"archive/data/0", floats(kSix)};
  deflated.method = 8;
  CHECK_THROWS_WITH_AS(read(make_zip({{"archive/data.pkl", simple_f32_pickle()}, deflated})),
                       msg("705",
                           "member 'archive/data/0' is compressed (zip method 8); only stored "
                           "members, as torch.save writes them, are read")
                           .c_str(),
                       Error);
  // A compressed member nobody reads does not matter.
  Member other{"archive/extra", to_bytes("x")};
  other.method = 8;
  CHECK(read(make_zip({{"archive/data.pkl", simple_f32_pickle()},
                       {"archive/data/0", floats(kSix)},
                       other}))
            .size() == 1);
}

// ---------------------------------------------------------------------------------------------
// Hand-built pickles
// ---------------------------------------------------------------------------------------------

TEST_CASE("torch pickle: dicts, lists, tuples, shared storages, CUDA locations, size-1 dims") {
  // {"a": [t0, (t1,)], 5: t2, "s": "x", "f": 1.5, "n": None} where t1 views the same storage
  // as t0 at offset 2, t2 is a [3, 1] view whose size-1 dim has an arbitrary stride, on cuda:0.
  Pickle p;
  p.proto2().op('}').op('(').str("a").op(']').op('(');
  p.tensor("FloatStorage", "0", 6, 0, {2}, {1});
  p.tensor("FloatStorage", "0", 6, 2, {2, 2}, {2, 1}).op(0x85).op('e');
  p.int1(5).tensor("FloatStorage", "0", 6, 3, {3, 1}, {1, 99}, "cuda:0");
  p.str("s").str("x").str("f").op('G').ops(std::string("\x3f\xf8\0\0\0\0\0\0", 8)).str("n").op('N');
  p.op('u');
  std::vector<std::string> skipped;
  const auto file = archive(p.done(), {floats(kSix)});
  const auto tensors = read(file, &skipped);
  REQUIRE(tensors.size() == 3);
  CHECK(tensors[0].key == "a.0");
  CHECK(values_of(tensors[0]) == std::vector<float>{1.5f, -2.0f});
  CHECK(tensors[1].key == "a.1.0");
  CHECK(values_of(tensors[1]) == std::vector<float>{0.25f, 3.0f, -0.5f, 8.0f});
  CHECK(tensors[2].key == "5");
  CHECK(values_of(tensors[2]) == std::vector<float>{3.0f, -0.5f, 8.0f});
  CHECK(skipped.empty());
}

TEST_CASE("torch pickle: memo sharing, cycles and a doubling DAG are walked once per container") {
  Pickle p;
  p.proto2().op(']').op('q').op(0);                       // L = [], memo 0
  p.op('h').op(0).op('a');                                // L.append(L): a cycle
  p.tensor("FloatStorage", "0", 6, 0, {6}, {1}).op('a');  // L.append(t)
  for (int i = 0; i < 60; ++i) p.op('h').op(0).op('h').op(0).op(0x86).op('q').op(0);  // L = (L, L)
  const auto tensors = read(archive(p.done(), {floats(kSix)}));
  REQUIRE(tensors.size() == 1);
  // Each tuple level adds "0."; the list L itself is reached once, its tensor is item 1.
  std::string key;
  for (int i = 0; i < 60; ++i) key += "0.";
  CHECK(tensors[0].key == key + "1");
}

TEST_CASE("torch pickle: a huge memo index does not allocate") {
  Pickle p;
  p.proto2().op('}').op('r');
  put(&p.b, 0xFFFFFFFF, 4);
  p.str("t").tensor("FloatStorage", "0", 6, 0, {6}, {1}).op('s');
  CHECK(read(archive(p.done(), {floats(kSix)}))[0].key == "t");
}

TEST_CASE("torch pickle: untyped storage with _rebuild_tensor_v3 is skipped by dtype") {
  Pickle p;
  p.proto2().op('}').op('(').str("q").global("torch._utils", "_rebuild_tensor_v3").op('(');
  p.op('(')
      .str("storage")
      .global("torch.storage", "UntypedStorage")
      .str("0")
      .str("cpu")
      .int1(6)
      .op('t')
      .op('Q');
  p.int1(0).ints({6}).ints({1}).op(0x89).global("collections", "OrderedDict").op(')').op('R');
  p.global("torch", "float8_e4m3fn").op('t').op('R');
  p.str("x").tensor("FloatStorage", "1", 6, 0, {6}, {1}).op('u');
  std::vector<std::string> skipped;
  const auto tensors = read(archive(p.done(), {Bytes(6), floats(kSix)}), &skipped);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].key == "x");
  CHECK(skipped == std::vector<std::string>{"q: float8_e4m3fn"});
}

TEST_CASE("torch pickle: globals outside the allow-list are refused by name when read (703)") {
  const std::string tail =
      " is not allowed: only tensors, storages, dtypes and (Ordered)dicts, lists and tuples of "
      "them "
      "are read, and no pickle code is run";
  // GLOBAL alone, never called.
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().global("builtins", "eval").op('N').done())),
                       msg("703", "pickle global 'builtins.eval'" + tail).c_str(), Error);
  // STACK_GLOBAL (protocol 4).
  Pickle sg;
  sg.op(0x80).op(4).op(0x8c).op(5).ops("posix").op(0x8c).op(6).ops("system").op(0x93).done();
  CHECK_THROWS_WITH_AS(read(archive(sg.b)),
                       msg("703", "pickle global 'posix.system'" + tail).c_str(), Error);
  // A torch name that is not on the list.
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().global("torch", "load").done())),
                       msg("703", "pickle global 'torch.load'" + tail).c_str(), Error);
  // getattr on anything but a Transformer Engine class.
  Pickle ga;
  ga.proto2().global("__builtin__", "getattr").global("collections", "OrderedDict").str("fromkeys");
  ga.op(0x86).op('R');
  CHECK_THROWS_WITH_AS(read(archive(ga.done())),
                       msg("703",
                           "pickle global '__builtin__.getattr' is allowed only on Transformer "
                           "Engine classes; no pickle code is run")
                           .c_str(),
                       Error);
  // Control characters in a name stay escaped on one line.
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().global("os\r", "x").done())),
                       msg("703", "pickle global 'os\\r.x'" + tail).c_str(), Error);
}

TEST_CASE("torch pickle: malformed pickles (702) name the problem, the byte and the opcode") {
  const std::string at = "[fp8a.torch.702] t.pt: malformed pickle at byte ";
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().op(0xFF).done())),
                       (at + "2 of archive/data.pkl: unknown or unsupported opcode 0xff").c_str(),
                       Error);
  // BINBYTES (protocol 3) is not in the subset.
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().op('B').done())),
                       (at + "2 of archive/data.pkl: unknown or unsupported opcode 0x42").c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().op('N').b)),
                       (at + "3 of archive/data.pkl: the pickle ends without STOP").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      read(archive(Pickle().proto2().op('h').op(3).done())),
      (at + "2 of archive/data.pkl (BINGET): memo entry 3 was never stored").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      read(archive(Pickle().proto2().op('X').op(9).op(0).op(0).op(0).ops("abc").b)),
      (at + "2 of archive/data.pkl (BINUNICODE): needs 9 more bytes but the pickle ends").c_str(),
      Error);
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().op('a').done())),
                       (at + "2 of archive/data.pkl (APPEND): stack underflow").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      read(archive(Pickle().proto2().op('N').op('N').op('a').done())),
      (at + "4 of archive/data.pkl (APPEND): the target is a None, not a list").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      read(archive(Pickle().op(0x80).op(6).done())),
      (at + "0 of archive/data.pkl (PROTO): unsupported pickle protocol 6").c_str(), Error);
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().op('N').op(')').op('R').done())),
                       (at + "4 of archive/data.pkl (REDUCE): calls a None").c_str(), Error);
  CHECK_THROWS_WITH_AS(
      read(archive(Pickle().proto2().global("torch", "FloatStorage").op(')').op('R').done())),
      (at + "23 of archive/data.pkl (REDUCE): torch.FloatStorage cannot be called").c_str(), Error);
  Pickle pid;
  pid.proto2().op('(').str("storage").global("torch", "FloatStorage").str("0").op('t').op('Q');
  CHECK_THROWS_WITH_AS(
      read(archive(pid.done(), {floats(kSix)})),
      (at + "42 of archive/data.pkl (BINPERSID): the persistent id is not ('storage', "
            "storage class, key, location, numel)")
          .c_str(),
      Error);
  Pickle rank;
  rank.proto2().tensor("FloatStorage", "0", 6, 0, {2, 3}, {1});
  CHECK_THROWS_WITH_AS(
      read(archive(rank.done(), {floats(kSix)})),
      (at + "143 of archive/data.pkl (REDUCE): torch._utils._rebuild_tensor_v2: size "
            "[2, 3] and stride [1] differ in length")
          .c_str(),
      Error);
}

TEST_CASE("torch pickle: bombs are capped (MARK nesting, list nesting, stack, memo)") {
  const std::string at = "[fp8a.torch.702] t.pt: malformed pickle at byte ";
  Pickle marks;
  marks.proto2();
  for (int i = 0; i < 70000; ++i) marks.op('(');
  CHECK_THROWS_WITH_AS(
      read(archive(marks.done())),
      (at + "65538 of archive/data.pkl (MARK): more than 65536 MARKs are open").c_str(), Error);
  // 100000 lists, each appended into the one before: nesting far deeper than the walk allows.
  Pickle lists;
  lists.proto2();
  for (int i = 0; i < 100000; ++i) lists.op(']');
  for (int i = 0; i < 99999; ++i) lists.op('a');
  CHECK_THROWS_WITH_AS(read(archive(lists.done())),
                       "[fp8a.torch.702] t.pt: malformed pickle archive/data.pkl: objects nested "
                       "more than 256 levels deep",
                       Error);
  Pickle stack;
  stack.proto2();
  for (std::size_t i = 0; i <= (std::size_t{1} << 20); ++i) stack.op('N');
  CHECK_THROWS_WITH_AS(read(archive(stack.done())),
                       (at + std::to_string(2 + (1 << 20)) +
                        " of archive/data.pkl (NONE): the stack holds more than 1048576 values")
                           .c_str(),
                       Error);
  Pickle memo;
  memo.proto2().op('N');
  for (std::size_t i = 0; i <= (std::size_t{1} << 20); ++i) memo.op(0x94);
  CHECK_THROWS_WITH_AS(read(archive(memo.done())),
                       (at + std::to_string(3 + (1 << 20)) +
                        " of archive/data.pkl (MEMOIZE): the memo holds more than 1048576 entries")
                           .c_str(),
                       Error);
}

TEST_CASE("torch pickle: output amplification is capped (rank, arguments, key length, count)") {
  const std::string at = "[fp8a.torch.702] t.pt: malformed pickle at byte ";
  const std::vector<std::int64_t> dims65(65, 1);
  Pickle rank;
  rank.proto2().tensor("FloatStorage", "0", 6, 0, dims65, dims65);
  CHECK_THROWS_WITH_AS(read(archive(rank.done(), {floats(kSix)})),
                       (at + "778 of archive/data.pkl (REDUCE): the size has 65 dimensions, more "
                             "than 64")
                           .c_str(),
                       Error);
  Pickle args;
  args.proto2().global("torch._utils", "_rebuild_tensor_v2").op('(');
  for (int i = 0; i < 9; ++i) args.op('N');
  args.op('t').op('R');
  CHECK_THROWS_WITH_AS(read(archive(args.done())),
                       (at + "46 of archive/data.pkl (REDUCE): torch._utils._rebuild_tensor_v2 "
                             "called with 9 arguments")
                           .c_str(),
                       Error);
  // Key paths up to 1024 bytes; {"a" * 600: {"b" * n: t}} is 600 + 1 + n bytes.
  auto nested_key = [](std::size_t n) {
    Pickle p;
    p.proto2().op('}').str(std::string(600, 'a')).op('}').str(std::string(n, 'b'));
    p.tensor("FloatStorage", "0", 6, 0, {6}, {1}).op('s').op('s');
    return archive(p.done(), {floats(kSix)});
  };
  CHECK(read(nested_key(423))[0].key.size() == 1024);
  CHECK_THROWS_WITH_AS(read(nested_key(424)),
                       "[fp8a.torch.702] t.pt: malformed pickle archive/data.pkl: a key path is "
                       "longer than 1024 bytes",
                       Error);
  // One tensor referenced n times from a list: n entries, up to 65536.
  auto many = [](std::size_t n) {
    Pickle p;
    p.proto2().op(']').op('(').tensor("FloatStorage", "0", 6, 0, {6}, {1}).op('q').op(0);
    for (std::size_t i = 1; i < n; ++i) p.op('h').op(0);
    p.op('e');
    return archive(p.done(), {floats(kSix)});
  };
  const auto all = read(many(65536));
  REQUIRE(all.size() == 65536);
  CHECK(all.back().key == "65535");
  CHECK_THROWS_WITH_AS(
      read(many(65537)),
      "[fp8a.torch.702] t.pt: malformed pickle archive/data.pkl: more than 65536 tensors", Error);
}

TEST_CASE("torch tensors: storages and extents are checked against the members (704)") {
  CHECK_THROWS_WITH_AS(read(archive(simple_f32_pickle(), {floats({1, 2})})),
                       msg("704",
                           "storage 'data/0' holds 8 bytes but the pickle declares 6 float32 "
                           "elements (24 bytes)")
                           .c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(
      read(archive(simple_f32_pickle())),
      msg("704", "storage 'data/0' is missing: no member 'archive/data/0'").c_str(), Error);
  auto with = [](std::int64_t offset, std::vector<std::int64_t> shape,
                 std::vector<std::int64_t> stride) {
    Pickle p;
    p.proto2().op('}').str("w").tensor("FloatStorage", "0", 6, offset, shape, stride).op('s');
    return archive(p.done(), {floats(kSix)});
  };
  CHECK_THROWS_WITH_AS(read(with(3, {2, 2}, {2, 1})),
                       msg("704",
                           "tensor 'w' (shape [2, 2], stride [2, 1], storage offset 3) reaches "
                           "byte 28 of storage 'data/0', which holds 24 bytes")
                           .c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(read(with(0, {2}, {-1})),
                       msg("704",
                           "tensor 'w' (shape [2], stride [-1], storage offset 0): negative size "
                           "or stride")
                           .c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(read(with(-1, {2}, {1})),
                       msg("704",
                           "tensor 'w' (shape [2], stride [1], storage offset -1): negative "
                           "storage offset")
                           .c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(
      read(with(0, {0x40000000, 0x40000000, 0x40000000}, {1, 0x40000000, 0x40000000})),
      msg("704",
          "tensor 'w' (shape [1073741824, 1073741824, 1073741824], stride "
          "[1, 1073741824, 1073741824], storage offset 0): its extent overflows")
          .c_str(),
      Error);
  CHECK_THROWS_WITH_AS(read(with(0, {2, 3}, {1, 2})),
                       msg("704",
                           "tensor 'w' (shape [2, 3], stride [1, 2], storage offset 0) is not "
                           "contiguous; save tensor.contiguous() instead")
                           .c_str(),
                       Error);
  // An empty tensor may sit at the very end of its storage.
  const auto empty = read(with(6, {0, 4}, {4, 1}));
  REQUIRE(empty.size() == 1);
  CHECK(empty[0].shape == std::vector<std::int64_t>{0, 4});
}

TEST_CASE("torch: no tensor to return (706)") {
  CHECK_THROWS_WITH_AS(read(archive(Pickle().proto2().op('}').done())),
                       msg("706", "no bfloat16, float16 or float32 tensor in the file").c_str(),
                       Error);
  Pickle p;
  p.proto2().op('(');
  for (int i = 0; i < 5; ++i) p.tensor("LongStorage", "0", 1, 0, {1}, {1});
  p.op('t');
  CHECK_THROWS_WITH_AS(read(archive(p.done(), {Bytes(8)})),
                       msg("706",
                           "no bfloat16, float16 or float32 tensor in the file (skipped: 0: int64, "
                           "1: int64, 2: int64, 3: int64, ...)")
                           .c_str(),
                       Error);
}
