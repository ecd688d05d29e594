// RoPE: the declared case list and gate parameters. One numgate::Case
// per case (fixtures/include/numgate/op.h): dtype, q shape [batch, seq, q_heads, head_dim],
// seed, then the position/input pattern where not "normal", theta, layout (interleaved:
// rh = rotate-half, il = interleaved), kv_heads, why the case exists, committed or production.
// Gate: the defaults (fudge 2.0, atol 0, max ref/golden 0.10), declared here before any
// target runs; no ULP rule (the golden uses the exact FP64 angle, the declared policy an
// FP32 one: see rope_oracle.h).
//
// Kernel tile sizes (rope_kernels.cu): one block per token, at most 256 threads, each
// thread one "item" at a time: a 16-byte unit (8 bf16/fp16 or 4 fp32 elements; for
// rotate-half two units, the first-half unit and its partner d/2 further) when the
// tensor is 16-byte aligned and the head's halves split into whole units, i.e.
// (d/2) % VEC == 0 (rotate-half) or d % VEC == 0 (interleaved); else one pair.
// Items per token = (q_heads + kv_heads) * items per head. So the boundaries are
// head_dim one below / at / one above a unit (rh bf16 14/16/18, il bf16 6/8/10, rh fp32
// 6/8/10, il fp32 2/4/6) and items one below / at / one above 256 (scalar path:
// 255/256/257 heads of d = 2; bf16 vector rotate-half d = 128: 31/32/33 heads; fp32
// vector interleaved d = 64: 15/16/17 heads), and d/2 > blockDim (the cos/sin loop).
//
// Committed: two small cases only (each costs ~15-20 KB of HDF5 metadata; golden_data/
// is shared by every op under 8 MiB); they carry the CPU mutants. Everything else is
// production(): generated into the build tree; the small ones are also checked on
// the CPU, in memory, by tests/cpu/test_mutants_rope.cpp.
#include "rope/rope_oracle.h"

namespace numgate::rope {
namespace {

enum Layout { rh = 0, il = 1 };

/// Every case states theta, the layout and kv_heads, and its name says all three
/// ("bf16_il_2x3x4x16_kv2_t1e4_longpos_seed1"; the pattern is always shown).
Case rope_case() {
  return Case()
      .required_param("theta")
      .required_param("interleaved")
      .required_param("kv_heads")
      .name_parts({param_part("interleaved", [](double layout) { return layout == il ? "_il" : "_rh"; })},
                  {param_part("kv_heads",
                              [](double kv) { return "_kv" + std::to_string(static_cast<std::int64_t>(kv)); }),
                   param_part("theta",
                              [](double theta) {
                                return theta == 1e4   ? std::string("_t1e4")
                                       : theta == 1e6 ? std::string("_t1e6")
                                                      : "_t" + std::to_string(static_cast<long long>(theta));
                              }),
                   pattern_always()});
}

}  // namespace

std::vector<CaseSpec> RopeOp::cases() const {
  using D = DType;
  constexpr double t4 = 1e4, t6 = 1e6;
  const Case c = rope_case();
  return {
      // committed (carry the CPU mutants; both at vector-unit head_dim 16, odd phases in the
      // misaligned replay): interleaved bf16 with the long positions and grouped-query heads;
      // rotate-half fp32 (fine enough to see every angle error) with offset positions
      c(D::bf16, {2, 3, 4, 16}, 1).pattern("longpos").param("theta", t4).param("interleaved", il).param("kv_heads", 2)
          .description("interleaved, GQA 4:2, positions 32767/1857/15962/...: low-precision angles visibly wrong")
          .committed(),
      c(D::fp32, {2, 3, 4, 16}, 2).pattern("offset").param("theta", t6).param("interleaved", rh).param("kv_heads", 1)
          .description("rotate-half, MQA 4:1, theta 1e6, sequences starting at 17 and 4110 (not 0)").committed(),
      // smallest legal shape (one pair), at position 32767
      c(D::fp32, {1, 1, 1, 2}, 3).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("smallest legal shape, fp32, position 32767").production(),
      c(D::bf16, {1, 1, 1, 2}, 4).pattern("longpos").param("theta", t4).param("interleaved", il).param("kv_heads", 1)
          .description("smallest legal shape, bf16, interleaved").production(),
      c(D::fp16, {1, 1, 1, 2}, 5).pattern("longpos").param("theta", t6).param("interleaved", rh).param("kv_heads", 1)
          .description("smallest legal shape, fp16").production(),
      // head_dim one below / at / one above a 16-byte unit (scalar vs vector path)
      c(D::bf16, {2, 3, 2, 14}, 6).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("bf16 rotate-half d/2 = 7: one below a unit (scalar)").production(),
      c(D::bf16, {2, 3, 2, 16}, 7).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("bf16 rotate-half d/2 = 8: one unit").production(),
      c(D::bf16, {2, 3, 2, 18}, 8).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("bf16 rotate-half d/2 = 9: one above a unit (scalar)").production(),
      c(D::bf16, {2, 3, 2, 6}, 9).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 2)
          .description("bf16 interleaved d = 6: one below a unit").production(),
      c(D::fp16, {2, 3, 2, 8}, 10).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 2)
          .description("fp16 interleaved d = 8: one unit").production(),
      c(D::bf16, {2, 3, 2, 10}, 11).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 2)
          .description("bf16 interleaved d = 10: one above a unit").production(),
      c(D::fp32, {2, 3, 2, 6}, 12).pattern("offset").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("fp32 rotate-half d/2 = 3: one below a unit").production(),
      c(D::fp32, {2, 3, 2, 8}, 13).pattern("offset").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("fp32 rotate-half d/2 = 4: one unit").production(),
      c(D::fp32, {2, 3, 2, 10}, 14).pattern("offset").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("fp32 rotate-half d/2 = 5: one above a unit").production(),
      c(D::fp32, {2, 3, 2, 2}, 15).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 1)
          .description("fp32 interleaved d = 2: below a unit").production(),
      c(D::fp32, {2, 3, 2, 4}, 16).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 1)
          .description("fp32 interleaved d = 4: one unit").production(),
      c(D::fp32, {2, 3, 2, 6}, 17).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 1)
          .description("fp32 interleaved d = 6: one above a unit").production(),
      // items per token one below / at / one above the 256-thread block
      c(D::bf16, {1, 2, 254, 2}, 18).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("scalar path: 255 items per token").production(),
      c(D::bf16, {1, 2, 255, 2}, 19).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("scalar path: 256 items per token").production(),
      c(D::bf16, {1, 2, 256, 2}, 20).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 1)
          .description("scalar path: 257 items per token").production(),
      c(D::bf16, {1, 3, 30, 128}, 21).pattern("longpos").param("theta", t6).param("interleaved", rh)
          .param("kv_heads", 1).description("bf16 vector rotate-half d 128: 31 heads = 248 items").production(),
      c(D::bf16, {1, 3, 24, 128}, 22).pattern("longpos").param("theta", t6).param("interleaved", rh)
          .param("kv_heads", 8).description("bf16 vector rotate-half d 128: 32 heads = 256 items").production(),
      c(D::bf16, {1, 3, 32, 128}, 23).pattern("longpos").param("theta", t6).param("interleaved", rh)
          .param("kv_heads", 1).description("bf16 vector rotate-half d 128: 33 heads = 264 items").production(),
      c(D::fp32, {1, 3, 14, 64}, 24).pattern("offset").param("theta", t4).param("interleaved", il).param("kv_heads", 1)
          .description("fp32 vector interleaved d 64: 15 heads = 240 items").production(),
      c(D::fp32, {1, 3, 8, 64}, 25).pattern("offset").param("theta", t4).param("interleaved", il).param("kv_heads", 8)
          .description("fp32 vector interleaved d 64: 16 heads = 256 items").production(),
      c(D::fp32, {1, 3, 16, 64}, 26).pattern("offset").param("theta", t4).param("interleaved", il).param("kv_heads", 1)
          .description("fp32 vector interleaved d 64: 17 heads = 272 items").production(),
      c(D::bf16, {1, 2, 1, 1024}, 27).pattern("longpos").param("theta", t4).param("interleaved", rh)
          .param("kv_heads", 1).description("largest head_dim: 512 frequencies > 128 threads").production(),
      c(D::fp32, {1, 2, 1, 1024}, 28).pattern("longpos").param("theta", t6).param("interleaved", il)
          .param("kv_heads", 1).description("largest head_dim, fp32 interleaved").production(),
      // head_dim 64 / 128, theta 1e4 / 1e6, both layouts, every dtype, GQA / MQA / MHA
      c(D::bf16, {2, 5, 8, 128}, 31).pattern("longpos").param("theta", t4).param("interleaved", rh).param("kv_heads", 2)
          .description("Llama-like: bf16 rotate-half d 128, GQA 8:2").production(),
      c(D::bf16, {2, 5, 8, 128}, 32).pattern("longpos").param("theta", t6).param("interleaved", il).param("kv_heads", 2)
          .description("bf16 interleaved d 128, theta 1e6").production(),
      c(D::fp16, {3, 4, 6, 64}, 33).pattern("leftpad").param("theta", t6).param("interleaved", rh).param("kv_heads", 3)
          .description("fp16 rotate-half d 64, left-padded batch, GQA 6:3").production(),
      c(D::fp16, {3, 4, 6, 64}, 34).pattern("offset").param("theta", t4).param("interleaved", il).param("kv_heads", 6)
          .description("fp16 interleaved d 64, MHA, offset positions").production(),
      c(D::fp32, {2, 7, 4, 128}, 35).pattern("longpos").param("theta", t6).param("interleaved", rh).param("kv_heads", 1)
          .description("fp32 rotate-half d 128, MQA").production(),
      c(D::fp32, {2, 7, 4, 64}, 36).pattern("longpos").param("theta", t4).param("interleaved", il).param("kv_heads", 4)
          .description("fp32 interleaved d 64, MHA").production(),
      c(D::fp32, {4, 6, 2, 64}, 37).pattern("leftpad").param("theta", t4).param("interleaved", rh).param("kv_heads", 2)
          .description("fp32 left-padded batch").production(),
      c(D::bf16, {4, 6, 4, 64}, 38).pattern("leftpad").param("theta", t6).param("interleaved", rh).param("kv_heads", 2)
          .description("bf16 left-padded batch, GQA 4:2").production(),
      c(D::fp16, {2, 8, 8, 128}, 39).pattern("longpos").param("theta", t6).param("interleaved", rh).param("kv_heads", 2)
          .description("fp16 rotate-half d 128 at long positions").production(),
      // NaN / +Inf / -Inf in q, k, dq_rot, dk_rot: same positions as golden
      c(D::fp32, {2, 3, 4, 64}, 41).pattern("nonfinite").param("theta", t4).param("interleaved", rh)
          .param("kv_heads", 2).description("NaN/Inf in every input, fp32").production(),
      c(D::bf16, {2, 3, 4, 64}, 42).pattern("nonfinite").param("theta", t4).param("interleaved", il)
          .param("kv_heads", 2).description("NaN/Inf in every input, bf16 interleaved").production(),
      c(D::fp16, {2, 3, 4, 64}, 43).pattern("nonfinite").param("theta", t6).param("interleaved", rh)
          .param("kv_heads", 1).description("NaN/Inf in every input, fp16").production(),
      // every position 0 .. 32767 once (2^22 elements: still replayed misaligned and row by row)
      c(D::bf16, {1, 32768, 2, 64}, 51).param("theta", t6).param("interleaved", rh).param("kv_heads", 1)
          .description("one 32K sequence: every position 0..32767").production(),
      // production (Llama-3-8B / Qwen3-8B attention: 32 q heads, 8 kv heads, head_dim 128).
      // The 4 x 4096 x 32 x 128 would make a ~4.5 GB fixture (FP64 golden values and
      // abs_terms of 4 tensors, 84M elements): 1 x 4096 tokens instead (the benchmark times
      // 4 x 4096), plus 4 x 512 and an fp16 2048.
      c(D::bf16, {1, 4096, 32, 128}, 101).param("theta", t6).param("interleaved", rh).param("kv_heads", 8)
          .description("production: 1 x 4096 tokens x 32 heads x 128, bf16").production(),
      c(D::fp16, {1, 2048, 32, 128}, 102).param("theta", t4).param("interleaved", rh).param("kv_heads", 8)
          .description("production: 1 x 2048 x 32 x 128, fp16, theta 1e4").production(),
      c(D::bf16, {4, 512, 32, 128}, 103).pattern("leftpad").param("theta", t6).param("interleaved", rh)
          .param("kv_heads", 8).description("production: batch 4 x 512, left-padded").production(),
      c(D::bf16, {1, 1024, 32, 128}, 104).pattern("longpos").param("theta", t4).param("interleaved", il)
          .param("kv_heads", 8).description("interleaved 1024 tokens at long positions").production(),
      c(D::fp16, {1, 3, 2, 16}, 40).pattern("value_coverage").param("theta", t4).param("interleaved", rh)
          .param("kv_heads", 1).description("value coverage: zero rows and columns, subnormal and near-overflow outputs")
          .production(),
  };
}

// Value coverage (issue 10, item 4; numgate/coverage.h): for every gated tensor, the case that
// covers each property, or why it does not apply. Checked on the named cases by
// tests/cpu/test_value_coverage.cpp.
// value_coverage (rope_oracle.cpp) builds the zero, subnormal and near-overflow items in one fp16 case.
std::vector<CoverageItem> RopeOp::value_coverage() const {
  using P = ValueProperty;
  return {
      covered("q_rot", P::exact_zero_row, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("q_rot", P::exact_zero_column, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("q_rot", P::subnormal_result, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("q_rot", P::cancellation, "bf16_il_2x3x4x16_kv2_t1e4_longpos_seed1"),
      covered("q_rot", P::near_overflow, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      does_not_apply("k_rot", P::exact_zero_row, "k is one whole tensor (Layout::whole), not split into rows: its zeros are columns (exact_zero_column)"),
      covered("k_rot", P::exact_zero_column, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("k_rot", P::subnormal_result, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("k_rot", P::cancellation, "bf16_il_2x3x4x16_kv2_t1e4_longpos_seed1"),
      covered("k_rot", P::near_overflow, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("dq", P::exact_zero_row, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("dq", P::exact_zero_column, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("dq", P::subnormal_result, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("dq", P::cancellation, "bf16_il_2x3x4x16_kv2_t1e4_longpos_seed1"),
      covered("dq", P::near_overflow, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      does_not_apply("dk", P::exact_zero_row, "k is one whole tensor (Layout::whole), not split into rows: its zeros are columns (exact_zero_column)"),
      covered("dk", P::exact_zero_column, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("dk", P::subnormal_result, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
      covered("dk", P::cancellation, "bf16_il_2x3x4x16_kv2_t1e4_longpos_seed1"),
      covered("dk", P::near_overflow, "fp16_rh_1x3x2x16_kv1_t1e4_value_coverage_seed40"),
  };
}

}  // namespace numgate::rope
