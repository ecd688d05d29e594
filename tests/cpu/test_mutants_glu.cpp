// SwiGLU / GeGLU on the CPU: mutants of the reference fed to the gate as if they were the
// target (each must be reported FAIL on the committed cases built to expose it; the wrong
// GELU variant also on the generated variant-gap cases), the 1-ULP property of the
// reference against the correctly rounded golden and the reference-as-target control on
// committed and small generated cases (the counts at 0 / 1 / 2 / >2 ULP are printed), and
// checks of the near-root polynomials.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "mutant_testbed.h"
#include "glu/glu_math.h"
#include "glu/glu_oracle.h"
#include "numgate/gate.h"

namespace numgate {
namespace {

using glu::Mutant;

std::vector<CaseData> glu_cases(const std::string& op) { return testing::committed_cases_of(op); }

// The small generated (production = true) cases, materialized in memory: golden_data/ is
// too tight to commit them, and they are cheap on the CPU, so their oracles are checked
// here too, not only on a GPU machine.
constexpr std::size_t kInMemoryLimit = 100000;  // elements of a
std::vector<CaseData> small_generated_cases(const std::string& op) {
  return testing::small_generated_cases_of(op, kInMemoryLimit);
}

/// Committed cases, then the small generated ones.
std::vector<CaseData> all_small_cases(const std::string& op) {
  std::vector<CaseData> v = glu_cases(op);
  for (auto& c : small_generated_cases(op)) v.push_back(std::move(c));
  return v;
}

using testing::MutantRun;

MutantRun gate_mutant(const CaseData& c, Mutant m) {
  return testing::gate_outputs(c, glu::reference_variant(c.op, c.spec, c.inputs, m));
}

// Committed cases only (the wrong GELU variant is also checked on generated cases, below).
void expect_caught(const std::string& op, Mutant m, bool (*must_fail)(const CaseData&)) {
  testing::expect_caught(
      {glu::mutant_name(m), [m](const CaseData& c) { return glu::reference_variant(c.op, c.spec, c.inputs, m); },
       must_fail},
      glu_cases(op));
}

TEST(GluMutants, DsiluMissingFactorIsCaught) {
  // da = dy * b * s without (1 + a (1 - s)): wrong wherever |a| is not tiny.
  expect_caught("swiglu", Mutant::dsilu_missing_factor,
                [](const CaseData&) { return true; });
}

TEST(GluMutants, SigmoidInBf16IsCaught) {
  // A bf16 sigmoid is ~2^-9 relative off: beyond 1 ULP of fp32 and fp16 outputs, and,
  // for bf16 outputs, within 1 ULP but misrounding decidable elements (the
  // decidable-rounding rule, numgate/gate.h). It must FAIL on every case, committed or
  // generated, where it changes an output.
  auto outputs = [](const CaseData& c) { return glu::reference_variant(c.op, c.spec, c.inputs, Mutant::sigmoid_in_bf16); };
  auto changes = [outputs](const CaseData& c) {
    const auto out = outputs(c);
    for (const auto& t : c.output_names)
      if (testing::first_bit_difference(out.at(t), c.reference.at(t)) >= 0) return true;
    return false;
  };
  testing::expect_caught({glu::mutant_name(Mutant::sigmoid_in_bf16), outputs, changes}, glu_cases("swiglu"),
                         small_generated_cases("swiglu"));
  int bf16 = 0;
  for (const CaseData& c : glu_cases("swiglu"))
    if (c.spec.dtype == DType::bf16) {
      ++bf16;
      EXPECT_TRUE(changes(c)) << c.spec.name;
    }
  EXPECT_GT(bf16, 0);
}

TEST(GluMutants, WrongGeluVariantIsCaught) {
  // tanh GELU where erf is declared, and vice versa: every case with |a| in [1, 3]
  // (the committed "mixed" cases hold such elements).
  expect_caught("geglu", Mutant::wrong_gelu_variant, [](const CaseData& c) {
    return c.spec.pattern == "mixed" || c.spec.pattern == "variant_gap" || c.spec.pattern == "variant_gap_neg";
  });
}

TEST(GluMutants, WrongGeluVariantIsCaughtOnTheGeneratedVariantGapCases) {
  int seen = 0;
  for (const CaseData& c : small_generated_cases("geglu")) {
    if (c.spec.pattern != "variant_gap" && c.spec.pattern != "variant_gap_neg") continue;
    ++seen;
    const MutantRun run = gate_mutant(c, Mutant::wrong_gelu_variant);
    std::cout << "[ mutant wrong_gelu_variant ] (in memory) " << c.spec.name << ": " << verdict_name(run.verdict) << "\n";
    EXPECT_EQ(run.verdict, Verdict::fail) << run.worst_detail;
  }
  EXPECT_GE(seen, 4);
}

// The binary128-fitted polynomials agree with the direct formulas (long double) where
// those are accurate (away from the root), and the windows join continuously.
TEST(GluMath, RootPolynomialsMatchTheDirectFormulas) {
  using namespace glu::math;
  auto erf_direct = [](long double a) {
    return 0.5L * std::erfc(-a / std::sqrt(2.0L)) + a * std::exp(-0.5L * a * a) / std::sqrt(2.0L * M_PIl);
  };
  auto tanh_direct = [](long double a) {
    const long double k = std::sqrt(2.0L / M_PIl), u = k * (a + 0.044715L * a * a * a);
    const long double du = k * (1 + 3 * 0.044715L * a * a), t = std::tanh(u);
    return 0.5L * (1 + t) + 0.5L * a * (1 - t * t) * du;
  };
  for (int i = -1000; i <= 1000; ++i) {
    const double d = 0.125 * i / 1000.0;
    if (std::fabs(d) < 0.05) continue;  // direct long double formula too cancelling here
    const double ae = gelu_erf_root(0.0).hi + d, at = gelu_tanh_root(0.0).hi + d;
    EXPECT_NEAR(dgelu_erf(ae) / static_cast<double>(erf_direct(ae)), 1.0, 1e-13) << ae;
    EXPECT_NEAR(dgelu_tanh(at) / static_cast<double>(tanh_direct(at)), 1.0, 1e-13) << at;
    EXPECT_NEAR(dgelu_erf(static_cast<float>(ae)) / static_cast<double>(erf_direct(static_cast<float>(ae))), 1.0, 2e-6);
    EXPECT_NEAR(dgelu_tanh(static_cast<float>(at)) / static_cast<double>(tanh_direct(static_cast<float>(at))), 1.0,
                2e-6);
  }
  // silu': the expm1 form against the textbook formula away from its root
  for (double a : {-5.0, -2.0, -1.0, -0.5, -0.1, 0.0, 0.3, 2.0, 20.0}) {
    const long double s = 1.0L / (1.0L + std::exp(-static_cast<long double>(a)));
    EXPECT_NEAR(dsilu(a) / static_cast<double>(s * (1 + a * (1 - s))), 1.0, 1e-14) << a;
  }
  // limits
  const double inf = INFINITY;
  EXPECT_EQ(silu(inf), inf);
  EXPECT_EQ(silu(-inf), 0.0);
  EXPECT_TRUE(std::signbit(silu(-inf)));
  EXPECT_EQ(dsilu(inf), 1.0);
  EXPECT_EQ(dsilu(-inf), 0.0);
  EXPECT_EQ(gelu_erf(-inf), 0.0);
  EXPECT_EQ(gelu_tanh(inf), inf);
  EXPECT_EQ(dgelu_erf(inf), 1.0);
  EXPECT_EQ(dgelu_tanh(-inf), 0.0);
  EXPECT_EQ(dgelu_tanh(static_cast<float>(inf)), 1.0f);
  EXPECT_TRUE(std::isnan(dgelu_erf(NAN)) && std::isnan(silu(NAN)) && std::isnan(dsilu(NAN)) &&
              std::isnan(gelu_tanh(static_cast<float>(NAN))));
}

TEST(GluAdversarial, VariantGapCasesSeparateTheTwoGelus) {
  // On the cases that hold |a| in [1, 3] (committed "mixed", generated "variant_gap*") the
  // two golden formulas differ by far more than the rounding of y (so a kernel computing
  // the wrong variant cannot pass).
  int seen = 0;
  for (const CaseData& c : all_small_cases("geglu")) {
    if (c.spec.pattern != "mixed" && c.spec.pattern != "variant_gap" && c.spec.pattern != "variant_gap_neg") continue;
    ++seen;
    double max_rel = 0;
    for (std::size_t i = 0; i < c.inputs.at("a").numel(); ++i) {
      const double a = c.inputs.at("a").get(i);
      if (!(std::fabs(a) >= 1 && std::fabs(a) <= 3)) continue;
      const double e = glu::math::gelu_erf(a), t = glu::math::gelu_tanh(a);
      max_rel = std::max(max_rel, std::fabs(e - t) / std::fabs(e));
    }
    std::cout << "[ variant gap ] " << c.spec.name << ": max relative difference erf vs tanh GELU at |a| in [1,3] " << max_rel << "\n";
    EXPECT_GT(max_rel, 4 * dtype_unit_roundoff(c.spec.dtype)) << c.spec.name;
  }
  EXPECT_GT(seen, 0);
}

}  // namespace
}  // namespace numgate
