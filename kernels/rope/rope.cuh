// numgate — RoPE target kernels: public launcher API.
//
// Rotary position embedding (Su et al. 2021, "RoFormer", arXiv:2104.09864) applied to the
// queries and keys of grouped-query attention in one launch:
//
//   x [tokens, heads, head_dim] row-major (q: q_heads, k: kv_heads; tokens = batch * seq),
//   positions [tokens] int64. For token t, frequency f in [0, d/2) and each pair (x1, x2)
//   of each head:   y1 = x1 c - x2 s,  y2 = x2 c + x1 s,  (c, s) = cos / sin of
//   angle = positions[t] * theta^(-2f/d)   (inverse = true: s -> -s, the backward pass:
//   dq = R(-angle) dq_rot, dk = R(-angle) dk_rot)
//   pairing: interleaved = false: rotate-half (x[f], x[f + d/2]) (Llama / Qwen / NeoX);
//            interleaved = true:  (x[2f], x[2f + 1]) (GPT-J).
//
// Numerics (the declared policy of rope_math.h, which the reference oracle also follows):
// inv_freq_f = RN_fp32(theta^(-2f/d)) computed once per launch on the host in FP64 and
// passed to the kernel (bitwise the reference's table); angle = float(p) * inv_freq_f in
// FP32 (one rounding; the documented choice: the angle is formed in FP32 from the integer
// position, as HF does; exact float(p) for |p| < 2^24); c, s = RN_fp32 of the FP64 cos/sin
// of that FP32 angle (device sincos in double: full range reduction, never __sinf/__cosf);
// the rotation in FP32 with __fmul_rn / __fsub_rn / __fadd_rn (no FMA), one rounding to T.
//
// Work split: one block per token. The block computes (c, s) once per frequency into
// shared memory and reuses them for every q head and every k head of the token; then each
// thread rotates "items": with 16-byte units (VEC = 8 bf16/fp16, 4 fp32 elements), a
// rotate-half item is a unit of the first half and its partner unit d/2 further, an
// interleaved item is one unit (VEC/2 whole pairs). A tensor takes this vector path when
// its input and output are 16-byte aligned and (d/2) % VEC == 0 (rotate-half) or
// d % VEC == 0 (interleaved); otherwise (any other element alignment, e.g. the
// misaligned replay) an item is one pair, loaded and stored element by element. q and k
// decide separately. Block size: min(256, items per token rounded up to a warp), >= 32.
//
// Limits: tokens in [0, 2^31 - 1]; q_heads, kv_heads >= 1 with kv_heads dividing q_heads;
// head_dim even in [2, 1024]; (q_heads + kv_heads) * head_dim / 2 <= 2^31 - 1. positions
// may have any byte alignment (it is read byte-wise when not 8-byte aligned); every other
// pointer must be aligned to sizeof(T). Tensors must not overlap (no in-place operation).
//
// Determinism: no atomics, no reductions: every output element is a fixed function of its
// pair, its position and theta, so repeated launches are bitwise identical and a token's
// (or a head's) result does not depend on what else is launched with it.
//
// Errors: cudaErrorInvalidValue, nothing launched, for arguments outside the limits or a
// null pointer when tokens > 0; otherwise cudaGetLastError() after enqueueing on `stream`.
// Never synchronizes.
//
// Plain host C++ header (compiles with g++); kernels in rope_kernels.cu, instantiated for
// float, __half and __nv_bfloat16 (the FP32 policy above) and double: FP64 throughout
// (inv_freq = pow(theta, -2f/d) on the device, angle = double(p) * inv_freq, FP64 sincos,
// the rotation in FP64 without FMA); the double instantiation is compiled, not yet
// exercised by fixture cases.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::rope {

/// Rotates q and k of `tokens` tokens by their positions' angles (inverse: by minus them).
///
/// @param q, k          device, [tokens, q_heads, head_dim] and [tokens, kv_heads, head_dim]
/// @param positions     device, [tokens] int64 position ids (any integers), any alignment
/// @param q_out, k_out  device outputs, same shapes as q and k; must not overlap the inputs
/// @param theta         RoPE base (1e4, 1e6, ...), > 0
/// @param interleaved   false: rotate-half pairing; true: interleaved (GPT-J) pairing
/// @param inverse       false: forward (q_rot, k_rot); true: backward (dq, dk from dq_rot, dk_rot)
template <typename T>
cudaError_t apply(const T* q, const T* k, const std::int64_t* positions, T* q_out, T* k_out, std::int64_t tokens,
                  std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim, double theta, bool interleaved,
                  bool inverse, cudaStream_t stream);

#define NUMGATE_ROPE_EXTERN(T)                                                                                  \
  extern template cudaError_t apply<T>(const T*, const T*, const std::int64_t*, T*, T*, std::int64_t,          \
                                       std::int64_t, std::int64_t, std::int64_t, double, bool, bool, cudaStream_t);
NUMGATE_ROPE_EXTERN(float)
NUMGATE_ROPE_EXTERN(double)
NUMGATE_ROPE_EXTERN(__half)
NUMGATE_ROPE_EXTERN(__nv_bfloat16)
#undef NUMGATE_ROPE_EXTERN

}  // namespace numgate::rope
