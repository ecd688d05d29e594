// OffsetRMSNorm: the declared case list and gate parameters. One numgate::Case
// per case (fixtures/include/numgate/op.h): dtype, shape, seed, then the input pattern
// and eps where not "normal" / 1e-6, why the case exists, committed or production.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs. Production cases are generated into the build tree.
// Seeds 301-399 (distinct from the other ops' seeds, so case names are unique across ops).
#include "offset_rmsnorm/offset_rmsnorm_oracle.h"

namespace numgate::offset_rmsnorm {
namespace {

constexpr double kEps = 1e-6;

}  // namespace

std::vector<CaseSpec> OffsetRMSNormOp::cases() const {
  using D = DType;
  const Case c = Case().param("eps", kEps);
  return {
      // Committed (golden_data/offset_rmsnorm.h5). Every committed case costs ~15-20 KB of
      // HDF5 structure whatever its size, and golden_data/ is nearly full, so only the
      // case the mutant tests need is committed; it catches both CPU mutants.
      c(D::bf16, {2, 17}, 311).pattern("ones_offset")
          .description("x = 1, bf16 w = 3.140625 / 2^-8: 1 + w formed in FP32; odd hidden").committed(),
      // Generated into the build tree with the production set (small ones are also
      // materialized by tests/cpu/test_mutants_rmsnorm_variants.cpp on the CPU).
      c(D::fp32, {1, 1}, 301).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 302).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 303).description("smallest legal shape, fp16").production(),
      c(D::fp32, {3, 255}, 304).description("fp32, hidden one below 256 (rows of varying 16-byte phase)").production(),
      c(D::bf16, {3, 256}, 305).description("bf16, hidden 256 = one warp of 16-byte units").production(),
      c(D::fp16, {2, 257}, 306).description("fp16, hidden one above 256 (partial head/tail units)").production(),
      c(D::bf16, {2, 3, 40}, 307).param("eps", 1e-5).description("3-D input, eps 1e-5: leading dimensions flattened")
          .production(),
      c(D::bf16, {4, 64}, 308).pattern("zero_row")
          .description("an all-zero row: y exactly 0, dx finite (its dy scaled by sqrt(eps))").production(),
      c(D::bf16, {2, 128}, 309).pattern("near_zero_variance").description("inputs ~1e-5: mean(x^2) << eps")
          .production(),
      c(D::bf16, {4, 32}, 310).pattern("nonfinite")
          .description("NaN, +Inf, -Inf in x: same NaN/Inf positions as golden").production(),
      c(D::fp16, {2, 17}, 312).pattern("ones_offset").description("the all-ones row in fp16 (1 + w exact in fp16 too)")
          .production(),
      // Production shapes and the block-size boundaries (<= ~30M elements in all).
      c(D::bf16, {4, 512, 4096}, 351).description("production: 4 x 512 tokens, hidden 4096").production(),
      c(D::bf16, {1, 2048, 5120}, 352).description("production: 2048 tokens, hidden 5120").production(),
      c(D::bf16, {2, 4095}, 353).description("one below 4096: rows of varying 16-byte phase").production(),
      c(D::bf16, {2, 4096}, 354).description("hidden 4096, fully aligned").production(),
      c(D::bf16, {2, 4097}, 355).description("one above 4096: partial head and tail units").production(),
      c(D::fp16, {2, 3072}, 356).description("fp16, last hidden of K = 1 forward (384 threads x 8)").production(),
      c(D::fp16, {2, 3073}, 357).description("fp16, first hidden of K = 2 forward").production(),
      c(D::fp32, {2, 4096}, 358).description("fp32 at 4096").production(),
      c(D::fp32, {2, 40000}, 359).description("fp32 row too long for the register cache (streaming kernels)")
          .production(),
      c(D::bf16, {2, 65536}, 360).description("largest supported hidden (K = 8 forward, streaming backward)")
          .production(),
      c(D::bf16, {4, 512, 4096}, 361).pattern("zero_row").description("production shape with an all-zero row")
          .production(),
      c(D::fp16, {8, 64}, 313).pattern("value_coverage")
          .description("value coverage: zero rows and columns, zero and huge scales, subnormal and near-overflow results").production(),
      c(D::fp32, {8, 1024}, 320).pattern("ill_conditioned")
          .description("(1 + w) dy parallel to xhat: dx cancels to dy's rounding (gate not valid: SPEC §4's fallback)")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// value_coverage (rmsnorm_oracle.h): w = -1 (scale 0) in column 2, w = 0 (scale 1) in column 6.
std::vector<CoverageItem> OffsetRMSNormOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("y", P::exact_zero_row, "fp16_8x64_value_coverage_seed313"),
      covered("y", P::exact_zero_column, "fp16_8x64_value_coverage_seed313"),
      covered("y", P::subnormal_result, "fp16_8x64_value_coverage_seed313"),
      does_not_apply("y", P::cancellation, "a product of factors (x rstd (1 + w)): nothing cancels"),
      covered("y", P::near_overflow, "fp16_8x64_value_coverage_seed313"),
      covered("dx", P::exact_zero_row, "fp16_8x64_value_coverage_seed313"),
      covered("dx", P::exact_zero_column, "fp16_8x64_value_coverage_seed313"),
      covered("dx", P::subnormal_result, "fp16_8x64_value_coverage_seed313"),
      covered("dx", P::cancellation, "fp32_1x1_seed301"),
      covered("dx", P::near_overflow, "fp16_8x64_value_coverage_seed313"),
      does_not_apply("dw", P::exact_zero_row, "a per-column reduction over rows has one row: its exact zeros are columns (exact_zero_column)"),
      covered("dw", P::exact_zero_column, "fp16_8x64_value_coverage_seed313"),
      covered("dw", P::subnormal_result, "fp16_8x64_value_coverage_seed313"),
      covered("dw", P::cancellation, "fp32_3x255_seed304"),
      covered("dw", P::near_overflow, "fp16_8x64_value_coverage_seed313"),
      covered("w", P::zero_weight, "fp16_8x64_value_coverage_seed313"),
  };
}

}  // namespace numgate::offset_rmsnorm
