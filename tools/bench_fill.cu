// numgate-bench — device-side pseudo-random fill (see bench_fill.h).
#include "bench_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace numgate::bench {
namespace {

/// SplitMix64 finalizer: a bijective 64-bit mix, good enough to decorrelate indices.
__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__device__ __forceinline__ T convert(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, std::size_t n, std::uint64_t seed, float lo, float hi,
                            bool random_sign) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + i);
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits: [0, 1)
    float v = lo + (hi - lo) * u;
    if (random_sign && ((h >> 39) & 1u)) v = -v;
    dst[i] = convert<T>(v);
  }
}

template <typename T>
cudaError_t launch(void* dst, std::size_t n, std::uint64_t seed, float lo, float hi,
                   bool random_sign, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const std::size_t want = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);  // grid-stride beyond
  fill_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst), n, seed, lo, hi, random_sign);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_random(void* dst, FillType type, std::size_t n, std::uint64_t seed, float lo,
                        float hi, bool random_sign, cudaStream_t stream) {
  if (dst == nullptr && n > 0) return cudaErrorInvalidValue;
  switch (type) {
    case FillType::fp32:
      return launch<float>(dst, n, seed, lo, hi, random_sign, stream);
    case FillType::fp64:
      return launch<double>(dst, n, seed, lo, hi, random_sign, stream);
    case FillType::fp16:
      return launch<__half>(dst, n, seed, lo, hi, random_sign, stream);
    case FillType::bf16:
      return launch<__nv_bfloat16>(dst, n, seed, lo, hi, random_sign, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace numgate::bench
