// CPU mutants of the LayerNorm reference, fed to the gate as if they were the target.
// Each deliberately reintroduces one source of discrepancy (SPEC §6); the gate must
// report FAIL on the committed cases built to expose it. Plus the adversarial facts the
// LayerNorm cases were added for (constant row, hidden 1, non-finite inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "mutant_testbed.h"
#include "layernorm/layernorm_oracle.h"
#include "numgate/gate.h"

namespace numgate {
namespace {

using layernorm::Mutant;


std::vector<CaseData> committed_layernorm_cases() { return testing::committed_cases_of("layernorm"); }

// The small generated cases (golden_data/ is too tight to commit them), materialized in
// memory: their oracles and mutants are checked here too, not only on a GPU machine.
constexpr std::size_t kInMemoryLimit = 70000;  // elements of x
std::vector<CaseData> small_production_cases() {
  return testing::small_generated_cases_of("layernorm", kInMemoryLimit);
}

void expect_caught(Mutant m, bool (*must_fail)(const CaseData&)) {
  testing::expect_caught({layernorm::mutant_name(m),
                          [m](const CaseData& c) { return layernorm::reference_variant(c.spec, c.inputs, m); },
                          must_fail},
                         committed_layernorm_cases(), small_production_cases());
}

TEST(LayerNormMutants, PaddedLanesInTheStatisticsAreCaught) {
  // Rows whose length is not a multiple of the 8-element padding, with mean 1: the zero
  // lanes pull the mean towards 0 (by mean * pad / padded length) and add mean^2 per lane to
  // the variance. Visible when the padding is a sizeable fraction of the row (hidden < 1000)
  // or in fp32; in bf16 at hidden 4097 the shift (7/4104 of the mean) is below an ulp.
  expect_caught(Mutant::padded_lanes, [](const CaseData& c) {
    const std::int64_t h = c.spec.shape.back();
    return c.spec.pattern == "mean1" && h % 8 != 0 && (h < 1000 || c.spec.dtype == DType::fp32);
  });
}

TEST(LayerNormMutants, OnePassVarianceIsCaught) {
  // E[x^2] - E[x]^2 in FP32 where the mean is large against the spread: the constant row
  // of 1234.0 (var 0) and mean 10 with var ~1e-6.
  expect_caught(Mutant::naive_variance, [](const CaseData& c) {
    return c.spec.pattern == "constant_row" || c.spec.pattern == "offset_near_zero_variance";
  });
}

// --- adversarial cases: the behaviour each was added for --------------------------------

// A declared case (committed or production), materialized in memory.
CaseData find_case(const std::string& pattern, DType t, std::int64_t hidden = -1) {
  const layernorm::LayerNormOp op;
  for (const CaseSpec& s : op.cases())
    if (s.pattern == pattern && s.dtype == t && (hidden < 0 || s.shape.back() == hidden)) return materialize(op, s);
  throw std::runtime_error("no layernorm case with pattern " + pattern);
}

TEST(LayerNormAdversarial, ConstantRowGivesExactlyTheBias) {
  const CaseData c = find_case("constant_row", DType::fp32);
  const std::int64_t hidden = c.spec.shape.back();
  ASSERT_EQ(hidden, 256);
  for (std::int64_t i = 0; i < hidden; ++i) {
    const auto k = static_cast<std::size_t>(i);
    ASSERT_EQ(c.inputs.at("x").get(k), 1234.0);
    const double b = c.inputs.at("b").get(k);
    ASSERT_EQ(c.golden.at("y").value.get(k), b) << "golden: var = 0 exactly, y = b";
    ASSERT_EQ(c.reference.at("y").get(k), b) << "reference: d = 0 exactly, y = b";
    // Terms x r w and -x/H r w cancel exactly; b remains: never an "exact zero" unless b = 0.
    ASSERT_GT(c.golden.at("y").abs_terms.get(k), 0.0);
    ASSERT_TRUE(std::isfinite(c.reference.at("dx").get(k)));
  }
  // The one-pass variance is wrong there by far more than eps (or NaN).
  const auto naive = layernorm::reference_variant(c.spec, c.inputs, Mutant::naive_variance);
  bool differs = false;
  for (std::int64_t i = 0; i < hidden; ++i)
    differs |= !(naive.at("dx").get(static_cast<std::size_t>(i)) == c.reference.at("dx").get(static_cast<std::size_t>(i)));
  EXPECT_TRUE(differs) << "E[x^2]-E[x]^2 should change rstd of the constant row";
}

TEST(LayerNormAdversarial, HiddenOneGivesBiasAndZeroGradient) {
  for (DType t : {DType::fp32, DType::bf16, DType::fp16}) {
    const CaseData c = find_case("normal", t, 1);
    ASSERT_EQ(c.golden.at("y").value.get(0), c.inputs.at("b").get(0));
    ASSERT_EQ(c.reference.at("y").get(0), c.inputs.at("b").get(0));
    ASSERT_EQ(c.golden.at("dx").value.get(0), 0.0);
    ASSERT_EQ(c.reference.at("dx").get(0), 0.0);
    ASSERT_EQ(c.golden.at("dw").value.get(0), 0.0);
    ASSERT_EQ(c.reference.at("db").get(0), c.inputs.at("dy").get(0));
  }
}

TEST(LayerNormAdversarial, NonFiniteInputsPoisonExactlyTheirRows) {
  for (DType t : {DType::fp32, DType::bf16}) {
    const CaseData c = find_case("nonfinite", t);
    const std::int64_t hidden = c.spec.shape.back(), rows = c.spec.shape[0];
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t i = 0; i < hidden; ++i) {
        const auto k = static_cast<std::size_t>(r * hidden + i);
        EXPECT_EQ(std::isnan(c.golden.at("y").value.get(k)), r < 3) << c.spec.name << " y " << r << "," << i;
        EXPECT_EQ(std::isnan(c.golden.at("dx").value.get(k)), r < 4) << c.spec.name << " dx " << r << "," << i;
      }
    }
    for (std::int64_t i = 0; i < hidden; ++i) {
      EXPECT_TRUE(std::isnan(c.golden.at("dw").value.get(static_cast<std::size_t>(i))));
      EXPECT_EQ(std::isnan(c.golden.at("db").value.get(static_cast<std::size_t>(i))), i == 9 % hidden);
    }
  }
}

}  // namespace
}  // namespace numgate
