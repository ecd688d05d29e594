// LayerNorm: the declared case list and gate parameters. One numgate::Case
// per case (fixtures/include/numgate/op.h): dtype, shape, seed, then the input pattern
// where not "normal", why the case exists, committed or production.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs. eps = 1e-5 (torch.nn.LayerNorm's default). Production
// cases are generated into the build tree (never committed: golden_data/ is tight).
#include "layernorm/layernorm_oracle.h"

namespace numgate::layernorm {
namespace {

constexpr double kEps = 1e-5;

}  // namespace

std::vector<CaseSpec> LayerNormOp::cases() const {
  using D = DType;
  const Case c = Case().param("eps", kEps);
  return {
      // committed: two cases only (each committed case costs ~15-20 KB of HDF5 metadata whatever its
      // size, and golden_data/ is shared by every op under 8 MiB); they catch the two CPU mutants
      // and give the Misaligned / RowsIndependent replays an odd row length and an aligned one.
      c(D::bf16, {3, 17}, 5).pattern("mean1")
          .description("hidden 17 (rows at every 16-byte phase), mean 1: padded lanes must not count").committed(),
      c(D::fp32, {2, 256}, 12).pattern("constant_row")
          .description("a row of 1234.0 x 256: var 0, y = b exactly, no NaN").committed(),
      // production: generated into the build tree; the small ones (<= 70,000 elements) are also
      // checked on the CPU, in memory, by tests/cpu/test_mutants_layernorm.cpp
      c(D::fp32, {1, 1}, 1).description("smallest legal shape, fp32: var 0, y = b, dx = 0 exactly").production(),
      c(D::bf16, {1, 1}, 2).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 3).description("smallest legal shape, fp16").production(),
      c(D::fp32, {3, 17}, 4).pattern("mean1").description("hidden 17, fp32, mean 1").production(),
      c(D::fp16, {3, 17}, 6).pattern("mean1").description("hidden 17, fp16, mean 1").production(),
      c(D::fp32, {2, 129}, 7).pattern("mean1").description("fp32 one above a 32-unit warp (128), mean 1").production(),
      c(D::bf16, {2, 255}, 8).description("bf16 one below a 32-unit warp (256)").production(),
      c(D::bf16, {2, 256}, 9).description("bf16 at a 32-unit warp (256)").production(),
      c(D::bf16, {2, 257}, 10).pattern("mean1").description("bf16 one above a 32-unit warp (257), mean 1").production(),
      c(D::bf16, {2, 3, 40}, 11).pattern("mean1").description("3-D input: leading dimensions flattened into rows")
          .production(),
      c(D::bf16, {3, 64}, 13).pattern("zero_row").description("an all-zero row: y = b exactly, dx finite").production(),
      c(D::bf16, {2, 128}, 14).pattern("near_zero_variance").description("var ~1e-6 < eps: eps placement").production(),
      c(D::fp32, {2, 64}, 15).pattern("offset_near_zero_variance")
          .description("mean 10, var ~1e-6: E[x^2]-E[x]^2 cancels").production(),
      c(D::fp16, {2, 64}, 16).pattern("large").description("fp16 |x| up to ~48000: squares overflow fp16, not FP32")
          .production(),
      c(D::bf16, {2, 64}, 17).pattern("large").description("bf16 |x| up to ~6e15").production(),
      c(D::fp32, {4, 33}, 18).pattern("nonfinite")
          .description("NaN/+Inf/-Inf in x and NaN in dy: same positions as golden").production(),
      c(D::bf16, {4, 33}, 19).pattern("nonfinite").description("NaN/Inf, bf16").production(),
      c(D::bf16, {8, 1536}, 101).pattern("mean1").description("hidden 1536, mean 1").production(),
      c(D::fp16, {8, 1536}, 102).pattern("mean1").description("hidden 1536, fp16, mean 1").production(),
      c(D::bf16, {8, 4097}, 103).pattern("mean1").description("hidden 4097, mean 1: head and tail partial vectors")
          .production(),
      c(D::fp32, {8, 4097}, 104).pattern("mean1").description("hidden 4097, fp32, mean 1").production(),
      c(D::bf16, {4, 2047}, 105).description("bf16 one below 256 units (backward block of 256)").production(),
      c(D::bf16, {4, 2048}, 106).description("bf16 at 256 units").production(),
      c(D::bf16, {4, 2049}, 107).description("bf16 one above 256 units (K = 2)").production(),
      c(D::fp32, {4, 1025}, 108).pattern("mean1").description("fp32 one above 256 units, mean 1").production(),
      c(D::fp32, {2, 8192}, 109).description("fp32 8192: separate backward path (block > 256 threads)").production(),
      c(D::bf16, {2, 32761}, 110).pattern("mean1")
          .description("largest bf16 hidden for any alignment (4096 units, K = 4)").production(),
      // > 2^22 elements, so replayed aligned only: misaligned, hidden 32768 needs 4097 units
      // and the launchers refuse it (layernorm.cuh); 32761 above covers every alignment.
      c(D::bf16, {129, 32768}, 111).description("largest aligned bf16 hidden (4096 units), aligned only").production(),
      c(D::bf16, {70000, 64}, 112).description("more than 65,536 rows").production(),
      c(D::bf16, {4, 512, 4096}, 113).description("production: 4 x 512 tokens, hidden 4096").production(),
      c(D::fp16, {4, 512, 4096}, 114).description("production: 4 x 512 tokens, hidden 4096, fp16").production(),
      c(D::bf16, {1, 2048, 5120}, 115).description("production: 1 x 2048 tokens, hidden 5120").production(),
      c(D::fp32, {1, 512, 5120}, 116).description("production: 1 x 512 tokens, hidden 5120, fp32").production(),
      c(D::fp16, {8, 64}, 117).pattern("value_coverage")
          .description("value coverage: zero rows and columns, zero and huge scales, subnormal and near-overflow results").production(),
      c(D::fp32, {8, 1024}, 130).pattern("ill_conditioned")
          .description("w dy = a + b xhat: dx cancels to dy's rounding (gate not valid: SPEC §4's fallback)")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// value_coverage: RMSNorm's pattern (rmsnorm_oracle.h) with b = 0.
std::vector<CoverageItem> LayerNormOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("y", P::exact_zero_row, "fp16_8x64_value_coverage_seed117"),
      covered("y", P::exact_zero_column, "fp16_8x64_value_coverage_seed117"),
      covered("y", P::subnormal_result, "fp16_8x64_value_coverage_seed117"),
      covered("y", P::cancellation, "fp16_8x64_value_coverage_seed117"),
      covered("y", P::near_overflow, "fp16_8x64_value_coverage_seed117"),
      covered("dx", P::exact_zero_row, "fp16_8x64_value_coverage_seed117"),
      does_not_apply("dx", P::exact_zero_column, "dx_i = rstd ((g_i - mean g) - xhat_i c) depends on its row's sums: no column is zero by its terms unless whole rows are"),
      covered("dx", P::subnormal_result, "fp16_8x64_value_coverage_seed117"),
      covered("dx", P::cancellation, "fp16_8x64_value_coverage_seed117"),
      covered("dx", P::near_overflow, "fp16_8x64_value_coverage_seed117"),
      does_not_apply("dw", P::exact_zero_row, "a per-column reduction over rows has one row: its exact zeros are columns (exact_zero_column)"),
      covered("dw", P::exact_zero_column, "fp16_8x64_value_coverage_seed117"),
      covered("dw", P::subnormal_result, "fp16_8x64_value_coverage_seed117"),
      covered("dw", P::cancellation, "bf16_3x17_mean1_seed5"),
      covered("dw", P::near_overflow, "fp16_8x64_value_coverage_seed117"),
      does_not_apply("db", P::exact_zero_row, "a per-column reduction over rows has one row: its exact zeros are columns (exact_zero_column)"),
      covered("db", P::exact_zero_column, "fp16_8x64_value_coverage_seed117"),
      covered("db", P::subnormal_result, "fp16_8x64_value_coverage_seed117"),
      covered("db", P::cancellation, "bf16_8x1536_mean1_seed101"),
      covered("db", P::near_overflow, "fp16_8x64_value_coverage_seed117"),
      covered("w", P::zero_weight, "fp16_8x64_value_coverage_seed117"),
  };
}

}  // namespace numgate::layernorm
