// numgate — softmax oracles: golden (FP64), reference (target dtype policy), input
// drawing, and deliberately broken reference variants (mutants) that the CPU tests feed
// to the gate as if they were the target.
//
// Op (issue 4, item 2): scaled, optionally masked softmax over the last dimension, as in
// attention (torch.softmax(scale * scores + mask, dim=-1), FlashAttention's softmax, or
// Megatron's scaled_masked_softmax / scaled_upper_triang_masked_softmax), and its
// backward from the saved output.
//
// Layout. x [..., q_len, k_len] (any leading dims, e.g. [batch, heads, q_len, k_len];
// rank 1 means q_len = 1), row-major; softmax over the last dimension. rows = product of
// all dims but the last; row r is query i = r mod q_len, with q_len = shape[-2] (1 for
// rank 1). Inputs (every input is in the case dtype):
//   x     [..., q_len, k_len]  scores
//   mask  [q_len, k_len]       additive mask, broadcast over the leading dims; read only
//                              when mask_mode = 2 (zeros otherwise)
//   dy    [..., q_len, k_len]  upstream gradient of y
//   y_fwd [..., q_len, k_len]  the saved forward output the backward uses, as a framework
//                              saves it: the REFERENCE forward y in the case dtype (golden
//                              dx uses its lossless FP64 promotion, so dx measures the
//                              backward kernel alone)
// Params: scale (applied to x before the mask), mask_mode (0 none, 1 causal, 2 additive).
//
// Masking. Element j of row r (query i) is MASKED OUT when
//   mask_mode 1 (causal, bottom-right aligned): j > i + k_len - q_len, i.e. the last query
//     sees every key; this is FlashAttention >= 2.1's and PyTorch's lower-right causal
//     alignment (CausalVariant.LOWER_RIGHT). q_len < k_len: every query sees at least
//     k_len - q_len + 1 keys; q_len > k_len: the first q_len - k_len queries see no key
//     (fully masked rows);
//   mask_mode 2 (additive): mask[i, j] <= the dtype's lowest finite value (i.e. mask[i,j]
//     is -inf or -max_finite, the two conventional "masked" markers); any other mask
//     value b (0 or a finite bias, e.g. ALiBi-like) is ADDED to the scaled score.
// A masked element is never read into the arithmetic: it contributes nothing (a NaN in x
// at a masked position stays invisible) and its output is exactly 0.
//
// Forward, per row, over the unmasked set U (golden in FP64 on the promoted inputs):
//   z_j = scale * x_j (+ b_j in mode 2)
//   m   = max_{j in U} z_j, NaN-propagating (a NaN z gives m = NaN); -inf when U is empty
//         or every z_j is -inf
//   m == -inf: y = 0 for the whole row (exactly: a fully masked row gives 0, never NaN;
//         FlashAttention's convention; plain torch.softmax would give NaN)
//   else: e_j = exp(z_j - m), s = sum_{j in U} e_j, y_j = e_j / s (j in U), y_j = 0 (masked)
// so +Inf in an unmasked score makes its row NaN (inf - inf), a NaN makes its row NaN, and a
// row with a single unmasked element gives exactly 1 there (e = exp(0) = 1, s = 1).
//
// Backward (softmax's Jacobian-vector product from the saved output, times the scale):
//   dot  = sum_j dy_j * y_j ;  dx_j = scale * y_j * (dy_j - dot)
// Masked elements have y_fwd = 0, so dx = 0 there; a fully masked row gives dx = 0.
// (The target's causal backward takes y_fwd as +0 in the 16-byte units wholly past each
// row's causal limit without reading it, softmax.cuh; y_fwd here, the reference forward's output, is +0 there in every
// row, so the formula above is the same function on every fixture.)
//
// Reference dtype policy (formula_version 1): case-dtype inputs and outputs, FP32 math,
// one rounding per output (torch.softmax on bf16/fp16 computes in FP32 "opmath" and casts
// once; Megatron's fused kernels likewise). Operation for operation (sums sequential here;
// the kernel sums in a fixed tree, and combines per-thread maxima/sums online):
//   forward:  sf = float(scale) ; z = float(x) * sf ; (mode 2: z = z + float(mask))
//             m = max z (NaN-propagating) ; m == -inf: y = 0
//             e = expf(z - m) ; s = sum e ; y = dtype(e / s)
//   backward: dot = sum float(dy) * float(y_fwd) ; dx = dtype(sf * (float(y_fwd) * (float(dy) - dot)))
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::softmax {

/// Deliberately broken reference variants (SPEC §6: sources of discrepancy).
enum class Mutant {
  none,                 ///< the correct reference
  nan_fully_masked,     ///< (a) masked scores set to -inf and no empty-row rule: a fully masked
                        ///<     row computes exp(-inf - (-inf)) / 0 = NaN
  no_max_subtraction,   ///< (b) e = exp(z) without subtracting the row max (overflow -> inf/inf)
  scale_after_softmax,  ///< (c) y = scale * softmax(x + mask): the scale applied after the softmax
  causal_top_left,      ///< (d) causal alignment top-left (j <= i) instead of bottom-right
  dx_missing_scale,     ///< (e) backward forgets the scale: dx = y * (dy - dot)
  exp_in_output_dtype,  ///< (f) exp(z - max) stored in the output dtype before the sum and the division
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference), under
/// the summation policy `p` (numgate/summation.h; default: serial, no FMA): the sum of the
/// exponentials, the scale-and-bias multiply-add of mask mode 2, and the backward's
/// <dy, y_fwd> (the max is exact in any order).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// The softmax op: inputs x, mask, dy, y_fwd; gated tensors y (forward) and dx (backward).
class SoftmaxOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // softmax_oracle.cpp: tensors, passes, formula_version
  std::vector<CaseSpec> cases() const override;  // softmax_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // softmax_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  /// Gate 1: the default NaN/Inf rule, and every row holding a score |scale * x| > 2^40:
  /// there one FP64 ulp of x moves the score by more than 2^-12, so no step resolves the
  /// derivative (the very_negative pattern, x ~ -5e29).
  std::map<std::string, std::vector<bool>> nondifferentiable(const CaseSpec& c,
                                                             const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(c, in, Mutant::none);
  }
  std::map<std::string, Tensor> reference_under(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                const SumPolicy& p) const override {
    return reference_variant(c, in, Mutant::none, p);
  }
};

}  // namespace numgate::softmax
