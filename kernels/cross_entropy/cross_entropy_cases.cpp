// Cross-entropy: the declared case list and gate parameters. One line per case:
//   dtype, shape [tokens, vocab], seed, input pattern, reduction, label smoothing,
//   z-loss, soft cap, why. ignore_index is -100 (PyTorch's default) everywhere.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared here
// before any target runs; no ULP rule (every output is a reduction over the vocabulary).
// Coefficients are exact in FP32 (eps 0.0625 / 0.125, z_loss 2^-13, softcap 30).
//
// Committed: three small cases only (each costs ~15-20 KB of HDF5 metadata; golden_data/
// is shared by every op under 8 MiB); together they carry every CPU mutant. Everything
// else is production = true: generated into the build tree; those of at most 400,000
// elements are also checked on the CPU, in memory, by tests/cpu/test_mutants_cross_entropy.cpp.
//
// Kernel tile sizes (cross_entropy_kernels.cu): a 16-byte unit holds kVec elements (fp32
// 4, bf16/fp16 8); a warp covers 32 units (fp32 128, bf16/fp16 256 elements). The first
// kernels used 256-thread blocks (a block sweep of fp32 1024, bf16/fp16 2048 elements: the
// 1023..2049 cases); they now use 512 threads forward and 1024 backward, each thread
// loading 4 units at a time: block sweeps of bf16 4096 (forward) and 8192 (backward)
// elements, fp32 2048 and 4096, batches of bf16 16384 / 32768. Sizes around these are
// declared, plus the vocabularies of the issue: 1, 32,000 (Llama 2), 65,537 (a partial
// last sweep and unit) and 151,936 (Qwen3).
#include "cross_entropy/cross_entropy_oracle.h"

namespace numgate::cross_entropy {
namespace {

enum Red { none = 0, mean = 1, sum = 2 };
constexpr double kZ = 1.0 / 8192;  // 2^-13 ~ 1.2e-4 (PaLM's 1e-4, exact in FP32)

CaseSpec make(DType t, std::vector<std::int64_t> shape, std::uint64_t seed, std::string pattern, Red red, double eps,
              double z, double cap, std::string why, bool production = true) {
  CaseSpec c;
  c.dtype = t;
  c.shape = std::move(shape);
  c.seed = seed;
  c.pattern = std::move(pattern);
  c.params = {{"ignore_index", -100.0}, {"label_smoothing", eps}, {"z_loss", z}, {"softcap", cap},
              {"reduction", static_cast<double>(red)}};
  c.production = production;
  c.description = std::move(why);
  std::string dims;
  for (auto s : c.shape) dims += (dims.empty() ? "" : "x") + std::to_string(s);
  const char* r = red == none ? "_none" : red == mean ? "_mean" : "_sum";
  c.name = std::string(dtype_name(t)) + "_" + dims + "_" + c.pattern + r + (eps > 0 ? "_ls" : "") +
           (z > 0 ? "_z" : "") + (cap > 0 ? "_cap" : "") + "_seed" + std::to_string(seed);
  return c;
}

}  // namespace

std::vector<CaseSpec> CrossEntropyOp::cases() const {
  using D = DType;
  constexpr bool committed = false;
  return {
      // committed: carry the CPU mutants
      make(D::fp32, {6, 37}, 1, "mixed", mean, 0.125, kZ, 0,
           "ignored tokens (1, 4) with smoothing and z-loss, mean over the 4 kept, confident tokens 0 and 5",
           committed),
      make(D::bf16, {4, 40}, 2, "extreme", none, 0, 0, 0,
           "logits 1e4 (exp overflows unless max-shifted), two equal 1e8 logits (loss log 2), -inf row (loss 0)",
           committed),
      make(D::fp16, {5, 33}, 3, "softcap", sum, 0.0625, 0, 30,
           "soft cap 30 on logits ~20 N(0,1) (tanh' far from 1), token 3 ignored with smoothing, sum", committed),
      // smallest legal shape and vocab 1 (lse = x, loss 0, dlogits 0 with eps = 0)
      make(D::fp32, {1, 1}, 10, "normal", mean, 0, 0, 0, "smallest legal shape, fp32"),
      make(D::bf16, {1, 1}, 11, "normal", sum, 0, kZ, 0, "smallest legal shape, bf16, z-loss"),
      make(D::fp16, {1, 1}, 12, "normal", none, 0, 0, 0, "smallest legal shape, fp16"),
      make(D::bf16, {8, 1}, 13, "mixed", mean, 0.125, 0, 0, "vocab 1 with ignored tokens and smoothing"),
      // unit / warp / block sweep boundaries
      make(D::fp32, {3, 3}, 20, "normal", none, 0, 0, 0, "fp32 one below a unit (4)"),
      make(D::fp32, {3, 5}, 21, "normal", mean, 0.125, 0, 0, "fp32 one above a unit (4)"),
      make(D::bf16, {3, 7}, 22, "normal", sum, 0, 0, 0, "bf16 one below a unit (8)"),
      make(D::bf16, {3, 9}, 23, "mixed", none, 0, 0, 0, "bf16 one above a unit (8)"),
      make(D::fp32, {3, 127}, 24, "normal", mean, 0, 0, 0, "fp32 one below a warp of units (128)"),
      make(D::fp32, {3, 128}, 25, "normal", mean, 0, 0, 0, "fp32 at a warp of units (128)"),
      make(D::fp32, {3, 129}, 26, "mixed", mean, 0.125, kZ, 0, "fp32 one above a warp of units (128)"),
      make(D::fp16, {3, 255}, 27, "normal", none, 0, 0, 0, "fp16 one below a warp of units (256)"),
      make(D::fp16, {3, 256}, 28, "normal", sum, 0, 0, 0, "fp16 at a warp of units (256)"),
      make(D::fp16, {3, 257}, 29, "mixed", mean, 0.0625, 0, 0, "fp16 one above a warp of units (256)"),
      make(D::fp32, {2, 1023}, 30, "normal", mean, 0, 0, 0, "fp32 one below a block sweep (1024)"),
      make(D::fp32, {2, 1024}, 31, "normal", none, 0, 0, 0, "fp32 at a block sweep (1024)"),
      make(D::fp32, {2, 1025}, 32, "normal", sum, 0.125, 0, 30, "fp32 one above a block sweep (1024), soft cap"),
      make(D::bf16, {2, 2047}, 33, "normal", mean, 0, 0, 0, "bf16 one below a block sweep (2048)"),
      make(D::bf16, {2, 2048}, 34, "normal", mean, 0, 0, 0, "bf16 at a block sweep (2048)"),
      make(D::bf16, {2, 2049}, 35, "mixed", mean, 0.125, kZ, 0, "bf16 one above a block sweep (2048)"),
      make(D::fp16, {2, 2047}, 36, "normal", none, 0, 0, 0, "fp16 one below a block sweep (2048)"),
      make(D::fp16, {2, 2049}, 37, "normal", sum, 0, 0, 0, "fp16 one above a block sweep (2048)"),
      make(D::bf16, {2, 4095}, 38, "mixed", mean, 0.125, 0, 0, "bf16 one below a forward block sweep (4096)"),
      make(D::bf16, {2, 4097}, 39, "normal", none, 0, 0, 0, "bf16 one above a forward block sweep (4096)"),
      make(D::bf16, {2, 8193}, 44, "mixed", sum, 0.0625, kZ, 0, "bf16 one above a backward block sweep (8192)"),
      make(D::fp32, {2, 4097}, 45, "normal", mean, 0.125, 0, 0, "fp32 one above a backward block sweep (4096)"),
      make(D::fp16, {2, 16385}, 46, "mixed", none, 0, 0, 30, "fp16 one above a forward batch of units (16384)"),
      make(D::bf16, {2, 32769}, 47, "normal", mean, 0.125, 0, 0, "bf16 one above a backward batch of units (32768)"),
      // the vocabularies
      make(D::bf16, {4, 32000}, 40, "mixed", mean, 0.125, 0, 0, "vocab 32,000 (Llama 2), ignored + smoothing"),
      make(D::fp32, {2, 65537}, 41, "normal", mean, 0, kZ, 0, "vocab 65,537: a partial last sweep and unit"),
      make(D::fp16, {2, 65537}, 42, "mixed", none, 0.0625, 0, 0, "vocab 65,537, fp16, none"),
      make(D::bf16, {2, 151936}, 43, "mixed", mean, 0, 0, 0, "vocab 151,936 (Qwen3)"),
      // adversarial values
      make(D::fp32, {4, 64}, 50, "extreme", none, 0, 0, 0, "fp32 logits 1e4, two equal 1e8 (log 2), -inf row (0)"),
      make(D::fp16, {4, 64}, 51, "extreme", none, 0, 0, 0, "fp16 logits ~1e3, two equal 6e4 (log 2), -inf row"),
      make(D::fp32, {4, 64}, 52, "extreme", mean, 0, 0, 0, "extreme logits, mean"),
      make(D::bf16, {4, 64}, 58, "extreme", none, 0.0625, 0, 0,
           "smoothing with whole 16-byte units of -inf (token 1): they reach the smoothing sum, loss +inf"),
      make(D::fp16, {4, 64}, 59, "extreme", none, 0.125, 0, 0,
           "fp16 smoothing with whole 16-byte units of -inf (token 1): loss +inf"),
      make(D::bf16, {4, 32000}, 53, "confident", mean, 0, 0, 0, "confident: target logit = row max + 10"),
      make(D::fp32, {4, 1000}, 54, "confident", none, 0.125, kZ, 0, "confident with smoothing and z-loss, fp32"),
      make(D::fp16, {4, 1000}, 55, "confident", sum, 0, 0, 30, "confident under a soft cap, fp16"),
      make(D::bf16, {8, 1000}, 56, "softcap", mean, 0.125, kZ, 30, "soft cap, smoothing, z-loss, ignored, bf16"),
      make(D::fp32, {7, 300}, 57, "softcap", none, 0.0625, 0, 30, "soft cap with ignored tokens, none, fp32"),
      make(D::fp32, {3, 50}, 60, "all_ignored", mean, 0.125, kZ, 0, "all tokens ignored, mean: loss 0, dlogits 0"),
      make(D::bf16, {3, 50}, 61, "all_ignored", none, 0.125, 0, 0, "all tokens ignored, none"),
      make(D::fp16, {3, 50}, 62, "all_ignored", sum, 0, 0, 30, "all tokens ignored, sum"),
      make(D::fp32, {4, 33}, 63, "nonfinite", none, 0, 0, 0, "NaN/+Inf/-Inf logits and a NaN in an ignored row"),
      make(D::bf16, {4, 33}, 64, "nonfinite", none, 0.125, 0, 0, "NaN/Inf logits with smoothing (-inf gives +inf)"),
      make(D::fp16, {4, 33}, 65, "nonfinite", none, 0, kZ, 0, "NaN/Inf logits with z-loss, fp16"),
      make(D::fp32, {6, 40}, 66, "mixed", sum, 0.125, 0, 0, "ignored + smoothing, sum, fp32"),
      // production: the benchmark shape is 8192 x 151,936 bf16 (forward and backward), but
      // its FP64 golden has 1.2G elements, ~10 GB per FP64 tensor (logits, golden dlogits
      // and its abs_terms: over 30 GB); declared at 1024 tokens instead (~1.2 GB each).
      make(D::bf16, {1024, 151936}, 100, "mixed", mean, 0, 0, 0,
           "production: 1024 x 151,936 bf16 (the 8192-token benchmark shape would need ~10 GB per FP64 tensor)"),
  };
}

}  // namespace numgate::cross_entropy
