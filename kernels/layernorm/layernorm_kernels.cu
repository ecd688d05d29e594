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

Design (that of kernels/rmsnorm/rmsnorm_kernels.cu, simplified).

  Vector access on a virtual grid. A row of T starting at address p is viewed on a
  16-byte grid that starts shift = (p % 16) / sizeof(T) elements before p. Unit u covers
  row elements [u*VEC - shift, (u+1)*VEC - shift) clipped to [0, H), VEC = 16 / sizeof(T);
  a row has nunits = ceil((H + shift) / VEC) units. The grid is chosen per row from x, so
  x's full units are always 16-byte aligned; every other tensor is checked once per row
  (ptr - shift 16-byte aligned?) and moves as 16-byte vectors when it is, element by
  element otherwise (and for the partial first/last unit). Slots of a unit outside the row
  are loaded as zeros; they add nothing to the sums of x and g, and are masked out of the
  sum of squared deviations (where they would add mean^2 each).

  forward: one block per row, ONE pass over x from DRAM. Each thread caches K units of x
  (raw T, 4 registers per unit); thread t owns units t, t + B, ... (B = blockDim.x). Two
  block reductions over the cached registers (sum x, then sum d^2), then the same
  registers are normalized and written. K is the smallest of {1, 2, 4} (fp64: {1, 2}) with
  ceil(units / K) <= 384, else the largest K if ceil(units / K) <= 1024; B = ceil(units / K)
  rounded up to a warp. Rows longer than 4096 units (fp64: 2048) are rejected (see
  layernorm.cuh).

  backward, per row: the same scheme caching x and dy (K in {1, 2, 4}, fp64 {1, 2}, preferred block
  <= 256 threads). Reductions: sum x (for the mean), then {sum d^2, sum g, sum g*d} in one
  block reduction. w is re-read in the last phase (an L1/L2 hit). The block shape depends
  only on (H, dtype, the row's 16-byte phase) and the per-row code is the same in every
  path, so dx of a row never depends on how many rows are launched with it.

  dw, db (deterministic, no atomics). Rows are split into chunks whose size depends only on
  (rows, H); stage 1 leaves per-chunk column sums in the workspace, stage 2 sums them over
  the chunks in a fixed order (32 chunk lanes ascending, then the 32 lane sums in order
  0..31) and rounds to T.
    * Fused path (H % VEC == 0, so every row has x's 16-byte phase and a thread owns the
      same columns in every row, and a block of <= 256 threads: bf16/fp16 H <= 8192, fp32
      H <= 4096, fp64 H <= 2048 when x is 16-byte aligned): one block per chunk of
      ceil(rows / max(1, 1966080 / H)) rows walks its rows in order and each thread
      accumulates dy * xhat and dy for its columns in registers; stage 1 is fused into the
      dx kernel, so x and dy are read once.
    * Separate path (H % VEC != 0, or longer rows): the dx kernel runs one block per row
      and stores mean and rstd per row in the workspace; stage 1 re-reads x and dy in chunks
      of R rows (R = 64 for H >= 1024, taller for narrow rows, up to 1024) with a 32x8
      block per 64 columns: thread (tx, ty) sums rows ty, ty+8, ... of the chunk for columns
      tx and tx+32, then the 8 row lanes are added in order 0..7.

  Reductions are warp shuffle-xor butterflies plus one shared-memory round across warps
  (common/cuda_utils.cuh), with an order fixed by the block size.

Limits: 1 <= H, rows <= 2^31 - 1 (one block per row in grid.x), rows of at most 4096
units (fp64: 2048), pointers aligned to sizeof(T), no overlap. Build without --use_fast_math.
No kernel spills registers (nvcc -Xptxas -v, sm_90).
*/

#include "layernorm/layernorm.cuh"

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace numgate::layernorm {
namespace {

using numgate::device::acc_t;
using numgate::device::block_sum;
using numgate::device::add_rn;
using numgate::device::div_rn;
using numgate::device::mul_rn;
using numgate::device::sub_rn;
using numgate::device::from_acc;
using numgate::device::grid_is_aligned;
using numgate::device::grid_shift;
using numgate::device::keep_packed;
using numgate::device::kVec;
using numgate::device::load_unit;
using numgate::device::pack_from_acc;
using numgate::device::sqrt_rn;
using numgate::device::store_unit;
using numgate::device::to_acc;
using numgate::device::unit_acc;
using numgate::device::Unit;
using numgate::device::unit_is_full;
using numgate::device::zero_unit;

constexpr int64_t kMaxRows = 2147483647;  // grid.x limit: one block per row
constexpr int kMaxThreads = 1024;
// Units cached per thread: up to 4 (4096 units per row); fp64 up to 2 (2048 units): at
// K = 4 the fp64 backward needs more than the 64 registers a 1024-thread block allows.
template <typename T>
constexpr int kMaxK = sizeof(T) == 8 ? 2 : 4;
template <typename T>
constexpr int64_t kMaxUnits = int64_t(kMaxK<T>) * kMaxThreads;
constexpr int64_t kMaxHidden = int64_t(4) * kMaxThreads * 8;  // 32768: the bound over all types
constexpr int kFwdTargetThreads = 384;
constexpr int kBwdTargetThreads = 256;
constexpr int kFusedMaxThreads = 256;
constexpr int64_t kFusedChunkCols = int64_t(480) * 4096;  // ~480 chunks at H = 4096
// dw/db stage 1 of the separate path (per chunk of rows, 64 columns per block) and stage 2.
constexpr int kDwTx = 32;
constexpr int kDwTy = 8;
constexpr int kDwCols = 2 * kDwTx;
constexpr int kFinTx = 32;
constexpr int kFinTy = 32;
constexpr int64_t kWorkspaceAlign = 256;

/// True when element lo + j of a unit lies in the row [0, n).
__device__ __forceinline__ bool in_row(int lo, int j, int n) { return lo + j >= 0 && lo + j < n; }

// =====================================================================================
// forward
// =====================================================================================

/// One block per row; each thread keeps its K units of x in registers through both
/// reductions (mean, then the sum of squared deviations) and the normalize step.
template <typename T, int K>
__global__ void __launch_bounds__(kMaxThreads)
    layernorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                             T* __restrict__ y, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];

  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
  const bool w_aligned = grid_is_aligned(w, shift);
  const bool b_aligned = grid_is_aligned(b, shift);
  const bool y_aligned = grid_is_aligned(static_cast<const T*>(yr), shift);

  // Load the row once (all K loads in flight); sum of x (padding slots are zeros).
  Unit<T> xc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    const int lo = u * V - shift;
    xc[k] = u < nunits ? load_unit(xr, lo, hidden, unit_is_full<T>(lo, hidden)) : zero_unit<T>();
  }
  A s[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) s[0] += unit_acc(xc[k], j);
  }
  block_sum<1>(s, red);
  const A mean = div_rn(s[0], A(hidden));

  // Sum of squared deviations over the real elements only.
#pragma unroll
  for (int k = 0; k < K; ++k) keep_packed(xc[k]);
  A q[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int lo = (tid + k * nthr) * V - shift;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A d = unit_acc(xc[k], j) - mean;
      if (in_row(lo, j, hidden)) q[0] += d * d;
    }
  }
  block_sum<1>(q, red);
  const A r = div_rn(A(1), sqrt_rn(div_rn(q[0], A(hidden)) + eps));

  // Normalize the cached values, scale and shift, store.
#pragma unroll
  for (int k = 0; k < K; ++k) keep_packed(xc[k]);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) {
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
      const Unit<T> bu = load_unit(b, lo, hidden, full && b_aligned);
      A out[V];
#pragma unroll
      for (int j = 0; j < V; ++j) out[j] = ((unit_acc(xc[k], j) - mean) * r) * unit_acc(wu, j) + unit_acc(bu, j);
      store_unit(yr, lo, hidden, full && y_aligned, pack_from_acc<T>(out));
    }
  }
}

// =====================================================================================
// backward: dx (+ dw/db partials on the fused path, mean/rstd per row otherwise)
// =====================================================================================

template <bool kFused>
constexpr int kBwdBoundThreads = kFused ? kFusedMaxThreads : kMaxThreads;

/// Backward for the rows of one chunk: grid = chunks, block = cfg.threads; block c
/// handles rows [c * rows_per_chunk, min((c + 1) * rows_per_chunk, rows)) in order. The
/// per-row code is identical in both modes.
///
/// kFused = false: rows_per_chunk must be 1 (one block per row); mean and r go to
/// stats[2 * row], stats[2 * row + 1] for the separate dw/db stage 1.
/// kFused = true (requires hidden % VEC == 0: every row has x's 16-byte phase, so a thread
/// owns the same columns in every row): each thread accumulates dy * xhat and dy over the
/// chunk's rows in row order, then writes them to pw[chunk][col], pb[chunk][col].
template <typename T, int K, bool kFused>
__global__ void __launch_bounds__(kBwdBoundThreads<kFused>)
    layernorm_backward_rows_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                                   T* __restrict__ dx, acc_t<T>* __restrict__ stats, acc_t<T>* __restrict__ pw,
                                   acc_t<T>* __restrict__ pb, int64_t rows, int hidden, int64_t rows_per_chunk,
                                   acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int KA = kFused ? K : 1;
  __shared__ A red[3][32];

  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
  const int64_t chunk = blockIdx.x;
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;

  A dwacc[KA][V], dbacc[KA][V];
#pragma unroll
  for (int k = 0; k < KA; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dwacc[k][j] = dbacc[k][j] = A(0);
  }

  for (int64_t row = r_begin; row < r_end; ++row) {
    const T* xr = x + row * hidden;
    const T* dyr = dy + row * hidden;
    T* dxr = dx + row * hidden;
    const int shift = grid_shift(xr);
    const int nunits = (hidden + shift + V - 1) / V;
    const bool w_aligned = grid_is_aligned(w, shift);
    const bool dy_aligned = grid_is_aligned(dyr, shift);
    const bool dx_aligned = grid_is_aligned(static_cast<const T*>(dxr), shift);

    // Load x and dy of the row once; sum of x.
    Unit<T> xc[K], dc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      xc[k] = u < nunits ? load_unit(xr, lo, hidden, full) : zero_unit<T>();
      dc[k] = u < nunits ? load_unit(dyr, lo, hidden, full && dy_aligned) : zero_unit<T>();
    }
    A s[1] = {A(0)};
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) s[0] += unit_acc(xc[k], j);
    }
    block_sum<1>(s, red);
    const A mean = div_rn(s[0], A(hidden));

    // {sum d^2 (real elements only), sum g, sum g*d}; padding slots have dy = w = 0.
#pragma unroll
    for (int k = 0; k < K; ++k) {
      keep_packed(xc[k]);
      keep_packed(dc[k]);
    }
    A sums[3] = {A(0), A(0), A(0)};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        const int lo = u * V - shift;
        const Unit<T> wu = load_unit(w, lo, hidden, unit_is_full<T>(lo, hidden) && w_aligned);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (in_row(lo, j, hidden)) {
            const A d = unit_acc(xc[k], j) - mean;
            const A g = mul_rn(unit_acc(dc[k], j), unit_acc(wu, j));
            sums[0] += d * d;
            sums[1] += g;
            sums[2] += g * d;
          }
        }
      }
    }
    block_sum<3>(sums, red);
    const A r = div_rn(A(1), sqrt_rn(div_rn(sums[0], A(hidden)) + eps));
    const A a = div_rn(sums[1], A(hidden));
    const A c = r * div_rn(sums[2], A(hidden));
    if constexpr (!kFused) {
      if (tid == 0) {
        stats[2 * row] = mean;
        stats[2 * row + 1] = r;
      }
    }

    // dx from the cached x and dy (w re-read: L1/L2 hit); fused: dw/db partials.
#pragma unroll
    for (int k = 0; k < K; ++k) {
      keep_packed(xc[k]);
      keep_packed(dc[k]);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        const int lo = u * V - shift;
        const bool full = unit_is_full<T>(lo, hidden);
        const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
        A out[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A dyv = unit_acc(dc[k], j);
          const A g = mul_rn(dyv, unit_acc(wu, j));
          const A xhat = (unit_acc(xc[k], j) - mean) * r;
          out[j] = mul_rn(r, sub_rn(sub_rn(g, a), mul_rn(xhat, c)));
          if constexpr (kFused) {
            dwacc[k][j] += dyv * xhat;
            dbacc[k][j] += dyv;
          }
        }
        store_unit(dxr, lo, hidden, full && dx_aligned, pack_from_acc<T>(out));
      }
    }
  }

  if constexpr (kFused) {
    // Every row has x's 16-byte phase: the columns a thread accumulated are those of the
    // chunk's first row. Padding slots (outside [0, hidden)) are never stored.
    const int shift = grid_shift(x + r_begin * hidden);
    const int nunits = (hidden + shift + V - 1) / V;
    A* wrow = pw + chunk * hidden;
    A* brow = pb + chunk * hidden;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int lo = (tid + k * nthr) * V - shift;
      if (tid + k * nthr < nunits) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (in_row(lo, j, hidden)) {
            wrow[lo + j] = dwacc[k][j];
            brow[lo + j] = dbacc[k][j];
          }
        }
      }
    }
  }
}

// =====================================================================================
// backward: dw/db, deterministic two-stage column reduction (separate path, stage 1)
// =====================================================================================

/// Stage 1. grid = (chunks, ceil(H / 64)), block = (32, 8). Block (c, b) writes, for j in
/// [64b, 64b + 64):  pw[c][j] = sum over rows of chunk c of acc(dy) * ((acc(x) - mean) * r),
/// pb[c][j] = sum of acc(dy). Order: thread row ty sums rows ty, ty+8, ... ascending, then
/// the 8 thread rows are added in order 0..7.
template <typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy)
    layernorm_backward_dwdb_partial_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                           const acc_t<T>* __restrict__ stats, acc_t<T>* __restrict__ pw,
                                           acc_t<T>* __restrict__ pb, int64_t rows, int hidden,
                                           int64_t rows_per_chunk) {
  using A = acc_t<T>;
  __shared__ A tw[kDwTy][kDwCols];
  __shared__ A tb[kDwTy][kDwCols];

  const int64_t chunk = blockIdx.x;
  const int col0 = static_cast<int>(blockIdx.y) * kDwCols;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int j0 = col0 + tx;
  const int j1 = j0 + kDwTx;
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;

  A w0 = A(0), w1 = A(0), b0 = A(0), b1 = A(0);
  for (int64_t r = r_begin + ty; r < r_end; r += kDwTy) {
    const int64_t base = r * hidden;
    const A mean = stats[2 * r];
    const A rs = stats[2 * r + 1];
    if (j0 < hidden) {
      const A dv = to_acc(dy[base + j0]);
      w0 += dv * ((to_acc(x[base + j0]) - mean) * rs);
      b0 += dv;
    }
    if (j1 < hidden) {
      const A dv = to_acc(dy[base + j1]);
      w1 += dv * ((to_acc(x[base + j1]) - mean) * rs);
      b1 += dv;
    }
  }
  tw[ty][tx] = w0;
  tw[ty][tx + kDwTx] = w1;
  tb[ty][tx] = b0;
  tb[ty][tx + kDwTx] = b1;
  __syncthreads();

  const int t = ty * kDwTx + tx;
  if (t < kDwCols && col0 + t < hidden) {
    A sw = tw[0][t], sb = tb[0][t];
#pragma unroll
    for (int i = 1; i < kDwTy; ++i) {
      sw += tw[i][t];
      sb += tb[i][t];
    }
    pw[chunk * hidden + col0 + t] = sw;
    pb[chunk * hidden + col0 + t] = sb;
  }
}

/// Stage 2. grid = ceil(H / 32), block = (32, 32). out[j] = T(sum over chunks of
/// partial[c][j]): thread row ty sums chunks ty, ty+32, ... ascending, then thread row 0
/// adds the 32 lane sums in order 0..31.
template <typename T>
__global__ void __launch_bounds__(kFinTx* kFinTy)
    layernorm_backward_finalize_kernel(const acc_t<T>* __restrict__ partial, T* __restrict__ out, int64_t chunks,
                                       int hidden) {
  using A = acc_t<T>;
  __shared__ A tile[kFinTy][kFinTx];

  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int j = static_cast<int>(blockIdx.x) * kFinTx + tx;

  A s = A(0);
  if (j < hidden) {
    for (int64_t c = ty; c < chunks; c += kFinTy) s += partial[c * hidden + j];
  }
  tile[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && j < hidden) {
    A t = tile[0][tx];
#pragma unroll
    for (int i = 1; i < kFinTy; ++i) t += tile[i][tx];
    out[j] = from_acc<T>(t);
  }
}

// =====================================================================================
// host side: argument checks and launch configuration
// =====================================================================================

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

template <typename T>
bool aligned_to_element(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}

bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

/// The units per row that the launch shape is sized for: when hidden % VEC == 0 every
/// row shares x's 16-byte phase; otherwise any phase can occur and the block is sized for
/// the worst one, whatever the number of rows. So a row's launch shape depends only on
/// hidden, the dtype and its own 16-byte phase.
template <typename T>
int64_t max_units_per_row(const T* x, int64_t hidden) {
  constexpr int V = kVec<T>;
  const int shift0 = static_cast<int>((reinterpret_cast<std::uintptr_t>(x) & 15u) / sizeof(T));
  const int max_shift = hidden % V == 0 ? shift0 : V - 1;
  return ceil_div(hidden + max_shift, V);
}

struct CachedConfig {
  int k = 0;        ///< units cached per thread; 0: row too long (rejected)
  int threads = 0;  ///< block size, a multiple of 32
};

/// Smallest K in {1, 2, ..., max_k} with ceil(units / K) <= target_threads; if none,
/// K = max_k when ceil(units / max_k) <= 1024; else {0, 0}. The block is ceil(units / K)
/// rounded up to a warp.
CachedConfig pick_cached_config(int64_t units, int max_k, int target_threads) {
  for (int k = 1; k <= max_k; k *= 2) {
    const int64_t threads = ceil_div(units, k);
    if (threads <= target_threads) return {k, static_cast<int>(round_up(threads, 32))};
  }
  const int64_t threads = ceil_div(units, max_k);
  if (threads <= kMaxThreads) return {max_k, static_cast<int>(round_up(threads, 32))};
  return {};
}

/// Rows per chunk of the separate path's stage 1: 64 for hidden >= 1024, taller (up to
/// 1024) for narrow rows. A function of (rows, hidden) only.
int64_t dw_rows_per_chunk(int64_t /*rows*/, int64_t hidden) {
  const int64_t cols = round_up(hidden, kDwCols);
  const int64_t widen = cols >= 1024 ? 1 : 1024 / cols;
  return 64 * widen;
}
int64_t dw_chunks(int64_t rows, int64_t hidden) { return ceil_div(rows, dw_rows_per_chunk(rows, hidden)); }

/// Rows per chunk of the fused path: about kFusedChunkCols / hidden chunks. A function of
/// (rows, hidden) only.
int64_t fused_rows_per_chunk(int64_t rows, int64_t hidden) {
  const int64_t target_chunks = kFusedChunkCols / hidden > 1 ? kFusedChunkCols / hidden : 1;
  const int64_t r = ceil_div(rows, target_chunks);
  return r > 1 ? r : 1;
}
int64_t fused_chunks(int64_t rows, int64_t hidden) { return ceil_div(rows, fused_rows_per_chunk(rows, hidden)); }

struct WorkspaceLayout {
  int64_t stats_offset = 0, pw_offset = 0, pb_offset = 0;  ///< from the aligned base
  int64_t bytes = 0;                                       ///< bytes needed from the aligned base
};

WorkspaceLayout workspace_layout(int64_t rows, int64_t hidden, int64_t acc_size) {
  WorkspaceLayout l;
  const int64_t chunks = dw_chunks(rows, hidden) > fused_chunks(rows, hidden) ? dw_chunks(rows, hidden)
                                                                               : fused_chunks(rows, hidden);
  l.stats_offset = 0;
  l.pw_offset = round_up(2 * rows * acc_size, kWorkspaceAlign);
  l.pb_offset = l.pw_offset + round_up(chunks * hidden * acc_size, kWorkspaceAlign);
  l.bytes = l.pb_offset + chunks * hidden * acc_size;
  return l;
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
  const int64_t units = max_units_per_row(x, hidden);
  if (units > kMaxUnits<T>) return cudaErrorInvalidValue;
  const CachedConfig cfg = pick_cached_config(units, kMaxK<T>, kFwdTargetThreads);

  const dim3 grid(static_cast<unsigned>(rows));
  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);
  switch (cfg.k) {
    case 1: layernorm_forward_kernel<T, 1><<<grid, cfg.threads, 0, stream>>>(x, w, b, y, h, e); break;
    case 2: layernorm_forward_kernel<T, 2><<<grid, cfg.threads, 0, stream>>>(x, w, b, y, h, e); break;
    case 4:
      if constexpr (kMaxK<T> >= 4) layernorm_forward_kernel<T, 4><<<grid, cfg.threads, 0, stream>>>(x, w, b, y, h, e);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// -------------------------------------------------------------------------------------
// backward
// -------------------------------------------------------------------------------------

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  const WorkspaceLayout l = workspace_layout(rows, hidden, static_cast<int64_t>(sizeof(double)));
  return static_cast<size_t>(l.bytes + kWorkspaceAlign);
}

namespace {

template <typename T, bool kFused>
void launch_rows(int k, dim3 grid, int threads, cudaStream_t stream, const T* x, const T* w, const T* dy, T* dx,
                 acc_t<T>* stats, acc_t<T>* pw, acc_t<T>* pb, int64_t rows, int h, int64_t rows_per_chunk,
                 acc_t<T> e) {
  switch (k) {
    case 1:
      layernorm_backward_rows_kernel<T, 1, kFused>
          <<<grid, threads, 0, stream>>>(x, w, dy, dx, stats, pw, pb, rows, h, rows_per_chunk, e);
      break;
    case 2:
      layernorm_backward_rows_kernel<T, 2, kFused>
          <<<grid, threads, 0, stream>>>(x, w, dy, dx, stats, pw, pb, rows, h, rows_per_chunk, e);
      break;
    default:
      if constexpr (kMaxK<T> >= 4) {
        layernorm_backward_rows_kernel<T, 4, kFused>
            <<<grid, threads, 0, stream>>>(x, w, dy, dx, stats, pw, pb, rows, h, rows_per_chunk, e);
      }
      break;
  }
}

}  // namespace

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
  const int64_t units = max_units_per_row(x, hidden);
  if (units > kMaxUnits<T>) return cudaErrorInvalidValue;
  if (workspace == nullptr || workspace_bytes < backward_workspace_bytes(rows, hidden)) return cudaErrorInvalidValue;
  const CachedConfig cfg = pick_cached_config(units, kMaxK<T>, kBwdTargetThreads);
  if (cfg.k == 0) return cudaErrorInvalidValue;

  // Workspace: [mean, rstd: rows x 2 x A][pad][pw: chunks x hidden x A][pad][pb: ...],
  // from a 256-byte aligned base inside the caller's buffer.
  const WorkspaceLayout layout = workspace_layout(rows, hidden, static_cast<int64_t>(sizeof(A)));
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t base =
      (raw + static_cast<std::uintptr_t>(kWorkspaceAlign - 1)) & ~static_cast<std::uintptr_t>(kWorkspaceAlign - 1);
  A* stats = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.stats_offset));
  A* pw = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.pw_offset));
  A* pb = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.pb_offset));

  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);
  const dim3 fin_block(kFinTx, kFinTy);
  const dim3 fin_grid(static_cast<unsigned>(ceil_div(hidden, kFinTx)));
  int64_t chunks = 0;

  if (hidden % kVec<T> == 0 && cfg.threads <= kFusedMaxThreads) {
    // Fused: dx and the per-chunk dw/db partials in one pass over x and dy.
    const int64_t rows_per_chunk = fused_rows_per_chunk(rows, hidden);
    chunks = fused_chunks(rows, hidden);
    launch_rows<T, true>(cfg.k, dim3(static_cast<unsigned>(chunks)), cfg.threads, stream, x, w, dy, dx, nullptr, pw,
                         pb, rows, h, rows_per_chunk, e);
  } else {
    // Separate: dx, mean and rstd one block per row; then stage 1 re-reads x and dy.
    launch_rows<T, false>(cfg.k, dim3(static_cast<unsigned>(rows)), cfg.threads, stream, x, w, dy, dx, stats,
                          nullptr, nullptr, rows, h, 1, e);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    const int64_t rows_per_chunk = dw_rows_per_chunk(rows, hidden);
    chunks = dw_chunks(rows, hidden);
    const dim3 grid1(static_cast<unsigned>(chunks), static_cast<unsigned>(ceil_div(hidden, kDwCols)));
    layernorm_backward_dwdb_partial_kernel<T>
        <<<grid1, dim3(kDwTx, kDwTy), 0, stream>>>(x, dy, stats, pw, pb, rows, h, rows_per_chunk);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  layernorm_backward_finalize_kernel<T><<<fin_grid, fin_block, 0, stream>>>(pw, dw, chunks, h);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  layernorm_backward_finalize_kernel<T><<<fin_grid, fin_block, 0, stream>>>(pb, db, chunks, h);
  return cudaGetLastError();
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
