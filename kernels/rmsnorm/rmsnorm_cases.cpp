// RMSNorm: the declared case list and gate parameters. One numgate::Case
// per case (fixtures/include/numgate/op.h): dtype, shape, seed, then the input pattern
// where not "normal", why the case exists, committed or production.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs. Production cases are generated into the build tree.
#include "rmsnorm/rmsnorm_oracle.h"

namespace numgate::rmsnorm {
namespace {

constexpr double kEps = 1e-6;

}  // namespace

std::vector<CaseSpec> RMSNormOp::cases() const {
  using D = DType;
  const Case c = Case().param("eps", kEps);
  return {
      c(D::fp32, {3, 255}, 1).description("fp32, hidden one below a 256 block").committed(),
      c(D::bf16, {3, 256}, 2).description("hidden at a 256 block").committed(),
      c(D::bf16, {3, 257}, 3).description("hidden one above a 256 block (partial 16-byte vector)").committed(),
      c(D::fp16, {3, 257}, 4).description("fp16, hidden one above a 256 block").committed(),
      c(D::bf16, {8, 6, 256}, 5).description("3-D input: leading dimensions flattened into rows").committed(),
      c(D::bf16, {8, 4095}, 6).description("one below 4096: rows misaligned for 16-byte loads").committed(),
      c(D::bf16, {8, 4096}, 7).description("hidden 4096 (Qwen3-class), fully aligned").committed(),
      c(D::bf16, {8, 4097}, 7).description("one above 4096: head and tail partial vectors").committed(),
      c(D::bf16, {8, 5120}, 8).description("hidden 5120 (Qwen3-class)").committed(),
      c(D::fp32, {1, 1}, 9).description("smallest legal shape, fp32").committed(),
      c(D::bf16, {1, 1}, 10).description("smallest legal shape, bf16").committed(),
      c(D::fp16, {1, 1}, 11).description("smallest legal shape, fp16").committed(),
      c(D::fp16, {7, 769}, 12).description("odd hidden: every row must come out as if normalized alone").committed(),
      c(D::bf16, {8, 5120}, 13).pattern("near_zero_variance")
          .description("inputs ~1e-5: mean(x^2) << eps, catches eps placement").committed(),
      c(D::bf16, {4, 1024}, 14).pattern("zero_row").description("an all-zero row: y exactly 0, dx finite, no NaN")
          .committed(),
      c(D::bf16, {2, 4096}, 15).pattern("spiky").description("one element 100, the rest 0, per row").committed(),
      c(D::fp16, {2, 2048}, 16).pattern("constant_300")
          .description("fp16 RMS 300: sum of squares overflows fp16, y ~ w").committed(),
      c(D::fp32, {2, 4096}, 17).description("fp32 at 4096 (4-wide vectors)").committed(),
      c(D::fp16, {2, 4096}, 18).description("fp16 at 4096").committed(),
      c(D::bf16, {4, 512, 4096}, 101).description("production: 4 x 512 tokens, hidden 4096").production(),
      c(D::bf16, {1, 8192, 4096}, 102).description("production: 1 x 8192 tokens, hidden 4096").production(),
      // Large rows, kept out of git for size (generated into the build tree with the production set):
      c(D::bf16, {2, 65536}, 103).description("largest supported hidden size").production(),
      c(D::fp32, {2, 40000}, 104).description("fp32 row too long for the register cache (streaming path)").production(),
      c(D::fp16, {8, 64}, 19).pattern("value_coverage")
          .description("value coverage: zero rows and columns, zero and huge scales, subnormal and near-overflow results").production(),
      c(D::fp32, {8, 1024}, 20).pattern("ill_conditioned")
          .description("w dy parallel to xhat: dx cancels to dy's rounding (gate not valid: SPEC §4's fallback)")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// value_coverage (rmsnorm_oracle.h) builds every zero, subnormal and near-overflow item in one fp16 case.
std::vector<CoverageItem> RMSNormOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("y", P::exact_zero_row, "fp16_8x64_value_coverage_seed19"),
      covered("y", P::exact_zero_column, "fp16_8x64_value_coverage_seed19"),
      covered("y", P::subnormal_result, "fp16_8x64_value_coverage_seed19"),
      does_not_apply("y", P::cancellation, "a product of factors (x rstd w): nothing cancels"),
      covered("y", P::near_overflow, "fp16_8x64_value_coverage_seed19"),
      covered("dx", P::exact_zero_row, "fp16_8x64_value_coverage_seed19"),
      covered("dx", P::exact_zero_column, "fp16_8x64_value_coverage_seed19"),
      covered("dx", P::subnormal_result, "fp16_8x64_value_coverage_seed19"),
      covered("dx", P::cancellation, "fp32_3x255_seed1"),
      covered("dx", P::near_overflow, "fp16_8x64_value_coverage_seed19"),
      does_not_apply("dw", P::exact_zero_row, "a per-column reduction over rows has one row: its exact zeros are columns (exact_zero_column)"),
      covered("dw", P::exact_zero_column, "fp16_8x64_value_coverage_seed19"),
      covered("dw", P::subnormal_result, "fp16_8x64_value_coverage_seed19"),
      covered("dw", P::cancellation, "bf16_8x4095_seed6"),
      covered("dw", P::near_overflow, "fp16_8x64_value_coverage_seed19"),
      covered("w", P::zero_weight, "fp16_8x64_value_coverage_seed19"),
  };
}

}  // namespace numgate::rmsnorm
