// numgate — LayerNorm target kernels: public launcher API.
//
// LayerNorm (Ba, Kiros & Hinton 2016, "Layer Normalization", arXiv:1607.06450), in the
// form of torch.nn.functional.layer_norm over the last dimension with weight and bias
// (biased variance, eps inside the square root). For row r of x:
//
//   mean_r  = (1/H) * sum_i x[r,i]
//   var_r   = (1/H) * sum_i (x[r,i] - mean_r)^2        (two-pass over the cached row)
//   rstd_r  = 1 / sqrt(var_r + eps)
//   xhat    = (x[r,i] - mean_r) * rstd_r
//   y[r,i]  = xhat * w[i] + b[i]
//
// Backward, with g[r,i] = dy[r,i] * w[i]:
//
//   dx[r,i] = rstd_r * ( g[r,i] - mean_j g[r,j] - xhat[r,i] * mean_j(g[r,j] * xhat[r,j]) )
//   dw[i]   = sum_r dy[r,i] * xhat[r,i]
//   db[i]   = sum_r dy[r,i]
//
// Shapes and layout: x, y, dy, dx are row-major [rows, hidden] (contiguous, row stride =
// hidden elements); w, b, dw, db are [hidden]. "rows" is the product of all leading
// dimensions of the framework tensor (e.g. batch * sequence).
//
// Element types T: float, __nv_bfloat16, __half, double. All arithmetic is done in
// acc = float (double for T = double) and each output is rounded once to T (round to
// nearest even). The exact order of operations is documented in layernorm_kernels.cu.
//
// Alignment: every pointer must be aligned to sizeof(T). No other alignment is assumed:
// each tensor is read and written with 16-byte vector accesses where its own alignment
// allows, else element-wise. Tensors must not overlap (no in-place operation).
//
// Row length: a row is cached in registers (one pass over x), so its 16-byte units must
// fit one block: with VEC = 16 / sizeof(T) (4 fp32, 8 bf16/fp16, 2 fp64), a row may span
// at most U = 4096 units (fp64: 2048), i.e. hidden <= U * VEC when hidden % VEC == 0 and
// x is 16-byte aligned (fp32 16384, bf16/fp16 32768, fp64 4096), and
// hidden <= (U - 1) * VEC + 1 for any alignment (fp32 16381, bf16/fp16 32761, fp64 4095).
//
// Determinism: no atomics. Repeated calls with the same pointers, shapes and data give
// bitwise identical outputs, on any GPU (launch shapes do not depend on the device).
// dx and y of a row do not depend on how many rows are launched with it.
//
// Errors: the launchers validate their arguments and return cudaErrorInvalidValue
// without launching anything for
//   * rows < 0 or rows > 2^31 - 1, hidden < 1, or a row longer than the limit above;
//   * a null tensor pointer when rows > 0 (for backward, dw and db must be non-null always);
//   * a pointer not aligned to sizeof(T);
//   * (backward) a null workspace or workspace_bytes < backward_workspace_bytes(rows, hidden).
// Otherwise they return cudaGetLastError() after enqueueing the kernels on `stream`.
// They never synchronize; asynchronous faults surface later.
//
// This header is plain host C++ (compiles with g++); the kernels live in
// layernorm_kernels.cu, which explicitly instantiates the templates for the four types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::layernorm {

/// LayerNorm forward on `stream`:
///   mean = sum_i float(x_i) / hidden ; d_i = float(x_i) - mean
///   rstd = 1 / sqrt( sum_i d_i^2 / hidden + float(eps) )
///   y_i  = T( (d_i * rstd) * float(w_i) + float(b_i) )
/// (double instead of float for T = double).
///
/// @param x       device, [rows, hidden] row-major input
/// @param w, b    device, [hidden] weight (gamma) and bias (beta)
/// @param y       device, [rows, hidden] output; must not overlap the inputs
/// @param rows    number of rows, 0 <= rows <= 2^31 - 1 (0: nothing is launched)
/// @param hidden  normalized dimension, >= 1 and within the row-length limit (file comment)
/// @param eps     added to the variance before the square root (torch default 1e-5),
///                converted to the accumulation type once
/// @param stream  CUDA stream (0 = legacy default stream)
/// @return cudaSuccess, cudaErrorInvalidValue for bad arguments, or the launch error.
template <typename T>
cudaError_t forward(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t hidden, double eps,
                    cudaStream_t stream);

/// Bytes of device workspace that backward() needs for this shape, for every element
/// type (sized for the widest accumulation type, double), including slack so that the
/// workspace pointer may have any alignment. Holds mean and rstd per row and the
/// per-chunk partial sums of dw and db. Returns 0 for rows == 0 and for hidden < 1 or
/// hidden > 32768 (backward rejects those itself).
size_t backward_workspace_bytes(int64_t rows, int64_t hidden);

/// LayerNorm backward on `stream`:
///   mean, d_i, rstd as in forward ; g_i = float(dy_i) * float(w_i)
///   a    = (sum_i g_i) / hidden ;  c = rstd * ((sum_i g_i * d_i) / hidden)
///   xhat = d_i * rstd
///   dx_i = T( rstd * ((g_i - a) - xhat * c) )
///   dw_j = T( sum_rows float(dy[r,j]) * xhat[r,j] ) ;  db_j = T( sum_rows float(dy[r,j]) )
/// dw and db are summed over rows by a deterministic two-stage reduction in the
/// accumulation type (per-chunk partials in the workspace, then a fixed-order sum over
/// chunks); the chunking depends only on (rows, hidden).
///
/// @param x, dy   device, [rows, hidden]: forward input and gradient of y
/// @param w       device, [hidden] weight (the bias does not enter the gradients)
/// @param dx      device, [rows, hidden] gradient of x
/// @param dw, db  device, [hidden] gradients of w and b (overwritten; zeros when rows == 0)
/// @param rows, hidden, eps, stream   as for forward()
/// @param workspace        device scratch of at least backward_workspace_bytes(rows, hidden)
///                         bytes, any alignment, untouched until the launched work finishes
/// @param workspace_bytes  size of `workspace` in bytes
/// @return cudaSuccess, cudaErrorInvalidValue for bad arguments, or the launch error.
template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t rows, int64_t hidden,
                     double eps, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Explicit instantiations live in layernorm_kernels.cu; these are the supported types.
#define NUMGATE_LAYERNORM_EXTERN(T)                                                                       \
  extern template cudaError_t forward<T>(const T*, const T*, const T*, T*, int64_t, int64_t, double,     \
                                         cudaStream_t);                                                   \
  extern template cudaError_t backward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,    \
                                          double, void*, size_t, cudaStream_t);
NUMGATE_LAYERNORM_EXTERN(float)
NUMGATE_LAYERNORM_EXTERN(double)
NUMGATE_LAYERNORM_EXTERN(__half)
NUMGATE_LAYERNORM_EXTERN(__nv_bfloat16)
#undef NUMGATE_LAYERNORM_EXTERN

}  // namespace numgate::layernorm
