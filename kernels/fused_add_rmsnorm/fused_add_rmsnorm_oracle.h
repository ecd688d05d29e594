// numgate — fused residual-add + RMSNorm oracles: golden (FP64), reference (target dtype
// policy), input drawing, the declared case list, and deliberately broken reference
// variants (mutants) that the CPU tests feed to the gate as if they were the target.
//
// Formula (the pre-norm residual step of Llama / Qwen decoders, fused as in vLLM's
// fused_add_rms_norm and FlashInfer's fused_add_rmsnorm; RMSNorm: Zhang & Sennrich 2019,
// arXiv:1910.07467), per row r of x, residual [rows, hidden], w [hidden]:
//
//   h[r,i]            = x[r,i] + residual[r,i]
//   residual_out[r,i] = h[r,i]                      (golden: the exact FP64 sum)
//   rstd_r            = 1 / sqrt(mean_i h[r,i]^2 + eps)
//   y[r,i]            = h[r,i] * rstd_r * w[i]
//
// Backward, given dy (gradient of y) and d_residual_out (gradient of residual_out), with
// g = dy * w:
//
//   dx[r,i] = rstd_r * g[r,i] - rstd_r^3 * h[r,i] * mean_j(g[r,j] * h[r,j]) + d_residual_out[r,i]
//   (the gradient of residual is the same tensor: h = x + residual; one gated output, dx)
//   dw[i]   = sum_r dy[r,i] * h[r,i] * rstd_r
//
// Reference dtype policy (formula_version 1): inputs/outputs in the case dtype, every
// intermediate in FP32, one rounding per output. It mirrors the unfused framework code
// on the FP32 upcast: h = x.float() + residual.float(); residual_out = h.to(dtype);
// y = (torch.nn.functional.rms_norm(h) * w.float()).to(dtype) — the variance is taken
// from the FP32 h, never from the rounded residual_out:
//
//   forward:  h = float(x) + float(residual) ; residual_out = dtype(h)
//             ss = sum h^2 (FP32, sequential) ; r = 1 / sqrtf(ss / hidden + eps)
//             y = dtype((h * r) * w)
//   backward: g = dy * w ; mgh = (sum g * h) / hidden ; hhat = h * r
//             dx = dtype(r * (g - hhat * (r * mgh)) + d_residual_out)
//             dw = dtype(sum over rows of dy * hhat)          (FP32 accumulation)
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::fused_add_rmsnorm {

/// Deliberately broken reference variants.
enum class Mutant {
  none,                            ///< the correct reference
  variance_from_rounded_residual,  ///< ss = sum dtype(h)^2: variance from residual_out (cast timing)
  residual_grad_dropped,           ///< dx without + d_residual_out (the residual branch's gradient lost)
  residual_out_toward_zero,        ///< residual_out = the exact sum rounded toward zero (wrong rounding mode)
  eps_outside_sqrt,                ///< rstd = 1 / (sqrt(mean h^2) + eps)  (epsilon placement)
  bf16_sum_of_squares,             ///< sum of h^2 accumulated in bf16 (low-precision accumulator)
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference), under
/// the summation policy `p` (numgate/summation.h; default: the reference's serial order
/// without FMA): sum h^2, sum g h, the dh multiply-add g - hhat (r mgh) and dw's sum over
/// rows (bf16_sum_of_squares keeps its serial bf16 accumulation).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// The fused residual-add + RMSNorm op: inputs x, residual, w, dy, d_residual_out; gated
/// tensors residual_out, y, dx (= gradient of residual too), dw.
class FusedAddRMSNormOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // fused_add_rmsnorm_oracle.cpp: tensors, passes, formula_version
  std::vector<CaseSpec> cases() const override;  // fused_add_rmsnorm_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // fused_add_rmsnorm_cases.cpp: the checklist
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

}  // namespace numgate::fused_add_rmsnorm
