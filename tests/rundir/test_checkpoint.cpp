// The checkpoint's files are hostile input too (issue 25): a unit that is a FIFO is a miss, never
// a read that waits forever; a symbolic link in the checkpoint (its folder, units/, a unit) is
// damage, removed with a note, and nothing is read or written through it; paths that are not
// UTF-8 are kept in manifest.json losslessly and read back as the same bytes.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "rundir/checkpoint.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using fp8a::Checkpoint;
using fp8a::CheckpointManifest;
using fp8a::UnitKind;

using fp8a::testing::TempDir;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CheckpointManifest manifest() {
  CheckpointManifest m;
  m.build = "0.0.0 (test)";
  m.options = {{"--recipes", "current"}};
  m.inputs = {{"caps/step_1.safetensors", "size 10, mtime 1.0"}};
  return m;
}

std::size_t entries_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("Checkpoint: a unit that is a FIFO is a miss, read without waiting; at --resume it is removed") {
  TempDir out;
  const fs::path units = out.path / Checkpoint::kDirName / "units";
  {
    Checkpoint c(out.path.string(), manifest(), false);
    c.save(UnitKind::kShard, "a", "payload a");
    c.save(UnitKind::kShard, "b", "payload b");
    CHECK(c.load(UnitKind::kShard, "a") == std::optional<std::string>("payload a"));
    // A FIFO in place of a unit: opening it to read would wait for a writer.
    const fs::path a = units / Checkpoint::unit_file_name(UnitKind::kShard, "a");
    fs::remove(a);
    REQUIRE(::mkfifo(a.c_str(), 0600) == 0);
    CHECK(c.load(UnitKind::kShard, "a") == std::nullopt);
    CHECK(c.load(UnitKind::kShard, "b") == std::optional<std::string>("payload b"));
  }
  Checkpoint resumed(out.path.string(), manifest(), true);
  REQUIRE(resumed.notes().size() == 1);
  CHECK(resumed.notes()[0] == "--resume: 1 entry of " + units.string() +
                                  " not a regular file (a symbolic link, FIFO or folder): removed, not followed; "
                                  "what they held is evaluated again");
  CHECK(!fs::exists(fs::symlink_status(units / Checkpoint::unit_file_name(UnitKind::kShard, "a"))));
  CHECK(resumed.load(UnitKind::kShard, "a") == std::nullopt);
  CHECK(resumed.load(UnitKind::kShard, "b") == std::optional<std::string>("payload b"));
  resumed.save(UnitKind::kShard, "a", "again");
  CHECK(resumed.load(UnitKind::kShard, "a") == std::optional<std::string>("again"));
}

TEST_CASE("Checkpoint: a symbolic link in the checkpoint is removed, never read or written through") {
  TempDir out, elsewhere;
  const fs::path dir = out.path / Checkpoint::kDirName, units = dir / "units";
  const fs::path outside = elsewhere.path / "target";
  fs::create_directories(outside);
  {
    Checkpoint c(out.path.string(), manifest(), false);
    c.save(UnitKind::kShard, "a", "payload a");
  }
  const std::string unit_a = Checkpoint::unit_file_name(UnitKind::kShard, "a");
  SUBCASE("units/ is a link to a folder outside --out") {
    fs::copy(units / unit_a, outside / unit_a);
    const std::string before = slurp(outside / unit_a);
    fs::remove_all(units);
    fs::create_directory_symlink(outside, units);
    Checkpoint c(out.path.string(), manifest(), true);
    REQUIRE(c.notes().size() == 1);
    CHECK(c.notes()[0] == "--resume: " + units.string() + " is a symbolic link: not followed, removed; evaluating everything");
    CHECK(fs::symlink_status(units).type() == fs::file_type::directory);
    CHECK(c.load(UnitKind::kShard, "a") == std::nullopt);  // not taken from outside
    c.save(UnitKind::kShard, "b", "payload b");
    CHECK(fs::exists(units / Checkpoint::unit_file_name(UnitKind::kShard, "b")));
    CHECK(entries_in(outside) == 1);  // the outside folder as it was
    CHECK(slurp(outside / unit_a) == before);
  }
  SUBCASE("the checkpoint folder is a link") {
    fs::rename(dir, outside / "moved");
    fs::create_directory_symlink(outside / "moved", dir);
    Checkpoint c(out.path.string(), manifest(), true);
    REQUIRE(c.notes().size() == 1);
    CHECK(c.notes()[0] == "--resume: " + dir.string() + " is a symbolic link: not followed, removed; evaluating everything");
    CHECK(fs::symlink_status(dir).type() == fs::file_type::directory);
    CHECK(fs::exists(outside / "moved" / "units" / unit_a));  // what the link pointed to is untouched
    c.save(UnitKind::kShard, "b", "payload b");
    CHECK(!fs::exists(outside / "moved" / "units" / Checkpoint::unit_file_name(UnitKind::kShard, "b")));
  }
  SUBCASE("without --resume a link is removed too, silently (the checkpoint starts afresh anyway)") {
    fs::remove_all(units);
    fs::create_directory_symlink(outside, units);
    Checkpoint c(out.path.string(), manifest(), false);
    CHECK(c.notes().empty());
    c.save(UnitKind::kShard, "b", "payload b");
    CHECK(entries_in(outside) == 0);
  }
  SUBCASE("a unit is a link to a file outside: removed, the file untouched") {
    const fs::path target = outside / "secret";
    std::ofstream(target) << "not a unit";
    fs::remove(units / unit_a);
    fs::create_symlink(target, units / unit_a);
    Checkpoint c(out.path.string(), manifest(), true);
    REQUIRE(c.notes().size() == 1);
    CHECK(c.notes()[0].find("--resume: 1 entry of ") == 0);
    CHECK(c.load(UnitKind::kShard, "a") == std::nullopt);
    c.save(UnitKind::kShard, "a", "payload a");
    CHECK(slurp(target) == "not a unit");
    CHECK(fs::symlink_status(units / unit_a).type() == fs::file_type::regular);
  }
}

TEST_CASE("Checkpoint: paths that are not UTF-8 kept losslessly in manifest.json, the same at --resume") {
  TempDir out;
  CheckpointManifest m = manifest();
  const std::string hostile = "caps\xFF\xFE/st\\ep_1.safetensors";
  m.inputs = {{hostile, "size 10, mtime 1.0"}};
  m.options["--policy"] = "pol\xC3icy.json";
  { Checkpoint c(out.path.string(), m, false); }
  const auto j = nlohmann::json::parse(slurp(out.path / Checkpoint::kDirName / "manifest.json"));
  CHECK(j.at("inputs").size() == 1);
  CHECK(j.at("inputs").begin().key() == "caps\\xff\\xfe/st\\\\ep_1.safetensors");
  CHECK(j.at("options").at("--policy") == "pol\\xc3icy.json");
  // Read back as the same bytes: nothing changed.
  Checkpoint same(out.path.string(), m, true);
  CHECK(same.notes().empty());
  // A changed file is named by its bytes.
  m.inputs[hostile] = "size 11, mtime 2.0";
  Checkpoint changed(out.path.string(), m, true);
  REQUIRE(changed.notes().size() == 1);
  CHECK(changed.notes()[0] == "--resume: " + hostile +
                                  " changed (was size 10, mtime 1.0, now size 11, mtime 2.0): what it holds is evaluated again");
}

TEST_CASE("Checkpoint: temporaries of a run killed mid-write (a unit's, the manifest's) are gone at --resume") {
  TempDir out;
  const fs::path dir = out.path / Checkpoint::kDirName, units = dir / "units";
  {
    Checkpoint c(out.path.string(), manifest(), false);
    c.save(UnitKind::kShard, "a", "payload a");
  }
  // What write_file_atomically leaves when the process dies between open and rename.
  const fs::path unit_tmp = units / (Checkpoint::unit_file_name(UnitKind::kShard, "b") + ".tmp.4242");
  const fs::path manifest_tmp = dir / "manifest.json.tmp.4243";
  std::ofstream(unit_tmp) << "half";
  std::ofstream(manifest_tmp) << "{\"half";
  Checkpoint resumed(out.path.string(), manifest(), true);
  CHECK(resumed.notes().empty());
  CHECK(!fs::exists(unit_tmp));
  CHECK(!fs::exists(manifest_tmp));
  CHECK(resumed.load(UnitKind::kShard, "a") == std::optional<std::string>("payload a"));
  CHECK(entries_in(dir) == 2);  // manifest.json and units/
}
