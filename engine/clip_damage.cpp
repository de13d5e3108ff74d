#include "engine/clip_damage.hpp"

#include <algorithm>
#include <cmath>

namespace fp8a {

namespace {

constexpr std::int64_t kChunk = 4096;

}  // namespace

double ClipDamage::clipped_pct() const {
  return finite > 0 ? 100.0 * static_cast<double>(clipped) / static_cast<double>(finite) : 0.0;
}

double ClipDamage::clipped_rel_mse() const { return energy > 0 ? clipped_sq_err / energy : 0.0; }

void ClipDamage::merge(const ClipDamage& other) {
  finite += other.finite;
  clipped += other.clipped;
  clipped_sq_err += other.clipped_sq_err;
  energy += other.energy;
}

std::vector<ClipDamage> clip_damage(const TensorView& tensor, std::span<const double> thresholds) {
  std::vector<ClipDamage> out(thresholds.size());
  const std::int64_t numel = tensor.numel();
  std::vector<float> buf(static_cast<std::size_t>(std::min(kChunk, std::max<std::int64_t>(numel, 1))));
  std::int64_t finite = 0;
  double energy = 0.0;
  for (std::int64_t begin = 0; begin < numel; begin += kChunk) {
    const std::int64_t n = std::min(kChunk, numel - begin);
    tensor.load_floats(begin, n, buf.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = std::fabs(static_cast<double>(buf[static_cast<std::size_t>(i)]));
      if (!std::isfinite(x)) continue;
      ++finite;
      energy += x * x;
      for (std::size_t k = 0; k < thresholds.size(); ++k)
        if (x > thresholds[k]) {
          ++out[k].clipped;
          out[k].clipped_sq_err += (x - thresholds[k]) * (x - thresholds[k]);
        }
    }
  }
  for (ClipDamage& d : out) {
    d.finite = finite;
    d.energy = energy;
  }
  return out;
}

}  // namespace fp8a
