// SwiGLU / GeGLU: the declared case lists and gate parameters. One numgate::Case
// per case (fixtures/include/numgate/op.h): dtype, shape, seed, then the input pattern
// where not "normal" (GeGLU: and the variant), why the case exists, committed or production.
// Gate: defaults (fudge 2.0, atol 0, max ref/golden 0.10) plus ulp_limit = 1 (elementwise:
// within 1 ULP of the correctly rounded golden everywhere), declared before any target runs.
// Kernel tile sizes (glu_kernels.cu): a unit is 16 bytes (8 bf16/fp16, 4 fp32 elements);
// a block of 256 threads handles one unit per thread (2048 bf16/fp16, 1024 fp32 elements:
// the 2047/2048/2049 and 1023/1024/1025 cases; the 4095/4096/4097 cases straddle two and
// three blocks). Committed shapes stay tiny (golden_data budget); the
// block-tile boundaries and the production shapes are generated into the build tree
// (production()).
#include "glu/glu_oracle.h"

namespace numgate::glu {
namespace {

using D = DType;

/// Elementwise: within 1 ULP of the correctly rounded golden at every element.
Case glu_case() { return Case().ulp_limit(1); }

}  // namespace

std::vector<CaseSpec> SwiGLUOp::cases() const {
  const Case c = glu_case();
  return {
      // committed: one small tensor per dtype with every adversarial value (pattern "mixed"),
      // odd row length so rows start at every 16-byte phase (partial units, scalar paths)
      c(D::fp32, {2, 67}, 1).pattern("mixed")
          .description("fp32: NaN/Inf/zeros, roots of silu', |a| to 150, overflow, normal").committed(),
      c(D::bf16, {2, 67}, 2).pattern("mixed")
          .description("bf16: NaN/Inf/zeros, roots of silu', |a| to 150, overflow, normal").committed(),
      c(D::fp16, {2, 67}, 3).pattern("mixed")
          .description("fp16: NaN/Inf/zeros, roots of silu', |a| to 150, y and da beyond fp16 max").committed(),
      // production set (generated into the build tree at test time): small shapes too, since
      // every committed case costs ~15-20 KB of HDF5 metadata
      c(D::fp32, {1, 1}, 11).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 12).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 13).description("smallest legal shape, fp16").production(),
      c(D::fp32, {1, 3}, 14).description("one below a 4-element fp32 unit").production(),
      c(D::fp32, {1, 5}, 15).description("one above a 4-element fp32 unit").production(),
      c(D::bf16, {1, 7}, 16).description("one below an 8-element bf16 unit").production(),
      c(D::bf16, {1, 8}, 17).description("one bf16 unit").production(),
      c(D::fp16, {1, 9}, 18).description("one above an 8-element fp16 unit").production(),
      c(D::bf16, {2, 3, 40}, 19).description("3-D input: leading dimensions flattened").production(),
      c(D::fp32, {1, 64}, 20).pattern("specials").description("NaN/Inf in a, b, dy; exact zeros; 0*inf").production(),
      c(D::bf16, {1, 64}, 21).pattern("specials").description("NaN/Inf in a, b, dy; exact zeros; 0*inf").production(),
      c(D::fp16, {1, 64}, 22).pattern("specials").description("NaN/Inf in a, b, dy; exact zeros; 0*inf").production(),
      c(D::fp32, {1, 256}, 23).pattern("large").description("|a| up to 150: saturation and underflow").production(),
      c(D::bf16, {1, 256}, 24).pattern("large").description("|a| up to 150: saturation and underflow").production(),
      c(D::fp16, {1, 256}, 25).pattern("large").description("|a| up to 150: saturation and underflow").production(),
      c(D::fp16, {1, 72}, 26).pattern("fp16_overflow").description("y and da near and beyond fp16 max").production(),
      c(D::fp32, {1, 32}, 27).pattern("near_root").description("a next to the root of silu' (1 + a(1-s) cancels)")
          .production(),
      c(D::bf16, {1, 32}, 28).pattern("near_root").description("a next to the root of silu'").production(),
      c(D::fp16, {1, 32}, 29).pattern("near_root").description("a next to the root of silu'").production(),
      c(D::bf16, {1, 4095}, 101).description("one below two 2048-element block tiles (bf16)").production(),
      c(D::bf16, {1, 4096}, 102).description("two 2048-element block tiles (bf16)").production(),
      c(D::bf16, {1, 4097}, 103).description("one above two 2048-element block tiles (bf16)").production(),
      c(D::fp32, {1, 2047}, 104).description("one below two 1024-element block tiles (fp32)").production(),
      c(D::fp32, {1, 2049}, 105).description("one above two 1024-element block tiles (fp32)").production(),
      c(D::fp16, {3, 4097}, 106).description("fp16, rows at varying 16-byte phase across block sweeps").production(),
      c(D::bf16, {1, 2047}, 109).description("one below a 2048-element block tile (bf16)").production(),
      c(D::bf16, {1, 2048}, 110).description("one 2048-element block tile (bf16)").production(),
      c(D::bf16, {1, 2049}, 111).description("one above a 2048-element block tile (bf16)").production(),
      c(D::fp32, {1, 1023}, 112).description("one below a 1024-element block tile (fp32)").production(),
      c(D::fp32, {1, 1025}, 113).description("one above a 1024-element block tile (fp32)").production(),
      c(D::fp16, {1, 64}, 30).pattern("db_overflow").description("value coverage: db near fp16 max").production(),
      c(D::bf16, {1, 1024, 12288}, 107).description("production: 1024 tokens, intermediate 12288").production(),
      c(D::bf16, {1, 512, 25600}, 108).description("production: 512 tokens, intermediate 25600").production(),
  };
}

std::vector<CaseSpec> GeGLUOp::cases() const {
  // approximate_tanh: 0 erf GELU, 1 tanh GELU; every case declares it, and its name says
  // which ("bf16_erf_1x9_seed15").
  const Case c = glu_case().required_param("approximate_tanh").name_parts(
      {param_part("approximate_tanh", [](double tanh) { return tanh < 0 ? "" : tanh != 0.0 ? "_tanh" : "_erf"; })},
      {pattern_unless_normal()});
  return {
      // committed: one small "mixed" tensor per dtype, the variants spread over the dtypes
      c(D::fp32, {2, 67}, 1).pattern("mixed").param("approximate_tanh", 0)
          .description("fp32 erf: NaN/Inf/zeros, roots of gelu', |a| to 150, |a| in [1,3]").committed(),
      c(D::bf16, {2, 67}, 2).pattern("mixed").param("approximate_tanh", 1)
          .description("bf16 tanh: NaN/Inf/zeros, roots of gelu', |a| to 150, |a| in [1,3]").committed(),
      c(D::fp16, {2, 67}, 3).pattern("mixed").param("approximate_tanh", 0)
          .description("fp16 erf: also y and da beyond fp16 max").committed(),
      // production set (build tree)
      c(D::fp32, {1, 1}, 11).param("approximate_tanh", 1).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 12).param("approximate_tanh", 0).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 13).param("approximate_tanh", 1).description("smallest legal shape, fp16").production(),
      c(D::fp32, {1, 3}, 14).param("approximate_tanh", 1).description("one below a 4-element fp32 unit").production(),
      c(D::bf16, {1, 9}, 15).param("approximate_tanh", 0).description("one above an 8-element bf16 unit").production(),
      c(D::fp16, {1, 7}, 16).param("approximate_tanh", 1).description("one below an 8-element fp16 unit").production(),
      c(D::fp32, {2, 67}, 17).pattern("mixed").param("approximate_tanh", 1)
          .description("fp32 tanh: every adversarial value").production(),
      c(D::bf16, {2, 67}, 18).pattern("mixed").param("approximate_tanh", 0)
          .description("bf16 erf: every adversarial value").production(),
      c(D::fp16, {2, 67}, 19).pattern("mixed").param("approximate_tanh", 1)
          .description("fp16 tanh: every adversarial value").production(),
      c(D::fp32, {1, 64}, 20).pattern("variant_gap").param("approximate_tanh", 0)
          .description("|a| in [1,3]: erf and tanh GELU differ").production(),
      c(D::fp32, {1, 64}, 20).pattern("variant_gap").param("approximate_tanh", 1)
          .description("|a| in [1,3]: erf and tanh GELU differ").production(),
      c(D::bf16, {1, 64}, 21).pattern("variant_gap_neg").param("approximate_tanh", 0)
          .description("a in [-3,-2.25]: variants up to 10% apart").production(),
      c(D::fp16, {1, 64}, 22).pattern("variant_gap_neg").param("approximate_tanh", 1)
          .description("a in [-3,-2.25]: variants up to 10% apart").production(),
      c(D::fp16, {1, 48}, 23).pattern("near_root").param("approximate_tanh", 0)
          .description("a next to the roots of gelu' (erf declared)").production(),
      c(D::fp16, {1, 48}, 24).pattern("near_root").param("approximate_tanh", 1)
          .description("a next to the roots of gelu' (tanh declared)").production(),
      c(D::bf16, {1, 256}, 25).pattern("large").param("approximate_tanh", 0).description("|a| up to 150").production(),
      c(D::fp16, {1, 256}, 26).pattern("large").param("approximate_tanh", 1).description("|a| up to 150").production(),
      c(D::bf16, {1, 4095}, 101).param("approximate_tanh", 0).description("one below two 2048-element block tiles (bf16)")
          .production(),
      c(D::bf16, {1, 4097}, 102).param("approximate_tanh", 1).description("one above two 2048-element block tiles (bf16)")
          .production(),
      c(D::fp32, {1, 2048}, 103).param("approximate_tanh", 0).description("two 1024-element block tiles (fp32)")
          .production(),
      c(D::fp16, {3, 4097}, 104).param("approximate_tanh", 1).description("fp16, rows at varying 16-byte phase (tanh)")
          .production(),
      c(D::bf16, {1, 2047}, 107).param("approximate_tanh", 0).description("one below a 2048-element block tile (bf16)")
          .production(),
      c(D::bf16, {1, 2049}, 108).param("approximate_tanh", 1).description("one above a 2048-element block tile (bf16)")
          .production(),
      c(D::fp32, {1, 1024}, 109).param("approximate_tanh", 0).description("one 1024-element block tile (fp32)")
          .production(),
      c(D::fp16, {1, 2048}, 110).param("approximate_tanh", 0).description("one 2048-element block tile (fp16, erf)")
          .production(),
      c(D::fp16, {1, 64}, 27).pattern("db_overflow").param("approximate_tanh", 1)
          .description("value coverage: db near fp16 max").production(),
      c(D::fp16, {1, 64}, 28).pattern("specials").param("approximate_tanh", 0)
          .description("value coverage: NaN/Inf in a, b, dy; exact zeros; 0*inf").production(),
      c(D::bf16, {1, 1024, 12288}, 105).param("approximate_tanh", 0)
          .description("production: 1024 tokens, intermediate 12288 (erf)").production(),
      c(D::bf16, {1, 512, 25600}, 106).param("approximate_tanh", 1)
          .description("production: 512 tokens, intermediate 25600 (tanh)").production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
std::vector<CoverageItem> SwiGLUOp::value_coverage() const {
  using P = ValueProperty;
  return {
      does_not_apply("y", P::exact_zero_row, "elementwise: a row is independent elements, each covered alone (exact_zero_column)"),
      covered("y", P::exact_zero_column, "fp16_1x64_specials_seed22"),
      covered("y", P::subnormal_result, "fp32_2x67_mixed_seed1"),
      does_not_apply("y", P::cancellation, "y = silu(a) b, a product: nothing cancels"),
      covered("y", P::near_overflow, "fp16_2x67_mixed_seed3"),
      does_not_apply("da", P::exact_zero_row, "elementwise: a row is independent elements, each covered alone (exact_zero_column)"),
      covered("da", P::exact_zero_column, "fp16_1x64_specials_seed22"),
      covered("da", P::subnormal_result, "fp32_2x67_mixed_seed1"),
      covered("da", P::cancellation, "fp32_2x67_mixed_seed1"),
      covered("da", P::near_overflow, "fp16_2x67_mixed_seed3"),
      does_not_apply("db", P::exact_zero_row, "elementwise: a row is independent elements, each covered alone (exact_zero_column)"),
      covered("db", P::exact_zero_column, "fp16_1x64_specials_seed22"),
      covered("db", P::subnormal_result, "fp32_2x67_mixed_seed1"),
      does_not_apply("db", P::cancellation, "a product (dy and the activation, or b): nothing cancels"),
      covered("db", P::near_overflow, "fp16_1x64_db_overflow_seed30"),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// cancellation: GELU's tails amplify the rounding of its argument (abs_terms include the activation's condition).
std::vector<CoverageItem> GeGLUOp::value_coverage() const {
  using P = ValueProperty;
  return {
      does_not_apply("y", P::exact_zero_row, "elementwise: a row is independent elements, each covered alone (exact_zero_column)"),
      covered("y", P::exact_zero_column, "fp16_erf_1x64_specials_seed28"),
      covered("y", P::subnormal_result, "fp16_erf_2x67_mixed_seed3"),
      does_not_apply("y", P::cancellation, "a product (b or dy times gelu(a)); GELU's tail conditioning exceeds 1e3 only where the value has underflowed"),
      covered("y", P::near_overflow, "fp16_erf_2x67_mixed_seed3"),
      does_not_apply("da", P::exact_zero_row, "elementwise: a row is independent elements, each covered alone (exact_zero_column)"),
      covered("da", P::exact_zero_column, "fp16_erf_1x64_specials_seed28"),
      covered("da", P::subnormal_result, "fp16_erf_2x67_mixed_seed3"),
      covered("da", P::cancellation, "fp32_erf_2x67_mixed_seed1"),
      covered("da", P::near_overflow, "fp16_erf_2x67_mixed_seed3"),
      does_not_apply("db", P::exact_zero_row, "elementwise: a row is independent elements, each covered alone (exact_zero_column)"),
      covered("db", P::exact_zero_column, "fp16_erf_1x64_specials_seed28"),
      covered("db", P::subnormal_result, "fp16_erf_2x67_mixed_seed3"),
      does_not_apply("db", P::cancellation, "a product (b or dy times gelu(a)); GELU's tail conditioning exceeds 1e3 only where the value has underflowed"),
      covered("db", P::near_overflow, "fp16_tanh_1x64_db_overflow_seed27"),
  };
}

}  // namespace numgate::glu
