// An output file as a value: what a renderer returns and cli writes. A new output is one renderer
// and one line in cli's list of artifacts.
#pragma once

#include <string>

namespace fp8a {

struct Artifact {
  std::string name;      // file name inside --out, e.g. "metrics.csv"
  std::string contents;  // the whole file
  std::string note;      // for the "wrote ..." line, e.g. "1258 rows"; "" for none
};

}  // namespace fp8a
