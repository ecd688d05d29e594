/*
RMSNorm forward and backward kernels (the numgate target kernels for RMSNorm).

The op (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; the Llama /
Qwen3 form: no mean subtraction, no bias, eps inside the square root, the weight
applied after normalizing). For a row x[0..H) of a row-major [rows, H] tensor:

    rstd = 1 / sqrt( sum_i x_i^2 / H + eps )
    y_i  = (x_i * rstd) * w_i

Backward. With g_i = dy_i * w_i and xhat_i = x_i * rstd, differentiating y through
rstd gives d rstd / d x_i = -rstd^3 * x_i / H, hence

    dx_i = rstd * ( g_i - xhat_i * rstd * (sum_j g_j * x_j) / H )
    dw_i = sum over rows of dy_i * xhat_i

Numerics contract (the CPU reference in rmsnorm_oracle.cpp mirrors it). acc is float
for T = float, __half, __nv_bfloat16 and double for T = double. Every listed scalar
operation is one IEEE operation, round to nearest; sums may be evaluated in any fixed
tree order and a*b+c may be fused (FMA) except in
the backward g_i and dx_i, which are computed without contraction (mul_rn/sub_rn), in the
reference's order: dx cancels for hidden 1 and must round as the reference does:

  forward, per row:   ss   = sum_i acc(x_i)^2
                      ms   = ss / acc(H)
                      r    = 1 / sqrt(ms + acc(eps))     (correctly rounded divide and
                                                          sqrt: __fdiv_rn/__fsqrt_rn,
                                                          never rsqrtf)
                      y_i  = T( (acc(x_i) * r) * acc(w_i) )
  backward, per row:  g_i  = acc(dy_i) * acc(w_i)
                      s    = sum_i acc(x_i)^2 ;  r as above
                      mgx  = (sum_i g_i * acc(x_i)) / acc(H)
                      xhat = acc(x_i) * r
                      dx_i = T( r * (g_i - xhat * (r * mgx)) )
  weight gradient:    dw_j = T( sum_rows acc(dy[r,j]) * (acc(x[r,j]) * r_r) )
                      with r_r bitwise the value used for dx (the fused path uses
                      the same register; the separate path stores r (as acc) in the
                      workspace and reads it back), summed in acc in a fixed order
                      by a two-stage reduction (below).

Inputs with NaN/Inf are not special-cased: a NaN anywhere in a row makes the row's
sums NaN and so every output of the row; an Inf in x gives rstd = 0 and Inf * 0 = NaN.

Design: the shared row-norm skeleton, kernels/common/row_norm.cuh, with the policy
row_norm::RmsPolicy (statistic sum x^2, weight w, no residual, no bias). In short:

  Vector access on a virtual grid. A row of T starting at address p is viewed on a
  16-byte grid that starts shift = (p % 16) / sizeof(T) elements before p; unit u covers
  row elements [u*VEC - shift, (u+1)*VEC - shift) clipped to [0, H), VEC = 16 / sizeof(T).
  x's full units are always 16-byte aligned; every other tensor moves a full unit as one
  16-byte access when (ptr - shift) is 16-byte aligned (checked once per row, uniform
  across the block), else element by element. Production tensors take the vector path.

  forward: one block per row, ONE pass over x from DRAM. Each thread caches K units of x
  (4 registers per unit) through the block reduction of sum x^2 and the normalize step.
  Thread t owns units t, t + B, ..., so every warp access touches 512 contiguous bytes.
  K is the smallest of {1, 2, 4, 8} (fp64 {1, 2, 4}) with ceil(units / K) <= 384 threads
  (else the largest K if that needs <= 1024 threads); rows beyond that cache (fp32
  H > 32768, bf16/fp16 H > 65529 or unaligned 65536, fp64 H > 8192) use a streaming
  kernel that reads x twice (the second read mostly from L2). Two cached kernels of the
  same arithmetic (common/row_norm.cuh): the aligned one when H % VEC == 0 and x, w, y are
  16-byte aligned (w loaded with x, evict-first x and y, no per-element range tests), the
  general one otherwise.

  backward, fused path (H % VEC == 0 and the row's <= 1024 units fit a block of <= 256
  threads: with x 16-byte aligned bf16/fp16 H <= 8192, fp32 H <= 4096, fp64 H <= 2048).
  One block per chunk of ceil(rows / max(1, 2097152 / H)) rows (a function of (rows, H)
  only, never of the GPU: about 512 chunks at H = 4096, 409 at 5120) walks its rows in
  order, computes dx and accumulates acc(dy) * xhat for its columns in registers (xhat
  bitwise the value used for dx), then writes one partial row per chunk. x and 16-byte
  aligned dy: the next 2 rows are copied by cp.async into a ring of 3 row slots in shared
  memory (each thread reads back only its own units) and each thread holds its units of
  w in registers for the whole chunk; otherwise the next row is prefetched into a second
  register set. Rows of at most 8 units (bf16 / fp16 H <= 64, fp32 H <= 32, fp64 H <= 16)
  with x, dy and dx 16-byte aligned run one chunk per warp instead, its rows spread over
  the warp's lane groups (row_norm_backward_warp_rows_kernel: the same dx and partials bit
  for bit). x and dy are read once.

  backward, separate path (H % VEC != 0, or longer rows): dx one block per row (x and dy
  cached, K in {1, 2, 4}, preferred block <= 256 threads; streaming kernel beyond 4096
  units), r stored per row in the workspace; dw stage 1 re-reads x and dy in chunks of R
  rows (R = 64 for H >= 1024, taller for narrow rows, up to 1024), a 32x8 block per
  column tile: thread row ty sums rows ty, ty+8, ... ascending, then the 8 thread rows in
  order 0..7 (16-byte loads per unit when H % VEC == 0 and x, dy are aligned; the same
  order either way).

  dw stage 2 (deterministic): dw[j] = T(sum over chunks of partial[c][j]), an 8x32 block
  per 8 columns: thread row ty sums chunks ty, ty+32, ... ascending (loads unrolled by 32),
  then the 32 lane sums in order 0..31. backward_atomic_dw replaces it by one atomicAdd per (chunk,
  column) into a zeroed FP32 (FP64) accumulator, then one rounding kernel (the order of
  the additions is the blocks' arrival order).

  Reductions are warp shuffle-xor butterflies plus one shared-memory round across warps
  (common/cuda_utils.cuh), in an order fixed by the block size, which depends only on H,
  the dtype and x's 16-byte phase: a row launched alone gives bitwise the row of the
  batched launch; moving x to a different 16-byte phase may change the last bits of the
  sums (still within the contract above).

  Minimal bytes per pass: forward 2 * rows * H * sizeof(T) + H * sizeof(T) (x read, y
  written, w once); backward 3 * rows * H * sizeof(T) + 2 * H * sizeof(T) (x, dy read, dx
  written; w read, dw written) plus the partials (chunks * H * sizeof(acc), written once
  and read once: ~8 MB at most on the fused path, L2-resident).
  Measured (H200, numgate-bench kernel clock, bf16, run 16; copy = D2D memcpy, 4246 GB/s):
    forward  4x512x4096  (33.6 MB) 10.43 us, 76% of copy; 1x8192x4096 (134 MB) 34.56 us, 91%.
    backward 4x512x4096  (50.3 MB) 22.05 us, 54%;         1x8192x4096 (201 MB) 67.71 us, 70%.
  What limits them now: the forward's steady state runs at copy speed (the 6144 rows
  between the two shapes take 24.1 us, 4.17 TB/s); the 2048-row launch (1.94 waves of
  256-thread blocks) pays a fixed per-launch cost (Liger 9.69 us). The general kernel was
  issue-bound (Nsight Compute; common/row_norm.cuh), which the aligned one relieves. The
  backward with 512 chunks (since run 36; on an H100, numgate-bench kernel clock,
  1x8192x4096 87.60 us = 72% of copy, from 90.60 with 456 chunks) is bound by the per-row
  chain: launched alone its first stage moves 87-89% of copy, back to back 79% (the
  difference is the previous launch's L2 write-back, run 38), and the stage-2 launch adds
  3.5 us (the figures: common/row_norm.cuh, the backward's limit).

Limits: 1 <= H <= 65536, 0 <= rows <= 2^31 - 1 (at most one block per row in grid.x), pointers
aligned to sizeof(T), no overlap between tensors. Build without --use_fast_math (the
divide and sqrt use explicit _rn intrinsics, but fast-math would also flush denormals).
*/

#include "rmsnorm/rmsnorm.cuh"

#include <cstdint>

#include "common/row_norm.cuh"

namespace numgate::rmsnorm {
namespace {

namespace rn = numgate::row_norm;
using P = rn::RmsPolicy;
using numgate::device::acc_t;

constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxRows = 2147483647;  // grid.x limit: one block per row

bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

template <typename T>
cudaError_t forward_impl(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps,
                         cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!rn::aligned_to_element(x) || !rn::aligned_to_element(w) || !rn::aligned_to_element(y))
    return cudaErrorInvalidValue;
  const rn::FwdArgs<T> a{x, nullptr, w, nullptr, nullptr, y, static_cast<int>(hidden), static_cast<A>(eps)};
  return rn::launch_forward<P, T>(a, rows, stream);
}

/// backward() and backward_atomic_dw(): the same dx and dw partials; stage 2 of dw in a
/// fixed order (atomic false) or by atomics.
template <typename T>
cudaError_t backward_impl(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows, int64_t hidden,
                          double eps, void* workspace, size_t workspace_bytes, cudaStream_t stream, bool atomic) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (dw == nullptr || !rn::aligned_to_element(dw)) return cudaErrorInvalidValue;
  if (rows == 0) {
    // No rows: the weight gradient is an empty sum. All-zero bits are +0 in every T.
    const cudaError_t err = cudaMemsetAsync(dw, 0, static_cast<size_t>(hidden) * sizeof(T), stream);
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (x == nullptr || w == nullptr || dy == nullptr || dx == nullptr) return cudaErrorInvalidValue;
  if (!rn::aligned_to_element(x) || !rn::aligned_to_element(w) || !rn::aligned_to_element(dy) ||
      !rn::aligned_to_element(dx))
    return cudaErrorInvalidValue;
  const size_t needed =
      atomic ? backward_atomic_dw_workspace_bytes(rows, hidden) : backward_workspace_bytes(rows, hidden);
  if (workspace == nullptr || workspace_bytes < needed) return cudaErrorInvalidValue;
  rn::BwdArgs<T> a{};
  a.x = x;
  a.w = w;
  a.dy = dy;
  a.dx = dx;
  a.rows = rows;
  a.hidden = static_cast<int>(hidden);
  a.eps = static_cast<A>(eps);
  return rn::launch_backward<P, T>(a, dw, nullptr, workspace, atomic, stream);
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps,
                    cudaStream_t stream) {
  return forward_impl<T>(x, w, y, rows, hidden, eps, stream);
}

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return rn::workspace_bytes<P>(rows, hidden);
}

size_t backward_atomic_dw_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return rn::atomic_workspace_bytes<P>(rows, hidden);
}

template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                     int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream) {
  return backward_impl<T>(x, w, dy, dx, dw, rows, hidden, eps, workspace, workspace_bytes, stream, false);
}

template <typename T>
cudaError_t backward_atomic_dw(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                               int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  return backward_impl<T>(x, w, dy, dx, dw, rows, hidden, eps, workspace, workspace_bytes, stream, true);
}

// -------------------------------------------------------------------------------------
// explicit instantiations: the supported element types
// -------------------------------------------------------------------------------------

#define NUMGATE_RMSNORM_INST(T)                                                                              \
  template cudaError_t forward<T>(const T*, const T*, T*, int64_t, int64_t, double, cudaStream_t);          \
  template cudaError_t backward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, double, void*,   \
                                   size_t, cudaStream_t);                                                   \
  template cudaError_t backward_atomic_dw<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, double, \
                                             void*, size_t, cudaStream_t);
NUMGATE_RMSNORM_INST(float)
NUMGATE_RMSNORM_INST(double)
NUMGATE_RMSNORM_INST(__half)
NUMGATE_RMSNORM_INST(__nv_bfloat16)
#undef NUMGATE_RMSNORM_INST

}  // namespace numgate::rmsnorm
