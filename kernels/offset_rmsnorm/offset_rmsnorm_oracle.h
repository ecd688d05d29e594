// numgate — OffsetRMSNorm oracles: golden (FP64), reference (target dtype policy), input
// drawing, the declared case list, and deliberately broken reference variants (mutants)
// that the CPU tests feed to the gate as if they were the target.
//
// Formula (RMSNorm, Zhang & Sennrich 2019, arXiv:1910.07467, with a zero-centred weight
// as in Gemma — transformers GemmaRMSNorm.forward — and Qwen3-Next / Qwen3.5), per row r
// of x [rows, hidden] (leading dimensions flattened), w [hidden]:
//
//   rstd_r = 1 / sqrt(mean_i x[r,i]^2 + eps)
//   y[r,i] = x[r,i] * rstd_r * (1 + w[i])
//
// Backward, given dy [rows, hidden], with g = dy * (1 + w):
//
//   dx[r,i] = rstd_r * g[r,i] - rstd_r^3 * x[r,i] * mean_j(g[r,j] * x[r,j])
//   dw[i]   = sum_r dy[r,i] * x[r,i] * rstd_r           (same as RMSNorm's dw)
//
// Reference dtype policy (formula_version 1): inputs and outputs in the case dtype, every
// intermediate in FP32, one rounding per output at the very end. It mirrors
// GemmaRMSNorm.forward (x.float(), normalize, `* (1.0 + self.weight.float())`, one cast
// `.type_as(x)`), with 1/sqrtf(...) for torch.rsqrt (the kernels use a correctly
// rounded divide and square root):
//
//   forward:  ss = sum x^2 (FP32, sequential) ; r = 1 / sqrtf(ss / hidden + eps)
//             wp = 1.0f + float(w)                     <- FP32, never in the weight dtype
//             y  = dtype((x * r) * wp)
//   backward: g = dy * wp ; mgx = (sum g * x) / hidden ; xhat = x * r
//             dx = dtype(r * (g - xhat * (r * mgx)))
//             dw = dtype(sum over rows of dy * xhat)   (FP32 accumulation)
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::offset_rmsnorm {

/// Deliberately broken reference variants.
enum class Mutant {
  none,                       ///< the correct reference
  one_plus_w_in_weight_dtype, ///< wp = dtype(1 + w): the offset added in the weight dtype (cast timing)
  offset_dropped,             ///< wp = w: plain RMSNorm weight semantics (zero-centred weight ignored)
  eps_outside_sqrt,           ///< r = 1 / (sqrt(mean x^2) + eps)  (epsilon placement; RMSNorm's mutant)
  bf16_sum_of_squares,        ///< sum of x^2 accumulated in bf16 (RMSNorm's mutant)
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference), under
/// the summation policy `p` (RMSNorm's, rmsnorm_oracle.h; the FP32 scale 1 + w is one
/// addition, no freedom).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// The OffsetRMSNorm op: inputs x, w, dy; gated tensors y, dx, dw.
class OffsetRMSNormOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // offset_rmsnorm_oracle.cpp: tensors, passes, formula_version
  /// Golden and reference are RMSNorm's (rmsnorm_oracle.h) with the scale 1 + w as the
  /// weight: a change to RMSNorm's oracle must bump this version too.
  std::vector<CaseSpec> cases() const override;  // offset_rmsnorm_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // offset_rmsnorm_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(c, in, Mutant::none);
  }
  std::map<std::string, Tensor> reference_under(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                const SumPolicy& p) const override {
    return reference_variant(c, in, Mutant::none, p);
  }
};

}  // namespace numgate::offset_rmsnorm
