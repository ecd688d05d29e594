/*
Cross-entropy forward, backward and fused forward + backward kernels (the numgate target
kernels for cross_entropy). The op and the numerics contract are in cross_entropy.cuh and
cross_entropy_oracle.h.

Design.

  Every pass processes a row (token) with one block of kThreads = 1024 threads, so the
  row's reduction tree is the same in the forward, the backward and the fused kernel (the
  fused entry's loss and lse are bitwise the forward's, its dlogits bitwise the
  backward's). Grids hold one block per SM and loop over the rows (r = blockIdx.x,
  blockIdx.x + gridDim.x, ...: every SM gets the same share); a row's result depends on
  nothing but the row, so it does not depend on the grid size. The row of logits is viewed
  on the virtual 16-byte grid of common/cuda_utils.cuh (shift = (p % 16) / sizeof(T));
  thread t owns units t, t + 1024, ... (bf16/fp16 8, fp32 4, double 2 elements per unit)
  and loads kBatch = 4 of them (statistics sweep) or kGradBatch = 2 (gradient sweep)
  before using any: at 1024 threads a thread has 64 registers, and more units in flight
  spill.

  Soft cap and label smoothing are compile-time specialisations (the common case has
  neither: no per-element test); the z-loss factor multiplies p always (it is exactly 1
  without z-loss, so the product is p bit for bit).

  row statistics (one sweep): per thread an online (m, S) over its units in order and, with
  smoothing, sum_j s_j.
    bf16 / fp16 logits: m, S, sum_s in FP32. Per unit: its max (fmaxf: NaN is skipped and
      reaches S instead, as a NaN term), one rescale S *= expf(m_old - m_new) (CUDA expf,
      accurate) when the max grows, then the unit's terms added to S in order, each term
      2^(RN(RN(s - m) * log2 e)) by ex2.approx.ftz (relative error <= ~2^-19 where
      |s - m| < 20, dominated by the argument's two roundings; <= ~2^-21 where |s - m| <= 2:
      at most ~2^-10 of a bf16 and ~2^-7 of an fp16 output's half-ULP). The .ftz flushes a
      term below 2^-126 (s - m < -87.3) to 0; that cannot change S, lse or the loss: the
      partial S it joins is >= 1 (the running maximum's own term), and all flushed terms
      together are below V 2^-126 <= 2^-96 of it, far under its half-ulp (>= 2^-24). A -inf
      logit's term is +0; while a thread's m is -inf its base is 0, so a NaN logit still
      makes S NaN. About 6 instructions per element.
      The gradient sweep's term is the same 2^(RN(RN(s - m) * log2 e)) WITHOUT .ftz
      (ex2.approx.f32, <= 2 ulp, subnormal results kept: PTX ISA, ex2): there p = e / S is
      the output itself, and a bf16 dlogits g p is still a subnormal down to 2^-133 where
      s - m is as low as -92 (the underflow_tail cases; fp16's subnormals end at 2^-24, far
      above any p < 2^-126, and float logits take the FP64 exp).
    float / double logits: m in acc, S and sum_s in FP64, exp in FP64, element by element
      (the FP32 outputs' threshold is a few FP32 ulps).
  Threads are combined by a shuffle-xor butterfly (warp), then over the 32 warps by a
  second butterfly, with a combine rule that is commutative bit for bit:
  m = max(a.m, b.m), S = a.S exp(a.m - m) + b.S exp(b.m - m) (a zero S contributes 0;
  accurate expf / FP64 exp), sum_s = a + b; so the tree depends on kThreads only.

  forward (forward_rows): thread 0 forms lse and ce (acc, the reference's operations) and
    writes lse and, for none, loss; for mean / sum it writes ce into the workspace and a
    single-block kernel sums the launched rows in a fixed order, divided by n (mean; count
    kernel over targets[0, total_tokens); n = 0 gives 0).
  backward (backward_rows, FUSED false): the statistics sweep, then a gradient sweep
    writing dlogits with streaming stores (st.global.cs). The statistics sweep also stores
    the row's first keep_units units (up to kKeepSmem = 200 KiB: all of a row of up to
    ~100k bf16 elements, 12,800 of the ~18,993 units at vocab 151,936) in the block's shared
    memory, each thread its own units. The gradient sweep first reads the rest again by
    loads marked as the row's last use (ld.global.cs), L2 hits (the units the statistics
    sweep loaded last, re-read before later traffic evicts them), then the kept units from
    shared memory; so DRAM sees the logits once. Where a unit comes from, and in which
    order the units are visited, changes no value (the same 16 bytes; each dlogit depends
    on its own logit and the row's statistics only). When the gradient sweep starts, thread 0 asks
    L2 for the first 96 KiB of the block's next row (cp.async.bulk.prefetch.L2). Ignored
    tokens, and mean with n = 0, write exact zeros without reading the logits.
  fused (backward_rows, FUSED true; forward_backward): per row the statistics sweep and the
    forward's epilogue (lse, ce), then the backward's gradient sweep (ignored tokens:
    zeros); the count kernel before and the loss reduction after, as the forward's. For the
    tests only, cross_entropy_mutants.cuh launches this kernel compiled with its statistics
    combined by another tree (Tree::ascending; a template argument: the production
    instantiations are the same code).

Performance (H200, 8192 x 151,936 bf16, mean: numgate-bench's kernel clock, the GPU time
per call of every kernel a call launches; run 18 of the whole suite, D2D copy 4272 GB/s
read + write; the backward and fused figures from run 19). Minimal bytes = the inputs read
once + the outputs written once.
  forward: 2.49 GB (logits; targets, loss, lse ~0.1 MB); 830 us = 3.00 TB/s, 70% of copy.
    Limit, measured (Nsight Compute on the H200, run 24, 8192 x 151,936, every token
    kept): issue slots 72% busy, DRAM 63% of peak, 64 registers x 1024 threads = one
    block and 50% occupancy per SM: the ~6 instructions per element of the online
    (max, sum) and the SFU's ex2 share the issue slots with the loads, per SM one block
    with 64 KiB of loads in flight, synchronous per batch, and a block reduction at every
    row end with no loads in flight; deeper batches spill at 1024 threads, and an L2 bulk
    prefetch of the next row made it slower (988-1086 us in a tuning run).
  backward: 4.98 GB (logits read once, dlogits written once); 1720-1777 us = 2.80-2.90
    TB/s, 66-68% of copy (run 19, three calls). fused: the same 4.98 GB (+ lse, loss);
    1730-1751 us = 2.84-2.88 TB/s, 67% of copy (Liger's fused kernel 1719-1726 us: 1.01 of
    it). At 512 x 151,936: backward 114 us, fused 116 us (Liger 151 us).
    Limit, measured (Nsight Compute, run 24, the fused kernel, every token kept): 1.71 ms,
    issue slots 74% busy, DRAM 64% of peak (3.06 TB/s), L2 hit rate 53% (the gradient
    sweep's re-read), one block of 1024 threads x 64 registers per SM (50% occupancy);
    Liger's fused kernel at the same shape: 1.86 ms, issue slots 54%, DRAM 68% (it reads
    each row twice, the second time mostly from L2, and writes the gradient in place).
    The two sweeps per row run back to back in each SM's single block
    (the statistics sweep reads DRAM at one block's memory-level parallelism, as the
    forward; the gradient sweep writes DRAM at 2 units in flight per thread, with
    ~11 instructions per element, the subnormal-keeping 2^x among them). Measured in run
    18 and 19 (docs/peer-runs.md): keeping 200 KiB of the row in shared memory (1819 / 1811 us
    without, run 17; 1802 / 1760 us with, run 18), then re-reading the L2 units before the
    kept ones (the figures above); not kept: prefetching 192 KiB of the next row instead of 96 (fused
    1884 us); the whole row in shared memory over a 2-CTA cluster of 512 threads each
    (half the threads per SM: 2178 us); ex2.approx.ftz on the rows where no term can be
    subnormal (1810 us, no gain).
*/

#include "cross_entropy/cross_entropy.cuh"
#include "cross_entropy/cross_entropy_mutants.cuh"

#include <climits>
#include <cmath>
#include <math_constants.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"

namespace numgate::cross_entropy {
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
using numgate::device::mul_rn;
using numgate::device::pack_from_acc;
using numgate::device::store_unit;
using numgate::device::sub_rn;
using numgate::device::to_acc;
using numgate::device::Unit;
using numgate::device::unit_acc;
using numgate::device::unit_is_full;

/// Threads per row, in every pass (the reduction tree of a row depends on it alone).
constexpr int kThreads = 1024;
/// Threads of the single-block count and loss-reduction kernels.
constexpr int kSmallThreads = 512;

/// Units (16-byte loads) each thread has in flight in a statistics sweep and in the gradient
/// sweep (64 registers per thread at 1024 threads hold them, the row's constants and d / out;
/// more spill).
template <typename T>
inline constexpr int kBatch = 4;
template <typename T>
inline constexpr int kGradBatch = 2;

/// Shared memory the backward and fused kernels keep the row in (bytes per block): the
/// statistics sweep stores its units u < keep_units (16 bytes each, keep_units = this /
/// 16 or the row's units, the fewer) in shared memory, and the gradient sweep reads them
/// there; only the rest of a longer row is read again (from L2: the most recently loaded
/// units). 200 KiB: 12,800 of a 151,936-vocabulary bf16 row's ~18,993 units.
constexpr std::size_t kKeepSmem = 200u << 10;

/// bf16 / fp16 logits: FP32 statistics with ex2.approx terms. float / double: FP64.
template <typename T>
inline constexpr bool kFast = sizeof(T) == 2;

/// targets[t] for any byte alignment of `targets`.
__device__ __forceinline__ std::int64_t load_target(const unsigned char* targets, std::int64_t t) {
  const unsigned char* a = targets + t * 8;
  if ((reinterpret_cast<std::uintptr_t>(a) & 7u) == 0) return *reinterpret_cast<const long long*>(a);
  unsigned long long v = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b) v |= static_cast<unsigned long long>(a[b]) << (8 * b);  // little-endian
  return static_cast<std::int64_t>(v);
}

template <typename A>
__device__ __forceinline__ A max_nan(A a, A b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  return a > b ? a : b;
}

template <typename A>
__device__ __forceinline__ A to_a(double v);
template <>
__device__ __forceinline__ float to_a<float>(double v) { return __double2float_rn(v); }
template <>
__device__ __forceinline__ double to_a<double>(double v) { return v; }

template <typename A>
struct Coef {
  A cf, ef, zf, Vf;
  long long ignore;
  int reduction;
};

/// tanh of the acc quotient x / c: bf16 / fp16 CUDA tanhf (<= 2 ulp); float evaluated in
/// FP64 and rounded once (like the reference's libm tanhf; 1 - tanh^2 amplifies a 2-ulp
/// tanhf where the cap saturates); double FP64.
template <typename T>
__device__ __forceinline__ acc_t<T> tanh_acc(acc_t<T> q) {
  if constexpr (std::is_same_v<T, double>) return tanh(q);
  else if constexpr (kFast<T>) return tanhf(q);
  else return __double2float_rn(tanh(static_cast<double>(q)));
}

/// s = CAP ? cf * tanh(x / cf) : x (acc, the reference's operations).
template <typename T, bool CAP>
__device__ __forceinline__ acc_t<T> capped(acc_t<T> x, acc_t<T> cf) {
  if constexpr (CAP) return mul_rn(cf, tanh_acc<T>(div_rn(x, cf)));
  else return x;
}

/// 2^x by the SFU: ex2.approx.ftz.f32 (FTZ true: results below 2^-126 flushed to +0) or
/// ex2.approx.f32 (subnormal results kept); both: -inf gives +0, NaN NaN, 0 exactly 1.
template <bool FTZ>
__device__ __forceinline__ float ex2_approx(float x) {
  float r;
  if constexpr (FTZ) asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  else asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
/// exp(d) for d = s - m <= 0 (bf16 / fp16 terms): 2^(RN(d * log2 e)). The statistics sweep
/// flushes terms below 2^-126 (FTZ true: they cannot reach S, see the header); the gradient
/// sweep must not (FTZ false: the term is p's numerator, and dlogits can be subnormal).
template <bool FTZ>
__device__ __forceinline__ float exp_term_fast(float d) {
  return ex2_approx<FTZ>(__fmul_rn(d, 1.4426950408889634f));
}

// ---- per-thread statistics ----------------------------------------------------------

/// bf16 / fp16: everything in FP32. m skips NaN (fmaxf); a NaN or +inf logit makes S NaN.
struct FStats {
  float m;   ///< max of the thread's s_j (-inf while none is finite or +inf)
  float S;   ///< sum exp(s_j - m)
  float ss;  ///< sum s_j (smoothing only)
};
/// float / double: m NaN-propagating in acc, S and sum_s in FP64.
template <typename A>
struct DStats {
  A m;
  double S;
  double ss;
};

template <typename T>
using Stats = std::conditional_t<kFast<T>, FStats, DStats<acc_t<T>>>;

__device__ __forceinline__ FStats combine(const FStats& a, const FStats& b) {
  FStats r;
  r.m = fmaxf(a.m, b.m);
  const float ea = a.S == 0.0f ? 0.0f : __fmul_rn(a.S, expf(__fsub_rn(a.m, r.m)));
  const float eb = b.S == 0.0f ? 0.0f : __fmul_rn(b.S, expf(__fsub_rn(b.m, r.m)));
  r.S = __fadd_rn(ea, eb);
  r.ss = __fadd_rn(a.ss, b.ss);
  return r;
}

template <typename A>
__device__ __forceinline__ DStats<A> combine(const DStats<A>& a, const DStats<A>& b) {
  DStats<A> r;
  r.m = max_nan(a.m, b.m);
  if (r.m == A(-INFINITY)) {
    r.S = 0.0;
  } else {
    const double ea = a.m == A(-INFINITY) ? 0.0 : __dmul_rn(a.S, exp(__dsub_rn(static_cast<double>(a.m), static_cast<double>(r.m))));
    const double eb = b.m == A(-INFINITY) ? 0.0 : __dmul_rn(b.S, exp(__dsub_rn(static_cast<double>(b.m), static_cast<double>(r.m))));
    r.S = __dadd_rn(ea, eb);
  }
  r.ss = __dadd_rn(a.ss, b.ss);
  return r;
}

__device__ __forceinline__ FStats shfl_stats(const FStats& s, int off) {
  return {__shfl_xor_sync(0xffffffffu, s.m, off), __shfl_xor_sync(0xffffffffu, s.S, off),
          __shfl_xor_sync(0xffffffffu, s.ss, off)};
}
template <typename A>
__device__ __forceinline__ DStats<A> shfl_stats(const DStats<A>& s, int off) {
  return {__shfl_xor_sync(0xffffffffu, s.m, off), __shfl_xor_sync(0xffffffffu, s.S, off),
          __shfl_xor_sync(0xffffffffu, s.ss, off)};
}

/// Online update with one element (float / double; the rescaling exp(m_old - m_new) FP64).
template <typename T>
__device__ __forceinline__ void add_elem(DStats<acc_t<T>>& st, acc_t<T> s) {
  const acc_t<T> mn = max_nan(st.m, s);
  if (!(mn == st.m)) st.S = __dmul_rn(st.S, exp(__dsub_rn(static_cast<double>(st.m), static_cast<double>(mn))));
  st.m = mn;
  if (s != acc_t<T>(-INFINITY)) st.S = __dadd_rn(st.S, exp(__dsub_rn(static_cast<double>(s), static_cast<double>(mn))));
  st.ss = __dadd_rn(st.ss, static_cast<double>(s));
}

/// One unit into the thread's statistics. yy: the target's index when it lies in [0, V),
/// else a sentinel no unit covers; the owner of element yy stores s_y in *sm_sy.
template <typename T, bool CAP, bool SMOOTH, bool FULL>
__device__ __forceinline__ void stats_unit(Stats<T>& st, const Unit<T>& ux, int lo, int V, int yy, acc_t<T> cf,
                                           acc_t<T>* sm_sy) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  if constexpr (kFast<T>) {
    float sv[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      sv[j] = (FULL || (lo + j >= 0 && lo + j < V)) ? capped<T, CAP>(unit_acc(ux, j), cf) : -INFINITY;
    if (static_cast<unsigned>(yy - lo) < static_cast<unsigned>(VEC)) {
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        if (lo + j == yy) *sm_sy = sv[j];
    }
    if constexpr (SMOOTH) {
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        if (FULL || (lo + j >= 0 && lo + j < V)) st.ss = __fadd_rn(st.ss, sv[j]);  // -inf included (+inf loss)
    }
    float um = sv[0];
#pragma unroll
    for (int j = 1; j < VEC; ++j) um = fmaxf(um, sv[j]);
    const float mn = fmaxf(st.m, um);
    if (mn > st.m) {  // rare: the running max grows (from -inf: S is 0 or NaN, times 0)
      st.S = __fmul_rn(st.S, expf(__fsub_rn(st.m, mn)));
      st.m = mn;
    }
    const float base = st.m == -INFINITY ? 0.0f : st.m;
#pragma unroll
    for (int j = 0; j < VEC; ++j) st.S = __fadd_rn(st.S, exp_term_fast<true>(__fsub_rn(sv[j], base)));
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int i = lo + j;
      if (!FULL && (i < 0 || i >= V)) continue;
      const A s = capped<T, CAP>(unit_acc(ux, j), cf);
      add_elem<T>(st, s);
      if (i == yy) *sm_sy = s;  // a single writer: the owner of element y
    }
  }
}

/// The tree that combines the threads' statistics: the production butterflies (offsets 16,
/// 8, ..., 1, within each warp and then over the 32 warps), or the same butterflies in
/// ascending order (1, 2, ..., 16): another tree, so other roundings of S. `ascending` is the
/// fused kernel's mutant only (cross_entropy_mutants.cuh: the fused entry is no longer
/// bitwise forward + backward); the production launches never instantiate it.
enum class Tree { production, ascending };

/// One shuffle-xor butterfly over the warp's lanes: every lane ends with the same bits (the
/// combine rule is commutative bit for bit, and lanes i and i ^ off combine the same pair).
template <Tree TREE, typename St>
__device__ __forceinline__ St butterfly(St st) {
  if constexpr (TREE == Tree::production) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) st = combine(st, shfl_stats(st, off));
  } else {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) st = combine(st, shfl_stats(st, off));
  }
  return st;
}

/// Statistics of one row, as every thread of the block sees them (the same bits).
template <typename A>
struct RowStats {
  A m;       ///< max_j s_j (bf16 / fp16: NaN logits skipped, they make S NaN)
  double S;  ///< sum_j exp(s_j - m) (bf16 / fp16: the FP32 value, widened)
  A sum_s;   ///< sum_j s_j (smoothing only)
  A sy;      ///< s_y; NaN when y is not in the row
};

/// Block-wide statistics of one row. y: the target, or -1 for none.
/// NB: units per thread in flight (the result does not depend on it: units are added one
/// by one in the thread's order).
/// keep: the units u < keep_units are also stored in keep[u] (shared memory, the calling
/// thread's own slots: it alone writes and later reads them); keep_units 0: nothing kept.
template <typename T, bool CAP, bool SMOOTH, int NB, Tree TREE = Tree::production>
__device__ RowStats<acc_t<T>> row_stats(const T* xr, int V, std::int64_t y, acc_t<T> cf, uint4* keep = nullptr,
                                        int keep_units = 0) {
  using A = acc_t<T>;
  using St = Stats<T>;
  constexpr int VEC = kVec<T>;
  __shared__ St sm_st[32];
  __shared__ A sm_sy;
  if (threadIdx.x == 0) sm_sy = A(NAN);
  __syncthreads();
  const int shift = grid_shift(xr);
  const int nunits = (V + shift + VEC - 1) / VEC;
  const int yy = (y >= 0 && y < V) ? static_cast<int>(y) : INT_MIN / 2;
  St st;
  st.m = A(-INFINITY);
  st.S = 0;
  st.ss = 0;
  for (int u0 = threadIdx.x; u0 < nunits; u0 += NB * kThreads) {
    Unit<T> ux[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const int u = u0 + b * kThreads, lo = u * VEC - shift;
      if (u < nunits) ux[b] = load_unit(xr, lo, V, unit_is_full<T>(lo, V));
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const int u = u0 + b * kThreads;
      if (u < nunits && u < keep_units) keep[u] = make_uint4(ux[b].w[0], ux[b].w[1], ux[b].w[2], ux[b].w[3]);
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const int u = u0 + b * kThreads, lo = u * VEC - shift;
      if (u < nunits) {
        if (unit_is_full<T>(lo, V)) stats_unit<T, CAP, SMOOTH, true>(st, ux[b], lo, V, yy, cf, &sm_sy);
        else stats_unit<T, CAP, SMOOTH, false>(st, ux[b], lo, V, yy, cf, &sm_sy);
      }
    }
  }
  st = butterfly<TREE>(st);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sm_st[warp] = st;
  __syncthreads();
  const St w = butterfly<TREE>(sm_st[lane]);  // kThreads / 32 == 32 warps: every lane holds one
  RowStats<A> r;
  r.m = w.m;
  r.S = static_cast<double>(w.S);
  r.sum_s = static_cast<A>(w.ss);
  r.sy = sm_sy;
  __syncthreads();  // sm_st, sm_sy free for the next row
  return r;
}
static_assert(kThreads == 32 * 32, "row_stats's second butterfly covers exactly 32 warps");

/// log S in FP64 rounded once to acc. S = 0 only when every logit of the row is -inf
/// (otherwise the max term contributes 1): then NaN, as the golden's exp(-inf - (-inf)).
template <typename A>
__device__ __forceinline__ A log_sum(double S) { return S == 0.0 ? A(NAN) : to_a<A>(log(S)); }

/// lse and ce of a row (the reference's acc operations).
template <typename A>
struct RowLoss {
  A lS, L, ce;
};
template <typename A>
__device__ __forceinline__ RowLoss<A> row_loss(const RowStats<A>& st, bool kept, const Coef<A>& k) {
  RowLoss<A> o;
  o.lS = log_sum<A>(st.S);
  o.L = add_rn(st.m, o.lS);
  o.ce = A(0);
  if (kept) {
    const A a = sub_rn(st.m, st.sy);  // NaN for an invalid target (sy stays NaN)
    if (k.ef > A(0)) {
      const A sm = sub_rn(st.m, div_rn(st.sum_s, k.Vf));
      o.ce = add_rn(add_rn(o.lS, mul_rn(sub_rn(A(1), k.ef), a)), mul_rn(k.ef, sm));
    } else {
      o.ce = add_rn(o.lS, a);
    }
    if (k.zf > A(0)) o.ce = add_rn(o.ce, mul_rn(k.zf, mul_rn(o.L, o.L)));
  }
  return o;
}

/// Writes lse and the token's ce (loss for none, else the workspace) from thread 0.
template <typename T>
__device__ __forceinline__ void write_row_loss(const RowLoss<acc_t<T>>& o, std::int64_t r, std::int64_t t,
                                               const Coef<acc_t<T>>& k, T* loss, T* lse_out, acc_t<T>* ws_ce) {
  lse_out[t] = from_acc<T>(o.L);
  if (k.reduction == 0) loss[t] = from_acc<T>(o.ce);
  else ws_ce[r] = o.ce;
}

/// Asks L2 for the first `max_bytes` of a row (its 16-byte-aligned interior: never a byte
/// outside the row), in bulk prefetches of at most 64 KiB issued by the calling thread
/// (Hopper's cp.async.bulk.prefetch.L2; nothing on older GPUs). A hint: no result, no effect
/// on any value computed.
template <typename T>
__device__ __forceinline__ void prefetch_row(const T* row, int V, long long max_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto a = static_cast<std::uintptr_t>(__cvta_generic_to_global(row));
  const std::uintptr_t lo = (a + 15u) & ~std::uintptr_t{15u};
  std::uintptr_t hi = (a + static_cast<std::uintptr_t>(V) * sizeof(T)) & ~std::uintptr_t{15u};
  if (max_bytes <= 0 || hi <= lo) return;
  if (hi - lo > static_cast<std::uintptr_t>(max_bytes)) hi = lo + (static_cast<std::uintptr_t>(max_bytes) & ~std::uintptr_t{15u});
  for (std::uintptr_t p = lo; p < hi; p += 65536u) {
    const std::uint32_t n = static_cast<std::uint32_t>(hi - p < 65536u ? hi - p : 65536u);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
  }
#else
  (void)row, (void)V, (void)max_bytes;
#endif
}

/// Forward: rows r = blockIdx.x, blockIdx.x + gridDim.x, ...
template <typename T, bool CAP, bool SMOOTH, int NB>
__global__ void __launch_bounds__(kThreads, 1)
    forward_rows(const T* __restrict__ logits, const unsigned char* __restrict__ targets, T* __restrict__ loss,
                 T* __restrict__ lse_out, acc_t<T>* __restrict__ ws_ce, std::int64_t tokens, int V,
                 std::int64_t row_offset, Coef<acc_t<T>> k) {
  using A = acc_t<T>;
  for (std::int64_t r = blockIdx.x; r < tokens; r += gridDim.x) {
    const std::int64_t t = row_offset + r;
    const T* xr = logits + r * static_cast<std::int64_t>(V);
    const std::int64_t y = load_target(targets, t);
    const bool kept = y != k.ignore;
    const RowStats<A> st = row_stats<T, CAP, SMOOTH, NB>(xr, V, kept ? y : -1, k.cf);
    if (threadIdx.x == 0) write_row_loss<T>(row_loss(st, kept, k), r, t, k, loss, lse_out, ws_ce);
  }
}

/// Number of targets != ignore in [0, n) (single block).
__global__ void __launch_bounds__(kSmallThreads)
    count_kept(const unsigned char* __restrict__ targets, std::int64_t n, long long ignore, long long* out) {
  __shared__ long long sm[1][32];
  long long v[1] = {0};
  for (std::int64_t t = threadIdx.x; t < n; t += kSmallThreads) v[0] += load_target(targets, t) != ignore;
  block_sum<1>(v, sm);
  if (threadIdx.x == 0) *out = v[0];
}

/// loss = sum of the launched rows' ce (fixed order), / n for mean (n = 0: 0). Single block.
template <typename T>
__global__ void __launch_bounds__(kSmallThreads)
    reduce_loss(const acc_t<T>* __restrict__ ws_ce, std::int64_t tokens, const long long* __restrict__ count,
                int reduction, T* __restrict__ loss) {
  using A = acc_t<T>;
  __shared__ A sm[1][32];
  A v[1] = {A(0)};
  for (std::int64_t r = threadIdx.x; r < tokens; r += kSmallThreads) v[0] = add_rn(v[0], ws_ce[r]);
  block_sum<1>(v, sm);
  if (threadIdx.x != 0) return;
  A total = v[0];
  if (reduction == 1) {
    const long long n = *count;
    total = n > 0 ? div_rn(total, static_cast<A>(n)) : A(0);
  }
  loss[0] = from_acc<T>(total);
}

/// Stores a unit of dlogits: one streaming 16-byte store when legal (dlogits is not read
/// again: keep L2 for the rows of logits in flight), else element by element.
template <typename T>
__device__ __forceinline__ void store_grad(T* row, int lo, int n, bool vector_ok, const Unit<T>& u) {
  if (vector_ok) __stcs(reinterpret_cast<uint4*>(row + lo), make_uint4(u.w[0], u.w[1], u.w[2], u.w[3]));
  else store_unit(row, lo, n, false, u);
}

/// Bytes of its next row a backward / fused block prefetches into L2 when its gradient sweep
/// starts (measured at vocab 151,936 bf16: the whole row overflows L2 with 132 rows in flight
/// and is slower; 96 KiB and none are within 1%).
constexpr long long kBwdPrefetchBytes = 96 << 10;

/// load_unit for the row's last read (ld.global.cs when one 16-byte load).
template <typename T>
__device__ __forceinline__ Unit<T> load_last(const T* row, int lo, int n, bool vector_ok) {
  if (!vector_ok) return load_unit(row, lo, n, false);
  const uint4 q = __ldcs(reinterpret_cast<const uint4*>(row + lo));
  return Unit<T>{{q.x, q.y, q.z, q.w}};
}

/// Backward (FUSED false) or fused forward + backward (FUSED true): rows r = blockIdx.x,
/// blockIdx.x + gridDim.x, ...; the result of a row does not depend on the grid size.
/// Thread 0 prefetches the first pf_bytes of the block's next row into L2 when the gradient
/// sweep starts (the gradient sweep reads L2 and writes DRAM; meanwhile DRAM reads ahead).
/// The gradient sweep first reads the units u >= keep_units by loads marked as the row's
/// last use (ld.global.cs: evicted first; L2 hits, the statistics sweep loaded them last),
/// then the units u < keep_units from shared memory (the statistics sweep stored them there).
/// TREE: the statistics' combining tree (Tree::ascending: the fused kernel's mutant only).
template <typename T, bool CAP, bool SMOOTH, bool FUSED, int NBS, int NB, Tree TREE = Tree::production>
__global__ void __launch_bounds__(kThreads, 1)
    backward_rows(const T* __restrict__ logits, const unsigned char* __restrict__ targets, const T* __restrict__ dloss,
                  T* __restrict__ dlogits, const long long* __restrict__ count, std::int64_t tokens, int V,
                  std::int64_t row_offset, Coef<acc_t<T>> k, T* __restrict__ loss, T* __restrict__ lse_out,
                  acc_t<T>* __restrict__ ws_ce, long long pf_bytes, int keep_units) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  extern __shared__ uint4 keep[];  // keep_units units of the row (launch_rows sizes it)
  for (std::int64_t r = blockIdx.x; r < tokens; r += gridDim.x) {
    const std::int64_t t = row_offset + r;
    const T* xr = logits + r * static_cast<std::int64_t>(V);
    if (threadIdx.x == 0 && r == blockIdx.x) prefetch_row(xr, V, pf_bytes);
    T* dr = dlogits + r * static_cast<std::int64_t>(V);
    const std::int64_t y = load_target(targets, t);
    const int shift = grid_shift(xr);
    const int nunits = (V + shift + VEC - 1) / VEC;
    const bool dx_al = grid_is_aligned(static_cast<const T*>(dr), shift);  // same 16-byte grid as this row of logits
    A g = to_acc(k.reduction == 0 ? dloss[t] : dloss[0]);
    const bool kept = y != k.ignore;
    bool zero = !kept;
    if (k.reduction == 1) {
      const long long n = *count;
      if (n == 0) zero = true;
      else g = div_rn(g, static_cast<A>(n));
    }
    RowStats<A> st{};
    if (FUSED || !zero) {
      st = row_stats<T, CAP, SMOOTH, NBS, TREE>(xr, V, kept ? y : -1, k.cf, keep, keep_units);
      if constexpr (FUSED)
        if (threadIdx.x == 0) write_row_loss<T>(row_loss(st, kept, k), r, t, k, loss, lse_out, ws_ce);
    }
    if (threadIdx.x == 0 && r + gridDim.x < tokens)
      prefetch_row(xr + gridDim.x * static_cast<std::int64_t>(V), V, pf_bytes);
    if (zero) {  // ignored token (or mean over no kept token): exact zeros, logits not read for them
      A z[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) z[j] = A(0);
      const Unit<T> uz = pack_from_acc<T>(z);
      for (int u = threadIdx.x; u < nunits; u += kThreads) {
        const int lo = u * VEC - shift;
        store_grad(dr, lo, V, unit_is_full<T>(lo, V) && dx_al, uz);
      }
      continue;  // block-uniform
    }
    const A lS = log_sum<A>(st.S);
    const A L = add_rn(st.m, lS);
    const A zfac = k.zf > A(0) ? add_rn(A(1), mul_rn(mul_rn(A(2), k.zf), L)) : A(1);  // exactly 1 without z-loss
    const A one_m_eps = sub_rn(A(1), k.ef), eps_v = div_rn(k.ef, k.Vf);
    // bf16 / fp16: p = e * RN_fp32(1/S), two roundings; float, double: e / S in FP64, one rounding.
    const float inv_S = __double2float_rn(1.0 / st.S);
    const bool valid = y >= 0 && y < V;
    const int yy = valid ? static_cast<int>(y) : INT_MIN / 2;
    const A gv = valid ? g : A(NAN);  // an unvalidated bad target: NaN, never an out-of-bounds read
    const A m = st.m;
    const double S = st.S;
    // First the units read again from L2 (u >= n_kept: the statistics sweep loaded them last,
    // so they are the likeliest still there), then the kept ones from shared memory. Each
    // dlogit depends on its own logit and the row's statistics only: the order changes no value.
    const int n_kept = nunits < keep_units ? nunits : keep_units;
    int tail0 = static_cast<int>(threadIdx.x);
    if (tail0 < n_kept) tail0 += ((n_kept - tail0 + kThreads - 1) / kThreads) * kThreads;
#pragma unroll 1
    for (int part = 0; part < 2; ++part) {
      const bool from_smem = part == 1;
      const int uend = from_smem ? n_kept : nunits;
      for (int u0 = from_smem ? static_cast<int>(threadIdx.x) : tail0; u0 < uend; u0 += NB * kThreads) {
        Unit<T> ux[NB];
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          const int u = u0 + b * kThreads, lo = u * VEC - shift;
          if (u >= uend) continue;
          if (from_smem) {
            const uint4 q = keep[u];
            ux[b] = Unit<T>{{q.x, q.y, q.z, q.w}};
          } else {
            ux[b] = load_last(xr, lo, V, unit_is_full<T>(lo, V));
          }
        }
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          const int u = u0 + b * kThreads, lo = u * VEC - shift;
          if (u >= uend) continue;
          A d[VEC];
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const A s = capped<T, CAP>(unit_acc(ux[b], j), k.cf);
            A p;
            if constexpr (kFast<T>) {
              p = __fmul_rn(exp_term_fast<false>(__fsub_rn(s, m)), inv_S);  // subnormal p kept
            } else {
              const double e = s == A(-INFINITY) ? 0.0 : exp(__dsub_rn(static_cast<double>(s), static_cast<double>(m)));
              p = to_a<A>(__ddiv_rn(e, S));
            }
            d[j] = mul_rn(p, zfac);
          }
          if (static_cast<unsigned>(yy - lo) < static_cast<unsigned>(VEC)) {
#pragma unroll
            for (int j = 0; j < VEC; ++j)
              if (lo + j == yy) d[j] = sub_rn(d[j], one_m_eps);
          }
          A out[VEC];
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            A dj = d[j];
            if constexpr (SMOOTH) dj = sub_rn(dj, eps_v);
            if constexpr (CAP) {
              const A th = tanh_acc<T>(div_rn(unit_acc(ux[b], j), k.cf));
              dj = mul_rn(dj, sub_rn(A(1), mul_rn(th, th)));
            }
            out[j] = mul_rn(gv, dj);
          }
          store_grad(dr, lo, V, unit_is_full<T>(lo, V) && dx_al, pack_from_acc<T>(out));
        }
      }
    }
  }
}

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

bool check(std::int64_t tokens, std::int64_t vocab, const Params& p, std::int64_t row_offset, std::int64_t total) {
  return tokens >= 0 && tokens <= INT_MAX && vocab >= 1 && vocab <= (std::int64_t{1} << 30) && row_offset >= 0 &&
         total >= row_offset + tokens && (p.reduction == 0 || p.reduction == 1 || p.reduction == 2) &&
         p.label_smoothing >= 0 && p.label_smoothing <= 1 && p.z_loss >= 0 && p.softcap >= 0;
}

template <typename A>
Coef<A> coef_of(const Params& p, std::int64_t vocab) {
  return {static_cast<A>(p.softcap), static_cast<A>(p.label_smoothing), static_cast<A>(p.z_loss),
          static_cast<A>(vocab), static_cast<long long>(p.ignore_index), p.reduction};
}

// Workspace layout, from the workspace pointer rounded up to 16 bytes (the caller's
// pointer need only be byte-aligned: the misaligned replay shifts it by one element):
// [0, 8) the count (long long); [16, 16 + 8 tokens) per-token ce in acc (FP32, or FP64
// for double: 8 bytes are reserved per token either way).
constexpr std::size_t kCeOffset = 16;
constexpr std::size_t kSlack = 15;  // for the rounding up

std::size_t needed(std::int64_t tokens) {
  return kCeOffset + static_cast<std::size_t>(tokens < 0 ? 0 : tokens) * sizeof(double);
}

/// The 16-byte-aligned workspace inside [workspace, workspace + bytes), or null when it
/// does not hold needed(tokens) bytes.
unsigned char* aligned_workspace(void* workspace, std::size_t bytes, std::int64_t tokens) {
  if (!workspace) return nullptr;
  const auto a = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t pad = ((a + 15u) & ~static_cast<std::uintptr_t>(15u)) - a;
  if (bytes < pad + needed(tokens)) return nullptr;
  return static_cast<unsigned char*>(workspace) + pad;
}

/// Calls f(std::bool_constant<CAP>, std::bool_constant<SMOOTH>) for the case's flags.
template <typename F>
cudaError_t by_flags(const Params& p, F&& f) {
  const bool cap = p.softcap > 0, smooth = p.label_smoothing > 0;
  if (cap) {
    if (smooth) return f(std::true_type{}, std::true_type{});
    return f(std::true_type{}, std::false_type{});
  }
  if (smooth) return f(std::false_type{}, std::true_type{});
  return f(std::false_type{}, std::false_type{});
}

/// Number of SMs of the current device.
cudaError_t sm_count(int* sms) {
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  return cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
}

/// Grid of the row kernels: `per_sm` blocks per SM (a whole number per SM, so every SM
/// gets the same share of rows), at most one per row.
std::int64_t row_grid(int sms, int per_sm, std::int64_t tokens) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(static_cast<std::int64_t>(sms) * per_sm, tokens));
}

}  // namespace

namespace {
/// The units of a row of V elements kept in shared memory (its units at the largest 16-byte
/// phase, at most kKeepSmem / 16).
template <typename T>
int keep_units_for(int V) {
  constexpr std::int64_t VEC = kVec<T>;
  const std::int64_t units = (static_cast<std::int64_t>(V) + 2 * (VEC - 1)) / VEC;
  return static_cast<int>(std::min<std::int64_t>(units, static_cast<std::int64_t>(kKeepSmem / sizeof(uint4))));
}

/// Launches backward_rows (FUSED: the fused kernel; TREE: see Tree) with keep_units_for(V)
/// units of shared memory per block (fewer when the device's opt-in limit is lower). Errors
/// of the attribute queries and of cudaFuncSetAttribute are returned (and cleared).
template <typename T, bool CAP, bool SMOOTH, bool FUSED, Tree TREE = Tree::production>
cudaError_t launch_rows(std::int64_t grid, cudaStream_t stream, const T* logits, const unsigned char* tg,
                        const T* dloss, T* dlogits, const long long* count, std::int64_t tokens, int V,
                        std::int64_t row_offset, const Coef<acc_t<T>>& k, T* loss, T* lse, acc_t<T>* ws_ce) {
  const auto kernel = backward_rows<T, CAP, SMOOTH, FUSED, kBatch<T>, kGradBatch<T>, TREE>;
  // A failed query or setting is returned, and cleared so that a later call's
  // cudaGetLastError() does not report it again.
  auto fail = [](cudaError_t e) {
    (void)cudaGetLastError();
    return e;
  };
  int dev = 0, optin = 0;
  cudaFuncAttributes fa{};
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return fail(e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
      e != cudaSuccess)
    return fail(e);
  if (const cudaError_t e = cudaFuncGetAttributes(&fa, kernel); e != cudaSuccess) return fail(e);
  // The kernel's limit is set to the same value on every call, whatever V (calls from other
  // host threads with another V cannot lower it under a launch); a device with less opt-in
  // shared memory keeps less of the row (the results do not depend on it).
  const int max_units = static_cast<int>(
      std::min<std::int64_t>(static_cast<std::int64_t>(kKeepSmem / sizeof(uint4)),
                             std::max<std::int64_t>(0, (optin - static_cast<std::int64_t>(fa.sharedSizeBytes)) /
                                                           static_cast<std::int64_t>(sizeof(uint4)))));
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 max_units * static_cast<int>(sizeof(uint4)));
      e != cudaSuccess)
    return fail(e);
  const int keep_units = std::min(keep_units_for<T>(V), max_units);
  const std::size_t smem = static_cast<std::size_t>(keep_units) * sizeof(uint4);
  kernel<<<dim3(static_cast<unsigned>(grid)), dim3(kThreads), smem, stream>>>(
      logits, tg, dloss, dlogits, count, tokens, V, row_offset, k, loss, lse, ws_ce, kBwdPrefetchBytes, keep_units);
  return cudaSuccess;
}
}  // namespace

std::size_t workspace_bytes(std::int64_t tokens) { return kSlack + needed(tokens); }

template <typename T>
cudaError_t forward(const T* logits, const std::int64_t* targets, T* loss, T* lse, std::int64_t tokens,
                    std::int64_t vocab, const Params& p, std::int64_t row_offset, std::int64_t total_tokens,
                    void* workspace, std::size_t ws_bytes, cudaStream_t stream) {
  if (!check(tokens, vocab, p, row_offset, total_tokens)) return cudaErrorInvalidValue;
  if (tokens == 0 && p.reduction == 0) return cudaSuccess;
  unsigned char* ws = aligned_workspace(workspace, ws_bytes, tokens);
  if (!logits || !targets || !loss || !lse || !ws) return cudaErrorInvalidValue;
  for (const void* q : {static_cast<const void*>(logits), static_cast<const void*>(loss), static_cast<const void*>(lse)})
    if (!aligned(q, sizeof(T))) return cudaErrorInvalidValue;
  const Coef<acc_t<T>> k = coef_of<acc_t<T>>(p, vocab);
  const auto* tg = reinterpret_cast<const unsigned char*>(targets);
  auto* count = reinterpret_cast<long long*>(ws);
  auto* ws_ce = reinterpret_cast<acc_t<T>*>(ws + kCeOffset);
  int sms = 0;
  if (const cudaError_t e = sm_count(&sms); e != cudaSuccess) return e;
  if (p.reduction == 1) count_kept<<<1, kSmallThreads, 0, stream>>>(tg, total_tokens, k.ignore, count);
  if (tokens > 0) {
    const std::int64_t grid = row_grid(sms, 1, tokens);
    by_flags(p, [&](auto cap, auto smooth) {
      constexpr bool C = decltype(cap)::value, M = decltype(smooth)::value;
      forward_rows<T, C, M, kBatch<T>><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
          logits, tg, loss, lse, ws_ce, tokens, static_cast<int>(vocab), row_offset, k);
      return cudaSuccess;
    });
  }
  if (p.reduction != 0) reduce_loss<T><<<1, kSmallThreads, 0, stream>>>(ws_ce, tokens, count, p.reduction, loss);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward(const T* logits, const std::int64_t* targets, const T* dloss, T* dlogits, std::int64_t tokens,
                     std::int64_t vocab, const Params& p, std::int64_t row_offset, std::int64_t total_tokens,
                     void* workspace, std::size_t ws_bytes, cudaStream_t stream) {
  if (!check(tokens, vocab, p, row_offset, total_tokens)) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  unsigned char* ws = aligned_workspace(workspace, ws_bytes, 0);
  if (!logits || !targets || !dloss || !dlogits || !ws) return cudaErrorInvalidValue;
  for (const void* q :
       {static_cast<const void*>(logits), static_cast<const void*>(dloss), static_cast<const void*>(dlogits)})
    if (!aligned(q, sizeof(T))) return cudaErrorInvalidValue;
  const Coef<acc_t<T>> k = coef_of<acc_t<T>>(p, vocab);
  const auto* tg = reinterpret_cast<const unsigned char*>(targets);
  auto* count = reinterpret_cast<long long*>(ws);
  int sms = 0;
  if (const cudaError_t e = sm_count(&sms); e != cudaSuccess) return e;
  if (p.reduction == 1) count_kept<<<1, kSmallThreads, 0, stream>>>(tg, total_tokens, k.ignore, count);
  const std::int64_t grid = row_grid(sms, 1, tokens);
  const cudaError_t e = by_flags(p, [&](auto cap, auto smooth) {
    return launch_rows<T, decltype(cap)::value, decltype(smooth)::value, false>(
        grid, stream, logits, tg, dloss, dlogits, count, tokens, static_cast<int>(vocab), row_offset, k, nullptr,
        nullptr, nullptr);
  });
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

namespace {
/// forward_backward with the statistics' combining tree TREE (Tree::ascending: the mutant).
template <typename T, Tree TREE>
cudaError_t fused_entry(const T* logits, const std::int64_t* targets, const T* dloss, T* loss, T* lse, T* dlogits,
                        std::int64_t tokens, std::int64_t vocab, const Params& p, std::int64_t row_offset,
                        std::int64_t total_tokens, void* workspace, std::size_t ws_bytes, cudaStream_t stream) {
  if (!check(tokens, vocab, p, row_offset, total_tokens)) return cudaErrorInvalidValue;
  if (tokens == 0 && p.reduction == 0) return cudaSuccess;
  unsigned char* ws = aligned_workspace(workspace, ws_bytes, tokens);
  if (!logits || !targets || !dloss || !loss || !lse || !dlogits || !ws) return cudaErrorInvalidValue;
  for (const void* q : {static_cast<const void*>(logits), static_cast<const void*>(dloss),
                        static_cast<const void*>(loss), static_cast<const void*>(lse),
                        static_cast<const void*>(dlogits)})
    if (!aligned(q, sizeof(T))) return cudaErrorInvalidValue;
  const Coef<acc_t<T>> k = coef_of<acc_t<T>>(p, vocab);
  const auto* tg = reinterpret_cast<const unsigned char*>(targets);
  auto* count = reinterpret_cast<long long*>(ws);
  auto* ws_ce = reinterpret_cast<acc_t<T>*>(ws + kCeOffset);
  int sms = 0;
  if (const cudaError_t e = sm_count(&sms); e != cudaSuccess) return e;
  if (p.reduction == 1) count_kept<<<1, kSmallThreads, 0, stream>>>(tg, total_tokens, k.ignore, count);
  if (tokens > 0) {
    const std::int64_t grid = row_grid(sms, 1, tokens);
    const cudaError_t e = by_flags(p, [&](auto cap, auto smooth) {
      return launch_rows<T, decltype(cap)::value, decltype(smooth)::value, true, TREE>(
          grid, stream, logits, tg, dloss, dlogits, count, tokens, static_cast<int>(vocab), row_offset, k, loss, lse,
          ws_ce);
    });
    if (e != cudaSuccess) return e;
  }
  if (p.reduction != 0) reduce_loss<T><<<1, kSmallThreads, 0, stream>>>(ws_ce, tokens, count, p.reduction, loss);
  return cudaGetLastError();
}
}  // namespace

template <typename T>
cudaError_t forward_backward(const T* logits, const std::int64_t* targets, const T* dloss, T* loss, T* lse,
                             T* dlogits, std::int64_t tokens, std::int64_t vocab, const Params& p,
                             std::int64_t row_offset, std::int64_t total_tokens, void* workspace,
                             std::size_t ws_bytes, cudaStream_t stream) {
  return fused_entry<T, Tree::production>(logits, targets, dloss, loss, lse, dlogits, tokens, vocab, p, row_offset,
                                          total_tokens, workspace, ws_bytes, stream);
}

namespace mutant {
const char* name(Fused m) {
  switch (m) {
    case Fused::none: return "none";
    case Fused::butterfly_ascending: return "butterfly_ascending";
  }
  return "?";
}

template <typename T>
cudaError_t forward_backward(Fused m, const T* logits, const std::int64_t* targets, const T* dloss, T* loss, T* lse,
                             T* dlogits, std::int64_t tokens, std::int64_t vocab, const Params& p,
                             std::int64_t row_offset, std::int64_t total_tokens, void* workspace,
                             std::size_t ws_bytes, cudaStream_t stream) {
  if (m == Fused::butterfly_ascending)
    return fused_entry<T, Tree::ascending>(logits, targets, dloss, loss, lse, dlogits, tokens, vocab, p, row_offset,
                                           total_tokens, workspace, ws_bytes, stream);
  return fused_entry<T, Tree::production>(logits, targets, dloss, loss, lse, dlogits, tokens, vocab, p, row_offset,
                                          total_tokens, workspace, ws_bytes, stream);
}
template cudaError_t forward_backward<__half>(Fused, const __half*, const std::int64_t*, const __half*, __half*,
                                              __half*, __half*, std::int64_t, std::int64_t, const Params&,
                                              std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);
template cudaError_t forward_backward<__nv_bfloat16>(Fused, const __nv_bfloat16*, const std::int64_t*,
                                                     const __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                     __nv_bfloat16*, std::int64_t, std::int64_t, const Params&,
                                                     std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);
}  // namespace mutant

#define NUMGATE_CE_INSTANTIATE(T)                                                                                 \
  template cudaError_t forward<T>(const T*, const std::int64_t*, T*, T*, std::int64_t, std::int64_t, const Params&, \
                                  std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);                  \
  template cudaError_t backward<T>(const T*, const std::int64_t*, const T*, T*, std::int64_t, std::int64_t,        \
                                   const Params&, std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);   \
  template cudaError_t forward_backward<T>(const T*, const std::int64_t*, const T*, T*, T*, T*, std::int64_t,     \
                                           std::int64_t, const Params&, std::int64_t, std::int64_t, void*,        \
                                           std::size_t, cudaStream_t);
NUMGATE_CE_INSTANTIATE(float)
NUMGATE_CE_INSTANTIATE(double)
NUMGATE_CE_INSTANTIATE(__half)
NUMGATE_CE_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_CE_INSTANTIATE

}  // namespace numgate::cross_entropy
