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
  weight gradient:    dw_j = T( sum_rows acc(dy[r,j]) * (acc(x[r,j]) * r_r) ), r_r read back
                      from the workspace (bitwise the value used for dx), summed in acc by a
                      two-stage reduction in a fixed order (below).

NaN/Inf are not special-cased: a NaN in a row makes the row's sums NaN; an Inf in x gives
rstd = 0, so y = 0 at the finite elements and NaN (Inf * 0) at the Inf.

Design (the "separate path" of rmsnorm_kernels.cu, without its fused/pipelined variants:
simplicity over the last 20-30% of bandwidth).

  Virtual 16-byte grid. A row starting at p is viewed on a grid that starts
  shift = (p % 16) / sizeof(T) elements before p; unit u covers row elements
  [u*VEC - shift, (u+1)*VEC - shift) clipped to [0, H), VEC = 16 / sizeof(T). x's full
  units are 16-byte aligned by construction; every other tensor is checked once per row
  (grid_is_aligned) and its full units move as one 16-byte access when aligned, else
  element by element (also the partial head/tail units). Correct for any element
  alignment of any pointer.

  forward: one block per row, x read ONCE: each thread caches K units of x (raw, 4
  registers per unit; units t, t+B, ..., t+(K-1)B), sums squares, block reduction
  (common/cuda_utils.cuh block_sum: fixed tree for a given blockDim), then normalizes
  the cached registers and stores. K = smallest of {1,2,4,8} (fp64: {1,2,4}) with
  ceil(units / K) <= 384 threads, block = that rounded up to a warp. Rows with more units
  than 1024 * Kmax use a streaming kernel reading x twice (second read from L2).

  backward: (1) one block per row: x and dy cached (K in {1,2,4}, <= 256 preferred
  threads, else up to 1024; streaming kernel beyond), both sums in one block reduction,
  dx written, r stored to the workspace; (2) dw stage 1: rows split into chunks of R rows,
  R a function of H only (64 for H >= 1024, taller for narrow rows, up to 1024), so the
  result depends on (rows, H) only, never on the GPU; a 32x8 block owns 64 columns of one
  chunk, thread row ty sums rows ty, ty+8, ... ascending, then the 8 thread rows are added
  in order 0..7 -> partial[chunk][col] (acc); (3) stage 2: dw[j] = T(sum over chunks of
  partial[c][j]): thread row ty of a 32x32 block sums chunks ty, ty+32, ... ascending, then
  the 32 lane sums in order 0..31.

  The block shape of a row depends only on H, the dtype and (for H % VEC == 0) x's
  16-byte phase, so a row launched alone at an address of the same phase gives bitwise
  the row of the batched launch.

Limits: 1 <= H <= 65536, 0 <= rows <= 2^31 - 1, pointers aligned to sizeof(T), no
overlap. Build without --use_fast_math.
*/

#include "offset_rmsnorm/offset_rmsnorm.cuh"

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace numgate::offset_rmsnorm {
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

constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxRows = 2147483647;
constexpr int kMaxThreads = 1024;
template <typename T>
constexpr int kFwdMaxK = sizeof(T) == 8 ? 4 : 8;
constexpr int kFwdTargetThreads = 384;
constexpr int kBwdMaxK = 4;
constexpr int kBwdTargetThreads = 256;
constexpr int kDwTx = 32, kDwTy = 8, kDwCols = 2 * kDwTx;
constexpr int kFinTx = 32, kFinTy = 32;
constexpr int64_t kWorkspaceAlign = 256;

/// r = 1 / sqrt(ss / H + eps), correctly rounded divide and sqrt.
template <typename A>
__device__ __forceinline__ A rstd_of(A ss, int hidden, A eps) {
  return div_rn(A(1), sqrt_rn(div_rn(ss, A(hidden)) + eps));
}

/// y of one unit: T((x * r) * (1 + w)), 1 + w in acc.
template <typename T>
__device__ __forceinline__ Unit<T> forward_unit(const Unit<T>& xu, const Unit<T>& wu, acc_t<T> r) {
  using A = acc_t<T>;
  A out[kVec<T>];
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) out[j] = (unit_acc(xu, j) * r) * (A(1) + unit_acc(wu, j));
  return pack_from_acc<T>(out);
}

// ------------------------------------------------------------------------------------
// forward
// ------------------------------------------------------------------------------------

template <typename T, int K>
__global__ void __launch_bounds__(kMaxThreads)
    offset_forward_cached_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                 int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_al = grid_is_aligned(w, shift);
  const bool y_al = grid_is_aligned(static_cast<const T*>(yr), shift);

  Unit<T> xc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    const int lo = u * V - shift;
    xc[k] = u < nunits ? load_unit(xr, lo, hidden, unit_is_full<T>(lo, hidden)) : zero_unit<T>();
  }
  A ss[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A v = unit_acc(xc[k], j);
      ss[0] += v * v;
    }
  }
  block_sum<1>(ss, red);
  const A r = rstd_of(ss[0], hidden, eps);
#pragma unroll
  for (int k = 0; k < K; ++k) keep_packed(xc[k]);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < nunits) {
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(w, lo, hidden, full && w_al);
      store_unit(yr, lo, hidden, full && y_al, forward_unit<T>(xc[k], wu, r));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    offset_forward_streaming_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                    int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_al = grid_is_aligned(w, shift);
  const bool y_al = grid_is_aligned(static_cast<const T*>(yr), shift);

  A ss[1] = {A(0)};
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const Unit<T> xu = load_unit(xr, lo, hidden, unit_is_full<T>(lo, hidden));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A v = unit_acc(xu, j);
      ss[0] += v * v;
    }
  }
  block_sum<1>(ss, red);
  const A r = rstd_of(ss[0], hidden, eps);
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(xr, lo, hidden, full);
    const Unit<T> wu = load_unit(w, lo, hidden, full && w_al);
    store_unit(yr, lo, hidden, full && y_al, forward_unit<T>(xu, wu, r));
  }
}

// ------------------------------------------------------------------------------------
// backward: dx and rstd, one block per row
// ------------------------------------------------------------------------------------

/// Adds this unit's x^2 and g*x (g = dy * (1 + w)) to sums.
template <typename T>
__device__ __forceinline__ void bwd_accumulate(const Unit<T>& xu, const Unit<T>& du, const Unit<T>& wu,
                                               acc_t<T> (&sums)[2]) {
  using A = acc_t<T>;
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const A xv = unit_acc(xu, j);
    const A g = mul_rn(unit_acc(du, j), A(1) + unit_acc(wu, j));
    sums[0] += xv * xv;
    sums[1] += g * xv;
  }
}

/// dx of one unit: T(r * (g - xhat * c)), c = r * mgx.
template <typename T>
__device__ __forceinline__ Unit<T> bwd_unit(const Unit<T>& xu, const Unit<T>& du, const Unit<T>& wu, acc_t<T> r,
                                            acc_t<T> c) {
  using A = acc_t<T>;
  A out[kVec<T>];
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const A g = mul_rn(unit_acc(du, j), A(1) + unit_acc(wu, j));
    const A xhat = unit_acc(xu, j) * r;
    out[j] = mul_rn(r, sub_rn(g, mul_rn(xhat, c)));
  }
  return pack_from_acc<T>(out);
}

template <typename T, int K>
__global__ void __launch_bounds__(kMaxThreads)
    offset_backward_dx_cached_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                                     T* __restrict__ dx, acc_t<T>* __restrict__ rstd, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[2][32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  const T* dyr = dy + row * hidden;
  T* dxr = dx + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_al = grid_is_aligned(w, shift);
  const bool dy_al = grid_is_aligned(dyr, shift);
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);

  Unit<T> xc[K], dc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    xc[k] = u < nunits ? load_unit(xr, lo, hidden, full) : zero_unit<T>();
    dc[k] = u < nunits ? load_unit(dyr, lo, hidden, full && dy_al) : zero_unit<T>();
  }
  A sums[2] = {A(0), A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < nunits) {
      const int lo = u * V - shift;
      const Unit<T> wu = load_unit(w, lo, hidden, unit_is_full<T>(lo, hidden) && w_al);
      bwd_accumulate<T>(xc[k], dc[k], wu, sums);
    }
  }
  block_sum<2>(sums, red);
  const A r = rstd_of(sums[0], hidden, eps);
  const A c = r * div_rn(sums[1], A(hidden));
  if (threadIdx.x == 0) rstd[row] = r;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    keep_packed(xc[k]);
    keep_packed(dc[k]);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < nunits) {
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(w, lo, hidden, full && w_al);
      store_unit(dxr, lo, hidden, full && dx_al, bwd_unit<T>(xc[k], dc[k], wu, r, c));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    offset_backward_dx_streaming_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                        const T* __restrict__ dy, T* __restrict__ dx,
                                        acc_t<T>* __restrict__ rstd, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[2][32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  const T* dyr = dy + row * hidden;
  T* dxr = dx + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_al = grid_is_aligned(w, shift);
  const bool dy_al = grid_is_aligned(dyr, shift);
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);

  A sums[2] = {A(0), A(0)};
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    bwd_accumulate<T>(load_unit(xr, lo, hidden, full), load_unit(dyr, lo, hidden, full && dy_al),
                      load_unit(w, lo, hidden, full && w_al), sums);
  }
  block_sum<2>(sums, red);
  const A r = rstd_of(sums[0], hidden, eps);
  const A c = r * div_rn(sums[1], A(hidden));
  if (threadIdx.x == 0) rstd[row] = r;
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(xr, lo, hidden, full);
    const Unit<T> du = load_unit(dyr, lo, hidden, full && dy_al);
    const Unit<T> wu = load_unit(w, lo, hidden, full && w_al);
    store_unit(dxr, lo, hidden, full && dx_al, bwd_unit<T>(xu, du, wu, r, c));
  }
}

// ------------------------------------------------------------------------------------
// backward: dw, deterministic two-stage column reduction
// ------------------------------------------------------------------------------------

/// Stage 1. grid = (chunks, ceil(H / 64)), block = (32, 8): partial[c][j] = sum over the
/// rows of chunk c of acc(dy) * (acc(x) * rstd[row]), j in [64 b, 64 b + 64). Thread row
/// ty sums rows ty, ty + 8, ... ascending; the 8 thread rows are then added in order.
template <typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy)
    offset_dw_partial_kernel(const T* __restrict__ x, const T* __restrict__ dy, const acc_t<T>* __restrict__ rstd,
                             acc_t<T>* __restrict__ partial, int64_t rows, int hidden, int64_t rows_per_chunk) {
  using A = acc_t<T>;
  __shared__ A tile[kDwTy][kDwCols];
  const int64_t chunk = blockIdx.x;
  const int col0 = static_cast<int>(blockIdx.y) * kDwCols;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int j0 = col0 + tx, j1 = j0 + kDwTx;
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;
  A a0 = A(0), a1 = A(0);
  for (int64_t r = r_begin + ty; r < r_end; r += kDwTy) {
    const A rv = rstd[r];
    const int64_t base = r * hidden;
    if (j0 < hidden) a0 += to_acc(dy[base + j0]) * (to_acc(x[base + j0]) * rv);
    if (j1 < hidden) a1 += to_acc(dy[base + j1]) * (to_acc(x[base + j1]) * rv);
  }
  tile[ty][tx] = a0;
  tile[ty][tx + kDwTx] = a1;
  __syncthreads();
  const int t = ty * kDwTx + tx;
  if (t < kDwCols && col0 + t < hidden) {
    A s = tile[0][t];
#pragma unroll
    for (int i = 1; i < kDwTy; ++i) s += tile[i][t];
    partial[chunk * hidden + col0 + t] = s;
  }
}

/// Stage 2. grid = ceil(H / 32), block = (32, 32): dw[j] = T(sum over chunks).
template <typename T>
__global__ void __launch_bounds__(kFinTx* kFinTy)
    offset_dw_finalize_kernel(const acc_t<T>* __restrict__ partial, T* __restrict__ dw, int64_t chunks, int hidden) {
  using A = acc_t<T>;
  __shared__ A tile[kFinTy][kFinTx];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int j = static_cast<int>(blockIdx.x) * kFinTx + tx;
  A s = A(0);
  if (j < hidden)
    for (int64_t c = ty; c < chunks; c += kFinTy) s += partial[c * hidden + j];
  tile[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && j < hidden) {
    A t = tile[0][tx];
#pragma unroll
    for (int i = 1; i < kFinTy; ++i) t += tile[i][tx];
    dw[j] = from_acc<T>(t);
  }
}

// ------------------------------------------------------------------------------------
// host side
// ------------------------------------------------------------------------------------

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

template <typename T>
bool aligned_to_element(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}
bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

/// Units per row the launch is sized for: x's own phase when every row shares it
/// (H % VEC == 0), else the worst phase, so a row's block never depends on the row count.
template <typename T>
int64_t max_units_per_row(const T* x, int64_t hidden) {
  constexpr int V = kVec<T>;
  const int shift0 = static_cast<int>((reinterpret_cast<std::uintptr_t>(x) & 15u) / sizeof(T));
  return ceil_div(hidden + (hidden % V == 0 ? shift0 : V - 1), V);
}

struct CachedConfig {
  int k = 0;        ///< 0: streaming kernel
  int threads = 0;  ///< multiple of 32
};
CachedConfig pick_cached_config(int64_t units, int max_k, int target_threads) {
  for (int k = 1; k <= max_k; k *= 2) {
    const int64_t threads = ceil_div(units, k);
    if (threads <= target_threads) return {k, static_cast<int>(round_up(threads, 32))};
  }
  const int64_t threads = ceil_div(units, max_k);
  if (threads <= kMaxThreads) return {max_k, static_cast<int>(round_up(threads, 32))};
  return {0, kMaxThreads};
}

/// Rows per dw chunk: a function of hidden only (64 for H >= 1024, up to 1024 for narrow rows).
int64_t dw_rows_per_chunk(int64_t hidden) {
  const int64_t cols = round_up(hidden, kDwCols);
  return 64 * (cols >= 1024 ? 1 : 1024 / cols);
}

struct Layout {
  int64_t partial_offset = 0, bytes = 0;
};
Layout layout(int64_t rows, int64_t hidden, int64_t acc_size) {
  Layout l;
  l.partial_offset = round_up(rows * acc_size, kWorkspaceAlign);
  l.bytes = l.partial_offset + ceil_div(rows, dw_rows_per_chunk(hidden)) * hidden * acc_size;
  return l;
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps, cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(y)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(rows));
  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);
  const CachedConfig cfg = pick_cached_config(max_units_per_row(x, hidden), kFwdMaxK<T>, kFwdTargetThreads);
  switch (cfg.k) {
    case 1: offset_forward_cached_kernel<T, 1><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e); break;
    case 2: offset_forward_cached_kernel<T, 2><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e); break;
    case 4: offset_forward_cached_kernel<T, 4><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e); break;
    case 8:
      if constexpr (kFwdMaxK<T> >= 8) offset_forward_cached_kernel<T, 8><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e);
      break;
    default: offset_forward_streaming_kernel<T><<<grid, kMaxThreads, 0, stream>>>(x, w, y, h, e); break;
  }
  return cudaGetLastError();
}

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return static_cast<size_t>(layout(rows, hidden, static_cast<int64_t>(sizeof(double))).bytes + kWorkspaceAlign);
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

  const Layout l = layout(rows, hidden, static_cast<int64_t>(sizeof(A)));
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t base = (raw + static_cast<std::uintptr_t>(kWorkspaceAlign - 1)) &
                              ~static_cast<std::uintptr_t>(kWorkspaceAlign - 1);
  A* rstd = reinterpret_cast<A*>(base);
  A* partial = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(l.partial_offset));
  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);

  // 1. dx and rstd, one block per row.
  const dim3 grid(static_cast<unsigned>(rows));
  const CachedConfig cfg = pick_cached_config(max_units_per_row(x, hidden), kBwdMaxK, kBwdTargetThreads);
  switch (cfg.k) {
    case 1: offset_backward_dx_cached_kernel<T, 1><<<grid, cfg.threads, 0, stream>>>(x, w, dy, dx, rstd, h, e); break;
    case 2: offset_backward_dx_cached_kernel<T, 2><<<grid, cfg.threads, 0, stream>>>(x, w, dy, dx, rstd, h, e); break;
    case 4: offset_backward_dx_cached_kernel<T, 4><<<grid, cfg.threads, 0, stream>>>(x, w, dy, dx, rstd, h, e); break;
    default:
      offset_backward_dx_streaming_kernel<T><<<grid, kMaxThreads, 0, stream>>>(x, w, dy, dx, rstd, h, e);
      break;
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  // 2. dw stage 1: per-chunk column partials.
  const int64_t rpc = dw_rows_per_chunk(hidden);
  const int64_t chunks = ceil_div(rows, rpc);
  offset_dw_partial_kernel<T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(ceil_div(hidden, kDwCols))),
                                dim3(kDwTx, kDwTy), 0, stream>>>(x, dy, rstd, partial, rows, h, rpc);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  // 3. dw stage 2: fixed-order sum over chunks.
  offset_dw_finalize_kernel<T><<<dim3(static_cast<unsigned>(ceil_div(hidden, kFinTx))), dim3(kFinTx, kFinTy), 0,
                                 stream>>>(partial, dw, chunks, h);
  return cudaGetLastError();
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
