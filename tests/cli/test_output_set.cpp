// The files of a run switch in as one set, named by DIR/.fp8-advisor-outputs-run.json
// (rundir/output_set.hpp): a run that cannot write them (a full disk, simulated by the
// FP8A_TEST_OUTPUT_FAULT hook) leaves the earlier set whole; one killed while switching them in
// leaves the folder marked, and compare refuses it naming a file that is not the new run's; the
// next run mends it; a file changed after the run is named too.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/cli/cli_support.hpp"

namespace {

using namespace fp8a::cli_test;

const char* const kManifest = ".fp8-advisor-outputs-run.json";

std::string q(const fs::path& p) { return shell_quote(p.string()); }
std::string sample() { return q(kSource / "datasets/sample"); }

// FNV-1a 64 written here again (the manifest's hash), as 16 lower-case hex digits.
std::string fnv1a_hex(const std::string& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

// The wait status of the binary run with `args` and `env` assignments (it may be killed).
int run_status(const std::string& args, const std::string& env) {
  TempDir io;
  const std::string cmd = "exec env " + env + " " + shell_quote(kBinary) + " " + args + " >" +
                          q(io.path / "out") + " 2>" + q(io.path / "err") + " </dev/null";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

// The visible files of dir (not the lock, the checkpoint, the manifest or a staging folder).
std::map<std::string, std::string> visible_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.')
      files[e.path().filename().string()] = slurp(e.path());
  return files;
}

std::set<std::string> staging_folders(const fs::path& dir) {
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(".fp8-advisor-staging.")) found.insert(e.path().filename().string());
  return found;
}

// The manifest, parsed strictly, checked against the folder: every key known, every file named
// with its size and hash, and nothing else of the set in the folder.
nlohmann::json check_manifest(const fs::path& dir, const std::string& state) {
  const auto m = nlohmann::json::parse(slurp(dir / kManifest));
  std::set<std::string> keys;
  for (const auto& [k, v] : m.items()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"fp8_advisor_outputs", "set", "state", "written_by", "files"});
  CHECK(m.at("fp8_advisor_outputs") == 1);
  CHECK(m.at("set") == "run");
  CHECK(m.at("state") == state);
  CHECK(m.at("written_by").at("command_line").is_array());
  return m;
}

void check_whole(const fs::path& dir) {
  const auto m = check_manifest(dir, "complete");
  const auto files = visible_files(dir);
  std::set<std::string> named;
  for (const auto& f : m.at("files")) {
    const std::string name = f.at("name");
    named.insert(name);
    INFO(name);
    REQUIRE(files.count(name) == 1);
    CHECK(f.at("size") == files.at(name).size());
    CHECK(f.at("fnv1a") == fnv1a_hex(files.at(name)));
  }
  std::set<std::string> present;
  for (const auto& [name, bytes] : files) present.insert(name);
  CHECK(named == present);
}

}  // namespace

TEST_CASE("output set: a run killed while switching its files in is marked; compare refuses it; a run mends it") {
  TempDir d;
  const fs::path out = d.path / "out";
  const std::string args = "run --capture " + sample() + " --out " + q(out) + " --cost none --quiet";
  REQUIRE(run(args + " --recipes current").rc == 0);
  check_whole(out);
  const auto before = visible_files(out);
  // Another run, killed after its first 2 files (metrics.csv, gemms.csv) are renamed in.
  const int status = run_status(args + " --recipes current,block", "FP8A_TEST_OUTPUT_FAULT=switch:2");
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  const auto m = check_manifest(out, "switching");
  const auto now = visible_files(out);
  CHECK(now.at("metrics.csv") != before.at("metrics.csv"));  // the new run's
  CHECK(now.at("recipe.json") == before.at("recipe.json"));  // still the earlier run's
  CHECK(staging_folders(out).size() == 1);                   // what it had staged
  CHECK(lock_is_free(out / ".fp8-advisor.lock"));
  // The first file (in the manifest's order) that is not what the manifest names, found here.
  std::string stray, why;
  for (const auto& f : m.at("files")) {
    const std::string name = f.at("name");
    const std::string bytes = now.at(name);
    if (f.at("fnv1a") != fnv1a_hex(bytes)) {
      stray = name;
      why = "size " + std::to_string(bytes.size()) + ", FNV-1a " + fnv1a_hex(bytes) +
            " where the manifest says size " + std::to_string(f.at("size").get<std::uint64_t>()) + ", FNV-1a " +
            f.at("fnv1a").get<std::string>();
      break;
    }
  }
  CHECK(stray == "recipe.json");
  const auto refused = run("compare " + q(out) + " " + sample() + " --out " + q(d.path / "cmp"));
  CHECK(refused.rc == 3);
  CHECK(refused.err == "fp8-advisor: error: [fp8a.io.120] " + out.string() +
                           " holds a mixed set of output files: a run was stopped while switching its files in (" +
                           (out / kManifest).string() + " says \"switching\"); " + (out / stray).string() +
                           " is not that run's (" + why + "); run again into this folder\n");
  CHECK_FALSE(fs::exists(d.path / "cmp" / "compare.csv"));
  // The next run into the folder: its staging folder gone, the set whole, compare reads it.
  const auto again = run(args + " --recipes current,block --resume");
  INFO(again.err);
  REQUIRE(again.rc == 0);
  CHECK(again.err.find("fp8-advisor: --resume: [fp8a.io.120] ") != std::string::npos);  // said so
  CHECK(staging_folders(out).empty());
  check_whole(out);
  CHECK(run("compare " + q(out) + " " + sample() + " --out " + q(d.path / "cmp")).rc == 0);
  // A file changed after the run: named.
  write_bytes(out / "metrics.csv", slurp(out / "metrics.csv") + "\n");
  const std::string changed = slurp(out / "metrics.csv");
  const auto m2 = check_manifest(out, "complete");
  std::string listed;
  for (const auto& f : m2.at("files"))
    if (f.at("name") == "metrics.csv")
      listed = "size " + std::to_string(f.at("size").get<std::uint64_t>()) + ", FNV-1a " +
               f.at("fnv1a").get<std::string>();
  const auto edited = run("compare " + q(out) + " " + sample() + " --out " + q(d.path / "cmp2"));
  CHECK(edited.rc == 3);
  CHECK(edited.err == "fp8-advisor: error: [fp8a.io.121] " + (out / "metrics.csv").string() +
                          " does not belong to the output set " + (out / kManifest).string() + " names (size " +
                          std::to_string(changed.size()) + ", FNV-1a " + fnv1a_hex(changed) +
                          " where the manifest says " + listed +
                          "): changed after the run wrote it; run again into this folder\n");
}

TEST_CASE("output set: a FIFO or a link in place of a file of the set is missing, never waited on") {
  TempDir d;
  const fs::path out = d.path / "out";
  REQUIRE(run("run --capture " + sample() + " --out " + q(out) + " --cost none --quiet --recipes current").rc == 0);
  const auto refused = [&](const char* name) {
    const auto r = run("compare " + q(out) + " " + sample() + " --out " + q(d.path / "cmp"));
    CHECK(r.rc == 3);
    CHECK(r.err == "fp8-advisor: error: [fp8a.io.121] " + (out / name).string() +
                       " does not belong to the output set " + (out / kManifest).string() +
                       " names (missing): changed after the run wrote it; run again into this folder\n");
  };
  const std::string report = slurp(out / "report.md");
  fs::remove(out / "report.md");
  REQUIRE(::mkfifo((out / "report.md").c_str(), 0644) == 0);
  refused("report.md");  // a reader of the FIFO would wait for a writer for ever
  fs::remove(out / "report.md");
  write_bytes(d.path / "report.md", report);
  fs::create_symlink(d.path / "report.md", out / "report.md");
  refused("report.md");  // the same bytes, but not the file the run wrote
}

TEST_CASE("output set: a run that cannot write its files (disk full) leaves the earlier set whole") {
  TempDir d;
  const fs::path out = d.path / "out";
  const std::string args = "run --capture " + sample() + " --out " + q(out) + " --cost none --quiet";
  REQUIRE(run(args + " --recipes current").rc == 0);
  const auto before = visible_files(out);
  const std::string manifest = slurp(out / kManifest);
  const auto full = run(args + " --recipes current,block", "FP8A_TEST_OUTPUT_FAULT=stage:3");
  CHECK(full.rc == 3);
  // metrics.csv, gemms.csv and recipe.json staged, then the disk is full.
  CHECK(full.err.rfind("fp8-advisor: error: [fp8a.io.104] " + out.string() + "/.fp8-advisor-staging.", 0) == 0);
  CHECK(full.err.ends_with("/megatron_args.txt: cannot write: No space left on device\n"));
  CHECK(visible_files(out) == before);
  CHECK(slurp(out / kManifest) == manifest);
  CHECK(staging_folders(out).empty());
  check_whole(out);
  CHECK(run("compare " + q(out) + " " + sample() + " --out " + q(d.path / "cmp")).rc == 0);
  // A later run without GEMMs writes fewer files: the earlier set's others go with it.
  REQUIRE(run(args + " --recipes current --no-gemms").rc == 0);
  CHECK_FALSE(fs::exists(out / "gemms.csv"));
  CHECK_FALSE(fs::exists(out / "recipe.json"));
  check_whole(out);
}

TEST_CASE("output set: a rename refused while switching puts the earlier set back; a folder in the way changes nothing") {
  TempDir d;
  const fs::path out = d.path / "out";
  const std::string args = "run --capture " + sample() + " --out " + q(out) + " --cost none --quiet";
  REQUIRE(run(args + " --recipes current").rc == 0);
  const auto before = visible_files(out);
  const std::string manifest = slurp(out / kManifest), metrics = slurp(out / "metrics.csv");
  // Three files renamed in, then the fourth refused: before, a mixed set, "switching", the staging folder.
  const auto refused = run(args + " --recipes current,block", "FP8A_TEST_OUTPUT_FAULT=rename:3");
  CHECK(refused.rc == 3);
  CHECK(refused.err.ends_with(": cannot write: Input/output error (the earlier files were put back)\n"));
  CHECK(visible_files(out) == before);
  CHECK(slurp(out / kManifest) == manifest);
  CHECK(slurp(out / "metrics.csv") == metrics);
  CHECK(staging_folders(out).empty());
  check_whole(out);
  // A folder where a new file goes (the outside test's repro): refused before anything changes.
  fs::remove(out / "report.html");
  fs::create_directories(out / "report.html" / "x");
  const auto folder = run(args + " --recipes current,block");
  CHECK(folder.rc == 3);
  CHECK(folder.err == "fp8-advisor: error: [fp8a.io.104] " + (out / "report.html").string() +
                          ": cannot write: a folder is in the way; move it away (nothing was changed)\n");
  CHECK(slurp(out / kManifest) == manifest);
  CHECK(slurp(out / "metrics.csv") == metrics);
  CHECK(staging_folders(out).empty());
  // On a first run into an empty folder, a refused rename leaves no manifest behind.
  const fs::path fresh = d.path / "fresh";
  const auto first = run("run --capture " + sample() + " --out " + q(fresh) + " --cost none --quiet",
                         "FP8A_TEST_OUTPUT_FAULT=rename:2");
  CHECK(first.rc == 3);
  CHECK_FALSE(fs::exists(fresh / kManifest));
  CHECK((!fs::exists(fresh) || visible_files(fresh).empty()));
}
