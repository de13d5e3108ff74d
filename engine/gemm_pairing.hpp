// The GEMMs of a captured linear layer: its X, W and dY paired per (step, layer) and rank, how the
// layer is split over tensor-parallel ranks, its whole-layer dims, and which copy of which operand
// each of the three GEMMs consumes. The GEMM error (gemm_error.hpp) computes on these; a cost
// model takes the same m, n, k.
//   fprop  Y  = X W^T    [M, N], reduction K
//   dgrad  dX = dY W     [M, K], reduction N
//   wgrad  dW = dY^T X   [N, K], reduction M
// with X [M, K] (activation), W [N, K] (weight), dY [M, N] (gradient).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe.hpp"
#include "datasets/capture.hpp"
#include "engine/gemm_engine.hpp"

namespace fp8a {

// The two operands of one GEMM, as TE quantises them: the role and copy of the left operand (a)
// and of the right operand (b).
struct GemmOperandUse {
  Gemm gemm = Gemm::kFprop;
  Role a = Role::kActivation;
  Orientation a_orientation = Orientation::kRowwise;
  Role b = Role::kWeight;
  Orientation b_orientation = Orientation::kRowwise;
};

// The operand uses of fprop, dgrad and wgrad, indexed by Gemm:
//   fprop  X rowwise,     W rowwise
//   dgrad  dY rowwise,    W columnwise
//   wgrad  dY columnwise, X columnwise
inline constexpr std::array<GemmOperandUse, 3> kGemmOperandUses = {{
    {Gemm::kFprop, Role::kActivation, Orientation::kRowwise, Role::kWeight, Orientation::kRowwise},
    {Gemm::kDgrad, Role::kGradient, Orientation::kRowwise, Role::kWeight, Orientation::kColumnwise},
    {Gemm::kWgrad, Role::kGradient, Orientation::kColumnwise, Role::kActivation, Orientation::kColumnwise},
}};

// How a layer's GEMMs are split over ranks (Megatron/TE):
//   kNone    one rank (an unsharded capture);
//   kColumn  column-parallel (QKV, FC1): every rank all of X, a slice of W's rows and dY's columns;
//   kRow     row-parallel (proj, FC2): a slice of X's and W's columns, all of dY;
//   kData    data-parallel: the same W, each rank its own tokens of X and dY.
enum class Split : std::uint8_t { kNone, kColumn, kRow, kData };

// "none", "column-parallel", "row-parallel", "data-parallel".
const char* split_name(Split split);

// Whether the GEMM's reduction dimension is split over the ranks, so the whole layer's output is
// the sum of the ranks' outputs (an all-reduce): fprop of kRow, dgrad of kColumn, wgrad of kData.
// Otherwise the ranks' outputs are slices of it, side by side. False for kNone.
bool output_is_sum(Split split, Gemm gemm);

// One GEMM's dims: output [m, n], reduction k. Elements, not bytes.
struct GemmDims {
  std::int64_t m = 0, n = 0, k = 0;
  bool operator==(const GemmDims&) const = default;
};

// One rank's operands of a layer at a step, indexed by Role: X, W, dY. Never null.
using GemmOperands = std::array<const CapturedTensor*, 3>;

// A layer whose three operands were captured at a step and fit together.
struct GemmLayer {
  std::int64_t step = 0;
  std::string layer;
  // One operand triple per rank, in rank order; exactly one without tensor parallelism.
  // Pointers into the CaptureSet: it must outlive the GemmLayer.
  std::vector<GemmOperands> ranks;
  Split split = Split::kNone;  // kNone exactly when ranks.size() == 1
  // The whole layer's X [m, k], W [n, k], dY [m, n]: n adds up over column-parallel ranks, k over
  // row-parallel ones, the tokens m over data-parallel ones.
  std::int64_t m = 0, n = 0, k = 0;

  // The whole layer's dims of one GEMM: fprop {m, n, k}, dgrad {m, k, n}, wgrad {n, k, m}.
  GemmDims dims(Gemm gemm) const;
};

// A (step, layer) whose three operands were captured but cannot be computed together: where, and
// why (`line` says both, as the warnings print it).
struct PairingSkip {
  std::int64_t step = 0;
  std::string layer;
  std::string line;
};

// The GEMM layers of a capture, ordered by step, then layer name (plain string order).
// A (step, layer) without all of X, W and dY is left out silently.
// One that cannot be computed is left out and named in `skipped` (may be null), one line each:
//   "step S layer 'L': X, W and dY were captured on different numbers of ranks (x, w, dy)";
//   "step S layer 'L': operand shapes do not fit X [M,K], W [N,K], dY [M,N] (X axb, W axb, dY axb)";
//   "step S layer 'L': rank R's shards do not fit X [M,K], W [N,K], dY [M,N] (sequence
//    parallelism splits X by tokens: not supported) (X axb, W axb, dY axb)";
//   "step S layer 'L': captured as N ranks, but neither column-parallel (the same X on every
//    rank), row-parallel (the same dY) nor data-parallel (the same W)".
// Shapes are the operands' 2-D views (TensorView rows x cols). A split is recognised by which
// operands hold the same bytes on every rank.
std::vector<GemmLayer> pair_gemm_operands(const CaptureSet& captures, std::vector<PairingSkip>* skipped);

}  // namespace fp8a
