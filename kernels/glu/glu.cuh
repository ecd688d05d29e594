// numgate — SwiGLU and GeGLU target kernels: public launcher API.
//
// Elementwise gated activations (Shazeer 2020, "GLU Variants Improve Transformer",
// arXiv:2002.05202), over n = numel elements of a, b (e.g. [tokens, intermediate], all
// dimensions flattened; contiguous):
//
//   SwiGLU:  y = silu(a) * b                 silu(a) = a * sigmoid(a)
//            da = (dy * b) * silu'(a)        silu'(a) = s (1 + a (1 - s)), s = sigmoid(a)
//            db = dy * silu(a)
//   GeGLU:   y = gelu(a) * b, da = (dy * b) * gelu'(a), db = dy * gelu(a), with
//            approximate_tanh = false: gelu(a) = 0.5 a (1 + erf(a / sqrt 2))
//            approximate_tanh = true:  gelu(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//            (torch.nn.functional.gelu, approximate='none' / 'tanh').
//
// Element types T: __nv_bfloat16 and __half (math in FP32), float and double (math in
// FP64: the 1-ULP accuracy contract of fp32 outputs needs it). fp32 / fp64: the scalar code
// is glu_math.h (cancellation-free forms, accurate exp/expm1/erfc), as in the CPU reference.
// bf16 / fp16: the fast FP32 path glu_fast.h (exp by one MUFU.EX2, ex2.approx.f32 without
// .ftz; MUFU reciprocal + Newton step,
// a Mills-ratio polynomial for the erf GELU, root-window polynomials, no branches), whose
// error for every one of the 65536 inputs of each 16-bit type stays inside the part of the
// gate's rounding bound the output products leave (glu_fast.h; checked exhaustively on the
// device by tests/gpu/test_glu_fast_math.cpp): where act and act' are normal FP32 numbers
// every output is within 1 ULP of the correctly rounded FP64 value, and every "decidable"
// element is correctly rounded (where exp(-|a|) is an FP32 subnormal, e.g. SiLU at
// a ~ -100, act carries that subnormal's rounding, as the reference's does, and a large b
// can magnify it beyond 1 ULP: the argument covers normal values only). Each
// output is rounded once to T (round to nearest even). Non-finite inputs: act(+inf) =
// +inf, act(-inf) = -0, act'(+inf) = 1, act'(-inf) = 0, NaN -> NaN; then IEEE products.
//
// Alignment: every pointer must be aligned to sizeof(T); nothing else is assumed: each
// tensor moves with 16-byte vector accesses where its own alignment allows, else element
// by element (units on a virtual 16-byte grid anchored at a). Tensors must not overlap.
//
// Determinism: elementwise, no atomics; results do not depend on the launch shape.
//
// Errors: cudaErrorInvalidValue without launching for n < 0, a null pointer when n > 0,
// or a pointer not aligned to sizeof(T). Otherwise cudaGetLastError() after enqueueing on
// `stream`; the launchers never synchronize. n == 0 launches nothing.
//
// Plain host C++ (compiles with g++); the kernels live in glu_kernels.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::glu {

/// y = silu(a) * b on n elements.
template <typename T>
cudaError_t swiglu_forward(const T* a, const T* b, T* y, int64_t n, cudaStream_t stream);
/// da = (dy * b) * silu'(a), db = dy * silu(a) on n elements, one pass.
template <typename T>
cudaError_t swiglu_backward(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n, cudaStream_t stream);
/// y = gelu(a) * b (erf GELU, or the tanh approximation when approximate_tanh).
template <typename T>
cudaError_t geglu_forward(const T* a, const T* b, T* y, int64_t n, bool approximate_tanh, cudaStream_t stream);
/// da = (dy * b) * gelu'(a), db = dy * gelu(a), one pass.
template <typename T>
cudaError_t geglu_backward(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n, bool approximate_tanh,
                           cudaStream_t stream);

#define NUMGATE_GLU_EXTERN(T)                                                                                   \
  extern template cudaError_t swiglu_forward<T>(const T*, const T*, T*, int64_t, cudaStream_t);                \
  extern template cudaError_t swiglu_backward<T>(const T*, const T*, const T*, T*, T*, int64_t, cudaStream_t); \
  extern template cudaError_t geglu_forward<T>(const T*, const T*, T*, int64_t, bool, cudaStream_t);           \
  extern template cudaError_t geglu_backward<T>(const T*, const T*, const T*, T*, T*, int64_t, bool, cudaStream_t);
NUMGATE_GLU_EXTERN(float)
NUMGATE_GLU_EXTERN(double)
NUMGATE_GLU_EXTERN(__half)
NUMGATE_GLU_EXTERN(__nv_bfloat16)
#undef NUMGATE_GLU_EXTERN

}  // namespace numgate::glu
