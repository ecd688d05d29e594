// RMSNorm: the declared case list and gate parameters. One line per case:
//   dtype, shape, seed, input pattern, why the case exists.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared
// here before any target runs. Production cases are generated into the build tree.
#include "rmsnorm/rmsnorm_oracle.h"

namespace numgate::rmsnorm {
namespace {

constexpr double kEps = 1e-6;

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, std::string why,
              bool production = false) {
  return make_case(t, std::move(shape), seed, std::move(pattern), {{"eps", kEps}}, std::move(why), production);
}

}  // namespace

std::vector<CaseSpec> RMSNormOp::cases() const {
  using D = DType;
  return {
      make(D::fp32, {3, 255}, 1, "normal", "fp32, hidden one below a 256 block"),
      make(D::bf16, {3, 256}, 2, "normal", "hidden at a 256 block"),
      make(D::bf16, {3, 257}, 3, "normal", "hidden one above a 256 block (partial 16-byte vector)"),
      make(D::fp16, {3, 257}, 4, "normal", "fp16, hidden one above a 256 block"),
      make(D::bf16, {8, 6, 256}, 5, "normal", "3-D input: leading dimensions flattened into rows"),
      make(D::bf16, {8, 4095}, 6, "normal", "one below 4096: rows misaligned for 16-byte loads"),
      make(D::bf16, {8, 4096}, 7, "normal", "hidden 4096 (Qwen3-class), fully aligned"),
      make(D::bf16, {8, 4097}, 7, "normal", "one above 4096: head and tail partial vectors"),
      make(D::bf16, {8, 5120}, 8, "normal", "hidden 5120 (Qwen3-class)"),
      make(D::fp32, {1, 1}, 9, "normal", "smallest legal shape, fp32"),
      make(D::bf16, {1, 1}, 10, "normal", "smallest legal shape, bf16"),
      make(D::fp16, {1, 1}, 11, "normal", "smallest legal shape, fp16"),
      make(D::fp16, {7, 769}, 12, "normal", "odd hidden: every row must come out as if normalized alone"),
      make(D::bf16, {8, 5120}, 13, "near_zero_variance", "inputs ~1e-5: mean(x^2) << eps, catches eps placement"),
      make(D::bf16, {4, 1024}, 14, "zero_row", "an all-zero row: y exactly 0, dx finite, no NaN"),
      make(D::bf16, {2, 4096}, 15, "spiky", "one element 100, the rest 0, per row"),
      make(D::fp16, {2, 2048}, 16, "constant_300", "fp16 RMS 300: sum of squares overflows fp16, y ~ w"),
      make(D::fp32, {2, 4096}, 17, "normal", "fp32 at 4096 (4-wide vectors)"),
      make(D::fp16, {2, 4096}, 18, "normal", "fp16 at 4096"),
      make(D::bf16, {4, 512, 4096}, 101, "normal", "production: 4 x 512 tokens, hidden 4096", true),
      make(D::bf16, {1, 8192, 4096}, 102, "normal", "production: 1 x 8192 tokens, hidden 4096", true),
      // Large rows, kept out of git for size (generated into the build tree with the production set):
      make(D::bf16, {2, 65536}, 103, "normal", "largest supported hidden size", true),
      make(D::fp32, {2, 40000}, 104, "normal", "fp32 row too long for the register cache (streaming path)", true),
  };
}

}  // namespace numgate::rmsnorm
