// dropout_add: the declared case list and gate parameters. One numgate::Case per case
// (fixtures/include/numgate/op.h): dtype, shape, seed, then the input pattern where not
// "normal", the dropout parameters (p always; philox_seed, philox_offset where they differ
// from the defaults), why the case exists, committed or production.
//
// Gate parameters, declared before any target ran: the defaults (fudge 2.0, atol 0, max
// ref/golden 0.10) plus per-tensor ULP rules:
//   mask 0 and dresidual 0: the kept/dropped set and dy's copy must be the reference's
//     exactly (any mask difference FAILs, whatever the threshold says);
//   dx 1: one product dy * s, rounded in FP32 and then to the dtype (within 1 ULP of the
//     correctly rounded golden; fp32: correctly rounded);
//   y none: residual + x s cancels (a kernel within the declared FP32 policy can be many
//     ULP from the rounded golden there: the FP32 product's rounding, amplified); y is
//     gated by the error-ratio threshold and, where decidable, by decidable rounding.
// Kernel tiles (dropout_add_kernels.cu): an item is E = 8 (bf16 / fp16) or 4 (fp32, double)
// stream-consecutive elements, a block trip 256 threads x 2 items (4096 bf16 / fp16, 2048
// fp32 elements). Committed shapes stay tiny (golden_data budget); the boundaries and the
// production shapes are generated into the build tree (production()).
#include <cmath>
#include <string>

#include "dropout_add/dropout_add_oracle.h"
#include "dropout_add/dropout_stream.h"

namespace numgate::dropout_add {
namespace {

using D = DType;

constexpr double kSeed = 20240601;                  // default philox_seed
constexpr double kBigSeed = 4294967296.0 + 7;       // 2^32 + 7: the key's high word matters
constexpr double kBigOffset = 1099511627776.0 + 3;  // 2^40 + 3: the counter's high offset word matters

/// "_p10" for p = 0.10 (a whole percentage), else "_pt<threshold>" (e.g. the tie case).
std::string p_label(double p) {
  const double pct = p * 100.0;
  if (p >= 0 && p < 1 && std::fabs(pct - std::nearbyint(pct)) < 1e-9)
    return "_p" + std::to_string(static_cast<long long>(std::nearbyint(pct)));
  if (p >= 0 && p < 1) return "_pt" + std::to_string(dropout_threshold(p));
  return "_pinvalid";
}

/// The p whose threshold equals the draw of element `index` under (seed, offset): that
/// element sits exactly at the threshold (r == t), the one place where `keep iff r >= t`
/// and `r > t` differ (probability 2^-32 per element otherwise).
double tie_p(double seed, double offset, std::uint64_t index) {
  const std::uint32_t r = dropout_draw(index, static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(offset));
  return static_cast<double>(r) / 4294967296.0;  // exact: t = floor(p 2^32) = r
}

}  // namespace

std::vector<CaseSpec> DropoutAddOp::cases() const {
  const Case c = Case()
                     .required_param("p")
                     .param("philox_seed", kSeed)
                     .param("philox_offset", 0)
                     .tensor_ulp_limit("mask", 0)
                     .tensor_ulp_limit("dresidual", 0)
                     .tensor_ulp_limit("dx", 1)
                     .name_parts({}, {pattern_unless_normal(), param_part("p", p_label)});
  std::vector<CaseSpec> v = {
      // ---- committed (golden_data/): every dtype, every p of {0, 0.1, 0.5, 0.9}, the adversarial patterns
      c(D::bf16, {7, 33}, 1).param("p", 0.1).param("philox_seed", kBigSeed).param("philox_offset", kBigOffset)
          .description("philox_seed > 2^32 and philox_offset 2^40 + 3; rows of 33 (not a multiple of 4 or 8)").committed(),
      c(D::fp32, {3, 37}, 2).pattern("specials").param("p", 0.5)
          .description("NaN / +-Inf in x (dropped ones give residual exactly), Inf residuals, Inf - Inf, NaN dy").committed(),
      c(D::fp16, {4, 29}, 3).pattern("cancellation").param("p", 0.1)
          .description("residual = -round(x s) in odd columns: y cancels to the rounding of x s").committed(),
      c(D::bf16, {17, 13}, 4).param("p", 0.9)
          .description("odd hidden: rows start at every Philox lane and 16-byte phase (row-window element_offset)").committed(),
      c(D::fp32, {2, 45}, 5).pattern("zeros").param("p", 0.0)
          .description("p = 0 keeps everything; exact and signed zeros, a zero row and column").committed(),
      c(D::fp16, {3, 21}, 6).param("p", 0.5).param("philox_offset", 1).description("fp16, p 0.5, offset 1").committed(),
      c(D::bf16, {1, 64}, 7).param("p", tie_p(kSeed, 0, 5))
          .description("p = r_5 / 2^32: element 5 drawn exactly at the threshold (r == t is kept)").committed(),
      c(D::fp32, {3, 41}, 8).param("p", 0.9).param("philox_seed", kBigSeed).description("fp32, p 0.9, seed > 2^32")
          .committed(),
      c(D::fp32, {3, 43}, 9).param("p", 0.1).description("fp32, p 0.1 (s = RN_fp32(1/0.9) is no bf16 value)").committed(),
      c(D::fp16, {2, 31}, 10).param("p", 0.9).param("philox_offset", 7).description("fp16, p 0.9").committed(),
      c(D::bf16, {2, 39}, 11).param("p", 0.5).description("bf16, p 0.5").committed(),
  };
  // ---- production (generated into the build tree)
  // every dtype x every p on rows of 1001 (not a multiple of 4 or 8: items straddle rows)
  std::uint64_t seed = 101;
  for (D t : {D::fp32, D::bf16, D::fp16})
    for (double p : {0.0, 0.1, 0.5, 0.9})
      v.push_back(c(t, {3, 1001}, seed++).param("p", p).description("rows of 1001, every dtype and p").production());
  v.insert(v.end(), {
      c(D::fp32, {1, 1}, 120).param("p", 0.5).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 121).param("p", 0.1).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 122).param("p", 0.9).description("smallest legal shape, fp16").production(),
      c(D::fp32, {1, 3}, 123).param("p", 0.5).description("one below a 4-element fp32 item").production(),
      c(D::fp32, {1, 5}, 124).param("p", 0.5).description("one above a 4-element fp32 item").production(),
      c(D::bf16, {1, 7}, 125).param("p", 0.5).description("one below an 8-element bf16 item").production(),
      c(D::bf16, {1, 8}, 126).param("p", 0.5).description("one 8-element bf16 item").production(),
      c(D::fp16, {1, 9}, 127).param("p", 0.5).description("one above an 8-element fp16 item").production(),
      c(D::bf16, {7, 33}, 128).param("p", 0.5).description("7 x 33, bf16").production(),
      c(D::fp16, {7, 33}, 129).param("p", 0.9).description("7 x 33, fp16").production(),
      c(D::fp32, {7, 33}, 130).param("p", 0.1).description("7 x 33, fp32").production(),
      c(D::bf16, {1, 4095}, 131).param("p", 0.1).description("one below a 4096-element block trip (bf16)").production(),
      c(D::bf16, {1, 4096}, 132).param("p", 0.1).description("one 4096-element block trip (bf16)").production(),
      c(D::bf16, {1, 4097}, 133).param("p", 0.1).description("one above a 4096-element block trip (bf16)").production(),
      c(D::fp32, {1, 2047}, 134).param("p", 0.1).description("one below a 2048-element block trip (fp32)").production(),
      c(D::fp32, {1, 2049}, 135).param("p", 0.1).description("one above a 2048-element block trip (fp32)").production(),
      c(D::bf16, {2, 3, 40}, 136).param("p", 0.1).description("3-D input: leading dimensions flattened").production(),
      c(D::bf16, {2, 67}, 137).pattern("specials").param("p", 0.5).description("NaN / Inf, bf16").production(),
      c(D::fp16, {2, 67}, 138).pattern("specials").param("p", 0.1).description("NaN / Inf, fp16").production(),
      c(D::fp32, {2, 67}, 139).pattern("cancellation").param("p", 0.1).description("cancellation, fp32").production(),
      c(D::bf16, {2, 67}, 140).pattern("cancellation").param("p", 0.5).description("cancellation, bf16").production(),
      c(D::bf16, {3, 67}, 141).pattern("zeros").param("p", 0.5).description("exact zeros, bf16").production(),
      c(D::fp16, {3, 67}, 142).pattern("zeros").param("p", 0.9).description("exact zeros, fp16").production(),
      c(D::fp32, {5, 31}, 143).param("p", 0.5).param("philox_seed", kBigSeed).param("philox_offset", kBigOffset)
          .description("seed > 2^32 and offset 2^40 + 3, fp32").production(),
      c(D::fp16, {5, 31}, 144).param("p", 0.1).param("philox_seed", kBigSeed).param("philox_offset", kBigOffset)
          .description("seed > 2^32 and offset 2^40 + 3, fp16").production(),
      c(D::bf16, {4, 257}, 145).param("p", 0.99).description("p close to 1 (s = 100)").production(),
      c(D::fp16, {6, 16}, 146).pattern("value_coverage").param("p", 0.1)
          .description("value coverage: zero rows and columns, subnormal, cancelling and near-overflow results").production(),
      c(D::bf16, {4096, 512}, 147).param("p", 0.1)
          .description("production: the trainer's shape [16 x 256 tokens, hidden 512]").production(),
      c(D::bf16, {32768, 512}, 148).param("p", 0.1)
          .description("production: 2^24 elements for the benchmark (hidden 512)").production(),
  });
  return v;
}

// Value coverage (numgate/coverage.h): for every gated tensor, the case that covers each
// property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
std::vector<CoverageItem> DropoutAddOp::value_coverage() const {
  using P = ValueProperty;
  const char* vc = "fp16_6x16_value_coverage_p10_seed146";
  return {
      covered("y", P::exact_zero_row, vc),
      covered("y", P::exact_zero_column, vc),
      covered("y", P::subnormal_result, vc),
      covered("y", P::cancellation, "fp16_4x29_cancellation_p10_seed3"),
      covered("y", P::near_overflow, vc),
      covered("mask", P::exact_zero_row, "bf16_17x13_p90_seed4"),
      covered("mask", P::exact_zero_column, "bf16_17x13_p90_seed4"),
      does_not_apply("mask", P::subnormal_result, "the mask is 0 or 1"),
      does_not_apply("mask", P::cancellation, "the mask is m itself: one term"),
      does_not_apply("mask", P::near_overflow, "the mask is 0 or 1"),
      covered("dx", P::exact_zero_row, vc),
      covered("dx", P::exact_zero_column, vc),
      covered("dx", P::subnormal_result, vc),
      does_not_apply("dx", P::cancellation, "dx = m dy s, a product: nothing cancels"),
      covered("dx", P::near_overflow, vc),
      covered("dresidual", P::exact_zero_row, vc),
      covered("dresidual", P::exact_zero_column, vc),
      covered("dresidual", P::subnormal_result, vc),
      does_not_apply("dresidual", P::cancellation, "dresidual = dy, a copy: nothing cancels"),
      covered("dresidual", P::near_overflow, vc),
  };
}

}  // namespace numgate::dropout_add
