// RoPE target kernels (see rope.cuh for the contract and rope_math.h for the numerics).
//
// Bytes and speed (H200, bf16, numgate-bench kernel clock, run 15; forward and backward are
// the same kernel on other tensors):
//   4x4096 tokens x 32 q heads x 128, 8 kv heads: minimal traffic 335.5 MB (q, k read once,
//     q_rot, k_rot written once, positions), 84.3 us = 3.98 TB/s, 94% of the 4247 GB/s
//     device-to-device copy: DRAM-bound.
//   1x4096x32x128: 83.9 MB, 24.4 us = 3.44 TB/s, 81% of copy; 4x512x32x128: 13.9 us, 59%.
//     What limits the smaller launches is, by the timings (not profiled), the fixed cost of one block per token (cos/sin
//     computed into shared memory and a barrier before the first load is used) at the
//     first wave and the tail, not the bandwidth: Liger's kernel is 2-3 us faster there.
#include <climits>
#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "rope/rope.cuh"
#include "rope/rope_math.h"

namespace numgate::rope {
namespace {

using namespace numgate::device;

constexpr int kMaxThreads = 256;
constexpr int kMaxFreqs = math::kMaxHeadDim / 2;

/// The FP32 inv_freq table, passed by value as a launch parameter (2 KB) and read in
/// place (__grid_constant__: no per-thread copy).
struct InvFreqTable {
  float v[kMaxFreqs];
};

/// positions[t] for any byte alignment of `positions` (the misaligned replay shifts every
/// buffer by one element of the case dtype: 2 or 4 bytes).
__device__ __forceinline__ std::int64_t load_position(const unsigned char* positions, std::int64_t t) {
  const unsigned char* a = positions + t * 8;
  if ((reinterpret_cast<std::uintptr_t>(a) & 7u) == 0) return *reinterpret_cast<const long long*>(a);
  unsigned long long v = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b) v |= static_cast<unsigned long long>(a[b]) << (8 * b);  // little-endian
  return static_cast<std::int64_t>(v);
}

/// The declared rotation in acc: FP32 (rope_math.h) or, for the double instantiation, the
/// same operations in FP64.
__device__ __forceinline__ void rotate_acc(float x1, float x2, float c, float s, float& y1, float& y2) {
  math::rotate(x1, x2, c, s, y1, y2);
}
__device__ __forceinline__ void rotate_acc(double x1, double x2, double c, double s, double& y1, double& y2) {
  y1 = __dsub_rn(__dmul_rn(x1, c), __dmul_rn(x2, s));
  y2 = __dadd_rn(__dmul_rn(x2, c), __dmul_rn(x1, s));
}

/// Rotates item `item` of one token's heads (x, y: that token's [heads, d] rows).
template <typename T, bool kInterleaved>
__device__ __forceinline__ void rotate_item(const T* __restrict__ x, T* __restrict__ y, int item, int d, bool vec,
                                            const acc_t<T>* cs, const acc_t<T>* sn) {
  constexpr int V = kVec<T>;
  const int half = d / 2;
  if (vec) {
    const int per_head = kInterleaved ? d / V : half / V;
    const int h = item / per_head, j = item - h * per_head;
    const T* row = x + static_cast<std::int64_t>(h) * d;
    T* out = y + static_cast<std::int64_t>(h) * d;
    const int lo = j * V;
    if constexpr (kInterleaved) {
      const Unit<T> u = load_unit(row, lo, d, true);
      acc_t<T> r[V];
#pragma unroll
      for (int t = 0; t < V / 2; ++t) {
        const int f = lo / 2 + t;
        rotate_acc(unit_acc(u, 2 * t), unit_acc(u, 2 * t + 1), cs[f], sn[f], r[2 * t], r[2 * t + 1]);
      }
      store_unit(out, lo, d, true, pack_from_acc<T>(r));
    } else {
      const Unit<T> a = load_unit(row, lo, d, true), b = load_unit(row, lo + half, d, true);
      acc_t<T> ra[V], rb[V];
#pragma unroll
      for (int t = 0; t < V; ++t) {
        const int f = lo + t;
        rotate_acc(unit_acc(a, t), unit_acc(b, t), cs[f], sn[f], ra[t], rb[t]);
      }
      store_unit(out, lo, d, true, pack_from_acc<T>(ra));
      store_unit(out, lo + half, d, true, pack_from_acc<T>(rb));
    }
  } else {
    const int h = item / half, f = item - h * half;
    const std::int64_t base = static_cast<std::int64_t>(h) * d;
    const std::int64_t i1 = base + (kInterleaved ? 2 * f : f), i2 = i1 + (kInterleaved ? 1 : half);
    acc_t<T> y1, y2;
    rotate_acc(to_acc(x[i1]), to_acc(x[i2]), cs[f], sn[f], y1, y2);
    y[i1] = from_acc<T>(y1);
    y[i2] = from_acc<T>(y2);
  }
}

template <typename T, bool kInterleaved>
__global__ void __launch_bounds__(kMaxThreads)
    rope_kernel(const T* __restrict__ q, const T* __restrict__ k, const unsigned char* __restrict__ positions,
                T* __restrict__ q_out, T* __restrict__ k_out, int q_heads, int kv_heads, int d, bool inverse,
                bool vec_q, bool vec_k, double theta, const __grid_constant__ InvFreqTable table) {
  using A = acc_t<T>;
  __shared__ A cs[kMaxFreqs], sn[kMaxFreqs];
  const std::int64_t t = blockIdx.x;
  const int half = d / 2;
  const std::int64_t p = load_position(positions, t);
  for (int f = threadIdx.x; f < half; f += blockDim.x) {
    A c, s;
    if constexpr (std::is_same_v<T, double>) {
      // FP64 throughout: inv_freq = theta^(-2f/d), angle = double(p) * inv_freq, sincos.
      const double inv = pow(theta, -static_cast<double>(2 * f) / static_cast<double>(d));
      sincos(__dmul_rn(static_cast<double>(p), inv), &s, &c);
    } else {
      math::cos_sin(math::angle_of(p, table.v[f]), c, s);
    }
    cs[f] = c;
    sn[f] = inverse ? -s : s;  // exact negation: the backward rotates by -angle
  }
  __syncthreads();
  constexpr int V = kVec<T>;
  const int per_head_q = vec_q ? (kInterleaved ? d / V : half / V) : half;
  const int per_head_k = vec_k ? (kInterleaved ? d / V : half / V) : half;
  const int items_q = q_heads * per_head_q, items = items_q + kv_heads * per_head_k;
  const std::int64_t q_off = t * q_heads * d, k_off = t * kv_heads * d;
  for (int it = threadIdx.x; it < items; it += blockDim.x) {
    if (it < items_q)
      rotate_item<T, kInterleaved>(q + q_off, q_out + q_off, it, d, vec_q, cs, sn);
    else
      rotate_item<T, kInterleaved>(k + k_off, k_out + k_off, it - items_q, d, vec_k, cs, sn);
  }
}

bool aligned(const void* p, std::uintptr_t a) { return (reinterpret_cast<std::uintptr_t>(p) % a) == 0; }

}  // namespace

template <typename T>
cudaError_t apply(const T* q, const T* k, const std::int64_t* positions, T* q_out, T* k_out, std::int64_t tokens,
                  std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim, double theta, bool interleaved,
                  bool inverse, cudaStream_t stream) {
  if (tokens < 0 || tokens > INT_MAX || q_heads < 1 || kv_heads < 1 || q_heads % kv_heads != 0 || head_dim < 2 ||
      head_dim % 2 != 0 || head_dim > math::kMaxHeadDim || !(theta > 0.0) ||
      (q_heads + kv_heads) * (head_dim / 2) > INT_MAX)
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  if (!q || !k || !positions || !q_out || !k_out) return cudaErrorInvalidValue;
  for (const void* p : {static_cast<const void*>(q), static_cast<const void*>(k), static_cast<const void*>(q_out),
                        static_cast<const void*>(k_out)})
    if (!aligned(p, sizeof(T))) return cudaErrorInvalidValue;

  InvFreqTable table{};  // the FP32 policy's table (unused by the double instantiation)
  for (std::int64_t f = 0; f < head_dim / 2; ++f) table.v[f] = math::inv_freq(theta, f, head_dim);

  constexpr int V = kVec<T>;
  const int d = static_cast<int>(head_dim), half = d / 2;
  const bool shape_vec = interleaved ? d % V == 0 : half % V == 0;
  const bool vec_q = shape_vec && aligned(q, 16) && aligned(q_out, 16);
  const bool vec_k = shape_vec && aligned(k, 16) && aligned(k_out, 16);
  const std::int64_t per_q = vec_q ? (interleaved ? d / V : half / V) : half;
  const std::int64_t per_k = vec_k ? (interleaved ? d / V : half / V) : half;
  const std::int64_t items = q_heads * per_q + kv_heads * per_k;
  const int threads = static_cast<int>(items >= kMaxThreads ? kMaxThreads : ((items + 31) / 32) * 32);

  const auto* pos = reinterpret_cast<const unsigned char*>(positions);
  const int hq = static_cast<int>(q_heads), hkv = static_cast<int>(kv_heads);
  const dim3 grid(static_cast<unsigned>(tokens));
  if (interleaved)
    rope_kernel<T, true><<<grid, threads, 0, stream>>>(q, k, pos, q_out, k_out, hq, hkv, d, inverse, vec_q, vec_k,
                                                       theta, table);
  else
    rope_kernel<T, false><<<grid, threads, 0, stream>>>(q, k, pos, q_out, k_out, hq, hkv, d, inverse, vec_q, vec_k,
                                                        theta, table);
  return cudaGetLastError();
}

#define NUMGATE_ROPE_INSTANTIATE(T)                                                                        \
  template cudaError_t apply<T>(const T*, const T*, const std::int64_t*, T*, T*, std::int64_t, std::int64_t, \
                                std::int64_t, std::int64_t, double, bool, bool, cudaStream_t);
NUMGATE_ROPE_INSTANTIATE(float)
NUMGATE_ROPE_INSTANTIATE(double)
NUMGATE_ROPE_INSTANTIATE(__half)
NUMGATE_ROPE_INSTANTIATE(__nv_bfloat16)
#undef NUMGATE_ROPE_INSTANTIATE

}  // namespace numgate::rope
