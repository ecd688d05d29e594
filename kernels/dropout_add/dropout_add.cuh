// numgate — fused dropout + residual add target kernels: public launcher API.
//
// Elementwise over n contiguous elements (any shape, all dimensions flattened, row-major):
//
//   forward:   y_i    = residual_i + dropout(x)_i,   dropout(x)_i = m_i ? x_i * s : 0
//              mask_i = m_i                           (0 or 1 in T, as torch's native_dropout
//                                                      returns it)
//   backward:  dx_i        = m_i ? dy_i * s : 0
//              dresidual_i = dy_i                     (exactly: the bits of dy)
//
// dropout is a SELECT, not a product with the mask: a dropped element contributes exactly 0
// whatever x_i is (NaN and Inf included), so y_i = residual_i there. The backward
// regenerates m from the stream (no saved mask is read). m, the threshold and the scale s:
// dropout_stream.h (Philox-4x32-10; element i of the stream is the flat index over the
// WHOLE tensor: i = element_offset + local index, so a launch on a slice of the tensor —
// the row-window launch passes element_offset = first_row * hidden — draws exactly the
// whole launch's values for its elements).
//   s = RN_fp32(1 / (1 - p)) for T = float, __nv_bfloat16, __half (dropout_scale_fp32);
//   s = 1 / (1 - p) in FP64 for T = double (dropout_scale_fp64).
//
// Numerics (each operation rounded once, to nearest even; never contracted into an FMA):
//   T = float, __nv_bfloat16, __half (acc = float):
//     kept:    y  = T(__fadd_rn(__fmul_rn(float(x), s), float(residual)))
//     dropped: y  = T(float(residual))              (= residual exactly)
//     kept:    dx = T(__fmul_rn(float(dy), s));      dropped: dx = +0
//   T = double: the same in double (__dmul_rn, __dadd_rn).
// So bf16 / fp16 results are rounded twice (the FP32 operation, then to T), exactly as
// PyTorch's eager x * mask * scale + residual in its FP32 accumulation type; the CPU
// reference (dropout_add_oracle.h) evaluates the same expressions.
//
// Alignment: every pointer must be aligned to sizeof(T); nothing else is assumed. The
// elements are processed in items of E = max(4, 16 / sizeof(T)) stream-consecutive
// elements starting at stream indices that are multiples of E (one Philox call per 4
// elements, never more); a tensor whose address of stream index 0 (ptr - element_offset)
// is 16-byte aligned moves its full items as 16-byte vector accesses, any other tensor and
// the partial first and last items element by element. Tensors must not overlap (y may not
// alias x or residual; dx may not alias dy).
//
// Determinism: elementwise, no atomics; results do not depend on the launch shape, on n or
// on how a tensor is split into launches (given the right element_offset).
//
// Errors: cudaErrorInvalidValue, without launching, for n < 0, element_offset < 0,
// element_offset + n > 2^62, p outside [0, 1) (or NaN), a null pointer other than the
// optional ones (mask, dresidual) when n > 0, or a non-null pointer not aligned to
// sizeof(T). Otherwise cudaGetLastError() after enqueueing on `stream`; the launchers never
// synchronize. n == 0 launches nothing.
//
// Plain host C++ (compiles with g++); the kernels live in dropout_add_kernels.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::dropout_add {

// y = residual + dropout(x), mask = m (mask may be nullptr: then not written). n elements, contiguous.
// element_offset: the flat index of element 0 of these buffers in the whole tensor (0 for a whole tensor;
// the row-window launch passes first_row * hidden) — the stream index i is element_offset + local index.
template <typename T>
cudaError_t forward(const T* x, const T* residual, T* y, T* mask, int64_t n, double p, uint64_t seed,
                    uint64_t offset, int64_t element_offset, cudaStream_t stream);
// dx = m ? dy * s : 0 ; dresidual = dy (dresidual may be nullptr: then not written)
template <typename T>
cudaError_t backward(const T* dy, T* dx, T* dresidual, int64_t n, double p, uint64_t seed, uint64_t offset,
                     int64_t element_offset, cudaStream_t stream);

#define NUMGATE_DROPOUT_ADD_EXTERN(T)                                                                          \
  extern template cudaError_t forward<T>(const T*, const T*, T*, T*, int64_t, double, uint64_t, uint64_t,     \
                                         int64_t, cudaStream_t);                                               \
  extern template cudaError_t backward<T>(const T*, T*, T*, int64_t, double, uint64_t, uint64_t, int64_t,     \
                                          cudaStream_t);
NUMGATE_DROPOUT_ADD_EXTERN(float)
NUMGATE_DROPOUT_ADD_EXTERN(double)
NUMGATE_DROPOUT_ADD_EXTERN(__half)
NUMGATE_DROPOUT_ADD_EXTERN(__nv_bfloat16)
#undef NUMGATE_DROPOUT_ADD_EXTERN

}  // namespace numgate::dropout_add
