/*
Cross-entropy forward and backward kernels (the numgate target kernels for cross_entropy).
The op and the numerics contract are in cross_entropy.cuh and cross_entropy_oracle.h.

Design.

  Blocks of 512 threads (backward: 1024), one token (row) per block at a time. The row of
  logits is viewed on the virtual 16-byte grid of common/cuda_utils.cuh (shift = (p % 16) /
  sizeof(T));
  thread t owns units t, t + 512, ... (fp32 4, bf16/fp16 8, double 2 elements per unit) and
  loads them four at a time before using them (memory-level parallelism).

  row statistics (forward, and again in the backward): ONE sweep over the row. Per thread
  an online (m, S): m the NaN-propagating max of s_j in acc, S = sum exp(s_j - m) in FP64,
  rescaled by exp(m_old - m_new) (FP64) when the max grows; -inf logits add nothing (so a
  row of -inf but one finite logit has S = 1 exactly); sum_j s_j in FP64; the thread that
  owns element y keeps s_y. For bf16 / fp16 logits the update is unit-wise: the unit's
  max, one rescale, the unit's 8 terms expf(s - m) and its 8 values s summed in FP32,
  each unit total added to the FP64 accumulators. Threads are combined by a shuffle-xor
  butterfly and then over the warps, with a combine rule that is commutative bit for bit (max_nan, and
  a.S e_a + b.S e_b with explicit _rn operations), so the tree depends on blockDim only.
  The exponential of a term is FP32 expf for bf16 / fp16 logits and FP64 exp otherwise
  (cross_entropy.cuh says why).

  forward (grid = tokens): thread 0 forms lse and ce (acc, the reference's operations) and
    writes lse and, for none, loss; for mean / sum it writes ce into the workspace and a
    single-block kernel sums the launched rows in a fixed order, divided by n (mean; count
    kernel over targets[0, total_tokens); n = 0 gives 0).
  backward (grid = the rows 3/4 of L2 holds, at least one block per SM, looping over the
    rows): the statistics sweep, then a second sweep writing dlogits; with that many rows in flight the second read is
    an L2 hit, so DRAM sees the logits once. Ignored tokens, and mean with n = 0, write
    exact zeros without reading the logits.
*/

#include "cross_entropy/cross_entropy.cuh"

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

constexpr int kThreads = 512;
/// Backward block size: its grid is capped by L2 (about one row in flight per SM), so each
/// row gets more threads to keep the SM busy.
constexpr int kBwdThreads = 1024;
/// Units (16-byte loads) each thread has in flight in a sweep.
constexpr int kBatch = 4;

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

/// bf16 / fp16 logits: FP32 transcendentals (CUDA expf / tanhf, <= 2 FP32 ulp: 2^-13 of
/// the output's rounding). float: FP64 ones rounded once (the FP32 outputs' threshold is a
/// few FP32 ulps). double: FP64.
template <typename T>
inline constexpr bool kFp32Transcendentals = sizeof(T) == 2;

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

/// tanh of the acc quotient x / c (see kFp32Transcendentals): for float evaluated in FP64
/// and rounded once (like the reference's libm tanhf; CUDA's tanhf errs by up to 2 ulp,
/// which 1 - tanh^2 amplifies where the cap saturates).
template <typename T>
__device__ __forceinline__ acc_t<T> tanh_acc(acc_t<T> q) {
  if constexpr (std::is_same_v<T, double>) return tanh(q);
  else if constexpr (kFp32Transcendentals<T>) return tanhf(q);
  else return __double2float_rn(tanh(static_cast<double>(q)));
}

/// s = cf > 0 ? cf * tanh(x / cf) : x (acc, the reference's operations).
template <typename T>
__device__ __forceinline__ acc_t<T> capped(acc_t<T> x, acc_t<T> cf) {
  return cf > acc_t<T>(0) ? mul_rn(cf, tanh_acc<T>(div_rn(x, cf))) : x;
}

/// exp(s - m) as a double, for s > -inf and m >= s (the terms of S).
template <typename T>
__device__ __forceinline__ double exp_term(acc_t<T> s, acc_t<T> m) {
  if constexpr (kFp32Transcendentals<T>) return static_cast<double>(expf(__fsub_rn(s, m)));
  else return exp(__dsub_rn(static_cast<double>(s), static_cast<double>(m)));
}

template <typename A>
struct Stats {
  A m;           ///< max_j s_j (NaN-propagating; -inf when every s_j is -inf)
  double S;      ///< sum_j exp(s_j - m)
  double sum_s;  ///< sum_j s_j
};

/// Online update with one element (the rescaling exp(m_old - m_new), rare, always FP64).
template <typename T>
__device__ __forceinline__ void add_elem(Stats<acc_t<T>>& st, acc_t<T> s) {
  const acc_t<T> mn = max_nan(st.m, s);
  if (!(mn == st.m)) st.S = __dmul_rn(st.S, exp(__dsub_rn(static_cast<double>(st.m), static_cast<double>(mn))));
  st.m = mn;
  if (s != acc_t<T>(-INFINITY)) st.S = __dadd_rn(st.S, exp_term<T>(s, mn));
  st.sum_s = __dadd_rn(st.sum_s, static_cast<double>(s));
}

/// Commutative combine (bit for bit): used by the butterfly, where both lanes combine the
/// same pair in opposite order.
template <typename A>
__device__ __forceinline__ Stats<A> combine(const Stats<A>& a, const Stats<A>& b) {
  Stats<A> r;
  r.m = max_nan(a.m, b.m);
  if (r.m == A(-INFINITY)) {
    r.S = 0.0;
  } else {
    const double ea = a.m == A(-INFINITY) ? 0.0 : __dmul_rn(a.S, exp(__dsub_rn(static_cast<double>(a.m), static_cast<double>(r.m))));
    const double eb = b.m == A(-INFINITY) ? 0.0 : __dmul_rn(b.S, exp(__dsub_rn(static_cast<double>(b.m), static_cast<double>(r.m))));
    r.S = __dadd_rn(ea, eb);
  }
  r.sum_s = __dadd_rn(a.sum_s, b.sum_s);
  return r;
}

template <typename A>
__device__ __forceinline__ Stats<A> shfl_stats(const Stats<A>& s, int off) {
  Stats<A> o;
  o.m = __shfl_xor_sync(0xffffffffu, s.m, off);
  o.S = __shfl_xor_sync(0xffffffffu, s.S, off);
  o.sum_s = __shfl_xor_sync(0xffffffffu, s.sum_s, off);
  return o;
}

/// Calls f(lo, full, unit) for the thread's units t, t + NT, ... in order (NT = blockDim.x),
/// loading kBatch units before using any of them (kBatch 16-byte loads in flight per thread).
template <int NT, typename T, typename F>
__device__ __forceinline__ void for_each_unit(const T* xr, int V, int shift, int nunits, F&& f) {
  constexpr int VEC = kVec<T>;
  for (int u0 = threadIdx.x; u0 < nunits; u0 += kBatch * NT) {
    Unit<T> ux[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int u = u0 + b * NT, lo = u * VEC - shift;
      if (u < nunits) ux[b] = load_unit(xr, lo, V, unit_is_full<T>(lo, V));
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int u = u0 + b * NT, lo = u * VEC - shift;
      if (u < nunits) f(lo, unit_is_full<T>(lo, V), ux[b]);
    }
  }
}

/// Block-wide statistics of one row, and s_y (NaN when y is not in the row). Every thread
/// returns the same bits.
template <int NT, typename T>
__device__ Stats<acc_t<T>> row_stats(const T* xr, int V, std::int64_t y, acc_t<T> cf, acc_t<T>* sy_out) {
  using A = acc_t<T>;
  __shared__ A sm_m[32];
  __shared__ double sm_S[32], sm_ss[32];
  __shared__ A sm_sy;
  constexpr int VEC = kVec<T>;
  if (threadIdx.x == 0) sm_sy = A(NAN);
  __syncthreads();
  const int shift = grid_shift(xr);
  const int nunits = (V + shift + VEC - 1) / VEC;
  Stats<A> st{A(-INFINITY), 0.0, 0.0};
  if constexpr (kFp32Transcendentals<T>) {
    // Unit-wise online update (bf16 / fp16): the unit's max first, one FP64 rescale when
    // it raises the running max, then the unit's 8 terms expf(s - m) and its sum of s in
    // FP32 (sequential), each added to the FP64 accumulators once. NaN: fmaxf skips it,
    // so a NaN s is remembered and makes m NaN at the end (as the NaN-propagating max
    // would); its term is NaN and S is NaN either way.
    bool nan_seen = false;
    for_each_unit<NT>(xr, V, shift, nunits, [&](int lo, bool full, const Unit<T>& ux) {
      A sv[VEC];
      A um = A(-INFINITY);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const int i = lo + j;
        sv[j] = (full || (i >= 0 && i < V)) ? capped<T>(unit_acc(ux, j), cf) : A(-INFINITY);
        nan_seen |= isnan(sv[j]);
        um = fmaxf(um, sv[j]);
      }
      // a single writer: the owner of element y, if y is in the row (an invalid target
      // leaves s_y NaN; the out-of-row slots hold -inf)
      if (y >= lo && y < lo + VEC && y >= 0 && y < V) {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          if (lo + j == y) sm_sy = sv[j];
      }
      A ss = A(0);
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        if (full || (lo + j >= 0 && lo + j < V)) ss = __fadd_rn(ss, sv[j]);
      st.sum_s = __dadd_rn(st.sum_s, static_cast<double>(ss));  // -inf logits included (eps > 0: +inf loss)
      const A mn = fmaxf(st.m, um);
      if (mn == A(-INFINITY)) return;  // every s so far is -inf: no term for S, m unchanged
      if (mn > st.m && st.m != A(-INFINITY))
        st.S = __dmul_rn(st.S, exp(__dsub_rn(static_cast<double>(st.m), static_cast<double>(mn))));
      st.m = mn;
      A e = A(0);
#pragma unroll
      for (int j = 0; j < VEC; ++j) e = __fadd_rn(e, expf(__fsub_rn(sv[j], mn)));  // -inf gives 0
      st.S = __dadd_rn(st.S, static_cast<double>(e));
    });
    if (nan_seen) st.m = A(NAN);
  } else {
    for_each_unit<NT>(xr, V, shift, nunits, [&](int lo, bool, const Unit<T>& ux) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const int i = lo + j;
        if (i < 0 || i >= V) continue;
        const A s = capped<T>(unit_acc(ux, j), cf);
        add_elem<T>(st, s);
        if (i == y) sm_sy = s;  // a single writer: the owner of element y
      }
    });
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) st = combine(st, shfl_stats(st, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = NT / 32;
  if (lane == 0) {
    sm_m[warp] = st.m;
    sm_S[warp] = st.S;
    sm_ss[warp] = st.sum_s;
  }
  __syncthreads();
  Stats<A> w = lane < nwarps ? Stats<A>{sm_m[lane], sm_S[lane], sm_ss[lane]} : Stats<A>{A(-INFINITY), 0.0, 0.0};
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) w = combine(w, shfl_stats(w, off));
  *sy_out = sm_sy;
  __syncthreads();
  return w;
}

/// log S in FP64 rounded once to acc. S = 0 only when every logit of the row is -inf
/// (otherwise the max term contributes 1): then NaN, as the golden's exp(-inf - (-inf)).
template <typename A>
__device__ __forceinline__ A log_sum(double S) { return S == 0.0 ? A(NAN) : to_a<A>(log(S)); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_rows(const T* __restrict__ logits, const unsigned char* __restrict__ targets, T* __restrict__ loss,
                 T* __restrict__ lse_out, acc_t<T>* __restrict__ ws_ce, int V, std::int64_t row_offset,
                 Coef<acc_t<T>> k) {
  using A = acc_t<T>;
  const std::int64_t r = blockIdx.x, t = row_offset + r;
  const T* xr = logits + r * static_cast<std::int64_t>(V);
  const std::int64_t y = load_target(targets, t);
  const bool kept = y != k.ignore;
  A sy;
  const Stats<A> st = row_stats<kThreads>(xr, V, kept ? y : -1, k.cf, &sy);
  if (threadIdx.x != 0) return;
  const A lS = log_sum<A>(st.S);
  const A L = add_rn(st.m, lS);
  lse_out[t] = from_acc<T>(L);
  A ce = A(0);
  if (kept) {
    const A a = sub_rn(st.m, sy);  // NaN for an invalid target (sy stays NaN)
    if (k.ef > A(0)) {
      const A sm = sub_rn(st.m, div_rn(to_a<A>(st.sum_s), k.Vf));
      ce = add_rn(add_rn(lS, mul_rn(sub_rn(A(1), k.ef), a)), mul_rn(k.ef, sm));
    } else {
      ce = add_rn(lS, a);
    }
    if (k.zf > A(0)) ce = add_rn(ce, mul_rn(k.zf, mul_rn(L, L)));
  }
  if (k.reduction == 0) loss[t] = from_acc<T>(ce);
  else ws_ce[r] = ce;
}

/// Number of targets != ignore in [0, n) (single block).
__global__ void __launch_bounds__(kThreads)
    count_kept(const unsigned char* __restrict__ targets, std::int64_t n, long long ignore, long long* out) {
  __shared__ long long sm[1][32];
  long long v[1] = {0};
  for (std::int64_t t = threadIdx.x; t < n; t += kThreads) v[0] += load_target(targets, t) != ignore;
  block_sum<1>(v, sm);
  if (threadIdx.x == 0) *out = v[0];
}

/// loss = sum of the launched rows' ce (fixed order), / n for mean (n = 0: 0). Single block.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_loss(const acc_t<T>* __restrict__ ws_ce, std::int64_t tokens, const long long* __restrict__ count,
                int reduction, T* __restrict__ loss) {
  using A = acc_t<T>;
  __shared__ A sm[1][32];
  A v[1] = {A(0)};
  for (std::int64_t r = threadIdx.x; r < tokens; r += kThreads) v[0] = add_rn(v[0], ws_ce[r]);
  block_sum<1>(v, sm);
  if (threadIdx.x != 0) return;
  A total = v[0];
  if (reduction == 1) {
    const long long n = *count;
    total = n > 0 ? div_rn(total, static_cast<A>(n)) : A(0);
  }
  loss[0] = from_acc<T>(total);
}

/// Rows r = blockIdx.x, blockIdx.x + gridDim.x, ... (the launcher sizes the grid so that
/// the rows in flight fit in L2: the gradient sweep re-reads the row from L2, not DRAM).
/// The result of a row does not depend on the grid size.
template <typename T>
__global__ void __launch_bounds__(kBwdThreads)
    backward_rows(const T* __restrict__ logits, const unsigned char* __restrict__ targets, const T* __restrict__ dloss,
                  T* __restrict__ dlogits, const long long* __restrict__ count, std::int64_t tokens, int V,
                  std::int64_t row_offset, Coef<acc_t<T>> k) {
  using A = acc_t<T>;
  constexpr int VEC = kVec<T>;
  for (std::int64_t r = blockIdx.x; r < tokens; r += gridDim.x) {
    const std::int64_t t = row_offset + r;
    const T* xr = logits + r * static_cast<std::int64_t>(V);
    T* dr = dlogits + r * static_cast<std::int64_t>(V);
    const std::int64_t y = load_target(targets, t);
    const int shift = grid_shift(xr);
    const int nunits = (V + shift + VEC - 1) / VEC;
    const bool dx_al = grid_is_aligned(static_cast<const T*>(dr), shift);  // same 16-byte grid as this row of logits
    A g = to_acc(k.reduction == 0 ? dloss[t] : dloss[0]);
    bool zero = y == k.ignore;
    if (k.reduction == 1) {
      const long long n = *count;
      if (n == 0) zero = true;
      else g = div_rn(g, static_cast<A>(n));
    }
    if (zero) {  // ignored token (or mean over no kept token): exact zeros, logits not read
      A z[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) z[j] = A(0);
      const Unit<T> uz = pack_from_acc<T>(z);
      for (int u = threadIdx.x; u < nunits; u += kBwdThreads) {
        const int lo = u * VEC - shift;
        store_unit(dr, lo, V, unit_is_full<T>(lo, V) && dx_al, uz);
      }
      continue;  // block-uniform
    }
    A sy;
    const Stats<A> st = row_stats<kBwdThreads>(xr, V, y, k.cf, &sy);
    const A lS = log_sum<A>(st.S);
    const A L = add_rn(st.m, lS);
    const A zfac = k.zf > A(0) ? add_rn(A(1), mul_rn(mul_rn(A(2), k.zf), L)) : A(1);
    const A one_m_eps = sub_rn(A(1), k.ef), eps_v = div_rn(k.ef, k.Vf);
    // bf16 / fp16: p = e * (1/S) in FP32 (two roundings); float, double: e / S in FP64, one rounding.
    const float inv_S = __double2float_rn(1.0 / st.S);
    const bool valid = y >= 0 && y < V;
    const A gv = valid ? g : A(NAN);  // an unvalidated bad target: NaN, never an out-of-bounds read
    for_each_unit<kBwdThreads>(xr, V, shift, nunits, [&](int lo, bool full, const Unit<T>& ux) {
      A out[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const int i = lo + j;
        out[j] = A(0);
        if (i < 0 || i >= V) continue;
        const A x = unit_acc(ux, j);
        const A s = capped<T>(x, k.cf);
        A p;
        if constexpr (kFp32Transcendentals<T>) {
          // e = 0 for a -inf logit; times 1/S = inf (S = 0: every logit -inf) that is NaN, as e / S
          p = __fmul_rn(s == A(-INFINITY) ? 0.0f : expf(__fsub_rn(s, st.m)), inv_S);
        } else {
          const double e = s == A(-INFINITY) ? 0.0 : exp(__dsub_rn(static_cast<double>(s), static_cast<double>(st.m)));
          p = to_a<A>(__ddiv_rn(e, st.S));
        }
        A d = k.zf > A(0) ? mul_rn(p, zfac) : p;
        if (i == y) d = sub_rn(d, one_m_eps);
        if (k.ef > A(0)) d = sub_rn(d, eps_v);
        if (k.cf > A(0)) {
          const A th = tanh_acc<T>(div_rn(x, k.cf));
          d = mul_rn(d, sub_rn(A(1), mul_rn(th, th)));
        }
        out[j] = mul_rn(gv, d);
      }
      store_unit(dr, lo, V, full && dx_al, pack_from_acc<T>(out));
    });
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
  if (p.reduction == 1) count_kept<<<1, kThreads, 0, stream>>>(tg, total_tokens, k.ignore, count);
  if (tokens > 0)
    forward_rows<T><<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(logits, tg, loss, lse, ws_ce,
                                                                            static_cast<int>(vocab), row_offset, k);
  if (p.reduction != 0) reduce_loss<T><<<1, kThreads, 0, stream>>>(ws_ce, tokens, count, p.reduction, loss);
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
  if (p.reduction == 1) count_kept<<<1, kThreads, 0, stream>>>(tg, total_tokens, k.ignore, count);
  // Rows in flight: as many as 3/4 of L2 holds (the gradient sweep then re-reads each row
  // from L2), at most the blocks the device runs at once, at least one per SM. dlogits moves as 16-byte vectors only where its row sits on the
  // same 16-byte grid as the row of logits (checked per row in the kernel).
  int dev = 0, sms = 0, l2 = 0, per_sm = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
  if (const cudaError_t e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev); e != cudaSuccess) return e;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, backward_rows<T>, kBwdThreads, 0);
      e != cudaSuccess)
    return e;
  // Never fewer blocks than SMs: rows too long for that many to fit in L2 (bf16 vocab
  // above ~200K on an H200, fp32 above ~100K) take some second-sweep misses rather than
  // leave SMs idle.
  const std::int64_t row_bytes = vocab * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t resident = static_cast<std::int64_t>(sms) * std::max(per_sm, 1);
  const std::int64_t in_l2 = static_cast<std::int64_t>(l2) * 3 / 4 / row_bytes;
  std::int64_t grid = std::min(resident, std::max<std::int64_t>(in_l2, sms));
  grid = std::min<std::int64_t>(std::max<std::int64_t>(grid, 1), tokens);
  backward_rows<T><<<static_cast<unsigned>(grid), kBwdThreads, 0, stream>>>(logits, tg, dloss, dlogits, count, tokens,
                                                                          static_cast<int>(vocab), row_offset, k);
  return cudaGetLastError();
}

#define NUMGATE_CE_INSTANTIATE(T)                                                                                 \
  template cudaError_t forward<T>(const T*, const std::int64_t*, T*, T*, std::int64_t, std::int64_t, const Params&, \
                                  std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);                  \
  template cudaError_t backward<T>(const T*, const std::int64_t*, const T*, T*, std::int64_t, std::int64_t,        \
                                   const Params&, std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);
NUMGATE_CE_INSTANTIATE(float)
NUMGATE_CE_INSTANTIATE(double)
NUMGATE_CE_INSTANTIATE(__half)
NUMGATE_CE_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_CE_INSTANTIATE

}  // namespace numgate::cross_entropy
