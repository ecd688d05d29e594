// Device side of the exhaustive fast-path test (glu_fast_eval.h). Test use only.
#include "glu_fast_eval.h"

#include <cuda_bf16.h>

#include "glu/glu_fast.h"
#include "glu/glu_math.h"

namespace numgate::testing::glu_fast {
namespace {

namespace fast = numgate::glu::fast;
namespace math = numgate::glu::math;

__device__ float to_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
/// v with its 8 lowest significand bits rounded off (to nearest, ties away from zero): 16
/// significant bits, relative error <= 2^-16 for normal v. A NaN stays the same NaN:
/// rounding its bits can carry into the sign (0x7FFFFFFF gives -0), a structure failure
/// (H200: every bf16 and fp16 NaN input), not the bound (A) failure this mutant is for.
__device__ float to_16_bits(float v) {
  return isnan(v) ? v : __uint_as_float((__float_as_uint(v) + 0x80u) & 0xFFFFFF00u);
}

// The sigmoid-in-bf16 mutant: glu_fast.h's formulas with the shared sigmoid (or Gaussian
// tail) rounded to bf16 before use.
__device__ void mutant_bf16(Fn f, float a, float& act, float& dact) {
  const float xa = fast::max_keep_nan(a, -fast::kClampF), x = fast::min_keep_nan(xa, fast::kClampF);
  const bool neg = x < 0.0f;
  if (f == Fn::gelu_erf) {
    const float z = fabsf(x);
    float w, m;
    fast::gauss_tail(z, w, m);
    const float q = to_bf16(w * m);
    act = neg ? xa * q : xa * (1.0f - q);
    const float dd = w * fmaf(-fast::kInvSqrt2PiF, z, m);
    dact = neg ? dd : 1.0f - dd;
    return;
  }
  const float x2 = x * x;
  const float e = f == Fn::silu ? fast::exp_neg_abs(x) : fast::tanh_gelu_exp(x, x2);
  const float r = to_bf16(fast::rcp(1.0f + e));
  const float er = e * r;
  act = neg ? (xa * r) * e : xa * r;
  if (f == Fn::silu) {
    const float c = (1.0f + x) + e;
    dact = neg ? (er * c) * r : r * fmaf(x, er, 1.0f);
  } else {
    const float xdv = x * fmaf(fast::kDV3, x2, fast::kV1);
    dact = neg ? er * fmaf(xdv, r, 1.0f) : r * fmaf(xdv, er, 1.0f);
  }
}

template <fast::Fn F>
__device__ void eval_one(Variant v, float a, float& af, float& ac, float& dc) {
  if (v == Variant::fast) {
    af = fast::act_only<F>(a);
    fast::act_dact<F>(a, ac, dc);
  } else if (v == Variant::mutant_no_window) {
    af = fast::act_only<F>(a);
    fast::act_dact<F, fast::Window::removed>(a, ac, dc);
  } else if (v == Variant::mutant_silu_window_degree3) {
    af = fast::act_only<F>(a);
    fast::act_dact<F, fast::Window::silu_degree3>(a, ac, dc);
  } else if (v == Variant::mutant_act_16_bits) {
    fast::act_dact<F>(a, ac, dc);
    ac = to_16_bits(ac);
    af = ac;  // the forward gives the same act (not a structure failure)
  } else {
    if constexpr (F == fast::Fn::silu) {
      ac = math::silu(a);
      dc = math::dsilu(a);
    } else if constexpr (F == fast::Fn::gelu_erf) {
      ac = math::gelu_erf(a);
      dc = math::dgelu_erf(a);
    } else {
      ac = math::gelu_tanh(a);
      dc = math::dgelu_tanh(a);
    }
    af = ac;
  }
}

__global__ void eval_kernel(Fn f, Variant v, const float* a, float* af, float* ac, float* dc, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], o1, o2, o3;
  if (v == Variant::mutant_sigmoid_bf16) {
    mutant_bf16(f, x, o2, o3);
    o1 = o2;
  } else if (f == Fn::silu) {
    eval_one<fast::Fn::silu>(v, x, o1, o2, o3);
  } else if (f == Fn::gelu_erf) {
    eval_one<fast::Fn::gelu_erf>(v, x, o1, o2, o3);
  } else {
    eval_one<fast::Fn::gelu_tanh>(v, x, o1, o2, o3);
  }
  af[i] = o1;
  ac[i] = o2;
  dc[i] = o3;
}

}  // namespace

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::fast: return "fast";
    case Variant::mutant_no_window: return "mutant_no_window";
    case Variant::mutant_sigmoid_bf16: return "mutant_sigmoid_bf16";
    case Variant::mutant_act_16_bits: return "mutant_act_16_bits";
    case Variant::mutant_silu_window_degree3: return "mutant_silu_window_degree3";
    case Variant::accurate: return "accurate";
  }
  return "?";
}

cudaError_t evaluate(Fn f, Variant v, const std::vector<float>& a, std::vector<float>& act_fwd,
                     std::vector<float>& act, std::vector<float>& dact) {
  const int n = static_cast<int>(a.size());
  const std::size_t bytes = a.size() * sizeof(float);
  float* d = nullptr;
  cudaError_t e = cudaMalloc(&d, 4 * bytes);
  if (e != cudaSuccess) return e;
  act_fwd.resize(a.size());
  act.resize(a.size());
  dact.resize(a.size());
  e = cudaMemcpy(d, a.data(), bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    eval_kernel<<<(n + 255) / 256, 256>>>(f, v, d, d + n, d + 2 * n, d + 3 * n, n);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(act_fwd.data(), d + n, bytes, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(act.data(), d + 2 * n, bytes, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(dact.data(), d + 3 * n, bytes, cudaMemcpyDeviceToHost);
  const cudaError_t f2 = cudaFree(d);
  return e != cudaSuccess ? e : f2;
}

}  // namespace numgate::testing::glu_fast
