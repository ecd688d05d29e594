// numgate — RMSNorm oracles: golden (FP64), reference (target dtype policy), input
// drawing, the declared case list, and deliberately broken reference variants (mutants)
// that the CPU tests feed to the gate as if they were the target.
//
// Formula (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; the Llama /
// Qwen3 form), per row r of x [rows, hidden] (leading dimensions flattened), w [hidden]:
//
//   rstd_r = 1 / sqrt(mean_i x[r,i]^2 + eps)
//   y[r,i] = x[r,i] * rstd_r * w[i]
//
// Backward, given the upstream gradient dy [rows, hidden], with g = dy * w:
//
//   dx[r,i] = rstd_r * g[r,i] - rstd_r^3 * x[r,i] * mean_j(g[r,j] * x[r,j])
//   dw[i]   = sum_r dy[r,i] * x[r,i] * rstd_r
//
// Reference dtype policy (formula_version 1 and 2): inputs and outputs in the case dtype,
// every intermediate in FP32, one rounding per output at the very end:
//
//   forward:  ss = sum x^2 (FP32, sequential) ; r = 1 / sqrtf(ss / hidden + eps)
//             y = dtype((x * r) * w)
//   backward: g = dy * w ; mgx = (sum g * x) / hidden ; xhat = x * r
//             dx = dtype(r * (g - xhat * (r * mgx)))
//             dw = dtype(sum over rows of dy * xhat)          (FP32 accumulation)
//
// This is the contract of fused mixed-precision RMSNorm kernels (FP32 math, one cast
// of the output), e.g. torch.nn.functional.rms_norm's FP32 "opmath" computation for
// reduced-precision inputs. Note that Hugging Face's LlamaRMSNorm.forward instead casts
// the normalized x back to the input dtype BEFORE multiplying by w (two roundings):
// that is mutant (c) below, and the README explains why the max-abs gate cannot tell it
// apart from the one-rounding policy.
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::rmsnorm {

/// Deliberately broken reference variants (SPEC §6: sources of discrepancy).
enum class Mutant {
  none,                    ///< the correct reference
  bf16_sum_of_squares,     ///< (a) sum of squares accumulated in bf16 (accumulation dtype)
  eps_outside_sqrt,        ///< (b) r = 1 / (sqrt(mean x^2) + eps)     (epsilon placement)
  cast_before_weight,      ///< (c) y = dtype(w * dtype(x * r))        (cast timing)
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference), its
/// sums and multiply-adds under the summation policy `p` (numgate/summation.h; the default
/// is the reference's own: serial, no FMA). Policies apply to ss = sum x^2, sum g x, the
/// dx multiply-add g - xhat (r mgx) and dw's sum over rows (bf16_sum_of_squares keeps its
/// serial bf16 accumulation).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// The RMSNorm op: inputs x, w, dy; gated tensors y, dx, dw.
class RMSNormOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // rmsnorm_oracle.cpp: tensors, passes, formula_version
  /// OffsetRMSNorm's oracles call these: a formula change here bumps offset_rmsnorm's
  /// formula_version as well.
  std::vector<CaseSpec> cases() const override;  // rmsnorm_cases.cpp
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

}  // namespace numgate::rmsnorm
