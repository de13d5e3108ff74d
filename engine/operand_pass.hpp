// What the pipeline measures on captured operands after the evaluation, in one read of each: the
// log2|x| histogram report.html draws (engine/histogram.hpp) and what clipping at given thresholds
// costs, for the delayed forecast (engine/clip_damage.hpp). The policies choose the operands and
// thresholds from the evaluation table and get the values back; besides it only the flushed-rows
// pass (engine/row_flush.hpp, before the forecasts: the underflow verdicts need it) reads tensors.
#pragma once

#include <span>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/clip_damage.hpp"
#include "engine/histogram.hpp"

namespace fp8a {

// One captured operand (all its rank shards together) and what to measure on it.
struct OperandPass {
  CaptureKey key;
  bool histogram = false;          // its log2_histogram
  std::vector<double> thresholds;  // clip_damage at each (may be empty)
};

struct OperandMeasures {
  Log2Histogram histogram;         // empty unless asked for
  std::vector<ClipDamage> damage;  // one per threshold, in order
};

// One per pass, in order. Each key's shards are read once for everything asked of it and released
// after (the resident set stays one tensor); a key asked twice is read twice. A key with no
// captured tensor measures nothing (empty histogram, zero damage).
std::vector<OperandMeasures> measure_operands(const CaptureSet& captures, std::span<const OperandPass> passes);

}  // namespace fp8a
