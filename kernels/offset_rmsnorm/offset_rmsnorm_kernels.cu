/*
OffsetRMSNorm forward and backward kernels (numgate target kernels).

The op: RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization") with a
zero-centred weight, as in Gemma (transformers GemmaRMSNorm: x.float() normalized, times
(1.0 + weight.float()), cast once) and Qwen3-Next / Qwen3.5. For a row x[0..H):

    rstd = 1 / sqrt( sum_i x_i^2 / H + eps )
    y_i  = (x_i * rstd) * (1 + w_i)

Backward, with wp_i = 1 + w_i, g_i = dy_i * wp_i, xhat_i = x_i * rstd:

    dx_i = rstd * ( g_i - xhat_i * rstd * (sum_j g_j * x_j) / H )
    dw_i = sum over rows of dy_i * xhat_i         (d wp / d w = 1)

Numerics contract (the CPU reference in offset_rmsnorm_oracle.cpp mirrors it). acc is
float for T = float, __half, __nv_bfloat16 and double for T = double. Every listed
scalar operation is one IEEE operation, round to nearest; sums may be evaluated in any
fixed tree order and a*b+c may be fused (FMA) except in
the backward g_i and dx_i, which are computed without contraction (mul_rn/sub_rn), in the
reference's order: dx cancels for hidden 1 and must round as the reference does:

  forward, per row:   ss   = sum_i acc(x_i)^2 ; r = 1 / sqrt(ss / acc(H) + acc(eps))
                      (correctly rounded divide and sqrt, never rsqrtf)
                      wp_i = acc(1) + acc(w_i)                  <- in acc, never in T
                      y_i  = T( (acc(x_i) * r) * wp_i )
  backward, per row:  g_i  = acc(dy_i) * wp_i ; r as above
                      mgx  = (sum_i g_i * acc(x_i)) / acc(H) ; xhat_i = acc(x_i) * r
                      dx_i = T( r * (g_i - xhat_i * (r * mgx)) )
  weight gradient:    dw_j = T( sum_rows acc(dy[r,j]) * (acc(x[r,j]) * r_r) ), r_r bitwise the
                      value used for dx (fused path: the same register; separate path: stored
                      in the workspace and read back), summed in acc by a two-stage
                      reduction in a fixed order (below).

NaN/Inf are not special-cased: a NaN in a row makes the row's sums NaN; an Inf in x gives
rstd = 0, so y = 0 at the finite elements and NaN (Inf * 0) at the Inf.

Design: the shared row-norm skeleton, kernels/common/row_norm.cuh, with the policy
row_norm::OffsetRmsPolicy (rmsnorm's statistic, weight acc(1) + acc(w) formed in acc);
everything but the policy is rmsnorm's design (see rmsnorm_kernels.cu):

  forward: one block per row, x cached in registers (K in {1, 2, 4, 8}, fp64 {1, 2, 4},
  preferred block <= 384 threads), read once, by the aligned or the general cached kernel
  (rmsnorm's); rows beyond the cache stream (x read twice).

  backward, fused path (H % VEC == 0 and <= 1024 units per row): one block per chunk of
  ceil(rows / max(1, 2097152 / H)) rows (a function of (rows, H) only) computes dx and
  accumulates the dw partial of its columns in registers over its rows in row order; rows
  in flight through a cp.async ring of 3 row slots in shared memory (x, dy 16-byte
  aligned; w then held in registers for the whole chunk) or prefetched into registers;
  one partial row per chunk.
  backward, separate path (other shapes): dx one block per row, r stored per row; stage 1
  re-reads x and dy per chunk of R rows (R = 64 for H >= 1024, up to 1024 for narrow
  rows) in 32x8 column tiles: thread row ty sums rows ty, ty+8, ... ascending, then the 8
  thread rows in order 0..7.
  stage 2: dw[j] = T(sum over chunks of partial[c][j]) by an 8x32 block per 8 columns:
  chunk lanes ty, ty+32, ... ascending, then the 32 lane sums in order 0..31.

  Reduction order of dw: since the move to the skeleton, the shapes of the fused path
  (H % VEC == 0, <= 1024 units) sum each chunk's rows sequentially in row order (one
  of about 2097152 / H chunks) instead of the separate path's 64-row chunks in 8 row
  lanes; a different fixed order, within the contract above (any fixed tree order).

  The block shape of a row depends only on H, the dtype and x's 16-byte phase, so a row
  launched alone gives bitwise the row of the batched launch; dw is independent of the
  grid and of the device (chunking from (rows, H) only).

  Minimal bytes per pass: forward 2 * rows * H * sizeof(T) + H * sizeof(T); backward
  3 * rows * H * sizeof(T) + 2 * H * sizeof(T), plus the partials (chunks * H * acc,
  written and read once).
  Measured (H200, numgate-bench kernel clock, bf16, run 16; copy = D2D memcpy, 4246 GB/s):
    forward  4x512x4096 (33.6 MB) 10.61 us, 74% of copy; 1x2048x5120 (42.0 MB) 12.83 us, 77%.
    backward 4x512x4096 (50.3 MB) 22.61 us, 52%; 1x2048x5120 (62.9 MB) 26.39 us, 56%.
  What limits them now: rmsnorm's (rmsnorm_kernels.cu, common/row_norm.cuh): the
  forward's fixed per-launch cost at 2048 rows (about two waves of blocks), its steady
  state near copy speed; the backward's per-chunk latency (2-4 blocks per SM, 2 rows in
  flight each).

Limits: 1 <= H <= 65536, 0 <= rows <= 2^31 - 1, pointers aligned to sizeof(T), no
overlap. Build without --use_fast_math.
*/

#include "offset_rmsnorm/offset_rmsnorm.cuh"

#include <cstdint>

#include "common/row_norm.cuh"

namespace numgate::offset_rmsnorm {
namespace {

namespace rn = numgate::row_norm;
using P = rn::OffsetRmsPolicy;
using numgate::device::acc_t;
using rn::aligned_to_element;

constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxRows = 2147483647;

bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps, cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(y)) return cudaErrorInvalidValue;
  const rn::FwdArgs<T> a{x, nullptr, w, nullptr, nullptr, y, static_cast<int>(hidden), static_cast<A>(eps)};
  return rn::launch_forward<P, T>(a, rows, stream);
}

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return rn::workspace_bytes<P>(rows, hidden);
}

template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows, int64_t hidden, double eps,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (dw == nullptr || !aligned_to_element(dw)) return cudaErrorInvalidValue;
  if (rows == 0) {
    const cudaError_t err = cudaMemsetAsync(dw, 0, static_cast<size_t>(hidden) * sizeof(T), stream);
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (x == nullptr || w == nullptr || dy == nullptr || dx == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(dy) || !aligned_to_element(dx))
    return cudaErrorInvalidValue;
  if (workspace == nullptr || workspace_bytes < backward_workspace_bytes(rows, hidden)) return cudaErrorInvalidValue;
  rn::BwdArgs<T> a{};
  a.x = x;
  a.w = w;
  a.dy = dy;
  a.dx = dx;
  a.rows = rows;
  a.hidden = static_cast<int>(hidden);
  a.eps = static_cast<A>(eps);
  return rn::launch_backward<P, T>(a, dw, nullptr, workspace, false, stream);
}

#define NUMGATE_OFFSET_RMSNORM_INST(T)                                                                        \
  template cudaError_t forward<T>(const T*, const T*, T*, int64_t, int64_t, double, cudaStream_t);            \
  template cudaError_t backward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, double, void*, \
                                   size_t, cudaStream_t);
NUMGATE_OFFSET_RMSNORM_INST(float)
NUMGATE_OFFSET_RMSNORM_INST(double)
NUMGATE_OFFSET_RMSNORM_INST(__half)
NUMGATE_OFFSET_RMSNORM_INST(__nv_bfloat16)
#undef NUMGATE_OFFSET_RMSNORM_INST

}  // namespace numgate::offset_rmsnorm
