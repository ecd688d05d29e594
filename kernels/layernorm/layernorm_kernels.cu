/*
LayerNorm forward and backward kernels (the numgate target kernels for LayerNorm).

The op (Ba, Kiros & Hinton 2016, "Layer Normalization"; the form of
torch.nn.functional.layer_norm with weight and bias over the last dimension: biased
variance, eps inside the square root). For a row x[0..H) of a row-major [rows, H] tensor:

    mean = sum_i x_i / H
    var  = sum_i (x_i - mean)^2 / H
    rstd = 1 / sqrt(var + eps)
    y_i  = ((x_i - mean) * rstd) * w_i + b_i

Backward. With g_i = dy_i * w_i and xhat_i = (x_i - mean) * rstd:

    dx_i = rstd * ( g_i - mean_j g_j - xhat_i * mean_j(g_j * xhat_j) )
    dw_i = sum over rows of dy_i * xhat_i ;  db_i = sum over rows of dy_i

(mean_j(g_j xhat_j) is computed as rstd * (sum_j g_j d_j) / H with d_j = x_j - mean, so
the backward needs only the sums of d^2, g and g*d besides the mean.)

Numerics contract (the CPU reference in layernorm_oracle.cpp mirrors it). acc is float
for T = float, __half, __nv_bfloat16 and double for T = double. Every listed scalar
operation is one IEEE operation, round to nearest; sums may be evaluated in any fixed
tree order and a*b+c may be fused (FMA) except in
the backward g_i and dx_i, which are computed without contraction (mul_rn/sub_rn), in the
reference's order: dx cancels for hidden 1 and must round as the reference does:

  forward, per row:   s    = sum_i acc(x_i)
                      mean = s / acc(H)
                      d_i  = acc(x_i) - mean                (real lanes only)
                      q    = sum_i d_i * d_i                (real lanes only: padding never enters)
                      r    = 1 / sqrt(q / acc(H) + acc(eps)) (correctly rounded divide and
                                                             sqrt: __fdiv_rn/__fsqrt_rn,
                                                             never rsqrtf)
                      y_i  = T( (d_i * r) * acc(w_i) + acc(b_i) )
  backward, per row:  mean, d_i, r as above (q in the same block reduction as the next two)
                      g_i  = acc(dy_i) * acc(w_i)
                      a    = (sum_i g_i) / acc(H)
                      c    = r * ((sum_i g_i * d_i) / acc(H))
                      xhat = d_i * r
                      dx_i = T( r * ((g_i - a) - xhat * c) )
  weight/bias grads:  dw_j = T( sum_rows acc(dy[r,j]) * xhat[r,j] ),  db_j = T( sum_rows acc(dy[r,j]) )
                      with xhat computed by the same expression from the same mean and r as
                      for dx (fused path: the same registers; separate path: mean and r are
                      stored as acc in the workspace and read back), summed in acc in a fixed
                      order by a two-stage reduction (below).

The variance is two-pass over the cached row (mean first, then the sum of squared
deviations), never E[x^2] - E[x]^2: a constant row gives d = 0 exactly, var = 0, and
y = b exactly (0 * r * w + b). Inputs with NaN/Inf are not special-cased: a NaN in a row
makes its mean and so every y and dx of the row NaN; an Inf in x makes d NaN/Inf and the
variance NaN, so again the whole row; a NaN in dy makes the row's dx NaN and the column's
db and dw NaN.

Design: the shared row-norm skeleton, kernels/common/row_norm.cuh, with the policy
row_norm::LayerNormPolicy (statistic: mean, then the sum of squared deviations over the
real elements; weight w; bias b; the backward also reduces db). Everything but the
policy is rmsnorm's design (rmsnorm_kernels.cu):

  Vector access on a virtual 16-byte grid chosen per row from x's address (units of
  VEC = 16 / sizeof(T) elements; x's full units 16-byte aligned; every other tensor moves
  a full unit as one 16-byte access when its own address allows, else element-wise).
  Slots of a unit outside the row are loaded as zeros; they add nothing to the sums of x
  and g, and are masked out of the sum of squared deviations (where they would add
  mean^2 each).

  forward: one block per row, ONE pass over x from DRAM: each thread caches K units of x
  (K in {1, 2, 4}, fp64 {1, 2}; preferred block <= 160 threads: 4 units per thread at
  H = 4096 and 5120, measured fastest) through both block
  reductions (sum x, then sum d^2) and the normalize step. Rows longer than 4096 units
  (fp64: 2048) are rejected (layernorm.cuh).

  backward, fused path (H % VEC == 0 and <= 1024 units per row: bf16/fp16 H <= 8192,
  fp32 H <= 4096, fp64 H <= 2048 with x 16-byte aligned): one block per chunk of
  ceil(rows / max(1, 1572864 / H)) rows (a function of (rows, H) only, never of the
  device; 384 x 4096 columns rather than rmsnorm's 512 x 4096, because with db the bf16
  H = 4096 block holds 3 blocks per SM, not 4: a 2048-row launch is 342 chunks, one wave
  on a 132-SM H200) walks its rows in order: sum x (mean), then {sum d^2, sum g, sum g*d} in one
  block reduction, dx, and acc(dy) * xhat and acc(dy) accumulated in registers for its
  columns (xhat bitwise the value used for dx); one dw and one db partial row per chunk.
  With x and dy 16-byte aligned the next 2 rows are copied by cp.async into a ring of 3
  row slots in shared memory and each thread holds its units of w in registers for the
  whole chunk, else rows are loaded into registers. x and dy are read once.
  backward, separate path (H % VEC != 0, or longer rows): dx one block per row (K in
  {1, 2, 4}, fp64 {1, 2}, preferred block <= 256 threads), mean and r stored per row in
  the workspace; stage 1 re-reads x and dy per chunk of R rows (R = 64 for H >= 1024, up
  to 1024 for narrow rows) in 32x8 column tiles: thread row ty sums rows ty, ty+8, ...
  ascending, then the 8 thread rows in order 0..7.
  stage 2 (dw and db each): T(sum over chunks of the partials), 32 chunk lanes per column
  (blocks of 8 columns x 32 lanes, loads unrolled by 32 per lane): chunk lanes ty, ty+32,
  ... ascending, then the 32 lane sums in order 0..31.

  Reduction order: since the move to the skeleton, fp64 rows of 513..1024 units
  (1024 < H <= 2048) take the fused path with K = 4 (a block of <= 256 threads) instead
  of the separate path with K = 2, so their block reduction tree and the order of their
  dw/db sums changed; and the fused path now cuts ~1572864 / H chunks instead of
  ~1966080 / H, so the order of the dw/db sums of every fused-path shape changed (fixed
  orders, within the contract above). The forward's preferred block went from 384 to
  160 threads on 2026-12-03, so the forward's block shape, and with it y's reduction
  tree, changed for most H (bf16 4096: 2 x 256 before, 4 x 128 now); the backward's
  shapes did not change.

  Reductions are warp shuffle-xor butterflies plus one shared-memory round across warps
  (common/cuda_utils.cuh), in an order fixed by the block size, which depends only on H,
  the dtype and x's 16-byte phase: a row launched alone gives bitwise the row of the
  batched launch.

  Minimal bytes per pass: forward 2 * rows * H * sizeof(T) + 2 * H * sizeof(T) (x read,
  y written, w and b once); backward 3 * rows * H * sizeof(T) + 3 * H * sizeof(T) (x, dy
  read, dx written; w read, dw and db written) plus the partials (2 * chunks * H * acc,
  written and read once).
  Measured (H200, numgate-bench kernel clock, run 16; copy = D2D memcpy, 4246 GB/s):
    forward  bf16 4x512x4096 (33.6 MB) 12.16 us, 65% of copy; bf16 1x2048x5120 (42.0 MB)
             14.57 us, 68%; fp16 4x512x4096 12.08 us; fp32 1x512x5120 8.11 us.
    backward bf16 4x512x4096 (50.4 MB) 31.34 us, 38%; bf16 1x2048x5120 (62.9 MB)
             37.17 us, 40%.
  What limits them now: the forward's per-row chain is the longest of the four norms (two
  block reductions); the general kernel was issue-bound (Nsight Compute at 2048x4096:
  DRAM 25% of peak, a warp eligible on 80% of cycles), which the aligned kernel relieves;
  a launch of 2048 rows is still ~two waves (Liger 10.82 us at 4x512x4096; this kernel
  wins at 1x2048x5120, torch.compile 17.15). The backward is latency-bound per chunk (two
  block reductions per row, 2-3 blocks per SM with db's registers, 2 rows in flight
  each). Narrow rows: aligned rows of at most 32 units run several to a warp (row_norm's
  warp-rows forward): 70000 x 64 forward (17.9 MB) 6.33 us (run 22; 44.45 us with one
  32-thread block per row), 67% of copy, torch.compile 5.57 us; the backward there 45.0 us
  (run 24, kernel time; 141-144 us before the warp-rows backward and the one-launch
  8-column stage 2; torch.compile 27.65 us, still faster), limited by the chunking: 23,334
  chunks of 3 rows, 729-730 partials per chunk lane in stage 2 (common/row_norm.cuh).

Limits: 1 <= H, rows <= 2^31 - 1 (one block per row in grid.x), rows of at most 4096
units (fp64: 2048), pointers aligned to sizeof(T), no overlap. Build without --use_fast_math.
Register spills (nvcc -Xptxas -v, sm_90): the fused backward ring kernel for bf16/fp16
rows of 513..1024 units (K = 4, w held in registers: 128 registers) spills 4 bytes; no
other kernel spills.
*/

#include "layernorm/layernorm.cuh"

#include <cstdint>

#include "common/row_norm.cuh"

namespace numgate::layernorm {
namespace {

namespace rn = numgate::row_norm;
using P = rn::LayerNormPolicy;
using numgate::device::acc_t;
using rn::aligned_to_element;
using rn::max_units_per_row;

constexpr int64_t kMaxRows = 2147483647;  // grid.x limit: one block per row
constexpr int kMaxThreads = 1024;
// Units cached per thread: up to 4 (4096 units per row); fp64 up to 2 (2048 units).
template <typename T>
constexpr int kMaxK = P::kFwdMaxK<T>;
template <typename T>
constexpr int64_t kMaxUnits = int64_t(kMaxK<T>) * kMaxThreads;
constexpr int64_t kMaxHidden = int64_t(4) * kMaxThreads * 8;  // 32768: the bound over all types
static_assert(P::kSepMaxK<float> == kMaxK<float> && P::kSepMaxK<double> == kMaxK<double>,
              "the backward caches the rows the forward accepts");

bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

}  // namespace

// -------------------------------------------------------------------------------------
// forward
// -------------------------------------------------------------------------------------

template <typename T>
cudaError_t forward(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t hidden, double eps,
                    cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || b == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(b) || !aligned_to_element(y))
    return cudaErrorInvalidValue;
  if (max_units_per_row(x, hidden) > kMaxUnits<T>) return cudaErrorInvalidValue;
  const rn::FwdArgs<T> a{x, nullptr, w, b, nullptr, y, static_cast<int>(hidden), static_cast<A>(eps)};
  return rn::launch_forward<P, T>(a, rows, stream);
}

// -------------------------------------------------------------------------------------
// backward
// -------------------------------------------------------------------------------------

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return rn::workspace_bytes<P>(rows, hidden);
}

template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t rows, int64_t hidden,
                     double eps, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (dw == nullptr || db == nullptr || !aligned_to_element(dw) || !aligned_to_element(db))
    return cudaErrorInvalidValue;
  if (rows == 0) {
    // No rows: the weight and bias gradients are empty sums. All-zero bits are +0 in every T.
    const size_t n = static_cast<size_t>(hidden) * sizeof(T);
    cudaError_t err = cudaMemsetAsync(dw, 0, n, stream);
    if (err == cudaSuccess) err = cudaMemsetAsync(db, 0, n, stream);
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (x == nullptr || w == nullptr || dy == nullptr || dx == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(dy) || !aligned_to_element(dx))
    return cudaErrorInvalidValue;
  if (max_units_per_row(x, hidden) > kMaxUnits<T>) return cudaErrorInvalidValue;
  if (workspace == nullptr || workspace_bytes < backward_workspace_bytes(rows, hidden)) return cudaErrorInvalidValue;
  rn::BwdArgs<T> a{};
  a.x = x;
  a.w = w;
  a.dy = dy;
  a.dx = dx;
  a.rows = rows;
  a.hidden = static_cast<int>(hidden);
  a.eps = static_cast<A>(eps);
  return rn::launch_backward<P, T>(a, dw, db, workspace, false, stream);
}

// -------------------------------------------------------------------------------------
// explicit instantiations: the supported element types
// -------------------------------------------------------------------------------------

#define NUMGATE_LAYERNORM_INSTANTIATE(T)                                                                       \
  template cudaError_t forward<T>(const T*, const T*, const T*, T*, int64_t, int64_t, double, cudaStream_t);  \
  template cudaError_t backward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, double, void*, \
                                   size_t, cudaStream_t);
NUMGATE_LAYERNORM_INSTANTIATE(float)
NUMGATE_LAYERNORM_INSTANTIATE(double)
NUMGATE_LAYERNORM_INSTANTIATE(__half)
NUMGATE_LAYERNORM_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_LAYERNORM_INSTANTIATE

}  // namespace numgate::layernorm
