// CPU mutants of the cross-entropy reference, fed to the gate as if they were the target.
// Each deliberately reintroduces one source of discrepancy (SPEC §6); the gate must report
// FAIL on the committed cases built to expose it. Plus the adversarial facts the cases
// were added for (log 2 at 1e8, the -inf row, all tokens ignored, non-finite logits,
// confident predictions) and the target validation.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "cross_entropy/cross_entropy_oracle.h"
#include "mutant_testbed.h"
#include "numgate/gate.h"

namespace numgate {
namespace {

using cross_entropy::Mutant;

std::vector<CaseData> committed_ce_cases() { return testing::committed_cases_of("cross_entropy"); }

constexpr std::size_t kInMemoryLimit = 400000;  // elements of logits (151,936 x 2 included)
const std::vector<CaseData>& small_production_cases() {
  static const std::vector<CaseData> v = testing::small_generated_cases_of("cross_entropy", kInMemoryLimit);
  return v;
}

double eps_of(const CaseData& c) { return c.spec.param("label_smoothing"); }
int reduction(const CaseData& c) { return static_cast<int>(c.spec.param("reduction")); }
bool has_ignored(const CaseData& c) {
  const Tensor& t = c.inputs.at("targets");
  for (std::size_t i = 0; i < t.numel(); ++i)
    if (t.get(i) == c.spec.param("ignore_index")) return true;
  return false;
}
bool has_kept(const CaseData& c) {
  const Tensor& t = c.inputs.at("targets");
  for (std::size_t i = 0; i < t.numel(); ++i)
    if (t.get(i) != c.spec.param("ignore_index")) return true;
  return false;
}

void expect_caught(Mutant m, bool (*must_fail)(const CaseData&)) {
  testing::expect_caught({cross_entropy::mutant_name(m),
                          [m](const CaseData& c) { return cross_entropy::reference_variant(c.spec, c.inputs, m); },
                          must_fail},
                         committed_ce_cases(), small_production_cases());
}

TEST(CrossEntropyMutants, IgnoredTokensInTheSmoothingTermAreCaught) {
  // Any case with an ignored token and eps > 0: the ignored row's loss (none) or dlogits
  // must be exactly 0, the mutant's are not. Invisible by construction: vocab 1 (the
  // smoothing term lse - mean s is exactly 0) and a mean over no kept token (0 by rule).
  expect_caught(Mutant::smoothing_counts_ignored, [](const CaseData& c) {
    return eps_of(c) > 0 && has_ignored(c) && c.spec.shape[1] > 1 && (reduction(c) != 1 || has_kept(c));
  });
}

TEST(CrossEntropyMutants, MeanOverAllTokensIsCaught) {
  expect_caught(Mutant::mean_over_all_tokens,
                [](const CaseData& c) { return reduction(c) == 1 && has_ignored(c) && has_kept(c) && c.spec.shape[1] > 1; });
}

TEST(CrossEntropyMutants, LogSumExpWithoutTheMaxShiftIsCaught) {
  // Logits of 1e4 (1e3 in fp16) overflow expf without the shift.
  expect_caught(Mutant::no_max_shift, [](const CaseData& c) { return c.spec.pattern == "extreme"; });
}

TEST(CrossEntropyMutants, MissingSoftCapDerivativeIsCaught) {
  expect_caught(Mutant::softcap_no_derivative, [](const CaseData& c) {
    return c.spec.param("softcap") > 0 && c.spec.pattern == "softcap" && has_kept(c);
  });
}

// --- adversarial cases: the behaviour each was added for --------------------------------

CaseData find_case(const std::string& name) {
  const cross_entropy::CrossEntropyOp op;
  for (const CaseSpec& s : op.cases())
    if (s.name == name) return materialize(op, s);
  throw std::runtime_error("no cross_entropy case " + name);
}

TEST(CrossEntropyAdversarial, TwoEqualHugeLogitsGiveLog2AndTheInfRowGivesZero) {
  for (const std::string name : {"bf16_4x40_extreme_none_seed2", "fp32_4x64_extreme_none_seed50",
                                 "fp16_4x64_extreme_none_seed51"}) {
    const CaseData c = find_case(name);
    const std::int64_t V = c.spec.shape[1];
    // token 0: two equal maxima, target one of them -> log 2 (golden, and the FP32 reference
    // rounded to the dtype)
    EXPECT_NEAR(c.golden.at("loss").value.get(0), std::log(2.0), 1e-12) << name;
    EXPECT_EQ(c.reference.at("loss").get(0), round_to_dtype(std::log(2.0), c.spec.dtype)) << name;
    EXPECT_EQ(c.golden.at("dlogits").value.get(0), c.golden.at("dlogits").value.get(static_cast<std::size_t>(V / 2)) -
                                                        c.inputs.at("dloss").get(0))
        << name << ": p = 1/2 at both maxima";
    // token 1: -inf everywhere but the target: loss 0, dlogits 0, no NaN
    EXPECT_EQ(c.golden.at("loss").value.get(1), 0.0) << name;
    EXPECT_EQ(c.reference.at("loss").get(1), 0.0) << name;
    for (std::int64_t j = 0; j < V; ++j) {
      const auto k = static_cast<std::size_t>(V + j);
      EXPECT_EQ(c.golden.at("dlogits").value.get(k), 0.0) << name << " j " << j;
      EXPECT_EQ(c.reference.at("dlogits").get(k), 0.0) << name << " j " << j;
    }
    // every output finite
    for (const auto& t : c.output_names)
      for (std::size_t i = 0; i < c.reference.at(t).numel(); ++i) ASSERT_TRUE(std::isfinite(c.reference.at(t).get(i)));
  }
}

TEST(CrossEntropyAdversarial, AllTokensIgnoredGiveExactZeros) {
  for (const std::string name : {"fp32_3x50_all_ignored_mean_ls_z_seed60", "bf16_3x50_all_ignored_none_ls_seed61",
                                 "fp16_3x50_all_ignored_sum_cap_seed62"}) {
    const CaseData c = find_case(name);
    for (const std::string t : {"loss", "dlogits"})
      for (std::size_t i = 0; i < c.reference.at(t).numel(); ++i) {
        ASSERT_EQ(c.golden.at(t).value.get(i), 0.0) << name << " " << t;
        ASSERT_EQ(c.golden.at(t).abs_terms.get(i), 0.0) << name << " " << t << ": declared an exact zero";
        ASSERT_EQ(c.reference.at(t).get(i), 0.0) << name << " " << t;
      }
  }
}

TEST(CrossEntropyAdversarial, NonFiniteLogitsPoisonExactlyTheirTokens) {
  const CaseData c = find_case("fp32_4x33_nonfinite_none_seed63");
  const auto& loss = c.golden.at("loss").value;
  const auto& dx = c.golden.at("dlogits").value;
  EXPECT_TRUE(std::isnan(loss.get(0)));  // NaN logit
  EXPECT_TRUE(std::isnan(loss.get(1)));  // +Inf logit
  EXPECT_TRUE(std::isfinite(loss.get(2)));  // -Inf logit (eps = 0): just a zero probability
  EXPECT_EQ(loss.get(3), 0.0);  // ignored, its NaN never read
  EXPECT_TRUE(std::isnan(c.golden.at("lse").value.get(3)));  // lse is computed for every token
  for (std::size_t j = 0; j < 33; ++j) {
    EXPECT_TRUE(std::isnan(dx.get(j)));
    EXPECT_TRUE(std::isnan(dx.get(33 + j)));
    EXPECT_TRUE(std::isfinite(dx.get(66 + j)));
    EXPECT_EQ(dx.get(99 + j), 0.0);
  }
  EXPECT_EQ(dx.get(66 + 7), 0.0);  // the -Inf logit's gradient is exactly 0
  // With smoothing, a -Inf logit makes the smoothing term +Inf.
  const CaseData s = find_case("bf16_4x33_nonfinite_none_ls_seed64");
  EXPECT_EQ(s.golden.at("loss").value.get(2), INFINITY);
  EXPECT_EQ(s.reference.at("loss").get(2), INFINITY);
}

TEST(CrossEntropyAdversarial, ConfidentPredictionsHaveSmallLossAndAValidGate) {
  const CaseData c = find_case("bf16_4x32000_confident_mean_seed53");
  const double loss = c.golden.at("loss").value.get(0);
  EXPECT_GT(loss, 0.0);
  EXPECT_LT(loss, 0.1);  // exp(-10) * 32000 * E[exp(2 N)] ~ 0.02 relative mass
  for (const auto& t : c.output_names) {
    const GateResult r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &c.reference.at(t));
    EXPECT_TRUE(r.gate_valid) << describe(r, c.spec);
  }
}

// The underflow_tail cases (logits at s - m in [-92, -87]): the golden dlogits there are
// nonzero subnormals, and a kernel that flushes p below 2^-126 to 0 (ex2.approx.ftz in the
// gradient sweep: 2^x is 0 for x = RN(RN(s - m) log2 e) < -126) must fail the gate on bf16,
// where those elements are decidable and the flushed 0 misrounds them. On fp32 the same
// flush is NOT caught: an FP32 subnormal quantum (2^-149) is far below the element's
// envelope, so no such element is decidable, and 1e-38 is far below the max-abs threshold;
// the fp32 kernel takes the FP64 exp (no flush), so the case covers it without this check.
TEST(CrossEntropyAdversarial, UnderflowTailGradientsAreSubnormalAndAFlushIsCaughtOnBf16) {
  for (const std::string name : {"bf16_8x64_underflow_tail_none_seed67", "fp32_8x64_underflow_tail_none_seed68"}) {
    SCOPED_TRACE(name);
    const CaseData c = find_case(name);
    const std::int64_t T = c.spec.shape[0], V = c.spec.shape[1];
    const Tensor& x = c.inputs.at("logits");
    const GoldenTensor& g = c.golden.at("dlogits");
    Tensor flushed = c.reference.at("dlogits");
    std::int64_t in_window = 0, subnormal = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      double m = -INFINITY;
      for (std::int64_t j = 0; j < V; ++j) m = std::max(m, x.get(static_cast<std::size_t>(t * V + j)));
      for (std::int64_t j = 0; j < V; ++j) {
        const auto i = static_cast<std::size_t>(t * V + j);
        const float arg = static_cast<float>(static_cast<float>(x.get(i)) - static_cast<float>(m)) * 1.4426950408889634f;
        if (!(arg < -126.0f)) continue;  // ex2.approx.ftz keeps 2^arg
        ++in_window;
        const double r = round_to_dtype(g.value.get(i), c.spec.dtype);
        if (r != 0 && std::fabs(r) < 0x1p-126) ++subnormal;
        flushed.set(i, 0.0);
      }
    }
    std::cout << "[ underflow tail ] " << name << ": " << in_window << " elements with p flushed by .ftz, " << subnormal
              << " of them nonzero subnormal golden dlogits in " << dtype_name(c.spec.dtype) << "\n";
    EXPECT_EQ(in_window, T * 10) << "s - m from -87.5 to -92 (10 logits per token) flush, -87 does not";
    EXPECT_GE(subnormal, T * 5) << "most of the tail's golden dlogits must be nonzero subnormals";
    const CaseGate gate(find_op(c.op), c);
    const GateResult ref = gate("dlogits", &c.reference.at("dlogits"));
    EXPECT_EQ(ref.verdict, Verdict::pass) << describe(ref, c.spec);
    const GateResult r = gate("dlogits", &flushed);
    std::cout << "[ underflow tail ] flushed: " << verdict_name(r.verdict) << " (" << r.decided_by << "), "
              << r.target_misrounded << " of " << r.decidable << " decidable elements misrounded\n";
    if (c.spec.dtype == DType::bf16) {
      EXPECT_EQ(r.verdict, Verdict::fail) << describe(r, c.spec);
      EXPECT_EQ(r.decided_by, "decidable rounding");
      EXPECT_GT(r.target_misrounded, 0);
    } else {
      // The limitation stated above, kept honest: should the gate ever see it, this fails
      // and the comment (and the README) must say so.
      EXPECT_NE(r.verdict, Verdict::fail) << describe(r, c.spec);
      EXPECT_EQ(r.target_misrounded, 0);
    }
  }
}

TEST(CrossEntropyAdversarial, MeanIsOverTheKeptTokens) {
  // Case 1: tokens 1 and 4 ignored, so the mean divides by 4: recompute it from the none
  // reduction of the same inputs.
  for (const CaseData& c : committed_ce_cases()) {
    if (c.spec.name != "fp32_6x37_mixed_mean_ls_z_seed1") continue;
    CaseSpec none = c.spec;
    for (auto& [k, v] : none.params)
      if (k == "reduction") v = 0;
    std::map<std::string, Tensor> in = c.inputs;
    in["dloss"] = Tensor(c.spec.dtype, {6});
    const auto g = cross_entropy::CrossEntropyOp().golden(none, [&] {
      std::map<std::string, Tensor> in64;
      for (const auto& [k, t] : in) in64[k] = t.to(DType::fp64);
      return in64;
    }());
    double sum = 0;
    for (std::size_t t = 0; t < 6; ++t) sum += g.at("loss").value.get(t);
    EXPECT_EQ(g.at("loss").value.get(1), 0.0);
    EXPECT_EQ(g.at("loss").value.get(4), 0.0);
    EXPECT_NEAR(c.golden.at("loss").value.get(0), sum / 4, 1e-12);
    return;
  }
  FAIL() << "committed case fp32_6x37_mixed_mean_ls_z_seed1 not found";
}

TEST(CrossEntropyValidation, TargetsOutsideTheVocabularyAreRefused) {
  const std::int64_t ok[] = {0, 4, -100, 2};
  EXPECT_EQ(cross_entropy::check_targets(ok, 4, 5, -100), "");
  const std::int64_t high[] = {0, 5};
  EXPECT_NE(cross_entropy::check_targets(high, 2, 5, -100).find("target 5 of token 1"), std::string::npos);
  const std::int64_t neg[] = {-1};
  EXPECT_NE(cross_entropy::check_targets(neg, 1, 5, -100), "");
  const std::int64_t other_ignore[] = {-100};
  EXPECT_NE(cross_entropy::check_targets(other_ignore, 1, 5, -1), "") << "-100 is only ignored when it is ignore_index";
  // The oracles refuse such inputs too (make_inputs never produces them).
  const cross_entropy::CrossEntropyOp op;
  CaseSpec s = op.cases().front();
  auto in = op.make_inputs(s);
  in["targets"].set(0, 37.0);  // vocab is 37
  EXPECT_THROW(op.reference(s, in), std::invalid_argument);
  // Every declared case's drawn targets are valid.
  for (const CaseSpec& cs : op.cases()) {
    if (static_cast<std::size_t>(numel(cs.shape)) > kInMemoryLimit) continue;
    const auto inputs = op.make_inputs(cs);
    const Tensor& t = inputs.at("targets");
    std::vector<std::int64_t> v(t.numel());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(t.get(i));
    EXPECT_EQ(cross_entropy::check_targets(v.data(), cs.shape[0], cs.shape[1], -100), "") << cs.name;
  }
}

}  // namespace
}  // namespace numgate
