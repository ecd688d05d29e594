/*
SwiGLU and GeGLU forward and backward kernels (the numgate target kernels for "swiglu" and
"geglu"; formulas and sources in glu.cuh / glu_math.h).

Numerics contract. C is the compute type: float for T = __nv_bfloat16 / __half, double for
T = float / double. Per element, with inputs widened exactly to C:

  forward:   y  = T( act(a) * b )
  backward:  da = T( (dy * b) * act'(a) ),   db = T( dy * act(a) )

  * fp32 / fp64 tensors: act / act' are glu_math.h's FP64 functions (the same scalar code
    the CPU reference runs on the host: cancellation-free forms, accurate exp / expm1 /
    erfc); outputs rounded once (FP32 math would cost several fp32 ulp).
  * bf16 / fp16 tensors: the fast FP32 path of glu_fast.h (one sigmoid or Gaussian tail
    shared by act and act', MUFU.EX2 exp, MUFU reciprocal + one Newton step, a
    degree-10 Mills-ratio polynomial instead of erfcf, root-window polynomials for act'
    near its zero, selects instead of branches; no flush to zero anywhere a result can be
    subnormal; exp as one MUFU.EX2 on a pre-scaled argument). It is not the reference's
    operation sequence; its error bound is: for
    every input a, |act32 - act| and |act32' - act'| stay within the share of the gate's
    rounding bound E = gamma abs_terms + 10 2^-150 (gamma = 10u / (1 - 10u), u = 2^-24)
    left after the output products' own roundings (glu_fast.h, conditions (A) and (D)),
    so every element the gate calls decidable rounds to round(golden) and every element
    is within 1 ULP (relative error of act, act' below 2^-13 wherever they are normal
    FP32 numbers; measured at most 1.6e-5 = 2^-16.0, the bound's worst use 62%). tests/gpu/test_glu_fast_math.cpp checks (A), (D)
    and the 2^-13 on the device for all 65536 bf16 and all 65536 fp16 inputs of SiLU,
    erf GELU and tanh GELU, and that two worse approximations fail it.
  Non-finite inputs: act(+inf) = +inf, act(-inf) = -0, act'(+inf) = 1, act'(-inf) = 0,
  NaN -> NaN (the clamps of glu_math.h, NaN-keeping max.NaN / min.NaN on the fast path),
  then IEEE products; fp16 outputs beyond 65504 round to inf as the golden's rounding does.
  No --use_fast_math (it would flush subnormals and replace expf).

Design.
  Units on a virtual 16-byte grid. The n elements are viewed on a 16-byte grid anchored
  at a: shift = (a % 16) / sizeof(T) elements, unit u covers elements [u*V - shift,
  (u+1)*V - shift) clipped to [0, n), V = 16 / sizeof(T); nunits = ceil((n + shift) / V).
  a's full units are therefore always 16-byte aligned; each other tensor is checked once
  (uniform over the grid): if (ptr - shift) is 16-byte aligned its full units move as one
  16-byte access, else (and for the partial first / last unit) element by element. Any
  element alignment of any pointer is correct; aligned production tensors take the vector
  path everywhere. When n % VEC == 0 and every tensor is 16-byte aligned (production
  tensors), the aligned kernels run instead: unit u is elements [u VEC, u VEC + VEC) of
  every tensor, one 16-byte access each, no grid arithmetic and no element-wise fallback in
  the code (PTX of the bf16 SiLU kernels at one unit per thread: 190 / 392 instructions for
  the grid-stride instances, 7 fewer for the loop-free ones that run, instead of 559 / 994); the
  same per-element operations, so the same bits (tests/gpu/test_aligned_paths.cpp, GluPaths:
  outputs misaligned by one element take the general kernel and must match bitwise).
  One pass, one 16-byte unit per thread: 256-thread blocks, ceil(nunits / 256) of them
  (a flat grid); the aligned SiLU backward of 16-bit tensors takes half a unit per thread
  (4 elements, one 8-byte access per tensor: kBackwardElems, measured 1.5-2.2% faster on
  the H200 there and slower for the GELU backwards and the forwards). The aligned kernels
  have no loop at all (their grid-stride instances run only past 2^31 - 1 blocks); the general kernels keep a grid-stride loop that makes one
  trip below that size. Each thread issues its loads (a, b; backward also dy) before the
  math; plain loads and stores, no cache hints. Measured on an H100 (2026-12-06, a scratch
  A/B harness running each variant and torch.compile on the same buffers, CUPTI kernel
  time, medians of 3): the loop-free backward 45.06 / 84.11 us against the looping one's
  45.44 / 84.65 (SiLU, 1x512x25600 / 4x512x12288); evict-first hints (ld/st.global.cs),
  formerly on the GELU kernels (0-1.4% faster on the H200), 1.5-3.5% slower there and
  bimodal (erf forward 4x512x12288: 50.63-52.44 us with them, 50.58-50.65 without).
  Measured alternatives, slower: 2 or 4 units per thread with a resident grid of 8 blocks
  per SM (the math's registers cut occupancy: 4 units need ~100 registers), 2 units per
  thread on a flat grid, CUDA's expf instead of MUFU.EX2 (erf GELU forward +8%); 128- or
  512-thread blocks measured the same as 256. Forward writes y; backward
  writes da and db in the same pass (a, b, dy each read once). No shared memory, no
  atomics, no reductions: the output does not depend on the launch shape (bitwise
  identical for any grid).

Speed (bf16, numgate-bench kernel clock = CUPTI GPU time per launch, outputs rotating;
minimal traffic = each input read once and each output written once; copy = the same GPU's
device-to-device memcpy). H200, copy 4247 GB/s, run 29 (2026-12-06, call 5), this launch
configuration (`tools/run.sh`); H100 80GB HBM3, copy 3042 GB/s, run 27 (2026-12-06, call 3),
the previous one (the SiLU backward at one unit per thread; the other kernels as now):
  kernel                   shape          bytes      H200 time  of copy   H100 time  of copy
  swiglu forward           4x512x12288   151.0 MB    36.03 us    99%      50.72 us    98%
  swiglu backward          4x512x12288   251.7 MB    59.31 us   100%      83.61 us    99%
  swiglu forward           1x512x25600    78.6 MB    19.77 us    94%      27.49 us    94%
  swiglu backward          1x512x25600   131.1 MB    31.65 us    98%      44.68 us    96%
  geglu (erf) forward      4x512x12288   151.0 MB    39.98 us    89%      50.38 us    99%
  geglu (erf) backward     4x512x12288   251.7 MB    60.57 us    98%      84.44 us    98%
  geglu (tanh) forward     1x512x25600    78.6 MB    20.88 us    89%      27.13 us    95%
  geglu (tanh) backward    1x512x25600   131.1 MB    32.99 us    94%      45.49 us    95%
  (numgate-bench's own GB/s and "% of D2D copy" divide by the event-timed median, which
  includes the launch gaps; these rows divide by the kernel time.)
  What limits them: DRAM. A SiLU forward with no activation at all (y = a * b) is as fast
  (H100 A/B: 26.80 against 26.92 us at 1x512x25600, outputs reused); the 78.6 MB shapes
  lose a few percent more to the launch ramp and tail (not measured apart). On the H200 (faster
  DRAM, same issue rate) the GELU kernels also meet the issue limit: the vector path's PTX
  has per element SiLU 17 forward / 39 backward instructions, erf GELU 37 / 66 (Mills-ratio
  polynomial 11 FMA, reciprocal and Newton step, MUFU.EX2, selects), so the erf forward
  stayed at 89% of copy there. The comparison with torch.compile and Liger-Kernel:
  README "Against torch.compile and Liger-Kernel" (tools/bench_peers.py), the runs in
  docs/peer-runs.md. fp32 / fp64 tensors (FP64 math) are not benchmarked.
*/

#include "glu/glu.cuh"

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/kernel_trace.h"
#include "glu/glu_fast.h"
#include "glu/glu_math.h"

namespace numgate::glu {
namespace {

using numgate::device::acc_t;
using numgate::device::aligned16;
using numgate::device::grid_is_aligned;
using numgate::device::grid_shift;
using numgate::device::kVec;
using numgate::device::load_at;
using numgate::device::pack_from_acc;
using numgate::device::store_at;
using numgate::device::unit_acc;
using numgate::device::Unit;

/// Compute type: FP32 for 16-bit tensors, FP64 for fp32 and fp64 tensors.
template <typename T>
using comp_t = std::conditional_t<sizeof(T) == 2, float, double>;

using fast::Fn;

/// act(a): the fast FP32 path for 16-bit tensors (glu_fast.h), FP64 glu_math.h otherwise.
template <Fn F, typename C>
__device__ __forceinline__ C act(C a) {
  if constexpr (std::is_same_v<C, float>) return fast::act_only<F>(a);
  else if constexpr (F == Fn::silu) return math::silu(a);
  else if constexpr (F == Fn::gelu_erf) return math::gelu_erf(a);
  else return math::gelu_tanh(a);
}
/// act(a) and act'(a) together (the fast path shares its sigmoid / Gaussian tail).
template <Fn F, typename C>
__device__ __forceinline__ void act_dact(C a, C& y, C& dy) {
  if constexpr (std::is_same_v<C, float>) {
    fast::act_dact<F>(a, y, dy);
  } else if constexpr (F == Fn::silu) {
    y = math::silu(a);
    dy = math::dsilu(a);
  } else if constexpr (F == Fn::gelu_erf) {
    y = math::gelu_erf(a);
    dy = math::dgelu_erf(a);
  } else {
    y = math::gelu_tanh(a);
    dy = math::dgelu_tanh(a);
  }
}

constexpr int kThreads = 256;
constexpr int kUnroll = 1;  // units per thread per grid-stride trip (2 and 4 measured slower)

template <typename T, Fn F, int U>
__global__ void __launch_bounds__(kThreads)
    glu_forward_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n) {
  using C = comp_t<T>;
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int shift = grid_shift(a);
  const int64_t nunits = (n + shift + V - 1) / V;
  const bool b_al = grid_is_aligned(b, shift);
  const bool y_al = grid_is_aligned(static_cast<const T*>(y), shift);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u0 < nunits;
       u0 += U * stride) {
    Unit<T> au[U], bu[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = u0 + k * stride;
      if (u < nunits) {
        const int64_t lo = u * V - shift;
        const bool full = lo >= 0 && lo + V <= n;
        au[k] = load_at(a, lo, n, full);
        bu[k] = load_at(b, lo, n, full && b_al);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = u0 + k * stride;
      if (u < nunits) {
        const int64_t lo = u * V - shift;
        const bool full = lo >= 0 && lo + V <= n;
        A out[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const C av = static_cast<C>(unit_acc(au[k], j)), bv = static_cast<C>(unit_acc(bu[k], j));
          out[j] = static_cast<A>(act<F>(av) * bv);
        }
        store_at(y, lo, n, full && y_al, pack_from_acc<T>(out));
      }
    }
  }
}

template <typename T, Fn F, int U>
__global__ void __launch_bounds__(kThreads)
    glu_backward_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ dy,
                        T* __restrict__ da, T* __restrict__ db, int64_t n) {
  using C = comp_t<T>;
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int shift = grid_shift(a);
  const int64_t nunits = (n + shift + V - 1) / V;
  const bool b_al = grid_is_aligned(b, shift);
  const bool dy_al = grid_is_aligned(dy, shift);
  const bool da_al = grid_is_aligned(static_cast<const T*>(da), shift);
  const bool db_al = grid_is_aligned(static_cast<const T*>(db), shift);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u0 < nunits;
       u0 += U * stride) {
    Unit<T> au[U], bu[U], gu[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = u0 + k * stride;
      if (u < nunits) {
        const int64_t lo = u * V - shift;
        const bool full = lo >= 0 && lo + V <= n;
        au[k] = load_at(a, lo, n, full);
        bu[k] = load_at(b, lo, n, full && b_al);
        gu[k] = load_at(dy, lo, n, full && dy_al);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = u0 + k * stride;
      if (u < nunits) {
        const int64_t lo = u * V - shift;
        const bool full = lo >= 0 && lo + V <= n;
        A oa[V], ob[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const C av = static_cast<C>(unit_acc(au[k], j)), bv = static_cast<C>(unit_acc(bu[k], j));
          const C gv = static_cast<C>(unit_acc(gu[k], j));
          C y, dyv;
          act_dact<F>(av, y, dyv);
          oa[j] = static_cast<A>((gv * bv) * dyv);
          ob[j] = static_cast<A>(gv * y);
        }
        store_at(da, lo, n, full && da_al, pack_from_acc<T>(oa));
        store_at(db, lo, n, full && db_al, pack_from_acc<T>(ob));
      }
    }
  }
}

/// The aligned fast path (the launchers pick it when n % VEC == 0 and every tensor is
/// 16-byte aligned): unit u is elements [u VEC, u VEC + VEC) of every tensor, one 16-byte
/// access each; no virtual grid, no per-tensor alignment test, no element-wise fallback.
/// The same per-element operations as glu_forward_kernel / glu_backward_kernel (so their
/// results bit for bit), one unit per thread. The Flat = true instances have no loop at
/// all (the launcher's grid covers every unit: used whenever that grid fits in 2^31 - 1
/// blocks); Flat = false strides.
template <typename T, Fn F>
__device__ __forceinline__ void glu_forward_unit(const T* __restrict__ a, const T* __restrict__ b,
                                                 T* __restrict__ y, int64_t n, int64_t u) {
  using C = comp_t<T>;
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int64_t lo = u * V;
  const Unit<T> au = load_at(a, lo, n, true);
  const Unit<T> bu = load_at(b, lo, n, true);
  A out[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const C av = static_cast<C>(unit_acc(au, j)), bv = static_cast<C>(unit_acc(bu, j));
    out[j] = static_cast<A>(act<F>(av) * bv);
  }
  store_at(y, lo, n, true, pack_from_acc<T>(out));
}

template <typename T, Fn F, bool Flat>
__global__ void __launch_bounds__(kThreads)
    glu_forward_aligned_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n) {
  const int64_t nunits = n / kVec<T>;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (Flat) {
    if (u < nunits) glu_forward_unit<T, F>(a, b, y, n, u);
  } else {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t v = u; v < nunits; v += stride) glu_forward_unit<T, F>(a, b, y, n, v);
  }
}

/// Elements per thread of the aligned backward: one 16-byte unit (kVec<T>), except the SiLU
/// backward of 16-bit tensors, which takes half a unit (4 elements, one 8-byte access per
/// tensor). Measured on the H200 (run 29, a scratch A/B on the same buffers, CUPTI kernel
/// time, medians of 3): SiLU backward 31.89 / 30.75 / 59.39 us at 4 elements against
/// 32.39 / 31.43 / 60.32 at 8 (1x512x25600 / 1x1024x12288 / 4x512x12288); the GELU
/// backwards and every forward were as fast or faster at 8 (erf GELU backward 4x512x12288:
/// 62.52 at 4 against 60.55 at 8).
template <typename T, Fn F>
inline constexpr int kBackwardElems = (sizeof(T) == 2 && F == Fn::silu) ? kVec<T> / 2 : kVec<T>;

/// Half a 16-byte unit of a 16-bit tensor: 4 elements as two raw 32-bit words, one 8-byte access.
struct alignas(8) HalfUnit {
  std::uint32_t w[2];
};

/// Backward of the E elements [u E, u E + E) of every tensor (E = kBackwardElems): the
/// same per-element operations at either width, so the same bits.
template <typename T, Fn F>
__device__ __forceinline__ void glu_backward_unit(const T* __restrict__ a, const T* __restrict__ b,
                                                  const T* __restrict__ dy, T* __restrict__ da,
                                                  T* __restrict__ db, int64_t n, int64_t u) {
  using C = comp_t<T>;
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int E = kBackwardElems<T, F>;
  Unit<T> au, bu, gu;
  if constexpr (E == V) {
    au = load_at(a, u * V, n, true);
    bu = load_at(b, u * V, n, true);
    gu = load_at(dy, u * V, n, true);
  } else {
    static_assert(sizeof(T) == 2 && 2 * E == V, "half units are 16-bit tensors' 4 elements");
    const HalfUnit ah = reinterpret_cast<const HalfUnit*>(a)[u];
    const HalfUnit bh = reinterpret_cast<const HalfUnit*>(b)[u];
    const HalfUnit gh = reinterpret_cast<const HalfUnit*>(dy)[u];
    au = Unit<T>{{ah.w[0], ah.w[1], 0u, 0u}};
    bu = Unit<T>{{bh.w[0], bh.w[1], 0u, 0u}};
    gu = Unit<T>{{gh.w[0], gh.w[1], 0u, 0u}};
  }
  A oa[V] = {}, ob[V] = {};
#pragma unroll
  for (int j = 0; j < E; ++j) {
    const C av = static_cast<C>(unit_acc(au, j)), bv = static_cast<C>(unit_acc(bu, j));
    const C gv = static_cast<C>(unit_acc(gu, j));
    C yv, dyv;
    act_dact<F>(av, yv, dyv);
    oa[j] = static_cast<A>((gv * bv) * dyv);
    ob[j] = static_cast<A>(gv * yv);
  }
  const Unit<T> pa = pack_from_acc<T>(oa), pb = pack_from_acc<T>(ob);
  if constexpr (E == V) {
    store_at(da, u * V, n, true, pa);
    store_at(db, u * V, n, true, pb);
  } else {
    reinterpret_cast<HalfUnit*>(da)[u] = HalfUnit{{pa.w[0], pa.w[1]}};
    reinterpret_cast<HalfUnit*>(db)[u] = HalfUnit{{pb.w[0], pb.w[1]}};
  }
}

template <typename T, Fn F, bool Flat>
__global__ void __launch_bounds__(kThreads)
    glu_backward_aligned_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ dy,
                                T* __restrict__ da, T* __restrict__ db, int64_t n) {
  const int64_t nunits = n / kBackwardElems<T, F>;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (Flat) {
    if (u < nunits) glu_backward_unit<T, F>(a, b, dy, da, db, n, u);
  } else {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t v = u; v < nunits; v += stride) glu_backward_unit<T, F>(a, b, dy, da, db, n, v);
  }
}

constexpr int64_t kMaxN = int64_t(1) << 62;
constexpr int64_t kMaxBlocks = 0x7fffffff;  // gridDim.x limit

/// Blocks of the aligned kernels' flat grid: E elements (one unit, or half a unit) per thread.
template <int E>
int64_t aligned_blocks(int64_t n) {
  return (n / E + kThreads - 1) / kThreads;
}

/// True when the aligned kernels apply: n a multiple of VEC and every pointer 16-byte aligned.
template <typename T>
bool all_aligned(int64_t n, std::initializer_list<const void*> ps) {
  if (n % kVec<T> != 0) return false;
  for (const void* p : ps)
    if (!aligned16(p)) return false;
  return true;
}

template <typename T>
bool aligned_to_element(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}

/// Blocks for one trip of nunits units, kUnroll per thread (capped at 2^31 - 1: beyond,
/// the kernels stride).
template <typename T>
unsigned grid_for(const T* a, int64_t n) {
  constexpr int V = kVec<T>;
  const int64_t shift = static_cast<int64_t>((reinterpret_cast<std::uintptr_t>(a) & 15u) / sizeof(T));
  const int64_t nunits = (n + shift + V - 1) / V;
  const int64_t need = (nunits + int64_t(kThreads) * kUnroll - 1) / (int64_t(kThreads) * kUnroll);
  return static_cast<unsigned>(need < kMaxBlocks ? need : kMaxBlocks);
}

template <typename T, Fn F>
cudaError_t launch_forward(const T* a, const T* b, T* y, int64_t n, cudaStream_t stream) {
  if (n < 0 || n > kMaxN) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (a == nullptr || b == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element<T>(a) || !aligned_to_element<T>(b) || !aligned_to_element<T>(y))
    return cudaErrorInvalidValue;
  if (all_aligned<T>(n, {a, b, y})) {
    kernel_trace::record(kernel_trace::Launcher::glu_forward, "aligned");
    const int64_t blocks = aligned_blocks<kVec<T>>(n);
    if (blocks <= kMaxBlocks)
      glu_forward_aligned_kernel<T, F, true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, b, y, n);
    else
      glu_forward_aligned_kernel<T, F, false><<<unsigned(kMaxBlocks), kThreads, 0, stream>>>(a, b, y, n);
  } else {
    kernel_trace::record(kernel_trace::Launcher::glu_forward, "general");
    glu_forward_kernel<T, F, kUnroll><<<grid_for(a, n), kThreads, 0, stream>>>(a, b, y, n);
  }
  return cudaGetLastError();
}

template <typename T, Fn F>
cudaError_t launch_backward(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n, cudaStream_t stream) {
  if (n < 0 || n > kMaxN) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (a == nullptr || b == nullptr || dy == nullptr || da == nullptr || db == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element<T>(a) || !aligned_to_element<T>(b) || !aligned_to_element<T>(dy) ||
      !aligned_to_element<T>(da) || !aligned_to_element<T>(db))
    return cudaErrorInvalidValue;
  if (all_aligned<T>(n, {a, b, dy, da, db})) {
    kernel_trace::record(kernel_trace::Launcher::glu_backward, "aligned");
    const int64_t blocks = aligned_blocks<kBackwardElems<T, F>>(n);
    if (blocks <= kMaxBlocks)
      glu_backward_aligned_kernel<T, F, true>
          <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, b, dy, da, db, n);
    else
      glu_backward_aligned_kernel<T, F, false><<<unsigned(kMaxBlocks), kThreads, 0, stream>>>(a, b, dy, da, db, n);
  } else {
    kernel_trace::record(kernel_trace::Launcher::glu_backward, "general");
    glu_backward_kernel<T, F, kUnroll><<<grid_for(a, n), kThreads, 0, stream>>>(a, b, dy, da, db, n);
  }
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t swiglu_forward(const T* a, const T* b, T* y, int64_t n, cudaStream_t stream) {
  return launch_forward<T, Fn::silu>(a, b, y, n, stream);
}
template <typename T>
cudaError_t swiglu_backward(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n, cudaStream_t stream) {
  return launch_backward<T, Fn::silu>(a, b, dy, da, db, n, stream);
}
template <typename T>
cudaError_t geglu_forward(const T* a, const T* b, T* y, int64_t n, bool approximate_tanh, cudaStream_t stream) {
  return approximate_tanh ? launch_forward<T, Fn::gelu_tanh>(a, b, y, n, stream)
                          : launch_forward<T, Fn::gelu_erf>(a, b, y, n, stream);
}
template <typename T>
cudaError_t geglu_backward(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n, bool approximate_tanh,
                           cudaStream_t stream) {
  return approximate_tanh ? launch_backward<T, Fn::gelu_tanh>(a, b, dy, da, db, n, stream)
                          : launch_backward<T, Fn::gelu_erf>(a, b, dy, da, db, n, stream);
}

#define NUMGATE_GLU_INSTANTIATE(T)                                                                       \
  template cudaError_t swiglu_forward<T>(const T*, const T*, T*, int64_t, cudaStream_t);                \
  template cudaError_t swiglu_backward<T>(const T*, const T*, const T*, T*, T*, int64_t, cudaStream_t); \
  template cudaError_t geglu_forward<T>(const T*, const T*, T*, int64_t, bool, cudaStream_t);           \
  template cudaError_t geglu_backward<T>(const T*, const T*, const T*, T*, T*, int64_t, bool, cudaStream_t);
NUMGATE_GLU_INSTANTIATE(float)
NUMGATE_GLU_INSTANTIATE(double)
NUMGATE_GLU_INSTANTIATE(__half)
NUMGATE_GLU_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_GLU_INSTANTIATE

}  // namespace numgate::glu
