// RMSNorm kernel MUTANTS — deliberately broken forward kernels. They are not part of
// the reference kernel set: the replay tests launch them on chosen fixture cases and
// require that the test bed catches each one (tests/gpu/test_replay.cpp,
// ReplayMutants). Simple on purpose: one block per row, thread 0 computes the row's
// statistics serially, all threads write.
//
//   skip_last_element     never writes y[r, hidden-1]      -> poison / two-launch check
//   write_past_end        also writes one element past y   -> guard band check
//   bf16_sum_of_squares   sum of x^2 accumulated in bf16   -> numeric gate
//   eps_outside_sqrt      r = 1 / (sqrt(mean x^2) + eps)   -> numeric gate (near-zero variance)
//   none                  the unbroken kernel: the control, must pass every check
//
// And weight-gradient kernels of the atomics kind (backward_dw_atomic; one block per row,
// the row's terms added to the column totals), launched as a pass declared
// nondeterministic (every launch gated):
//   output_dtype_atomics  atomicAdd in bf16 directly into dw      -> decidable rounding / gate
//   lost_update           plain read-modify-write (a race)        -> numeric gate
//   none                  atomicAdd into an FP32 accumulator: the control, must pass
#include <cuda_bf16.h>

#include "mutants/rmsnorm_mutants.h"

namespace numgate::rmsnorm::mutant {
namespace {

__device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float to_f(float v) { return v; }
template <typename T>
__device__ T from_f(float v);
template <>
__device__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ float from_f<float>(float v) { return v; }

template <typename T>
__global__ void forward_kernel(const T* x, const T* w, T* y, std::int64_t rows, std::int64_t hidden, float eps,
                               Kind kind) {
  __shared__ float rstd;
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  if (threadIdx.x == 0) {
    float ss = 0.0f;
    for (std::int64_t i = 0; i < hidden; ++i) {
      const float v = to_f(xr[i]);
      ss = kind == Kind::bf16_sum_of_squares ? __bfloat162float(__float2bfloat16_rn(ss + v * v)) : ss + v * v;
    }
    const float ms = ss / static_cast<float>(hidden);
    rstd = kind == Kind::eps_outside_sqrt ? 1.0f / (sqrtf(ms) + eps) : 1.0f / sqrtf(ms + eps);
  }
  __syncthreads();
  const std::int64_t end = kind == Kind::skip_last_element ? hidden - 1 : hidden;
  for (std::int64_t i = threadIdx.x; i < end; i += blockDim.x) yr[i] = from_f<T>((to_f(xr[i]) * rstd) * to_f(w[i]));
  if (kind == Kind::write_past_end && row == rows - 1 && threadIdx.x == 0) yr[hidden] = yr[0];
}

// One block per row: thread 0 computes rstd serially (as forward_kernel), then every
// thread adds dy * (x * rstd) of its columns to the column totals.
template <typename T>
__global__ void dw_atomic_kernel(const T* x, const T* dy, T* dw, float* acc, std::int64_t hidden, float eps,
                                 AtomicKind kind) {
  __shared__ float rstd;
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  const T* dyr = dy + row * hidden;
  if (threadIdx.x == 0) {
    float ss = 0.0f;
    for (std::int64_t i = 0; i < hidden; ++i) ss += to_f(xr[i]) * to_f(xr[i]);
    rstd = 1.0f / sqrtf(ss / static_cast<float>(hidden) + eps);
  }
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float term = to_f(dyr[i]) * (to_f(xr[i]) * rstd);
    if (kind == AtomicKind::output_dtype_atomics) {
      atomicAdd(dw + i, from_f<T>(term));
    } else if (kind == AtomicKind::lost_update) {
      volatile float* a = acc + i;
      *a = *a + term;
    } else {
      atomicAdd(acc + i, term);
    }
  }
}

template <typename T>
__global__ void round_kernel(const float* acc, T* dw, std::int64_t hidden) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < hidden) dw[i] = from_f<T>(acc[i]);
}

}  // namespace

const char* name(AtomicKind k) {
  switch (k) {
    case AtomicKind::none: return "none";
    case AtomicKind::output_dtype_atomics: return "output_dtype_atomics";
    case AtomicKind::lost_update: return "lost_update";
  }
  return "?";
}

std::size_t atomic_workspace_bytes(std::int64_t hidden) { return static_cast<std::size_t>(hidden) * sizeof(float); }

template <typename T>
cudaError_t backward_dw_atomic(AtomicKind kind, const T* x, const T* dy, T* dw, std::int64_t rows,
                               std::int64_t hidden, double eps, void* workspace, cudaStream_t stream) {
  if (rows <= 0 || hidden < 1) return cudaErrorInvalidValue;
  float* acc = static_cast<float*>(workspace);
  cudaError_t err = kind == AtomicKind::output_dtype_atomics
                        ? cudaMemsetAsync(dw, 0, static_cast<std::size_t>(hidden) * sizeof(T), stream)
                        : cudaMemsetAsync(acc, 0, atomic_workspace_bytes(hidden), stream);
  if (err != cudaSuccess) return err;
  dw_atomic_kernel<T><<<static_cast<unsigned>(rows), 128, 0, stream>>>(x, dy, dw, acc, hidden,
                                                                       static_cast<float>(eps), kind);
  if ((err = cudaGetLastError()) != cudaSuccess || kind == AtomicKind::output_dtype_atomics) return err;
  round_kernel<T><<<static_cast<unsigned>((hidden + 255) / 256), 256, 0, stream>>>(acc, dw, hidden);
  return cudaGetLastError();
}

template cudaError_t backward_dw_atomic<float>(AtomicKind, const float*, const float*, float*, std::int64_t,
                                               std::int64_t, double, void*, cudaStream_t);
template cudaError_t backward_dw_atomic<__nv_bfloat16>(AtomicKind, const __nv_bfloat16*, const __nv_bfloat16*,
                                                       __nv_bfloat16*, std::int64_t, std::int64_t, double, void*,
                                                       cudaStream_t);

const char* name(Kind k) {
  switch (k) {
    case Kind::none: return "none";
    case Kind::skip_last_element: return "skip_last_element";
    case Kind::write_past_end: return "write_past_end";
    case Kind::bf16_sum_of_squares: return "bf16_sum_of_squares";
    case Kind::eps_outside_sqrt: return "eps_outside_sqrt";
  }
  return "?";
}

template <typename T>
cudaError_t forward(Kind kind, const T* x, const T* w, T* y, std::int64_t rows, std::int64_t hidden, double eps,
                    cudaStream_t stream) {
  if (rows <= 0 || hidden < 1) return cudaErrorInvalidValue;
  forward_kernel<T><<<static_cast<unsigned>(rows), 128, 0, stream>>>(x, w, y, rows, hidden, static_cast<float>(eps),
                                                                     kind);
  return cudaGetLastError();
}

template cudaError_t forward<float>(Kind, const float*, const float*, float*, std::int64_t, std::int64_t, double,
                                    cudaStream_t);
template cudaError_t forward<__nv_bfloat16>(Kind, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                            std::int64_t, std::int64_t, double, cudaStream_t);

}  // namespace numgate::rmsnorm::mutant
