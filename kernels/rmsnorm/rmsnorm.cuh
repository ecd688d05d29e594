// numgate — RMSNorm target kernels: public launcher API.
//
// RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization",
// arXiv:1910.07467), in the form used by Llama and Qwen3 (no mean subtraction, no bias,
// eps inside the square root, weight applied after normalizing):
//
//   rstd_r  = 1 / sqrt( (1/H) * sum_i x[r,i]^2 + eps )
//   y[r,i]  = (x[r,i] * rstd_r) * w[i]
//
// Backward, with g[r,i] = dy[r,i] * w[i] and xhat[r,i] = x[r,i] * rstd_r:
//
//   dx[r,i] = rstd_r * ( g[r,i] - xhat[r,i] * rstd_r * (1/H) * sum_j g[r,j] * x[r,j] )
//   dw[i]   = sum_r dy[r,i] * xhat[r,i]
//
// Shapes and layout: x, y, dy, dx are row-major [rows, hidden] (contiguous, row
// stride = hidden elements); w and dw are [hidden]. "rows" is the product of all
// leading dimensions of the framework tensor (e.g. batch * sequence).
//
// Element types T: float, __nv_bfloat16, __half, double. All arithmetic is done in
// acc = float (double for T = double) and each output is rounded once to T (round to
// nearest even). The exact order of operations is documented in rmsnorm_kernels.cu.
//
// Alignment: every pointer must be aligned to sizeof(T) (cudaMalloc'd buffers and any
// element offset into them are). No other alignment is assumed: each tensor is read and
// written with 16-byte vector accesses where its own alignment allows, else element-wise.
// Tensors must not overlap (no in-place operation).
//
// Determinism: forward() and backward() use no atomics. Repeated calls with the same
// pointers, shapes and data give bitwise identical outputs, on any GPU (launch shapes do
// not depend on the device). backward_atomic_dw() is the one NONDETERMINISTIC launcher:
// its dw sums the per-chunk partials with atomicAdd, in whatever order the blocks arrive
// (dx is backward()'s, bitwise).
//
// Errors: the launchers validate their arguments and return cudaErrorInvalidValue
// without launching anything for
//   * rows < 0 or rows > 2^31 - 1, hidden < 1 or hidden > 65536;
//   * a null tensor pointer when rows > 0 (for backward, dw must be non-null always);
//   * a pointer not aligned to sizeof(T);
//   * (backward) a null workspace or workspace_bytes < backward_workspace_bytes(rows, hidden).
// Otherwise they return cudaGetLastError() after enqueueing the kernels on `stream`
// (launch errors). They never synchronize; asynchronous faults surface later.
//
// This header is plain host C++ (compiles with g++), so host code can call the
// launchers; the kernels live in rmsnorm_kernels.cu, which explicitly instantiates the
// templates for the four element types above.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::rmsnorm {

/// RMSNorm forward on `stream`:
///   y[r, i] = T( (float(x[r,i]) * rstd_r) * float(w[i]) ),
///   rstd_r  = 1 / sqrt( sum_i float(x[r,i])^2 / hidden + float(eps) )
/// (double instead of float for T = double).
///
/// @param x       device, [rows, hidden] row-major input
/// @param w       device, [hidden] weight (gamma)
/// @param y       device, [rows, hidden] output; must not overlap x or w
/// @param rows    number of rows, 0 <= rows <= 2^31 - 1 (0: nothing is launched)
/// @param hidden  normalized dimension, 1 <= hidden <= 65536
/// @param eps     added to the mean square before the square root (typically 1e-6 or
///                1e-5), converted to the accumulation type once
/// @param stream  CUDA stream (0 = legacy default stream)
/// @return cudaSuccess, cudaErrorInvalidValue for bad arguments (see the file
///         comment), or the launch error from cudaGetLastError().
template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps,
                    cudaStream_t stream);

/// Bytes of device workspace that backward() needs for this shape, for every element
/// type (sized for the widest accumulation type, double). Includes slack so that the
/// workspace pointer handed to backward() may have any alignment. The workspace holds
/// the FP32 (FP64 for double) per-chunk partial sums of dw and, on the path that
/// computes them in a separate pass, rstd per row.
/// Returns 0 for rows == 0 and for invalid shapes (backward rejects those itself).
size_t backward_workspace_bytes(int64_t rows, int64_t hidden);

/// RMSNorm backward on `stream`. Computes the input and weight gradients:
///   g_i   = float(dy_i) * float(w_i)
///   rstd  = 1 / sqrt( sum_i x_i^2 / hidden + eps )              (same as forward)
///   mgx   = ( sum_i g_i * x_i ) / hidden
///   dx_i  = T( rstd * (g_i - (x_i * rstd) * (rstd * mgx)) )
///   dw_j  = T( sum_r dy[r,j] * (x[r,j] * rstd_r) )
/// dw is summed over rows by a deterministic two-stage reduction in the accumulation
/// type (per-chunk partials in the workspace, then a fixed-order sum over chunks).
///
/// @param x, dy   device, [rows, hidden] row-major: forward input and gradient of y
/// @param w       device, [hidden] weight
/// @param dx      device, [rows, hidden] output gradient of x
/// @param dw      device, [hidden] output gradient of w (overwritten, not accumulated;
///                all zeros when rows == 0)
/// @param rows, hidden, eps, stream   as for forward()
/// @param workspace        device scratch of at least backward_workspace_bytes(rows,
///                         hidden) bytes, any alignment; contents on entry are ignored,
///                         and it must stay untouched until the launched work finishes
/// @param workspace_bytes  size of `workspace` in bytes
/// @return cudaSuccess, cudaErrorInvalidValue for bad arguments (see the file
///         comment), or the launch error from cudaGetLastError().
template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                     int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream);

/// Bytes of device workspace that backward_atomic_dw() needs: backward_workspace_bytes()
/// plus the [hidden] accumulator of dw (widest type, aligned). 0 as backward_workspace_bytes.
size_t backward_atomic_dw_workspace_bytes(int64_t rows, int64_t hidden);

/// RMSNorm backward with an atomics-based weight-gradient reduction: NONDETERMINISTIC.
/// dx, and the per-chunk partial sums of dw, are computed exactly as by backward(); then
/// dw_j = T( sum over chunks c of partial[c][j] ), the sum taken by atomicAdd into a
/// [hidden] accumulator in acc (zeroed on `stream` first), in the order in which the
/// chunks' threads arrive, which varies between launches: dw may differ in its last bits
/// from launch to launch (each result a legitimate FP32 summation order; numgate gates every
/// distinct result of kNondeterministicLaunches launches). The split-K-with-atomics pattern
/// of framework weight-gradient kernels; registered as the variant "atomic_dw" of the rmsnorm
/// target (rmsnorm_target.cpp).
///
/// Arguments, errors and the rows == 0 case as for backward(), except that workspace_bytes
/// must be at least backward_atomic_dw_workspace_bytes(rows, hidden).
template <typename T>
cudaError_t backward_atomic_dw(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                               int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream);

// Explicit instantiations live in rmsnorm_kernels.cu; these are the supported types.
extern template cudaError_t forward<float>(const float*, const float*, float*, int64_t, int64_t,
                                           double, cudaStream_t);
extern template cudaError_t forward<double>(const double*, const double*, double*, int64_t,
                                            int64_t, double, cudaStream_t);
extern template cudaError_t forward<__half>(const __half*, const __half*, __half*, int64_t,
                                            int64_t, double, cudaStream_t);
extern template cudaError_t forward<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                   __nv_bfloat16*, int64_t, int64_t, double,
                                                   cudaStream_t);

extern template cudaError_t backward<float>(const float*, const float*, const float*, float*,
                                            float*, int64_t, int64_t, double, void*, size_t,
                                            cudaStream_t);
extern template cudaError_t backward<double>(const double*, const double*, const double*,
                                             double*, double*, int64_t, int64_t, double, void*,
                                             size_t, cudaStream_t);
extern template cudaError_t backward<__half>(const __half*, const __half*, const __half*,
                                             __half*, __half*, int64_t, int64_t, double, void*,
                                             size_t, cudaStream_t);
extern template cudaError_t backward<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                    const __nv_bfloat16*, __nv_bfloat16*,
                                                    __nv_bfloat16*, int64_t, int64_t, double,
                                                    void*, size_t, cudaStream_t);

extern template cudaError_t backward_atomic_dw<float>(const float*, const float*, const float*, float*, float*,
                                                      int64_t, int64_t, double, void*, size_t, cudaStream_t);
extern template cudaError_t backward_atomic_dw<double>(const double*, const double*, const double*, double*,
                                                       double*, int64_t, int64_t, double, void*, size_t,
                                                       cudaStream_t);
extern template cudaError_t backward_atomic_dw<__half>(const __half*, const __half*, const __half*, __half*,
                                                       __half*, int64_t, int64_t, double, void*, size_t,
                                                       cudaStream_t);
extern template cudaError_t backward_atomic_dw<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                              const __nv_bfloat16*, __nv_bfloat16*,
                                                              __nv_bfloat16*, int64_t, int64_t, double, void*,
                                                              size_t, cudaStream_t);

}  // namespace numgate::rmsnorm
