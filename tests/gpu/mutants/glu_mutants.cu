// SwiGLU forward kernel MUTANT: the sigmoid held in bf16 (a low-precision intermediate of
// the kind a max-abs threshold lets through), and its unbroken control. One thread per
// element, FP32 math, one rounding to bf16 at the end; launched by the replay's family
// mutant tests (tests/gpu/test_family_mutants.cpp), never shipped.
#include "mutants/glu_mutants.h"

namespace numgate::glu::mutant {
namespace {

__global__ void swiglu_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* y, std::int64_t n,
                              Kind kind) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // The declared formula's clamp (glu_math.h: a >= -1e4, NaN kept), so a = -inf gives -0.
  const float av = __bfloat162float(a[i]) < -1e4f ? -1e4f : __bfloat162float(a[i]);
  float s = 1.0f / (1.0f + expf(-av));
  if (kind == Kind::sigmoid_in_bf16) s = __bfloat162float(__float2bfloat16_rn(s));
  y[i] = __float2bfloat16_rn((av * s) * __bfloat162float(b[i]));
}

}  // namespace

const char* name(Kind k) { return k == Kind::none ? "none" : "sigmoid_in_bf16"; }

cudaError_t swiglu_forward(Kind kind, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* y,
                           std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  swiglu_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(a, b, y, n, kind);
  return cudaGetLastError();
}

}  // namespace numgate::glu::mutant
