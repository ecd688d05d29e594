// numgate — OffsetRMSNorm target kernels: public launcher API.
//
// OffsetRMSNorm is RMSNorm (Zhang & Sennrich 2019, arXiv:1910.07467) with zero-centred
// weights: the stored parameter w is an offset from 1, as in Gemma
// (transformers GemmaRMSNorm.forward: `output * (1.0 + self.weight.float())`) and in the
// Qwen3-Next / Qwen3.5 "zero-centred" RMSNorm. Per row r of x [rows, hidden]:
//
//   rstd_r  = 1 / sqrt( (1/H) * sum_i x[r,i]^2 + eps )
//   wp_i    = 1 + w[i]                      (formed in FP32 from the stored weight)
//   y[r,i]  = (x[r,i] * rstd_r) * wp_i
//
// Backward, with g[r,i] = dy[r,i] * wp_i and xhat[r,i] = x[r,i] * rstd_r:
//
//   dx[r,i] = rstd_r * ( g[r,i] - xhat[r,i] * rstd_r * (1/H) * sum_j g[r,j] * x[r,j] )
//   dw[i]   = sum_r dy[r,i] * xhat[r,i]            (d(1 + w)/dw = 1: same as RMSNorm's dw)
//
// Shapes and layout: x, y, dy, dx row-major [rows, hidden] (row stride = hidden
// elements); w and dw are [hidden]. rows = product of the leading dimensions.
//
// Element types T: float, __nv_bfloat16, __half, double. All arithmetic in acc = float
// (double for T = double); each output rounded once to T (round to nearest even). In
// particular 1 + w is formed in acc, never in T: for bf16 w = 3.140625 it is 4.140625
// (bf16 would give 4.125). The order of operations is in offset_rmsnorm_kernels.cu.
//
// Alignment: every pointer aligned to sizeof(T); nothing more is assumed (16-byte vector
// accesses where a tensor's own alignment allows, element-wise otherwise). Tensors must
// not overlap.
//
// Determinism: no atomics; repeated calls give bitwise identical outputs on any GPU. A
// row's dx / y depend only on that row, hidden, the dtype and x's 16-byte phase (never
// on the number of rows launched).
//
// Errors: cudaErrorInvalidValue without launching anything for rows < 0 or
// rows > 2^31 - 1, hidden < 1 or hidden > 65536, a null tensor pointer when rows > 0
// (dw must be non-null always), a pointer not aligned to sizeof(T), or (backward) a null
// workspace / workspace_bytes < backward_workspace_bytes(rows, hidden). Otherwise
// cudaGetLastError() after enqueueing on `stream`; never synchronizes.
//
// Plain host C++ (compiles with g++); explicit instantiations in offset_rmsnorm_kernels.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::offset_rmsnorm {

/// Forward on `stream`:
///   y[r,i] = T( (acc(x[r,i]) * rstd_r) * (1 + acc(w[i])) ),
///   rstd_r = 1 / sqrt( sum_i acc(x[r,i])^2 / hidden + acc(eps) )
/// @param x       device, [rows, hidden] input
/// @param w       device, [hidden] zero-centred weight (the scale is 1 + w)
/// @param y       device, [rows, hidden] output
/// @param rows    0 <= rows <= 2^31 - 1 (0: nothing is launched)
/// @param hidden  1 <= hidden <= 65536
/// @param eps     added to the mean square inside the square root (converted to acc once)
/// @param stream  CUDA stream
template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps,
                    cudaStream_t stream);

/// Device workspace bytes backward() needs (sized for double; any alignment accepted).
/// Holds rstd per row and the per-chunk dw partial sums. 0 for rows == 0 or bad shapes.
size_t backward_workspace_bytes(int64_t rows, int64_t hidden);

/// Backward on `stream`:
///   g_i  = acc(dy_i) * (1 + acc(w_i)) ; r = rstd as in forward ; mgx = (sum_i g_i x_i) / hidden
///   dx_i = T( r * (g_i - (x_i * r) * (r * mgx)) )
///   dw_j = T( sum_rows acc(dy[r,j]) * (acc(x[r,j]) * r_r) )   (deterministic two-stage sum)
/// @param x, dy  device, [rows, hidden]: forward input, gradient of y
/// @param w      device, [hidden] zero-centred weight
/// @param dx     device, [rows, hidden] gradient of x
/// @param dw     device, [hidden] gradient of w (overwritten; zeros when rows == 0)
/// @param workspace, workspace_bytes  scratch of >= backward_workspace_bytes(rows, hidden)
template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                     int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream);

#define NUMGATE_OFFSET_RMSNORM_DECL(T)                                                              \
  extern template cudaError_t forward<T>(const T*, const T*, T*, int64_t, int64_t, double,         \
                                         cudaStream_t);                                             \
  extern template cudaError_t backward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t,   \
                                          double, void*, size_t, cudaStream_t);
NUMGATE_OFFSET_RMSNORM_DECL(float)
NUMGATE_OFFSET_RMSNORM_DECL(double)
NUMGATE_OFFSET_RMSNORM_DECL(__half)
NUMGATE_OFFSET_RMSNORM_DECL(__nv_bfloat16)
#undef NUMGATE_OFFSET_RMSNORM_DECL

}  // namespace numgate::offset_rmsnorm
