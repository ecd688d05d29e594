// Cross-entropy: the declared case list and gate parameters. One numgate::Case per case
// (fixtures/include/numgate/op.h): dtype, shape [tokens, vocab], seed, then the input
// pattern, reduction, label smoothing, z-loss and soft cap where set, why, committed or
// production. ignore_index is -100 (PyTorch's default) everywhere.
// Gate parameters are the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared here
// before any target runs; no ULP rule (every output is a reduction over the vocabulary).
// Coefficients are exact in FP32 (eps 0.0625 / 0.125, z_loss 2^-13, softcap 30).
//
// Committed: three small cases only (each costs ~15-20 KB of HDF5 metadata; golden_data/
// is shared by every op under 8 MiB); together they carry every CPU mutant. Everything
// else is production(): generated into the build tree; those of at most 400,000
// elements are also checked on the CPU, in memory, by tests/cpu/test_mutants_cross_entropy.cpp.
//
// Kernel tile sizes (cross_entropy_kernels.cu): a 16-byte unit holds kVec elements (fp32
// 4, bf16/fp16 8); a warp covers 32 units (fp32 128, bf16/fp16 256 elements). The first
// kernels used 256-thread blocks (a block sweep of fp32 1024, bf16/fp16 2048 elements: the
// 1023..2049 cases), later 512 threads forward (bf16 4096: the 4095 / 4097 cases); every
// pass now uses 1024 threads: block sweeps of bf16 8192 and fp32 4096 elements, batches of
// 4 units (statistics; bf16 32768) and 2 units (gradient sweep; bf16 16384). Sizes around
// these are declared, plus the vocabularies of the issue: 1, 32,000 (Llama 2), 65,537 (a
// partial last sweep and unit) and 151,936 (Qwen3).
#include "cross_entropy/cross_entropy_oracle.h"

namespace numgate::cross_entropy {
namespace {

enum Red { none = 0, mean = 1, sum = 2 };
constexpr double kZ = 1.0 / 8192;  // 2^-13 ~ 1.2e-4 (PaLM's 1e-4, exact in FP32)

/// ignore_index -100, no smoothing, z-loss or soft cap unless a case sets them; every case
/// states its reduction. The name shows the pattern (always), the reduction and which of
/// smoothing, z-loss and soft cap are on ("fp32_6x37_mixed_mean_ls_z_seed1").
Case cross_entropy_case() {
  const auto on = [](const char* label) {
    return [label](double v) { return v > 0 ? std::string(label) : std::string(); };
  };
  return Case()
      .param("ignore_index", -100)
      .param("label_smoothing", 0)
      .param("z_loss", 0)
      .param("softcap", 0)
      .required_param("reduction")
      .name_parts({}, {pattern_always(), param_part("reduction", [](double red) {
                         return red == none ? "_none" : red == mean ? "_mean" : "_sum";
                       }),
                       param_part("label_smoothing", on("_ls")), param_part("z_loss", on("_z")),
                       param_part("softcap", on("_cap"))});
}

}  // namespace

std::vector<CaseSpec> CrossEntropyOp::cases() const {
  using D = DType;
  const Case c = cross_entropy_case();
  return {
      // committed: carry the CPU mutants
      c(D::fp32, {6, 37}, 1).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.125)
          .param("z_loss", kZ)
          .description("ignored tokens (1, 4) with smoothing and z-loss, "
                       "mean over the 4 kept, confident tokens 0 and 5")
          .committed(),
      c(D::bf16, {4, 40}, 2).pattern("extreme").param("reduction", none)
          .description("logits 1e4 (exp overflows unless max-shifted), "
                       "two equal 1e8 logits (loss log 2), -inf row (loss 0)")
          .committed(),
      c(D::fp16, {5, 33}, 3).pattern("softcap").param("reduction", sum).param("label_smoothing", 0.0625)
          .param("softcap", 30)
          .description("soft cap 30 on logits ~20 N(0,1) (tanh' far from 1), token 3 ignored with smoothing, sum")
          .committed(),
      // smallest legal shape and vocab 1 (lse = x, loss 0, dlogits 0 with eps = 0)
      c(D::fp32, {1, 1}, 10).param("reduction", mean).description("smallest legal shape, fp32").production(),
      c(D::bf16, {1, 1}, 11).param("reduction", sum).param("z_loss", kZ)
          .description("smallest legal shape, bf16, z-loss").production(),
      c(D::fp16, {1, 1}, 12).param("reduction", none).description("smallest legal shape, fp16").production(),
      c(D::bf16, {8, 1}, 13).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.125)
          .description("vocab 1 with ignored tokens and smoothing").production(),
      // unit / warp / block sweep boundaries
      c(D::fp32, {3, 3}, 20).param("reduction", none).description("fp32 one below a unit (4)").production(),
      c(D::fp32, {3, 5}, 21).param("reduction", mean).param("label_smoothing", 0.125)
          .description("fp32 one above a unit (4)").production(),
      c(D::bf16, {3, 7}, 22).param("reduction", sum).description("bf16 one below a unit (8)").production(),
      c(D::bf16, {3, 9}, 23).pattern("mixed").param("reduction", none).description("bf16 one above a unit (8)")
          .production(),
      c(D::fp32, {3, 127}, 24).param("reduction", mean).description("fp32 one below a warp of units (128)")
          .production(),
      c(D::fp32, {3, 128}, 25).param("reduction", mean).description("fp32 at a warp of units (128)").production(),
      c(D::fp32, {3, 129}, 26).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.125)
          .param("z_loss", kZ).description("fp32 one above a warp of units (128)").production(),
      c(D::fp16, {3, 255}, 27).param("reduction", none).description("fp16 one below a warp of units (256)")
          .production(),
      c(D::fp16, {3, 256}, 28).param("reduction", sum).description("fp16 at a warp of units (256)").production(),
      c(D::fp16, {3, 257}, 29).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.0625)
          .description("fp16 one above a warp of units (256)").production(),
      c(D::fp32, {2, 1023}, 30).param("reduction", mean).description("fp32 one below a block sweep (1024)")
          .production(),
      c(D::fp32, {2, 1024}, 31).param("reduction", none).description("fp32 at a block sweep (1024)").production(),
      c(D::fp32, {2, 1025}, 32).param("reduction", sum).param("label_smoothing", 0.125).param("softcap", 30)
          .description("fp32 one above a block sweep (1024), soft cap").production(),
      c(D::bf16, {2, 2047}, 33).param("reduction", mean).description("bf16 one below a block sweep (2048)")
          .production(),
      c(D::bf16, {2, 2048}, 34).param("reduction", mean).description("bf16 at a block sweep (2048)").production(),
      c(D::bf16, {2, 2049}, 35).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.125)
          .param("z_loss", kZ).description("bf16 one above a block sweep (2048)").production(),
      c(D::fp16, {2, 2047}, 36).param("reduction", none).description("fp16 one below a block sweep (2048)")
          .production(),
      c(D::fp16, {2, 2049}, 37).param("reduction", sum).description("fp16 one above a block sweep (2048)").production(),
      c(D::bf16, {2, 4095}, 38).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.125)
          .description("bf16 one below a forward block sweep (4096)").production(),
      c(D::bf16, {2, 4097}, 39).param("reduction", none).description("bf16 one above a forward block sweep (4096)")
          .production(),
      c(D::bf16, {2, 8193}, 44).pattern("mixed").param("reduction", sum).param("label_smoothing", 0.0625)
          .param("z_loss", kZ).description("bf16 one above a backward block sweep (8192)").production(),
      c(D::fp32, {2, 4097}, 45).param("reduction", mean).param("label_smoothing", 0.125)
          .description("fp32 one above a backward block sweep (4096)").production(),
      c(D::fp16, {2, 16385}, 46).pattern("mixed").param("reduction", none).param("softcap", 30)
          .description("fp16 one above a forward batch of units (16384)").production(),
      c(D::bf16, {2, 32769}, 47).param("reduction", mean).param("label_smoothing", 0.125)
          .description("bf16 one above a backward batch of units (32768)").production(),
      // the vocabularies
      c(D::bf16, {4, 32000}, 40).pattern("mixed").param("reduction", mean).param("label_smoothing", 0.125)
          .description("vocab 32,000 (Llama 2), ignored + smoothing").production(),
      c(D::fp32, {2, 65537}, 41).param("reduction", mean).param("z_loss", kZ)
          .description("vocab 65,537: a partial last sweep and unit").production(),
      c(D::fp16, {2, 65537}, 42).pattern("mixed").param("reduction", none).param("label_smoothing", 0.0625)
          .description("vocab 65,537, fp16, none").production(),
      c(D::bf16, {2, 151936}, 43).pattern("mixed").param("reduction", mean).description("vocab 151,936 (Qwen3)")
          .production(),
      // adversarial values
      c(D::fp32, {4, 64}, 50).pattern("extreme").param("reduction", none)
          .description("fp32 logits 1e4, two equal 1e8 (log 2), -inf row (0)").production(),
      c(D::fp16, {4, 64}, 51).pattern("extreme").param("reduction", none)
          .description("fp16 logits ~1e3, two equal 6e4 (log 2), -inf row").production(),
      c(D::fp32, {4, 64}, 52).pattern("extreme").param("reduction", mean).description("extreme logits, mean")
          .production(),
      c(D::bf16, {4, 64}, 58).pattern("extreme").param("reduction", none).param("label_smoothing", 0.0625)
          .description("smoothing with whole 16-byte units of -inf (token 1): they reach the smoothing sum, loss +inf")
          .production(),
      c(D::fp16, {4, 64}, 59).pattern("extreme").param("reduction", none).param("label_smoothing", 0.125)
          .description("fp16 smoothing with whole 16-byte units of -inf (token 1): loss +inf").production(),
      c(D::bf16, {4, 32000}, 53).pattern("confident").param("reduction", mean)
          .description("confident: target logit = row max + 10").production(),
      c(D::fp32, {4, 1000}, 54).pattern("confident").param("reduction", none).param("label_smoothing", 0.125)
          .param("z_loss", kZ).description("confident with smoothing and z-loss, fp32").production(),
      c(D::fp16, {4, 1000}, 55).pattern("confident").param("reduction", sum).param("softcap", 30)
          .description("confident under a soft cap, fp16").production(),
      c(D::bf16, {8, 1000}, 56).pattern("softcap").param("reduction", mean).param("label_smoothing", 0.125)
          .param("z_loss", kZ).param("softcap", 30).description("soft cap, smoothing, z-loss, ignored, bf16")
          .production(),
      c(D::fp32, {7, 300}, 57).pattern("softcap").param("reduction", none).param("label_smoothing", 0.0625)
          .param("softcap", 30).description("soft cap with ignored tokens, none, fp32").production(),
      c(D::fp32, {3, 50}, 60).pattern("all_ignored").param("reduction", mean).param("label_smoothing", 0.125)
          .param("z_loss", kZ).description("all tokens ignored, mean: loss 0, dlogits 0").production(),
      c(D::bf16, {3, 50}, 61).pattern("all_ignored").param("reduction", none).param("label_smoothing", 0.125)
          .description("all tokens ignored, none").production(),
      c(D::fp16, {3, 50}, 62).pattern("all_ignored").param("reduction", sum).param("softcap", 30)
          .description("all tokens ignored, sum").production(),
      c(D::fp32, {4, 33}, 63).pattern("nonfinite").param("reduction", none)
          .description("NaN/+Inf/-Inf logits and a NaN in an ignored row").production(),
      c(D::bf16, {4, 33}, 64).pattern("nonfinite").param("reduction", none).param("label_smoothing", 0.125)
          .description("NaN/Inf logits with smoothing (-inf gives +inf)").production(),
      c(D::fp16, {4, 33}, 65).pattern("nonfinite").param("reduction", none).param("z_loss", kZ)
          .description("NaN/Inf logits with z-loss, fp16").production(),
      c(D::fp32, {6, 40}, 66).pattern("mixed").param("reduction", sum).param("label_smoothing", 0.125)
          .description("ignored + smoothing, sum, fp32").production(),
      c(D::bf16, {8, 64}, 67).pattern("underflow_tail").param("reduction", none)
          .description("logits at s - m in [-92, -87]: p below 2^-126, dlogits bf16 subnormals (a flushed p misrounds)")
          .production(),
      c(D::fp32, {8, 64}, 68).pattern("underflow_tail").param("reduction", none)
          .description("logits at s - m in [-92, -87]: p and dlogits FP32 subnormals").production(),
      // production: the benchmark shape is 8192 x 151,936 bf16 (forward and backward), but
      // its FP64 golden has 1.2G elements, ~10 GB per FP64 tensor; declared at 512 tokens
      // (1.2 GB of fixture; 155 MB of logits, past the backward's L2-sized row batches).
      c(D::bf16, {512, 151936}, 100).pattern("mixed").param("reduction", mean)
          .description("production: 512 x 151,936 bf16 (benchmark: 8192 tokens)")
          .production(),
      c(D::fp16, {6, 64}, 70).pattern("value_coverage").param("reduction", none)
          .description("value coverage: subnormal and near-overflow loss, near-overflow dlogits, lse cancelling, "
                       "a very negative row").production(),
      c(D::fp32, {8, 1024}, 130).pattern("ill_conditioned").param("reduction", none)
          .description("target logit 25 above the rest: loss and p_target - 1 cancel (gates not valid: SPEC §4's fallback)")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// value_coverage (cross_entropy_oracle.cpp): subnormal and near-overflow losses, dlogits near fp16 max, a cancelling lse, a very negative row.
std::vector<CoverageItem> CrossEntropyOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("loss", P::exact_zero_row, "fp32_3x50_all_ignored_mean_ls_z_seed60"),
      covered("loss", P::exact_zero_column, "bf16_3x9_mixed_none_seed23"),
      covered("loss", P::subnormal_result, "fp16_6x64_value_coverage_none_seed70"),
      covered("loss", P::cancellation, "fp16_6x64_value_coverage_none_seed70"),
      covered("loss", P::near_overflow, "fp16_6x64_value_coverage_none_seed70"),
      does_not_apply("lse", P::exact_zero_row, "lse = m + log S with S >= 1 (the maximum's own term): never zero by its terms"),
      does_not_apply("lse", P::exact_zero_column, "lse = m + log S with S >= 1 (the maximum's own term): never zero by its terms"),
      does_not_apply("lse", P::subnormal_result, "lse >= max logit + log(S), S >= 1: subnormal only as a copy of a subnormal logit (vocab 1), not by the formula"),
      covered("lse", P::cancellation, "fp16_6x64_value_coverage_none_seed70"),
      covered("lse", P::near_overflow, "fp16_4x64_extreme_none_seed51"),
      covered("dlogits", P::exact_zero_row, "fp32_6x37_mixed_mean_ls_z_seed1"),
      covered("dlogits", P::exact_zero_column, "fp32_3x50_all_ignored_mean_ls_z_seed60"),
      covered("dlogits", P::subnormal_result, "fp16_5x33_softcap_sum_ls_cap_seed3"),
      covered("dlogits", P::cancellation, "bf16_4x40_extreme_none_seed2"),
      covered("dlogits", P::near_overflow, "fp16_6x64_value_coverage_none_seed70"),
      covered("logits", P::tie_at_max, "bf16_4x40_extreme_none_seed2"),
      covered("logits", P::very_negative_row, "fp16_6x64_value_coverage_none_seed70"),
  };
}

}  // namespace numgate::cross_entropy
