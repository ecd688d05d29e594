// The gate arithmetic, structure checks and verdicts on hand-made vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "numgate/gate.h"

namespace numgate {
namespace {

Tensor make(DType t, std::vector<double> v) {
  Tensor x(t, {static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i) x.set(i, v[i]);
  return x;
}
GoldenTensor gold(std::vector<double> v) {
  GoldenTensor g{make(DType::fp64, v), make(DType::fp64, v), 1};
  for (std::size_t i = 0; i < v.size(); ++i) g.abs_terms.set(i, std::fabs(v[i]));
  return g;
}
// The golden of an element accumulated over 2^16 FP32 terms: its conditioning envelope
// (about 0.0117 at |golden| = 1) admits a same-precision reference off by a bf16 ulp.
GoldenTensor gold_long(std::vector<double> v) {
  GoldenTensor g = gold(std::move(v));
  g.envelope_length = 1 << 16;
  return g;
}
CaseSpec spec(DType t) {
  CaseSpec c;
  c.name = "handmade";
  c.dtype = t;
  c.shape = {3};
  return c;
}
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Gate, ReferenceErrorZeroLeavesOnlyTheRoundingFloor) {
  const auto g = gold({1.0, 2.0, -3.0});  // exactly representable in bf16: floor 0
  const auto ref = make(DType::bf16, {1.0, 2.0, -3.0});
  auto exact = make(DType::bf16, {1.0, 2.0, -3.0});
  auto r = evaluate_gate("y", spec(DType::bf16), g, ref, &exact);
  EXPECT_EQ(r.reference_error, 0.0);
  EXPECT_EQ(r.rounding_floor, 0.0);
  EXPECT_EQ(r.threshold, 0.0);
  EXPECT_TRUE(r.gate_valid);
  EXPECT_EQ(r.verdict, Verdict::pass);
  auto off = make(DType::bf16, {1.0, 2.0, -3.015625});  // one bf16 ulp away
  r = evaluate_gate("y", spec(DType::bf16), g, ref, &off);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.target_error, 0.015625);
  EXPECT_EQ(r.worst_index, 2);
}

TEST(Gate, RoundingFloorOfEachDtype) {
  const auto g = gold({1.0 / 3.0, 0.0, 0.0});
  // 1/3 rounded to nearest: bf16 0.333984375, fp16 0.333251953125, fp32 0.3333333432674408
  const struct { DType t; double rounded; } rows[] = {
      {DType::bf16, 0.333984375}, {DType::fp16, 0.333251953125}, {DType::fp32, 0.3333333432674408}};
  for (const auto& row : rows) {
    const auto ref = make(row.t, {1.0 / 3.0, 0.0, 0.0});
    auto r = evaluate_gate("y", spec(row.t), g, ref, &ref);
    EXPECT_EQ(r.rounding_floor, std::fabs(row.rounded - 1.0 / 3.0)) << dtype_name(row.t);
    EXPECT_EQ(r.reference_error, r.rounding_floor) << dtype_name(row.t);
    EXPECT_EQ(r.threshold, 3 * r.rounding_floor) << dtype_name(row.t);
  }
}

TEST(Gate, ThresholdIsFudgeTimesReferenceErrorPlusFloorAndInclusive) {
  const auto g = gold_long({1.0, -2.0, 0.5});
  const auto ref = make(DType::bf16, {1.0078125, -2.0, 0.5});  // reference_error 2^-7
  auto at = make(DType::bf16, {1.015625, -2.0, 0.5});          // error 2^-6 == threshold
  auto r = evaluate_gate("y", spec(DType::bf16), g, ref, &at);
  EXPECT_EQ(r.reference_error, 0.0078125);
  EXPECT_EQ(r.threshold, 0.015625);
  EXPECT_EQ(r.verdict, Verdict::pass);
  auto above = make(DType::bf16, {1.0234375, -2.0, 0.5});  // 3 * 2^-7 > threshold
  r = evaluate_gate("y", spec(DType::bf16), g, ref, &above);
  EXPECT_EQ(r.verdict, Verdict::fail);
  CaseSpec loose = spec(DType::bf16);
  loose.gate.project_atol = 0.03;  // absolute floor above the rounding floor
  r = evaluate_gate("y", loose, g, ref, &above);
  EXPECT_EQ(r.absolute_floor, 0.03);
  EXPECT_EQ(r.verdict, Verdict::pass);
}

TEST(Gate, StructureMismatchFailsBeforeAnyTolerance) {
  const auto g = gold({kNaN, kInf, -kInf});
  const auto ref = make(DType::fp16, {kNaN, kInf, -kInf});
  auto same = make(DType::fp16, {kNaN, kInf, -kInf});
  EXPECT_EQ(evaluate_gate("y", spec(DType::fp16), g, ref, &same).verdict, Verdict::pass);
  for (auto bad : {std::vector<double>{0.0, kInf, -kInf}, {kNaN, -kInf, -kInf}, {kNaN, kInf, kNaN}}) {
    auto t = make(DType::fp16, bad);
    auto r = evaluate_gate("y", spec(DType::fp16), g, ref, &t);
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_FALSE(r.target_structure.ok);
    EXPECT_NE(r.target_structure.message.find("wrong place"), std::string::npos) << r.target_structure.message;
  }
  auto wrong_shape = Tensor(DType::fp16, {1, 3});
  EXPECT_EQ(evaluate_gate("y", spec(DType::fp16), g, ref, &wrong_shape).verdict, Verdict::fail);
  auto wrong_dtype = make(DType::bf16, {kNaN, kInf, -kInf});
  EXPECT_EQ(evaluate_gate("y", spec(DType::fp16), g, ref, &wrong_dtype).verdict, Verdict::fail);
}

TEST(Gate, ElementsWhoseTermsAreAllZeroMustBeExactlyZero) {
  GoldenTensor g{make(DType::fp64, {0.0, 0.0, 1.0}), make(DType::fp64, {0.0, 1.0, 1.0}), 1};
  const auto ref = make(DType::bf16, {0.0, 0.0, 1.0});
  auto tiny = make(DType::bf16, {1e-30, 0.0, 1.0});  // far below the threshold, still wrong
  auto r = evaluate_gate("y", spec(DType::bf16), g, ref, &tiny);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_NE(r.target_structure.message.find("exactly 0"), std::string::npos) << r.target_structure.message;
  auto cancel = make(DType::bf16, {0.0, 1e-30, 1.0});  // golden 0 from non-zero terms: tolerance applies
  r = evaluate_gate("y", spec(DType::bf16), g, ref, &cancel);
  EXPECT_TRUE(r.target_structure.ok) << r.target_structure.message;
}

TEST(Gate, FiniteGoldenThatOverflowsTheDtypeMustComeOutAsInf) {
  const auto g = gold({1e6, 1.0, 1.0});  // fp16 max is 65504
  const auto ref = make(DType::fp16, {1e6, 1.0, 1.0});
  EXPECT_TRUE(std::isinf(ref.get(0)));
  auto inf = make(DType::fp16, {kInf, 1.0, 1.0});
  EXPECT_EQ(evaluate_gate("y", spec(DType::fp16), g, ref, &inf).verdict, Verdict::pass);
  auto clamped = make(DType::fp16, {65504.0, 1.0, 1.0});
  EXPECT_EQ(evaluate_gate("y", spec(DType::fp16), g, ref, &clamped).verdict, Verdict::fail);
}

TEST(Gate, IllConditionedElementFallsBackOnTheNoiseEnvelope) {
  // golden 1e-6 computed from terms of size 1: condition 1e6, FP32 noise ~ 1e-7 per term.
  GoldenTensor g{make(DType::fp64, {1e-6, 0, 0}), make(DType::fp64, {1.0, 0, 0}), 4};
  const auto ref = make(DType::fp32, {1.2e-6, 0, 0});  // 20% off: gate not valid
  auto within = make(DType::fp32, {0.9e-6, 0, 0});
  auto r = evaluate_gate("dx", spec(DType::fp32), g, ref, &within);
  EXPECT_FALSE(r.gate_valid);
  EXPECT_NEAR(r.reference_relative_error, 0.2, 1e-6);
  EXPECT_NEAR(r.condition, 1e6, 1.0);
  EXPECT_TRUE(r.reference_in_envelope);
  EXPECT_EQ(r.verdict, Verdict::pass_with_limitations);
  auto outside = make(DType::fp32, {1e-4, 0, 0});  // far beyond gamma * sum|terms|
  r = evaluate_gate("dx", spec(DType::fp32), g, ref, &outside);
  EXPECT_EQ(r.verdict, Verdict::fail);
  const auto bad_ref = make(DType::fp32, {1e-4, 0, 0});  // reference itself unexplained
  r = evaluate_gate("dx", spec(DType::fp32), g, bad_ref, &within);
  EXPECT_EQ(r.verdict, Verdict::inconclusive);
}

TEST(Gate, UlpDistanceCountsRepresentableValues) {
  EXPECT_EQ(ulp_distance(1.0, 1.0, DType::bf16), 0);
  EXPECT_EQ(ulp_distance(1.0, 1.0078125, DType::bf16), 1);         // 1 + 2^-7
  EXPECT_EQ(ulp_distance(1.0, 1.0 - 1.0 / 256, DType::bf16), 1);   // below 1 the spacing halves
  EXPECT_EQ(ulp_distance(0.0, -0.0, DType::fp16), 0);
  EXPECT_EQ(ulp_distance(std::ldexp(1.0, -24), -std::ldexp(1.0, -24), DType::fp16), 2);  // across zero
  EXPECT_EQ(ulp_distance(65504.0, 32768.0, DType::fp16), 1023);  // 1023 steps of 32 in [2^15, 2^16)
  EXPECT_EQ(ulp_distance(1.0, 1.0 + std::ldexp(1.0, -23), DType::fp32), 1);
}

TEST(Gate, ElementwiseUlpRuleFailsBeyondTheDeclaredLimitEvenInsideTheThreshold) {
  CaseSpec c = spec(DType::bf16);
  c.gate.ulp_limit = 1;
  c.gate.project_atol = 1.0;  // a threshold that would let everything through
  const auto g = gold_long({1.0, 2.0, 3.0});  // long sums: no element decidable, the ULP rule alone
  const auto ref = make(DType::bf16, {1.0, 2.0, 3.0});
  auto one = make(DType::bf16, {1.0078125, 2.0, 3.0});  // 1 ULP
  auto r = evaluate_gate("y", c, g, ref, &one);
  EXPECT_EQ(r.verdict, Verdict::pass);
  EXPECT_EQ(r.max_ulp, 1);
  EXPECT_EQ(r.ulp_counts[0], 2);
  EXPECT_EQ(r.ulp_counts[1], 1);
  auto two = make(DType::bf16, {1.015625, 2.0, 3.0});  // 2 ULP
  r = evaluate_gate("y", c, g, ref, &two);
  EXPECT_EQ(r.max_ulp, 2);
  EXPECT_EQ(r.ulp_counts[2], 1);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_NE(describe(r, c).find("ULP vs rounded golden (limit 1)"), std::string::npos) << describe(r, c);
}

// Tensors above 2^16 elements are gated in parallel chunks; the merged result must be the
// sequential one: first index on ties, counts summed, structure failures at their first
// element. Ties are placed in different chunks (whatever the thread count).
TEST(Gate, LargeTensorsGiveTheSequentialResultWithFirstIndexOnTies) {
  const std::size_t n = std::size_t{1} << 20;
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 1.0 + static_cast<double>(i % 64);  // exact in bf16
  CaseSpec c = spec(DType::bf16);
  c.shape = {static_cast<std::int64_t>(n)};
  c.gate.ulp_limit = 8;
  const auto g = gold(v);
  const auto ref = make(DType::bf16, v);
  auto tgt = make(DType::bf16, v);
  const std::size_t tied[] = {n - 61, 5 * n / 8 + 3, 3, n / 2 + 3};  // value 4.0; 1 ULP there is 2^-5
  for (std::size_t i : tied) {
    ASSERT_EQ(v[i], 4.0);
    tgt.set(i, 4.03125);
  }
  auto r = evaluate_gate("y", c, g, ref, &tgt);
  EXPECT_EQ(r.worst_index, 3);
  EXPECT_EQ(r.target_error, 0.03125);
  EXPECT_EQ(r.max_ulp, 1);
  EXPECT_EQ(r.max_ulp_index, 3);
  EXPECT_EQ(r.ulp_counts[0], static_cast<std::int64_t>(n - 4));
  EXPECT_EQ(r.ulp_counts[1], 4);
  EXPECT_EQ(r.verdict, Verdict::fail);  // threshold 0: reference and golden agree exactly
  tgt.set(n - 2, kNaN);
  tgt.set(n / 2 + 7, kNaN);
  r = evaluate_gate("y", c, g, ref, &tgt);
  EXPECT_FALSE(r.target_structure.ok);
  EXPECT_NE(r.target_structure.message.find("2 element(s)"), std::string::npos) << r.target_structure.message;
  EXPECT_NE(r.target_structure.message.find("[" + std::to_string(n / 2 + 7) + "]"), std::string::npos)
      << r.target_structure.message;
}

TEST(Gate, PerTensorUlpRuleAppliesToItsTensorOnly) {
  CaseSpec c = spec(DType::bf16);
  c.gate.tensor_ulp_limits = {{"residual_out", 0}};
  c.gate.project_atol = 1.0;  // a threshold that would let everything through
  const auto g = gold_long({1.0, 2.0, 3.0});  // no element decidable: the ULP rule alone
  const auto ref = make(DType::bf16, {1.0, 2.0, 3.0});
  auto one = make(DType::bf16, {1.0078125, 2.0, 3.0});  // 1 ULP off
  auto r = evaluate_gate("residual_out", c, g, ref, &one);
  EXPECT_EQ(r.params.ulp_limit, 0);
  EXPECT_EQ(r.max_ulp, 1);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_NE(describe(r, c).find("ULP vs rounded golden (limit 0)"), std::string::npos) << describe(r, c);
  r = evaluate_gate("y", c, g, ref, &one);  // no rule for y: max-abs gate only
  EXPECT_EQ(r.params.ulp_limit, -1);
  EXPECT_EQ(r.max_ulp, -1);
  EXPECT_EQ(r.verdict, Verdict::pass);
}

// ---- decidable rounding ------------------------------------------------------------------

TEST(Gate, DecidableRoundingFailsAMisroundedElementTheThresholdLetsThrough) {
  CaseSpec c = spec(DType::bf16);
  c.gate.project_atol = 1.0;  // a threshold that would let everything through
  // 1 + 0.3 ulp: far from both rounding boundaries (the envelope of one term is ~6e-7).
  const double ulp = 1.0 / 128;
  const auto g = gold({1.0 + 0.3 * ulp, 2.0, -3.0});
  const auto ref = make(DType::bf16, {1.0, 2.0, -3.0});
  auto r = evaluate_gate("y", c, g, ref, &ref);
  EXPECT_EQ(r.decidable, 3);
  EXPECT_EQ(r.reference_misrounded, 0);
  EXPECT_EQ(r.target_misrounded, 0);
  EXPECT_TRUE(r.rounding_rule_valid);
  EXPECT_EQ(r.verdict, Verdict::pass);
  const auto up = make(DType::bf16, {1.0 + ulp, 2.0, -3.0});  // the neighbour: within every threshold
  r = evaluate_gate("y", c, g, ref, &up);
  EXPECT_LE(r.target_error, r.threshold);
  EXPECT_EQ(r.target_misrounded, 1);
  EXPECT_EQ(r.misrounded_index, 0);
  EXPECT_EQ(r.verdict, Verdict::fail);
  const std::string d = describe(r, c);
  EXPECT_NE(d.find("decidable rounding: 3 decidable elements, misrounded: reference 0, target 1; first at [0]"),
            std::string::npos)
      << d;
  // Below a power of 2 the spacing halves: 2 - 0.3 ulp(below) is decidable, its neighbour below is 2 - 2^-7.
  const auto g2 = gold({2.0 - 0.3 * ulp, 2.0, -3.0});
  const auto ref2 = make(DType::bf16, {2.0, 2.0, -3.0});
  const auto below = make(DType::bf16, {2.0 - ulp, 2.0, -3.0});
  r = evaluate_gate("y", c, g2, ref2, &below);
  EXPECT_EQ(r.decidable, 3);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.target_misrounded, 1);
}

TEST(Gate, DecidableRoundingLeavesElementsNearABoundaryToTheThreshold) {
  CaseSpec c = spec(DType::bf16);
  const double ulp = 1.0 / 128;
  // 1 + ulp/2 - 1e-7: a legitimate FP32 evaluation (error up to ~6e-7 here) may round
  // either way, so either neighbour passes.
  const auto g = gold({1.0 + ulp / 2 - 1e-7, 2.0, -3.0});
  const auto ref = make(DType::bf16, {1.0, 2.0, -3.0});
  const auto other = make(DType::bf16, {1.0 + ulp, 2.0, -3.0});
  auto r = evaluate_gate("y", c, g, ref, &other);
  EXPECT_EQ(r.decidable, 2);
  EXPECT_EQ(r.target_misrounded, 0);
  EXPECT_EQ(r.verdict, Verdict::pass);
  // A long sum widens every element's bound beyond half an ulp: nothing is decidable.
  r = evaluate_gate("y", c, gold_long({1.0 + 0.3 * ulp, 2.0, -3.0}), ref, &other);
  EXPECT_EQ(r.decidable, 0);
}

TEST(Gate, DecidableRoundingSeesAFlushedSubnormalAndOverflow) {
  CaseSpec c = spec(DType::bf16);
  const double sub = std::ldexp(1.0, -130);  // a bf16 subnormal (2^-133 is the smallest)
  const double big = 3.3895313892515355e38;  // the largest finite bf16
  const auto g = gold({sub, big, -sub});
  const auto ref = make(DType::bf16, {sub, big, -sub});
  auto r = evaluate_gate("y", c, g, ref, &ref);
  EXPECT_EQ(r.decidable, 3);
  EXPECT_EQ(r.verdict, Verdict::pass);
  const auto flushed = make(DType::bf16, {0.0, big, -0.0});  // flush-to-zero of the subnormal results
  r = evaluate_gate("y", c, g, ref, &flushed);
  EXPECT_EQ(r.target_misrounded, 2);
  EXPECT_EQ(r.verdict, Verdict::fail);
  // Just below the overflow threshold max + ulp/2: still decidable, rounds to max.
  const double max_ulp = std::ldexp(1.0, 127 - 7);
  const auto g_near = gold({sub, big + 0.3 * max_ulp, -sub});
  r = evaluate_gate("y", c, g_near, ref, &ref);
  EXPECT_EQ(r.decidable, 3);
  EXPECT_EQ(r.verdict, Verdict::pass);
}

TEST(Gate, DecidableRoundingIntervalsAreExactInFp64Too) {
  // fp64 output: the midpoints between doubles are not doubles. 1 + 2^-52 (odd last bit)
  // with a bound of 0.75 ulp is not decidable; with 0.25 ulp it is.
  CaseSpec c = spec(DType::fp64);
  const double r = 1.0 + std::ldexp(1.0, -52);
  GoldenTensor g = gold({r, 2.0, 3.0});
  const auto ref = make(DType::fp64, {r, 2.0, 3.0});
  // FP64 accumulation: e = gamma_10(2^-53) * abs_terms, about 10 half-ulps for 2 and 3
  // (never decidable); element 0's abs_terms sets its bound.
  const double gamma10 = 10 * 0x1p-53 / (1 - 10 * 0x1p-53);
  g.abs_terms.set(0, 0.75 * std::ldexp(1.0, -52) / gamma10);
  EXPECT_EQ(evaluate_gate("y", c, g, ref, &ref).decidable, 0);
  g.abs_terms.set(0, 0.25 * std::ldexp(1.0, -52) / gamma10);
  EXPECT_EQ(evaluate_gate("y", c, g, ref, &ref).decidable, 1);
}

TEST(Gate, DecidableRoundingIsNotAppliedWhenTheReferenceMisrounds) {
  CaseSpec c = spec(DType::bf16);
  c.gate.project_atol = 1.0;
  const double ulp = 1.0 / 128;
  const auto g = gold({1.0 + 0.3 * ulp, 2.0, -3.0});
  const auto bad_ref = make(DType::bf16, {1.0 + ulp, 2.0, -3.0});  // not a legitimate evaluation
  const auto up = make(DType::bf16, {1.0 + ulp, 2.0, -3.0});
  const auto r = evaluate_gate("y", c, g, bad_ref, &up);
  EXPECT_EQ(r.reference_misrounded, 1);
  EXPECT_FALSE(r.rounding_rule_valid);
  EXPECT_EQ(r.target_misrounded, 1);  // counted, not applied
  EXPECT_EQ(r.verdict, Verdict::pass);  // the threshold decides
  EXPECT_NE(describe(r, c).find("rule not applied"), std::string::npos) << describe(r, c);
}

TEST(Gate, WithoutTargetReportsValidityAndNotRun) {
  const auto g = gold({1.0, 2.0, 3.0});
  const auto ref = make(DType::bf16, {1.0, 2.0, 3.0});
  auto r = evaluate_gate("y", spec(DType::bf16), g, ref, nullptr);
  EXPECT_EQ(r.verdict, Verdict::not_run);
  EXPECT_TRUE(r.gate_valid);
}

TEST(Gate, VerdictsCombineWorstFirst) {
  EXPECT_EQ(combine(Verdict::pass, Verdict::fail), Verdict::fail);
  EXPECT_EQ(combine(Verdict::inconclusive, Verdict::pass_with_limitations), Verdict::inconclusive);
  EXPECT_EQ(combine(Verdict::not_run, Verdict::pass), Verdict::not_run);  // unverified never reads as pass
  EXPECT_EQ(combine(Verdict::not_run, Verdict::pass_with_limitations), Verdict::not_run);
  EXPECT_EQ(combine(Verdict::fail, Verdict::inconclusive), Verdict::fail);
}

TEST(Gate, ReferenceOutsideItsEnvelopeNeverSetsAThreshold) {
  // The same reference as above, but the golden is one exact term per element (condition
  // 1, k = 1): no FP32 evaluation is off by 2^-7 there, so this reference is not a
  // same-precision result (a hand-edited fixture, a broken oracle). Its error must not
  // widen the threshold: the gate is not valid and the verdict INCONCLUSIVE, even for a
  // target the inflated threshold would pass.
  const auto g = gold({1.0, -2.0, 0.5});
  const auto ref = make(DType::bf16, {1.0078125, -2.0, 0.5});
  auto within_inflated = make(DType::bf16, {1.015625, -2.0, 0.5});
  auto r = evaluate_gate("y", spec(DType::bf16), g, ref, &within_inflated);
  EXPECT_LE(r.reference_relative_error, r.params.max_reference_relative_error);  // the old rule alone: valid
  EXPECT_FALSE(r.reference_in_envelope);
  EXPECT_FALSE(r.gate_valid);
  EXPECT_EQ(r.verdict, Verdict::inconclusive) << describe(r, spec(DType::bf16));
  EXPECT_NE(describe(r, spec(DType::bf16)).find("reference outside its conditioning envelope"), std::string::npos);
  // Control: the exact reference keeps the gate valid and the same target fails it.
  const auto exact = make(DType::bf16, {1.0, -2.0, 0.5});
  r = evaluate_gate("y", spec(DType::bf16), g, exact, &within_inflated);
  EXPECT_TRUE(r.gate_valid);
  EXPECT_EQ(r.verdict, Verdict::fail);
}

TEST(Gate, FailureMessageNamesCaseTensorElementAndQuantities) {
  const auto g = gold_long({1.0, -2.0, 0.5});
  const auto ref = make(DType::bf16, {1.0078125, -2.0, 0.5});
  auto t = make(DType::bf16, {1.0, -2.0, 0.75});
  CaseSpec c = spec(DType::bf16);
  const auto r = evaluate_gate("dw", c, g, ref, &t);
  const std::string m = describe(r, c);
  for (const char* s : {"handmade", "dw", "FAIL", "[2]", "golden 0.5", "reference 0.5", "target 0.75",
                        "reference_error", "target_error 0.25", "rounding_floor", "threshold"})
    EXPECT_NE(m.find(s), std::string::npos) << "missing '" << s << "' in:\n" << m;
}

}  // namespace
}  // namespace numgate
