/*
SwiGLU and GeGLU forward and backward kernels (the numgate target kernels for "swiglu" and
"geglu"; formulas and sources in glu.cuh / glu_math.h).

Numerics contract (the CPU reference in glu_oracle.cpp calls the same scalar functions,
glu_math.h, on the host). C is the compute type: float for T = __nv_bfloat16 / __half,
double for T = float / double. Per element, with inputs widened exactly to C:

  forward:   y  = T( act(a) * b )
  backward:  da = T( (dy * b) * act'(a) ),   db = T( dy * act(a) )

act / act' are evaluated in cancellation-free forms (glu_math.h), with CUDA's accurate
expf / expm1f / erfcf (double: exp / expm1 / erfc; never the __expf intrinsics), IEEE
divisions (no --use_fast_math: it would also flush subnormals); a*b+c may be fused (FMA),
so the last FP32 bits may differ from the reference, not the rounded outputs beyond 1 ULP.
Accuracy: bf16/fp16 outputs are within 1 ULP of the correctly rounded FP64 value (the FP32
error, a few FP32 ulp even next to the derivative roots, is < 2^-16 relative); fp32
outputs are computed in FP64 and rounded once (FP32 math would give several ulp).

Design.
  Units on a virtual 16-byte grid. The n elements are viewed on a 16-byte grid anchored
  at a: shift = (a % 16) / sizeof(T) elements, unit u covers elements [u*V - shift,
  (u+1)*V - shift) clipped to [0, n), V = 16 / sizeof(T); nunits = ceil((n + shift) / V).
  a's full units are therefore always 16-byte aligned; each other tensor is checked once
  (uniform over the grid): if (ptr - shift) is 16-byte aligned its full units move as one
  16-byte access, else (and for the partial first / last unit) element by element. Any
  element alignment of any pointer is correct; aligned production tensors take the vector
  path everywhere.
  One pass, grid-stride: 256-thread blocks, each thread takes units u and u + stride per
  trip (stride = all threads of the grid), issuing all loads of both before the math, so
  32 (forward) / 48 (backward) bytes per thread are in flight. The grid is
  min(ceil(nunits / 512), 8 * SMs): small inputs get exactly the blocks they need, large
  ones a fixed resident set that strides. Forward writes y; backward writes da and db in
  the same pass (a, b, dy each read once). No shared memory, no atomics, no reductions:
  the output does not depend on the launch shape (bitwise identical for any grid).
*/

#include "glu/glu.cuh"

#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "glu/glu_math.h"

namespace numgate::glu {
namespace {

using numgate::device::acc_t;
using numgate::device::grid_is_aligned;
using numgate::device::grid_shift;
using numgate::device::kVec;
using numgate::device::load_at;
using numgate::device::load_unit;
using numgate::device::store_at;
using numgate::device::pack_from_acc;
using numgate::device::store_unit;
using numgate::device::unit_acc;
using numgate::device::Unit;

/// Compute type: FP32 for 16-bit tensors, FP64 for fp32 and fp64 tensors.
template <typename T>
using comp_t = std::conditional_t<sizeof(T) == 2, float, double>;

enum class Fn { silu, gelu_erf, gelu_tanh };

template <Fn F, typename C>
__device__ __forceinline__ C act(C a) {
  if constexpr (F == Fn::silu) return math::silu(a);
  else if constexpr (F == Fn::gelu_erf) return math::gelu_erf(a);
  else return math::gelu_tanh(a);
}
template <Fn F, typename C>
__device__ __forceinline__ C dact(C a) {
  if constexpr (F == Fn::silu) return math::dsilu(a);
  else if constexpr (F == Fn::gelu_erf) return math::dgelu_erf(a);
  else return math::dgelu_tanh(a);
}

constexpr int kThreads = 256;
constexpr int kUnroll = 2;      // units per thread per grid-stride trip
constexpr int kBlocksPerSm = 8; // resident-grid cap: 8 x 256 threads = 2048 per SM

// load_at / store_at: common/cuda_utils.cuh.

template <typename T, Fn F>
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
       u0 += kUnroll * stride) {
    Unit<T> au[kUnroll], bu[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u = u0 + k * stride;
      if (u < nunits) {
        const int64_t lo = u * V - shift;
        const bool full = lo >= 0 && lo + V <= n;
        au[k] = load_at(a, lo, n, full);
        bu[k] = load_at(b, lo, n, full && b_al);
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
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

template <typename T, Fn F>
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
       u0 += kUnroll * stride) {
    Unit<T> au[kUnroll], bu[kUnroll], gu[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
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
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u = u0 + k * stride;
      if (u < nunits) {
        const int64_t lo = u * V - shift;
        const bool full = lo >= 0 && lo + V <= n;
        A oa[V], ob[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const C av = static_cast<C>(unit_acc(au[k], j)), bv = static_cast<C>(unit_acc(bu[k], j));
          const C gv = static_cast<C>(unit_acc(gu[k], j));
          oa[j] = static_cast<A>((gv * bv) * dact<F>(av));
          ob[j] = static_cast<A>(gv * act<F>(av));
        }
        store_at(da, lo, n, full && da_al, pack_from_acc<T>(oa));
        store_at(db, lo, n, full && db_al, pack_from_acc<T>(ob));
      }
    }
  }
}

constexpr int64_t kMaxN = int64_t(1) << 62;

template <typename T>
bool aligned_to_element(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}

/// Blocks for nunits units: just enough for one trip, capped at kBlocksPerSm per SM.
template <typename T>
cudaError_t grid_for(const T* a, int64_t n, unsigned& blocks) {
  constexpr int V = kVec<T>;
  const int64_t shift = static_cast<int64_t>((reinterpret_cast<std::uintptr_t>(a) & 15u) / sizeof(T));
  const int64_t nunits = (n + shift + V - 1) / V;
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const int64_t need = (nunits + int64_t(kThreads) * kUnroll - 1) / (int64_t(kThreads) * kUnroll);
  const int64_t cap = int64_t(sms > 0 ? sms : 1) * kBlocksPerSm;
  blocks = static_cast<unsigned>(need < cap ? need : cap);
  return cudaSuccess;
}

template <typename T, Fn F>
cudaError_t launch_forward(const T* a, const T* b, T* y, int64_t n, cudaStream_t stream) {
  if (n < 0 || n > kMaxN) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (a == nullptr || b == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element<T>(a) || !aligned_to_element<T>(b) || !aligned_to_element<T>(y))
    return cudaErrorInvalidValue;
  unsigned blocks = 0;
  const cudaError_t err = grid_for(a, n, blocks);
  if (err != cudaSuccess) return err;
  glu_forward_kernel<T, F><<<blocks, kThreads, 0, stream>>>(a, b, y, n);
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
  unsigned blocks = 0;
  const cudaError_t err = grid_for(a, n, blocks);
  if (err != cudaSuccess) return err;
  glu_backward_kernel<T, F><<<blocks, kThreads, 0, stream>>>(a, b, dy, da, db, n);
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
