// Fused residual-add + RMSNorm: the declared case list and gate parameters. One
// numgate::Case per case (fixtures/include/numgate/op.h): dtype, shape, seed, then the
// input pattern and eps where not "normal" / 1e-6, why the case exists, committed or
// production.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs, plus a ULP rule of 0 for residual_out: it is an
// elementwise output whose contract is correct rounding of the sum (the reference meets
// it bitwise, a CPU test checks that), so max-abs alone would let a wrong rounding mode
// or a few-ULP error on small elements through. Production cases are
// generated into the build tree. Seeds 401-499 (case names unique across ops).
#include "fused_add_rmsnorm/fused_add_rmsnorm_oracle.h"

namespace numgate::fused_add_rmsnorm {
namespace {

constexpr double kEps = 1e-6;

}  // namespace

std::vector<CaseSpec> FusedAddRMSNormOp::cases() const {
  using D = DType;
  const Case c = Case().param("eps", kEps).tensor_ulp_limit("residual_out", 0);
  return {
      // Committed (golden_data/fused_add_rmsnorm.h5). Every committed case costs ~15-20 KB of
      // HDF5 structure whatever its size, and golden_data/ is nearly full, so only the
      // cases the mutant tests need are committed: the first catches the variance and
      // residual-gradient mutants, the second a wrong residual_out rounding mode.
      c(D::bf16, {3, 65}, 411).pattern("rounding_bias")
          .description("x << residual, sums round down: variance from FP32 h; odd hidden").committed(),
      c(D::bf16, {2, 256}, 405)
          .description("bf16, hidden 256 = one warp of 16-byte units; committed: ordinary "
                       "sums, half of which round away from zero (catches a wrong residual_out rounding mode)")
          .committed(),
      // Generated into the build tree with the production set (small ones are also
      // materialized by tests/cpu/test_mutants_rmsnorm_variants.cpp on the CPU).
      c(D::fp32, {1, 1}, 401).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 402).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 403).description("smallest legal shape, fp16").production(),
      c(D::fp32, {2, 255}, 404).description("fp32, hidden one below 256 (rows of varying 16-byte phase)").production(),
      c(D::fp16, {2, 257}, 406).description("fp16, hidden one above 256 (partial head/tail units)").production(),
      c(D::bf16, {2, 3, 24}, 407).param("eps", 1e-5).description("3-D input, eps 1e-5: leading dimensions flattened")
          .production(),
      c(D::bf16, {3, 64}, 408).pattern("zero_row")
          .description("residual = -x in one row: h = 0, outputs exactly 0, dx finite").production(),
      c(D::bf16, {2, 64}, 409).pattern("near_zero_variance").description("x, residual ~1e-5: mean(h^2) << eps")
          .production(),
      c(D::bf16, {4, 32}, 410).pattern("nonfinite")
          .description("NaN, +Inf, Inf - Inf in x / residual: same NaN/Inf positions").production(),
      c(D::fp16, {3, 64}, 412).pattern("rounding_bias").description("every sum rounds down, fp16").production(),
      c(D::fp16, {2, 64}, 413).pattern("overflow_sum").description("fp16 40000 + 30000: residual_out +-Inf, y finite")
          .production(),
      // Production shapes and the block-size boundaries (<= ~30M elements in all).
      c(D::bf16, {4, 512, 4096}, 451).description("production: 4 x 512 tokens, hidden 4096").production(),
      c(D::bf16, {1, 2048, 5120}, 452).description("production: 2048 tokens, hidden 5120").production(),
      c(D::bf16, {2, 4095}, 453).description("one below 4096: rows of varying 16-byte phase").production(),
      c(D::bf16, {2, 4096}, 454).description("hidden 4096, fully aligned").production(),
      c(D::bf16, {2, 4097}, 455).description("one above 4096: partial head and tail units").production(),
      c(D::fp16, {2, 3072}, 456).description("fp16 3072: 384 units, one per thread in the forward (RMS's last K = 1)").production(),
      c(D::fp16, {2, 3073}, 457).description("fp16 3073: 385 units (worst phase 386), still one per thread in the forward").production(),
      // The forward's blocks (preferred <= 1024 threads): K = 1 up to 1024 units, K = 2 up to
      // 2048, K = 4 up to 4096 (bf16 8192 / 16384 / 32768 elements, fp32 4096 / 8192 / 16384).
      c(D::bf16, {2, 8192}, 462).description("bf16 8192: the forward's last K = 1 (1024 threads), aligned kernel").production(),
      c(D::bf16, {2, 8193}, 463).description("bf16 8193: the forward's first K = 2, general kernel (odd hidden)").production(),
      c(D::bf16, {2, 16384}, 464).description("bf16 16384: the forward's last K = 2 (1024 threads), aligned kernel").production(),
      c(D::bf16, {2, 16392}, 465).description("bf16 16392: the forward's first K = 4 (513 threads), aligned kernel; w and residual preloaded").production(),
      c(D::fp32, {2, 16384}, 466).description("fp32 16384: the forward's last K = 4 (1024 threads), aligned kernel").production(),
      c(D::fp32, {2, 4096}, 458).description("fp32 at 4096").production(),
      c(D::fp32, {2, 20000}, 459).description("fp32 row too long for the register cache (streaming kernels)")
          .production(),
      c(D::bf16, {2, 65536}, 460).description("largest supported hidden (streaming forward and backward)").production(),
      c(D::bf16, {4, 512, 4096}, 461).pattern("rounding_bias").description("production shape, every sum rounds down")
          .production(),
      c(D::fp16, {8, 64}, 414).pattern("value_coverage")
          .description("value coverage: zero rows and columns, zero and huge scales, subnormal and near-overflow results").production(),
      c(D::fp32, {8, 1024}, 430).pattern("ill_conditioned")
          .description("w dy parallel to hhat, d_residual_out 0: dx cancels to dy's rounding (gate not valid: SPEC §4's fallback)")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// value_coverage: RMSNorm's pattern on h = x (residual 0) plus x = residual = 0.3 M at [7][7].
std::vector<CoverageItem> FusedAddRMSNormOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("residual_out", P::exact_zero_row, "fp16_8x64_value_coverage_seed414"),
      covered("residual_out", P::exact_zero_column, "fp16_8x64_value_coverage_seed414"),
      covered("residual_out", P::subnormal_result, "fp16_8x64_value_coverage_seed414"),
      covered("residual_out", P::cancellation, "fp16_2x3072_seed456"),
      covered("residual_out", P::near_overflow, "fp16_8x64_value_coverage_seed414"),
      covered("y", P::exact_zero_row, "fp16_8x64_value_coverage_seed414"),
      covered("y", P::exact_zero_column, "fp16_8x64_value_coverage_seed414"),
      covered("y", P::subnormal_result, "fp16_8x64_value_coverage_seed414"),
      does_not_apply("y", P::cancellation, "a product of factors (h rstd w): nothing cancels"),
      covered("y", P::near_overflow, "fp16_8x64_value_coverage_seed414"),
      covered("dx", P::exact_zero_row, "fp16_8x64_value_coverage_seed414"),
      covered("dx", P::exact_zero_column, "fp16_8x64_value_coverage_seed414"),
      covered("dx", P::subnormal_result, "fp16_8x64_value_coverage_seed414"),
      covered("dx", P::cancellation, "bf16_2x256_seed405"),
      covered("dx", P::near_overflow, "fp16_8x64_value_coverage_seed414"),
      does_not_apply("dw", P::exact_zero_row, "a per-column reduction over rows has one row: its exact zeros are columns (exact_zero_column)"),
      covered("dw", P::exact_zero_column, "fp16_8x64_value_coverage_seed414"),
      covered("dw", P::subnormal_result, "fp16_8x64_value_coverage_seed414"),
      covered("dw", P::cancellation, "bf16_2x256_seed405"),
      covered("dw", P::near_overflow, "fp16_8x64_value_coverage_seed414"),
      covered("w", P::zero_weight, "fp16_8x64_value_coverage_seed414"),
  };
}

}  // namespace numgate::fused_add_rmsnorm
