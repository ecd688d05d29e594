// CPU mutants of the RMSNorm reference, fed to the gate as if they were the target.
// Each deliberately reintroduces one source of discrepancy (SPEC §6); the gate must
// report FAIL on the cases built to expose it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "committed.h"
#include "numgate/gate.h"
#include "rmsnorm/rmsnorm_oracle.h"

namespace numgate {
namespace {

using rmsnorm::Mutant;

struct MutantRun {
  Verdict verdict = Verdict::pass;  // combined with every tensor's verdict
  std::string failing_tensors;
  double worst_ratio = 0;  // max over tensors of target_error / threshold
  std::string worst_detail;
};

MutantRun gate_mutant(const CaseData& c, Mutant m) {
  const auto out = rmsnorm::reference_variant(c.spec, c.inputs, m);
  MutantRun run;
  for (const auto& t : c.output_names) {
    const GateResult r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &out.at(t));
    run.verdict = combine(run.verdict, r.verdict);
    if (r.verdict == Verdict::fail) run.failing_tensors += " " + t;
    const double ratio = r.threshold > 0 ? r.target_error / r.threshold : (r.target_error > 0 ? INFINITY : 0);
    if (ratio >= run.worst_ratio) {
      run.worst_ratio = ratio;
      run.worst_detail = describe(r, c.spec);
    }
  }
  return run;
}

std::vector<CaseData> rmsnorm_cases() {
  std::vector<CaseData> v;
  for (const auto& cc : testing::committed_cases()) {
    CaseData c = read_case(cc.file, cc.name);
    if (c.op == "rmsnorm") v.push_back(std::move(c));
  }
  return v;
}

// Requires FAIL on every case `must_fail` selects, and at least one such case.
void expect_caught(Mutant m, bool (*must_fail)(const CaseData&)) {
  int required = 0;
  for (const CaseData& c : rmsnorm_cases()) {
    const MutantRun run = gate_mutant(c, m);
    std::cout << "[ mutant " << rmsnorm::mutant_name(m) << " ] " << c.spec.name << ": " << verdict_name(run.verdict)
              << (run.failing_tensors.empty() ? "" : " (" + run.failing_tensors.substr(1) + ")") << "\n";
    if (must_fail(c)) {
      if (required == 0 && run.verdict == Verdict::fail) std::cout << "  first failure, as a user sees it:\n" << run.worst_detail;
      ++required;
      EXPECT_EQ(run.verdict, Verdict::fail) << "mutant " << rmsnorm::mutant_name(m) << " not caught:\n"
                                            << run.worst_detail;
    }
  }
  EXPECT_GT(required, 0) << "no committed case is designed to catch mutant " << rmsnorm::mutant_name(m);
}

TEST(Mutants, SumOfSquaresAccumulatedInBf16IsCaught) {
  // Any row of 256+ ordinary values: the bf16 running sum stalls once it reaches ~2^8.
  expect_caught(Mutant::bf16_sum_of_squares,
                [](const CaseData& c) { return c.spec.pattern == "normal" && c.spec.shape.back() >= 256; });
}

TEST(Mutants, EpsilonOutsideTheSquareRootIsCaught) {
  // Visible only where mean(x^2) is comparable to or below eps.
  expect_caught(Mutant::eps_outside_sqrt, [](const CaseData& c) {
    return c.spec.pattern == "near_zero_variance" || c.spec.pattern == "zero_row";
  });
}

TEST(Mutants, TheCorrectReferenceIsNotCaught) {
  // Control: the unmutated reference passes everywhere (the mutant tests are not vacuous).
  for (const CaseData& c : rmsnorm_cases()) {
    const MutantRun run = gate_mutant(c, Mutant::none);
    EXPECT_NE(run.verdict, Verdict::fail) << run.worst_detail;
  }
}

// Mutant (c), y = dtype(w * dtype(x * r)): the Hugging Face LlamaRMSNorm cast order.
// Its extra rounding is at most half an ulp of x*r scaled by |w|, so its max-abs error
// stays below the threshold fudge * reference_error + rounding_floor (~1.5 ulp of the
// largest |y|) — the max-abs gate cannot see it. This test pins the measured facts
// behind README's explanation: on the committed bf16 cases the mutant's y error is
// larger than the reference's (it is a different, worse function) yet within the
// threshold. If this test starts failing because the mutant is caught, the gate got
// stricter: update README and turn this into an expect_caught test.
TEST(Mutants, CastBeforeWeightIsInvisibleToTheMaxAbsGateAsDocumented) {
  int measured = 0, worse = 0;
  double worst_ratio = 0;
  for (const CaseData& c : rmsnorm_cases()) {
    if (c.spec.dtype != DType::bf16 || c.spec.pattern != "normal" || c.spec.shape.back() < 256) continue;
    const auto out = rmsnorm::reference_variant(c.spec, c.inputs, Mutant::cast_before_weight);
    const GateResult r = evaluate_gate("y", c.spec, c.golden.at("y"), c.reference.at("y"), &out.at("y"));
    ++measured;
    worse += r.target_error > r.reference_error;
    worst_ratio = std::max(worst_ratio, r.target_error / r.threshold);
    std::cout << "[ mutant cast_before_weight ] " << c.spec.name << ": y target_error " << r.target_error
              << ", reference_error " << r.reference_error << ", threshold " << r.threshold << " -> "
              << verdict_name(r.verdict) << "\n";
    EXPECT_EQ(r.verdict, Verdict::pass) << "the gate now catches mutant (c): update README\n" << describe(r, c.spec);
  }
  ASSERT_GT(measured, 0);
  EXPECT_GT(worse, 0) << "the mutant should be measurably worse than the reference somewhere";
  std::cout << "[ mutant cast_before_weight ] largest target_error / threshold: " << worst_ratio << "\n";
}

}  // namespace
}  // namespace numgate
