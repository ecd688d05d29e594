// OffsetRMSNorm: the declared case list and gate parameters. One line per case:
//   dtype, shape, seed, input pattern, why the case exists.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs. Production cases are generated into the build tree.
// Seeds 301-399 (distinct from the other ops' seeds, so case names are unique across ops).
#include "offset_rmsnorm/offset_rmsnorm_oracle.h"

namespace numgate::offset_rmsnorm {
namespace {

constexpr double kEps = 1e-6;

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, std::string why,
              bool production = false, double eps = kEps) {
  return make_case(t, std::move(shape), seed, std::move(pattern), {{"eps", eps}}, std::move(why), production);
}

}  // namespace

std::vector<CaseSpec> OffsetRMSNormOp::cases() const {
  using D = DType;
  constexpr bool kCommitted = false, kGenerated = true;
  return {
      // Committed (golden_data/offset_rmsnorm.h5). Every committed case costs ~15-20 KB of
      // HDF5 structure whatever its size, and golden_data/ is nearly full, so only the
      // case the mutant tests need is committed; it catches both CPU mutants.
      make(D::bf16, {2, 17}, 311, "ones_offset", "x = 1, bf16 w = 3.140625 / 2^-8: 1 + w formed in FP32; odd hidden",
           kCommitted),
      // Generated into the build tree with the production set (small ones are also
      // materialized by tests/cpu/test_mutants_rmsnorm_variants.cpp on the CPU).
      make(D::fp32, {1, 1}, 301, "normal", "smallest legal shape, fp32", kGenerated),
      make(D::bf16, {1, 1}, 302, "normal", "smallest legal shape, bf16", kGenerated),
      make(D::fp16, {1, 1}, 303, "normal", "smallest legal shape, fp16", kGenerated),
      make(D::fp32, {3, 255}, 304, "normal", "fp32, hidden one below 256 (rows of varying 16-byte phase)", kGenerated),
      make(D::bf16, {3, 256}, 305, "normal", "bf16, hidden 256 = one warp of 16-byte units", kGenerated),
      make(D::fp16, {2, 257}, 306, "normal", "fp16, hidden one above 256 (partial head/tail units)", kGenerated),
      make(D::bf16, {2, 3, 40}, 307, "normal", "3-D input, eps 1e-5: leading dimensions flattened", kGenerated, 1e-5),
      make(D::bf16, {4, 64}, 308, "zero_row", "an all-zero row: y exactly 0, dx finite (its dy scaled by sqrt(eps))",
           kGenerated),
      make(D::bf16, {2, 128}, 309, "near_zero_variance", "inputs ~1e-5: mean(x^2) << eps", kGenerated),
      make(D::bf16, {4, 32}, 310, "nonfinite", "NaN, +Inf, -Inf in x: same NaN/Inf positions as golden", kGenerated),
      make(D::fp16, {2, 17}, 312, "ones_offset", "the all-ones row in fp16 (1 + w exact in fp16 too)", kGenerated),
      // Production shapes and the block-size boundaries (<= ~30M elements in all).
      make(D::bf16, {4, 512, 4096}, 351, "normal", "production: 4 x 512 tokens, hidden 4096", kGenerated),
      make(D::bf16, {1, 2048, 5120}, 352, "normal", "production: 2048 tokens, hidden 5120", kGenerated),
      make(D::bf16, {2, 4095}, 353, "normal", "one below 4096: rows of varying 16-byte phase", kGenerated),
      make(D::bf16, {2, 4096}, 354, "normal", "hidden 4096, fully aligned", kGenerated),
      make(D::bf16, {2, 4097}, 355, "normal", "one above 4096: partial head and tail units", kGenerated),
      make(D::fp16, {2, 3072}, 356, "normal", "fp16, last hidden of K = 1 forward (384 threads x 8)", kGenerated),
      make(D::fp16, {2, 3073}, 357, "normal", "fp16, first hidden of K = 2 forward", kGenerated),
      make(D::fp32, {2, 4096}, 358, "normal", "fp32 at 4096", kGenerated),
      make(D::fp32, {2, 40000}, 359, "normal", "fp32 row too long for the register cache (streaming kernels)",
           kGenerated),
      make(D::bf16, {2, 65536}, 360, "normal", "largest supported hidden (K = 8 forward, streaming backward)",
           kGenerated),
      make(D::bf16, {4, 512, 4096}, 361, "zero_row", "production shape with an all-zero row", kGenerated),
  };
}

}  // namespace numgate::offset_rmsnorm
