// SwiGLU / GeGLU: the declared case lists and gate parameters. One line per case:
//   dtype, shape, seed, input pattern, why the case exists (GeGLU: and the variant).
// Gate: defaults (fudge 2.0, atol 0, max ref/golden 0.10) plus ulp_limit = 1 (elementwise:
// within 1 ULP of the correctly rounded golden everywhere), declared before any target runs.
// Kernel tile sizes (glu_kernels.cu): a unit is 16 bytes (8 bf16/fp16, 4 fp32 elements);
// a block of 256 threads handles 2 units per thread per sweep (4096 bf16/fp16, 2048 fp32
// elements). Committed shapes stay tiny (golden_data budget); the block-tile boundaries
// and the production shapes are generated into the build tree (production = true).
#include "glu/glu_oracle.h"

namespace numgate::glu {
namespace {

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, std::string why,
              std::vector<std::pair<std::string, double>> params, bool production = false) {
  CaseSpec probe;
  probe.params = params;
  const double tanh = probe.param_or("approximate_tanh", -1);
  const std::string variant = tanh < 0 ? "" : tanh != 0.0 ? "_tanh" : "_erf";
  CaseSpec c = make_case(t, std::move(shape), seed, std::move(pattern), std::move(params), std::move(why), production,
                         variant);
  c.gate.ulp_limit = 1;
  return c;
}

using D = DType;

}  // namespace

std::vector<CaseSpec> SwiGLUOp::cases() const {
  auto m = [](DType t, std::vector<std::int64_t> s, std::uint64_t seed, std::string p, std::string why,
              bool prod = false) { return make(t, std::move(s), seed, std::move(p), std::move(why), {}, prod); };
  return {
      // committed: one small tensor per dtype with every adversarial value (pattern "mixed"),
      // odd row length so rows start at every 16-byte phase (partial units, scalar paths)
      m(D::fp32, {2, 67}, 1, "mixed", "fp32: NaN/Inf/zeros, roots of silu', |a| to 150, overflow, normal"),
      m(D::bf16, {2, 67}, 2, "mixed", "bf16: NaN/Inf/zeros, roots of silu', |a| to 150, overflow, normal"),
      m(D::fp16, {2, 67}, 3, "mixed", "fp16: NaN/Inf/zeros, roots of silu', |a| to 150, y and da beyond fp16 max"),
      // production set (generated into the build tree at test time): small shapes too, since
      // every committed case costs ~15-20 KB of HDF5 metadata
      m(D::fp32, {1, 1}, 11, "normal", "smallest legal shape, fp32", true),
      m(D::bf16, {1, 1}, 12, "normal", "smallest legal shape, bf16", true),
      m(D::fp16, {1, 1}, 13, "normal", "smallest legal shape, fp16", true),
      m(D::fp32, {1, 3}, 14, "normal", "one below a 4-element fp32 unit", true),
      m(D::fp32, {1, 5}, 15, "normal", "one above a 4-element fp32 unit", true),
      m(D::bf16, {1, 7}, 16, "normal", "one below an 8-element bf16 unit", true),
      m(D::bf16, {1, 8}, 17, "normal", "one bf16 unit", true),
      m(D::fp16, {1, 9}, 18, "normal", "one above an 8-element fp16 unit", true),
      m(D::bf16, {2, 3, 40}, 19, "normal", "3-D input: leading dimensions flattened", true),
      m(D::fp32, {1, 64}, 20, "specials", "NaN/Inf in a, b, dy; exact zeros; 0*inf", true),
      m(D::bf16, {1, 64}, 21, "specials", "NaN/Inf in a, b, dy; exact zeros; 0*inf", true),
      m(D::fp16, {1, 64}, 22, "specials", "NaN/Inf in a, b, dy; exact zeros; 0*inf", true),
      m(D::fp32, {1, 256}, 23, "large", "|a| up to 150: saturation and underflow", true),
      m(D::bf16, {1, 256}, 24, "large", "|a| up to 150: saturation and underflow", true),
      m(D::fp16, {1, 256}, 25, "large", "|a| up to 150: saturation and underflow", true),
      m(D::fp16, {1, 72}, 26, "fp16_overflow", "y and da near and beyond fp16 max", true),
      m(D::fp32, {1, 32}, 27, "near_root", "a next to the root of silu' (1 + a(1-s) cancels)", true),
      m(D::bf16, {1, 32}, 28, "near_root", "a next to the root of silu'", true),
      m(D::fp16, {1, 32}, 29, "near_root", "a next to the root of silu'", true),
      m(D::bf16, {1, 4095}, 101, "normal", "one below a 4096-element block sweep (bf16)", true),
      m(D::bf16, {1, 4096}, 102, "normal", "one 4096-element block sweep (bf16)", true),
      m(D::bf16, {1, 4097}, 103, "normal", "one above a 4096-element block sweep (bf16)", true),
      m(D::fp32, {1, 2047}, 104, "normal", "one below a 2048-element block sweep (fp32)", true),
      m(D::fp32, {1, 2049}, 105, "normal", "one above a 2048-element block sweep (fp32)", true),
      m(D::fp16, {3, 4097}, 106, "normal", "fp16, rows at varying 16-byte phase across block sweeps", true),
      m(D::bf16, {4, 512, 12288}, 107, "normal", "production: 4 x 512 tokens, intermediate 12288", true),
      m(D::bf16, {1, 512, 25600}, 108, "normal", "production: 512 tokens, intermediate 25600", true),
  };
}

std::vector<CaseSpec> GeGLUOp::cases() const {
  auto m = [](DType t, std::vector<std::int64_t> s, std::uint64_t seed, std::string p, std::string why, int tanh,
              bool prod = false) {
    return make(t, std::move(s), seed, std::move(p), std::move(why), {{"approximate_tanh", double(tanh)}}, prod);
  };
  return {
      // committed: one small "mixed" tensor per dtype, the variants spread over the dtypes
      m(D::fp32, {2, 67}, 1, "mixed", "fp32 erf: NaN/Inf/zeros, roots of gelu', |a| to 150, |a| in [1,3]", 0),
      m(D::bf16, {2, 67}, 2, "mixed", "bf16 tanh: NaN/Inf/zeros, roots of gelu', |a| to 150, |a| in [1,3]", 1),
      m(D::fp16, {2, 67}, 3, "mixed", "fp16 erf: also y and da beyond fp16 max", 0),
      // production set (build tree)
      m(D::fp32, {1, 1}, 11, "normal", "smallest legal shape, fp32", 1, true),
      m(D::bf16, {1, 1}, 12, "normal", "smallest legal shape, bf16", 0, true),
      m(D::fp16, {1, 1}, 13, "normal", "smallest legal shape, fp16", 1, true),
      m(D::fp32, {1, 3}, 14, "normal", "one below a 4-element fp32 unit", 1, true),
      m(D::bf16, {1, 9}, 15, "normal", "one above an 8-element bf16 unit", 0, true),
      m(D::fp16, {1, 7}, 16, "normal", "one below an 8-element fp16 unit", 1, true),
      m(D::fp32, {2, 67}, 17, "mixed", "fp32 tanh: every adversarial value", 1, true),
      m(D::bf16, {2, 67}, 18, "mixed", "bf16 erf: every adversarial value", 0, true),
      m(D::fp16, {2, 67}, 19, "mixed", "fp16 tanh: every adversarial value", 1, true),
      m(D::fp32, {1, 64}, 20, "variant_gap", "|a| in [1,3]: erf and tanh GELU differ", 0, true),
      m(D::fp32, {1, 64}, 20, "variant_gap", "|a| in [1,3]: erf and tanh GELU differ", 1, true),
      m(D::bf16, {1, 64}, 21, "variant_gap_neg", "a in [-3,-2.25]: variants up to 10% apart", 0, true),
      m(D::fp16, {1, 64}, 22, "variant_gap_neg", "a in [-3,-2.25]: variants up to 10% apart", 1, true),
      m(D::fp16, {1, 48}, 23, "near_root", "a next to the roots of gelu' (erf declared)", 0, true),
      m(D::fp16, {1, 48}, 24, "near_root", "a next to the roots of gelu' (tanh declared)", 1, true),
      m(D::bf16, {1, 256}, 25, "large", "|a| up to 150", 0, true),
      m(D::fp16, {1, 256}, 26, "large", "|a| up to 150", 1, true),
      m(D::bf16, {1, 4095}, 101, "normal", "one below a 4096-element block sweep (bf16)", 0, true),
      m(D::bf16, {1, 4097}, 102, "normal", "one above a 4096-element block sweep (bf16)", 1, true),
      m(D::fp32, {1, 2048}, 103, "normal", "one 2048-element block sweep (fp32)", 0, true),
      m(D::fp16, {3, 4097}, 104, "normal", "fp16, rows at varying 16-byte phase (tanh)", 1, true),
      m(D::bf16, {4, 512, 12288}, 105, "normal", "production: 4 x 512 tokens, intermediate 12288 (erf)", 0, true),
      m(D::bf16, {1, 512, 25600}, 106, "normal", "production: 512 tokens, intermediate 25600 (tanh)", 1, true),
  };
}

}  // namespace numgate::glu
