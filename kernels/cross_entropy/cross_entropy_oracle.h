// numgate — cross-entropy oracles: golden (FP64), reference (the declared dtype policy),
// input drawing, target validation, and deliberately broken reference variants (CPU
// mutants) that the CPU tests feed to the gate as if they were the target.
//
// Op (issue 4, item 3): token-level cross-entropy of a language-model head, as in
// torch.nn.functional.cross_entropy(logits, targets, ignore_index, reduction,
// label_smoothing) plus the z-loss of PaLM / Liger's fused CE (z_loss * lse^2) and the
// optional final-logit soft-capping of Gemma 2 (s = c * tanh(x / c)).
//
// Layout. logits [tokens, vocab] (the case shape, case dtype), row-major. Inputs (fixed
// per op; every float input in the case dtype):
//   logits  [tokens, vocab]
//   targets [tokens]            i64 class indices; a token whose target == ignore_index is
//                               IGNORED; any other target must lie in [0, vocab) (see
//                               check_targets: the target launcher refuses the case
//                               before any launch otherwise)
//   dloss   [1] (mean, sum) or [tokens] (none): the upstream gradient of "loss"
// Params: ignore_index (default -100), label_smoothing eps in [0, 1], z_loss (coefficient,
// 0 = off), softcap c (0 = off, else c > 0), reduction (0 none, 1 mean, 2 sum).
//
// Gated tensors: loss ([1] for mean/sum, [tokens] for none; the z-loss is FOLDED INTO the
// loss, as Liger's fused CE does; its value z_loss * lse^2 is recoverable from "lse"),
// lse [tokens] (log-sum-exp of the soft-capped logits of EVERY token, ignored ones
// included: it does not depend on the target), and dlogits [tokens, vocab] (backward).
//
// Forward, per token t (s = soft-capped logits, V = vocab, y = targets[t]):
//   s_j  = c > 0 ? c * tanh(x_j / c) : x_j
//   m    = max_j s_j (NaN-propagating) ;  S = sum_j exp(s_j - m) ;  lse = m + log S
//   ignored token: ce_t = 0 and it is not counted, in the main term, the smoothing term
//                  (PyTorch masks the smoothing term of ignored tokens too) and the z-loss
//   else: ce_t = log S + (1 - eps)(m - s_y) + [eps > 0] eps (m - (1/V) sum_j s_j)
//                + [z_loss > 0] z_loss * lse^2
//         (= (1 - eps)(lse - s_y) + eps (lse - mean_j s_j) + z_loss lse^2, PyTorch's
//         label-smoothing formula; written with m - s_y and log S apart so that two equal
//         logits of 1e8 give exactly log 2 in FP32, where lse - s_y would give 0)
//   none: loss_t = ce_t ;  sum: loss = sum_t ce_t ;  mean: loss = sum_t ce_t / n, n =
//   the number of non-ignored tokens.
//   ALL TOKENS IGNORED with mean (PyTorch gives 0/0 = NaN): loss = 0 and dlogits = 0, the
//   documented choice (a batch without a labelled token contributes nothing, as Megatron's
//   and Hugging Face's num-items-normalized losses do; a NaN would poison the step).
//   The smoothing and z-loss terms are skipped (not multiplied by 0) when their coefficient
//   is 0, so a -inf logit does not turn 0 * inf into NaN.
//
// Backward, given g_t = dloss[t] (none), dloss[0] (sum), dloss[0] / n (mean; n as above,
// n = 0: dlogits = 0), per non-ignored token (ignored tokens: dlogits = 0 exactly):
//   p_j       = exp(s_j - m) / S          (not exp(s_j - lse): lse rounds away log 2 at 1e8)
//   dlogits_j = g_t * (p_j (1 + 2 z_loss lse) - (1 - eps) [j == y] - eps / V)
//                   * (c > 0 ? 1 - tanh(x_j / c)^2 : 1)
// The backward recomputes m, S and lse from the logits (the fixture format allows only
// case-dtype and i64 inputs: a saved lse rounded to bf16 would perturb p by up to
// 2^-9 |lse| relative, so no saved "lse_fwd" is passed).
//
// Non-finite inputs (PyTorch's behaviour): a NaN or +Inf logit makes its token's lse, loss
// and dlogits row NaN; a -Inf logit contributes exp(-inf) = 0 (with eps > 0 the smoothing
// term is then +Inf); an ignored token's logits are never read into loss or dlogits (its
// lse still is). A row of -Inf but one finite logit, targeted, gives loss 0 and dlogits 0.
// NaN/Inf reach mean/sum like any sum.
//
// Reference policy (formula_version 1): case-dtype inputs and outputs, FP32 math, one
// rounding per output (a fused CE kernel such as Liger's or Unsloth's: FP32 online
// logsumexp on bf16 logits). Operation for operation (sums sequential here; the kernel
// sums per thread online, then in a fixed tree):
//   cf = float(c) ; ef = float(eps) ; zf = float(z_loss) ; Vf = float(V)
//   s = cf > 0 ? cf * tanhf(float(x) / cf) : float(x) ; m = max s ; S = sum expf(s - m)
//   lS = logf(S) ; lse = m + lS ; ce = lS + (m - s_y) (eps > 0: lS + (1 - ef)(m - s_y)
//   + ef (m - sum_s / Vf)) ; z > 0: ce = ce + zf (lse lse)
//   loss: none dtype(ce) ; sum dtype(sum ce) ; mean dtype(sum ce / float(n))
//   backward: g = float(dloss) (mean: / float(n)) ; p = expf(s - m) / S ;
//   d = p (z > 0: * (1 + (2 zf) lse)) ; j == y: d = d - (1 - ef) ; eps > 0: d = d - ef / Vf ;
//   c > 0: th = tanhf(float(x) / cf), d = d * (1 - th th) ; dlogits = dtype(g d)
// Parameters used here are exact in FP32 (eps 0.0625/0.125, z_loss 2^-13, softcap 30), so
// golden and reference see the same coefficients.
//
// Conditioning (GoldenTensor::abs_terms; condition = abs_terms / |golden|):
//   lse:     |m| + |log S| + sum_j p_j (|s_j| + |m|)                     (envelope V + 4)
//   loss_t:  |log S| + sum_j p_j (|s_j| + |m|) + (1 - eps)(|m| + |s_y|)
//            + eps (|m| + sum_j |s_j| / V) + z_loss (lse^2 + 2 |lse| A_lse)  (none: V + 8;
//            mean/sum: the sum over tokens (/ n), envelope V + tokens + 8); 0 for ignored
//            tokens and all-ignored means (exact zeros)
//   dlogits: |g| dcap_j (1 + |x_j / c|) (p_j (1 + |s_j| + |m|)(1 + 2 z_loss (|lse| +
//            A_lse)) + (1 - eps) [j == y] + eps / V)  (envelope V + 8); 0 exactly for
//            ignored tokens, -Inf logits (eps = 0, j != y) and, under a soft cap, infinite
//            logits (tanh = +-1); an element that merely underflows gets the smallest
//            double, so an underflow is never declared an exact zero.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "numgate/op.h"

namespace numgate::cross_entropy {

/// Deliberately broken reference variants (SPEC §6: sources of discrepancy).
enum class Mutant {
  none,                       ///< the correct reference
  smoothing_counts_ignored,   ///< (a) ignored tokens keep the smoothing term eps (lse - mean s) (loss and grad)
  mean_over_all_tokens,       ///< (b) mean divides by tokens instead of the non-ignored count
  no_max_shift,               ///< (c) S = sum exp(s_j), lse = log S: no max subtracted (overflow)
  softcap_no_derivative,      ///< (d) backward forgets the soft-cap derivative 1 - tanh^2
  probs_in_logits_dtype,      ///< (e) backward: the softmax p rounded to the logits dtype before p - onehot
};
const char* mutant_name(Mutant m);

/// The reference oracle with a mutation applied (Mutant::none = the real reference).
/// Under the summation policy `p` (numgate/summation.h; default: serial, no FMA): the sums
/// over the vocabulary (of exp(s - m) and of s), the sum of the tokens' losses, and the
/// multiply-adds of the smoothing, z-loss and dlogits terms.
std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m,
                                                const SumPolicy& p = {});

/// Shape and parameters of a case (validated; throws std::invalid_argument naming the case).
struct Config {
  std::int64_t tokens, vocab;
  std::int64_t ignore_index;
  double eps, z_loss, softcap;
  int reduction;  ///< 0 none, 1 mean, 2 sum
};
Config config_of(const CaseSpec& c);

/// Target validation, shared by the oracles and the target launcher: empty when every
/// target is ignore_index or in [0, vocab); else a message naming the first bad token.
std::string check_targets(const std::int64_t* targets, std::int64_t tokens, std::int64_t vocab,
                          std::int64_t ignore_index);

class CrossEntropyOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override;  // cross_entropy_oracle.cpp: tensors, passes, formula_version
  std::vector<CaseSpec> cases() const override;  // cross_entropy_cases.cpp
  std::vector<CoverageItem> value_coverage() const override;  // cross_entropy_cases.cpp: the checklist
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override;
  std::map<std::string, GoldenTensor> golden(const CaseSpec& c, const std::map<std::string, Tensor>& in64) const override;
  /// Gate 1: the default rule (a token with a NaN/Inf logit is excluded) and, for the mean
  /// and sum reductions, every token as soon as one is (the scalar loss is then not finite).
  std::map<std::string, std::vector<bool>> nondifferentiable(const CaseSpec& c,
                                                             const std::map<std::string, Tensor>& in64) const override;
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    return reference_variant(c, in, Mutant::none);
  }
  std::map<std::string, Tensor> reference_under(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                const SumPolicy& p) const override {
    return reference_variant(c, in, Mutant::none, p);
  }
  /// Every gated tensor (loss, lse, dlogits) reduces over a token's vocab (the last axis of
  /// the logits); a mean or sum loss also over the tokens, whose count the sweep keeps.
  int reduction_axis(const CaseSpec& c, const std::string&) const override {
    return c.shape.empty() ? -1 : static_cast<int>(c.shape.size()) - 1;
  }
};

}  // namespace numgate::cross_entropy
