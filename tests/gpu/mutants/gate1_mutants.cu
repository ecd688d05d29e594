// Wrong derivatives for gate 1 on the GPU (see gate1_mutants.h). Plain one-thread-per-
// element kernels, and one block per row for RMSNorm's row statistic.
#include "mutants/gate1_mutants.h"

namespace numgate::gate1_mutant {
namespace {

constexpr int kThreads = 256;
unsigned blocks_of(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void rms_dx_kernel(const double* x, const double* w, const double* dy, double* dx, std::int64_t hidden,
                              double eps) {
  __shared__ double part[kThreads];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * hidden;
  double ss = 0;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) ss += x[base + i] * x[base + i];
  part[threadIdx.x] = ss;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const double rstd = 1.0 / sqrt(part[0] / static_cast<double>(hidden) + eps);
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dx[base + i] = rstd * dy[base + i] * w[i];
}

__global__ void subtract_kernel(double* dx, const double* d, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] -= d[i];
}

__global__ void swiglu_kernel(const double* a, const double* b, const double* dy, double* da, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) da[i] = dy[i] * b[i] / (1.0 + exp(-a[i]));
}

__global__ void geglu_kernel(const double* a, const double* b, const double* dy, double* da, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) da[i] = dy[i] * b[i] * 0.5 * erfc(-a[i] * 0.70710678118654752440);
}

__global__ void divide_kernel(double* dx, std::int64_t n, double scale) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] /= scale;
}

__global__ void softcap_kernel(const double* logits, double* dlogits, std::int64_t n, double cap) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double t = tanh(logits[i] / cap);
  if (isfinite(t)) dlogits[i] /= 1.0 - t * t;
}

}  // namespace

cudaError_t rmsnorm_dx_without_mean_term(const double* x, const double* w, const double* dy, double* dx,
                                         std::int64_t rows, std::int64_t hidden, double eps, cudaStream_t stream) {
  if (rows <= 0 || hidden <= 0) return cudaSuccess;
  rms_dx_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, dy, dx, hidden, eps);
  return cudaGetLastError();
}
cudaError_t subtract(double* dx, const double* d, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  subtract_kernel<<<blocks_of(n), kThreads, 0, stream>>>(dx, d, n);
  return cudaGetLastError();
}
cudaError_t swiglu_da_as_sigmoid(const double* a, const double* b, const double* dy, double* da, std::int64_t n,
                                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  swiglu_kernel<<<blocks_of(n), kThreads, 0, stream>>>(a, b, dy, da, n);
  return cudaGetLastError();
}
cudaError_t geglu_da_as_phi(const double* a, const double* b, const double* dy, double* da, std::int64_t n,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  geglu_kernel<<<blocks_of(n), kThreads, 0, stream>>>(a, b, dy, da, n);
  return cudaGetLastError();
}
cudaError_t divide(double* dx, std::int64_t n, double scale, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  divide_kernel<<<blocks_of(n), kThreads, 0, stream>>>(dx, n, scale);
  return cudaGetLastError();
}
cudaError_t ce_without_softcap_derivative(const double* logits, double* dlogits, std::int64_t n, double cap,
                                          cudaStream_t stream) {
  if (n <= 0 || cap == 0) return cudaSuccess;
  softcap_kernel<<<blocks_of(n), kThreads, 0, stream>>>(logits, dlogits, n, cap);
  return cudaGetLastError();
}

}  // namespace numgate::gate1_mutant
