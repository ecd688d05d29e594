// CPU mutants of the RMSNorm reference, fed to the gate as if they were the target.
// Each deliberately reintroduces one source of discrepancy (SPEC §6); the gate must
// report FAIL on the cases built to expose it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "mutant_testbed.h"
#include "numgate/gate.h"
#include "rmsnorm/rmsnorm_oracle.h"

namespace numgate {
namespace {

using rmsnorm::Mutant;


std::vector<CaseData> rmsnorm_cases() { return testing::committed_cases_of("rmsnorm"); }

void expect_caught(Mutant m, bool (*must_fail)(const CaseData&)) {
  testing::expect_caught({rmsnorm::mutant_name(m),
                          [m](const CaseData& c) { return rmsnorm::reference_variant(c.spec, c.inputs, m); },
                          must_fail},
                         rmsnorm_cases());
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

// Mutant (c), y = dtype(w * dtype(x * r)): the Hugging Face LlamaRMSNorm cast order.
// Its extra rounding is at most half an ulp of x*r scaled by |w|, so its max-abs error
// stays below the threshold (~1.5 ulp of the largest |y|): the max-abs gate alone cannot
// see it. The decidable-rounding rule (numgate/gate.h) does: wherever every legitimate
// evaluation rounds y to one value, the double rounding gives the neighbour for about a
// quarter of the elements. Which elements are decidable depends on the envelope bound
// gamma_m(2^-24) |y|, m = 2 (hidden + 4): at hidden 4096 it is 4.9e-4 |y|, a quarter of
// bf16's smallest relative half-ulp (2^-9) and above fp16's (2^-11), so bf16 rows up to
// a few thousand elements are mostly decidable and fp16 rows of 4096 not at all (nor bf16
// rows of 65536: 7.8e-3 |y|). It must FAIL on every case where it changes an output and
// the bound leaves the bf16 elements decidable (hidden <= 8192), committed or generated,
// and it must change an output on every ordinary bf16 case.
TEST(Mutants, CastBeforeWeightIsCaughtByDecidableRounding) {
  auto outputs = [](const CaseData& c) {
    return rmsnorm::reference_variant(c.spec, c.inputs, Mutant::cast_before_weight);
  };
  auto changes = [outputs](const CaseData& c) {
    return testing::first_bit_difference(outputs(c).at("y"), c.reference.at("y")) >= 0;
  };
  auto decidable_enough = [](const CaseData& c) { return c.spec.dtype == DType::bf16 && c.spec.shape.back() <= 8192; };
  testing::expect_caught({rmsnorm::mutant_name(Mutant::cast_before_weight), outputs,
                          [=](const CaseData& c) { return decidable_enough(c) && changes(c); }},
                         rmsnorm_cases(), testing::small_generated_cases_of("rmsnorm", testing::kSmallGeneratedElements));
  int ordinary = 0;
  for (const CaseData& c : rmsnorm_cases())
    if (c.spec.dtype == DType::bf16 && c.spec.pattern == "normal" && c.spec.shape.back() >= 256) {
      ++ordinary;
      EXPECT_TRUE(changes(c)) << c.spec.name;
    }
  EXPECT_GT(ordinary, 0);
}

}  // namespace
}  // namespace numgate
