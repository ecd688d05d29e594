// numgate — SwiGLU and GeGLU oracles: golden (FP64), reference (the kernels' dtype policy),
// input patterns, and deliberately broken reference variants (CPU mutants).
//
// Ops (Shazeer 2020, "GLU Variants Improve Transformer", arXiv:2002.05202), elementwise
// over inputs a, b [tokens, intermediate] (any shape: all dimensions are flattened) with
// the upstream gradient dy of y:
//
//   SwiGLU ("swiglu"): y = silu(a) * b,  silu(a) = a * sigmoid(a) = a / (1 + exp(-a))
//                      da = dy * b * s * (1 + a (1 - s)),  s = sigmoid(a);  db = dy * silu(a)
//   GeGLU  ("geglu"):  y = gelu(a) * b;  da = dy * b * gelu'(a);  db = dy * gelu(a), with op
//                      parameter approximate_tanh (0 or 1) selecting the declared variant:
//                      0: gelu(a) = 0.5 a (1 + erf(a / sqrt 2))          (exact)
//                         gelu'(a) = Phi(a) + a phi(a)
//                      1: gelu(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//                      (torch.nn.functional.gelu with approximate='none' / 'tanh').
//
// Golden: FP64 evaluation of these formulas with std::exp/expm1/erfc on the FP64 promotion
// of the inputs, written in cancellation-free but mathematically identical forms (see
// glu_math.h: 1 + erf(x) = erfc(-x), 0.5 (1 + tanh u) = sigmoid(2u), sigmoid via
// exp(-|x|), silu' through 1 + a + e^a = d + e0 expm1(d); within 1/8 of the roots of
// gelu' / gelu_t' a binary128-fitted polynomial (relative error < 1e-16)). The golden code
// is written separately from the kernels' shared math (glu_math.h); non-finite inputs
// take the mathematical limits (act(+inf) = +inf, act(-inf) = -0, act'(+inf) = 1,
// act'(-inf) = 0), explicitly.
//
// Reference dtype policy (formula_version 1): the kernels' policy, mirrored exactly by
// calling the same scalar functions (glu_math.h) on the host:
//   bf16 / fp16: inputs widened to FP32, all math in FP32 with accurate expf / expm1f /
//                erfcf (never __expf), each output rounded once to the dtype (RNE).
//                This is torch.nn.functional.silu / gelu on the FP32 upcast ("opmath"),
//                then the product with b in FP32 and one cast, as a fused GLU kernel does.
//   fp32:        math in FP64, each output rounded once to FP32. (FP32 math would need
//                ~4-8 ulp; the 1-ulp rule requires FP64 intermediates: documented policy.)
//   fp64:        math in FP64 (kernel instantiation for gradchecks; no fixtures).
// The order of operations is: y = act(a) * b; da = (dy * b) * act'(a); db = dy * act(a).
// Every output is also within 1 ULP of the correctly rounded golden (gate ulp_limit = 1).
#pragma once

#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::glu {

/// Deliberately broken reference variants (SPEC §6 sources of discrepancy).
enum class Mutant {
  none,                   ///< the correct reference
  sigmoid_in_bf16,        ///< SwiGLU: sigmoid (and 1 - sigmoid) rounded to bf16 (low-precision intermediate)
  dsilu_missing_factor,   ///< SwiGLU: da = dy * b * s, the (1 + a (1 - s)) factor dropped (wrong backward math)
  wrong_gelu_variant,     ///< GeGLU: the other GELU variant than the declared one (tanh for erf and vice versa)
  activation_in_bf16,     ///< act(a) held in bf16 before the products y = act * b, db = dy * act
};
const char* mutant_name(Mutant m);

/// The reference of `op` ("swiglu" or "geglu") with a mutation applied.
std::map<std::string, Tensor> reference_variant(const std::string& op, const CaseSpec& c,
                                                const std::map<std::string, Tensor>& in, Mutant m);

/// The reference's scalar code evaluated in `math` (DType::fp32: float math, expf/erfcf;
/// DType::fp64: double math) whatever the case dtype, each output rounded once to it. The
/// reference itself uses fp32 math for bf16/fp16 cases and fp64 math for fp32 cases; the
/// other choice is a legitimate variation a kernel may make (tests/cpu/
/// test_legitimate_variation.cpp). Throws std::invalid_argument for another `math`.
std::map<std::string, Tensor> reference_in_math(const std::string& op, const CaseSpec& c,
                                                const std::map<std::string, Tensor>& in, DType math);

class SwiGLUOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // glu_oracle.cpp
  std::vector<CaseSpec> cases() const override;  // glu_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // glu_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  /// Gate 1: elementwise, an element of a and b is excluded where a, b or dy is NaN/Inf.
  std::map<std::string, std::vector<bool>> nondifferentiable(const CaseSpec& c,
                                                             const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(name(), c, in, Mutant::none);
  }
};

class GeGLUOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // glu_oracle.cpp
  std::vector<CaseSpec> cases() const override;  // glu_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // glu_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  /// Gate 1: elementwise, an element of a and b is excluded where a, b or dy is NaN/Inf.
  std::map<std::string, std::vector<bool>> nondifferentiable(const CaseSpec& c,
                                                             const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(name(), c, in, Mutant::none);
  }
};

}  // namespace numgate::glu
