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
  weight gradient:    dw_j = T( sum_rows acc(dy[r,j]) * (h[r,j] * r_r) ), r_r read back from
                      the workspace (bitwise the value used for dx), two-stage fixed-order sum.

NaN/Inf: not special-cased. A NaN (or Inf - Inf) in h makes the row's sums NaN; an Inf in
h gives rstd = 0 (y = 0 at the finite elements, NaN at the Inf); residual_out is
elementwise, so it has NaN/Inf exactly where h has (and Inf where a finite sum
overflows T, e.g. fp16 40000 + 30000).

Design (as offset_rmsnorm_kernels.cu: the separate path of rmsnorm_kernels.cu).

  Virtual 16-byte grid per row, from x's address: unit u = row elements
  [u*VEC - shift, (u+1)*VEC - shift) clipped to [0, H); x's full units are 16-byte
  aligned, every other tensor moves a full unit as one 16-byte access when
  (ptr - shift) is 16-byte aligned (checked once per row), element-wise otherwise.

  forward: one block per row, x and residual read ONCE: each thread caches K units of x
  and of residual (raw, 8 registers per unit pair; units t, t+B, ...), forms h, stores
  residual_out right away and sums h^2; block reduction (fixed tree for the block size);
  then h is formed again from the cached registers (same bits), normalized, scaled and
  stored. K = smallest of {1, 2, 4} with ceil(units / K) <= 384 threads; rows of more than
  4096 units use a streaming kernel that reads x and residual twice.

  backward: (1) one block per row, x, residual and dy cached (K in {1, 2}, <= 256
  preferred threads, up to 1024; streaming beyond 2048 units): sums of h^2 and g*h in one
  block reduction, dx written (d_residual_out read once, in the second phase), r stored to
  the workspace; (2) dw stage 1: chunks of R rows (R a function of H only: 64 for
  H >= 1024, up to 1024 for narrow rows), a 32x8 block per 64 columns of a chunk, thread
  row ty sums rows ty, ty+8, ... ascending, the 8 thread rows added in order 0..7 ->
  partial[chunk][col]; (3) stage 2: fixed-order sum over chunks (32x32 block), round to T.

  The block shape of a row depends only on H, the dtype and (for H % VEC == 0) x's
  16-byte phase: a row launched alone gives bitwise the row of the batched launch.

Limits: 1 <= H <= 65536, 0 <= rows <= 2^31 - 1, pointers aligned to sizeof(T), no
overlap. Build without --use_fast_math.
*/

#include "fused_add_rmsnorm/fused_add_rmsnorm.cuh"

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace numgate::fused_add_rmsnorm {
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
constexpr int kFwdMaxK = 4;
constexpr int kFwdTargetThreads = 384;
constexpr int kBwdMaxK = 2;
constexpr int kBwdTargetThreads = 256;
constexpr int kDwTx = 32, kDwTy = 8, kDwCols = 2 * kDwTx;
constexpr int kFinTx = 32, kFinTy = 32;
constexpr int64_t kWorkspaceAlign = 256;

template <typename A>
__device__ __forceinline__ A rstd_of(A ss, int hidden, A eps) {
  return div_rn(A(1), sqrt_rn(div_rn(ss, A(hidden)) + eps));
}

/// Element j of h = acc(x) + acc(residual).
template <typename T>
__device__ __forceinline__ acc_t<T> h_of(const Unit<T>& xu, const Unit<T>& ru, int j) {
  return unit_acc(xu, j) + unit_acc(ru, j);
}

/// Forward phase 1 for one unit: residual_out = T(h) stored, ss += h^2.
template <typename T>
__device__ __forceinline__ void fwd_phase1(const Unit<T>& xu, const Unit<T>& ru, T* ror, int lo, int hidden,
                                           bool vec, acc_t<T>& ss) {
  using A = acc_t<T>;
  A h[kVec<T>];
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    h[j] = h_of(xu, ru, j);
    ss += h[j] * h[j];
  }
  store_unit(ror, lo, hidden, vec, pack_from_acc<T>(h));
}

/// Forward phase 2 for one unit: y = T((h * r) * w).
template <typename T>
__device__ __forceinline__ Unit<T> fwd_phase2(const Unit<T>& xu, const Unit<T>& ru, const Unit<T>& wu, acc_t<T> r) {
  using A = acc_t<T>;
  A out[kVec<T>];
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) out[j] = (h_of(xu, ru, j) * r) * unit_acc(wu, j);
  return pack_from_acc<T>(out);
}

/// Per-row pointers and alignment flags (every tensor checked against x's virtual grid).
template <typename T>
struct FwdRow {
  const T *xr, *rr;
  T *ror, *yr;
  int shift, nunits;
  bool r_al, w_al, ro_al, y_al;
  __device__ FwdRow(const T* x, const T* res, const T* w, T* ro, T* y, int hidden) {
    const int64_t off = static_cast<int64_t>(blockIdx.x) * hidden;
    xr = x + off;
    rr = res + off;
    ror = ro + off;
    yr = y + off;
    shift = grid_shift(xr);
    nunits = (hidden + shift + kVec<T> - 1) / kVec<T>;
    r_al = grid_is_aligned(rr, shift);
    w_al = grid_is_aligned(w, shift);
    ro_al = grid_is_aligned(static_cast<const T*>(ror), shift);
    y_al = grid_is_aligned(static_cast<const T*>(yr), shift);
  }
};

template <typename T, int K>
__global__ void __launch_bounds__(kMaxThreads)
    fadd_forward_cached_kernel(const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w,
                               T* __restrict__ ro, T* __restrict__ y, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];
  const FwdRow<T> R(x, res, w, ro, y, hidden);
  Unit<T> xc[K], rc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    xc[k] = u < R.nunits ? load_unit(R.xr, lo, hidden, full) : zero_unit<T>();
    rc[k] = u < R.nunits ? load_unit(R.rr, lo, hidden, full && R.r_al) : zero_unit<T>();
  }
  A ss[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < R.nunits) {
      const int lo = u * V - R.shift;
      fwd_phase1<T>(xc[k], rc[k], R.ror, lo, hidden, unit_is_full<T>(lo, hidden) && R.ro_al, ss[0]);
    }
  }
  block_sum<1>(ss, red);
  const A r = rstd_of(ss[0], hidden, eps);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    keep_packed(xc[k]);
    keep_packed(rc[k]);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < R.nunits) {
      const int lo = u * V - R.shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(w, lo, hidden, full && R.w_al);
      store_unit(R.yr, lo, hidden, full && R.y_al, fwd_phase2<T>(xc[k], rc[k], wu, r));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    fadd_forward_streaming_kernel(const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w,
                                  T* __restrict__ ro, T* __restrict__ y, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];
  const FwdRow<T> R(x, res, w, ro, y, hidden);
  A ss[1] = {A(0)};
  for (int u = threadIdx.x; u < R.nunits; u += blockDim.x) {
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    fwd_phase1<T>(load_unit(R.xr, lo, hidden, full), load_unit(R.rr, lo, hidden, full && R.r_al), R.ror, lo, hidden,
                  full && R.ro_al, ss[0]);
  }
  block_sum<1>(ss, red);
  const A r = rstd_of(ss[0], hidden, eps);
  for (int u = threadIdx.x; u < R.nunits; u += blockDim.x) {
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(R.xr, lo, hidden, full);
    const Unit<T> ru = load_unit(R.rr, lo, hidden, full && R.r_al);
    const Unit<T> wu = load_unit(w, lo, hidden, full && R.w_al);
    store_unit(R.yr, lo, hidden, full && R.y_al, fwd_phase2<T>(xu, ru, wu, r));
  }
}

// ------------------------------------------------------------------------------------
// backward: dx (= d residual) and rstd, one block per row
// ------------------------------------------------------------------------------------

template <typename T>
struct BwdRow {
  const T *xr, *rr, *dyr, *dror;
  T* dxr;
  int shift, nunits;
  bool r_al, w_al, dy_al, dro_al, dx_al;
  __device__ BwdRow(const T* x, const T* res, const T* w, const T* dy, const T* dro, T* dx, int hidden) {
    const int64_t off = static_cast<int64_t>(blockIdx.x) * hidden;
    xr = x + off;
    rr = res + off;
    dyr = dy + off;
    dror = dro + off;
    dxr = dx + off;
    shift = grid_shift(xr);
    nunits = (hidden + shift + kVec<T> - 1) / kVec<T>;
    r_al = grid_is_aligned(rr, shift);
    w_al = grid_is_aligned(w, shift);
    dy_al = grid_is_aligned(dyr, shift);
    dro_al = grid_is_aligned(dror, shift);
    dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);
  }
};

/// sums += {h^2, g*h} of one unit (g = dy * w).
template <typename T>
__device__ __forceinline__ void bwd_accumulate(const Unit<T>& xu, const Unit<T>& ru, const Unit<T>& du,
                                               const Unit<T>& wu, acc_t<T> (&sums)[2]) {
  using A = acc_t<T>;
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const A h = h_of(xu, ru, j);
    const A g = mul_rn(unit_acc(du, j), unit_acc(wu, j));
    sums[0] += h * h;
    sums[1] += g * h;
  }
}

/// dx of one unit: T(r * (g - hhat * c) + dres), c = r * mgh.
template <typename T>
__device__ __forceinline__ Unit<T> bwd_unit(const Unit<T>& xu, const Unit<T>& ru, const Unit<T>& du,
                                            const Unit<T>& wu, const Unit<T>& dru, acc_t<T> r, acc_t<T> c) {
  using A = acc_t<T>;
  A out[kVec<T>];
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const A g = mul_rn(unit_acc(du, j), unit_acc(wu, j));
    const A hhat = h_of(xu, ru, j) * r;
    out[j] = add_rn(mul_rn(r, sub_rn(g, mul_rn(hhat, c))), unit_acc(dru, j));
  }
  return pack_from_acc<T>(out);
}

/// pick_cached_config only picks K < kBwdMaxK for blocks of <= kBwdTargetThreads threads.
template <int K>
constexpr int kBwdBound = K < kBwdMaxK ? kBwdTargetThreads : kMaxThreads;

template <typename T, int K>
__global__ void __launch_bounds__(kBwdBound<K>)
    fadd_backward_dx_cached_kernel(const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w,
                                   const T* __restrict__ dy, const T* __restrict__ dro, T* __restrict__ dx,
                                   acc_t<T>* __restrict__ rstd, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[2][32];
  const BwdRow<T> R(x, res, w, dy, dro, dx, hidden);
  Unit<T> xc[K], rc[K], dc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    xc[k] = u < R.nunits ? load_unit(R.xr, lo, hidden, full) : zero_unit<T>();
    rc[k] = u < R.nunits ? load_unit(R.rr, lo, hidden, full && R.r_al) : zero_unit<T>();
    dc[k] = u < R.nunits ? load_unit(R.dyr, lo, hidden, full && R.dy_al) : zero_unit<T>();
  }
  A sums[2] = {A(0), A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < R.nunits) {
      const int lo = u * V - R.shift;
      const Unit<T> wu = load_unit(w, lo, hidden, unit_is_full<T>(lo, hidden) && R.w_al);
      bwd_accumulate<T>(xc[k], rc[k], dc[k], wu, sums);
    }
  }
  block_sum<2>(sums, red);
  const A r = rstd_of(sums[0], hidden, eps);
  const A c = r * div_rn(sums[1], A(hidden));
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    keep_packed(xc[k]);
    keep_packed(rc[k]);
    keep_packed(dc[k]);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < R.nunits) {
      const int lo = u * V - R.shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(w, lo, hidden, full && R.w_al);
      const Unit<T> dru = load_unit(R.dror, lo, hidden, full && R.dro_al);
      store_unit(R.dxr, lo, hidden, full && R.dx_al, bwd_unit<T>(xc[k], rc[k], dc[k], wu, dru, r, c));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    fadd_backward_dx_streaming_kernel(const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w,
                                      const T* __restrict__ dy, const T* __restrict__ dro, T* __restrict__ dx,
                                      acc_t<T>* __restrict__ rstd, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[2][32];
  const BwdRow<T> R(x, res, w, dy, dro, dx, hidden);
  A sums[2] = {A(0), A(0)};
  for (int u = threadIdx.x; u < R.nunits; u += blockDim.x) {
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    bwd_accumulate<T>(load_unit(R.xr, lo, hidden, full), load_unit(R.rr, lo, hidden, full && R.r_al),
                      load_unit(R.dyr, lo, hidden, full && R.dy_al), load_unit(w, lo, hidden, full && R.w_al), sums);
  }
  block_sum<2>(sums, red);
  const A r = rstd_of(sums[0], hidden, eps);
  const A c = r * div_rn(sums[1], A(hidden));
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  for (int u = threadIdx.x; u < R.nunits; u += blockDim.x) {
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(R.xr, lo, hidden, full);
    const Unit<T> ru = load_unit(R.rr, lo, hidden, full && R.r_al);
    const Unit<T> du = load_unit(R.dyr, lo, hidden, full && R.dy_al);
    const Unit<T> wu = load_unit(w, lo, hidden, full && R.w_al);
    const Unit<T> dru = load_unit(R.dror, lo, hidden, full && R.dro_al);
    store_unit(R.dxr, lo, hidden, full && R.dx_al, bwd_unit<T>(xu, ru, du, wu, dru, r, c));
  }
}

// ------------------------------------------------------------------------------------
// backward: dw, deterministic two-stage column reduction
// ------------------------------------------------------------------------------------

/// Stage 1. grid = (chunks, ceil(H / 64)), block = (32, 8): partial[c][j] = sum over the
/// rows of chunk c of acc(dy) * ((acc(x) + acc(residual)) * rstd[row]); thread row ty sums
/// rows ty, ty + 8, ... ascending, then the 8 thread rows are added in order 0..7.
template <typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy)
    fadd_dw_partial_kernel(const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ dy,
                           const acc_t<T>* __restrict__ rstd, acc_t<T>* __restrict__ partial, int64_t rows,
                           int hidden, int64_t rows_per_chunk) {
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
    const int64_t b = r * hidden;
    if (j0 < hidden) a0 += to_acc(dy[b + j0]) * ((to_acc(x[b + j0]) + to_acc(res[b + j0])) * rv);
    if (j1 < hidden) a1 += to_acc(dy[b + j1]) * ((to_acc(x[b + j1]) + to_acc(res[b + j1])) * rv);
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

/// Stage 2. grid = ceil(H / 32), block = (32, 32): dw[j] = T(sum over chunks), thread row
/// ty sums chunks ty, ty + 32, ... ascending, then row 0 adds the 32 lane sums in order.
template <typename T>
__global__ void __launch_bounds__(kFinTx* kFinTy)
    fadd_dw_finalize_kernel(const acc_t<T>* __restrict__ partial, T* __restrict__ dw, int64_t chunks, int hidden) {
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
/// Units per row the launch is sized for (x's phase if all rows share it, else the worst).
template <typename T>
int64_t max_units_per_row(const T* x, int64_t hidden) {
  constexpr int V = kVec<T>;
  const int shift0 = static_cast<int>((reinterpret_cast<std::uintptr_t>(x) & 15u) / sizeof(T));
  return ceil_div(hidden + (hidden % V == 0 ? shift0 : V - 1), V);
}
struct CachedConfig {
  int k = 0;
  int threads = 0;
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
cudaError_t forward(const T* x, const T* residual, const T* w, T* residual_out, T* y, int64_t rows, int64_t hidden,
                    double eps, cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!x || !residual || !w || !residual_out || !y) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(residual) || !aligned_to_element(w) ||
      !aligned_to_element(residual_out) || !aligned_to_element(y))
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(rows));
  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);
  const CachedConfig cfg = pick_cached_config(max_units_per_row(x, hidden), kFwdMaxK, kFwdTargetThreads);
  switch (cfg.k) {
    case 1:
      fadd_forward_cached_kernel<T, 1><<<grid, cfg.threads, 0, stream>>>(x, residual, w, residual_out, y, h, e);
      break;
    case 2:
      fadd_forward_cached_kernel<T, 2><<<grid, cfg.threads, 0, stream>>>(x, residual, w, residual_out, y, h, e);
      break;
    case 4:
      fadd_forward_cached_kernel<T, 4><<<grid, cfg.threads, 0, stream>>>(x, residual, w, residual_out, y, h, e);
      break;
    default:
      fadd_forward_streaming_kernel<T><<<grid, kMaxThreads, 0, stream>>>(x, residual, w, residual_out, y, h, e);
      break;
  }
  return cudaGetLastError();
}

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  return static_cast<size_t>(layout(rows, hidden, static_cast<int64_t>(sizeof(double))).bytes + kWorkspaceAlign);
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

  const Layout l = layout(rows, hidden, static_cast<int64_t>(sizeof(A)));
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t base = (raw + static_cast<std::uintptr_t>(kWorkspaceAlign - 1)) &
                              ~static_cast<std::uintptr_t>(kWorkspaceAlign - 1);
  A* rstd = reinterpret_cast<A*>(base);
  A* partial = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(l.partial_offset));
  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);

  const dim3 grid(static_cast<unsigned>(rows));
  const CachedConfig cfg = pick_cached_config(max_units_per_row(x, hidden), kBwdMaxK, kBwdTargetThreads);
  switch (cfg.k) {
    case 1:
      fadd_backward_dx_cached_kernel<T, 1><<<grid, cfg.threads, 0, stream>>>(x, residual, w, dy, d_residual_out, dx,
                                                                             rstd, h, e);
      break;
    case 2:
      fadd_backward_dx_cached_kernel<T, 2><<<grid, cfg.threads, 0, stream>>>(x, residual, w, dy, d_residual_out, dx,
                                                                             rstd, h, e);
      break;
    default:
      fadd_backward_dx_streaming_kernel<T><<<grid, kMaxThreads, 0, stream>>>(x, residual, w, dy, d_residual_out, dx,
                                                                             rstd, h, e);
      break;
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  const int64_t rpc = dw_rows_per_chunk(hidden);
  const int64_t chunks = ceil_div(rows, rpc);
  fadd_dw_partial_kernel<T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(ceil_div(hidden, kDwCols))),
                              dim3(kDwTx, kDwTy), 0, stream>>>(x, residual, dy, rstd, partial, rows, h, rpc);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  fadd_dw_finalize_kernel<T><<<dim3(static_cast<unsigned>(ceil_div(hidden, kFinTx))), dim3(kFinTx, kFinTy), 0,
                               stream>>>(partial, dw, chunks, h);
  return cudaGetLastError();
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
