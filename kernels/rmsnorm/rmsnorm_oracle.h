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
#include <vector>

#include "numgate/op.h"
#include "numgate/random.h"

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

/// The norm family's "value_coverage" input pattern (issue 10, item 4; RMSNorm, OffsetRMSNorm,
/// fused add + RMSNorm and LayerNorm call it on their drawn inputs): fp16 only, rows >= 8,
/// hidden >= 8 (else std::invalid_argument naming the case). With M = 65504 (fp16 max) and
/// tiny = 2^-17 (below fp16's smallest normal 2^-14):
///   row 0: x = 0 (y row exactly 0; its dy scaled by sqrt(eps), as the zero_row pattern)
///   row 1: dy = 0 (dx row exactly 0)
///   row 2: dy = tiny * N(0,1) (subnormal dx)
///   row 3: x = 1, except x[3][5] = 3 (y[3][5] = 3 rstd w5, near overflow); dy[3][6] = 0.2 M
///   row 4: x = 0.5 N(0,1), x[4][6] = 0.75 (xhat ~ 1.5); dy[4][6] = 0.4 M (dx, dw, db near overflow)
///   row 5: x = 2^-20 N(0,1), x[5][0] = 1, x[5][2] = -1 (xhat and y subnormal)
///   column 1: x = dy = 0 in every row (y, dw, db and, for RMSNorm, dx exactly 0 there)
///   column 4: dy = tiny * N(0,1) but in row 1 (dw subnormal)
///   column 5: dy = 0; w[5] = w_big (the scale of column 5 large: y near overflow)
///   column 2: w[2] = w_zero (a zero scale); column 6: w[6] = w_one (scale 1)
/// The ops pass the w values giving their scale 0, big and 1 (OffsetRMSNorm: w = -1, ..., 0).
void apply_value_coverage_pattern(const CaseSpec& c, const std::string& op, Tensor& x, Tensor& w, Tensor& dy,
                                  double w_zero, double w_big, double w_one);

/// The upstream gradient of pattern ill_conditioned (a genuinely ill-conditioned backward of
/// a row-wise norm, for SPEC §4's fallback): per row r, with h the row's normalized input
/// (x; fused add + RMSNorm: x + residual) as the FP64 oracle sees it, centred (LayerNorm:
/// minus its mean) or not (RMSNorm), hhat = h rstd, rstd = 1 / sqrt(mean(h^2) + eps) (after
/// centring), and `scale` the element's gain (w; OffsetRMSNorm: 1 + w):
///   dy = (a_r + b_r hhat) / scale,   a_r = centred ? N(0,1) : 0,   b_r = 1 + 0.25 N(0,1).
/// Then scale dy lies in the null space of the norm's backward projection (RMSNorm:
/// rstd (g - hhat mean(g hhat)) with g = scale dy; LayerNorm also minus mean(g)) up to dy's
/// rounding and 1 - mean(hhat^2) = eps / (mean(h^2) + eps): with |h| ~ 100 (mean square 1e4
/// >> eps) dx cancels to the rounding of dy, condition ~ 1 / u of the dtype, and an FP32
/// reference cannot resolve it (the gate of dx is not valid). Needs fp32 or fp64 (a bf16 or
/// fp16 dy's rounding would leave a residue an FP32 reference resolves); throws
/// std::invalid_argument naming the case otherwise. h and scale: row-major [rows, hidden]
/// and [hidden].
void apply_ill_conditioned_dy(const CaseSpec& c, const std::string& op, const std::vector<double>& h,
                              const std::vector<double>& scale, bool centred, Tensor& dy);
/// Pattern ill_conditioned of RMSNorm, OffsetRMSNorm and LayerNorm: x = 100 N(0,1) (from
/// rx), w = 0.75 + 0.5 U(0,1) - w_offset (from rw: the gain w_offset + w in [0.75, 1.25]),
/// then dy by apply_ill_conditioned_dy on h = x.
void apply_ill_conditioned_pattern(const CaseSpec& c, const std::string& op, const RandomStream& rx,
                                   const RandomStream& rw, double w_offset, bool centred, Tensor& x, Tensor& w,
                                   Tensor& dy);

/// The RMSNorm op: inputs x, w, dy; gated tensors y, dx, dw.
class RMSNormOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // rmsnorm_oracle.cpp: tensors, passes, formula_version
  /// OffsetRMSNorm's oracles call these: a formula change here bumps offset_rmsnorm's
  /// formula_version as well.
  std::vector<CaseSpec> cases() const override;  // rmsnorm_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // rmsnorm_cases.cpp: the checklist
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
