#include "engine/gemm_pairing.hpp"

#include <cstring>
#include <map>
#include <utility>

namespace fp8a {

namespace {

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape &&
         std::memcmp(a.data, b.data, static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype)) == 0;
}

bool fits(const GemmOperands& o) {
  const auto &x = o[0]->view, &w = o[1]->view, &dy = o[2]->view;
  return x.cols == w.cols && dy.cols == w.rows && x.rows == dy.rows;
}

std::string shapes(const GemmOperands& o) {
  const auto &x = o[0]->view, &w = o[1]->view, &dy = o[2]->view;
  return "X " + std::to_string(x.rows) + "x" + std::to_string(x.cols) + ", W " +
         std::to_string(w.rows) + "x" + std::to_string(w.cols) + ", dY " +
         std::to_string(dy.rows) + "x" + std::to_string(dy.cols);
}

}  // namespace

const char* split_name(Split s) {
  switch (s) {
    case Split::kNone: return "none";
    case Split::kColumn: return "column-parallel";
    case Split::kRow: return "row-parallel";
    case Split::kData: return "data-parallel";
  }
  return "none";
}

bool output_is_sum(Split split, Gemm g) {
  return (split == Split::kColumn && g == Gemm::kDgrad) ||
         (split == Split::kRow && g == Gemm::kFprop) || (split == Split::kData && g == Gemm::kWgrad);
}

GemmDims GemmLayer::dims(Gemm gemm) const {
  switch (gemm) {
    case Gemm::kFprop: return {m, n, k};
    case Gemm::kDgrad: return {m, k, n};
    case Gemm::kWgrad: return {n, k, m};
  }
  return {m, n, k};
}

std::vector<GemmLayer> pair_gemm_operands(const CaptureSet& captures, std::vector<PairingSkip>* skipped) {
  const std::pair<std::int64_t, std::string>* at = nullptr;  // the (step, layer) being paired
  const auto skip = [&](std::string why) {
    if (skipped != nullptr) skipped->push_back({at->first, at->second, std::move(why)});
  };
  // Operands by (step, layer), one list per role (captures list a key's shards in rank order).
  std::map<std::pair<std::int64_t, std::string>, std::array<std::vector<const CapturedTensor*>, 3>> layers;
  for (const auto& t : captures.tensors)
    layers[{t.key.step, t.key.layer}][static_cast<int>(t.key.role)].push_back(&t);

  std::vector<GemmLayer> out;
  for (const auto& [key, by_role] : layers) {
    if (by_role[0].empty() || by_role[1].empty() || by_role[2].empty()) continue;
    at = &key;
    const std::string where = "step " + std::to_string(key.first) + " layer '" + key.second + "': ";
    const std::size_t r = by_role[0].size();
    if (by_role[1].size() != r || by_role[2].size() != r) {
      skip(where + "X, W and dY were captured on different numbers of ranks (" + std::to_string(r) +
           ", " + std::to_string(by_role[1].size()) + ", " + std::to_string(by_role[2].size()) + ")");
      continue;
    }
    GemmLayer g;
    g.step = key.first;
    g.layer = key.second;
    for (std::size_t i = 0; i < r; ++i) g.ranks.push_back({by_role[0][i], by_role[1][i], by_role[2][i]});
    bool ok = true;
    for (std::size_t i = 0; i < r && ok; ++i) {
      if (fits(g.ranks[i])) continue;
      ok = false;
      skip(where + (r == 1 ? "operand shapes do not fit X [M,K], W [N,K], dY [M,N] ("
                           : "rank " + std::to_string(g.ranks[i][0]->rank) +
                                 "'s shards do not fit X [M,K], W [N,K], dY [M,N] "
                                 "(sequence parallelism splits X by tokens: not "
                                 "supported) (") +
           shapes(g.ranks[i]) + ")");
    }
    if (!ok) continue;
    if (r > 1) {
      const auto replicated = [&](int role) {
        for (std::size_t i = 1; i < r; ++i)
          if (!same_bytes(g.ranks[i][role]->view, g.ranks[0][role]->view)) return false;
        return true;
      };
      const bool x_same = replicated(0), w_same = replicated(1), dy_same = replicated(2);
      for (const auto& rank : g.ranks)  // compared: done with their bytes (TensorStorage::release)
        for (const CapturedTensor* t : rank) t->view.release();
      if (x_same && !w_same && !dy_same) g.split = Split::kColumn;
      else if (dy_same && !x_same && !w_same) g.split = Split::kRow;
      else if (w_same && !x_same && !dy_same) g.split = Split::kData;
      else {
        skip(where + "captured as " + std::to_string(r) +
             " ranks, but neither column-parallel (the same X on every rank), "
             "row-parallel (the same dY) nor data-parallel (the same W)");
        continue;
      }
    }
    for (std::size_t i = 0; i < r; ++i) {
      g.m += g.split == Split::kData || i == 0 ? g.ranks[i][0]->view.rows : 0;
      g.n += g.split == Split::kColumn || i == 0 ? g.ranks[i][1]->view.rows : 0;
      g.k += g.split == Split::kRow || i == 0 ? g.ranks[i][1]->view.cols : 0;
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace fp8a
