/*
Fused dropout + residual add, forward and backward (the numgate target kernels of
"dropout_add"; formulas, stream and numerics contract in dropout_add.cuh and
dropout_stream.h).

Design.
  Items on the STREAM's grid. The launch covers stream indices [e0, e0 + n), e0 =
  element_offset. Item k covers stream indices [k E, (k + 1) E), E = max(4, 16 / sizeof(T))
  elements (bf16 / fp16 8, fp32 4, double 4), clipped to the launch; its local indices are
  [k E - e0, (k + 1) E - e0). An item is one or two 16-byte units of every tensor (bf16,
  fp16, fp32 one; double two) and E / 4 Philox calls (bf16 / fp16 two, fp32 and double
  one): each Philox group g = i >> 2 is drawn exactly once per launch, by the thread of the
  item that holds it, whatever the alignment of the buffers or of e0.
  Vector accesses: a tensor's full units are 16-byte accesses when its stream index 0
  would sit on a 16-byte boundary ((ptr - e0) 16-byte aligned: the same for every unit,
  since k E elements are a multiple of 16 bytes), else element by element; the partial
  first and last items always element by element. The whole-tensor launch of an aligned
  production tensor and every row-window launch whose row start is a multiple of E (hidden
  512, 4096, ...) take the vector path everywhere; the misaligned replay takes the scalar
  one, with the same draws.
  One pass, grid-stride: 256-thread blocks, kUnroll = 2 items per thread per trip, all
  loads of both items issued before the Philox rounds (integer work that overlaps the
  loads), then the arithmetic and the stores. The grid is min(ceil(items / 512), 8 * SMs).
  Forward reads x, residual once and writes y (and mask); backward reads dy once and writes
  dx (and dresidual, the loaded bits of dy stored back unchanged). No shared memory, no
  atomics: the output does not depend on the launch shape.

Bytes and speed (H200, bf16 32768 x 512, numgate-bench kernel clock, run 15):
  forward   134.2 MB (x, residual read; y written; the 1-byte mask written), 36.6 us =
            3.67 TB/s, 86% of the 4249 GB/s device-to-device copy;
  backward  100.7 MB (dy read; dx, dresidual written), 30.9 us = 3.25 TB/s, 77% of copy.
  Limit: the Philox-4x32-10 rounds (integer multiplies, one call per 4 elements) are issued
  between the loads and the stores; the backward redraws the mask instead of reading it, so
  that integer work is a larger share of a pass that moves fewer bytes. 4096 x 512 (6.4 /
  5.2 us) is launch-bound.
*/

#include "dropout_add/dropout_add.cuh"

#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "dropout_add/dropout_stream.h"

namespace numgate::dropout_add {
namespace {

using numgate::device::acc_t;
using numgate::device::add_rn;
using numgate::device::kVec;
using numgate::device::load_at;
using numgate::device::load_unit;
using numgate::device::store_at;
using numgate::device::mul_rn;
using numgate::device::pack_from_acc;
using numgate::device::store_unit;
using numgate::device::unit_acc;
using numgate::device::Unit;

/// Elements per item (a multiple of 4: whole Philox groups; a multiple of 16 bytes).
template <typename T>
inline constexpr int kItem = kVec<T> >= 4 ? kVec<T> : 4;
/// 16-byte units per item.
template <typename T>
inline constexpr int kUnits = kItem<T> / kVec<T>;

constexpr int kThreads = 256;
constexpr int kUnroll = 2;       // items per thread per grid-stride trip
constexpr int kBlocksPerSm = 8;  // resident-grid cap: 8 x 256 threads = 2048 per SM
constexpr int64_t kMaxIndex = int64_t(1) << 62;

struct Stream {
  uint64_t seed, offset;
  uint32_t threshold;
};

/// Bit j set iff stream element k E + j is kept (E / 4 Philox calls).
template <typename T>
__device__ __forceinline__ uint32_t keep_bits(int64_t k, const Stream& st) {
  constexpr int G = kItem<T> / 4;
  uint32_t bits = 0;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const r123::Philox4x32::ctr_type r = dropout_group(static_cast<uint64_t>(k) * G + g, st.seed, st.offset);
#pragma unroll
    for (int l = 0; l < 4; ++l) bits |= (dropout_keep(r[l], st.threshold) ? 1u : 0u) << (4 * g + l);
  }
  return bits;
}

/// (ptr - e0) 16-byte aligned: every full unit of the tensor is one 16-byte access.
template <typename T>
__device__ __forceinline__ bool stream_aligned(const T* p, int64_t e0) {
  return ((reinterpret_cast<std::uintptr_t>(p) - static_cast<std::uintptr_t>(e0) * sizeof(T)) & 15u) == 0;
}

// load_at / store_at: common/cuda_utils.cuh.

template <typename T, bool kMask>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ y, T* __restrict__ mask,
                   int64_t n, int64_t e0, Stream st, acc_t<T> s) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>, E = kItem<T>, U = kUnits<T>;
  const int64_t k0 = e0 / E;
  const int64_t items = (e0 + n - 1) / E - k0 + 1;
  const bool x_al = stream_aligned(x, e0), r_al = stream_aligned(residual, e0);
  const bool y_al = stream_aligned(static_cast<const T*>(y), e0);
  const bool m_al = kMask && stream_aligned(static_cast<const T*>(mask), e0);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j0 < items; j0 += kUnroll * stride) {
    Unit<T> xu[kUnroll][U], ru[kUnroll][U];
    uint32_t keep[kUnroll];
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int64_t j = j0 + q * stride;
      if (j < items) {
        const int64_t lo = (k0 + j) * E - e0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t ul = lo + u * V;
          const bool full = ul >= 0 && ul + V <= n;
          xu[q][u] = load_at(x, ul, n, full && x_al);
          ru[q][u] = load_at(residual, ul, n, full && r_al);
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int64_t j = j0 + q * stride;
      keep[q] = j < items ? keep_bits<T>(k0 + j, st) : 0u;
    }
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int64_t j = j0 + q * stride;
      if (j >= items) continue;
      const int64_t lo = (k0 + j) * E - e0;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t ul = lo + u * V;
        const bool full = ul >= 0 && ul + V <= n;
        A out[V], m[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const bool kept = (keep[q] >> (u * V + e)) & 1u;
          const A xv = unit_acc(xu[q][u], e), rv = unit_acc(ru[q][u], e);
          out[e] = kept ? add_rn(mul_rn(xv, s), rv) : rv;  // a select: a dropped x never enters
          m[e] = kept ? A(1) : A(0);
        }
        store_at(y, ul, n, full && y_al, pack_from_acc<T>(out));
        if constexpr (kMask) store_at(mask, ul, n, full && m_al, pack_from_acc<T>(m));
      }
    }
  }
}

template <typename T, bool kDresidual>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ dy, T* __restrict__ dx, T* __restrict__ dresidual, int64_t n, int64_t e0,
                    Stream st, acc_t<T> s) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>, E = kItem<T>, U = kUnits<T>;
  const int64_t k0 = e0 / E;
  const int64_t items = (e0 + n - 1) / E - k0 + 1;
  const bool g_al = stream_aligned(dy, e0), dx_al = stream_aligned(static_cast<const T*>(dx), e0);
  const bool dr_al = kDresidual && stream_aligned(static_cast<const T*>(dresidual), e0);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j0 < items; j0 += kUnroll * stride) {
    Unit<T> gu[kUnroll][U];
    uint32_t keep[kUnroll];
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int64_t j = j0 + q * stride;
      if (j < items) {
        const int64_t lo = (k0 + j) * E - e0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t ul = lo + u * V;
          gu[q][u] = load_at(dy, ul, n, ul >= 0 && ul + V <= n && g_al);
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int64_t j = j0 + q * stride;
      keep[q] = j < items ? keep_bits<T>(k0 + j, st) : 0u;
    }
#pragma unroll
    for (int q = 0; q < kUnroll; ++q) {
      const int64_t j = j0 + q * stride;
      if (j >= items) continue;
      const int64_t lo = (k0 + j) * E - e0;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t ul = lo + u * V;
        const bool full = ul >= 0 && ul + V <= n;
        A out[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const bool kept = (keep[q] >> (u * V + e)) & 1u;
          out[e] = kept ? mul_rn(unit_acc(gu[q][u], e), s) : A(0);
        }
        store_at(dx, ul, n, full && dx_al, pack_from_acc<T>(out));
        if constexpr (kDresidual) store_at(dresidual, ul, n, full && dr_al, gu[q][u]);  // dy's bits, unchanged
      }
    }
  }
}

template <typename T>
bool aligned_to_element(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}

/// The checks every launch makes first (dropout_add.cuh: Errors).
cudaError_t check_common(int64_t n, double p, int64_t element_offset) {
  if (n < 0 || element_offset < 0 || n > kMaxIndex || element_offset > kMaxIndex - n) return cudaErrorInvalidValue;
  if (!(p >= 0.0 && p < 1.0)) return cudaErrorInvalidValue;  // also NaN
  return cudaSuccess;
}

/// Blocks for the launch's items: just enough for one trip, capped at kBlocksPerSm per SM.
template <typename T>
cudaError_t grid_for(int64_t n, int64_t e0, unsigned& blocks) {
  constexpr int64_t E = kItem<T>;
  const int64_t items = (e0 + n - 1) / E - e0 / E + 1;
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const int64_t need = (items + int64_t(kThreads) * kUnroll - 1) / (int64_t(kThreads) * kUnroll);
  const int64_t cap = int64_t(sms > 0 ? sms : 1) * kBlocksPerSm;
  blocks = static_cast<unsigned>(need < cap ? need : cap);
  return cudaSuccess;
}

template <typename T>
acc_t<T> scale_of(double p) {
  if constexpr (std::is_same_v<T, double>) {
    return dropout_scale_fp64(p);
  } else {
    return dropout_scale_fp32(p);
  }
}

}  // namespace

template <typename T>
cudaError_t forward(const T* x, const T* residual, T* y, T* mask, int64_t n, double p, uint64_t seed,
                    uint64_t offset, int64_t element_offset, cudaStream_t stream) {
  if (const cudaError_t e = check_common(n, p, element_offset); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  if (x == nullptr || residual == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element<T>(x) || !aligned_to_element<T>(residual) || !aligned_to_element<T>(y) ||
      !aligned_to_element<T>(mask))
    return cudaErrorInvalidValue;
  unsigned blocks = 0;
  if (const cudaError_t e = grid_for<T>(n, element_offset, blocks); e != cudaSuccess) return e;
  const Stream st{seed, offset, dropout_threshold(p)};
  const acc_t<T> s = scale_of<T>(p);
  if (mask != nullptr) {
    forward_kernel<T, true><<<blocks, kThreads, 0, stream>>>(x, residual, y, mask, n, element_offset, st, s);
  } else {
    forward_kernel<T, false><<<blocks, kThreads, 0, stream>>>(x, residual, y, nullptr, n, element_offset, st, s);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward(const T* dy, T* dx, T* dresidual, int64_t n, double p, uint64_t seed, uint64_t offset,
                     int64_t element_offset, cudaStream_t stream) {
  if (const cudaError_t e = check_common(n, p, element_offset); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  if (dy == nullptr || dx == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element<T>(dy) || !aligned_to_element<T>(dx) || !aligned_to_element<T>(dresidual))
    return cudaErrorInvalidValue;
  unsigned blocks = 0;
  if (const cudaError_t e = grid_for<T>(n, element_offset, blocks); e != cudaSuccess) return e;
  const Stream st{seed, offset, dropout_threshold(p)};
  const acc_t<T> s = scale_of<T>(p);
  if (dresidual != nullptr) {
    backward_kernel<T, true><<<blocks, kThreads, 0, stream>>>(dy, dx, dresidual, n, element_offset, st, s);
  } else {
    backward_kernel<T, false><<<blocks, kThreads, 0, stream>>>(dy, dx, nullptr, n, element_offset, st, s);
  }
  return cudaGetLastError();
}

#define NUMGATE_DROPOUT_ADD_INSTANTIATE(T)                                                                         \
  template cudaError_t forward<T>(const T*, const T*, T*, T*, int64_t, double, uint64_t, uint64_t, int64_t,       \
                                  cudaStream_t);                                                                   \
  template cudaError_t backward<T>(const T*, T*, T*, int64_t, double, uint64_t, uint64_t, int64_t, cudaStream_t);
NUMGATE_DROPOUT_ADD_INSTANTIATE(float)
NUMGATE_DROPOUT_ADD_INSTANTIATE(double)
NUMGATE_DROPOUT_ADD_INSTANTIATE(__half)
NUMGATE_DROPOUT_ADD_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_DROPOUT_ADD_INSTANTIATE

}  // namespace numgate::dropout_add
