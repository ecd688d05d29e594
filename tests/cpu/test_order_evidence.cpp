// The gate's order evidence (numgate/gate.h, SPEC §4): when only the max-abs threshold
// fails a target (gate valid), or the gate is not valid and the target lies inside its
// envelope, legitimate evaluations in other summation orders decide — on hand-made
// vectors, each path of apply_order_evidence, including the ones where it must not rescue.
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
// An FP32 golden accumulated over 2^16 terms of total magnitude `terms` per element: its
// envelope is wide (about 0.0078 * terms), so no element is decidable and only the max-abs
// threshold (or, with the gate not valid, the envelope) can fail a target.
GoldenTensor gold(std::vector<double> v, double terms) {
  GoldenTensor g{make(DType::fp64, v), make(DType::fp64, v), 1 << 16};
  for (std::size_t i = 0; i < v.size(); ++i) g.abs_terms.set(i, terms);
  return g;
}
CaseSpec spec() {
  CaseSpec c;
  c.name = "handmade";
  c.dtype = DType::fp32;
  c.shape = {3};
  return c;
}

// golden 1 + 2^-26 (1/8 fp32 ulp above 1): the reference 1 (correctly rounded) sets a
// threshold of 3 * 2^-26; the target 1 + 2^-23, one ulp up, is beyond it.
const double kG = 1.0 + 0x1p-26, kUlp = 0x1p-23;

GateResult max_abs_only_fail() {
  const GoldenTensor g = gold({kG, 2.0, 3.0}, 1.0);
  const Tensor ref = make(DType::fp32, {1.0, 2.0, 3.0}), tgt = make(DType::fp32, {1.0 + kUlp, 2.0, 3.0});
  GateResult r = evaluate_gate("y", spec(), g, ref, &tgt);
  EXPECT_TRUE(r.gate_valid);
  EXPECT_EQ(r.decidable, 0);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.decided_by, "max-abs threshold");
  EXPECT_TRUE(wants_order_evidence(r));
  return r;
}

TEST(OrderEvidence, RescuesATargetWithinTwiceTheLegitimateOrders) {
  GateResult r = max_abs_only_fail();
  const Tensor other = make(DType::fp32, {1.0 - 0x1p-24, 2.0, 3.0});  // the fp32 value below 1
  apply_order_evidence(r, spec(), gold({kG, 2.0, 3.0}, 1.0), {&other}, {"reversed"});
  EXPECT_EQ(r.order_evaluations, 1);
  EXPECT_DOUBLE_EQ(r.order_error, 0x1p-24 + 0x1p-26);
  EXPECT_DOUBLE_EQ(r.order_threshold, 2 * (0x1p-24 + 0x1p-26) + 0x1p-26);
  EXPECT_EQ(r.verdict, Verdict::pass_with_limitations);
  EXPECT_EQ(r.decided_by, "order evidence");
  EXPECT_NE(describe(r, spec()).find("decided by: order evidence"), std::string::npos);
}

TEST(OrderEvidence, DoesNotRescueBeyondTwiceTheLegitimateOrders) {
  GateResult r = max_abs_only_fail();
  const Tensor same = make(DType::fp32, {1.0, 2.0, 3.0});  // an order agreeing with the reference
  apply_order_evidence(r, spec(), gold({kG, 2.0, 3.0}, 1.0), {&same, &same}, {"reversed", "pairwise"});
  EXPECT_EQ(r.order_evaluations, 2);
  EXPECT_EQ(r.order_threshold, r.threshold);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.decided_by, "max-abs threshold and order evidence");
}

TEST(OrderEvidence, AnEvaluationThatIsNotLegitimateDecidesNothing) {
  const GoldenTensor g = gold({kG, 2.0, 3.0}, 1.0);
  // A NaN where the golden is finite (structure), and a value far outside the envelope.
  for (const Tensor& bad : {make(DType::fp32, {std::numeric_limits<double>::quiet_NaN(), 2.0, 3.0}),
                            make(DType::fp32, {1.5, 2.0, 3.0})}) {
    GateResult r = max_abs_only_fail();
    apply_order_evidence(r, spec(), g, {&bad}, {"broken"});
    EXPECT_EQ(r.verdict, Verdict::fail);
    EXPECT_EQ(r.order_evaluations, 0);
    EXPECT_NE(r.decided_by.find("order evidence unusable, every evaluation left out: broken"), std::string::npos)
        << r.decided_by;
  }
}

TEST(OrderEvidence, ABadEvaluationIsLeftOutAndTheOthersDecide) {
  const GoldenTensor g = gold({kG, 2.0, 3.0}, 1.0);
  const Tensor bad = make(DType::fp32, {1.5, 2.0, 3.0}), other = make(DType::fp32, {1.0 - 0x1p-24, 2.0, 3.0});
  GateResult r = max_abs_only_fail();
  apply_order_evidence(r, spec(), g, {&bad, &other}, {"broken", "reversed"});
  EXPECT_EQ(r.order_evaluations, 1);
  EXPECT_EQ(r.verdict, Verdict::pass_with_limitations);
  EXPECT_NE(r.decided_by.find("left out: broken"), std::string::npos) << r.decided_by;
}

TEST(OrderEvidence, AWorstCaseCountsOnceASampleTwice) {
  // The same evaluation as a sample (fudge 2: rescues the target) and as a worst case
  // (factor 1: 0x1p-24 + 0x1p-26 + floor < the target's error: does not).
  const GoldenTensor g = gold({kG, 2.0, 3.0}, 1.0);
  const Tensor other = make(DType::fp32, {1.0 - 0x1p-24, 2.0, 3.0});
  GateResult sample = max_abs_only_fail(), bound = max_abs_only_fail();
  apply_order_evidence(sample, spec(), g, {&other}, {"pairwise"}, {false});
  apply_order_evidence(bound, spec(), g, {&other}, {"math+2ulp"}, {true});
  EXPECT_EQ(sample.verdict, Verdict::pass_with_limitations);
  EXPECT_EQ(bound.verdict, Verdict::fail);
  EXPECT_DOUBLE_EQ(bound.order_worst_case_error, 0x1p-24 + 0x1p-26);
  EXPECT_DOUBLE_EQ(bound.order_threshold, std::max(2 * bound.reference_error, 0x1p-24 + 0x1p-26) + 0x1p-26);
}

TEST(OrderEvidence, NeverTouchesAFailOfAnotherRule) {
  // Decidable rounding: a bf16 golden 1 + 2^-10 of one term, decidable (it must round to 1);
  // the target one bf16 ulp up misrounds it.
  CaseSpec bf = spec();
  bf.dtype = DType::bf16;
  const double g1 = 1.0 + 0x1p-10;
  const GoldenTensor g{make(DType::fp64, {g1, 2.0, 3.0}), make(DType::fp64, {g1, 2.0, 3.0}), 1};
  const Tensor ref = make(DType::bf16, {1.0, 2.0, 3.0}), tgt = make(DType::bf16, {1.0 + 0x1p-7, 2.0, 3.0});
  GateResult r = evaluate_gate("y", bf, g, ref, &tgt);
  ASSERT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.decided_by, "decidable rounding");
  EXPECT_FALSE(wants_order_evidence(r));
  const Tensor wide = make(DType::bf16, {1.0 + 0x1p-6, 2.0, 3.0});
  apply_order_evidence(r, bf, g, {&wide}, {"reversed"});
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.order_evaluations, 0);
  // A passing target is left alone too.
  const Tensor ref32 = make(DType::fp32, {1.0, 2.0, 3.0});
  GateResult p = evaluate_gate("y", spec(), gold({kG, 2.0, 3.0}, 1.0), ref32, &ref32);
  EXPECT_EQ(p.verdict, Verdict::pass);
  EXPECT_FALSE(wants_order_evidence(p));
}

// A legitimate evaluation beyond the validity limit: the gate was valid by the luck of one
// reference; the not-valid path then decides.
TEST(OrderEvidence, AnEvaluationBeyondTheValidityLimitMakesTheGateNotValid) {
  const GoldenTensor g = gold({1.0, 1.0, 1.0}, 100.0);
  const Tensor ref = make(DType::fp32, {1.04, 1.0, 1.0}), tgt = make(DType::fp32, {1.12, 1.0, 1.0});
  const Tensor wide = make(DType::fp32, {1.15, 1.0, 1.0});
  GateResult r = evaluate_gate("y", spec(), g, ref, &tgt);
  ASSERT_TRUE(r.gate_valid);
  ASSERT_EQ(r.verdict, Verdict::fail);
  apply_order_evidence(r, spec(), g, {&wide}, {"pairwise+FMA"});
  EXPECT_FALSE(r.gate_valid);
  EXPECT_EQ(r.verdict, Verdict::pass_with_limitations);
  EXPECT_EQ(r.decided_by, "conditioning envelope and order evidence");
}

// Gate not valid: the reference 20% off (inside an envelope of ~0.78 around 1).
TEST(OrderEvidence, DecidesBetweenPassWithLimitationsAndInconclusiveWhenTheGateIsNotValid) {
  const GoldenTensor g = gold({1.0, 1.0, 1.0}, 100.0);
  const Tensor ref = make(DType::fp32, {1.2, 1.0, 1.0}), order = make(DType::fp32, {1.1, 1.0, 1.0});
  for (const auto& [value, want] : {std::pair{1.3, Verdict::pass_with_limitations}, std::pair{1.5, Verdict::inconclusive}}) {
    const Tensor tgt = make(DType::fp32, {value, 1.0, 1.0});
    GateResult r = evaluate_gate("y", spec(), g, ref, &tgt);
    ASSERT_FALSE(r.gate_valid);
    ASSERT_TRUE(r.target_in_envelope);
    EXPECT_EQ(r.verdict, Verdict::pass_with_limitations);
    EXPECT_EQ(r.decided_by, "conditioning envelope");
    apply_order_evidence(r, spec(), g, {&order}, {"pairwise"});
    EXPECT_EQ(r.verdict, want) << value;
    EXPECT_EQ(r.decided_by.rfind("conditioning envelope and order evidence", 0), 0u) << r.decided_by;
    EXPECT_NEAR(r.order_threshold, 2 * 0.2, 1e-6);  // the reference's error is the larger
  }
}

}  // namespace
}  // namespace numgate
