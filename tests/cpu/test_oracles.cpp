// Golden vs reference on every committed case and every small generated case: the
// reference must be a valid yardstick, and the adversarial cases must show the behaviour
// they were added for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include "mutant_testbed.h"
#include "numgate/gate.h"
#include "rmsnorm/rmsnorm_oracle.h"

namespace numgate {
namespace {

using testing::CommittedCase;

class Oracles : public ::testing::TestWithParam<CommittedCase> {};

// The reference fed to the gate as if it were the target must PASS every tensor: right
// structure, every element within its conditioning envelope (the rounding-error bound of
// an FP32 evaluation: a reference with a real bug would widen every threshold), and any
// declared ULP rule met. This is also the control of every mutant test: the unmutated
// reference is not caught.
void expect_valid_yardstick(const CaseData& c) {
  for (const auto& t : c.output_names) {
    const GateResult r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &c.reference.at(t));
    EXPECT_TRUE(r.reference_structure.ok) << c.op << " " << describe(r, c.spec);
    EXPECT_TRUE(r.reference_in_envelope) << c.op << " " << describe(r, c.spec);
    // PASS, or, where the gate is not valid (the ill_conditioned cases: SPEC §4), PASS WITH
    // LIMITATIONS by the conditioning envelope.
    EXPECT_EQ(r.verdict, r.gate_valid ? Verdict::pass : Verdict::pass_with_limitations) << c.op << " " << describe(r, c.spec);
    // Decidable rounding: the reference is a legitimate evaluation, so it rounds every
    // decidable element as the golden does, and the rule applies to every tensor.
    EXPECT_EQ(r.reference_misrounded, 0) << c.op << " " << describe(r, c.spec);
    EXPECT_TRUE(r.rounding_rule_valid) << c.op << " " << describe(r, c.spec);
    if (!r.gate_valid) {
      std::cout << "[ note ] " << c.op << "/" << c.spec.name << "/" << t << ": gate not valid (ref/golden "
                << r.reference_relative_error << ", condition " << r.condition
                << "); reference within the conditioning envelope\n";
    }
  }
}

TEST_P(Oracles, ReferenceIsAValidYardstick) { expect_valid_yardstick(read_case(GetParam().file, GetParam().name)); }

// The same for the generated (production = true) cases of every op small enough to
// materialize in memory: they are written only where a GPU replays them, so CI checks
// their oracles here.
TEST(Oracles, SmallGeneratedCasesAreValidYardsticks) {
  int n = 0;
  for (const auto& op : all_ops()) {
    const auto cases = testing::small_generated_cases_of(op->name(), testing::kSmallGeneratedElements);
    for (const CaseData& c : cases) expect_valid_yardstick(c);
    std::cout << "[ oracles ] " << op->name() << ": " << cases.size() << " small generated cases\n";
    n += static_cast<int>(cases.size());
  }
  EXPECT_GT(n, 100);
}

TEST_P(Oracles, EveryRowIsNormalizedAsIfAlone) {
  const CaseData c = read_case(GetParam().file, GetParam().name);
  if (c.op != "rmsnorm") GTEST_SKIP() << "rmsnorm property";
  const std::int64_t hidden = c.spec.shape.back();
  const std::int64_t rows = static_cast<std::int64_t>(c.inputs.at("x").numel()) / hidden;
  const rmsnorm::RMSNormOp op;
  for (std::int64_t r = 0; r < std::min<std::int64_t>(rows, 8); ++r) {
    CaseSpec one = c.spec;
    one.shape = {1, hidden};
    std::map<std::string, Tensor> in{{"x", Tensor(c.spec.dtype, one.shape)}, {"w", c.inputs.at("w")},
                                     {"dy", Tensor(c.spec.dtype, one.shape)}};
    const std::size_t b = static_cast<std::size_t>(r * hidden) * dtype_size(c.spec.dtype);
    const std::size_t len = static_cast<std::size_t>(hidden) * dtype_size(c.spec.dtype);
    std::memcpy(in["x"].data(), c.inputs.at("x").bytes.data() + b, len);
    std::memcpy(in["dy"].data(), c.inputs.at("dy").bytes.data() + b, len);
    const auto ref = op.reference(one, in);
    for (const char* t : {"y", "dx"})
      ASSERT_EQ(0, std::memcmp(ref.at(t).data(), c.reference.at(t).bytes.data() + b, len))
          << c.spec.name << ": reference row " << r << " of " << t << " differs when computed alone";
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, Oracles, ::testing::ValuesIn(testing::committed_cases()),
                         testing::case_test_name);

// --- adversarial cases: the behaviour each was added for --------------------------------

CaseData find_case(const std::string& pattern, DType t) {
  for (const auto& cc : testing::committed_cases()) {
    CaseData c = read_case(cc.file, cc.name);
    if (c.spec.pattern == pattern && c.spec.dtype == t) return c;
  }
  throw std::runtime_error("no committed case with pattern " + pattern);
}

TEST(RMSNormAdversarial, ZeroRowGivesExactZeroAndFiniteGradient) {
  const CaseData c = find_case("zero_row", DType::bf16);
  const std::int64_t hidden = c.spec.shape.back(), rows = c.spec.shape[0], zr = rows / 2;
  for (std::int64_t i = 0; i < hidden; ++i) {
    const std::size_t k = static_cast<std::size_t>(zr * hidden + i);
    ASSERT_EQ(c.inputs.at("x").get(k), 0.0);
    ASSERT_EQ(c.golden.at("y").value.get(k), 0.0);
    ASSERT_EQ(c.reference.at("y").get(k), 0.0);
    ASSERT_TRUE(std::isfinite(c.reference.at("dx").get(k)));
    ASSERT_NE(c.golden.at("dx").value.get(k), 0.0);  // rstd * dy * w with rstd = 1/sqrt(eps)
  }
}

TEST(RMSNormAdversarial, ZeroRowDoesNotHideTheOtherRowsFromTheGate) {
  // The zero row's dx = rstd * dy * w with rstd = 1/sqrt(eps): its dy is scaled by
  // sqrt(eps) in the fixture, so the tensor's max-abs threshold still sees every row.
  const CaseData c = find_case("zero_row", DType::bf16);
  const std::int64_t hidden = c.spec.shape.back(), zr = c.spec.shape[0] / 2;
  Tensor wrong = c.reference.at("dx");
  for (std::size_t i = 0; i < wrong.numel(); ++i)
    if (static_cast<std::int64_t>(i) / hidden != zr) wrong.set(i, 0.0);  // every other row's dx lost
  const GateResult r = evaluate_gate("dx", c.spec, c.golden.at("dx"), c.reference.at("dx"), &wrong);
  EXPECT_EQ(r.verdict, Verdict::fail) << describe(r, c.spec);
}

TEST(RMSNormAdversarial, Fp16RowWithRms300StillGivesAboutW) {
  const CaseData c = find_case("constant_300", DType::fp16);
  const std::int64_t hidden = c.spec.shape.back();
  // 300^2 * hidden overflows fp16 (max 65504); FP32 accumulation must not.
  EXPECT_GT(300.0 * 300.0 * static_cast<double>(hidden), 65504.0);
  for (std::int64_t i = 0; i < hidden; ++i) {
    const double w = c.inputs.at("w").get(i);
    ASSERT_NEAR(c.reference.at("y").get(i), w, std::fabs(w) * 1e-3 + 1e-6) << "element " << i;
  }
}

TEST(RMSNormAdversarial, SpikyRowPutsSqrtHiddenTimesWAtTheSpike) {
  const CaseData c = find_case("spiky", DType::bf16);
  const std::int64_t hidden = c.spec.shape.back();
  int spikes = 0;
  for (std::int64_t i = 0; i < hidden; ++i) {
    if (c.inputs.at("x").get(i) == 100.0) {
      ++spikes;
      // y = 100 / sqrt(100^2 / hidden + eps) * w ~ sqrt(hidden) * w
      const double expected = 100.0 / std::sqrt(1e4 / double(hidden) + c.spec.param("eps"));
      EXPECT_NEAR(c.golden.at("y").value.get(i) / c.inputs.at("w").get(i), expected, 1e-12);
      EXPECT_NEAR(expected, std::sqrt(double(hidden)), 1e-4);
    } else {
      EXPECT_EQ(c.golden.at("y").value.get(i), 0.0);
    }
  }
  EXPECT_EQ(spikes, 1);
}

}  // namespace
}  // namespace numgate
