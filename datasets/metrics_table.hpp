// metrics.csv read back: the rows an earlier `fp8-advisor run --out DIR` wrote, as values, so that
// `compare` can take a run folder wherever it takes a capture.
//
// Only the columns compare needs are kept; columns are found by name in the header, so files with
// columns appended later still read. Numbers read back exactly: the writer prints the shortest text
// that reads back to the same value (reports/number_format.hpp), and each column is parsed in the
// type it was written from (amax float, the metrics double).
#pragma once

#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"

namespace fp8a {

// One row of metrics.csv: one tensor under one recipe in one format and orientation.
struct MetricsRecord {
  CaptureKey key;           // step, layer, and the role metrics.csv calls `tensor`
  std::string recipe;       // canonical spec, e.g. "delayed:history=1024:algo=max:margin=0"
  std::string format;       // "e4m3" or "hybrid"
  std::string orientation;  // "rowwise" or "columnwise"
  double amax = 0;          // a float in the file (TensorStats::amax)
  double mse = 0;
  double rel_mse = 0;
  double sqnr_db = 0;
  double cos = 0;
  double underflow_pct = 0;
  double overflow_pct = 0;
  double saturated_pct = 0;
};

// Whether `dir` is the output folder of an earlier `run --out`: a directory holding metrics.csv
// and summary.json.
bool is_run_output_folder(const std::string& dir, const FileSystem& fs);

// The rows of `path` (a metrics.csv), in file order. RFC 4180 fields (quoted layer and file names);
// a layer starting with ' loses it (the writer's guard against formulas, reports/csv.hpp), so
// the layer is the captured name; one over kMaxNameBytes (core/text.hpp) is not valid there.
// Throws input error fp8a.io.105 naming the file, line and column when the header lacks a column
// compare needs, a row has another field count, or a field is not what its column holds;
// fp8a.io.102 when the file cannot be read.
std::vector<MetricsRecord> read_metrics_csv(const std::string& path, const FileSystem& fs);

}  // namespace fp8a
