// numgate — dropout_add oracles: golden (FP64), reference (the kernels' dtype policy), input
// patterns, parameter validation, and deliberately broken reference variants (CPU mutants).
//
// Op (fused dropout + residual add, as a transformer block's `residual + dropout(x)`;
// torch.nn.functional.dropout / native_dropout, then the residual add), elementwise over
// x, residual [..., hidden] (leading dimensions flattened into rows; the stream index of an
// element is its flat row-major index over the whole tensor):
//
//   forward:   y    = residual + dropout(x),  dropout(x)_i = m_i ? x_i * s : 0   (a select:
//                     a dropped element contributes exactly 0, NaN / Inf x included)
//              mask = m (0 or 1 in the case dtype: native_dropout's second output)
//   backward:  dx = m ? dy * s : 0,  dresidual = dy (exactly); m regenerated from the stream
//
// Case parameters (CaseSpec::params): p in [0, 1), philox_seed and philox_offset (integers
// in [0, 2^53] stored as doubles). The stream m, the threshold and the scale s are declared
// in dropout_stream.h: m_i = [Philox4x32_10(ctr_i, key)[i & 3] >= floor(p 2^32)],
// s = RN_fp32(1 / (1 - p)) for fp32 / bf16 / fp16 cases, 1 / (1 - p) in FP64 for fp64 cases.
//
// Golden (FP64, on the promoted inputs; s as above for the case dtype, so x * s is exact in
// FP64 for every low-precision case): y = m ? residual + x s : residual, one FP64 rounding;
// abs_terms |residual| + |x s| (dropped: |residual|), envelope_length 2; mask = m (abs_terms
// m, envelope 1); dx = m ? dy s : 0 (abs_terms |dy s|, dropped 0); dresidual = dy (abs_terms
// |dy|). abs_terms 0 only where every term is exactly 0 (the gate then requires an exact 0).
//
// Reference dtype policy (formula_version 1), the kernels' (dropout_add.cuh), on the CPU
// with -ffp-contract=off:
//   fp32 / bf16 / fp16: float xf = x, rf = residual, gf = dy, s = dropout_scale_fp32(p)
//     kept:    y = T(float(xf * s) + rf)        dropped: y = T(rf) (= residual)
//     kept:    dx = T(gf * s)                   dropped: dx = 0
//     mask = T(m), dresidual = dy's bits
//   fp64: the same in double with s = dropout_scale_fp64(p).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "numgate/op.h"

namespace numgate::dropout_add {

/// A case's validated dropout parameters.
struct Params {
  double p = 0;
  std::uint64_t seed = 0, offset = 0;
  std::uint32_t threshold = 0;  ///< dropout_threshold(p)
};
/// Reads and checks p, philox_seed, philox_offset of the case: throws std::invalid_argument
/// "dropout_add case '<name>': <field> = <value> ..." for p outside [0, 1) (or NaN) and for
/// a seed or offset that is not an integer in [0, 2^53]; std::out_of_range (naming the case
/// and parameter) when one is not declared.
Params params_of(const CaseSpec& c);
/// The same without throwing: false, and the message in *why (when given), for a case
/// params_of refuses.
bool read_params(const CaseSpec& c, Params& out, std::string* why = nullptr);

/// Deliberately broken reference variants (SPEC §6 sources of discrepancy).
enum class Mutant {
  none,                      ///< the correct reference
  stream_ignores_offset,     ///< RNG: ctr words 2, 3 = 0 (philox_offset dropped)
  counter_per_element,       ///< RNG: ctr = i instead of i >> 2 (lane still i & 3)
  lanes_permuted,            ///< RNG: lane 3 - (i & 3) of group i >> 2
  key_high_word_dropped,     ///< RNG: key = {lo32(seed), 0}
  threshold_strict,          ///< RNG: keep iff r > t instead of r >= t (differs only where r == t)
  stream_restarts_each_row,  ///< mask/boundary: i = the index within the row (a kernel ignoring
                             ///< element_offset, launched row by row)
  mask_by_multiplication,    ///< mask/boundary: x * m * s, not a select (dropped NaN / Inf leak)
  scale_in_bf16,             ///< low-precision intermediate: s rounded to bf16
  product_in_dtype,          ///< cast timing: x * s rounded to the case dtype before the add
};
const char* mutant_name(Mutant m);

/// The keep mask (1 = kept) of the n elements of a case under the (mutated) stream; hidden is
/// the row length (for stream_restarts_each_row).
std::vector<unsigned char> keep_mask(const CaseSpec& c, std::size_t n, std::int64_t hidden, Mutant m = Mutant::none);

/// The reference with a mutation applied (Mutant::none: the reference).
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m);

/// The op: inputs x, residual, dy; gated tensors y, mask, dx, dresidual.
class DropoutAddOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;            // dropout_add_oracle.cpp
  std::vector<CaseSpec> cases() const override;               // dropout_add_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // dropout_add_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(c, in, Mutant::none);
  }
  /// Elementwise: no output is a reduction (no length sweep).
  int reduction_axis(const CaseSpec&, const std::string&) const override { return -1; }
  /// Gate 1: element i of x and residual is excluded where x_i, residual_i or dy_i is NaN / Inf.
  std::map<std::string, std::vector<bool>> nondifferentiable(const CaseSpec& c,
                                                             const std::map<std::string, Tensor>& in64) const override;
};

}  // namespace numgate::dropout_add
