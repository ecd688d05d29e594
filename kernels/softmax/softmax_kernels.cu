/*
Softmax forward and backward kernels (the numgate target kernels for softmax). The op,
masking rules and numerics contract are in softmax.cuh (and softmax_oracle.h, whose
reference this mirrors operation for operation).

Design.

  One block per row (grid.x = rows): 256 threads forward, 128 backward (256 for the
  two-sweep kernel); rows of one 16-byte unit per thread take the narrowest block of 32,
  64 or 128 threads that holds them (bitwise the same results, see the launchers). A row of T starting at address p is
  viewed on the virtual 16-byte grid of common/cuda_utils.cuh: it starts
  shift = (p % 16) / sizeof(T) elements before p, unit u covers row elements
  [u*VEC - shift, (u+1)*VEC - shift) clipped to [0, k_len), VEC = 16 / sizeof(T). The grid is
  chosen from x (forward) or y (backward), whose full units are therefore 16-byte aligned;
  every other tensor moves as 16-byte vectors only where its own address is on the same
  grid (checked once per row), element by element otherwise and for partial units. Thread
  t owns units t, t + 256, ...

  forward, per row, in three steps:
    1. m = block max of z over the unmasked elements (NaN-propagating: a shuffle butterfly
       of a symmetric max, so every lane agrees bitwise);
    2. s = block sum of e_j = exp(z_j - m) (per-thread sequential, then block_sum);
    3. y_j = T(e_j / s) (bf16 / fp16: T(e_j * RN(1 / s)), see normalize); masked elements
       and rows with m == -inf write exact zeros.
  Rows of up to kCacheUnits * 256 units (bf16/fp16 16,384 elements, fp32 8,192, double
  4,096) take the cached kernel: each thread loads its units once (one DRAM read of x and
  of the mask), keeps z in registers through step 1 and e_j through steps 2-3, so x is
  read once, y written once and each exponential computed once. Longer rows take the
  streaming kernel, which sweeps x three times (the later sweeps mostly L1/L2 hits) and
  computes each exponential twice. Both visit units and elements in the same order
  (units t, t + 256, ...; elements ascending), so they give bitwise the same y; the
  launch picks the smallest register cache (1, 2, 4 or 8 units per thread) that holds
  the row (from k_len and x's 16-byte phase).
  The exponential is FP32 expf for bf16 / fp16 outputs and FP64 exp rounded once for
  float outputs (see exp_acc).
  Why not online (max, sum) in one sweep: its rescaling s * exp(m_old - m_new) adds
  |m_old - m_new| * u of relative error to s that the reference (which exponentiates once
  against the final max) does not make; for fp32 outputs the gate's threshold is a few
  FP32 ulps, so the kernel exponentiates against the final max only.

  Causal rows (mask_mode 1): a unit wholly past the row's causal limit (lo > last_key)
  holds no visible element, so its x is never loaded (ForwardRow::visible); its y is
  stored as zeros.

  backward, per row: dot = block sum of dy_j * y_j; dx_j = T(scale * (y_j * (dy_j - dot))).
  Every dy_j is read (the golden's dot includes masked positions, where y_j = 0: a NaN or
  Inf dy there makes the row NaN). In mask_mode 1, y in the units wholly past the causal
  limit is not loaded but taken as +0 (load_y), the value the forward stored there, so dx
  is bitwise that of reading it (SoftmaxCausalBackward checks it, and that nothing else is
  skipped); about a quarter of a square causal backward's reads. Rows of up to 8 units
  per thread (bf16/fp16 8,192 elements, fp32 4,096) take backward_cached_kernel: 128
  threads per row, each loading its units of y and dy once, all before any arithmetic
  (plain loads and stores: the evict-first hints measured 5% slower), then the block
  sum and dx from registers; longer rows take the two-sweep backward_kernel (256 threads,
  the second sweep mostly L1/L2 hits). Both sum each thread's units in ascending order and
  then across threads by block_sum, so the result depends only on k_len and the row's
  16-byte phase.

Speed (H200, run 23, numgate-bench kernel clock, bf16 causal scaled 4x8x4096x4096; minimal
traffic: the visible half of x (50.01%: 0.54 GB) read and y (1.07 GB) written forward; the
visible half of y, all of dy read and dx written backward; copy = the same GPU's
device-to-device memcpy, 4272 GB/s):
  forward   1.61 GB, 654 us: 2.46 TB/s, 58% of copy (torch.compile 1422 us: 0.46). Limited
            by instruction issue, not DRAM: Nsight Compute on the H200 (scratch harness,
            same kernel, 643 us) shows 79% of the schedulers' issue slots used and DRAM at
            51% of peak; about 31 instructions per element slot, the accurate FP32 expf
            alone 11 (it keeps the <= 2 ulp contract; one ex2.approx of (z - m) * log2(e)
            would err by about |z - m| FP32 ulps from that product's rounding). The same kernel
            without the mask (all of x read) takes 784 us.
  backward  2.68 GB, 630 us: 4.26 TB/s, 99% of copy (a 2-read : 1-write stream). Limited by
            DRAM; torch.compile 720-721 us (0.87), and 733.8 us when its graph is given the
            mask (it still reads every y). Before the causal skip: 3.22 GB in 742-745 us,
            1.03 of torch.compile, after ~25 variants that moved every byte (docs/peer-runs.md,
            the run log of README.md's "Against torch.compile and Liger-Kernel").

Short rows (bf16 causal 1x8x512x512, 4096 rows of 64 units, 4.2 MB each way): one row
per block, so what limits them is the latency of a row's load-reduce-store chain times
the rows that do not fit on the GPU at once; the narrow blocks (64 threads for these rows)
put four times the rows in flight. Run 23 (outputs reused / rotating): forward 5.97 /
6.28 us (7.3 before the one-instruction max), backward 4.75 / 5.06 us; torch.compile
4.10 / 4.52 and 4.21 / 4.72 us (several rows per program).

Limits: see softmax.cuh. Build without --use_fast_math (the contract names div_rn etc.
explicitly, so it would not change them, but exp would still be the FP64 libdevice one).
*/

#include "softmax/softmax.cuh"

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/kernel_trace.h"

namespace numgate::softmax {
namespace {

using numgate::device::acc_t;
using numgate::device::add_rn;
using numgate::device::block_sum;
using numgate::device::div_rn;
using numgate::device::from_acc;
using numgate::device::grid_is_aligned;
using numgate::device::grid_shift;
using numgate::device::kVec;
using numgate::device::load_unit;
using numgate::device::load_unit_hint;
using numgate::device::mul_rn;
using numgate::device::pack_from_acc;
using numgate::device::store_unit;
using numgate::device::store_unit_hint;
using numgate::device::sub_rn;
using numgate::device::Unit;
using numgate::device::unit_acc;
using numgate::device::unit_is_full;

constexpr int kThreads = 256;
/// Units per thread of the largest register-cached forward (longer rows stream).
constexpr int kCacheUnits = 8;

/// The dtype's lowest finite value, in acc: a mask value at or below it masks out.
template <typename T>
__device__ __forceinline__ acc_t<T> lowest_finite() {
  if constexpr (std::is_same_v<T, __half>) {
    return -65504.0f;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return -3.3895313892515355e38f;
  } else if constexpr (std::is_same_v<T, float>) {
    return -FLT_MAX;
  } else {
    return -DBL_MAX;
  }
}

/// NaN-propagating max, symmetric in its arguments up to the NaN payload. float: one
/// max.NaN.f32 (sm_80+), which returns the canonical NaN and +0 for max(+0, -0) where the
/// select below returned an operand; no output bit changes, since m enters the results
/// only through sub_rn(z, m) (an FP32 operation: its NaN is canonical either way, and
/// z - (+-0) is the same value) and the test m == -inf.
template <typename A>
__device__ __forceinline__ A max_nan(A a, A b) {
  if constexpr (std::is_same_v<A, float>) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  } else {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
}

/// exp(d) in acc. float outputs: FP64 exp rounded once to float, the reference's libm expf
/// value but for rare near-ties (CUDA's expf errs by up to 2 ulp, and the FP32 gate allows a
/// few FP32 ulps of y). bf16 / fp16 outputs: CUDA's FP32 expf (<= 2 FP32 ulp, 2^-13 of the
/// output's rounding; the FP64 exp made the forward compute-bound). double: exp.
template <typename T>
__device__ __forceinline__ acc_t<T> exp_acc(acc_t<T> d) {
  if constexpr (std::is_same_v<T, double>) return exp(d);
  else if constexpr (sizeof(T) == 2) return expf(d);
  else return __double2float_rn(exp(static_cast<double>(d)));
}

/// y_j = e_j / s in acc. bf16 / fp16 outputs: e_j * RN(1 / s) (one reciprocal per row;
/// two FP32 roundings, 2^-14 of the output's rounding; the IEEE division per element made
/// the forward instruction-bound). float / double: e_j / s, one rounding.
template <typename T>
__device__ __forceinline__ acc_t<T> normalize(acc_t<T> e, acc_t<T> s, acc_t<T> inv_s) {
  if constexpr (sizeof(T) == 2) return mul_rn(e, inv_s);
  else return div_rn(e, s);
}

/// Block-wide NaN-propagating max (every thread gets the result). smem: 32 values.
template <typename A>
__device__ __forceinline__ A block_max(A v, A* smem) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem[lane] : A(-INFINITY);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();
  return v;
}

/// Visits the unmasked elements of the unit at lo: f(slot, z_j) for each.
template <typename T, typename F>
__device__ __forceinline__ void for_each_unmasked(const Unit<T>& ux, const Unit<T>& um, int lo, int k_len,
                                                  int mask_mode, int64_t last_key, acc_t<T> sf, F&& f) {
  using A = acc_t<T>;
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const int idx = lo + j;
    if (idx < 0 || idx >= k_len) continue;
    if (mask_mode == 1 && idx > last_key) continue;
    A z = mul_rn(unit_acc(ux, j), sf);
    if (mask_mode == 2) {
      const A b = unit_acc(um, j);
      if (b <= lowest_finite<T>()) continue;
      z = add_rn(z, b);
    }
    f(j, z);
  }
}

/// Row blockIdx.x of a forward launch, as both forward kernels see it.
template <typename T>
struct ForwardRow {
  const T* __restrict__ x;     ///< the row of x
  T* __restrict__ y;           ///< the row of y
  const T* __restrict__ mask;  ///< the query's mask row (mask_mode 2), else null
  int64_t last_key;  ///< causal: keys j <= last_key are visible
  int mode;          ///< mask_mode
  int shift;         ///< elements of the virtual 16-byte grid before x (see cuda_utils.cuh)
  int nunits;        ///< units of that grid the row touches
  bool mask_al, y_al;  ///< mask / y rows on x's 16-byte grid (vector access allowed)

  __device__ ForwardRow(const T* x0, const T* mask0, T* y0, int64_t q_len, int k_len, int mask_mode,
                        int64_t row_offset) {
    const int64_t r = blockIdx.x, qi = (row_offset + r) % q_len;
    x = x0 + r * k_len;
    y = y0 + r * k_len;
    mask = mask_mode == 2 ? mask0 + qi * k_len : nullptr;
    last_key = qi + k_len - q_len;
    mode = mask_mode;
    shift = grid_shift(x);
    nunits = (k_len + shift + kVec<T> - 1) / kVec<T>;
    mask_al = mask != nullptr && grid_is_aligned(mask, shift);
    y_al = grid_is_aligned(static_cast<const T*>(y), shift);
  }
  /// False for a unit at lo wholly past the causal limit (mask_mode 1): none of its
  /// elements enters the arithmetic, so x is not read there.
  __device__ __forceinline__ bool visible(int lo) const { return mode != 1 || lo <= last_key; }
};

template <typename T>
__global__ void __launch_bounds__(kThreads) forward_kernel(const T* __restrict__ x, const T* __restrict__ mask,
                                                           T* __restrict__ y, int64_t q_len, int k_len,
                                                           acc_t<T> sf, int mask_mode, int64_t row_offset) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  __shared__ A smem_max[32];
  __shared__ A smem_sum[1][32];
  const ForwardRow<T> row(x, mask, y, q_len, k_len, mask_mode, row_offset);
  auto load_mask = [&](int lo, bool full) {
    return mask_mode == 2 ? load_unit(row.mask, lo, k_len, full && row.mask_al) : numgate::device::zero_unit<T>();
  };
  auto load_x = [&](int lo, bool full) {
    return row.visible(lo) ? load_unit(row.x, lo, k_len, full) : numgate::device::zero_unit<T>();
  };

  // 1. max
  A m = A(-INFINITY);
  for (int u = threadIdx.x; u < row.nunits; u += kThreads) {
    const int lo = u * VEC - row.shift;
    const bool full = unit_is_full<T>(lo, k_len);
    const Unit<T> ux = load_x(lo, full), um = load_mask(lo, full);
    for_each_unmasked(ux, um, lo, k_len, mask_mode, row.last_key, sf, [&](int, A z) { m = max_nan(m, z); });
  }
  m = block_max(m, smem_max);
  const bool empty = m == A(-INFINITY);

  // 2. sum of exponentials (skipped for an empty row: it would be exp(-inf - -inf) = NaN)
  A s[1] = {A(0)};
  if (!empty) {
    for (int u = threadIdx.x; u < row.nunits; u += kThreads) {
      const int lo = u * VEC - row.shift;
      const bool full = unit_is_full<T>(lo, k_len);
      const Unit<T> ux = load_x(lo, full), um = load_mask(lo, full);
      for_each_unmasked(ux, um, lo, k_len, mask_mode, row.last_key, sf,
                        [&](int, A z) { s[0] = add_rn(s[0], exp_acc<T>(sub_rn(z, m))); });
    }
  }
  block_sum<1>(s, smem_sum);  // every thread takes part (uniform: `empty` is block-wide)
  const A inv_s = div_rn(A(1), s[0]);

  // 3. y
  for (int u = threadIdx.x; u < row.nunits; u += kThreads) {
    const int lo = u * VEC - row.shift;
    const bool full = unit_is_full<T>(lo, k_len);
    A v[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = A(0);
    if (!empty) {
      const Unit<T> ux = load_x(lo, full), um = load_mask(lo, full);
      for_each_unmasked(ux, um, lo, k_len, mask_mode, row.last_key, sf,
                        [&](int j, A z) { v[j] = normalize<T>(exp_acc<T>(sub_rn(z, m)), s[0], inv_s); });
    }
    store_unit(row.y, lo, k_len, full && row.y_al, pack_from_acc<T>(v));
  }
}

/// Forward with the row held in registers: thread t of NT caches units t, t + NT, ...,
/// t + (R - 1) * NT (the row has at most R * NT units; NT = 256, or 32 / 64 / 128 for rows
/// of one unit per thread). Same operations in the same order as forward_kernel.
template <typename T, int R, int NT = kThreads>
__global__ void __launch_bounds__(NT) forward_cached_kernel(const T* __restrict__ x, const T* __restrict__ mask,
                                                                  T* __restrict__ y, int64_t q_len, int k_len,
                                                                  acc_t<T> sf, int mask_mode, int64_t row_offset) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  __shared__ A smem_max[32];
  __shared__ A smem_sum[1][32];
  const ForwardRow<T> row(x, mask, y, q_len, k_len, mask_mode, row_offset);

  constexpr unsigned kAll = (1u << VEC) - 1;  // keep mask of a full, fully visible unit
  A v[R][VEC];           // z_j, then e_j, then y_j (acc)
  unsigned keep[R];      // bit j: element j of the unit is in the row and unmasked
  A m = A(-INFINITY);
#pragma unroll
  for (int k = 0; k < R; ++k) {
    keep[k] = 0;
    const int u = static_cast<int>(threadIdx.x) + k * NT;
    if (u >= row.nunits) continue;
    const int lo = u * VEC - row.shift;
    const bool full = unit_is_full<T>(lo, k_len);
    if (!row.visible(lo)) continue;  // wholly past the causal limit: nothing kept, x not read
    const Unit<T> ux = load_unit(row.x, lo, k_len, full);
    if (full && (mask_mode == 0 || (mask_mode == 1 && lo + VEC - 1 <= row.last_key))) {
      // every element of the unit is in the row and visible: no per-element checks
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        v[k][j] = mul_rn(unit_acc(ux, j), sf);
        m = max_nan(m, v[k][j]);
      }
      keep[k] = kAll;
      continue;
    }
    const Unit<T> um = mask_mode == 2 ? load_unit(row.mask, lo, k_len, full && row.mask_al) : numgate::device::zero_unit<T>();
    for_each_unmasked(ux, um, lo, k_len, mask_mode, row.last_key, sf, [&](int j, A z) {
      v[k][j] = z;
      keep[k] |= 1u << j;
      m = max_nan(m, z);
    });
  }
  m = block_max(m, smem_max);
  const bool empty = m == A(-INFINITY);

  A s[1] = {A(0)};
  if (!empty) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
      if (keep[k] == 0) continue;  // nothing visible (past the causal limit, or no unit)
      // bf16 / fp16: no per-element test on full visible units (for float, whose FP64 exp
      // is long, a second copy of the loop would spill registers)
      if constexpr (sizeof(T) == 2) {
        if (keep[k] == kAll) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            v[k][j] = exp_acc<T>(sub_rn(v[k][j], m));
            s[0] = add_rn(s[0], v[k][j]);
          }
          continue;
        }
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        if (keep[k] >> j & 1u) {
          v[k][j] = exp_acc<T>(sub_rn(v[k][j], m));
          s[0] = add_rn(s[0], v[k][j]);
        }
    }
  }
  block_sum<1>(s, smem_sum);
  const A inv_s = div_rn(A(1), s[0]);

#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * NT;
    if (u >= row.nunits) continue;
    const int lo = u * VEC - row.shift;
    A out[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = (!empty && (keep[k] >> j & 1u)) ? normalize<T>(v[k][j], s[0], inv_s) : A(0);
    store_unit(row.y, lo, k_len, unit_is_full<T>(lo, k_len) && row.y_al, pack_from_acc<T>(out));
  }
}

/// The backward's row geometry, from its arguments: the row's causal limit (keys j <=
/// last_key are visible; mask_mode 1 only, else no limit) decides which units of y are read.
struct BackwardMask {
  int64_t q_len, row_offset;
  bool causal;  ///< mask_mode 1
  /// Last visible key of row r of the launch (INT64_MAX: every key).
  __device__ __forceinline__ int64_t last_key(int64_t r, int k_len) const {
    return causal ? (row_offset + r) % q_len + k_len - q_len : INT64_MAX;
  }
};

/// y's unit at lo, or +0 (the value the forward stored there) where the unit lies wholly
/// past the causal limit: y is not read there.
template <typename T, bool kStream = false>
__device__ __forceinline__ Unit<T> load_y(const T* yr, int lo, int k_len, bool full, int64_t last_key) {
  return lo <= last_key ? numgate::device::load_unit_hint<kStream>(yr, lo, k_len, full)
                        : numgate::device::zero_unit<T>();
}

template <typename T>
__global__ void __launch_bounds__(kThreads) backward_kernel(const T* __restrict__ y, const T* __restrict__ dy,
                                                            T* __restrict__ dx, int k_len, acc_t<T> sf,
                                                            BackwardMask bm) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  __shared__ A smem_sum[1][32];
  const int64_t r = blockIdx.x;
  const T* yr = y + r * k_len;
  const T* dyr = dy + r * k_len;
  T* dxr = dx + r * k_len;
  const int shift = grid_shift(yr);
  const int nunits = (k_len + shift + VEC - 1) / VEC;
  const bool dy_al = grid_is_aligned(dyr, shift);
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);
  const int64_t last_key = bm.last_key(r, k_len);

  A dot[1] = {A(0)};
  for (int u = threadIdx.x; u < nunits; u += kThreads) {
    const int lo = u * VEC - shift;
    const bool full = unit_is_full<T>(lo, k_len);
    const Unit<T> uy = load_y(yr, lo, k_len, full, last_key), ud = load_unit(dyr, lo, k_len, full && dy_al);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int idx = lo + j;
      if (idx >= 0 && idx < k_len) dot[0] = add_rn(dot[0], mul_rn(unit_acc(ud, j), unit_acc(uy, j)));
    }
  }
  block_sum<1>(dot, smem_sum);

  for (int u = threadIdx.x; u < nunits; u += kThreads) {
    const int lo = u * VEC - shift;
    const bool full = unit_is_full<T>(lo, k_len);
    const Unit<T> uy = load_y(yr, lo, k_len, full, last_key), ud = load_unit(dyr, lo, k_len, full && dy_al);
    A v[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      v[j] = mul_rn(sf, mul_rn(unit_acc(uy, j), sub_rn(unit_acc(ud, j), dot[0])));
    store_unit(dxr, lo, k_len, full && dx_al, pack_from_acc<T>(v));
  }
}

/// Backward with the row held in registers: thread t of NT loads its units t, t + NT, ...,
/// t + (R - 1) * NT of y and dy once, all before any arithmetic (2R 16-byte loads in
/// flight per thread), then backward_kernel's per-element operations; the dot product's
/// partition and block_sum tree are NT's (128 in production; 32 or 64 for rows of at most
/// that many units, the same bits as 128), so dx is deterministic per
/// (k_len, phase) but not bitwise backward_kernel's: y and dy cross DRAM once. kStream: y, dy
/// and dx move with the evict-first hint (load_unit_hint / store_unit_hint,
/// common/cuda_utils.cuh: ld/st.global.cs where a unit is one 16-byte access).
template <typename T, int R, bool kStream, int NT = kThreads>
__global__ void __launch_bounds__(NT) backward_cached_kernel(const T* __restrict__ y, const T* __restrict__ dy,
                                                             T* __restrict__ dx, int k_len, acc_t<T> sf,
                                                             BackwardMask bm) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  __shared__ A smem_sum[1][32];
  const int64_t r = blockIdx.x;
  const T* yr = y + r * k_len;
  const T* dyr = dy + r * k_len;
  T* dxr = dx + r * k_len;
  const int shift = grid_shift(yr);
  const int nunits = (k_len + shift + VEC - 1) / VEC;
  const bool dy_al = grid_is_aligned(dyr, shift);
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);
  const int64_t last_key = bm.last_key(r, k_len);

  Unit<T> uy[R], ud[R];
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * NT;
    uy[k] = numgate::device::zero_unit<T>();
    ud[k] = numgate::device::zero_unit<T>();
    if (u < nunits) {
      const int lo = u * VEC - shift;
      const bool full = unit_is_full<T>(lo, k_len);
      uy[k] = load_y<T, kStream>(yr, lo, k_len, full, last_key);
      ud[k] = load_unit_hint<kStream>(dyr, lo, k_len, full && dy_al);
    }
  }
  A dot[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * NT;
    if (u >= nunits) continue;
    const int lo = u * VEC - shift;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int idx = lo + j;
      if (idx >= 0 && idx < k_len) dot[0] = add_rn(dot[0], mul_rn(unit_acc(ud[k], j), unit_acc(uy[k], j)));
    }
  }
  block_sum<1>(dot, smem_sum);
#pragma unroll
  for (int k = 0; k < R; ++k) {
    numgate::device::keep_packed(uy[k]);
    numgate::device::keep_packed(ud[k]);
  }
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * NT;
    if (u >= nunits) continue;
    const int lo = u * VEC - shift;
    const bool full = unit_is_full<T>(lo, k_len);
    A v[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      v[j] = mul_rn(sf, mul_rn(unit_acc(uy[k], j), sub_rn(unit_acc(ud[k], j), dot[0])));
    store_unit_hint<kStream>(dxr, lo, k_len, full && dx_al, pack_from_acc<T>(v));
  }
}

template <typename T>
bool aligned(const T* p) {
  return (reinterpret_cast<std::uintptr_t>(p) % alignof(T)) == 0;
}

constexpr int64_t kMaxRows = 2147483647LL, kMaxKLen = int64_t{1} << 30;

/// Threads per row of the backward (128: measured fastest of 128 / 256 / 512 at 4096-element
/// rows) and the largest register cache (8 units per thread: rows of up to 8,192 bf16/fp16
/// or 4,096 fp32 elements; longer rows take the two-sweep kernel).
constexpr int kBwdThreads = 128;
constexpr int kBwdCacheUnits = 8;
/// No evict-first hints on the backward: in one process on the H200 (bf16 causal
/// 4x8x4096x4096, the peers' timing method), plain loads and stores took 744.7 us and
/// the hinted ones 783.0 us (each the median of two 50-call runs, spread < 0.3%).
constexpr bool kBwdStream = false;

/// Backward launch: the register-cached kernel with the smallest cache (1, 2, 4 or 8 units
/// per thread) that holds the row, else the two-sweep kernel.
template <typename T>
cudaError_t backward_launch(const T* y, const T* dy, T* dx, int64_t rows, int64_t k_len, double scale,
                            BackwardMask bm, int block_threads, cudaStream_t stream) {
  constexpr int NT = kBwdThreads;
  const int64_t vec = kVec<T>;
  const int64_t max_units =
      (k_len * static_cast<int64_t>(sizeof(T))) % 16 == 0
          ? (k_len + static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(y) % 16 / sizeof(T)) + vec - 1) / vec
          : (k_len + 2 * (vec - 1)) / vec;
  const unsigned grid = static_cast<unsigned>(rows);
  const int kl = static_cast<int>(k_len);
  const acc_t<T> sf = static_cast<acc_t<T>>(scale);
  using kernel_trace::Launcher;
  if (block_threads != 0) {  // the test hook backward_with_block
    if (max_units > block_threads) return cudaErrorInvalidValue;
    switch (block_threads) {
      case 32: backward_cached_kernel<T, 1, kBwdStream, 32><<<grid, 32, 0, stream>>>(y, dy, dx, kl, sf, bm); break;
      case 64: backward_cached_kernel<T, 1, kBwdStream, 64><<<grid, 64, 0, stream>>>(y, dy, dx, kl, sf, bm); break;
      case NT: backward_cached_kernel<T, 1, kBwdStream, NT><<<grid, NT, 0, stream>>>(y, dy, dx, kl, sf, bm); break;
      default: return cudaErrorInvalidValue;
    }
    kernel_trace::record(Launcher::softmax_backward, "forced");
    return cudaGetLastError();
  }
  // Rows of at most 64 units: the narrowest block that holds them, one unit per thread
  // (bitwise the 128-thread block's dx: the dropped threads' +0 entries in block_sum's
  // fixed tree are the same leaves either way), more rows in flight per SM.
  static_assert(NT == 128 && kBwdCacheUnits == 8, "the recorded kernel names below spell these");
  if (max_units <= 32) {
    kernel_trace::record(Launcher::softmax_backward, "cached_32");
    backward_cached_kernel<T, 1, kBwdStream, 32><<<grid, 32, 0, stream>>>(y, dy, dx, kl, sf, bm);
  } else if (max_units <= 64) {
    kernel_trace::record(Launcher::softmax_backward, "cached_64");
    backward_cached_kernel<T, 1, kBwdStream, 64><<<grid, 64, 0, stream>>>(y, dy, dx, kl, sf, bm);
  } else if (max_units <= 1 * NT) {
    kernel_trace::record(Launcher::softmax_backward, "cached_128x1");
    backward_cached_kernel<T, 1, kBwdStream, NT><<<grid, NT, 0, stream>>>(y, dy, dx, kl, sf, bm);
  } else if (max_units <= 2 * NT) {
    kernel_trace::record(Launcher::softmax_backward, "cached_128x2");
    backward_cached_kernel<T, 2, kBwdStream, NT><<<grid, NT, 0, stream>>>(y, dy, dx, kl, sf, bm);
  } else if (max_units <= 4 * NT) {
    kernel_trace::record(Launcher::softmax_backward, "cached_128x4");
    backward_cached_kernel<T, 4, kBwdStream, NT><<<grid, NT, 0, stream>>>(y, dy, dx, kl, sf, bm);
  } else if (max_units <= kBwdCacheUnits * NT) {
    kernel_trace::record(Launcher::softmax_backward, "cached_128x8");
    backward_cached_kernel<T, kBwdCacheUnits, kBwdStream, NT><<<grid, NT, 0, stream>>>(y, dy, dx, kl, sf, bm);
  } else {
    kernel_trace::record(Launcher::softmax_backward, "two_sweep");
    backward_kernel<T><<<grid, kThreads, 0, stream>>>(y, dy, dx, kl, sf, bm);
  }
  return cudaGetLastError();
}

/// forward() with the block width forced when block_threads != 0 (the test hook
/// forward_with_block: rows of at most block_threads units, one unit per thread).
template <typename T>
cudaError_t forward_impl(const T* x, const T* mask, T* y, int64_t rows, int64_t q_len, int64_t k_len, double scale,
                         int mask_mode, int64_t row_offset, int block_threads, cudaStream_t stream) {
  if (rows < 0 || rows > kMaxRows || k_len < 1 || k_len > kMaxKLen || q_len < 1 || row_offset < 0 ||
      mask_mode < 0 || mask_mode > 2)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!x || !y || (mask_mode == 2 && !mask)) return cudaErrorInvalidValue;
  if (!aligned(x) || !aligned(y) || (mask_mode == 2 && !aligned(mask))) return cudaErrorInvalidValue;
  // Units a row spans: exact when every row has x's 16-byte phase (row bytes a multiple of
  // 16), else the most any phase gives (a partial unit at each end). Only the register
  // cache's size depends on it, never a result.
  const int64_t vec = kVec<T>;
  const int64_t max_units =
      (k_len * static_cast<int64_t>(sizeof(T))) % 16 == 0
          ? (k_len + static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(x) % 16 / sizeof(T)) + vec - 1) / vec
          : (k_len + 2 * (vec - 1)) / vec;
  const unsigned grid = static_cast<unsigned>(rows);
  const int kl = static_cast<int>(k_len);
  const acc_t<T> sf = static_cast<acc_t<T>>(scale);
  using kernel_trace::Launcher;
  if (block_threads != 0) {  // the test hook forward_with_block
    if (max_units > block_threads) return cudaErrorInvalidValue;
    switch (block_threads) {
      case 32: forward_cached_kernel<T, 1, 32><<<grid, 32, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset); break;
      case 64: forward_cached_kernel<T, 1, 64><<<grid, 64, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset); break;
      case 128: forward_cached_kernel<T, 1, 128><<<grid, 128, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset); break;
      case kThreads: forward_cached_kernel<T, 1><<<grid, kThreads, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset); break;
      default: return cudaErrorInvalidValue;
    }
    kernel_trace::record(Launcher::softmax_forward, "forced");
    return cudaGetLastError();
  }
  // Rows of one unit per thread take the narrowest block that holds them (32, 64 or 128
  // threads): more rows in flight per SM for short rows, and bitwise the 256-thread
  // block's results (the threads it drops hold no unit: their +0 / -inf entries in the
  // block reductions' fixed trees are the same leaves either way).
  static_assert(kThreads == 256 && kCacheUnits == 8, "the recorded kernel names below spell these");
  if (max_units <= 32) {
    kernel_trace::record(Launcher::softmax_forward, "cached_32");
    forward_cached_kernel<T, 1, 32><<<grid, 32, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  } else if (max_units <= 64) {
    kernel_trace::record(Launcher::softmax_forward, "cached_64");
    forward_cached_kernel<T, 1, 64><<<grid, 64, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  } else if (max_units <= 128) {
    kernel_trace::record(Launcher::softmax_forward, "cached_128");
    forward_cached_kernel<T, 1, 128><<<grid, 128, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  } else if (max_units <= 1 * kThreads) {
    kernel_trace::record(Launcher::softmax_forward, "cached_256x1");
    forward_cached_kernel<T, 1><<<grid, kThreads, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  } else if (max_units <= 2 * kThreads) {
    kernel_trace::record(Launcher::softmax_forward, "cached_256x2");
    forward_cached_kernel<T, 2><<<grid, kThreads, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  } else if (max_units <= 4 * kThreads) {
    kernel_trace::record(Launcher::softmax_forward, "cached_256x4");
    forward_cached_kernel<T, 4><<<grid, kThreads, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  } else if (max_units <= kCacheUnits * kThreads) {
    kernel_trace::record(Launcher::softmax_forward, "cached_256x8");
    forward_cached_kernel<T, kCacheUnits><<<grid, kThreads, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode,
                                                                          row_offset);
  } else {
    kernel_trace::record(Launcher::softmax_forward, "two_sweep");
    forward_kernel<T><<<grid, kThreads, 0, stream>>>(x, mask, y, q_len, kl, sf, mask_mode, row_offset);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_impl(const T* y, const T* dy, T* dx, int64_t rows, int64_t q_len, int64_t k_len, double scale,
                          int mask_mode, int64_t row_offset, int block_threads, cudaStream_t stream) {
  if (rows < 0 || rows > kMaxRows || k_len < 1 || k_len > kMaxKLen || q_len < 1 || row_offset < 0 ||
      mask_mode < 0 || mask_mode > 2)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!y || !dy || !dx || !aligned(y) || !aligned(dy) || !aligned(dx)) return cudaErrorInvalidValue;
  return backward_launch(y, dy, dx, rows, k_len, scale, BackwardMask{q_len, row_offset, mask_mode == 1}, block_threads,
                         stream);
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* mask, T* y, int64_t rows, int64_t q_len, int64_t k_len, double scale,
                    int mask_mode, int64_t row_offset, cudaStream_t stream) {
  return forward_impl(x, mask, y, rows, q_len, k_len, scale, mask_mode, row_offset, 0, stream);
}
template <typename T>
cudaError_t backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t q_len, int64_t k_len, double scale,
                     int mask_mode, int64_t row_offset, cudaStream_t stream) {
  return backward_impl(y, dy, dx, rows, q_len, k_len, scale, mask_mode, row_offset, 0, stream);
}
template <typename T>
cudaError_t forward_with_block(int block_threads, const T* x, const T* mask, T* y, int64_t rows, int64_t q_len,
                               int64_t k_len, double scale, int mask_mode, int64_t row_offset, cudaStream_t stream) {
  if (block_threads == 0) return cudaErrorInvalidValue;
  return forward_impl(x, mask, y, rows, q_len, k_len, scale, mask_mode, row_offset, block_threads, stream);
}
template <typename T>
cudaError_t backward_with_block(int block_threads, const T* y, const T* dy, T* dx, int64_t rows, int64_t q_len,
                                int64_t k_len, double scale, int mask_mode, int64_t row_offset, cudaStream_t stream) {
  if (block_threads == 0) return cudaErrorInvalidValue;
  return backward_impl(y, dy, dx, rows, q_len, k_len, scale, mask_mode, row_offset, block_threads, stream);
}

#define NUMGATE_SOFTMAX_INSTANTIATE(T)                                                                  \
  template cudaError_t forward<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, double, int, int64_t, \
                                  cudaStream_t);                                                         \
  template cudaError_t backward<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, double, int, int64_t,  \
                                   cudaStream_t);                                                        \
  template cudaError_t forward_with_block<T>(int, const T*, const T*, T*, int64_t, int64_t, int64_t, double, int, \
                                             int64_t, cudaStream_t);                                             \
  template cudaError_t backward_with_block<T>(int, const T*, const T*, T*, int64_t, int64_t, int64_t, double, int, \
                                              int64_t, cudaStream_t);
NUMGATE_SOFTMAX_INSTANTIATE(float)
NUMGATE_SOFTMAX_INSTANTIATE(double)
NUMGATE_SOFTMAX_INSTANTIATE(__half)
NUMGATE_SOFTMAX_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_SOFTMAX_INSTANTIATE

}  // namespace numgate::softmax
