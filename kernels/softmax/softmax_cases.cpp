// Softmax: the declared case list and gate parameters. One numgate::Case
// per case (fixtures/include/numgate/op.h): dtype, shape [..., q_len, k_len], seed, then
// the input pattern where not "normal", scale, mask mode where not none, why, committed or
// production.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared here
// before any target runs. Production cases are generated into the build tree (never
// committed: golden_data/ is tight); those of at most 70,000 elements are also checked on
// the CPU, in memory, by tests/cpu/test_mutants_softmax.cpp.
//
// Block and tile sizes of the kernels (softmax_kernels.cu): a 16-byte unit holds kVec
// elements (fp32 4, bf16/fp16 8); a warp covers 32 units (fp32 128, bf16/fp16 256 elements).
// Both passes pick a register-cached kernel of 1, 2, 4 or 8 units per thread by the units a
// row spans: exact from k_len and the row's 16-byte phase when a row is a whole number of
// 16-byte units, else sized for the worst phase, (k_len + 2 (kVec - 1)) / kVec units (so
// bf16 1023 and 1025 both take 129 units; the misaligned replay adds a unit to an exact
// row: 1024 bf16 aligned 128, misaligned 129).
//   forward: 256 threads (rows of at most 32 / 64 / 128 units: a block of that many
//     threads, bitwise the same results; not separate boundaries of these cases, checked by
//     SoftmaxBlockWidth in tests/gpu/test_aligned_paths.cpp); cached rows up to 256, 512,
//     1024, 2048 units (bf16/fp16 2048,
//     4096, 8192, 16384 elements; fp32 1024, 2048, 4096, 8192), longer rows streamed.
//   backward: 128 threads (rows of at most 32 / 64 units: 32 / 64 threads, as above); cached rows up to 128, 256, 512, 1024 units (bf16/fp16 1024,
//     2048, 4096, 8192 elements; fp32 512, 1024, 2048, 4096), longer rows by the two-sweep
//     256-thread kernel.
// Sizes one below, at and one above each boundary of either pass are declared below for
// bf16 and fp32 (fp16 shares bf16's instantiation shape; it has 2047/2049, 12000, 16385),
// plus rows of 32K and of 65,536 (the limit).
#include "softmax/softmax_oracle.h"

namespace numgate::softmax {
namespace {

constexpr double kScale = 0.125;                 // 1 / sqrt(64)
constexpr double kScale128 = 0.08838834764831845;  // 1 / sqrt(128) (rounded to FP32 by the reference and kernel)
enum Mode { none = 0, causal = 1, additive = 2 };

/// scale has no default (every case states it); mask_mode is none unless a case sets it,
/// and the name says which mask ("bf16_2x6x5_large_causal_seed1").
Case softmax_case() {
  return Case()
      .required_param("scale")
      .param("mask_mode", none)
      .name_parts({}, {pattern_unless_normal(), param_part("mask_mode", [](double mode) {
                         return mode == causal ? "_causal" : mode == additive ? "_additive" : "";
                       })});
}

}  // namespace

std::vector<CaseSpec> SoftmaxOp::cases() const {
  using D = DType;
  const Case c = softmax_case();
  return {
      // committed: three small cases (each costs ~15-20 KB of HDF5 metadata, golden_data/ is
      // shared by every op under 8 MiB); together they catch every CPU mutant.
      c(D::bf16, {2, 6, 5}, 1).pattern("large").param("scale", kScale).param("mask_mode", causal)
          .description("q_len 6 > k_len 5 causal: queries 0 fully masked (y = dx = 0), scores up to ~6e30").committed(),
      c(D::fp32, {2, 4, 9}, 2).param("scale", kScale).param("mask_mode", causal)
          .description("q_len 4 < k_len 9 causal: bottom-right alignment (query i sees keys <= i + 5)").committed(),
      c(D::fp16, {6, 37}, 3).param("scale", kScale).param("mask_mode", additive)
          .description("additive mask of 0, biases, -inf and -65504: query 0 fully masked, query 1 one key (y = 1)")
          .committed(),
      // smallest legal shape (a single element: y = 1, dx = 0 exactly)
      c(D::fp32, {1, 1}, 10).param("scale", kScale).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 11).param("scale", kScale).description("smallest legal shape, bf16").production(),
      c(D::fp16, {1, 1}, 12).param("scale", kScale).description("smallest legal shape, fp16").production(),
      // causal rows of length 1 (k_len 1): q_len 1 sees its key; q_len 4 > 1: queries 0-2 empty
      c(D::bf16, {3, 1, 1}, 13).param("scale", kScale).param("mask_mode", causal)
          .description("causal, k_len 1, q_len 1: y = 1").production(),
      c(D::fp16, {2, 4, 1}, 14).param("scale", kScale).param("mask_mode", causal)
          .description("causal, k_len 1, q_len 4: 3 empty rows, then y = 1").production(),
      // alignment: q_len < k_len, q_len = k_len, q_len > k_len
      c(D::bf16, {2, 3, 8, 40}, 15).param("scale", kScale128).param("mask_mode", causal)
          .description("causal q_len 8 < k_len 40 (decode-like)").production(),
      c(D::fp16, {1, 2, 33, 33}, 16).param("scale", kScale128).param("mask_mode", causal)
          .description("causal q_len = k_len = 33").production(),
      c(D::fp32, {2, 40, 17}, 17).param("scale", kScale).param("mask_mode", causal)
          .description("causal q_len 40 > k_len 17: 23 empty rows per head").production(),
      c(D::bf16, {2, 9, 130}, 18).param("scale", kScale).param("mask_mode", additive)
          .description("additive mask, bf16, 130 keys").production(),
      c(D::fp32, {4, 257}, 19).param("scale", kScale128).param("mask_mode", additive)
          .description("additive mask, fp32, 257 keys").production(),
      // unit / warp / block boundaries
      c(D::fp32, {3, 127}, 20).param("scale", kScale).description("fp32 one below a warp of units (128)").production(),
      c(D::fp32, {3, 128}, 21).param("scale", kScale).description("fp32 at a warp of units (128)").production(),
      c(D::fp32, {3, 129}, 22).param("scale", kScale).description("fp32 one above a warp of units (128)").production(),
      c(D::bf16, {3, 255}, 23).param("scale", kScale).description("bf16 one below a warp of units (256)").production(),
      c(D::bf16, {3, 256}, 24).param("scale", kScale).description("bf16 at a warp of units (256)").production(),
      c(D::bf16, {3, 257}, 25).param("scale", kScale).param("mask_mode", causal)
          .description("bf16 one above a warp of units (256), causal").production(),
      c(D::fp16, {3, 255}, 26).param("scale", kScale).description("fp16 one below a warp of units (256)").production(),
      c(D::fp16, {3, 257}, 27).param("scale", kScale).description("fp16 one above a warp of units (256)").production(),
      c(D::fp32, {2, 1023}, 28).param("scale", kScale).description("fp32 one below a block sweep (1024)").production(),
      c(D::fp32, {2, 1024}, 29).param("scale", kScale).description("fp32 at a block sweep (1024)").production(),
      c(D::fp32, {2, 1025}, 30).param("scale", kScale).param("mask_mode", causal)
          .description("fp32 one above a block sweep (1024), causal").production(),
      c(D::bf16, {2, 2047}, 31).param("scale", kScale).description("bf16 one below a block sweep (2048)").production(),
      c(D::bf16, {2, 2048}, 32).param("scale", kScale).description("bf16 at a block sweep (2048)").production(),
      c(D::bf16, {2, 2049}, 33).param("scale", kScale).param("mask_mode", additive)
          .description("bf16 one above a block sweep (2048), additive").production(),
      c(D::fp16, {2, 2047}, 34).param("scale", kScale).description("fp16 one below a block sweep (2048)").production(),
      c(D::fp16, {2, 2049}, 35).param("scale", kScale).description("fp16 one above a block sweep (2048)").production(),
      // register cache sizes of the forward (4 and 8 units per thread) and the switch to streaming
      c(D::bf16, {2, 4097}, 36).param("scale", kScale).param("mask_mode", additive)
          .description("bf16 4097 keys: 4 units per thread, additive").production(),
      c(D::fp32, {2, 2049}, 37).param("scale", kScale).description("fp32 2049 keys: 4 units per thread").production(),
      c(D::fp32, {3, 4096}, 38).param("scale", kScale128).param("mask_mode", causal)
          .description("fp32 4096 keys, causal q_len 3: 8 units per thread").production(),
      c(D::bf16, {2, 8192}, 39).param("scale", kScale128).description("bf16 8192 keys: 4 units aligned, 8 misaligned")
          .production(),
      c(D::fp16, {1, 2, 12000}, 47).param("scale", kScale128).param("mask_mode", causal)
          .description("fp16 12000 keys, causal: 8 units per thread").production(),
      c(D::bf16, {2, 16384}, 48).param("scale", kScale128)
          .description("bf16 16384 keys: 8 units aligned, streaming misaligned").production(),
      c(D::fp16, {2, 16385}, 49).param("scale", kScale128).description("fp16 16385 keys: the streaming kernel")
          .production(),
      c(D::fp32, {2, 8193}, 56).param("scale", kScale128).description("fp32 8193 keys: the streaming kernel")
          .production(),
      // register cache sizes of the backward (1, 2, 4 or 8 units per thread, 128 threads) and its
      // switch to the two-sweep kernel; "units" are those of the worst phase unless aligned
      c(D::bf16, {2, 1023}, 57).param("scale", kScale)
          .description("bf16 one below the backward's 1-unit tier (1024): 129 units, 2 per thread").production(),
      c(D::bf16, {2, 1024}, 58).param("scale", kScale)
          .description("bf16 at the backward's 1-unit tier (1024): 1 unit per thread aligned, 2 misaligned")
          .production(),
      c(D::bf16, {2, 1025}, 59).param("scale", kScale).param("mask_mode", causal)
          .description("bf16 one above the backward's 1-unit tier (1024): 2 units per thread, causal").production(),
      c(D::bf16, {2, 4095}, 60).param("scale", kScale128)
          .description("bf16 one below the backward's 4-unit tier (4096): 513 units, 8 per thread; forward 4")
          .production(),
      c(D::bf16, {2, 4096}, 61).param("scale", kScale128)
          .description("bf16 at the backward's 4-unit tier (4096): 4 units per thread aligned, 8 misaligned")
          .production(),
      c(D::bf16, {2, 8191}, 62).param("scale", kScale128)
          .description("bf16 one below the backward's 8-unit tier (8192): 1025 units, the two-sweep backward")
          .production(),
      c(D::bf16, {2, 8193}, 63).param("scale", kScale128).param("mask_mode", additive)
          .description("bf16 one above the backward's 8-unit tier (8192): the two-sweep backward, additive")
          .production(),
      c(D::fp32, {2, 511}, 64).param("scale", kScale)
          .description("fp32 one below the backward's 1-unit tier (512): 129 units, 2 per thread").production(),
      c(D::fp32, {2, 512}, 65).param("scale", kScale)
          .description("fp32 at the backward's 1-unit tier (512): 1 unit per thread aligned, 2 misaligned")
          .production(),
      c(D::fp32, {2, 513}, 66).param("scale", kScale)
          .description("fp32 one above the backward's 1-unit tier (512): 2 units per thread").production(),
      c(D::fp32, {2, 2047}, 67).param("scale", kScale128)
          .description("fp32 one below the backward's 4-unit tier (2048): 8 units per thread; forward 4")
          .production(),
      c(D::fp32, {2, 2048}, 68).param("scale", kScale128)
          .description("fp32 at the backward's 4-unit tier (2048): 4 units aligned, 8 misaligned; forward 2 / 4")
          .production(),
      c(D::fp32, {2, 4095}, 69).param("scale", kScale128)
          .description("fp32 one below the backward's 8-unit tier (4096): 1025 units, the two-sweep backward")
          .production(),
      c(D::fp32, {2, 4097}, 70).param("scale", kScale128).param("mask_mode", causal)
          .description("fp32 one above the backward's 8-unit tier (4096): the two-sweep backward, causal")
          .production(),
      // the forward's last cached tier (8 units per thread) around its switch to streaming
      c(D::bf16, {2, 16383}, 71).param("scale", kScale128)
          .description("bf16 one below the forward's 8-unit tier (16384): 2049 units, the streaming forward")
          .production(),
      c(D::bf16, {2, 16385}, 72).param("scale", kScale128)
          .description("bf16 one above the forward's 8-unit tier (16384): the streaming forward").production(),
      c(D::fp32, {2, 8191}, 73).param("scale", kScale128)
          .description("fp32 one below the forward's 8-unit tier (8192): 2049 units, the streaming forward")
          .production(),
      c(D::fp32, {2, 8192}, 74).param("scale", kScale128)
          .description("fp32 at the forward's 8-unit tier (8192): 8 units per thread aligned, streaming misaligned")
          .production(),
      // adversarial values
      c(D::fp16, {4, 64}, 40).pattern("large").param("scale", kScale)
          .description("fp16 scores up to ~60000: exp overflows unless max-subtracted").production(),
      c(D::fp32, {4, 64}, 41).pattern("large").param("scale", kScale).param("mask_mode", causal)
          .description("fp32 scores up to ~6e30, causal").production(),
      c(D::bf16, {4, 64}, 42).pattern("very_negative").param("scale", kScale)
          .description("bf16 scores around -1e30: exp underflows unless max-subtracted").production(),
      c(D::fp16, {4, 64}, 43).pattern("very_negative").param("scale", kScale).param("mask_mode", additive)
          .description("fp16 scores around -50000, additive mask").production(),
      c(D::fp32, {4, 33}, 44).pattern("nonfinite").param("scale", kScale)
          .description("NaN/+Inf/-Inf in x, NaN in dy: same positions as golden").production(),
      c(D::bf16, {4, 33}, 45).pattern("nonfinite").param("scale", kScale).description("NaN/Inf, bf16").production(),
      c(D::fp16, {4, 33}, 46).pattern("nonfinite").param("scale", kScale).param("mask_mode", additive)
          .description("NaN in a fully masked row (query 0): not read, y = 0").production(),
      // long rows
      c(D::bf16, {2, 32768}, 50).param("scale", kScale128).description("rows of 32K keys").production(),
      c(D::fp32, {1, 2, 32768}, 51).param("scale", kScale128).param("mask_mode", causal)
          .description("fp32 rows of 32K keys, causal q_len 2 < k_len").production(),
      c(D::fp16, {2, 32768}, 52).param("scale", kScale128).param("mask_mode", additive)
          .description("fp16 rows of 32K keys, additive mask").production(),
      c(D::bf16, {2, 65535}, 53).param("scale", kScale128).description("one below the longest row (65,536)")
          .production(),
      c(D::fp32, {2, 65536}, 54).param("scale", kScale128).description("the longest row (65,536 keys), fp32")
          .production(),
      c(D::bf16, {1, 8, 512, 512}, 55).param("scale", kScale128).param("mask_mode", causal)
          .description("many short rows: 8 heads x 512 x 512, causal").production(),
      // production: whole 4096 x 4096 causal score matrices (every query position of a
      // 4096-key row), 2 heads. 32 heads need ~4.3 GB per FP64 tensor (over 30 GB of
      // fixtures); the production set must fit 12 GB (README: Budgets). The benchmark times
      // 32 heads (tools/bench.cpp kScaledShapes): rows are independent, the launch and code
      // path do not depend on their number.
      c(D::bf16, {1, 2, 4096, 4096}, 100).param("scale", kScale128).param("mask_mode", causal)
          .description("production: 2 heads x 4096 x 4096 causal (benchmark: 32 heads)")
          .production(),
      c(D::fp16, {1, 8, 1024, 4096}, 101).param("scale", kScale128).param("mask_mode", causal)
          .description("production: 8 heads x 1024 queries x 4096 keys causal, fp16 (decode/chunked prefill)")
          .production(),
      c(D::fp32, {8, 1024}, 130).param("scale", kScale).pattern("ill_conditioned")
          .description("dy constant per row: dx = a y (1 - sum y) cancels (gate not valid: SPEC §4's fallback)")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
std::vector<CoverageItem> SoftmaxOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("y", P::exact_zero_row, "bf16_2x6x5_large_causal_seed1"),
      covered("y", P::exact_zero_column, "fp32_4x257_additive_seed19"),
      covered("y", P::subnormal_result, "fp16_2x16385_seed49"),
      covered("y", P::cancellation, "bf16_2x6x5_large_causal_seed1"),
      does_not_apply("y", P::near_overflow, "y is a probability, in [0, 1]"),
      covered("dx", P::exact_zero_row, "bf16_2x6x5_large_causal_seed1"),
      covered("dx", P::exact_zero_column, "fp32_4x257_additive_seed19"),
      covered("dx", P::subnormal_result, "fp16_6x37_additive_seed3"),
      covered("dx", P::cancellation, "fp16_1x2x33x33_causal_seed16"),
      does_not_apply("dx", P::near_overflow, "|dx_j| = scale y_j |dy_j - <dy, y>| <= scale 2 y_j (1 - y_j) max|dy| <= scale max|dy| / 2: half the overflow threshold needs dy at the dtype's largest value"),
      covered("x", P::tie_at_max, "bf16_4x64_very_negative_seed42"),  // no mask: the tie is among the valid scores
      covered("x", P::very_negative_row, "bf16_4x64_very_negative_seed42"),
  };
}

}  // namespace numgate::softmax
