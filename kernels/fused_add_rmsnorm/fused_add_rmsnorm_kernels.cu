/*
Fused residual-add + RMSNorm forward and backward kernels (numgate target kernels).

The op (the pre-norm residual step of Llama / Qwen decoders, as fused by vLLM's
fused_add_rms_norm and FlashInfer's fused_add_rmsnorm; RMSNorm from Zhang & Sennrich
2019). For a row of x and residual [rows, H], with h the acc (FP32) sum:

    h_i            = x_i + residual_i
    residual_out_i = T(h_i)
    rstd           = 1 / sqrt( sum_i h_i^2 / H + eps )   (from the acc h, not from T(h))
    y_i            = (h_i * rstd) * w_i

Backward, with g_i = dy_i * w_i, hhat_i = h_i * rstd, and the gradient of residual_out
(dres) flowing straight through the add:

    dx_i = rstd * ( g_i - hhat_i * rstd * (sum_j g_j * h_j) / H ) + dres_i
    d residual = dx (one tensor)
    dw_i = sum over rows of dy_i * hhat_i

Numerics contract (mirrored by the CPU reference in fused_add_rmsnorm_oracle.cpp). acc is
float for T = float, __half, __nv_bfloat16 and double for T = double; every listed scalar
operation is one IEEE operation, round to nearest; sums in any fixed tree order; a*b+c may be fused (FMA) except in
the backward g_i and dx_i, which are computed without contraction (mul_rn/sub_rn), in the
reference's order: dx cancels for hidden 1 and must round as the reference does:

  forward, per row:   h_i  = acc(x_i) + acc(residual_i)
                      residual_out_i = T(h_i)
                      ss   = sum_i h_i^2 ; r = 1 / sqrt(ss / acc(H) + acc(eps))
                      (correctly rounded divide and sqrt, never rsqrtf)
                      y_i  = T( (h_i * r) * acc(w_i) )
  backward, per row:  h_i as above (recomputed from x and residual, bitwise the same)
                      g_i  = acc(dy_i) * acc(w_i) ; r as above
                      mgh  = (sum_i g_i * h_i) / acc(H) ; hhat_i = h_i * r
                      dx_i = T( r * (g_i - hhat_i * (r * mgh)) + acc(dres_i) )
  weight gradient:    dw_j = T( sum_rows acc(dy[r,j]) * (h[r,j] * r_r) ), r_r bitwise the value
                      used for dx (fused path: the same register; separate path: stored in
                      the workspace and read back), two-stage fixed-order sum.

NaN/Inf: not special-cased. A NaN (or Inf - Inf) in h makes the row's sums NaN; an Inf in
h gives rstd = 0 (y = 0 at the finite elements, NaN at the Inf); residual_out is
elementwise, so it has NaN/Inf exactly where h has (and Inf where a finite sum
overflows T, e.g. fp16 40000 + 30000).

Design: the shared row-norm skeleton, kernels/common/row_norm.cuh, with the policy
row_norm::FusedAddRmsPolicy (rmsnorm's statistic over h = acc(x) + acc(residual);
residual_out = T(h) written in the forward's first phase; acc(d_residual_out) added to dx
with add_rn). Everything but the policy is rmsnorm's design (rmsnorm_kernels.cu):

  forward: one block per row, x and residual cached in registers (K in {1, 2, 4},
  preferred block <= 1024 threads: one unit per thread up to 1024 units, measured fastest),
  both read once, by the aligned or the general cached kernel (rmsnorm's); h is formed again from the cached
  registers for the normalize step (same bits). Rows beyond 4096 units stream (read
  twice).

  backward, fused path (H % VEC == 0 and <= 1024 units per row): one block per chunk of
  ceil(rows / max(1, 1966080 / H)) rows (a function of (rows, H) only) computes dx and
  accumulates the dw partial of its columns in registers over its rows in row order;
  d_residual_out is read once. When x, residual and dy are 16-byte aligned the next row
  is copied by cp.async into a ring of 2 row slots (x, residual, dy: 3 tensors per slot,
  so 2 slots rather than rmsnorm's 3 keep 3 blocks per SM at bf16 H = 5120), each
  thread holds its units of w in registers for the whole chunk and loads its units of
  the row's d_residual_out at the row's start (they arrive while the row's sums are
  reduced); else rows are loaded into registers and d_residual_out in the dx phase. One
  partial row per chunk.
  backward, separate path (other shapes): dx one block per row (x, residual, dy cached,
  K in {1, 2}; streaming beyond 2048 units), r stored per row; stage 1 re-reads x,
  residual and dy per chunk of R rows (R = 64 for H >= 1024, up to 1024 for narrow rows)
  in 32x8 column tiles: thread row ty sums rows ty, ty+8, ... ascending, then the 8
  thread rows in order 0..7. stage 2: a fixed-order sum over chunks (32x32 block), T.

  Reduction order: since the move to the skeleton, fused-path shapes sum each chunk's
  dw rows sequentially in row order instead of the separate path's 64-row chunks in 8
  row lanes; and their backward rows of 513..1024 units (e.g. bf16 H = 5120) now run in
  blocks of <= 256 threads with K = 4 instead of K = 2 with up to 512 threads, so the
  block reduction tree of their row sums changed too. Fixed orders, within the contract
  above; rows of other lengths keep their block shapes.

  The block shape of a row depends only on H, the dtype and x's 16-byte phase: a row
  launched alone gives bitwise the row of the batched launch.

  Minimal bytes per pass: forward 4 * rows * H * sizeof(T) + H * sizeof(T) (x, residual
  read; residual_out, y written); backward 5 * rows * H * sizeof(T) + 2 * H * sizeof(T)
  (x, residual, dy, d_residual_out read; dx written), plus the partials.
  Measured (H200, numgate-bench kernel clock, bf16, run 16; copy = D2D memcpy, 4246 GB/s):
    forward  4x512x4096 (67.1 MB) 18.43 us, 86% of copy; 1x2048x5120 (83.9 MB) 22.15 us, 89%.
    backward 4x512x4096 (83.9 MB) 29.74 us, 66%;         1x2048x5120 (104.9 MB) 35.77 us, 69%.
  What limits them now: the forward at 2048 rows, where the peers' kernels were as fast or
  faster. In one process on the H200 (profiler kernel time, run 33; copy 4270 GB/s) this
  kernel read 17.22 us at 4x512x4096 (91% of copy) against torch.compile's 16.60 and Liger's
  17.71, and 22.84 us at 1x2048x5120 (86%) against Liger's 22.42 and torch.compile's 24.13.
  Since run 35 residual_out is stored without the evict-first hint, as Inductor's kernel
  stores it (its two passes over the row were not what made it faster): on an H100
  (numgate-bench kernel clock, copy 3044 GB/s) 22.63 us at 4x512x4096 and 29.19 us at
  1x2048x5120 (87% of copy each), from 24.14 / 30.21 in run 34, ahead of each shape's best
  peer (torch.compile 23.93, Liger 30.13); not yet measured on the H200.
  The backward (47.50 us at 1x2048x5120 before w went to registers and d_residual_out to
  the row's start, run 16) is bound by the per-row chain (common/row_norm.cuh, the
  backward's limit): at H = 5120, 160-thread blocks (K = 4, 127 registers), 3 per SM, 1
  row in flight each.

Limits: 1 <= H <= 65536, 0 <= rows <= 2^31 - 1, pointers aligned to sizeof(T), no
overlap. Build without --use_fast_math.
*/

#include "fused_add_rmsnorm/fused_add_rmsnorm.cuh"

#include <cstdint>

#include "common/row_norm.cuh"

namespace numgate::fused_add_rmsnorm {
namespace {

namespace rn = numgate::row_norm;
using P = rn::FusedAddRmsPolicy;
using numgate::device::acc_t;
using rn::aligned_to_element;

constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxRows = 2147483647;

bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* residual, const T* w, T* residual_out, T* y, int64_t rows, int64_t hidden,
                    double eps, cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!x || !residual || !w || !residual_out || !y) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(residual) || !aligned_to_element(w) ||
      !aligned_to_element(residual_out) || !aligned_to_element(y))
    return cudaErrorInvalidValue;
  const rn::FwdArgs<T> a{x, residual, w, nullptr, residual_out, y, static_cast<int>(hidden), static_cast<A>(eps)};
  return rn::launch_forward<P, T>(a, rows, stream);
}

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return rn::workspace_bytes<P>(rows, hidden);
}

template <typename T>
cudaError_t backward(const T* x, const T* residual, const T* w, const T* dy, const T* d_residual_out, T* dx, T* dw,
                     int64_t rows, int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (dw == nullptr || !aligned_to_element(dw)) return cudaErrorInvalidValue;
  if (rows == 0) {
    const cudaError_t err = cudaMemsetAsync(dw, 0, static_cast<size_t>(hidden) * sizeof(T), stream);
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (!x || !residual || !w || !dy || !d_residual_out || !dx) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(residual) || !aligned_to_element(w) || !aligned_to_element(dy) ||
      !aligned_to_element(d_residual_out) || !aligned_to_element(dx))
    return cudaErrorInvalidValue;
  if (workspace == nullptr || workspace_bytes < backward_workspace_bytes(rows, hidden)) return cudaErrorInvalidValue;
  rn::BwdArgs<T> a{};
  a.x = x;
  a.res = residual;
  a.w = w;
  a.dy = dy;
  a.dres = d_residual_out;
  a.dx = dx;
  a.rows = rows;
  a.hidden = static_cast<int>(hidden);
  a.eps = static_cast<A>(eps);
  return rn::launch_backward<P, T>(a, dw, nullptr, workspace, false, stream);
}

#define NUMGATE_FUSED_ADD_RMSNORM_INST(T)                                                                    \
  template cudaError_t forward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, double, cudaStream_t); \
  template cudaError_t backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t,   \
                                   double, void*, size_t, cudaStream_t);
NUMGATE_FUSED_ADD_RMSNORM_INST(float)
NUMGATE_FUSED_ADD_RMSNORM_INST(double)
NUMGATE_FUSED_ADD_RMSNORM_INST(__half)
NUMGATE_FUSED_ADD_RMSNORM_INST(__nv_bfloat16)
#undef NUMGATE_FUSED_ADD_RMSNORM_INST

}  // namespace numgate::fused_add_rmsnorm
