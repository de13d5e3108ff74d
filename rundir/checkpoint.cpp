#include "rundir/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/fnv1a.hpp"
#include "core/text.hpp"
#include "engine/unit_codec.hpp"
#include "rundir/atomic_file.hpp"

namespace fp8a {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t kUnitTag = 0x31'74'69'6E'75'61'38'66;  // "f8aunit1"
constexpr int kManifestVersion = 1;

[[noreturn]] void cannot_write(const fs::path& p, const std::error_code& ec) {
  throw input_error("fp8a.io.104", p.string() + ": cannot write the checkpoint: " + ec.message());
}

// Paths and option values are bytes, kept in the JSON losslessly (utf8_lossless).
json lossless(const std::map<std::string, std::string>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[utf8_lossless(k)] = utf8_lossless(v);
  return j;
}
std::map<std::string, std::string> from_lossless(const json& j) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : j.items()) m[utf8_lossless_decode(k)] = utf8_lossless_decode(v.get<std::string>());
  return m;
}

json manifest_json(const CheckpointManifest& m) {
  return {{"fp8-advisor checkpoint", kManifestVersion},
          {"build", utf8_lossless(m.build)},
          {"options", lossless(m.options)},
          {"inputs", lossless(m.inputs)}};
}

// The manifest kept in dir, if readable and of this version.
std::optional<CheckpointManifest> read_manifest(const fs::path& file) {
  const auto text = read_regular_file(file);
  if (!text) return std::nullopt;
  try {
    const json j = json::parse(*text);
    if (j.value("fp8-advisor checkpoint", 0) != kManifestVersion) return std::nullopt;
    CheckpointManifest m;
    m.build = utf8_lossless_decode(j.at("build").get<std::string>());
    m.options = from_lossless(j.at("options"));
    m.inputs = from_lossless(j.at("inputs"));
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

namespace {

// Whether p is a directory itself, not a symbolic link to one (nor anything else).
bool is_real_directory(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::directory;
}

// "P is a symbolic link" / "P is not a directory" when p is there (a dangling link too) but not a
// directory itself; empty otherwise.
std::string not_a_directory(const fs::path& p) {
  std::error_code ec;
  const fs::file_type type = fs::symlink_status(p, ec).type();
  if (ec || type == fs::file_type::not_found || type == fs::file_type::directory) return {};
  return p.string() + (type == fs::file_type::symlink ? " is a symbolic link" : " is not a directory");
}

}  // namespace

Checkpoint::Checkpoint(const std::string& out_dir, const CheckpointManifest& manifest, bool resume)
    : dir_(out_dir + "/" + kDirName) {
  // Rendered before anything in out_dir changes: a manifest that cannot be written leaves it as
  // it was.
  const std::string manifest_text = manifest_json(manifest).dump(1) + "\n";
  std::error_code ec;
  const fs::path dir(dir_), units = fs::path(dir_) / "units";
  // Nothing is written through a symbolic link (or into a non-directory) in the checkpoint:
  // one there is damage, removed (the link, never what it points to), and --resume starts afresh.
  std::string damage = not_a_directory(dir);
  if (damage.empty()) damage = not_a_directory(units);
  if (resume && !damage.empty()) {
    notes_.push_back("--resume: " + damage + ": not followed, removed; evaluating everything");
    fs::remove_all(dir, ec);
  } else if (resume) {
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
      started_ = false;
    }
  } else {
    fs::remove_all(dir, ec);
  }
  if (ec) cannot_write(dir, ec);
  fs::create_directories(units, ec);
  if (ec) cannot_write(units, ec);
  if (!is_real_directory(dir) || !is_real_directory(units))  // replaced under us
    cannot_write(units, std::make_error_code(std::errc::not_a_directory));
  // Temporary files of a run killed while it wrote a unit: never renamed, never read. Entries
  // that are not regular files (links, FIFOs, folders) are damage: removed, their units
  // evaluated again.
  std::size_t odd = 0;
  for (const auto& e : fs::directory_iterator(units, ec)) {
    std::error_code type_ec;
    const bool regular = e.symlink_status(type_ec).type() == fs::file_type::regular;
    if (!regular) ++odd;
    if (!regular || e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove_all(e.path(), ec);
  }
  // The same for the manifest: a run killed while it wrote manifest.json leaves its temporary.
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove_all(e.path(), ec);
  if (odd > 0)
    notes_.push_back("--resume: " + std::to_string(odd) + " entr" + (odd == 1 ? "y" : "ies") + " of " +
                     units.string() + " not a regular file (a symbolic link, FIFO or folder): removed, " +
                     "not followed; what they held is evaluated again");
  write_file_atomically((dir / "manifest.json").string(), manifest_text);
}

void Checkpoint::discard() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::optional<std::string> Checkpoint::load(UnitKind kind, std::string_view key) {
  const auto file = read_regular_file(fs::path(dir_) / "units" / unit_file_name(kind, key));
  if (!file || file->size() < 8) return std::nullopt;
  const std::string& bytes = *file;
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
