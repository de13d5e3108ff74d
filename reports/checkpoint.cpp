#include "reports/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/fnv1a.hpp"
#include "engine/unit_codec.hpp"
#include "reports/atomic_file.hpp"

namespace fp8a {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t kUnitTag = 0x31'74'69'6E'75'61'38'66;  // "f8aunit1"
constexpr int kManifestVersion = 1;

std::string slurp(const fs::path& p, bool* ok) {
  std::ifstream in(p, std::ios::binary);
  *ok = static_cast<bool>(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

[[noreturn]] void cannot_write(const fs::path& p, const std::error_code& ec) {
  throw input_error("fp8a.io.104", p.string() + ": cannot write the checkpoint: " + ec.message());
}

json manifest_json(const CheckpointManifest& m) {
  return {{"fp8-advisor checkpoint", kManifestVersion},
          {"build", m.build},
          {"options", m.options},
          {"inputs", m.inputs}};
}

// The manifest kept in dir, if readable and of this version.
std::optional<CheckpointManifest> read_manifest(const fs::path& file) {
  bool ok = false;
  const std::string text = slurp(file, &ok);
  if (!ok) return std::nullopt;
  try {
    const json j = json::parse(text);
    if (j.value("fp8-advisor checkpoint", 0) != kManifestVersion) return std::nullopt;
    CheckpointManifest m;
    m.build = j.at("build").get<std::string>();
    m.options = j.at("options").get<std::map<std::string, std::string>>();
    m.inputs = j.at("inputs").get<std::map<std::string, std::string>>();
    return m;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// What differs between the checkpoint's manifest and this run's, a line each.
std::vector<std::string> differences(const CheckpointManifest& was, const CheckpointManifest& now) {
  std::vector<std::string> notes;
  for (const auto& [name, value] : now.options) {
    const auto it = was.options.find(name);
    const std::string before = it == was.options.end() ? "unset" : "'" + it->second + "'";
    if (it == was.options.end() || it->second != value)
      notes.push_back("--resume: " + name + " changed (was " + before + ", now '" + value +
                      "'): what it changes is evaluated again");
  }
  for (const auto& [path, identity] : now.inputs) {
    const auto it = was.inputs.find(path);
    if (it == was.inputs.end())
      notes.push_back("--resume: " + path + " was not read before: its tensors are evaluated");
    else if (it->second != identity)
      notes.push_back("--resume: " + path + " changed (was " + it->second + ", now " + identity +
                      "): what it holds is evaluated again");
  }
  return notes;
}

}  // namespace

std::string Checkpoint::unit_file_name(UnitKind kind, std::string_view key) {
  char name[32];
  std::snprintf(name, sizeof name, "%s-%016llx.unit", kind == UnitKind::kShard ? "shard" : "gemm",
                static_cast<unsigned long long>(fnv1a(key)));
  return name;
}

Checkpoint::Checkpoint(const std::string& out_dir, const CheckpointManifest& manifest, bool resume)
    : dir_(out_dir + "/" + kDirName) {
  std::error_code ec;
  const fs::path dir(dir_), units = fs::path(dir_) / "units";
  if (resume) {
    const auto was = read_manifest(dir / "manifest.json");
    if (!was) {
      notes_.push_back("--resume: no checkpoint of this fp8-advisor in " + dir_ + ": evaluating everything");
      fs::remove_all(dir, ec);
    } else if (was->build != manifest.build) {
      notes_.push_back("--resume: the checkpoint in " + dir_ + " was written by fp8-advisor " + was->build +
                       ", this is " + manifest.build + ": nothing of it is reused");
      fs::remove_all(dir, ec);
    } else {
      notes_ = differences(*was, manifest);
    }
  } else {
    fs::remove_all(dir, ec);
  }
  if (ec) cannot_write(dir, ec);
  fs::create_directories(units, ec);
  if (ec) cannot_write(units, ec);
  // Temporary files of a run killed while it wrote a unit: never renamed, never read.
  for (const auto& e : fs::directory_iterator(units, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
  write_file_atomically((dir / "manifest.json").string(), manifest_json(manifest).dump(1) + "\n");
}

void Checkpoint::discard() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::optional<std::string> Checkpoint::load(UnitKind kind, std::string_view key) {
  bool ok = false;
  const std::string bytes = slurp(fs::path(dir_) / "units" / unit_file_name(kind, key), &ok);
  if (!ok || bytes.size() < 8) return std::nullopt;
  // The checksum over everything before it, then the fields; a file of another key (a hash
  // collision) or a damaged one is a miss, and the unit is computed and saved again.
  std::uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  const std::string_view body = std::string_view(bytes).substr(0, bytes.size() - 8);
  if (sum != fnv1a(body)) return std::nullopt;
  try {
    ByteReader r(body);
    if (r.u64() != kUnitTag || r.u8() != static_cast<std::uint8_t>(kind) || r.str() != key) return std::nullopt;
    std::string payload = r.str();
    r.expect_done();
    return payload;
  } catch (const DecodeError&) {
    return std::nullopt;
  }
}

void Checkpoint::save(UnitKind kind, std::string_view key, std::string_view bytes) {
  ByteWriter w;
  w.u64(kUnitTag);
  w.u8(static_cast<std::uint8_t>(kind));
  w.str(key);
  w.str(bytes);
  w.u64(fnv1a(w.bytes()));
  write_file_atomically((fs::path(dir_) / "units" / unit_file_name(kind, key)).string(), w.bytes());
}

void Checkpoint::count(UnitKind kind, std::uint64_t reused, std::uint64_t computed) {
  reused_[index(kind)] += reused;
  computed_[index(kind)] += computed;
}

}  // namespace fp8a
