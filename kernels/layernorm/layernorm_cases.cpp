// LayerNorm: the declared case list and gate parameters. One line per case:
//   dtype, shape, seed, input pattern, why the case exists.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs. eps = 1e-5 (torch.nn.LayerNorm's default). Production
// cases are generated into the build tree (never committed: golden_data/ is tight).
#include "layernorm/layernorm_oracle.h"

namespace numgate::layernorm {
namespace {

constexpr double kEps = 1e-5;

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, std::string why,
              bool production = false) {
  return make_case(t, std::move(shape), seed, std::move(pattern), {{"eps", kEps}}, std::move(why), production);
}

}  // namespace

std::vector<CaseSpec> LayerNormOp::cases() const {
  using D = DType;
  return {
      // committed: two cases only (each committed case costs ~15-20 KB of HDF5 metadata whatever its
      // size, and golden_data/ is shared by every op under 8 MiB); they catch the two CPU mutants
      // and give the Misaligned / RowsIndependent replays an odd row length and an aligned one.
      make(D::bf16, {3, 17}, 5, "mean1", "hidden 17 (rows at every 16-byte phase), mean 1: padded lanes must not count"),
      make(D::fp32, {2, 256}, 12, "constant_row", "a row of 1234.0 x 256: var 0, y = b exactly, no NaN"),
      // production: generated into the build tree; the small ones (<= 70,000 elements) are also
      // checked on the CPU, in memory, by tests/cpu/test_mutants_layernorm.cpp
      make(D::fp32, {1, 1}, 1, "normal", "smallest legal shape, fp32: var 0, y = b, dx = 0 exactly", true),
      make(D::bf16, {1, 1}, 2, "normal", "smallest legal shape, bf16", true),
      make(D::fp16, {1, 1}, 3, "normal", "smallest legal shape, fp16", true),
      make(D::fp32, {3, 17}, 4, "mean1", "hidden 17, fp32, mean 1", true),
      make(D::fp16, {3, 17}, 6, "mean1", "hidden 17, fp16, mean 1", true),
      make(D::fp32, {2, 129}, 7, "mean1", "fp32 one above a 32-unit warp (128), mean 1", true),
      make(D::bf16, {2, 255}, 8, "normal", "bf16 one below a 32-unit warp (256)", true),
      make(D::bf16, {2, 256}, 9, "normal", "bf16 at a 32-unit warp (256)", true),
      make(D::bf16, {2, 257}, 10, "mean1", "bf16 one above a 32-unit warp (257), mean 1", true),
      make(D::bf16, {2, 3, 40}, 11, "mean1", "3-D input: leading dimensions flattened into rows", true),
      make(D::bf16, {3, 64}, 13, "zero_row", "an all-zero row: y = b exactly, dx finite", true),
      make(D::bf16, {2, 128}, 14, "near_zero_variance", "var ~1e-6 < eps: eps placement", true),
      make(D::fp32, {2, 64}, 15, "offset_near_zero_variance", "mean 10, var ~1e-6: E[x^2]-E[x]^2 cancels", true),
      make(D::fp16, {2, 64}, 16, "large", "fp16 |x| up to ~48000: squares overflow fp16, not FP32", true),
      make(D::bf16, {2, 64}, 17, "large", "bf16 |x| up to ~6e15", true),
      make(D::fp32, {4, 33}, 18, "nonfinite", "NaN/+Inf/-Inf in x and NaN in dy: same positions as golden", true),
      make(D::bf16, {4, 33}, 19, "nonfinite", "NaN/Inf, bf16", true),
      make(D::bf16, {8, 1536}, 101, "mean1", "hidden 1536, mean 1", true),
      make(D::fp16, {8, 1536}, 102, "mean1", "hidden 1536, fp16, mean 1", true),
      make(D::bf16, {8, 4097}, 103, "mean1", "hidden 4097, mean 1: head and tail partial vectors", true),
      make(D::fp32, {8, 4097}, 104, "mean1", "hidden 4097, fp32, mean 1", true),
      make(D::bf16, {4, 2047}, 105, "normal", "bf16 one below 256 units (backward block of 256)", true),
      make(D::bf16, {4, 2048}, 106, "normal", "bf16 at 256 units", true),
      make(D::bf16, {4, 2049}, 107, "normal", "bf16 one above 256 units (K = 2)", true),
      make(D::fp32, {4, 1025}, 108, "mean1", "fp32 one above 256 units, mean 1", true),
      make(D::fp32, {2, 8192}, 109, "normal", "fp32 8192: separate backward path (block > 256 threads)", true),
      make(D::bf16, {2, 32761}, 110, "mean1", "largest bf16 hidden for any alignment (4096 units, K = 4)", true),
      // > 2^22 elements, so replayed aligned only: misaligned, hidden 32768 needs 4097 units
      // and the launchers refuse it (layernorm.cuh); 32761 above covers every alignment.
      make(D::bf16, {129, 32768}, 111, "normal", "largest aligned bf16 hidden (4096 units), aligned only", true),
      make(D::bf16, {70000, 64}, 112, "normal", "more than 65,536 rows", true),
      make(D::bf16, {4, 512, 4096}, 113, "normal", "production: 4 x 512 tokens, hidden 4096", true),
      make(D::fp16, {4, 512, 4096}, 114, "normal", "production: 4 x 512 tokens, hidden 4096, fp16", true),
      make(D::bf16, {1, 2048, 5120}, 115, "normal", "production: 1 x 2048 tokens, hidden 5120", true),
      make(D::fp32, {1, 512, 5120}, 116, "normal", "production: 1 x 512 tokens, hidden 5120, fp32", true),
  };
}

}  // namespace numgate::layernorm
