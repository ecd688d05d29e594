/*
Cross-entropy forward and backward kernels (the numgate target kernels for cross_entropy).
The op and the numerics contract are in cross_entropy.cuh and cross_entropy_oracle.h.

Design.

  One block of 256 threads per token (grid.x = tokens). The row of logits is viewed on the
  virtual 16-byte grid of common/cuda_utils.cuh (shift = (p % 16) / sizeof(T)); thread t
  owns units t, t + 256, ... (fp32 4, bf16/fp16 8 elements per unit).

  row statistics (forward, and again in the backward): ONE sweep over the row. Per thread
  an online (m, S): m the NaN-propagating max of s_j in FP32, S = sum exp(s_j - m) in
  FP64, rescaled by exp(m_old - m_new) (FP64) when the max grows; -inf logits add nothing
  (so a row of -inf but one finite logit has S = 1 exactly); sum_j s_j in FP64; the thread
  that owns element y keeps s_y. Threads are combined by a shuffle-xor butterfly and then
  over the warps, with a combine rule that is commutative bit for bit (max_nan, and
  a.S e_a + b.S e_b with explicit _rn operations), so the tree depends on blockDim only.

  forward: thread 0 forms lse and ce (FP32, the reference's operations) and writes lse
    and, for none, loss; for mean / sum it writes ce into the workspace and a
    single-block kernel sums the launched rows in a fixed order (FP32), divided by n
    (mean; count kernel over targets[0, total_tokens); n = 0 gives 0).
  backward: the statistics sweep, then a second sweep writing dlogits (the row is read
    twice; the second read is often an L2 hit). Ignored tokens, and mean with n = 0,
    write exact zeros without reading the logits.

Performance (not measured: no GPU on the development machine): the FP64 exp per element
costs FP64 throughput (about as much time as the HBM read of the row on an H200 at the
benchmark shape); an FP32 exp with an FP64 accumulation is the first thing to try once
the gate has been run on a device.
*/

#include "cross_entropy/cross_entropy.cuh"

#include <climits>
#include <cmath>
#include <math_constants.h>

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace numgate::cross_entropy {
namespace {

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

constexpr int kThreads = 256;

/// targets[t] for any byte alignment of `targets`.
__device__ __forceinline__ std::int64_t load_target(const unsigned char* targets, std::int64_t t) {
  const unsigned char* a = targets + t * 8;
  if ((reinterpret_cast<std::uintptr_t>(a) & 7u) == 0) return *reinterpret_cast<const long long*>(a);
  unsigned long long v = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b) v |= static_cast<unsigned long long>(a[b]) << (8 * b);  // little-endian
  return static_cast<std::int64_t>(v);
}

__device__ __forceinline__ float max_nan(float a, float b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  return a > b ? a : b;
}

struct Coef {
  float cf, ef, zf, Vf;
  long long ignore;
  int reduction;
};

/// tanh of an FP32 value, evaluated in FP64 and rounded once (correctly rounded but for
/// rare near-ties, like the reference's libm tanhf; CUDA's tanhf errs by up to 2 ulp, which
/// 1 - tanh^2 amplifies by 1 / (1 - tanh^2) where the cap saturates).
__device__ __forceinline__ float tanh_f(float q) { return __double2float_rn(tanh(static_cast<double>(q))); }

/// s = cf > 0 ? cf * tanh(x / cf) : x (FP32, the reference's operations).
__device__ __forceinline__ float capped(float x, float cf) {
  return cf > 0.0f ? mul_rn(cf, tanh_f(div_rn(x, cf))) : x;
}

struct Stats {
  float m;       ///< max_j s_j (NaN-propagating; -inf when every s_j is -inf)
  double S;      ///< sum_j exp(s_j - m)
  double sum_s;  ///< sum_j s_j
};

/// Online update with one element.
__device__ __forceinline__ void add_elem(Stats& st, float s) {
  const float mn = max_nan(st.m, s);
  if (!(mn == st.m)) st.S = __dmul_rn(st.S, exp(__dsub_rn(static_cast<double>(st.m), static_cast<double>(mn))));
  st.m = mn;
  if (s != -INFINITY) st.S = __dadd_rn(st.S, exp(__dsub_rn(static_cast<double>(s), static_cast<double>(mn))));
  st.sum_s = __dadd_rn(st.sum_s, static_cast<double>(s));
}

/// Commutative combine (bit for bit): used by the butterfly, where both lanes combine the
/// same pair in opposite order.
__device__ __forceinline__ Stats combine(const Stats& a, const Stats& b) {
  Stats r;
  r.m = max_nan(a.m, b.m);
  if (r.m == -INFINITY) {
    r.S = 0.0;
  } else {
    const double ea = a.m == -INFINITY ? 0.0 : __dmul_rn(a.S, exp(__dsub_rn(static_cast<double>(a.m), static_cast<double>(r.m))));
    const double eb = b.m == -INFINITY ? 0.0 : __dmul_rn(b.S, exp(__dsub_rn(static_cast<double>(b.m), static_cast<double>(r.m))));
    r.S = __dadd_rn(ea, eb);
  }
  r.sum_s = __dadd_rn(a.sum_s, b.sum_s);
  return r;
}

__device__ __forceinline__ Stats shfl_stats(const Stats& s, int off) {
  Stats o;
  o.m = __shfl_xor_sync(0xffffffffu, s.m, off);
  o.S = __shfl_xor_sync(0xffffffffu, s.S, off);
  o.sum_s = __shfl_xor_sync(0xffffffffu, s.sum_s, off);
  return o;
}

/// Block-wide statistics of one row, and s_y (NaN when y is not in the row). Every thread
/// returns the same bits. smem_* are shared scratch.
template <typename T>
__device__ Stats row_stats(const T* xr, int V, std::int64_t y, float cf, float* sy_out) {
  __shared__ float sm_m[32];
  __shared__ double sm_S[32], sm_ss[32];
  __shared__ float sm_sy;
  constexpr int VEC = kVec<T>;
  if (threadIdx.x == 0) sm_sy = NAN;
  __syncthreads();
  const int shift = grid_shift(xr);
  const int nunits = (V + shift + VEC - 1) / VEC;
  Stats st{-INFINITY, 0.0, 0.0};
  for (int u = threadIdx.x; u < nunits; u += kThreads) {
    const int lo = u * VEC - shift;
    const bool full = unit_is_full<T>(lo, V);
    const Unit<T> ux = load_unit(xr, lo, V, full);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int i = lo + j;
      if (i < 0 || i >= V) continue;
      const float s = capped(unit_acc(ux, j), cf);
      add_elem(st, s);
      if (i == y) sm_sy = s;  // a single writer: the owner of element y
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) st = combine(st, shfl_stats(st, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = kThreads / 32;
  if (lane == 0) {
    sm_m[warp] = st.m;
    sm_S[warp] = st.S;
    sm_ss[warp] = st.sum_s;
  }
  __syncthreads();
  Stats w = lane < nwarps ? Stats{sm_m[lane], sm_S[lane], sm_ss[lane]} : Stats{-INFINITY, 0.0, 0.0};
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) w = combine(w, shfl_stats(w, off));
  *sy_out = sm_sy;
  __syncthreads();
  return w;
}

/// log S in FP64 rounded once to FP32. S = 0 only when every logit of the row is -inf
/// (otherwise the max term contributes 1): then NaN, as the golden's exp(-inf - (-inf)).
__device__ __forceinline__ float log_sum(double S) { return S == 0.0 ? CUDART_NAN_F : __double2float_rn(log(S)); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_rows(const T* __restrict__ logits, const unsigned char* __restrict__ targets, T* __restrict__ loss,
                 T* __restrict__ lse_out, float* __restrict__ ws_ce, int V, std::int64_t row_offset, Coef k) {
  const std::int64_t r = blockIdx.x, t = row_offset + r;
  const T* xr = logits + r * static_cast<std::int64_t>(V);
  const std::int64_t y = load_target(targets, t);
  const bool kept = y != k.ignore;
  float sy;
  const Stats st = row_stats(xr, V, kept ? y : -1, k.cf, &sy);
  if (threadIdx.x != 0) return;
  const float lS = log_sum(st.S);
  const float L = add_rn(st.m, lS);
  lse_out[t] = from_acc<T>(L);
  float ce = 0.0f;
  if (kept) {
    const float a = sub_rn(st.m, sy);  // NaN for an invalid target (sy stays NaN)
    if (k.ef > 0.0f) {
      const float sm = sub_rn(st.m, div_rn(__double2float_rn(st.sum_s), k.Vf));
      ce = add_rn(add_rn(lS, mul_rn(sub_rn(1.0f, k.ef), a)), mul_rn(k.ef, sm));
    } else {
      ce = add_rn(lS, a);
    }
    if (k.zf > 0.0f) ce = add_rn(ce, mul_rn(k.zf, mul_rn(L, L)));
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
    reduce_loss(const float* __restrict__ ws_ce, std::int64_t tokens, const long long* __restrict__ count, int reduction,
                T* __restrict__ loss) {
  __shared__ float sm[1][32];
  float v[1] = {0.0f};
  for (std::int64_t r = threadIdx.x; r < tokens; r += kThreads) v[0] = add_rn(v[0], ws_ce[r]);
  block_sum<1>(v, sm);
  if (threadIdx.x != 0) return;
  float total = v[0];
  if (reduction == 1) {
    const long long n = *count;
    total = n > 0 ? div_rn(total, static_cast<float>(n)) : 0.0f;
  }
  loss[0] = from_acc<T>(total);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_rows(const T* __restrict__ logits, const unsigned char* __restrict__ targets, const T* __restrict__ dloss,
                  T* __restrict__ dlogits, const long long* __restrict__ count, int V, std::int64_t row_offset,
                  Coef k) {
  constexpr int VEC = kVec<T>;
  const std::int64_t r = blockIdx.x, t = row_offset + r;
  const T* xr = logits + r * static_cast<std::int64_t>(V);
  T* dr = dlogits + r * static_cast<std::int64_t>(V);
  const std::int64_t y = load_target(targets, t);
  const int shift = grid_shift(xr);
  const int nunits = (V + shift + VEC - 1) / VEC;
  const bool dx_al = grid_is_aligned(static_cast<const T*>(dr), shift);  // same 16-byte grid as this row of logits
  float g = to_acc(k.reduction == 0 ? dloss[t] : dloss[0]);
  bool zero = y == k.ignore;
  if (k.reduction == 1) {
    const long long n = *count;
    if (n == 0) zero = true;
    else g = div_rn(g, static_cast<float>(n));
  }
  if (zero) {  // ignored token (or mean over no kept token): exact zeros, logits not read
    float z[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) z[j] = 0.0f;
    const Unit<T> uz = pack_from_acc<T>(z);
    for (int u = threadIdx.x; u < nunits; u += kThreads) {
      const int lo = u * VEC - shift;
      store_unit(dr, lo, V, unit_is_full<T>(lo, V) && dx_al, uz);
    }
    return;
  }
  float sy;
  const Stats st = row_stats(xr, V, y, k.cf, &sy);
  const float lS = log_sum(st.S);
  const float L = add_rn(st.m, lS);
  const float zfac = k.zf > 0.0f ? add_rn(1.0f, mul_rn(mul_rn(2.0f, k.zf), L)) : 1.0f;
  const float one_m_eps = sub_rn(1.0f, k.ef), eps_v = div_rn(k.ef, k.Vf);
  const bool valid = y >= 0 && y < V;
  if (!valid) g = NAN;  // an unvalidated bad target: NaN, never an out-of-bounds read
  for (int u = threadIdx.x; u < nunits; u += kThreads) {
    const int lo = u * VEC - shift;
    const bool full = unit_is_full<T>(lo, V);
    const Unit<T> ux = load_unit(xr, lo, V, full);
    float out[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int i = lo + j;
      out[j] = 0.0f;
      if (i < 0 || i >= V) continue;
      const float x = unit_acc(ux, j);
      const float s = capped(x, k.cf);
      const double e = s == -INFINITY ? 0.0 : exp(__dsub_rn(static_cast<double>(s), static_cast<double>(st.m)));
      const float p = __double2float_rn(__ddiv_rn(e, st.S));
      float d = k.zf > 0.0f ? mul_rn(p, zfac) : p;
      if (i == y) d = sub_rn(d, one_m_eps);
      if (k.ef > 0.0f) d = sub_rn(d, eps_v);
      if (k.cf > 0.0f) {
        const float th = tanh_f(div_rn(x, k.cf));
        d = mul_rn(d, sub_rn(1.0f, mul_rn(th, th)));
      }
      out[j] = mul_rn(g, d);
    }
    store_unit(dr, lo, V, full && dx_al, pack_from_acc<T>(out));
  }
}

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

bool check(std::int64_t tokens, std::int64_t vocab, const Params& p, std::int64_t row_offset, std::int64_t total) {
  return tokens >= 0 && tokens <= INT_MAX && vocab >= 1 && vocab <= (std::int64_t{1} << 30) && row_offset >= 0 &&
         total >= row_offset + tokens && (p.reduction == 0 || p.reduction == 1 || p.reduction == 2) &&
         p.label_smoothing >= 0 && p.label_smoothing <= 1 && p.z_loss >= 0 && p.softcap >= 0;
}

Coef coef_of(const Params& p, std::int64_t vocab) {
  return {static_cast<float>(p.softcap), static_cast<float>(p.label_smoothing), static_cast<float>(p.z_loss),
          static_cast<float>(vocab), static_cast<long long>(p.ignore_index), p.reduction};
}

// Workspace layout, from the workspace pointer rounded up to 16 bytes (the caller's
// pointer need only be byte-aligned: the misaligned replay shifts it by one element):
// [0, 8) the count (long long); [16, 16 + 4 tokens) per-token FP32 ce.
constexpr std::size_t kCeOffset = 16;
constexpr std::size_t kSlack = 15;  // for the rounding up

std::size_t needed(std::int64_t tokens) {
  return kCeOffset + static_cast<std::size_t>(tokens < 0 ? 0 : tokens) * sizeof(float);
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
  const Coef k = coef_of(p, vocab);
  const auto* tg = reinterpret_cast<const unsigned char*>(targets);
  auto* count = reinterpret_cast<long long*>(ws);
  auto* ws_ce = reinterpret_cast<float*>(ws + kCeOffset);
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
  const Coef k = coef_of(p, vocab);
  const auto* tg = reinterpret_cast<const unsigned char*>(targets);
  auto* count = reinterpret_cast<long long*>(ws);
  if (p.reduction == 1) count_kept<<<1, kThreads, 0, stream>>>(tg, total_tokens, k.ignore, count);
  // dlogits moves as 16-byte vectors only where its row sits on the same 16-byte grid as
  // the row of logits (checked per row in the kernel), element by element otherwise.
  backward_rows<T><<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(
      logits, tg, dloss, dlogits, count, static_cast<int>(vocab), row_offset, k);
  return cudaGetLastError();
}

#define NUMGATE_CE_INSTANTIATE(T)                                                                                 \
  template cudaError_t forward<T>(const T*, const std::int64_t*, T*, T*, std::int64_t, std::int64_t, const Params&, \
                                  std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);                  \
  template cudaError_t backward<T>(const T*, const std::int64_t*, const T*, T*, std::int64_t, std::int64_t,        \
                                   const Params&, std::int64_t, std::int64_t, void*, std::size_t, cudaStream_t);
NUMGATE_CE_INSTANTIATE(float)
NUMGATE_CE_INSTANTIATE(__half)
NUMGATE_CE_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_CE_INSTANTIATE

}  // namespace numgate::cross_entropy
