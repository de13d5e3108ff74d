#include "rundir/output_set.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"
#include "core/fnv1a.hpp"
#include "core/text.hpp"
#include "rundir/atomic_file.hpp"

namespace fp8a {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kManifestFormat = 1;

// A name the manifest may name: a plain file of DIR, not hidden (never "..", never a path).
bool plain_name(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

// The test hook's fault: "stage:N", "switch:N" or "rename:N"; N = -1 when unset.
struct Fault {
  std::string where;
  long after = -1;
};
Fault test_fault() {
  Fault f;
  const char* v = std::getenv("FP8A_TEST_OUTPUT_FAULT");
  if (v == nullptr) return f;
  const std::string s(v);
  const auto colon = s.find(':');
  if (colon == std::string::npos) return f;
  f.where = s.substr(0, colon);
  f.after = std::atol(s.c_str() + colon + 1);
  return f;
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  if (::fsync(fd) != 0) {
    // A file system without directory fsync: the renames are still atomic, only less durable.
  }
  ::close(fd);
}

std::string manifest_text(const std::string& set, const char* state, const std::vector<Artifact>& artifacts,
                          const std::string& writer, const std::vector<std::string>& command_line) {
  json files = json::array();
  for (const Artifact& a : artifacts)
    files.push_back({{"name", a.name}, {"size", a.contents.size()}, {"fnv1a", fnv1a_hex(a.contents)}});
  // Arguments are bytes: kept losslessly, as summary.json keeps them (core/text.hpp utf8_lossless).
  json words = json::array();
  for (const std::string& w : command_line) words.push_back(utf8_lossless(w));
  const json m = {{"fp8_advisor_outputs", kManifestFormat},
                  {"set", set},
                  {"state", state},
                  {"written_by", {{"build", utf8_lossless(writer)}, {"command_line", words}}},
                  {"files", files}};
  return m.dump(1) + "\n";
}

// The names an earlier manifest lists (plain names only); none when there is none or it is bad.
std::set<std::string> listed_names(const std::string& manifest) {
  std::set<std::string> names;
  const auto text = read_regular_file(manifest);
  if (!text) return names;
  const json m = json::parse(*text, nullptr, false);
  if (!m.is_object() || !m.contains("files") || !m["files"].is_array()) return names;
  for (const json& f : m["files"])
    if (f.is_object() && f.contains("name") && f["name"].is_string() && plain_name(f["name"].get<std::string>()))
      names.insert(f["name"].get<std::string>());
  return names;
}

}  // namespace

std::string output_manifest_name(const std::string& set) { return ".fp8-advisor-outputs-" + set + ".json"; }

std::string write_output_set(const std::string& dir, const std::string& set, const std::vector<Artifact>& artifacts,
                             const std::string& writer, const std::vector<std::string>& command_line) {
  for (const Artifact& a : artifacts) FP8A_CHECK(plain_name(a.name), "an artifact's name is a plain file name");
  const Fault fault = test_fault();
  ensure_output_directory(dir);
  const std::string staging = dir + "/" + kOutputStagingPrefix + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec) || ec)
    throw input_error("fp8a.io.104", staging + ": cannot write: " + (ec ? ec.message() : "exists"));
  // 1. Every file whole in the staging folder; a failure leaves the earlier set untouched.
  try {
    long staged = 0;
    for (const Artifact& a : artifacts) {
      if (fault.where == "stage" && staged == fault.after)
        throw input_error("fp8a.io.104", staging + "/" + a.name + ": cannot write: " + std::strerror(ENOSPC));
      write_file_atomically(staging + "/" + a.name, a.contents);
      ++staged;
    }
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  // 2. Nothing but a regular file (or a link, which a rename replaces, not follows) where a new
  // file goes: a folder there would refuse the rename half way, so it is refused before anything
  // changes.
  for (const Artifact& a : artifacts) {
    struct stat st {};
    if (::lstat((dir + "/" + a.name).c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      fs::remove_all(staging, ec);
      throw input_error("fp8a.io.104", dir + "/" + a.name + ": cannot write: " +
                                           (S_ISDIR(st.st_mode) ? "a folder is in the way" : "not a regular file") +
                                           "; move it away (nothing was changed)");
    }
  }
  // 3. The folder marked as switching, naming the new set (the earlier manifest kept to restore).
  const std::string manifest = dir + "/" + output_manifest_name(set);
  const std::set<std::string> earlier = listed_names(manifest);
  const std::optional<std::string> earlier_manifest = read_regular_file(manifest);
  write_file_atomically(manifest, manifest_text(set, "switching", artifacts, writer, command_line));
  // 4. The earlier set's files the new one lacks, and those it replaces, are moved aside into the
  // staging folder; the new files come in. A rename refused on the way (the disk, a race) moves
  // everything back and restores the earlier manifest: --out is left as it was found.
  std::set<std::string> now;
  for (const Artifact& a : artifacts) now.insert(a.name);
  const std::string aside = staging + "/.earlier";
  fs::create_directory(aside, ec);
  std::vector<std::string> moved_aside, switched_in;
  const auto roll_back = [&]() {
    std::error_code ignored;
    for (const std::string& name : switched_in) fs::remove(dir + "/" + name, ignored);
    for (const std::string& name : moved_aside) std::rename((aside + "/" + name).c_str(), (dir + "/" + name).c_str());
    if (earlier_manifest) write_file_atomically(manifest, *earlier_manifest);
    else fs::remove(manifest, ignored);
    fs::remove_all(staging, ignored);
    sync_directory(dir);
  };
  const auto fail = [&](int err, const std::string& name) {
    roll_back();
    throw input_error("fp8a.io.104", dir + "/" + name + ": cannot write: " + std::strerror(err) +
                                         " (the earlier files were put back)");
  };
  const auto move = [&](const std::string& from, const std::string& to, const std::string& name) {
    if (std::rename(from.c_str(), to.c_str()) != 0) fail(errno, name);
  };
  for (const std::string& name : earlier)
    if (now.count(name) == 0 && plain_name(name))
      if (struct stat st {};
          ::lstat((dir + "/" + name).c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
        move(dir + "/" + name, aside + "/" + name, name);
        moved_aside.push_back(name);
      }
  long switched = 0;
  for (const Artifact& a : artifacts) {
    if (fault.where == "switch" && switched == fault.after) ::raise(SIGKILL);
    if (fault.where == "rename" && switched == fault.after) fail(EIO, a.name);
    // The file it replaces aside just before (a run killed here leaves the later ones in place).
    if (struct stat st {}; ::lstat((dir + "/" + a.name).c_str(), &st) == 0) {
      move(dir + "/" + a.name, aside + "/" + a.name, a.name);
      moved_aside.push_back(a.name);
    }
    move(staging + "/" + a.name, dir + "/" + a.name, a.name);
    switched_in.push_back(a.name);
    ++switched;
  }
  sync_directory(dir);
  // 5. Complete; the earlier files go.
  write_file_atomically(manifest, manifest_text(set, "complete", artifacts, writer, command_line));
  fs::remove_all(staging, ec);
  sync_directory(dir);
  std::string wrote;
  for (const Artifact& a : artifacts)
    wrote += (wrote.empty() ? "wrote " : ", ") + dir + "/" + a.name + (a.note.empty() ? "" : " (" + a.note + ")");
  return wrote;
}

void check_output_set(const std::string& dir, const std::string& set) {
  const std::string manifest = dir + "/" + output_manifest_name(set);
  std::error_code ec;
  if (!fs::exists(manifest, ec)) return;
  const auto bad = [&](const std::string& why) {
    return input_error("fp8a.io.122", manifest + ": not an fp8-advisor output manifest: " + why);
  };
  const auto text = read_regular_file(manifest);
  if (!text) throw bad("cannot be read");
  const json m = json::parse(*text, nullptr, false);
  if (!m.is_object()) throw bad("not a JSON object");
  if (!m.contains("state") || !m["state"].is_string()) throw bad("no \"state\"");
  if (!m.contains("files") || !m["files"].is_array()) throw bad("no \"files\" list");
  const std::string state = m["state"].get<std::string>();
  if (state != "complete" && state != "switching") throw bad("\"state\" is neither complete nor switching");
  // The first file that is not what the manifest names, with why; "" when all are.
  std::string stray, why;
  for (const json& f : m["files"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("fnv1a") || !f["fnv1a"].is_string())
      throw bad("an entry of \"files\" without name, size and fnv1a");
    const std::string name = f["name"].get<std::string>();
    if (!plain_name(name)) throw bad("\"files\" names " + quoted_input(name) + ", not a file of the folder");
    // Not a regular file (a FIFO, a link) counts as missing: the run wrote regular files.
    const std::optional<std::string> bytes = read_regular_file(dir + "/" + name);
    if (!bytes) why = "missing";
    else if (const std::string hash = fnv1a_hex(*bytes);
             bytes->size() != f["size"].get<std::uint64_t>() || hash != f["fnv1a"].get<std::string>())
      why = "size " + std::to_string(bytes->size()) + ", FNV-1a " + hash + " where the manifest says size " +
            std::to_string(f["size"].get<std::uint64_t>()) + ", FNV-1a " + f["fnv1a"].get<std::string>();
    if (!why.empty()) {
      stray = dir + "/" + name;
      break;
    }
  }
  if (state == "switching")
    throw input_error("fp8a.io.120",
                      dir + " holds a mixed set of output files: a run was stopped while switching its files in (" +
                          manifest + " says \"switching\")" +
                          (stray.empty() ? std::string("; it ended before marking the set complete")
                                         : "; " + stray + " is not that run's (" + why + ")") +
                          "; run again into this folder");
  if (!stray.empty())
    throw input_error("fp8a.io.121", stray + " does not belong to the output set " + manifest + " names (" + why +
                                         "): changed after the run wrote it; run again into this folder");
}

}  // namespace fp8a
