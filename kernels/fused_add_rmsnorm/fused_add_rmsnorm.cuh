// numgate — fused residual-add + RMSNorm target kernels: public launcher API.
//
// The pre-norm residual step of Llama/Qwen-style decoders fused into one kernel (as in
// vLLM's fused_add_rms_norm and FlashInfer's fused_add_rmsnorm), with RMSNorm from
// Zhang & Sennrich 2019 (arXiv:1910.07467). Per row r, with h the FP32 (acc) sum:
//
//   h[r,i]            = acc(x[r,i]) + acc(residual[r,i])
//   residual_out[r,i] = T(h[r,i])                     (the new residual stream)
//   rstd_r            = 1 / sqrt( (1/H) * sum_i h[r,i]^2 + eps )   <- from h, not from T(h)
//   y[r,i]            = (h[r,i] * rstd_r) * w[i]
//
// Backward, given the upstream gradients dy (of y) and d_residual_out (of residual_out),
// with g = dy * w and hhat = h * rstd:
//
//   dh[r,i] = rstd_r * ( g[r,i] - hhat[r,i] * rstd_r * (1/H) * sum_j g[r,j] * h[r,j] )
//             + d_residual_out[r,i]
//   dx = d_residual = dh      (h = x + residual: both inputs get the same gradient, so
//                              ONE tensor dx is computed; use it for residual too)
//   dw[i]   = sum_r dy[r,i] * hhat[r,i]
//
// Shapes: x, residual, residual_out, y, dy, d_residual_out, dx row-major [rows, hidden];
// w, dw [hidden]. Element types T: float, __nv_bfloat16, __half, double; acc = float
// (double for T = double); each output rounded once to T (RNE). residual_out is the
// correctly rounded sum: for fp32 the FP32 add is; for bf16/fp16 (p = 8/11 bits) the FP32
// sum of two T values is exact when their exponents differ by <= 24 - p - 1, and
// otherwise the smaller one is below 2^-(p+1) of the larger one's binade, so the exact sum
// lies >= 2^(e-p-1) from any T rounding midpoint, far beyond the FP32 rounding error
// (< 2^(e-23)): rounding FP32 -> T gives the same T value as rounding the exact sum.
// (Checked bitwise against round_to_dtype(golden) on every case by a CPU test.)
//
// Alignment: pointers aligned to sizeof(T), nothing more. No overlap (no in-place
// residual update: residual_out is a separate buffer). Deterministic (no atomics); a row's
// outputs do not depend on the number of rows launched.
//
// Errors: cudaErrorInvalidValue without launching for rows < 0 or > 2^31 - 1, hidden < 1
// or > 65536, null pointers (when rows > 0; dw always), pointers not aligned to
// sizeof(T), (backward) a null or too small workspace. Otherwise cudaGetLastError() after
// enqueueing on `stream`; never synchronizes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::fused_add_rmsnorm {

/// Forward on `stream`: residual_out = T(h), y = T((h * r) * acc(w)), h = acc(x) + acc(residual),
/// r = 1 / sqrt(sum h^2 / hidden + acc(eps)).
/// @param x, residual  device, [rows, hidden] inputs (the sublayer output and the residual stream)
/// @param w            device, [hidden] weight
/// @param residual_out device, [rows, hidden] output T(x + residual)
/// @param y            device, [rows, hidden] output RMSNorm(x + residual) * w
/// @param rows, hidden 0 <= rows <= 2^31 - 1, 1 <= hidden <= 65536
/// @param eps          inside the square root
template <typename T>
cudaError_t forward(const T* x, const T* residual, const T* w, T* residual_out, T* y, int64_t rows,
                    int64_t hidden, double eps, cudaStream_t stream);

/// Device workspace bytes backward() needs (sized for double; any alignment accepted).
size_t backward_workspace_bytes(int64_t rows, int64_t hidden);

/// Backward on `stream`:
///   g = acc(dy) * acc(w) ; r as in forward ; mgh = (sum g * h) / hidden ; hhat = h * r
///   dx = T( r * (g - hhat * (r * mgh)) + acc(d_residual_out) )      (= gradient of residual)
///   dw_j = T( sum_rows acc(dy[r,j]) * hhat[r,j] )                     (deterministic two-stage sum)
/// @param x, residual      device, [rows, hidden] forward inputs
/// @param w                device, [hidden]
/// @param dy               device, [rows, hidden] gradient of y
/// @param d_residual_out   device, [rows, hidden] gradient of residual_out
/// @param dx               device, [rows, hidden] gradient of x and of residual
/// @param dw               device, [hidden] (overwritten; zeros when rows == 0)
template <typename T>
cudaError_t backward(const T* x, const T* residual, const T* w, const T* dy, const T* d_residual_out, T* dx,
                     T* dw, int64_t rows, int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream);

#define NUMGATE_FUSED_ADD_RMSNORM_DECL(T)                                                                   \
  extern template cudaError_t forward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, double,   \
                                         cudaStream_t);                                                     \
  extern template cudaError_t backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, int64_t, \
                                          int64_t, double, void*, size_t, cudaStream_t);
NUMGATE_FUSED_ADD_RMSNORM_DECL(float)
NUMGATE_FUSED_ADD_RMSNORM_DECL(double)
NUMGATE_FUSED_ADD_RMSNORM_DECL(__half)
NUMGATE_FUSED_ADD_RMSNORM_DECL(__nv_bfloat16)
#undef NUMGATE_FUSED_ADD_RMSNORM_DECL

}  // namespace numgate::fused_add_rmsnorm
