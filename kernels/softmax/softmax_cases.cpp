// Softmax: the declared case list and gate parameters. One line per case:
//   dtype, shape [..., q_len, k_len], seed, input pattern, mask mode, scale, why.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared here
// before any target runs. Production cases are generated into the build tree (never
// committed: golden_data/ is tight); those of at most 70,000 elements are also checked on
// the CPU, in memory, by tests/cpu/test_mutants_softmax.cpp.
//
// Block and tile sizes of the kernel (softmax.cuh): a 16-byte unit holds kVec elements
// (fp32 4, bf16/fp16 8); a warp covers 32 units (fp32 128, bf16/fp16 256 elements); the
// block has 256 threads (fp32 1024, bf16/fp16 2048 elements per sweep). The forward keeps
// 1, 2, 4 or 8 units per thread in registers (rows up to 256, 512, 1024, 2048 units, from
// k_len and x's 16-byte phase) and streams longer rows. Sizes one below, at and one above
// each are declared below (the misaligned replay adds a unit: 8192 bf16 aligned takes 4
// units per thread, misaligned 8; 16384 aligned 8, misaligned the streaming kernel), plus
// rows of 32K and of 65,536 (the limit).
#include "softmax/softmax_oracle.h"

namespace numgate::softmax {
namespace {

constexpr double kScale = 0.125;                 // 1 / sqrt(64)
constexpr double kScale128 = 0.08838834764831845;  // 1 / sqrt(128) (rounded to FP32 by the reference and kernel)
enum Mode { none = 0, causal = 1, additive = 2 };

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, Mode mode,
              double scale, std::string why, bool production = true) {
  const char* m = mode == causal ? "_causal" : mode == additive ? "_additive" : "";
  return make_case(t, std::move(shape), seed, std::move(pattern), {{"scale", scale}, {"mask_mode", static_cast<double>(mode)}},
                   std::move(why), production, "", m);
}

}  // namespace

std::vector<CaseSpec> SoftmaxOp::cases() const {
  using D = DType;
  constexpr bool committed = false;
  return {
      // committed: three small cases (each costs ~15-20 KB of HDF5 metadata, golden_data/ is
      // shared by every op under 8 MiB); together they catch every CPU mutant.
      make(D::bf16, {2, 6, 5}, 1, "large", causal, kScale,
           "q_len 6 > k_len 5 causal: queries 0 fully masked (y = dx = 0), scores up to ~6e30", committed),
      make(D::fp32, {2, 4, 9}, 2, "normal", causal, kScale,
           "q_len 4 < k_len 9 causal: bottom-right alignment (query i sees keys <= i + 5)", committed),
      make(D::fp16, {6, 37}, 3, "normal", additive, kScale,
           "additive mask of 0, biases, -inf and -65504: query 0 fully masked, query 1 one key (y = 1)", committed),
      // smallest legal shape (a single element: y = 1, dx = 0 exactly)
      make(D::fp32, {1, 1}, 10, "normal", none, kScale, "smallest legal shape, fp32"),
      make(D::bf16, {1, 1}, 11, "normal", none, kScale, "smallest legal shape, bf16"),
      make(D::fp16, {1, 1}, 12, "normal", none, kScale, "smallest legal shape, fp16"),
      // causal rows of length 1 (k_len 1): q_len 1 sees its key; q_len 4 > 1: queries 0-2 empty
      make(D::bf16, {3, 1, 1}, 13, "normal", causal, kScale, "causal, k_len 1, q_len 1: y = 1"),
      make(D::fp16, {2, 4, 1}, 14, "normal", causal, kScale, "causal, k_len 1, q_len 4: 3 empty rows, then y = 1"),
      // alignment: q_len < k_len, q_len = k_len, q_len > k_len
      make(D::bf16, {2, 3, 8, 40}, 15, "normal", causal, kScale128, "causal q_len 8 < k_len 40 (decode-like)"),
      make(D::fp16, {1, 2, 33, 33}, 16, "normal", causal, kScale128, "causal q_len = k_len = 33"),
      make(D::fp32, {2, 40, 17}, 17, "normal", causal, kScale, "causal q_len 40 > k_len 17: 23 empty rows per head"),
      make(D::bf16, {2, 9, 130}, 18, "normal", additive, kScale, "additive mask, bf16, 130 keys"),
      make(D::fp32, {4, 257}, 19, "normal", additive, kScale128, "additive mask, fp32, 257 keys"),
      // unit / warp / block boundaries
      make(D::fp32, {3, 127}, 20, "normal", none, kScale, "fp32 one below a warp of units (128)"),
      make(D::fp32, {3, 128}, 21, "normal", none, kScale, "fp32 at a warp of units (128)"),
      make(D::fp32, {3, 129}, 22, "normal", none, kScale, "fp32 one above a warp of units (128)"),
      make(D::bf16, {3, 255}, 23, "normal", none, kScale, "bf16 one below a warp of units (256)"),
      make(D::bf16, {3, 256}, 24, "normal", none, kScale, "bf16 at a warp of units (256)"),
      make(D::bf16, {3, 257}, 25, "normal", causal, kScale, "bf16 one above a warp of units (256), causal"),
      make(D::fp16, {3, 255}, 26, "normal", none, kScale, "fp16 one below a warp of units (256)"),
      make(D::fp16, {3, 257}, 27, "normal", none, kScale, "fp16 one above a warp of units (256)"),
      make(D::fp32, {2, 1023}, 28, "normal", none, kScale, "fp32 one below a block sweep (1024)"),
      make(D::fp32, {2, 1024}, 29, "normal", none, kScale, "fp32 at a block sweep (1024)"),
      make(D::fp32, {2, 1025}, 30, "normal", causal, kScale, "fp32 one above a block sweep (1024), causal"),
      make(D::bf16, {2, 2047}, 31, "normal", none, kScale, "bf16 one below a block sweep (2048)"),
      make(D::bf16, {2, 2048}, 32, "normal", none, kScale, "bf16 at a block sweep (2048)"),
      make(D::bf16, {2, 2049}, 33, "normal", additive, kScale, "bf16 one above a block sweep (2048), additive"),
      make(D::fp16, {2, 2047}, 34, "normal", none, kScale, "fp16 one below a block sweep (2048)"),
      make(D::fp16, {2, 2049}, 35, "normal", none, kScale, "fp16 one above a block sweep (2048)"),
      // register cache sizes of the forward (4 and 8 units per thread) and the switch to streaming
      make(D::bf16, {2, 4097}, 36, "normal", additive, kScale, "bf16 4097 keys: 4 units per thread, additive"),
      make(D::fp32, {2, 2049}, 37, "normal", none, kScale, "fp32 2049 keys: 4 units per thread"),
      make(D::fp32, {3, 4096}, 38, "normal", causal, kScale128, "fp32 4096 keys, causal q_len 3: 8 units per thread"),
      make(D::bf16, {2, 8192}, 39, "normal", none, kScale128, "bf16 8192 keys: 4 units aligned, 8 misaligned"),
      make(D::fp16, {1, 2, 12000}, 47, "normal", causal, kScale128, "fp16 12000 keys, causal: 8 units per thread"),
      make(D::bf16, {2, 16384}, 48, "normal", none, kScale128, "bf16 16384 keys: 8 units aligned, streaming misaligned"),
      make(D::fp16, {2, 16385}, 49, "normal", none, kScale128, "fp16 16385 keys: the streaming kernel"),
      make(D::fp32, {2, 8193}, 56, "normal", none, kScale128, "fp32 8193 keys: the streaming kernel"),
      // adversarial values
      make(D::fp16, {4, 64}, 40, "large", none, kScale, "fp16 scores up to ~60000: exp overflows unless max-subtracted"),
      make(D::fp32, {4, 64}, 41, "large", causal, kScale, "fp32 scores up to ~6e30, causal"),
      make(D::bf16, {4, 64}, 42, "very_negative", none, kScale, "bf16 scores around -1e30: exp underflows unless max-subtracted"),
      make(D::fp16, {4, 64}, 43, "very_negative", additive, kScale, "fp16 scores around -50000, additive mask"),
      make(D::fp32, {4, 33}, 44, "nonfinite", none, kScale, "NaN/+Inf/-Inf in x, NaN in dy: same positions as golden"),
      make(D::bf16, {4, 33}, 45, "nonfinite", none, kScale, "NaN/Inf, bf16"),
      make(D::fp16, {4, 33}, 46, "nonfinite", additive, kScale, "NaN in a fully masked row (query 0): not read, y = 0"),
      // long rows
      make(D::bf16, {2, 32768}, 50, "normal", none, kScale128, "rows of 32K keys"),
      make(D::fp32, {1, 2, 32768}, 51, "normal", causal, kScale128, "fp32 rows of 32K keys, causal q_len 2 < k_len"),
      make(D::fp16, {2, 32768}, 52, "normal", additive, kScale128, "fp16 rows of 32K keys, additive mask"),
      make(D::bf16, {2, 65535}, 53, "normal", none, kScale128, "one below the longest row (65,536)"),
      make(D::fp32, {2, 65536}, 54, "normal", none, kScale128, "the longest row (65,536 keys), fp32"),
      make(D::bf16, {1, 8, 512, 512}, 55, "normal", causal, kScale128, "many short rows: 8 heads x 512 x 512, causal"),
      // production: 32 heads x 4096 x 4096 needs ~4.3 GB per FP64 tensor (golden y, dx and
      // their abs_terms, plus the promoted inputs: over 30 GB); declared at 8 heads instead.
      make(D::bf16, {1, 8, 4096, 4096}, 100, "normal", causal, kScale128,
           "production: 8 heads x 4096 x 4096 causal (32 heads would need ~4 GB per FP64 tensor)"),
      make(D::fp16, {1, 32, 1024, 4096}, 101, "normal", causal, kScale128,
           "production: 32 heads x 1024 queries x 4096 keys causal, fp16 (decode/chunked prefill)"),
  };
}

}  // namespace numgate::softmax
