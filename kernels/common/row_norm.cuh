// numgate — the row-wise normalization skeleton shared by rmsnorm, offset_rmsnorm,
// fused_add_rmsnorm and layernorm (their *_kernels.cu files hold the per-op policy, the
// argument checks of their public launchers and the numerics contract of each op).
//
// Per-op policy (row_norm::Policy): what the row statistic is (sum of squares for the RMS
// norms; mean, then the sum of squared deviations, for LayerNorm), the weight transform
// (w or 1 + w, formed in acc), the fused residual add (h = x + residual, residual_out =
// T(h) written by the forward, the gradient of residual_out added to dx), and the bias (y
// gets + b, the backward also reduces db). Everything else is here, once:
//
//   * the virtual 16-byte grid of a row (common/cuda_utils.cuh: units of VEC = 16 /
//     sizeof(T) elements on a grid chosen from x's address; every other tensor moves a
//     full unit as one 16-byte access when its own address allows, else element-wise),
//     so any element alignment of any pointer is correct;
//   * forward: one block per row, the row cached in registers (K units per thread, x
//     read once), the statistic by fixed-order block reductions, then normalize-and-store
//     from the same registers. The block (K, threads) is the policy's (kFwdTargetThreads:
//     LayerNorm 160, fused add 1024, RMS 384). Two kernels of the same arithmetic: the
//     aligned one (hidden % VEC == 0 and every tensor 16-byte aligned: no virtual grid, no
//     per-element range tests, w and b loaded with x, evict-first x and y) and the cached
//     one for every other alignment; a streaming kernel (x read twice) for rows too long
//     for the register cache (RMS policies only); aligned rows of at most 32 units
//     (bf16 hidden <= 256) several to a warp instead (row_norm_forward_warp_rows_kernel,
//     the 32-thread block's results bit for bit), since one 32-thread block per row caps
//     an SM at 32 rows in flight;
//   * backward, fused path (hidden % VEC == 0, row <= 1024 units): one block per chunk of
//     rows (the chunk size is a function of (rows, hidden) only, never of the device);
//     the block walks its rows in order, computes dx and accumulates the dw (and db)
//     partial of its columns in registers, and writes one partial row per chunk. Rows in
//     flight come from a cp.async ring of row slots in shared memory when x, residual
//     and dy are 16-byte aligned (then each thread also holds its units of w in
//     registers for the whole chunk, and loads its units of d_residual_out at the row's
//     start, so that they arrive while the row's sums are reduced), else from registers;
//     on that ring path, rows of at most 8 units (kBwdWarpRowsMaxUnits; bf16 hidden <= 64)
//     with dx 16-byte aligned too run one chunk per warp instead, its rows spread over the
//     warp's lane groups (row_norm_backward_warp_rows_kernel: the ring kernel's dx and
//     partials bit for bit);
//   * backward, separate path (other shapes): dx one block per row, the row statistics
//     (r, and the mean) stored to the workspace; then a column-tile stage 1 re-reads the
//     rows and writes per-chunk partials;
//   * dw / db stage 2: the partials summed over chunks in a fixed order (32 chunk lanes,
//     each ascending, then the 32 lane sums in order) and rounded once to T; or, for the
//     nondeterministic atomic_dw variant of rmsnorm, by atomicAdd.
//
// The per-row code is the same in every path, and the block shape of a row depends only
// on (hidden, dtype, x's 16-byte phase), so dx and y of a row never depend on how many
// rows are launched with it. No atomics outside the atomic stage 2.
//
// Measured (H200, numgate-bench's kernel clock: CUPTI GPU time per launch, bf16, inputs
// rotated over more than 2x L2; copy = the same GPU's device-to-device memcpy, 4246 GB/s
// read + write). Minimal bytes: each row tensor read or written once (s = sizeof(T),
// N = rows x H), plus the per-column tensors once:
//
//   forward (row_norm_forward_aligned_kernel; run 16, 2026-12-03, the whole suite's run):
//   RMS / offset 2Ns, fused add 4Ns, LayerNorm 2Ns. rmsnorm 4x512x4096 (33.6 MB) 10.43 us
//   = 76% of copy, 1x8192x4096 (134 MB) 34.56 us = 91%; offset_rmsnorm 4x512x4096
//   10.61 us = 74%, 1x2048x5120 (42 MB) 12.83 us = 77%; fused_add_rmsnorm 4x512x4096
//   (67 MB) 18.43 us = 86%, 1x2048x5120 (84 MB) 22.15 us = 89%; layernorm 4x512x4096
//   12.16 us = 65%, 1x2048x5120 14.57 us = 68%. Run 15's cached kernel took
//   11.51 / 35.39 / 19.76 / 23.49 / 14.55 / 17.78 us for these rmsnorm, fused add and
//   LayerNorm shapes. Limit: the 2048-row launches (RMS and LayerNorm: 8 blocks per SM,
//   1.94 waves; fused add's 512-thread blocks: 4 per SM, 3.9 waves) pay a fixed cost per
//   launch that the 8192-row one amortizes (the rows between rmsnorm's two
//   shapes cost 24.1 us, 4.17 TB/s, 98% of copy). What Nsight Compute showed (cold L2,
//   layernorm 2048x4096): the cached kernel was issue-bound, not DRAM-bound (DRAM 25% of
//   peak, a warp eligible on 80% of cycles, 16 cycles per issued instruction: the virtual
//   grid's per-unit and per-element tests, the re-packed registers), which the aligned
//   kernel removes; Liger's kernel left the schedulers idle on 44% of cycles at 3.1
//   waves. Candidates timed with the peers' method in one process (a scratch harness
//   loading them by ctypes next to the peers; not in the repository): K = 1, 2, 4 per
//   policy, evict-first hints on or off for loads and stores, w/b before or after x,
//   reductions without the trailing barrier. The block sizes above were the fastest K for
//   each policy (K = 1 up to 2 us slower for RMS and LayerNorm, K = 2 vs 4 within 0.6 us);
//   the hint and order choices moved 0.1-0.8 us. Not adopted: for the RMS policy the
//   cached kernel with the same w preload and hints measured 0.3-0.5 us faster than the
//   aligned one at 2048x4096 in that harness (one kernel for every policy was kept; the
//   next tuning step). Rejected: a grid of resident blocks walking rows with the next rows
//   prefetched in registers (63-112 registers, slower; at one unit per thread and 40
//   registers, fused add 4x512x4096 on an H100, 0.2 us slower: run 30), and resident blocks
//   copying the next two rows' x and residual by cp.async into a shared-memory ring (fused
//   add 4x512x4096 on the H200, one process: 18.33 us against this kernel's 17.22; run 33).
//   Short rows (row_norm_forward_warp_rows_kernel; run 22, kernel time with the peers'
//   method): layernorm 70000x64 bf16 (17.9 MB) 6.33 us = 67% of copy (44.45 us with one
//   32-thread block per row: 32 rows in flight per SM); torch.compile 5.57 us. Limit: the
//   per-row chain (two warp reductions for LayerNorm) with 256 rows in flight per SM.
//
//   backward (fused path, row_norm_backward_ring_kernel + row_norm_finalize_kernel; run 16):
//   RMS / offset 3Ns, fused add 5Ns, LayerNorm 3Ns, plus the partials (chunks x H x acc
//   per partial array, written and read once, L2-resident). rmsnorm 4x512x4096 (50.3 MB)
//   22.05 us = 54%, 1x8192x4096 (201 MB) 67.71 us = 70%; offset_rmsnorm 4x512x4096
//   22.61 us = 52%, 1x2048x5120 (63 MB) 26.39 us = 56%; fused_add_rmsnorm 4x512x4096
//   (84 MB) 29.74 us = 66%, 1x2048x5120 (105 MB) 35.77 us = 69%; layernorm 4x512x4096
//   31.34 us = 38%, 1x2048x5120 37.17 us = 40%. w in registers and d_residual_out loaded
//   at the row's start took fused add 1x2048x5120 from 47.50 to 35.79 us and layernorm
//   1x2048x5120 from 44.17 to 37.12 us (a tuning run before run 15; bitwise the same
//   results). Limit: one
//   block of 160-320 threads per chunk of 4-16 rows at the issue's shapes, 2-4 blocks per
//   SM (ring slots and 64-128 registers), 1-2 rows in flight per block: the per-row chain
//   (the block reductions, LayerNorm's two). Nsight Compute (run 36, H100, launched
//   alone on a cold L2, rmsnorm bf16 8192x4096, 512 chunks): the ring kernel at 71.5-73.3
//   us, 78-80% of DRAM peak (87-89% of copy), 4 blocks of 8 warps per SM (64 registers),
//   no eligible warp on 41% of cycles, stalls per issued instruction 1.85 short
//   scoreboard (ring reads), 1.46 long scoreboard, 1.4 barrier (the block reduction), 1.0
//   MIO throttle, 58 MB of DRAM writes for the 75 MB of dx and partials; back to back
//   (profiler kernel time) 83.6-84.0 us: the write-back of what the previous launch
//   left dirty in L2 (run 38, H100, stage 1: 82.81 us back to back, 69.36 after a 256 MB
//   read that leaves L2 clean, 77.87 after a 256 MB write). Measured there and slower:
//   the next row's slot refilled at the row's top rather than after its reduction (up to
//   10%), and a fourth slot (3 blocks per SM). The stage-2 kernel adds its own launch
//   (3.3-5.5 us at the issue's shapes with the current chunking, 293-512 chunks; run 36,
//   H100, profiler kernel time).
//   Short rows (row_norm_backward_warp_rows_kernel, aligned rows of <= 8 units; run 24, a
//   scratch harness on the H200, events around 20 back-to-back calls, so launch gaps
//   included): layernorm 70000x64 bf16 backward (26.9 MB) 152.3 us in run 23 (the ring
//   kernel, one 32-thread block per chunk of 3 rows; stage 2 over 23,334 chunks, 729 per
//   chunk lane, dw and db 70.6 us of it) -> 122.3 us with the warp-rows kernel -> 67.7 us
//   with stage 2 at 8 columns per block and its loads unrolled by 32 per lane (the same
//   additions, bitwise; ptxas keeps the kernel at 32 registers, so fewer than 32 loads are
//   in flight at once; the two changes were timed together, not apart); dw and db's
//   stage 2 in one launch since. torch.compile: 27-31 us.
//   Limit: the chunking (23,334 chunks of 3 rows: a warp's 4 lane groups hold 3 rows, and
//   stage 2 still sums 729 partials per chunk lane). Measured in that harness, not adopted:
//   at most 4,096 chunks (18 rows each) 38.9 us, 8,192 chunks 44.8, 16,384 56.7 - other dw
//   and db bits than run 23's, and the rmsnorm atomic_dw test of more chunks than a grid's
//   y dimension (65,536 rows of 8) would no longer reach that many chunks.
//
// Device code (and host launch helpers): include from .cu files only.
#pragma once

#ifndef __CUDACC__
#error "common/row_norm.cuh holds device code; include it from .cu files only"
#endif

#include <cstddef>
#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/kernel_trace.h"

namespace numgate::row_norm {

using numgate::device::acc_t;
using numgate::device::add_rn;
using numgate::device::aligned16;
using numgate::device::block_sum;
using numgate::device::div_rn;
using numgate::device::from_acc;
using numgate::device::grid_is_aligned;
using numgate::device::grid_shift;
using numgate::device::keep_packed;
using numgate::device::kVec;
using numgate::device::load_unit;
using numgate::device::load_unit_hint;
using numgate::device::mul_rn;
using numgate::device::pack_from_acc;
using numgate::device::sqrt_rn;
using numgate::device::store_unit;
using numgate::device::store_unit_hint;
using numgate::device::sub_rn;
using numgate::device::to_acc;
using numgate::device::Unit;
using numgate::device::unit_acc;
using numgate::device::unit_is_full;
using numgate::device::zero_unit;

// =====================================================================================
// policy
// =====================================================================================

enum class Stat {
  kRms,      ///< r = 1 / sqrt(sum v^2 / H + eps)
  kMeanVar,  ///< mean = sum v / H ; r = 1 / sqrt(sum (v - mean)^2 / H + eps), two-pass
};

/// The per-op policy. v is the row value: acc(x), or acc(x) + acc(residual).
template <Stat S, bool OffsetWeight, bool Residual, bool Bias>
struct Policy {
  static constexpr bool kMeanVar = S == Stat::kMeanVar;
  static constexpr bool kOffsetWeight = OffsetWeight;  ///< weight used as acc(1) + acc(w)
  static constexpr bool kResidual = Residual;          ///< h = x + residual, residual_out, + d_residual_out
  static constexpr bool kBias = Bias;                  ///< y += b ; backward reduces db
  static constexpr int kStats = kMeanVar ? 2 : 1;      ///< per-row values of the separate path
  static constexpr int kParts = kBias ? 2 : 1;         ///< partial arrays: dw[, db]
  static constexpr int kRowIn = Residual ? 3 : 2;      ///< backward row tensors: x[, residual], dy
  /// Units cached per thread: forward, backward separate path.
  template <typename T>
  static constexpr int kFwdMaxK = kMeanVar ? (sizeof(T) == 8 ? 2 : 4) : Residual ? 4 : (sizeof(T) == 8 ? 4 : 8);
  template <typename T>
  static constexpr int kSepMaxK = Residual ? 2 : (kMeanVar && sizeof(T) == 8) ? 2 : 4;
  /// Forward block: the smallest K (units per thread) whose block has at most this many
  /// threads (measured on the H200, bf16, H = 4096 and 5120; see the file comment).
  static constexpr int kFwdTargetThreads = kMeanVar ? 160 : Residual ? 1024 : 384;
  /// Row slots of the cp.async ring (kRingStages - 1 rows in flight per block).
  static constexpr int kRingStages = Residual ? 2 : 3;
  /// Fused backward: about this many columns over all chunks of a launch (chunks ~
  /// kFusedChunkCols / hidden; a constant, never queried from the device). The bf16
  /// H = 4096 block of the RMS policies fits 4 per SM, 528 on a 132-SM H100 or H200:
  /// 512 x 4096 gives 512 chunks there (16 rows each at 8192 rows, 4 at 2048), 409 at
  /// 5120 (342 chunks of 6 rows at 2048 rows); the block-slots left empty by 480 x 4096
  /// (456 and 410 chunks) cost rmsnorm's backward 4% (run 36, H100, one process:
  /// 8192 x 4096 90.42 -> 86.23 us, 2048 x 4096 27.01 -> 25.93). Fused add keeps 480 x
  /// 4096 (its 512-chunk launch measured 0.6% slower). With db the bf16 H = 4096 block
  /// needs 80 registers (3 blocks per SM, not 4): 384 x 4096 keeps a 2048-row launch in
  /// one wave of a 132-SM GPU (342 chunks of 6 rows). At H = 5120 (3 per SM by the ring's
  /// shared memory) it gives 293 chunks for 396 slots; 342 measured 2.8% faster there
  /// (run 37, H100, 2048 x 5120 38.80 -> 37.70 us), which no one constant gives
  /// together with <= 396 chunks at 4096.
  static constexpr int64_t kFusedChunkCols = int64_t(Bias ? 384 : Residual ? 480 : 512) * 4096;
};

using RmsPolicy = Policy<Stat::kRms, false, false, false>;
using OffsetRmsPolicy = Policy<Stat::kRms, true, false, false>;
using FusedAddRmsPolicy = Policy<Stat::kRms, false, true, false>;
using LayerNormPolicy = Policy<Stat::kMeanVar, false, false, true>;

// =====================================================================================
// launch constants (constants: never queried from the device)
// =====================================================================================

inline constexpr int kMaxThreads = 1024;
inline constexpr int kStreamThreads = 1024;
inline constexpr int kBwdTargetThreads = 256;
inline constexpr int kFusedMaxThreads = 256;  ///< fused backward block limit
inline constexpr int kFusedMaxK = 4;          ///< fused backward: up to 1024 units per row
/// Fused backward rows of at most this many units take the warp-rows kernel (4 or more
/// rows in flight per warp; not measured against the ring kernel at 16 or 32 units).
inline constexpr int kBwdWarpRowsMaxUnits = 8;
inline constexpr int kDwTx = 32;  // separate-path stage 1: 32 x 8 threads per tile
inline constexpr int kDwTy = 8;
inline constexpr int kDwCols = 2 * kDwTx;  // scalar tile: columns tx and tx + 32
inline constexpr int kDwRowUnroll = 4;     // rows whose loads are in flight per trip
inline constexpr int kFinTx = 8;    // stage 2: 8 columns x 32 chunk lanes per block
inline constexpr int kFinTy = 32;   // chunk lanes per column (fixes the addition order)
inline constexpr int kFinDeep = 32;  // stage 2: loads unrolled per lane (then 4, then 1)
inline constexpr int64_t kWorkspaceAlign = 256;

// =====================================================================================
// per-element math (the numerics contracts of the four ops, in one place)
// =====================================================================================

namespace detail {

template <class P, typename T>
__device__ __forceinline__ acc_t<T> weight(const Unit<T>& wu, int j) {
  using A = acc_t<T>;
  if constexpr (P::kOffsetWeight) {
    return A(1) + unit_acc(wu, j);
  } else {
    return unit_acc(wu, j);
  }
}

/// Row value of slot j: acc(x), or acc(x) + acc(residual) (one acc addition).
template <class P, typename T>
__device__ __forceinline__ acc_t<T> value(const Unit<T>& xu, const Unit<T>& ru, int j) {
  if constexpr (P::kResidual) {
    return unit_acc(xu, j) + unit_acc(ru, j);
  } else {
    return unit_acc(xu, j);
  }
}

/// r = 1 / sqrt(q / H + eps), correctly rounded divide and sqrt (never rsqrt).
template <typename A>
__device__ __forceinline__ A rstd_of(A q, int hidden, A eps) {
  return div_rn(A(1), sqrt_rn(div_rn(q, A(hidden)) + eps));
}

/// y: ((v [- mean]) * r) * weight [+ b].
template <class P, typename T>
__device__ __forceinline__ acc_t<T> y_of(acc_t<T> v, acc_t<T> mean, acc_t<T> r, const Unit<T>& wu,
                                         const Unit<T>& bu, int j) {
  if constexpr (P::kMeanVar) {
    if constexpr (P::kBias) {
      return ((v - mean) * r) * weight<P, T>(wu, j) + unit_acc(bu, j);
    } else {
      return ((v - mean) * r) * weight<P, T>(wu, j);
    }
  } else {
    if constexpr (P::kBias) {
      return (v * r) * weight<P, T>(wu, j) + unit_acc(bu, j);
    } else {
      return (v * r) * weight<P, T>(wu, j);
    }
  }
}

__device__ __forceinline__ bool in_row(int lo, int j, int n) { return lo + j >= 0 && lo + j < n; }

/// The forward's first sum over one cached unit: v = the row values of its slots, s +=
/// v (mean/variance policies) or v^2 (RMS), in slot order.
template <class P, typename T>
__device__ __forceinline__ void first_sum(const Unit<T>& xu, const Unit<T>& ru, acc_t<T> (&v)[kVec<T>],
                                          acc_t<T>& s) {
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    v[j] = value<P, T>(xu, ru, j);
    if constexpr (P::kMeanVar) {
      s += v[j];
    } else {
      s += v[j] * v[j];
    }
  }
}

/// The forward's statistics after its first sum s (sum v^2, or sum v): the block sum, then
/// for mean/variance policies the mean and the sum of squared deviations over the slots
/// where counted(k, j) (the real elements of the row), the second block sum; r by
/// rstd_of. Re-packs the cached units for the normalize step. Shared by the forward
/// kernels, which differ only in how they tell real elements from padding and in how the
/// block sum is done: block_sum(v) sums v[0] over the row's block in place (block_sum<1>
/// with shared memory, or the warp-rows kernel's equivalent on the row's lanes).
template <class P, typename T, int K, int KR, class BlockSum, class Counted>
__device__ __forceinline__ void forward_statistics(acc_t<T> (&s)[1], Unit<T> (&xc)[K], Unit<T> (&rc)[KR],
                                                   BlockSum&& block_sum, int hidden, acc_t<T> eps,
                                                   acc_t<T>& mean, acc_t<T>& r, Counted&& counted) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  block_sum(s);
  mean = A(0);
  if constexpr (P::kMeanVar) {
    mean = div_rn(s[0], A(hidden));
#pragma unroll
    for (int k = 0; k < K; ++k) keep_packed(xc[k]);
    A q[1] = {A(0)};
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A d = value<P, T>(xc[k], rc[P::kResidual ? k : 0], j) - mean;
        if (counted(k, j)) q[0] += d * d;
      }
    }
    block_sum(q);
    r = rstd_of(q[0], hidden, eps);
  } else {
    r = rstd_of(s[0], hidden, eps);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    keep_packed(xc[k]);
    if constexpr (P::kResidual) keep_packed(rc[k]);
  }
}

}  // namespace detail

// =====================================================================================
// forward
// =====================================================================================

template <typename T>
struct FwdArgs {
  const T* x;
  const T* res;  ///< residual policies only
  const T* w;
  const T* b;    ///< bias policies only
  T* res_out;    ///< residual policies only
  T* y;
  int hidden;
  acc_t<T> eps;
};

template <class P, typename T>
struct FwdRow {
  const T* xr;
  const T* rr;
  T* ror;
  T* yr;
  int shift, nunits;
  bool r_al, w_al, b_al, ro_al, y_al;
  __device__ __forceinline__ FwdRow(const FwdArgs<T>& a, int64_t row) {
    const int64_t off = row * a.hidden;
    xr = a.x + off;
    yr = a.y + off;
    shift = grid_shift(xr);
    nunits = (a.hidden + shift + kVec<T> - 1) / kVec<T>;
    w_al = grid_is_aligned(a.w, shift);
    y_al = grid_is_aligned(static_cast<const T*>(yr), shift);
    rr = nullptr;
    ror = nullptr;
    r_al = ro_al = b_al = false;
    if constexpr (P::kResidual) {
      rr = a.res + off;
      ror = a.res_out + off;
      r_al = grid_is_aligned(rr, shift);
      ro_al = grid_is_aligned(static_cast<const T*>(ror), shift);
    }
    if constexpr (P::kBias) b_al = grid_is_aligned(a.b, shift);
  }
};

/// One block per row; each thread caches K units of x (and residual) in registers
/// through the reductions and the normalize step, so the row is read once; w (and b) are
/// read after the reductions (L2 hits but for the first rows).
template <class P, typename T, int K>
__global__ void __launch_bounds__(kMaxThreads) row_norm_forward_cached_kernel(const FwdArgs<T> a) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int KR = P::kResidual ? K : 1;
  __shared__ A red[1][32];
  const int hidden = a.hidden;
  const FwdRow<P, T> R(a, blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);

  Unit<T> xc[K], rc[KR];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const bool in = u < R.nunits;
    xc[k] = in ? load_unit(R.xr, lo, hidden, full) : zero_unit<T>();
    if constexpr (P::kResidual) rc[k] = in ? load_unit(R.rr, lo, hidden, full && R.r_al) : zero_unit<T>();
  }

  // First statistic: sum v^2 (RMS) or sum v (mean); padding slots are zeros. The
  // residual policy writes residual_out = T(h) here.
  A s[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    A v[V];
    detail::first_sum<P, T>(xc[k], rc[P::kResidual ? k : 0], v, s[0]);
    if constexpr (P::kResidual) {
      const int u = tid + k * nthr;
      if (u < R.nunits) {
        const int lo = u * V - R.shift;
        store_unit(R.ror, lo, hidden, unit_is_full<T>(lo, hidden) && R.ro_al, pack_from_acc<T>(v));
      }
    }
  }
  A mean, r;
  detail::forward_statistics<P, T>(s, xc, rc, [&](A(&v)[1]) { block_sum<1>(v, red); }, hidden, a.eps, mean, r,
                                   [&](int k, int j) {
    return detail::in_row((tid + k * nthr) * V - R.shift, j, hidden);  // padding would add mean^2
  });
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < R.nunits) {
      const int lo = u * V - R.shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(a.w, lo, hidden, full && R.w_al);
      Unit<T> bu = wu;
      if constexpr (P::kBias) bu = load_unit(a.b, lo, hidden, full && R.b_al);
      A out[V];
#pragma unroll
      for (int j = 0; j < V; ++j)
        out[j] = detail::y_of<P, T>(detail::value<P, T>(xc[k], rc[P::kResidual ? k : 0], j), mean, r, wu, bu, j);
      store_unit(R.yr, lo, hidden, full && R.y_al, pack_from_acc<T>(out));
    }
  }
}

/// The aligned forward: hidden % kVec<T> == 0 and every tensor 16-byte aligned (the host
/// checks; row_norm_forward_cached_kernel takes every other case). The same per-element
/// operations in the same order as the cached kernel at the same block shape, so y (and
/// residual_out) are bitwise its results (tests/gpu/test_aligned_paths.cpp compares the two
/// with only y / residual_out misaligned, so that the block shape is the same: equal for the
/// four policies and four dtypes at hidden 8 to 32768, every K reached, in run 18); what
/// it drops is the generality that cost
/// instructions (the kernel was issue-bound, not DRAM-bound): no virtual grid, no per-unit
/// alignment or per-element range tests (units past the row are skipped whole, which adds
/// no zero to a sum and no (0 - mean)^2 to the deviations), 32-bit unit offsets. w (and b)
/// are loaded right after x, before the reductions; x (and residual) are loaded and y
/// stored with the evict-first hint (ld/st.global.cs: each is touched once here, and w and
/// b stay cached). residual_out is stored without it: with the hint the fused add forward
/// took 23.55 / 30.14 us at bf16 2048x4096 / 2048x5120 on an H100, without it 22.34 /
/// 28.42, the same bits (docs/peer-runs.md, Run 35).
template <class P, typename T, int K>
__global__ void __launch_bounds__(kMaxThreads) row_norm_forward_aligned_kernel(const FwdArgs<T> a) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int KR = P::kResidual ? K : 1;
  /// w (and b) preloaded when the cache stays within 12 units (48 registers; 8 for double,
  /// whose math needs more): beyond, the 64-register cap of a 1024-thread launch bound
  /// would spill, and they are loaded after the reductions as in the cached kernel.
  constexpr bool kPre = K * (2 + int(P::kResidual) + int(P::kBias)) <= (sizeof(T) == 8 ? 8 : 12);
  __shared__ A red[1][32];
  const int hidden = a.hidden;
  const int nunits = hidden / V;
  const int64_t off = static_cast<int64_t>(blockIdx.x) * hidden;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
  const T* xr = a.x + off;
  T* yr = a.y + off;

  constexpr int KW = kPre ? K : 1;
  constexpr int KWB = (kPre && P::kBias) ? K : 1;
  Unit<T> xc[K], rc[KR], wc[KW], bc[KWB];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    xc[k] = zero_unit<T>();
    if constexpr (P::kResidual) rc[k] = zero_unit<T>();
    if (u < nunits) {
      xc[k] = load_unit_hint<true>(xr, u * V, hidden, true);
      if constexpr (P::kResidual) rc[k] = load_unit_hint<true>(a.res + off, u * V, hidden, true);
    }
  }
  if constexpr (kPre) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        wc[k] = load_unit(a.w, u * V, hidden, true);
        if constexpr (P::kBias) bc[k] = load_unit(a.b, u * V, hidden, true);
      }
    }
  }

  A s[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (tid + k * nthr < nunits) {
      A v[V];
      detail::first_sum<P, T>(xc[k], rc[P::kResidual ? k : 0], v, s[0]);
      if constexpr (P::kResidual) {
        store_unit(a.res_out + off, (tid + k * nthr) * V, hidden, true, pack_from_acc<T>(v));
      }
    }
  }
  A mean, r;
  detail::forward_statistics<P, T>(s, xc, rc, [&](A(&v)[1]) { block_sum<1>(v, red); }, hidden, a.eps, mean, r,
                                   [&](int k, int) { return tid + k * nthr < nunits; });
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) {
      Unit<T> wu, bu;
      if constexpr (kPre) {
        wu = wc[k];
        bu = bc[P::kBias ? k : 0];
      } else {
        wu = load_unit(a.w, u * V, hidden, true);
        bu = wu;
        if constexpr (P::kBias) bu = load_unit(a.b, u * V, hidden, true);
      }
      A out[V];
#pragma unroll
      for (int j = 0; j < V; ++j)
        out[j] = detail::y_of<P, T>(detail::value<P, T>(xc[k], rc[P::kResidual ? k : 0], j), mean, r, wu, bu, j);
      store_unit_hint<true>(yr, u * V, hidden, true, pack_from_acc<T>(out));
    }
  }
}

/// block_sum<N> of a 32-thread block (every thread of which holds row units only in its
/// first lanes), played by a group of L lanes: one v + 0 (the first butterfly's levels at
/// lane distance >= L add only the +0 of threads holding no unit), the butterfly below L,
/// then + 0 (the second butterfly over lane 0's total and zeros). Every lane of the warp
/// must call it (full-mask shuffles).
template <int L, typename A, int N>
__device__ __forceinline__ void lane_group_sum(A (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    A t = v[i];
    if constexpr (L < 32) t = t + A(0);
#pragma unroll
    for (int d = L / 2; d > 0; d >>= 1) t += __shfl_xor_sync(0xffffffffu, t, d);
    v[i] = t + A(0);
  }
}

/// Warps per block of the warp-rows kernels (forward: 32 / L rows per warp; backward: one
/// chunk of rows per warp).
inline constexpr int kWarpRowsWarps = 8;

/// Short aligned rows (at most 32 units, forward_is_aligned): what
/// row_norm_forward_aligned_kernel<P, T, 1> does on its 32-thread block, played by L lanes
/// of a warp (L: the smallest power of two >= the row's units, lane l of the row's group
/// playing thread l), 32 / L rows per warp, kWarpRowsWarps warps per block: the rows in
/// flight per SM are no longer capped by the 32 resident blocks of an SM. The block's sums
/// (block_sum<1> on one warp: the warp butterfly, then the butterfly of lane 0's total
/// padded with zeros) are reproduced on the row's L lanes: in the first butterfly the
/// levels at lane distance >= L add only the +0 of threads that hold no unit, which is one
/// s + 0 (it turns -0 into +0 and changes nothing after), and the levels below L are the
/// same additions on the same lanes; the second butterfly is the total + 0. So y (and
/// residual_out) are bitwise the aligned and the cached kernels' at that block shape
/// (tests/gpu/test_aligned_paths.cpp compares them). No shared memory and no barriers:
/// lanes past the last row take part in the shuffles and touch no memory.
template <class P, typename T, int L>
__global__ void __launch_bounds__(32 * kWarpRowsWarps) row_norm_forward_warp_rows_kernel(const FwdArgs<T> a,
                                                                                        int64_t rows) {
  static_assert(L >= 1 && L <= 32 && (L & (L - 1)) == 0, "L: a power of two up to a warp");
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int hidden = a.hidden;
  const int nunits = hidden / V;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int tid = lane % L;  // the thread of the 32-thread block this lane plays (unit tid)
  const int64_t warp_row0 =
      (static_cast<int64_t>(blockIdx.x) * kWarpRowsWarps + (static_cast<int>(threadIdx.x) >> 5)) * (32 / L);
  if (warp_row0 >= rows) return;  // the whole warp: no shuffle partner is lost
  const int64_t row = warp_row0 + lane / L;
  const bool on = row < rows && tid < nunits;  // this lane holds a unit of a real row
  const int64_t off = row * hidden;

  Unit<T> xc[1] = {zero_unit<T>()}, rc[1] = {zero_unit<T>()}, wu = zero_unit<T>(), bu = zero_unit<T>();
  if (on) {
    xc[0] = load_unit_hint<true>(a.x + off, tid * V, hidden, true);
    if constexpr (P::kResidual) rc[0] = load_unit_hint<true>(a.res + off, tid * V, hidden, true);
    wu = load_unit(a.w, tid * V, hidden, true);
    if constexpr (P::kBias) bu = load_unit(a.b, tid * V, hidden, true);
  }
  A s[1] = {A(0)};
  if (on) {
    A v[V];
    detail::first_sum<P, T>(xc[0], rc[0], v, s[0]);
    if constexpr (P::kResidual) store_unit_hint<true>(a.res_out + off, tid * V, hidden, true, pack_from_acc<T>(v));
  }
  auto row_sum = [&](A(&v)[1]) { lane_group_sum<L>(v); };
  A mean, r;
  detail::forward_statistics<P, T>(s, xc, rc, row_sum, hidden, a.eps, mean, r, [&](int, int) { return on; });
  if (on) {
    if constexpr (!P::kBias) bu = wu;
    A out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = detail::y_of<P, T>(detail::value<P, T>(xc[0], rc[0], j), mean, r, wu, bu, j);
    store_unit_hint<true>(a.y + off, tid * V, hidden, true, pack_from_acc<T>(out));
  }
}

/// Rows too long for the register cache (RMS policies): the same math, the row read
/// twice (the second read mostly hits L2).
template <class P, typename T>
__global__ void __launch_bounds__(kStreamThreads) row_norm_forward_streaming_kernel(const FwdArgs<T> a) {
  static_assert(!P::kMeanVar, "mean/variance policies cache the row (their launchers bound the row length)");
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];
  const int hidden = a.hidden;
  const FwdRow<P, T> R(a, blockIdx.x);

  A s[1] = {A(0)};
  for (int u = threadIdx.x; u < R.nunits; u += blockDim.x) {
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(R.xr, lo, hidden, full);
    Unit<T> ru = xu;
    if constexpr (P::kResidual) ru = load_unit(R.rr, lo, hidden, full && R.r_al);
    A v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      v[j] = detail::value<P, T>(xu, ru, j);
      s[0] += v[j] * v[j];
    }
    if constexpr (P::kResidual) store_unit(R.ror, lo, hidden, full && R.ro_al, pack_from_acc<T>(v));
  }
  block_sum<1>(s, red);
  const A r = detail::rstd_of(s[0], hidden, a.eps);

  for (int u = threadIdx.x; u < R.nunits; u += blockDim.x) {
    const int lo = u * V - R.shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(R.xr, lo, hidden, full);
    Unit<T> ru = xu;
    if constexpr (P::kResidual) ru = load_unit(R.rr, lo, hidden, full && R.r_al);
    const Unit<T> wu = load_unit(a.w, lo, hidden, full && R.w_al);
    A out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = detail::y_of<P, T>(detail::value<P, T>(xu, ru, j), A(0), r, wu, wu, j);
    store_unit(R.yr, lo, hidden, full && R.y_al, pack_from_acc<T>(out));
  }
}

// =====================================================================================
// backward: dx, and the dw/db partials (fused path) or the row statistics (separate)
// =====================================================================================

template <typename T>
struct BwdArgs {
  const T* x;
  const T* res;   ///< residual policies only
  const T* w;
  const T* dy;
  const T* dres;  ///< residual policies only: gradient of residual_out
  T* dx;
  acc_t<T>* stats;  ///< separate path: kStats values per row
  acc_t<T>* part;   ///< partials: [kParts][chunks][hidden] (dw, then db)
  int64_t rows;
  int64_t chunks;
  int64_t rows_per_chunk;
  int hidden;
  acc_t<T> eps;
};

enum RowTensor { kTx = 0, kTr = 1, kTd = 2 };

/// The per-row backward, identical in every path. The row is played by nthr threads, this
/// one thread tid (a block's threadIdx.x and blockDim.x, or a lane group of the warp-rows
/// kernel); reduce(v) sums the array v over them (block_sum, or its lane-group replica).
/// src(k, t) returns this thread's k-th unit of row tensor t (kTx, kTr, kTd); wsrc(k, lo,
/// full) its k-th unit of w (lo: the unit's first element; full: unit_is_full), dsrc(k,
/// lo, full) of d_residual_out (residual policies; read in the dx phase only); keep()
/// re-packs register-cached units after a reduction; after_reduce() runs right after the
/// reduction of the gradient sums (every thread of the block is past its reads of the
/// previous row then). kAccum: accum(k, j, acc(dy), xhat) for every element of the row,
/// xhat bitwise the value used for dx (the callers add acc(dy) * xhat to their dw partial
/// and acc(dy) to their db partial); else the row's statistics go to a.stats.
template <class P, typename T, int K, bool kAccum, class Src, class Wsrc, class Dsrc, class Keep, class After,
          class Reduce, class Accum>
__device__ __forceinline__ void backward_row(const BwdArgs<T>& a, int64_t row, int shift, int nunits, int tid,
                                             int nthr, Src&& src, Wsrc&& wsrc, Dsrc&& dsrc, Keep&& keep,
                                             After&& after_reduce, Reduce&& reduce, Accum&& accum) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int hidden = a.hidden;
  T* dxr = a.dx + row * hidden;
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);

  A mean = A(0);
  if constexpr (P::kMeanVar) {
    A s[1] = {A(0)};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const Unit<T> xu = src(k, kTx);
      const Unit<T> ru = P::kResidual ? src(k, kTr) : xu;
#pragma unroll
      for (int j = 0; j < V; ++j) s[0] += detail::value<P, T>(xu, ru, j);
    }
    reduce(s);
    mean = div_rn(s[0], A(hidden));
    keep();
  }

  // RMS: {sum v^2, sum g*v}. Mean/var: {sum d^2, sum g, sum g*d} over the real elements.
  constexpr int NS = P::kMeanVar ? 3 : 2;
  A sums[NS];
#pragma unroll
  for (int i = 0; i < NS; ++i) sums[i] = A(0);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) {
      const int lo = u * V - shift;
      const Unit<T> wu = wsrc(k, lo, unit_is_full<T>(lo, hidden));
      const Unit<T> xu = src(k, kTx);
      const Unit<T> ru = P::kResidual ? src(k, kTr) : xu;
      const Unit<T> du = src(k, kTd);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A v = detail::value<P, T>(xu, ru, j);
        const A g = mul_rn(unit_acc(du, j), detail::weight<P, T>(wu, j));
        if constexpr (P::kMeanVar) {
          if (detail::in_row(lo, j, hidden)) {
            const A d = v - mean;
            sums[0] += d * d;
            sums[1] += g;
            sums[2] += g * d;
          }
        } else {
          sums[0] += v * v;
          sums[1] += g * v;
        }
      }
    }
  }
  reduce(sums);
  const A r = detail::rstd_of(sums[0], hidden, a.eps);
  A ga = A(0);
  A c;
  if constexpr (P::kMeanVar) {
    ga = div_rn(sums[1], A(hidden));
    c = r * div_rn(sums[2], A(hidden));
  } else {
    c = r * div_rn(sums[1], A(hidden));
  }
  if constexpr (!kAccum) {
    if (tid == 0) {
      if constexpr (P::kMeanVar) {
        a.stats[2 * row] = mean;
        a.stats[2 * row + 1] = r;
      } else {
        a.stats[row] = r;
      }
    }
  }
  after_reduce();
  keep();

#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) {
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = wsrc(k, lo, full);
      const Unit<T> xu = src(k, kTx);
      const Unit<T> ru = P::kResidual ? src(k, kTr) : xu;
      const Unit<T> du = src(k, kTd);
      Unit<T> dru = du;
      if constexpr (P::kResidual) dru = dsrc(k, lo, full);
      A out[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A v = detail::value<P, T>(xu, ru, j);
        const A dyv = unit_acc(du, j);
        const A g = mul_rn(dyv, detail::weight<P, T>(wu, j));
        if constexpr (P::kMeanVar) {
          const A xhat = (v - mean) * r;
          out[j] = mul_rn(r, sub_rn(sub_rn(g, ga), mul_rn(xhat, c)));
          if constexpr (kAccum) accum(k, j, dyv, xhat);
        } else {
          const A xhat = v * r;
          if constexpr (P::kResidual) {
            out[j] = add_rn(mul_rn(r, sub_rn(g, mul_rn(xhat, c))), unit_acc(dru, j));
          } else {
            out[j] = mul_rn(r, sub_rn(g, mul_rn(xhat, c)));
          }
          if constexpr (kAccum) accum(k, j, dyv, xhat);
        }
      }
      store_unit(dxr, lo, hidden, full && dx_al, pack_from_acc<T>(out));
    }
  }
}

/// Stores n consecutive acc values to p (16-byte aligned) as 16-byte vector stores.
template <typename A, int N>
__device__ __forceinline__ void store_acc_vec(A* p, const A (&v)[N]) {
  static_assert((N * sizeof(A)) % 16 == 0, "whole 16-byte vectors only");
  if constexpr (sizeof(A) == 4) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q)
      reinterpret_cast<float4*>(p)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  } else {
#pragma unroll
    for (int q = 0; q < N / 2; ++q) reinterpret_cast<double2*>(p)[q] = make_double2(v[2 * q], v[2 * q + 1]);
  }
}

/// Writes a thread's accumulated partials (its units of the row grid of shift `shift`)
/// to prow[0..hidden): 16-byte stores for full units at 16-byte aligned addresses, else
/// element-wise for the in-row slots.
template <typename T, int K>
__device__ __forceinline__ void store_partials(acc_t<T>* prow, int shift, int nunits, int hidden,
                                               const acc_t<T> (&acc)[K][kVec<T>]) {
  constexpr int V = kVec<T>;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) {
      const int lo = u * V - shift;
      if (unit_is_full<T>(lo, hidden) && (reinterpret_cast<std::uintptr_t>(prow + lo) & 15u) == 0) {
        store_acc_vec(prow + lo, acc[k]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (detail::in_row(lo, j, hidden)) prow[lo + j] = acc[k][j];
        }
      }
    }
  }
}

/// Register-cached row kernel. grid = chunks, block = the row's config; block c handles
/// rows [c * rows_per_chunk, min(.., rows)) in order.
///   kFused = false: rows_per_chunk == 1, one block per row; statistics to a.stats.
///   kFused = true (hidden % VEC == 0: every row has x's 16-byte phase, a thread owns the
///   same columns in every row): dw (db) partials accumulated over the chunk's rows, in
///   row order, then written to a.part[chunk]. With kPrefetch, the next row's units are
///   loaded into a second register set while the current row is reduced.
template <class P, int K, bool kFused>
constexpr int kRowsBoundThreads = kFused ? kFusedMaxThreads : kMaxThreads;
template <class P, int K, bool kFused>
constexpr int kRowsBoundBlocks = kFused ? (K >= 4 ? 2 : 3) : 1;

template <class P, typename T, int K, bool kFused, bool kPrefetch>
__global__ void __launch_bounds__(kRowsBoundThreads<P, K, kFused>, kRowsBoundBlocks<P, K, kFused>)
    row_norm_backward_rows_kernel(const BwdArgs<T> a) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int NT = P::kRowIn;  // cached tensors: x, [res,] dy
  constexpr int KP = kPrefetch ? K : 1;
  __shared__ A red[3][32];
  const int hidden = a.hidden;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
  const int64_t chunk = blockIdx.x;
  const int64_t r_begin = chunk * a.rows_per_chunk;
  const int64_t r_end = r_begin + a.rows_per_chunk < a.rows ? r_begin + a.rows_per_chunk : a.rows;

  A dwacc[kFused ? K : 1][V];
  A dbacc[(kFused && P::kBias) ? K : 1][V];
#pragma unroll
  for (int k = 0; k < (kFused ? K : 1); ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dwacc[k][j] = A(0);
  }
#pragma unroll
  for (int k = 0; k < ((kFused && P::kBias) ? K : 1); ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dbacc[k][j] = A(0);
  }

  // Tensor slot of row tensor t in the cache: x 0, [res 1,] dy NT - 1.
  auto slot_of = [](int t) { return t == kTd ? NT - 1 : t; };
  auto load_row = [&](int64_t row, Unit<T> (&c)[NT][K]) {
    const int64_t off = row * hidden;
    const T* xr = a.x + off;
    const int shift = grid_shift(xr);
    const int nunits = (hidden + shift + V - 1) / V;
    const T* dyr = a.dy + off;
    const bool dy_al = grid_is_aligned(dyr, shift);
    const T* rr = P::kResidual ? a.res + off : xr;
    const bool r_al = P::kResidual ? grid_is_aligned(rr, shift) : false;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const bool in = u < nunits;
      c[0][k] = in ? load_unit(xr, lo, hidden, full) : zero_unit<T>();
      if constexpr (P::kResidual) c[1][k] = in ? load_unit(rr, lo, hidden, full && r_al) : zero_unit<T>();
      c[NT - 1][k] = in ? load_unit(dyr, lo, hidden, full && dy_al) : zero_unit<T>();
    }
  };

  Unit<T> cur[NT][K];
  Unit<T> nxt[NT][KP];
  if constexpr (kPrefetch) {
    if (r_begin < r_end) load_row(r_begin, cur);
  }
  for (int64_t row = r_begin; row < r_end; ++row) {
    if constexpr (kPrefetch) {
      if (row + 1 < r_end) {
        load_row(row + 1, nxt);
      } else {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
#pragma unroll
          for (int k = 0; k < K; ++k) nxt[t][k] = zero_unit<T>();
        }
      }
    } else {
      load_row(row, cur);
    }
    const int shift = grid_shift(a.x + row * hidden);
    const int nunits = (hidden + shift + V - 1) / V;
    auto src = [&](int k, int t) -> Unit<T> { return cur[slot_of(t)][k]; };
    auto keep = [&]() {
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int k = 0; k < K; ++k) keep_packed(cur[t][k]);
      }
    };
    const bool w_al = grid_is_aligned(a.w, shift);
    auto wsrc = [&](int, int lo, bool full) { return load_unit(a.w, lo, hidden, full && w_al); };
    const T* drr = P::kResidual ? a.dres + row * hidden : nullptr;
    const bool dr_al = P::kResidual ? grid_is_aligned(drr, shift) : false;
    auto dsrc = [&](int, int lo, bool full) { return load_unit(drr, lo, hidden, full && dr_al); };
    backward_row<P, T, K, kFused>(a, row, shift, nunits, tid, nthr, src, wsrc, dsrc, keep, [] {},
                                  [&](auto& v) { block_sum(v, red); }, [&](int k, int j, A dyv, A xhat) {
                                    if constexpr (kFused) {
                                      dwacc[k][j] += dyv * xhat;
                                      if constexpr (P::kBias) dbacc[k][j] += dyv;
                                    }
                                  });
    if constexpr (kPrefetch) {
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int k = 0; k < K; ++k) cur[t][k] = nxt[t][k];
      }
    }
  }

  if constexpr (kFused) {
    // Every row has x's 16-byte phase: the columns are those of the chunk's first row.
    const int shift = grid_shift(a.x + r_begin * hidden);
    const int nunits = (hidden + shift + V - 1) / V;
    store_partials<T, K>(a.part + chunk * hidden, shift, nunits, hidden, dwacc);
    if constexpr (P::kBias) store_partials<T, K>(a.part + (a.chunks + chunk) * hidden, shift, nunits, hidden, dbacc);
  }
}

// cp.async (sm_80+): 16-byte global -> shared copies completing asynchronously in commit
// groups; wait_group<N> returns once all but the newest N groups of this thread are
// complete and visible to it. Older architectures copy synchronously.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

template <typename T>
__device__ __forceinline__ Unit<T> unit_from_u4(const uint4& q) {
  Unit<T> u;
  u.w[0] = q.x;
  u.w[1] = q.y;
  u.w[2] = q.z;
  u.w[3] = q.w;
  return u;
}

/// Dynamic shared memory of the ring kernel: kRingStages row slots of kRowIn tensors.
template <class P, typename T>
size_t ring_smem_bytes(int64_t hidden) {
  return static_cast<size_t>(P::kRingStages) * P::kRowIn * static_cast<size_t>(hidden / kVec<T>) * 16;
}

template <class P, int K>
constexpr int kRingBoundBlocks = K >= 4 ? 2 : (P::kBias ? 3 : 4);

/// Fused backward with the rows in flight in shared memory: for rows whose every unit is
/// full and 16-byte aligned in x, residual and dy (hidden % VEC == 0, those pointers
/// 16-byte aligned: shift 0). Each thread cp.asyncs its own units of the next rows into a
/// ring of kRingStages slots and reads back only what it copied itself; group g of its
/// commit groups holds row r_begin + g. The slot of row i - 1 is refilled only after row
/// i's gradient-sum reduction (a barrier after every thread's reads of that slot). The
/// row math is backward_row's, reading units from the ring.
template <class P, typename T, int K>
__global__ void __launch_bounds__(kFusedMaxThreads, kRingBoundBlocks<P, K>)
    row_norm_backward_ring_kernel(const BwdArgs<T> a) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int S = P::kRingStages;
  constexpr int NT = P::kRowIn;
  static_assert(S >= 2, "at least one row in flight");
  __shared__ A red[3][32];
  extern __shared__ uint4 ring[];  // [S][NT][nunits]

  const int hidden = a.hidden;
  const int nunits = hidden / V;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
  const int64_t chunk = blockIdx.x;
  const int64_t r_begin = chunk * a.rows_per_chunk;
  const int64_t r_end = r_begin + a.rows_per_chunk < a.rows ? r_begin + a.rows_per_chunk : a.rows;

  const bool w_al = grid_is_aligned(a.w, 0);
  // This thread's units of w, held in registers for the whole chunk (the ring's rows
  // all have shift 0: the same columns in every row), and (residual policies) the row's
  // units of d_residual_out, loaded at the row's start so that they arrive while the
  // row's sums are reduced.
  constexpr int KD = P::kResidual ? K : 1;
  Unit<T> wc[K], dc[KD];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    wc[k] = u < nunits ? load_unit(a.w, u * V, hidden, w_al) : zero_unit<T>();
  }
  auto load_dres = [&](int64_t row) {
    if constexpr (P::kResidual) {
      const T* drr = a.dres + row * hidden;
      const bool dr_al = grid_is_aligned(drr, 0);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int u = tid + k * nthr;
        dc[k] = u < nunits ? load_unit(drr, u * V, hidden, dr_al) : zero_unit<T>();
      }
    }
  };
  auto issue = [&](int64_t row, int slot) {
    const int64_t off = row * hidden;
    uint4* base = ring + static_cast<size_t>(slot) * NT * nunits;
    const uint4* xs = reinterpret_cast<const uint4*>(a.x + off);
    const uint4* ds = reinterpret_cast<const uint4*>(a.dy + off);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        cp_async16(base + u, xs + u);
        if constexpr (P::kResidual) cp_async16(base + nunits + u, reinterpret_cast<const uint4*>(a.res + off) + u);
        cp_async16(base + (NT - 1) * nunits + u, ds + u);
      }
    }
  };

  A dwacc[K][V];
  A dbacc[P::kBias ? K : 1][V];
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dwacc[k][j] = A(0);
  }
#pragma unroll
  for (int k = 0; k < (P::kBias ? K : 1); ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dbacc[k][j] = A(0);
  }

  // Prologue: rows r_begin .. r_begin + S - 2 in flight (one commit group each, empty
  // past the chunk's end, so that group i always holds row r_begin + i).
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (r_begin + s < r_end) issue(r_begin + s, s);
    cp_async_commit();
  }

  int slot = 0;
#pragma unroll 1
  for (int64_t row = r_begin; row < r_end; ++row) {
#pragma unroll
    for (int k = 0; k < K; ++k) keep_packed(wc[k]);  // no widened copy hoisted out of the loop
    cp_async_wait<S - 2>();  // this row's group is complete
    const uint4* base = ring + static_cast<size_t>(slot) * NT * nunits;
    auto src = [&](int k, int t) -> Unit<T> {
      const int st = t == kTd ? NT - 1 : t;
      const int u = tid + k * nthr;
      // backward_row reads units u >= nunits only for the mean (mean/var policies).
      if constexpr (P::kMeanVar) {
        if (u >= nunits) return zero_unit<T>();
      }
      return unit_from_u4<T>(base[st * nunits + u]);
    };
    const int refill = slot == 0 ? S - 1 : slot - 1;
    auto after = [&] {
      if (row + S - 1 < r_end) issue(row + S - 1, refill);
      cp_async_commit();
    };
    load_dres(row);
    auto wsrc = [&](int k, int, bool) -> Unit<T> { return wc[k]; };
    auto dsrc = [&](int k, int, bool) -> Unit<T> { return dc[P::kResidual ? k : 0]; };
    backward_row<P, T, K, true>(a, row, 0, nunits, tid, nthr, src, wsrc, dsrc, [] {}, after,
                                [&](auto& v) { block_sum(v, red); }, [&](int k, int j, A dyv, A xhat) {
                                  dwacc[k][j] += dyv * xhat;
                                  if constexpr (P::kBias) dbacc[k][j] += dyv;
                                });
    slot = slot == S - 1 ? 0 : slot + 1;
  }
  cp_async_wait<0>();

  // Partial rows are 16-byte aligned: the base is, and hidden * sizeof(A) is a multiple
  // of VEC * sizeof(A) >= 16.
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) {
      store_acc_vec(a.part + chunk * hidden + u * V, dwacc[k]);
      if constexpr (P::kBias) store_acc_vec(a.part + (a.chunks + chunk) * hidden + u * V, dbacc[k]);
    }
  }
}

/// Short aligned rows of the fused backward (at most kBwdWarpRowsMaxUnits units; x, dy
/// [, residual] and dx 16-byte aligned, so every row has shift 0): what the ring kernel
/// does with K = 1 on its 32-thread block, with the rows of a chunk spread over the lane
/// groups of one warp (L lanes per row, L the smallest power of two >= the row's units,
/// lane l of a group playing thread l; 32 / L rows in flight per warp, one chunk per warp,
/// kWarpRowsWarps chunks per block). The per-row code is backward_row's, its block sums
/// replayed by lane_group_sum, so dx is bitwise the ring kernel's. The dw (db) partial of
/// the chunk is accumulated by the first lane group in row order from every group's
/// (acc(dy), xhat), fetched by shuffles, with the same expression as the ring kernel's
/// (partial += dy * xhat), so the partials, and hence dw and db, are bitwise the ring
/// kernel's too (tests/gpu/test_aligned_paths.cpp, NormBackwardPaths). Lanes of a group
/// past the chunk's last row run the row code with no unit (no load, no store) so that
/// every shuffle has all 32 lanes.
template <class P, typename T, int L>
__global__ void __launch_bounds__(32 * kWarpRowsWarps) row_norm_backward_warp_rows_kernel(const BwdArgs<T> a) {
  static_assert(L >= 1 && L <= 32 && (L & (L - 1)) == 0, "L: a power of two up to a warp");
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int G = 32 / L;  // lane groups: rows in flight per warp
  const int hidden = a.hidden;
  const int nunits = hidden / V;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int tid = lane % L, grp = lane / L;
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kWarpRowsWarps + (static_cast<int>(threadIdx.x) >> 5);
  if (chunk >= a.chunks) return;  // the whole warp
  const int64_t r_begin = chunk * a.rows_per_chunk;
  const int64_t r_end = r_begin + a.rows_per_chunk < a.rows ? r_begin + a.rows_per_chunk : a.rows;
  const bool has_unit = tid < nunits;
  const Unit<T> wu = has_unit ? load_unit(a.w, tid * V, hidden, grid_is_aligned(a.w, 0)) : zero_unit<T>();

  A dwacc[V], dbacc[P::kBias ? V : 1];
#pragma unroll
  for (int j = 0; j < V; ++j) dwacc[j] = A(0);
#pragma unroll
  for (int j = 0; j < (P::kBias ? V : 1); ++j) dbacc[j] = A(0);

#pragma unroll 1
  for (int64_t base = r_begin; base < r_end; base += G) {
    const int64_t row = base + grp;
    const bool on = row < r_end && has_unit;  // this lane holds a unit of a row of the chunk
    const int64_t off = (row < r_end ? row : r_begin) * hidden;
    const Unit<T> xu = on ? load_unit_hint<true>(a.x + off, tid * V, hidden, true) : zero_unit<T>();
    Unit<T> ru = zero_unit<T>();
    if constexpr (P::kResidual) ru = on ? load_unit_hint<true>(a.res + off, tid * V, hidden, true) : zero_unit<T>();
    const Unit<T> du = on ? load_unit_hint<true>(a.dy + off, tid * V, hidden, true) : zero_unit<T>();
    auto src = [&](int, int t) -> Unit<T> { return t == kTx ? xu : t == kTr ? ru : du; };
    auto wsrc = [&](int, int, bool) -> Unit<T> { return wu; };
    auto dsrc = [&](int, int, bool) -> Unit<T> {
      if constexpr (P::kResidual) return load_unit(a.dres + off, tid * V, hidden, grid_is_aligned(a.dres + off, 0));
      return zero_unit<T>();
    };
    A dyl[V], xhl[V];
#pragma unroll
    for (int j = 0; j < V; ++j) dyl[j] = xhl[j] = A(0);
    backward_row<P, T, 1, true>(a, row < r_end ? row : r_begin, 0, on ? nunits : 0, tid, 32, src, wsrc, dsrc, [] {},
                                [] {}, [&](auto& v) { lane_group_sum<L>(v); }, [&](int, int j, A dyv, A xhat) {
                                  dyl[j] = dyv;
                                  xhl[j] = xhat;
                                });
    // The chunk's partial, row by row in order, on the first group's lanes.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      A dyg[V], xg[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        dyg[j] = __shfl_sync(0xffffffffu, dyl[j], g * L + tid);
        xg[j] = __shfl_sync(0xffffffffu, xhl[j], g * L + tid);
      }
      if (grp == 0 && has_unit && base + g < r_end) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          dwacc[j] += dyg[j] * xg[j];
          if constexpr (P::kBias) dbacc[j] += dyg[j];
        }
      }
    }
  }
  // Partial rows are 16-byte aligned (see the ring kernel).
  if (grp == 0 && has_unit) {
    store_acc_vec(a.part + chunk * hidden + tid * V, dwacc);
    if constexpr (P::kBias) store_acc_vec(a.part + (a.chunks + chunk) * hidden + tid * V, dbacc);
  }
}

/// Rows too long for the register cache (RMS policies): dx and r, the row read twice.
template <class P, typename T>
__global__ void __launch_bounds__(kStreamThreads) row_norm_backward_streaming_kernel(const BwdArgs<T> a) {
  static_assert(!P::kMeanVar, "mean/variance policies cache the row");
  const int64_t row = blockIdx.x;
  const int hidden = a.hidden;
  __shared__ acc_t<T> red[3][32];
  const int64_t off = row * hidden;
  const int shift = grid_shift(a.x + off);
  const int nunits = (hidden + shift + kVec<T> - 1) / kVec<T>;
  const bool r_al = P::kResidual ? grid_is_aligned(a.res + off, shift) : false;
  const bool dy_al = grid_is_aligned(a.dy + off, shift);
  // The row is walked in strides of blockDim.x units; src(k, t) is called with k = 0
  // only, inside a loop over the strides (backward_row with K = 1 per stride would split
  // the reductions), so this kernel has its own loop over the units.
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  auto unit = [&](int u, int t) -> Unit<T> {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    if (t == kTx) return load_unit(a.x + off, lo, hidden, full);
    if (t == kTr) return load_unit(a.res + off, lo, hidden, full && r_al);
    return load_unit(a.dy + off, lo, hidden, full && dy_al);
  };
  const bool w_al = grid_is_aligned(a.w, shift);
  T* dxr = a.dx + off;
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dxr), shift);
  const T* drr = P::kResidual ? a.dres + off : nullptr;
  const bool dr_al = P::kResidual ? grid_is_aligned(drr, shift) : false;

  A sums[2] = {A(0), A(0)};
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const Unit<T> xu = unit(u, kTx);
    const Unit<T> ru = P::kResidual ? unit(u, kTr) : xu;
    const Unit<T> du = unit(u, kTd);
    const Unit<T> wu = load_unit(a.w, lo, hidden, unit_is_full<T>(lo, hidden) && w_al);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A v = detail::value<P, T>(xu, ru, j);
      const A g = mul_rn(unit_acc(du, j), detail::weight<P, T>(wu, j));
      sums[0] += v * v;
      sums[1] += g * v;
    }
  }
  block_sum<2>(sums, red);
  const A r = detail::rstd_of(sums[0], hidden, a.eps);
  const A c = r * div_rn(sums[1], A(hidden));
  if (threadIdx.x == 0) a.stats[row] = r;

  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = unit(u, kTx);
    const Unit<T> ru = P::kResidual ? unit(u, kTr) : xu;
    const Unit<T> du = unit(u, kTd);
    const Unit<T> wu = load_unit(a.w, lo, hidden, full && w_al);
    Unit<T> dru = du;
    if constexpr (P::kResidual) dru = load_unit(drr, lo, hidden, full && dr_al);
    A out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A g = mul_rn(unit_acc(du, j), detail::weight<P, T>(wu, j));
      const A xhat = detail::value<P, T>(xu, ru, j) * r;
      if constexpr (P::kResidual) {
        out[j] = add_rn(mul_rn(r, sub_rn(g, mul_rn(xhat, c))), unit_acc(dru, j));
      } else {
        out[j] = mul_rn(r, sub_rn(g, mul_rn(xhat, c)));
      }
    }
    store_unit(dxr, lo, hidden, full && dx_al, pack_from_acc<T>(out));
  }
}

// =====================================================================================
// backward, separate path: dw (db) stage 1 over column tiles of a chunk of rows
// =====================================================================================

/// xhat of one element from the stored row statistics.
template <class P, typename A>
__device__ __forceinline__ A xhat_of(A v, const A* stats, int64_t row) {
  if constexpr (P::kMeanVar) {
    return (v - stats[2 * row]) * stats[2 * row + 1];
  } else {
    return v * stats[row];
  }
}

/// Scalar stage 1. grid = (chunks, ceil(H / 64)), block = (32, 8). Block (c, b) writes,
/// for columns j in [64b, 64b + 64): part[c][j] = sum over the chunk's rows of
/// acc(dy) * xhat (and part[chunks + c][j] = sum of acc(dy)). Order: thread row ty sums
/// rows ty, ty+8, ... ascending (loads of kDwRowUnroll rows issued first), then the 8
/// thread rows are added in order 0..7.
template <class P, typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy) row_norm_dw_partial_kernel(const BwdArgs<T> a) {
  using A = acc_t<T>;
  constexpr int NP = P::kParts;
  __shared__ A tile[NP][kDwTy][kDwCols];
  const int hidden = a.hidden;
  const int64_t chunk = blockIdx.x;
  const int col0 = static_cast<int>(blockIdx.y) * kDwCols;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int jc[2] = {col0 + tx, col0 + tx + kDwTx};
  const int64_t r_begin = chunk * a.rows_per_chunk;
  const int64_t r_end = r_begin + a.rows_per_chunk < a.rows ? r_begin + a.rows_per_chunk : a.rows;

  A aw[2] = {A(0), A(0)};
  A ab[2] = {A(0), A(0)};
  for (int64_t r = r_begin + ty; r < r_end; r += kDwTy * kDwRowUnroll) {
    T xv[kDwRowUnroll][2], rv[kDwRowUnroll][2], dv[kDwRowUnroll][2];
    bool in[kDwRowUnroll];
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      const int64_t rq = r + q * kDwTy;
      in[q] = rq < r_end;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        xv[q][c] = rv[q][c] = dv[q][c] = from_acc<T>(A(0));
        if (in[q] && jc[c] < hidden) {
          const int64_t i = rq * hidden + jc[c];
          xv[q][c] = a.x[i];
          if constexpr (P::kResidual) rv[q][c] = a.res[i];
          dv[q][c] = a.dy[i];
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      if (in[q]) {
        const int64_t rq = r + q * kDwTy;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (jc[c] < hidden) {
            const A v = P::kResidual ? to_acc(xv[q][c]) + to_acc(rv[q][c]) : to_acc(xv[q][c]);
            const A d = to_acc(dv[q][c]);
            aw[c] += d * xhat_of<P>(v, a.stats, rq);
            if constexpr (P::kBias) ab[c] += d;
          }
        }
      }
    }
  }
  tile[0][ty][tx] = aw[0];
  tile[0][ty][tx + kDwTx] = aw[1];
  if constexpr (P::kBias) {
    tile[1][ty][tx] = ab[0];
    tile[1][ty][tx + kDwTx] = ab[1];
  }
  __syncthreads();

  const int t = ty * kDwTx + tx;
  if (t < kDwCols && col0 + t < hidden) {
#pragma unroll
    for (int p = 0; p < NP; ++p) {
      A s = tile[p][0][t];
#pragma unroll
      for (int i = 1; i < kDwTy; ++i) s += tile[p][i][t];
      a.part[(p * a.chunks + chunk) * hidden + col0 + t] = s;
    }
  }
}

/// Vector stage 1, for H % VEC == 0 with x, residual and dy 16-byte aligned: thread
/// (tx, ty) owns the VEC columns of unit 32 * blockIdx.y + tx and moves 16 bytes per
/// tensor and row. grid = (chunks, ceil(H / (32 * VEC))). Same order per column as the
/// scalar kernel, hence the same bits.
template <class P, typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy) row_norm_dw_partial_vec_kernel(const BwdArgs<T> a) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int NP = P::kParts;
  constexpr int kCols = kDwTx * V;
  __shared__ A tile[NP][kDwTy][kCols];
  const int hidden = a.hidden;
  const int64_t chunk = blockIdx.x;
  const int col0 = static_cast<int>(blockIdx.y) * kCols;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int jc = col0 + tx * V;
  const bool ok = jc < hidden;
  const int64_t r_begin = chunk * a.rows_per_chunk;
  const int64_t r_end = r_begin + a.rows_per_chunk < a.rows ? r_begin + a.rows_per_chunk : a.rows;

  A aw[V], ab[V];
#pragma unroll
  for (int j = 0; j < V; ++j) aw[j] = ab[j] = A(0);
  for (int64_t r = r_begin + ty; r < r_end; r += kDwTy * kDwRowUnroll) {
    Unit<T> xu[kDwRowUnroll], ru[kDwRowUnroll], du[kDwRowUnroll];
    bool in[kDwRowUnroll];
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      const int64_t rq = r + q * kDwTy;
      in[q] = rq < r_end;
      xu[q] = ru[q] = du[q] = zero_unit<T>();
      if (in[q] && ok) {
        const int64_t base = rq * hidden;
        xu[q] = load_unit(a.x + base, jc, hidden, true);
        if constexpr (P::kResidual) ru[q] = load_unit(a.res + base, jc, hidden, true);
        du[q] = load_unit(a.dy + base, jc, hidden, true);
      }
    }
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      if (in[q] && ok) {
        const int64_t rq = r + q * kDwTy;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A v = detail::value<P, T>(xu[q], ru[q], j);
          const A d = unit_acc(du[q], j);
          aw[j] += d * xhat_of<P>(v, a.stats, rq);
          if constexpr (P::kBias) ab[j] += d;
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    tile[0][ty][tx * V + j] = aw[j];
    if constexpr (P::kBias) tile[1][ty][tx * V + j] = ab[j];
  }
  __syncthreads();

  for (int c = ty * kDwTx + tx; c < kCols; c += kDwTx * kDwTy) {
    if (col0 + c < hidden) {
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        A s = tile[p][0][c];
#pragma unroll
        for (int i = 1; i < kDwTy; ++i) s += tile[p][i][c];
        a.part[(p * a.chunks + chunk) * hidden + col0 + c] = s;
      }
    }
  }
}

// =====================================================================================
// stage 2: the sum over chunks
// =====================================================================================

/// grid = (ceil(H / kFinTx), parts), block = (kFinTx, kFinTy) = (8, 32); blockIdx.y = p sums
/// partial array p (partial + p * chunks * H) into out0 (p = 0: dw) or out1 (p = 1: db), one
/// launch for both. out[j] = T(sum over chunks
/// of partial[c][j]): thread row ty sums chunks ty, ty+32, ... ascending (loads unrolled
/// kFinDeep at a time while that many remain, then four, then one; added in that order, so
/// the batching changes no bit; ptxas -v, sm_90: 32 registers, so the compiler keeps fewer
/// than kFinDeep loads in flight), then thread row 0 adds the 32 lane sums in order 0..31.
/// The order depends on the chunk count alone. (Until run 24: 32 columns per block and
/// loads unrolled by 4, the same additions: LayerNorm 70000x64 has 23,334 chunks, 729 per lane,
/// and its dw + db stage 2 took 70.6 us in 2 blocks each; see the header.)
template <typename T>
__global__ void __launch_bounds__(kFinTx* kFinTy)
    row_norm_finalize_kernel(const acc_t<T>* __restrict__ partial, T* __restrict__ out0, T* __restrict__ out1,
                             int64_t chunks, int hidden) {
  using A = acc_t<T>;
  __shared__ A tile[kFinTy][kFinTx];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int j = static_cast<int>(blockIdx.x) * kFinTx + tx;
  T* out = blockIdx.y == 0 ? out0 : out1;
  A s = A(0);
  if (j < hidden) {
    const A* p = partial + static_cast<int64_t>(blockIdx.y) * chunks * hidden + j;
    int64_t c = ty;
    for (; c + (kFinDeep - 1) * kFinTy < chunks; c += kFinDeep * kFinTy) {
      A v[kFinDeep];
#pragma unroll
      for (int i = 0; i < kFinDeep; ++i) v[i] = p[(c + i * kFinTy) * hidden];
#pragma unroll
      for (int i = 0; i < kFinDeep; ++i) s += v[i];
    }
    for (; c + 3 * kFinTy < chunks; c += 4 * kFinTy) {
      const A a0 = p[c * hidden];
      const A a1 = p[(c + kFinTy) * hidden];
      const A a2 = p[(c + 2 * kFinTy) * hidden];
      const A a3 = p[(c + 3 * kFinTy) * hidden];
      s += a0;
      s += a1;
      s += a2;
      s += a3;
    }
    for (; c < chunks; c += kFinTy) s += p[c * hidden];
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

/// Nondeterministic stage 2 (rmsnorm's atomic_dw variant): grid = (chunks, ceil(H / 256)),
/// block 256; thread (chunk, j) atomicAdds partial[chunk][j] into acc[j] (zeroed first),
/// in the blocks' arrival order.
template <typename T>
__global__ void __launch_bounds__(256)
    row_norm_atomic_kernel(const acc_t<T>* __restrict__ partial, acc_t<T>* __restrict__ acc, int hidden) {
  const int j = static_cast<int>(blockIdx.y) * 256 + static_cast<int>(threadIdx.x);
  if (j < hidden) atomicAdd(acc + j, partial[static_cast<int64_t>(blockIdx.x) * hidden + j]);
}

/// out[j] = T(acc[j]). grid = ceil(H / 256), block = 256.
template <typename T>
__global__ void __launch_bounds__(256) row_norm_round_kernel(const acc_t<T>* __restrict__ acc, T* __restrict__ out,
                                                             int hidden) {
  const int j = static_cast<int>(blockIdx.x) * 256 + static_cast<int>(threadIdx.x);
  if (j < hidden) out[j] = from_acc<T>(acc[j]);
}

// =====================================================================================
// host side: launch configuration and the launchers (arguments validated by the op)
// =====================================================================================

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

template <typename T>
bool aligned_to_element(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}

/// Units per row the launch is sized for: with hidden % VEC == 0 every row has x's
/// 16-byte phase; otherwise any phase can occur and the block is sized for the worst,
/// whatever the number of rows. So a row's launch shape depends only on hidden, the dtype
/// and its own 16-byte phase, never on how many rows are launched with it.
template <typename T>
int64_t max_units_per_row(const T* x, int64_t hidden) {
  constexpr int V = kVec<T>;
  const int shift0 = static_cast<int>((reinterpret_cast<std::uintptr_t>(x) & 15u) / sizeof(T));
  const int max_shift = hidden % V == 0 ? shift0 : V - 1;
  return ceil_div(hidden + max_shift, V);
}

struct CachedConfig {
  int k = 0;        ///< units cached per thread; 0: row too long for the register cache
  int threads = 0;  ///< block size, a multiple of 32
};

/// Smallest K in {1, 2, 4, ..., max_k} with ceil(units / K) <= target_threads; else
/// K = max_k when ceil(units / max_k) <= 1024; else {0, 0}. Block rounded up to a warp.
inline CachedConfig pick_cached_config(int64_t units, int max_k, int target_threads) {
  for (int k = 1; k <= max_k; k *= 2) {
    const int64_t threads = ceil_div(units, k);
    if (threads <= target_threads) return {k, static_cast<int>(round_up(threads, 32))};
  }
  const int64_t threads = ceil_div(units, max_k);
  if (threads <= kMaxThreads) return {max_k, static_cast<int>(round_up(threads, 32))};
  return {};
}

/// Separate-path stage-1 rows per chunk: 64 for hidden >= 1024, taller for narrow rows.
inline int64_t dw_rows_per_chunk(int64_t hidden) {
  const int64_t cols = round_up(hidden, kDwCols);
  const int64_t widen = cols >= 1024 ? 1 : 1024 / cols;
  return 64 * widen;
}
inline int64_t dw_chunks(int64_t rows, int64_t hidden) { return ceil_div(rows, dw_rows_per_chunk(hidden)); }

/// Fused-path rows per chunk: about kFusedChunkCols / hidden chunks, each >= 1 row.
template <class P>
int64_t fused_rows_per_chunk(int64_t rows, int64_t hidden) {
  const int64_t target_chunks = P::kFusedChunkCols / hidden > 1 ? P::kFusedChunkCols / hidden : 1;
  const int64_t r = ceil_div(rows, target_chunks);
  return r > 1 ? r : 1;
}
template <class P>
int64_t fused_chunks(int64_t rows, int64_t hidden) {
  return ceil_div(rows, fused_rows_per_chunk<P>(rows, hidden));
}

struct WorkspaceLayout {
  int64_t stats_offset = 0;    ///< from the aligned base
  int64_t partial_offset = 0;  ///< from the aligned base
  int64_t bytes = 0;           ///< bytes needed from the aligned base
};

/// [stats: rows x kStats x acc][pad][partials: kParts x chunks x hidden x acc], chunks the
/// larger of the two paths' counts.
template <class P>
WorkspaceLayout workspace_layout(int64_t rows, int64_t hidden, int64_t acc_size) {
  WorkspaceLayout l;
  l.partial_offset = round_up(rows * P::kStats * acc_size, kWorkspaceAlign);
  const int64_t chunks = dw_chunks(rows, hidden) > fused_chunks<P>(rows, hidden) ? dw_chunks(rows, hidden)
                                                                                  : fused_chunks<P>(rows, hidden);
  l.bytes = l.partial_offset + P::kParts * chunks * hidden * acc_size;
  return l;
}

/// Workspace bytes for every element type (sized for double), with alignment slack.
template <class P>
size_t workspace_bytes(int64_t rows, int64_t hidden) {
  return static_cast<size_t>(workspace_layout<P>(rows, hidden, int64_t(sizeof(double))).bytes + kWorkspaceAlign);
}

/// Bytes of the [hidden] atomic accumulator placed after workspace_bytes<P>'s layout.
template <class P>
size_t atomic_workspace_bytes(int64_t rows, int64_t hidden) {
  const WorkspaceLayout l = workspace_layout<P>(rows, hidden, int64_t(sizeof(double)));
  return static_cast<size_t>(round_up(l.bytes, kWorkspaceAlign) + hidden * int64_t(sizeof(double)) + kWorkspaceAlign);
}

/// True when the aligned forward applies: hidden % kVec<T> == 0 and every tensor of the
/// policy 16-byte aligned.
template <class P, typename T>
bool forward_is_aligned(const FwdArgs<T>& a) {
  bool ok = a.hidden % kVec<T> == 0 && aligned16(a.x) && aligned16(a.w) && aligned16(a.y);
  if constexpr (P::kResidual) ok = ok && aligned16(a.res) && aligned16(a.res_out);
  if constexpr (P::kBias) ok = ok && aligned16(a.b);
  return ok;
}

template <class P, typename T, int K>
void launch_forward_k(const FwdArgs<T>& a, dim3 grid, int threads, bool aligned, cudaStream_t stream) {
  if (aligned) {
    row_norm_forward_aligned_kernel<P, T, K><<<grid, threads, 0, stream>>>(a);
  } else {
    row_norm_forward_cached_kernel<P, T, K><<<grid, threads, 0, stream>>>(a);
  }
}

/// Forward launch (arguments already validated; rows >= 1). Returns cudaErrorInvalidValue
/// for a row too long for the cache of a policy without a streaming kernel. The block
/// shape (K, threads) is a function of (policy, hidden, dtype, x's 16-byte phase) only;
/// the aligned and the cached kernel do the same operations in the same order at the same
/// shape (the same bits: tests/gpu/test_aligned_paths.cpp).
template <class P, typename T>
cudaError_t launch_forward(const FwdArgs<T>& a, int64_t rows, cudaStream_t stream) {
  constexpr int KM = P::template kFwdMaxK<T>;
  const dim3 grid(static_cast<unsigned>(rows));
  const CachedConfig cfg = pick_cached_config(max_units_per_row(a.x, a.hidden), KM, P::kFwdTargetThreads);
  const bool aligned = forward_is_aligned<P, T>(a);
  using kernel_trace::Launcher;
  if (aligned && cfg.k == 1 && cfg.threads == 32) {  // rows of at most 32 units: several per warp
    kernel_trace::record(Launcher::row_norm_forward, "warp_rows");
    const int units = a.hidden / kVec<T>;
    int lanes = 1;
    while (lanes < units) lanes *= 2;
    const int64_t rows_per_block = int64_t{kWarpRowsWarps} * (32 / lanes);
    const dim3 wgrid(static_cast<unsigned>(ceil_div(rows, rows_per_block)));
    const int nt = 32 * kWarpRowsWarps;
    switch (lanes) {
      case 1: row_norm_forward_warp_rows_kernel<P, T, 1><<<wgrid, nt, 0, stream>>>(a, rows); break;
      case 2: row_norm_forward_warp_rows_kernel<P, T, 2><<<wgrid, nt, 0, stream>>>(a, rows); break;
      case 4: row_norm_forward_warp_rows_kernel<P, T, 4><<<wgrid, nt, 0, stream>>>(a, rows); break;
      case 8: row_norm_forward_warp_rows_kernel<P, T, 8><<<wgrid, nt, 0, stream>>>(a, rows); break;
      case 16: row_norm_forward_warp_rows_kernel<P, T, 16><<<wgrid, nt, 0, stream>>>(a, rows); break;
      default: row_norm_forward_warp_rows_kernel<P, T, 32><<<wgrid, nt, 0, stream>>>(a, rows); break;
    }
    return cudaGetLastError();
  }
  kernel_trace::record(Launcher::row_norm_forward, cfg.k != 0 ? (aligned ? "aligned" : "cached")
                                                   : (P::kMeanVar ? "refused" : "streaming"));
  switch (cfg.k) {
    case 1: launch_forward_k<P, T, 1>(a, grid, cfg.threads, aligned, stream); break;
    case 2: launch_forward_k<P, T, 2>(a, grid, cfg.threads, aligned, stream); break;
    case 4:
      if constexpr (KM >= 4) launch_forward_k<P, T, 4>(a, grid, cfg.threads, aligned, stream);
      break;
    case 8:
      if constexpr (KM >= 8) launch_forward_k<P, T, 8>(a, grid, cfg.threads, aligned, stream);
      break;
    default:
      if constexpr (P::kMeanVar) {
        return cudaErrorInvalidValue;
      } else {
        row_norm_forward_streaming_kernel<P, T><<<grid, kStreamThreads, 0, stream>>>(a);
      }
      break;
  }
  return cudaGetLastError();
}

/// Launches the ring kernel with its slots in dynamic shared memory; the attributes are
/// set on every call (cheap, and right for whichever device is current).
template <class P, typename T, int K>
cudaError_t launch_ring(const BwdArgs<T>& a, int threads, cudaStream_t stream) {
  auto* kernel = row_norm_backward_ring_kernel<P, T, K>;
  const size_t max_smem = ring_smem_bytes<P, T>(int64_t(K) * kFusedMaxThreads * kVec<T>);
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(max_smem));
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             static_cast<int>(cudaSharedmemCarveoutMaxShared));
  if (err != cudaSuccess) return err;
  kernel<<<dim3(static_cast<unsigned>(a.chunks)), threads, ring_smem_bytes<P, T>(a.hidden), stream>>>(a);
  return cudaGetLastError();
}

/// Stage 2: every partial array in one fixed-order launch (acc == nullptr), or each by
/// atomics into acc.
template <class P, typename T>
cudaError_t finish_partials(const BwdArgs<T>& a, T* dw, T* db, acc_t<T>* acc, cudaStream_t stream) {
  const int h = a.hidden;
  if (acc == nullptr) {  // deterministic: dw (and db) in one launch
    row_norm_finalize_kernel<T><<<dim3(static_cast<unsigned>(ceil_div(h, kFinTx)), P::kParts), dim3(kFinTx, kFinTy), 0,
                                  stream>>>(a.part, dw, db, a.chunks, h);
    return cudaGetLastError();
  }
  for (int p = 0; p < P::kParts; ++p) {  // rmsnorm's atomic_dw variant
    const acc_t<T>* part = a.part + p * a.chunks * h;
    T* out = p == 0 ? dw : db;
    cudaError_t err = cudaMemsetAsync(acc, 0, static_cast<size_t>(h) * sizeof(acc_t<T>), stream);
    if (err != cudaSuccess) return err;
    const unsigned cols = static_cast<unsigned>(ceil_div(h, 256));
    row_norm_atomic_kernel<T><<<dim3(static_cast<unsigned>(a.chunks), cols), 256, 0, stream>>>(part, acc, h);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    row_norm_round_kernel<T><<<cols, 256, 0, stream>>>(acc, out, h);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

/// Backward launch (arguments validated, rows >= 1, workspace >= workspace_bytes<P> or,
/// with atomic, atomic_workspace_bytes<P>). a.x, a.res, a.w, a.dy, a.dres, a.dx, a.rows,
/// a.hidden, a.eps set by the caller; the rest is filled in here.
template <class P, typename T>
cudaError_t launch_backward(BwdArgs<T> a, T* dw, T* db, void* workspace, bool atomic, cudaStream_t stream) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int64_t rows = a.rows;
  const int64_t hidden = a.hidden;
  const WorkspaceLayout layout = workspace_layout<P>(rows, hidden, static_cast<int64_t>(sizeof(A)));
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t base =
      (raw + static_cast<std::uintptr_t>(kWorkspaceAlign - 1)) & ~static_cast<std::uintptr_t>(kWorkspaceAlign - 1);
  a.stats = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.stats_offset));
  a.part = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.partial_offset));
  A* acc = atomic ? reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(round_up(layout.bytes, kWorkspaceAlign)))
                  : nullptr;
  const int64_t units = max_units_per_row(a.x, hidden);

  // Fused path: every row has x's 16-byte phase and fits a block of <= 256 threads.
  const CachedConfig fcfg = pick_cached_config(units, kFusedMaxK, kBwdTargetThreads);
  if (hidden % V == 0 && fcfg.k != 0 && fcfg.threads <= kFusedMaxThreads) {
    a.rows_per_chunk = fused_rows_per_chunk<P>(rows, hidden);
    a.chunks = fused_chunks<P>(rows, hidden);
    const dim3 grid(static_cast<unsigned>(a.chunks));
    cudaError_t err = cudaSuccess;
    const bool ring = aligned16(a.x) && aligned16(a.dy) && (!P::kResidual || aligned16(a.res));
    const int64_t units_aligned = hidden / V;
    if (ring && aligned16(a.dx) && fcfg.k == 1 && fcfg.threads == 32 && units_aligned <= kBwdWarpRowsMaxUnits) {
      // Short rows: the rows of a chunk several to a warp (bitwise the ring kernel's dx and
      // partials, which a dx off 16 bytes takes instead).
      kernel_trace::record(kernel_trace::Launcher::row_norm_backward, "warp_rows");
      int lanes = 1;
      while (lanes < units_aligned) lanes *= 2;
      const dim3 wgrid(static_cast<unsigned>(ceil_div(a.chunks, int64_t{kWarpRowsWarps})));
      const int nt = 32 * kWarpRowsWarps;
      switch (lanes) {
        case 1: row_norm_backward_warp_rows_kernel<P, T, 1><<<wgrid, nt, 0, stream>>>(a); break;
        case 2: row_norm_backward_warp_rows_kernel<P, T, 2><<<wgrid, nt, 0, stream>>>(a); break;
        case 4: row_norm_backward_warp_rows_kernel<P, T, 4><<<wgrid, nt, 0, stream>>>(a); break;
        default: row_norm_backward_warp_rows_kernel<P, T, 8><<<wgrid, nt, 0, stream>>>(a); break;
      }
      err = cudaGetLastError();
    } else if (ring) {
      kernel_trace::record(kernel_trace::Launcher::row_norm_backward, "ring");
      switch (fcfg.k) {
        case 1: err = launch_ring<P, T, 1>(a, fcfg.threads, stream); break;
        case 2: err = launch_ring<P, T, 2>(a, fcfg.threads, stream); break;
        default: err = launch_ring<P, T, 4>(a, fcfg.threads, stream); break;
      }
    } else {
      // Register path: the next row prefetched for the two-tensor policies without db.
      constexpr bool kPre = P::kRowIn == 2 && !P::kBias;
      kernel_trace::record(kernel_trace::Launcher::row_norm_backward, "rows_fused");
      switch (fcfg.k) {
        case 1: row_norm_backward_rows_kernel<P, T, 1, true, kPre><<<grid, fcfg.threads, 0, stream>>>(a); break;
        case 2: row_norm_backward_rows_kernel<P, T, 2, true, kPre><<<grid, fcfg.threads, 0, stream>>>(a); break;
        default: row_norm_backward_rows_kernel<P, T, 4, true, kPre><<<grid, fcfg.threads, 0, stream>>>(a); break;
      }
      err = cudaGetLastError();
    }
    if (err != cudaSuccess) return err;
    return finish_partials<P, T>(a, dw, db, acc, stream);
  }

  // Separate path. 1. dx and the row statistics, one block per row.
  constexpr int KS = P::template kSepMaxK<T>;
  const CachedConfig cfg = pick_cached_config(units, KS, kBwdTargetThreads);
  a.rows_per_chunk = 1;
  a.chunks = rows;
  const dim3 grid(static_cast<unsigned>(rows));
  kernel_trace::record(kernel_trace::Launcher::row_norm_backward,
                       cfg.k != 0 ? "rows" : (P::kMeanVar ? "refused" : "streaming"));
  switch (cfg.k) {
    case 1: row_norm_backward_rows_kernel<P, T, 1, false, false><<<grid, cfg.threads, 0, stream>>>(a); break;
    case 2: row_norm_backward_rows_kernel<P, T, 2, false, false><<<grid, cfg.threads, 0, stream>>>(a); break;
    case 4:
      if constexpr (KS >= 4) row_norm_backward_rows_kernel<P, T, 4, false, false><<<grid, cfg.threads, 0, stream>>>(a);
      break;
    default:
      if constexpr (P::kMeanVar) {
        return cudaErrorInvalidValue;
      } else {
        row_norm_backward_streaming_kernel<P, T><<<grid, kStreamThreads, 0, stream>>>(a);
      }
      break;
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  // 2. stage 1: per-chunk partial column sums (re-reads the rows).
  a.rows_per_chunk = dw_rows_per_chunk(hidden);
  a.chunks = dw_chunks(rows, hidden);
  const dim3 block(kDwTx, kDwTy);
  const bool vec = hidden % V == 0 && aligned16(a.x) && aligned16(a.dy) && (!P::kResidual || aligned16(a.res));
  if (vec) {
    const dim3 g1(static_cast<unsigned>(a.chunks), static_cast<unsigned>(ceil_div(hidden, int64_t(kDwTx) * V)));
    row_norm_dw_partial_vec_kernel<P, T><<<g1, block, 0, stream>>>(a);
  } else {
    const dim3 g1(static_cast<unsigned>(a.chunks), static_cast<unsigned>(ceil_div(hidden, kDwCols)));
    row_norm_dw_partial_kernel<P, T><<<g1, block, 0, stream>>>(a);
  }
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  // 3. stage 2.
  return finish_partials<P, T>(a, dw, db, acc, stream);
}

}  // namespace numgate::row_norm
