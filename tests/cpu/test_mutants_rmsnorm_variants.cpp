// CPU mutants of the OffsetRMSNorm and fused residual-add + RMSNorm references, fed to
// the gate as if they were the target: each must be reported FAIL on the committed cases
// built to expose it; the unmutated references pass everywhere (control). Plus the
// adversarial facts those cases rely on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>

#include "mutant_testbed.h"
#include "fused_add_rmsnorm/fused_add_rmsnorm_oracle.h"
#include "numgate/gate.h"
#include "offset_rmsnorm/offset_rmsnorm_oracle.h"

namespace numgate {
namespace {

using Outputs = std::map<std::string, Tensor>;
using Variant = std::function<Outputs(const CaseData&)>;


// The committed cases of `op` (golden_data/), then its small generated cases (declared
// with production = true only to keep golden_data/ small), materialized here on the CPU
// exactly as the generator would write them. Cached per op.
struct OpCases {
  std::vector<CaseData> committed, generated, all;  ///< all: committed, then generated
};
const OpCases& op_cases(const std::string& op) {
  static std::map<std::string, OpCases> cache;
  auto it = cache.find(op);
  if (it != cache.end()) return it->second;
  OpCases oc;
  oc.committed = testing::committed_cases_of(op);
  oc.generated = testing::small_generated_cases_of(op, 100000);
  oc.all = oc.committed;
  oc.all.insert(oc.all.end(), oc.generated.begin(), oc.generated.end());
  return cache.emplace(op, std::move(oc)).first->second;
}
const std::vector<CaseData>& cases_of(const std::string& op) { return op_cases(op).all; }

void expect_caught(const std::string& op, const std::string& mutant, const Variant& variant,
                   const std::function<bool(const CaseData&)>& must_fail) {
  testing::expect_caught({mutant, variant, must_fail}, op_cases(op).committed, op_cases(op).generated);
}

Variant offset_variant(offset_rmsnorm::Mutant m) {
  return [m](const CaseData& c) { return offset_rmsnorm::reference_variant(c.spec, c.inputs, m); };
}
Variant fused_variant(fused_add_rmsnorm::Mutant m) {
  return [m](const CaseData& c) { return fused_add_rmsnorm::reference_variant(c.spec, c.inputs, m); };
}

// --- OffsetRMSNorm --------------------------------------------------------------------

TEST(OffsetRMSNormMutants, OnePlusWFormedInTheWeightDtypeIsCaught) {
  // The all-ones row with bf16 w = 3.140625 / 2^-8 (1 + w = 4.125 / 1.0 in bf16 instead of
  // 4.140625 / 1.00390625): dx is one bf16 ulp off where the reference is exact to ~1e-6.
  using M = offset_rmsnorm::Mutant;
  expect_caught("offset_rmsnorm", offset_rmsnorm::mutant_name(M::one_plus_w_in_weight_dtype),
                offset_variant(M::one_plus_w_in_weight_dtype),
                // (fp16 forms 1 + w exactly for these weights: not a must-fail case.)
                [](const CaseData& c) { return c.spec.pattern == "ones_offset" && c.spec.dtype == DType::bf16; });
}

TEST(OffsetRMSNormMutants, OffsetDroppedIsCaught) {
  using M = offset_rmsnorm::Mutant;
  expect_caught("offset_rmsnorm", offset_rmsnorm::mutant_name(M::offset_dropped), offset_variant(M::offset_dropped),
                [](const CaseData& c) { return c.spec.pattern == "normal" || c.spec.pattern == "ones_offset"; });
}

TEST(OffsetRMSNormAdversarial, OnesOffsetCaseHoldsTheIssuesWeights) {
  int found = 0;
  for (const CaseData& c : cases_of("offset_rmsnorm")) {
    if (c.spec.pattern != "ones_offset" || c.spec.dtype != DType::bf16) continue;
    ++found;
    const Tensor& w = c.inputs.at("w");
    for (std::size_t i = 0; i < c.inputs.at("x").numel(); ++i) ASSERT_EQ(c.inputs.at("x").get(i), 1.0);
    ASSERT_EQ(w.get(0), 3.140625);
    ASSERT_EQ(w.get(1), 0.00390625);
    // 1 + w in FP32 is exact; in bf16 it rounds (ties to even) to 4.125 and 1.0.
    EXPECT_EQ(1.0f + static_cast<float>(w.get(0)), 4.140625f);
    EXPECT_EQ(1.0f + static_cast<float>(w.get(1)), 1.00390625f);
    EXPECT_EQ(round_to_dtype(1.0 + w.get(0), DType::bf16), 4.125);
    EXPECT_EQ(round_to_dtype(1.0 + w.get(1), DType::bf16), 1.0);
  }
  EXPECT_GE(found, 1);
}

TEST(OffsetRMSNormAdversarial, ZeroRowGivesExactZeroAndFiniteGradient) {
  for (const CaseData& c : cases_of("offset_rmsnorm")) {
    if (c.spec.pattern != "zero_row") continue;
    const std::int64_t hidden = c.spec.shape.back(), zr = c.spec.shape[0] / 2;
    for (std::int64_t i = 0; i < hidden; ++i) {
      const std::size_t k = static_cast<std::size_t>(zr * hidden + i);
      ASSERT_EQ(c.reference.at("y").get(k), 0.0);
      ASSERT_EQ(c.golden.at("y").abs_terms.get(k), 0.0);  // exact 0 required of the target
      ASSERT_TRUE(std::isfinite(c.reference.at("dx").get(k)));
    }
    return;
  }
  FAIL() << "no zero_row case";
}

// --- fused residual-add + RMSNorm ----------------------------------------------------

TEST(FusedAddRMSNormMutants, VarianceFromTheRoundedResidualIsCaught) {
  // x << residual with every sum just below a rounding midpoint: dtype(h) is low by ~u in
  // every element, so the mutant's rstd (and y) is ~u too large, one ulp off an exact y.
  using M = fused_add_rmsnorm::Mutant;
  expect_caught("fused_add_rmsnorm", fused_add_rmsnorm::mutant_name(M::variance_from_rounded_residual),
                fused_variant(M::variance_from_rounded_residual),
                [](const CaseData& c) { return c.spec.pattern == "rounding_bias"; });
}

TEST(FusedAddRMSNormMutants, ResidualGradientDroppedIsCaught) {
  using M = fused_add_rmsnorm::Mutant;
  expect_caught("fused_add_rmsnorm", fused_add_rmsnorm::mutant_name(M::residual_grad_dropped),
                fused_variant(M::residual_grad_dropped), [](const CaseData& c) {
                  return c.spec.pattern == "normal" || c.spec.pattern == "rounding_bias";
                });
}

TEST(FusedAddRMSNormMutants, ResidualOutRoundedTowardZeroIsCaught) {
  // A wrong rounding mode for residual_out: within max-abs 2x the rounding floor (the
  // reference's error) almost everywhere, so only the declared 0-ULP rule for residual_out
  // catches it, on every case where some sum rounds away from zero under round-to-nearest:
  // all but the 1x1 cases, the rounding_bias ones (built so that every sum rounds toward
  // zero anyway), value_coverage (residual 0: every sum h = x is exact in the dtype) and
  // ill_conditioned (h = 1.5 x exact in the dtype by construction).
  using M = fused_add_rmsnorm::Mutant;
  expect_caught("fused_add_rmsnorm", fused_add_rmsnorm::mutant_name(M::residual_out_toward_zero),
                fused_variant(M::residual_out_toward_zero), [](const CaseData& c) {
                  return c.spec.pattern != "rounding_bias" && c.spec.pattern != "value_coverage" &&
                         c.spec.pattern != "ill_conditioned" && c.inputs.at("x").numel() > 1;
                });
}

TEST(FusedAddRMSNormOracles, ResidualOutIsTheCorrectlyRoundedSum) {
  // The FP64 golden sum is exact; the FP32 sum rounded once to the dtype (the reference,
  // and the kernel's contract) must be its correct rounding, bit for bit, in every case
  // (NaN where the golden is NaN, +-Inf where it overflows the dtype).
  int n = 0;
  for (const CaseData& c : cases_of("fused_add_rmsnorm")) {
    const Tensor& ref = c.reference.at("residual_out");
    const Tensor& gold = c.golden.at("residual_out").value;
    Tensor rounded(c.spec.dtype, gold.shape);
    for (std::size_t i = 0; i < gold.numel(); ++i) rounded.set(i, round_to_dtype(gold.get(i), c.spec.dtype));
    for (std::size_t i = 0; i < gold.numel(); ++i) {
      const double a = ref.get(i), b = rounded.get(i);
      ASSERT_TRUE((std::isnan(a) && std::isnan(b)) ||
                  std::memcmp(ref.bytes.data() + i * dtype_size(c.spec.dtype),
                              rounded.bytes.data() + i * dtype_size(c.spec.dtype), dtype_size(c.spec.dtype)) == 0)
          << c.spec.name << " element " << i << ": reference " << a << ", round_to_dtype(golden) " << b;
    }
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(FusedAddRMSNormAdversarial, OverflowingSumGivesInfResidualAndFiniteY) {
  int infs = 0;
  for (const CaseData& c : cases_of("fused_add_rmsnorm")) {
    if (c.spec.pattern != "overflow_sum") continue;
    const Tensor& ro = c.reference.at("residual_out");
    for (std::size_t i = 0; i < ro.numel(); ++i) {
      if (std::isinf(ro.get(i))) {
        ++infs;
        EXPECT_TRUE(std::isfinite(c.golden.at("residual_out").value.get(i)));  // finite sum, overflows fp16
        EXPECT_TRUE(std::isfinite(c.reference.at("y").get(i)));
      }
    }
  }
  EXPECT_GT(infs, 0);
}

TEST(FusedAddRMSNormAdversarial, ZeroRowGivesExactZeros) {
  for (const CaseData& c : cases_of("fused_add_rmsnorm")) {
    if (c.spec.pattern != "zero_row") continue;
    const std::int64_t hidden = c.spec.shape.back(), zr = c.spec.shape[0] / 2;
    for (std::int64_t i = 0; i < hidden; ++i) {
      const std::size_t k = static_cast<std::size_t>(zr * hidden + i);
      ASSERT_EQ(c.reference.at("residual_out").get(k), 0.0);
      ASSERT_EQ(c.reference.at("y").get(k), 0.0);
      ASSERT_EQ(c.golden.at("y").abs_terms.get(k), 0.0);
      ASSERT_TRUE(std::isfinite(c.reference.at("dx").get(k)));
    }
    return;
  }
  FAIL() << "no zero_row case";
}

}  // namespace
}  // namespace numgate
