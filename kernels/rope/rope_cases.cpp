// RoPE: the declared case list and gate parameters. One line per case:
//   dtype, layout (rh = rotate-half, il = interleaved), q shape [batch, seq, q_heads,
//   head_dim], kv_heads, theta, seed, position/input pattern, why the case exists.
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
// production = true: generated into the build tree; the small ones are also checked on
// the CPU, in memory, by tests/cpu/test_mutants_rope.cpp.
#include "rope/rope_oracle.h"

namespace numgate::rope {
namespace {

enum Layout { rh = 0, il = 1 };

CaseSpec make(DType t, Layout layout, std::vector<std::int64_t> shape, std::int64_t kv_heads, double theta,
              std::uint64_t seed, std::string pattern, std::string why, bool production = true) {
  CaseSpec c;
  c.dtype = t;
  c.shape = std::move(shape);
  c.seed = seed;
  c.pattern = std::move(pattern);
  c.params = {{"theta", theta}, {"interleaved", layout == il ? 1.0 : 0.0}, {"kv_heads", static_cast<double>(kv_heads)}};
  c.production = production;
  c.description = std::move(why);
  std::string dims;
  for (auto s : c.shape) dims += (dims.empty() ? "" : "x") + std::to_string(s);
  c.name = std::string(dtype_name(t)) + (layout == il ? "_il_" : "_rh_") + dims + "_kv" + std::to_string(kv_heads) +
           (theta == 1e4 ? "_t1e4" : theta == 1e6 ? "_t1e6" : "_t" + std::to_string(static_cast<long long>(theta))) +
           "_" + c.pattern + "_seed" + std::to_string(seed);
  return c;
}

}  // namespace

std::vector<CaseSpec> RopeOp::cases() const {
  using D = DType;
  constexpr double t4 = 1e4, t6 = 1e6;
  constexpr bool committed = false;
  return {
      // committed (carry the CPU mutants; both at vector-unit head_dim 16, odd phases in the
      // misaligned replay): interleaved bf16 with the long positions and grouped-query heads;
      // rotate-half fp32 (fine enough to see every angle error) with offset positions
      make(D::bf16, il, {2, 3, 4, 16}, 2, t4, 1, "longpos",
           "interleaved, GQA 4:2, positions 32767/1857/15962/...: low-precision angles visibly wrong", committed),
      make(D::fp32, rh, {2, 3, 4, 16}, 1, t6, 2, "offset",
           "rotate-half, MQA 4:1, theta 1e6, sequences starting at 17 and 4110 (not 0)", committed),
      // smallest legal shape (one pair), at position 32767
      make(D::fp32, rh, {1, 1, 1, 2}, 1, t4, 3, "longpos", "smallest legal shape, fp32, position 32767"),
      make(D::bf16, il, {1, 1, 1, 2}, 1, t4, 4, "longpos", "smallest legal shape, bf16, interleaved"),
      make(D::fp16, rh, {1, 1, 1, 2}, 1, t6, 5, "longpos", "smallest legal shape, fp16"),
      // head_dim one below / at / one above a 16-byte unit (scalar vs vector path)
      make(D::bf16, rh, {2, 3, 2, 14}, 1, t4, 6, "longpos", "bf16 rotate-half d/2 = 7: one below a unit (scalar)"),
      make(D::bf16, rh, {2, 3, 2, 16}, 1, t4, 7, "longpos", "bf16 rotate-half d/2 = 8: one unit"),
      make(D::bf16, rh, {2, 3, 2, 18}, 1, t4, 8, "longpos", "bf16 rotate-half d/2 = 9: one above a unit (scalar)"),
      make(D::bf16, il, {2, 3, 2, 6}, 2, t6, 9, "longpos", "bf16 interleaved d = 6: one below a unit"),
      make(D::fp16, il, {2, 3, 2, 8}, 2, t6, 10, "longpos", "fp16 interleaved d = 8: one unit"),
      make(D::bf16, il, {2, 3, 2, 10}, 2, t6, 11, "longpos", "bf16 interleaved d = 10: one above a unit"),
      make(D::fp32, rh, {2, 3, 2, 6}, 1, t4, 12, "offset", "fp32 rotate-half d/2 = 3: one below a unit"),
      make(D::fp32, rh, {2, 3, 2, 8}, 1, t4, 13, "offset", "fp32 rotate-half d/2 = 4: one unit"),
      make(D::fp32, rh, {2, 3, 2, 10}, 1, t4, 14, "offset", "fp32 rotate-half d/2 = 5: one above a unit"),
      make(D::fp32, il, {2, 3, 2, 2}, 1, t6, 15, "longpos", "fp32 interleaved d = 2: below a unit"),
      make(D::fp32, il, {2, 3, 2, 4}, 1, t6, 16, "longpos", "fp32 interleaved d = 4: one unit"),
      make(D::fp32, il, {2, 3, 2, 6}, 1, t6, 17, "longpos", "fp32 interleaved d = 6: one above a unit"),
      // items per token one below / at / one above the 256-thread block
      make(D::bf16, rh, {1, 2, 254, 2}, 1, t4, 18, "longpos", "scalar path: 255 items per token"),
      make(D::bf16, rh, {1, 2, 255, 2}, 1, t4, 19, "longpos", "scalar path: 256 items per token"),
      make(D::bf16, rh, {1, 2, 256, 2}, 1, t4, 20, "longpos", "scalar path: 257 items per token"),
      make(D::bf16, rh, {1, 3, 30, 128}, 1, t6, 21, "longpos", "bf16 vector rotate-half d 128: 31 heads = 248 items"),
      make(D::bf16, rh, {1, 3, 24, 128}, 8, t6, 22, "longpos", "bf16 vector rotate-half d 128: 32 heads = 256 items"),
      make(D::bf16, rh, {1, 3, 32, 128}, 1, t6, 23, "longpos", "bf16 vector rotate-half d 128: 33 heads = 264 items"),
      make(D::fp32, il, {1, 3, 14, 64}, 1, t4, 24, "offset", "fp32 vector interleaved d 64: 15 heads = 240 items"),
      make(D::fp32, il, {1, 3, 8, 64}, 8, t4, 25, "offset", "fp32 vector interleaved d 64: 16 heads = 256 items"),
      make(D::fp32, il, {1, 3, 16, 64}, 1, t4, 26, "offset", "fp32 vector interleaved d 64: 17 heads = 272 items"),
      make(D::bf16, rh, {1, 2, 1, 1024}, 1, t4, 27, "longpos", "largest head_dim: 512 frequencies > 128 threads"),
      make(D::fp32, il, {1, 2, 1, 1024}, 1, t6, 28, "longpos", "largest head_dim, fp32 interleaved"),
      // head_dim 64 / 128, theta 1e4 / 1e6, both layouts, every dtype, GQA / MQA / MHA
      make(D::bf16, rh, {2, 5, 8, 128}, 2, t4, 31, "longpos", "Llama-like: bf16 rotate-half d 128, GQA 8:2"),
      make(D::bf16, il, {2, 5, 8, 128}, 2, t6, 32, "longpos", "bf16 interleaved d 128, theta 1e6"),
      make(D::fp16, rh, {3, 4, 6, 64}, 3, t6, 33, "leftpad", "fp16 rotate-half d 64, left-padded batch, GQA 6:3"),
      make(D::fp16, il, {3, 4, 6, 64}, 6, t4, 34, "offset", "fp16 interleaved d 64, MHA, offset positions"),
      make(D::fp32, rh, {2, 7, 4, 128}, 1, t6, 35, "longpos", "fp32 rotate-half d 128, MQA"),
      make(D::fp32, il, {2, 7, 4, 64}, 4, t4, 36, "longpos", "fp32 interleaved d 64, MHA"),
      make(D::fp32, rh, {4, 6, 2, 64}, 2, t4, 37, "leftpad", "fp32 left-padded batch"),
      make(D::bf16, rh, {4, 6, 4, 64}, 2, t6, 38, "leftpad", "bf16 left-padded batch, GQA 4:2"),
      make(D::fp16, rh, {2, 8, 8, 128}, 2, t6, 39, "longpos", "fp16 rotate-half d 128 at long positions"),
      // NaN / +Inf / -Inf in q, k, dq_rot, dk_rot: same positions as golden
      make(D::fp32, rh, {2, 3, 4, 64}, 2, t4, 41, "nonfinite", "NaN/Inf in every input, fp32"),
      make(D::bf16, il, {2, 3, 4, 64}, 2, t4, 42, "nonfinite", "NaN/Inf in every input, bf16 interleaved"),
      make(D::fp16, rh, {2, 3, 4, 64}, 1, t6, 43, "nonfinite", "NaN/Inf in every input, fp16"),
      // every position 0 .. 32767 once (2^22 elements: still replayed misaligned and row by row)
      make(D::bf16, rh, {1, 32768, 2, 64}, 1, t6, 51, "normal", "one 32K sequence: every position 0..32767"),
      // production (Llama-3-8B / Qwen3-8B attention: 32 q heads, 8 kv heads, head_dim 128).
      // The 4 x 4096 x 32 x 128 would make a ~4.5 GB fixture (FP64 golden values and
      // abs_terms of 4 tensors, 84M elements): 1 x 4096 tokens instead, plus 4 x 512.
      make(D::bf16, rh, {1, 4096, 32, 128}, 8, t6, 101, "normal", "production: 1 x 4096 tokens x 32 heads x 128, bf16"),
      make(D::fp16, rh, {1, 4096, 32, 128}, 8, t4, 102, "normal", "production: 1 x 4096 x 32 x 128, fp16, theta 1e4"),
      make(D::bf16, rh, {4, 512, 32, 128}, 8, t6, 103, "leftpad", "production: batch 4 x 512, left-padded"),
      make(D::bf16, il, {1, 1024, 32, 128}, 8, t4, 104, "longpos", "interleaved 1024 tokens at long positions"),
  };
}

}  // namespace numgate::rope
