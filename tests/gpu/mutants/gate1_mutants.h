// Deliberately wrong backward kernels for gate 1 on the GPU (tests/gpu/test_gate1.cpp):
// derivative errors that the golden, the reference and the target could share, so gate 2
// cannot see them. Each runs after the real backward kernel on the same FP64 buffers and
// rewrites one gradient with the wrong formula. Double only; row-major, contiguous; every
// pointer a device pointer; asynchronous on `stream`. Test use only, never shipped.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::gate1_mutant {

/// RMSNorm dx = rstd * dy * w: the -rstd^3 x mean(dy w x) term dropped. x, w, dy: [rows,
/// hidden], [hidden], [rows, hidden]; rstd = 1 / sqrt(mean(x^2) + eps).
cudaError_t rmsnorm_dx_without_mean_term(const double* x, const double* w, const double* dy, double* dx,
                                         std::int64_t rows, std::int64_t hidden, double eps, cudaStream_t stream);
/// dx -= d: fused add + RMSNorm's dx without the residual branch's upstream gradient.
cudaError_t subtract(double* dx, const double* d, std::int64_t n, cudaStream_t stream);
/// SwiGLU da = dy * b * sigmoid(a): silu'(a) taken as sigmoid(a).
cudaError_t swiglu_da_as_sigmoid(const double* a, const double* b, const double* dy, double* da, std::int64_t n,
                                 cudaStream_t stream);
/// GeGLU (erf) da = dy * b * Phi(a): gelu'(a) without the a phi(a) term.
cudaError_t geglu_da_as_phi(const double* a, const double* b, const double* dy, double* da, std::int64_t n,
                            cudaStream_t stream);
/// dx /= scale: softmax's backward without the logit scale's chain-rule factor.
cudaError_t divide(double* dx, std::int64_t n, double scale, cudaStream_t stream);
/// dlogits /= 1 - tanh(logits / cap)^2: cross-entropy's backward without the soft cap's
/// derivative (nothing for cap == 0).
cudaError_t ce_without_softcap_derivative(const double* logits, double* dlogits, std::int64_t n, double cap,
                                          cudaStream_t stream);

}  // namespace numgate::gate1_mutant
