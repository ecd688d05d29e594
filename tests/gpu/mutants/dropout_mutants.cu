// dropout_add forward kernel MUTANTS (see dropout_mutants.h): one thread per element, the
// declared numerics (__fadd_rn(__fmul_rn(x, s), residual), a select for dropped elements),
// the stream drawn wrongly. Launched by the replay's family mutant tests
// (tests/gpu/test_family_mutants.cpp), never shipped.
#include "mutants/dropout_mutants.h"

#include <type_traits>

#include "dropout_add/dropout_stream.h"

namespace numgate::dropout_add::mutant {
namespace {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
template <typename T>
__device__ __forceinline__ T narrow(float v) {
  if constexpr (sizeof(T) == 4) {
    return v;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

template <typename T>
__global__ void forward_kernel(Kind kind, const T* x, const T* residual, T* y, T* mask, std::int64_t n,
                               std::uint32_t t, float s, std::uint64_t seed, std::uint64_t offset) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::uint64_t u = static_cast<std::uint64_t>(i);
  const std::uint64_t key = kind == Kind::key_high_word_dropped ? (seed & 0xFFFFFFFFull) : seed;
  const std::uint64_t g = kind == Kind::counter_per_element ? u : u >> 2;
  const unsigned lane = kind == Kind::lanes_permuted ? 3u - static_cast<unsigned>(u & 3u) : static_cast<unsigned>(u & 3u);
  const r123::Philox4x32::ctr_type r = dropout_group(g, key, offset);
  const bool kept = dropout_keep(r[lane], t);
  const float rv = widen(residual[i]);
  y[i] = narrow<T>(kept ? __fadd_rn(__fmul_rn(widen(x[i]), s), rv) : rv);
  mask[i] = narrow<T>(kept ? 1.0f : 0.0f);
}

}  // namespace

const char* name(Kind k) {
  switch (k) {
    case Kind::none: return "none";
    case Kind::counter_per_element: return "counter_per_element";
    case Kind::lanes_permuted: return "lanes_permuted";
    case Kind::key_high_word_dropped: return "key_high_word_dropped";
  }
  return "?";
}

template <typename T>
cudaError_t forward(Kind kind, const T* x, const T* residual, T* y, T* mask, std::int64_t n, double p,
                    std::uint64_t seed, std::uint64_t offset, cudaStream_t stream) {
  if (n <= 0 || !(p >= 0.0 && p < 1.0)) return cudaErrorInvalidValue;
  forward_kernel<T><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      kind, x, residual, y, mask, n, dropout_threshold(p), dropout_scale_fp32(p), seed, offset);
  return cudaGetLastError();
}

template cudaError_t forward<float>(Kind, const float*, const float*, float*, float*, std::int64_t, double,
                                    std::uint64_t, std::uint64_t, cudaStream_t);
template cudaError_t forward<__nv_bfloat16>(Kind, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                            __nv_bfloat16*, std::int64_t, double, std::uint64_t, std::uint64_t,
                                            cudaStream_t);
template cudaError_t forward<__half>(Kind, const __half*, const __half*, __half*, __half*, std::int64_t, double,
                                     std::uint64_t, std::uint64_t, cudaStream_t);

}  // namespace numgate::dropout_add::mutant
