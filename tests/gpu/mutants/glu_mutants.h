// A deliberately broken SwiGLU forward kernel (see glu_mutants.cu). Test use only.
// y[i] = silu(a[i]) * b[i] over n elements, T = __nv_bfloat16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::glu::mutant {

/// `none`: a plain FP32 kernel (expf), the control, a legitimate evaluation;
/// `sigmoid_in_bf16`: the same with sigmoid(a) rounded to bf16 before the products.
enum class Kind { none, sigmoid_in_bf16 };
const char* name(Kind k);

cudaError_t swiglu_forward(Kind kind, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* y,
                           std::int64_t n, cudaStream_t stream);

}  // namespace numgate::glu::mutant
