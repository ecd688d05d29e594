// Fused residual-add + RMSNorm: the declared case list and gate parameters. One line per
// case: dtype, shape, seed, input pattern, why the case exists.
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

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, std::string why,
              bool production = false, double eps = kEps) {
  CaseSpec c = make_case(t, std::move(shape), seed, std::move(pattern), {{"eps", eps}}, std::move(why), production);
  c.gate.tensor_ulp_limits = {{"residual_out", 0}};
  return c;
}

}  // namespace

std::vector<CaseSpec> FusedAddRMSNormOp::cases() const {
  using D = DType;
  constexpr bool kCommitted = false, kGenerated = true;
  return {
      // Committed (golden_data/fused_add_rmsnorm.h5). Every committed case costs ~15-20 KB of
      // HDF5 structure whatever its size, and golden_data/ is nearly full, so only the
      // cases the mutant tests need are committed: the first catches the variance and
      // residual-gradient mutants, the second a wrong residual_out rounding mode.
      make(D::bf16, {3, 65}, 411, "rounding_bias", "x << residual, sums round down: variance from FP32 h; odd hidden",
           kCommitted),
      make(D::bf16, {2, 256}, 405, "normal", "bf16, hidden 256 = one warp of 16-byte units; committed: ordinary "
           "sums, half of which round away from zero (catches a wrong residual_out rounding mode)", kCommitted),
      // Generated into the build tree with the production set (small ones are also
      // materialized by tests/cpu/test_mutants_rmsnorm_variants.cpp on the CPU).
      make(D::fp32, {1, 1}, 401, "normal", "smallest legal shape, fp32", kGenerated),
      make(D::bf16, {1, 1}, 402, "normal", "smallest legal shape, bf16", kGenerated),
      make(D::fp16, {1, 1}, 403, "normal", "smallest legal shape, fp16", kGenerated),
      make(D::fp32, {2, 255}, 404, "normal", "fp32, hidden one below 256 (rows of varying 16-byte phase)", kGenerated),
      make(D::fp16, {2, 257}, 406, "normal", "fp16, hidden one above 256 (partial head/tail units)", kGenerated),
      make(D::bf16, {2, 3, 24}, 407, "normal", "3-D input, eps 1e-5: leading dimensions flattened", kGenerated, 1e-5),
      make(D::bf16, {3, 64}, 408, "zero_row", "residual = -x in one row: h = 0, outputs exactly 0, dx finite",
           kGenerated),
      make(D::bf16, {2, 64}, 409, "near_zero_variance", "x, residual ~1e-5: mean(h^2) << eps", kGenerated),
      make(D::bf16, {4, 32}, 410, "nonfinite", "NaN, +Inf, Inf - Inf in x / residual: same NaN/Inf positions",
           kGenerated),
      make(D::fp16, {3, 64}, 412, "rounding_bias", "every sum rounds down, fp16", kGenerated),
      make(D::fp16, {2, 64}, 413, "overflow_sum", "fp16 40000 + 30000: residual_out +-Inf, y finite", kGenerated),
      // Production shapes and the block-size boundaries (<= ~30M elements in all).
      make(D::bf16, {4, 512, 4096}, 451, "normal", "production: 4 x 512 tokens, hidden 4096", kGenerated),
      make(D::bf16, {1, 2048, 5120}, 452, "normal", "production: 2048 tokens, hidden 5120", kGenerated),
      make(D::bf16, {2, 4095}, 453, "normal", "one below 4096: rows of varying 16-byte phase", kGenerated),
      make(D::bf16, {2, 4096}, 454, "normal", "hidden 4096, fully aligned", kGenerated),
      make(D::bf16, {2, 4097}, 455, "normal", "one above 4096: partial head and tail units", kGenerated),
      make(D::fp16, {2, 3072}, 456, "normal", "fp16, last hidden of K = 1 forward (384 threads x 8)", kGenerated),
      make(D::fp16, {2, 3073}, 457, "normal", "fp16, first hidden of K = 2 forward", kGenerated),
      make(D::fp32, {2, 4096}, 458, "normal", "fp32 at 4096", kGenerated),
      make(D::fp32, {2, 20000}, 459, "normal", "fp32 row too long for the register cache (streaming kernels)",
           kGenerated),
      make(D::bf16, {2, 65536}, 460, "normal", "largest supported hidden (streaming forward and backward)", kGenerated),
      make(D::bf16, {4, 512, 4096}, 461, "rounding_bias", "production shape, every sum rounds down", kGenerated),
  };
}

}  // namespace numgate::fused_add_rmsnorm
