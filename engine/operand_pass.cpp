#include "engine/operand_pass.hpp"

namespace fp8a {

std::vector<OperandMeasures> measure_operands(const CaptureSet& captures, std::span<const OperandPass> passes) {
  std::vector<OperandMeasures> out;
  out.reserve(passes.size());
  for (const OperandPass& p : passes) {
    OperandMeasures m;
    m.damage.resize(p.thresholds.size());
    for (const CapturedTensor& t : captures.tensors) {
      if (t.key != p.key) continue;
      if (p.histogram) m.histogram.merge(log2_histogram(t.view));
      if (!p.thresholds.empty()) {
        const std::vector<ClipDamage> d = clip_damage(t.view, p.thresholds);
        for (std::size_t k = 0; k < d.size(); ++k) m.damage[k].merge(d[k]);
      }
      t.view.release();  // TensorStorage::release
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace fp8a
