// numgate — RoPE oracles: golden (FP64), reference (the declared dtype policy), input
// drawing, and deliberately broken reference variants (CPU mutants).
//
// Rotary position embedding (Su et al. 2021, "RoFormer", arXiv:2104.09864) applied to
// the queries and keys of grouped-query attention:
//
//   q [batch, seq, q_heads, head_dim], k [batch, seq, kv_heads, head_dim] (kv_heads
//   divides q_heads), positions [batch, seq] (int64, any integers: left-padded batches,
//   continuation offsets, ...), parameters theta (base: 1e4 Llama, 1e6 Qwen), interleaved
//   (0 or 1) and kv_heads. The case shape is q's shape.
//
//   For token t at position p and frequency f in [0, d/2):  angle = p * theta^(-2f/d)
//   each pair (x1, x2) of a head is rotated by that angle:
//       y1 = x1 cos - x2 sin,   y2 = x2 cos + x1 sin
//   pairing, declared per case:
//       interleaved = 0  rotate-half (Llama / Qwen / GPT-NeoX): (x[f], x[f + d/2])
//       interleaved = 1  interleaved (GPT-J):                    (x[2f], x[2f + 1])
//
//   Outputs: q_rot, k_rot (forward). Backward, given the upstream gradients dq_rot,
//   dk_rot (case dtype): dq, dk = rotation of the gradient pairs by -angle (the
//   transpose of the rotation; RoPE is linear, so q and k are not needed):
//       dx1 = g1 cos + g2 sin,  dx2 = g2 cos - g1 sin
//
// Inputs stored in every case (Op::input_names is fixed per op): q, k, positions (i64),
// dq_rot, dk_rot. Gated tensors: q_rot, k_rot, dq, dk.
//
// Golden: everything in FP64 on the FP64 promotion of the inputs: angle = p *
// pow(theta, -2f/d) in FP64, std::cos / std::sin, the rotation in FP64.
//
// Reference (formula_version 1): the declared policy of rope_math.h, which the kernels
// follow operation for operation: FP32 inv_freq table (correctly rounded), FP32 angle
// float(p) * inv_freq (the documented choice: HF computes the angle in FP32 from the
// integer position), FP32 cos/sin of that angle, the rotation in FP32 without FMA, one
// rounding to the case dtype per output. The FP32 angle's rounding (~2e-3 rad at
// p = 32,767) dominates the reference's error at long positions; the gate then accepts a
// kernel within 2x of it. The reference/golden relative error stays below ~3e-3 on every
// declared case (gate valid; checked by the CPU tests), so no ULP rule is declared (the
// golden uses the exact angle: an elementwise ULP bound does not apply).
//
// Conditioning (GoldenTensor::abs_terms, envelope_length 2): for y1 = x1 cos - x2 sin,
//   abs_terms = |x1 cos| + |x2 sin| + |angle| (|x1| + |x2|)
// (y2 likewise): the two product terms plus the sensitivity of the output to a relative
// perturbation of the angle (the FP32 angle is a rounded term of the evaluation: a
// relative error delta of the angle moves y1 by at most |angle| |delta| (|x1| + |x2|),
// second order included while |angle| < 2^23). Without the angle term the conditioning
// envelope could not contain the declared FP32-angle policy at long positions. The term
// is 0 at position 0, so abs_terms is 0 exactly when every term is 0 (x1 = x2 = 0, or
// x1 = 0 at angle 0): the output must then be exactly 0.
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::rope {

/// Deliberately broken reference variants (SPEC §6: sources of discrepancy).
enum class Mutant {
  none,                      ///< the correct reference
  angle_in_bf16,             ///< the FP32 angle rounded to bf16 (a low-precision angle / position table)
  angle_in_fp16,             ///< the FP32 angle rounded to fp16
  wrong_pairing,             ///< the other layout than the declared one (rotate-half under interleaved ...)
  inv_freq_wrong_head_dim,   ///< inv_freq = theta^(-2f / (2d)): the exponent from the wrong head_dim
  backward_not_inverted,     ///< backward rotates the gradients by +angle (the forward rotation)
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference). RoPE
/// sums nothing: of a summation policy (numgate/summation.h) only `fma` applies, each
/// rotation x1 c - x2 s, x2 c + x1 s then taken as fmaf(x1, c, -(x2 s)), fmaf(x2, c, x1 s).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// Shape of a RoPE case: q [batch, seq, q_heads, head_dim] (the case shape), kv_heads
/// from the parameter. Throws std::invalid_argument naming the case when illegal.
struct Dims {
  std::int64_t batch, seq, q_heads, kv_heads, head_dim;
  std::int64_t tokens() const { return batch * seq; }
};
Dims dims_of(const CaseSpec& c);

class RopeOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // rope_oracle.cpp: tensors, passes, formula_version
  std::vector<CaseSpec> cases() const override;  // rope_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // rope_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  /// Gate 1: every q and k element of a token (batch, seq) in which q, k, dq_rot or dk_rot
  /// holds a NaN/Inf is excluded (a rotation mixes the elements of a pair).
  std::map<std::string, std::vector<bool>> nondifferentiable(const CaseSpec& c,
                                                             const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(c, in, Mutant::none);
  }
  std::map<std::string, Tensor> reference_under(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                const SumPolicy& p) const override {
    return reference_variant(c, in, Mutant::none, p);
  }
  /// No reduction: every output element is a two-term rotation (x cos -+ partner sin),
  /// whatever the head dimension; the length sweep has no T to vary.
  int reduction_axis(const CaseSpec&, const std::string&) const override { return -1; }
};

}  // namespace numgate::rope
