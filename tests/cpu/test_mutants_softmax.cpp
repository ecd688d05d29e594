// CPU mutants of the softmax reference, fed to the gate as if they were the target.
// Each deliberately reintroduces one source of discrepancy (SPEC §6); the gate must
// report FAIL on the committed cases built to expose it. Plus the adversarial facts the
// softmax cases were added for (fully masked rows, one unmasked element, causal
// alignment, non-finite inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "mutant_testbed.h"
#include "numgate/gate.h"
#include "softmax/softmax_oracle.h"

namespace numgate {
namespace {

using softmax::Mutant;

std::vector<CaseData> committed_softmax_cases() { return testing::committed_cases_of("softmax"); }

constexpr std::size_t kInMemoryLimit = 70000;  // elements of x
std::vector<CaseData> small_production_cases() { return testing::small_generated_cases_of("softmax", kInMemoryLimit); }

int mask_mode(const CaseData& c) { return static_cast<int>(c.spec.param("mask_mode")); }
std::int64_t q_len(const CaseData& c) { return c.spec.shape.size() >= 2 ? c.spec.shape[c.spec.shape.size() - 2] : 1; }

void expect_caught(Mutant m, bool (*must_fail)(const CaseData&)) {
  testing::expect_caught({softmax::mutant_name(m),
                          [m](const CaseData& c) { return softmax::reference_variant(c.spec, c.inputs, m); },
                          must_fail},
                         committed_softmax_cases(), small_production_cases());
}

// Rows with no unmasked element: causal with q_len > k_len, or the additive pattern's query 0.
bool has_fully_masked_row(const CaseData& c) {
  return (mask_mode(c) == 1 && q_len(c) > c.spec.shape.back()) || (mask_mode(c) == 2 && q_len(c) >= 2);
}

TEST(SoftmaxMutants, FullyMaskedRowGivingNaNIsCaught) {
  expect_caught(Mutant::nan_fully_masked, has_fully_masked_row);
}

TEST(SoftmaxMutants, MaxNotSubtractedIsCaught) {
  // Scores whose scaled values overflow expf (> 88.7) or all underflow it (< -103).
  expect_caught(Mutant::no_max_subtraction,
                [](const CaseData& c) { return c.spec.pattern == "large" || c.spec.pattern == "very_negative"; });
}

TEST(SoftmaxMutants, ScaleAppliedAfterTheSoftmaxIsCaught) {
  // Every case whose rows are not all single-element or empty (there softmax is 1 or 0
  // whatever the scale, and scale * 1 = 0.125 is caught anyway; keep the rule simple).
  expect_caught(Mutant::scale_after_softmax, [](const CaseData& c) { return c.spec.shape.back() >= 5; });
}

TEST(SoftmaxMutants, TopLeftCausalAlignmentIsCaught) {
  // Top-left (j <= i) and bottom-right (j <= i + k_len - q_len) differ when q_len != k_len.
  expect_caught(Mutant::causal_top_left,
                [](const CaseData& c) { return mask_mode(c) == 1 && q_len(c) != c.spec.shape.back(); });
}

TEST(SoftmaxMutants, BackwardWithoutTheScaleIsCaught) {
  expect_caught(Mutant::dx_missing_scale, [](const CaseData& c) {
    return c.spec.pattern == "normal" && c.spec.shape.back() >= 5 && c.spec.param("scale") != 1.0;
  });
}

// --- adversarial cases: the behaviour each was added for --------------------------------

CaseData find_case(const std::string& name) {
  const softmax::SoftmaxOp op;
  for (const CaseSpec& s : op.cases())
    if (s.name == name) return materialize(op, s);
  throw std::runtime_error("no softmax case " + name);
}

// Row r of a tensor as doubles.
std::vector<double> row(const Tensor& t, std::int64_t r, std::int64_t k) {
  std::vector<double> v(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) v[j] = t.get(static_cast<std::size_t>(r * k + j));
  return v;
}

TEST(SoftmaxAdversarial, FullyMaskedRowsAreExactlyZeroAndSingleKeyRowsExactlyOne) {
  for (const std::string name : {"bf16_2x6x5_large_causal_seed1", "fp16_6x37_additive_seed3",
                                 "fp16_2x4x1_causal_seed14", "fp32_2x40x17_causal_seed17"}) {
    const CaseData c = find_case(name);
    const std::int64_t k = c.spec.shape.back(), q = q_len(c), rows = static_cast<std::int64_t>(c.inputs.at("x").numel()) / k;
    const int mode = mask_mode(c);
    int empty = 0, single = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = r % q;
      const bool is_empty = mode == 1 ? i + k - q < 0 : i == 0;
      const bool is_single = mode == 1 ? i + k - q == 0 : i == 1;
      for (const auto* t : {&c.golden.at("y").value, &c.reference.at("y"), &c.golden.at("dx").value, &c.reference.at("dx")}) {
        const auto v = row(*t, r, k);
        if (is_empty)
          for (double e : v) ASSERT_EQ(e, 0.0) << name << " row " << r << ": a fully masked row is exactly 0";
      }
      if (is_single) {
        const std::int64_t at = mode == 1 ? 0 : k / 2;
        ASSERT_EQ(c.golden.at("y").value.get(static_cast<std::size_t>(r * k + at)), 1.0) << name << " row " << r;
        ASSERT_EQ(c.reference.at("y").get(static_cast<std::size_t>(r * k + at)), 1.0) << name << " row " << r;
        ASSERT_EQ(c.golden.at("dx").value.get(static_cast<std::size_t>(r * k + at)), 0.0) << name << " row " << r;
      }
      empty += is_empty;
      single += is_single;
    }
    EXPECT_GT(empty, 0) << name;
    if (name != "fp32_2x40x17_causal_seed17") EXPECT_GT(single, 0) << name;
  }
}

TEST(SoftmaxAdversarial, CausalIsBottomRightAligned) {
  // q_len 4 < k_len 9: query i sees keys 0 .. i + 5 (the last query sees all 9).
  const CaseData c = find_case("fp32_2x4x9_causal_seed2");
  for (std::int64_t r = 0; r < 8; ++r) {
    const std::int64_t i = r % 4;
    for (std::int64_t j = 0; j < 9; ++j) {
      const double y = c.golden.at("y").value.get(static_cast<std::size_t>(r * 9 + j));
      EXPECT_EQ(y > 0, j <= i + 5) << "row " << r << " key " << j;
    }
  }
}

TEST(SoftmaxAdversarial, NonFiniteInputsPoisonExactlyTheirRows) {
  for (const std::string name : {"fp32_4x33_nonfinite_seed44", "bf16_4x33_nonfinite_seed45"}) {
    const CaseData c = find_case(name);
    for (std::int64_t r = 0; r < 4; ++r)
      for (std::int64_t j = 0; j < 33; ++j) {
        const auto k = static_cast<std::size_t>(r * 33 + j);
        EXPECT_EQ(std::isnan(c.golden.at("y").value.get(k)), r < 2) << name << " y " << r << "," << j;
        EXPECT_EQ(std::isnan(c.golden.at("dx").value.get(k)), r < 2 || r == 3) << name << " dx " << r << "," << j;
      }
    // row 2: the -Inf score gives exactly 0
    EXPECT_EQ(c.golden.at("y").value.get(2 * 33 + 7), 0.0);
  }
  // Under the additive mask, query 0 is fully masked: its NaN is never read.
  const CaseData c = find_case("fp16_4x33_nonfinite_additive_seed46");
  for (std::int64_t j = 0; j < 33; ++j) EXPECT_EQ(c.golden.at("y").value.get(static_cast<std::size_t>(j)), 0.0);
}

}  // namespace
}  // namespace numgate
