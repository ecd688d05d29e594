// numgate — LayerNorm oracles: golden (FP64), reference (target dtype policy), input
// drawing, and deliberately broken reference variants (mutants) that the CPU tests feed
// to the gate as if they were the target.
//
// Formula (Ba, Kiros & Hinton 2016, "Layer Normalization", arXiv:1607.06450; the form of
// torch.nn.functional.layer_norm with weight and bias over the last dimension: biased
// variance, eps inside the square root), per row r of x [rows, hidden] (leading
// dimensions flattened), w, b [hidden]:
//
//   mean_r = (1/H) sum_i x[r,i]
//   var_r  = (1/H) sum_i (x[r,i] - mean_r)^2          (two-pass: never E[x^2] - E[x]^2)
//   rstd_r = 1 / sqrt(var_r + eps)
//   xhat   = (x[r,i] - mean_r) * rstd_r
//   y[r,i] = xhat * w[i] + b[i]
//
// Backward, given the upstream gradient dy [rows, hidden], with g = dy * w:
//
//   dx[r,i] = rstd_r * ( g[r,i] - mean_j g[r,j] - xhat[r,i] * mean_j(g[r,j] * xhat[r,j]) )
//   dw[i]   = sum_r dy[r,i] * xhat[r,i]
//   db[i]   = sum_r dy[r,i]
//
// Reference dtype policy (formula_version 1): inputs and outputs in the case dtype, every
// intermediate in FP32, one rounding per output at the very end. This is the contract of
// torch.nn.functional.layer_norm's CUDA kernels for fp32/bf16/fp16 inputs (FP32 "opmath"
// statistics and normalization, the output cast once) and of the numgate kernel
// (layernorm_kernels.cu), which it mirrors operation for operation (sums sequential here,
// a fixed tree there; the kernel may fuse a*b+c):
//
//   forward:  s = sum x ; mean = s / H ; d = x - mean ; q = sum d*d
//             r = 1 / sqrtf(q / H + eps) ; y = dtype((d * r) * w + b)
//   backward: mean, d, q, r as above ; g = dy * w ; sg = sum g ; sgd = sum g * d
//             a = sg / H ; c = r * (sgd / H) ; xhat = d * r
//             dx = dtype(r * ((g - a) - xhat * c))
//             dw = dtype(sum over rows of dy * xhat) ; db = dtype(sum over rows of dy)   (FP32)
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::layernorm {

/// Deliberately broken reference variants (SPEC §6: sources of discrepancy).
enum class Mutant {
  none,              ///< the correct reference
  padded_lanes,      ///< (a) each row zero-padded to a multiple of 8 elements (one 16-byte bf16
                     ///<     vector) and the padding counted in the mean and the variance
  naive_variance,    ///< (b) var = E[x^2] - E[x]^2 in FP32 (one pass, catastrophic cancellation)
  eps_outside_sqrt,  ///< (c) rstd = 1 / (sqrt(var) + eps)       (epsilon placement)
  mean_in_bf16,      ///< (d) the row mean rounded to bf16 before centering (low-precision intermediate)
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference), under
/// the summation policy `p` (numgate/summation.h; default: serial, no FMA): the row sums of
/// x, (x - mean)^2, g and g (x - mean), the multiply-adds of y and dx, and dw's and db's
/// sums over rows (the naive_variance and padded_lanes mutants keep their serial sums).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// The LayerNorm op: inputs x, w, b, dy; gated tensors y, dx, dw, db.
class LayerNormOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // layernorm_oracle.cpp: tensors, passes, formula_version
  std::vector<CaseSpec> cases() const override;  // layernorm_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // layernorm_cases.cpp: the checklist
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

}  // namespace numgate::layernorm
