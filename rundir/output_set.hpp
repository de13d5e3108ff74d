// The files one command writes into --out, switched in as one set and named by a manifest.
//
// --out is the user's directory (it holds other files and the checkpoint), so the set cannot be
// swapped in by renaming one directory. Instead:
//   1. every file is written whole into DIR/.fp8-advisor-staging.<pid>/ (a failure here, a full
//      disk, leaves the earlier set as it was, complete);
//   2. a folder (or anything but a file or a link) where a new file goes is refused, nothing
//      changed;
//   3. the manifest DIR/.fp8-advisor-outputs-<set>.json is replaced, in one rename, by one saying
//      "state": "switching" and naming the new files;
//   4. the files the new ones replace, and the earlier set's files the new one lacks (only names
//      the earlier manifest lists), are moved aside into the staging folder, and each new file is
//      renamed in; a rename refused on the way moves everything back and restores the earlier
//      manifest (or its absence), so a failed run leaves --out as it found it;
//   5. the manifest is replaced by the same one saying "state": "complete"; the files moved aside
//      go with the staging folder.
// A run killed in 3..5 leaves a folder whose manifest says "switching": readers refuse it, naming
// a file that is not the new run's. The manifest names each file with its size and FNV-1a 64
// (core/fnv1a.hpp: against accidents, not an adversary), and the writer (version, git revision,
// command line). Readers of an earlier folder (compare) check it with check_output_set. The
// staging folder of a killed run is removed by the next holder of the --out lock.
#pragma once

#include <string>
#include <vector>

#include "reports/artifact.hpp"

namespace fp8a {

// The staging folder's name in DIR, before the writer's pid.
inline constexpr const char* kOutputStagingPrefix = ".fp8-advisor-staging.";

// The manifest's file name in DIR for a set ("run", "compare"): ".fp8-advisor-outputs-run.json".
std::string output_manifest_name(const std::string& set);

// Writes `artifacts` (distinct plain file names) into dir as the set `set`, by the steps above;
// `writer` and `command_line` go into the manifest. Returns the line that lists them, in their
// order, each with its note: "wrote DIR/a.csv (12 rows), DIR/b.json". The caller holds dir's
// OutputLock. Input error fp8a.io.104 naming the file on any failure (in step 1 the staging
// folder is removed).
// Test hook: FP8A_TEST_OUTPUT_FAULT=stage:N fails (io.104, "no space left on device") after N
// files are staged; =switch:N kills the process (SIGKILL) after N files are renamed in; =rename:N
// refuses the rename after N files are renamed in (io.104, as an I/O error would).
std::string write_output_set(const std::string& dir, const std::string& set, const std::vector<Artifact>& artifacts,
                             const std::string& writer, const std::vector<std::string>& command_line);

// Whether dir's set `set` is whole. No manifest: a folder written before manifests existed (or by
// hand), accepted as it is. Input error fp8a.io.120 when the manifest says "switching" (a mixed
// set; the first file that is not the new run's named), fp8a.io.121 when a file it names is
// missing or differs in size or hash (the file named), fp8a.io.122 when the manifest is malformed.
void check_output_set(const std::string& dir, const std::string& set);

}  // namespace fp8a
