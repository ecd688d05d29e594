// numgate — SwiGLU / GeGLU scalar math of the CPU reference oracle (glu_oracle.cpp) and of
// the fp32 / fp64 CUDA kernels (glu_kernels.cu), which mirror its operation order exactly.
// C is the compute type: float (the reference for bf16/fp16 tensors) or double (fp32 and
// fp64 tensors). On the device the functions are CUDA's accurate expf/expm1f/erfcf (and
// double exp/expm1/erfc), never the __expf-style intrinsics; on the host std::exp etc.
// The bf16/fp16 kernels use the fast FP32 path of glu_fast.h instead (same mathematics and
// limits, other operations; its error bound, checked for every 16-bit input, keeps the
// outputs inside the gate's envelope: see there). This file's FP32 functions remain the
// reference for those dtypes and the exhaustive test's comparison.
//
// Formulas (sources: SwiGLU/GeGLU, Shazeer 2020, "GLU Variants Improve Transformer",
// arXiv:2002.05202; SiLU/GELU as torch.nn.functional.silu and torch.nn.functional.gelu
// with approximate='none' / 'tanh'; GELU: Hendrycks & Gimpel 2016, arXiv:1606.08415):
//   silu(a)  = a * sigmoid(a)                       d/da = s * (1 + a (1 - s)),  s = sigmoid(a)
//   gelu(a)  = 0.5 a (1 + erf(a / sqrt 2))          d/da = Phi(a) + a phi(a)
//   gelu_t(a)= 0.5 a (1 + tanh(u)), u = k (a + 0.044715 a^3), k = sqrt(2/pi)
//                                                   d/da = s2 (1 + 2 a u' (1 - s2)), s2 = sigmoid(2u)
// evaluated in cancellation-free forms (identities, not approximations, except the
// polynomial near the derivative roots, whose truncation error is < 1e-16 relative):
//   * sigmoid(x) = 1/(1+e) for x >= 0 and e/(1+e) for x < 0, e = exp(-|x|) (never
//     overflows); 1 - sigmoid(x) = e/(1+e) resp. 1/(1+e) (no subtraction).
//   * 1 + erf(x) = erfc(-x);  0.5 (1 + tanh u) = sigmoid(2u).
//   * silu'(a) for a < 0: 1 + a(1-s) = (1 + a + e^a)/(1 + e^a) and, with r the root of
//     1 + a + e^a (r = -1.27846454276107379...) and e0 = e^r = -(1 + r):
//     1 + a + e^a = d + e0 * expm1(d), d = a - r (d and expm1(d) have the same sign: no
//     cancellation anywhere).
//   * gelu'(a) and gelu_t'(a) vanish at a ~ -0.7518 / -0.7525, where the direct forms
//     cancel (an fp16 input next to the root would lose up to ~10 ulp in FP32). Within
//     |a - root| < 1/8 the derivative is d * P(8 d), d = (a - root_hi) - root_lo, P of
//     degree 13 fitted in binary128 at Chebyshev nodes (max relative error 6.4e-17).
//
// Non-finite inputs (decided from the mathematical limits, and implemented identically
// by golden, reference and kernels): act(+inf) = +inf, act(-inf) = -0, act'(+inf) = 1,
// act'(-inf) = 0, NaN -> NaN. This is done by clamping a to -1e4 in the activations and to
// +-1e4 in the derivatives (at |a| >= 1e4 every formula already equals its limit in both
// float and double; the clamp keeps NaN). The products y = act(a) * b, da = (dy * b) *
// act'(a), db = dy * act(a) are then plain IEEE products (e.g. a = 0, b = inf gives NaN).
// Note: PyTorch's literal silu(-inf) = -inf / (1 + inf) is NaN; numgate declares the limit.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define NUMGATE_GLU_HD __host__ __device__ __forceinline__
#else
#define NUMGATE_GLU_HD inline
#endif

namespace numgate::glu::math {

// ---- the three elementary functions, accurate versions on host and device ----------
NUMGATE_GLU_HD float xexp(float v) {
#ifdef __CUDA_ARCH__
  return ::expf(v);
#else
  return std::exp(v);
#endif
}
NUMGATE_GLU_HD double xexp(double v) {
#ifdef __CUDA_ARCH__
  return ::exp(v);
#else
  return std::exp(v);
#endif
}
NUMGATE_GLU_HD float xexpm1(float v) {
#ifdef __CUDA_ARCH__
  return ::expm1f(v);
#else
  return std::expm1(v);
#endif
}
NUMGATE_GLU_HD double xexpm1(double v) {
#ifdef __CUDA_ARCH__
  return ::expm1(v);
#else
  return std::expm1(v);
#endif
}
NUMGATE_GLU_HD float xerfc(float v) {
#ifdef __CUDA_ARCH__
  return ::erfcf(v);
#else
  return std::erfc(v);
#endif
}
NUMGATE_GLU_HD double xerfc(double v) {
#ifdef __CUDA_ARCH__
  return ::erfc(v);
#else
  return std::erfc(v);
#endif
}
template <typename C>
NUMGATE_GLU_HD C xabs(C v) {
  return v < C(0) ? -v : (v == C(0) ? C(0) : v);  // NaN stays NaN
}

// ---- constants --------------------------------------------------------------------
constexpr double kClamp = 1e4;  ///< |a| beyond this: every formula equals its limit
constexpr double kRsqrt2 = 0.70710678118654752440;      ///< 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  ///< 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588; ///< sqrt(2/pi) (tanh GELU)
constexpr double kTanhCubic = 0.044715;                 ///< tanh GELU cubic coefficient

/// A root r = hi + lo of a derivative, split for the compute type C: (a - hi) is exact
/// near r (Sterbenz), then - lo.
template <typename C>
struct Root;
template <>
struct Root<float> {
  float hi, lo;
};
template <>
struct Root<double> {
  double hi, lo;
};
/// silu': root of 1 + a + e^a, r = -1.27846454276107379510935873902298...
NUMGATE_GLU_HD Root<float> silu_root(float) { return {-1.27846456f, 1.29792825e-08f}; }
NUMGATE_GLU_HD Root<double> silu_root(double) { return {-1.2784645427610737, -1.0946994183093437e-16}; }
constexpr double kSiluE0 = 0.2784645427610738;  ///< e^r = -(1 + r)
/// gelu' (erf): root of Phi(a) + a phi(a), r = -0.75179152469356445745790494677952...
NUMGATE_GLU_HD Root<float> gelu_erf_root(float) { return {-0.751791537f, 1.21144499e-08f}; }
NUMGATE_GLU_HD Root<double> gelu_erf_root(double) { return {-0.75179152469356447, 1.4956759177009883e-17}; }
/// gelu_t' (tanh): root r = -0.75246142207101625848795444328892...
NUMGATE_GLU_HD Root<float> gelu_tanh_root(float) { return {-0.752461433f, 1.13396279e-08f}; }
NUMGATE_GLU_HD Root<double> gelu_tanh_root(double) { return {-0.75246142207101629, 3.6355605092076871e-17}; }

constexpr double kRootWindow = 0.125;  ///< polynomial used for |a - r| < 1/8 (t = 8 (a - r))
constexpr int kPolyTerms = 14;
/// derivative(r + d) = d * sum_k P[k] t^k, t = 8 d (binary128 Chebyshev fit, see header).
struct PolyTable {
  double c[kPolyTerms];
};
#define NUMGATE_GLU_ERF_POLY 0.43149399231404689, 0.048535622873818997, -0.00028436994372923574, -0.00022267233065863614, -3.6063286494736906e-06, 5.9270263178067212e-07, 1.7315782085748693e-08, -1.0678949680678284e-09, -4.4395138714215401e-11, 1.3883392975583279e-12, 8.0241645136611115e-14, -1.3055254508845148e-15, -1.1230205721914175e-16, 7.8717637884143725e-19
#define NUMGATE_GLU_TANH_POLY 0.43040009102485849, 0.048439805766973619, -0.00024660708627887546, -0.00022254781851749802, -4.0574532087529625e-06, 6.0065641662087833e-07, 2.0069348353412087e-08, -1.1552485684432229e-09, -5.5279850532051617e-11, 1.966414065834831e-12, 1.1571630925652241e-13, -4.0692994341719258e-15, -2.3019079679910508e-16, 1.0667890360686481e-17
constexpr PolyTable kGeluErfPoly = {{NUMGATE_GLU_ERF_POLY}};
constexpr PolyTable kGeluTanhPoly = {{NUMGATE_GLU_TANH_POLY}};

/// sum_k c_k t^k by Horner (the coefficients are literals at the call site, so device
/// code needs no constant table).
template <typename C>
NUMGATE_GLU_HD C horner14(C t, double c0, double c1, double c2, double c3, double c4, double c5, double c6,
                          double c7, double c8, double c9, double c10, double c11, double c12, double c13) {
  C acc = C(c13);
  acc = acc * t + C(c12);
  acc = acc * t + C(c11);
  acc = acc * t + C(c10);
  acc = acc * t + C(c9);
  acc = acc * t + C(c8);
  acc = acc * t + C(c7);
  acc = acc * t + C(c6);
  acc = acc * t + C(c5);
  acc = acc * t + C(c4);
  acc = acc * t + C(c3);
  acc = acc * t + C(c2);
  acc = acc * t + C(c1);
  return acc * t + C(c0);
}
static_assert(kPolyTerms == 14, "horner14 evaluates 14 terms");

// ---- building blocks ----------------------------------------------------------------
/// s = sigmoid(x), t = 1 - sigmoid(x), both without cancellation or overflow.
template <typename C>
NUMGATE_GLU_HD void sigmoid_pair(C x, C& s, C& t) {
  const C e = xexp(-xabs(x));
  const C d = C(1) + e;
  const C inv = C(1) / d;
  const C q = e / d;
  if (x >= C(0)) {
    s = inv;
    t = q;
  } else {  // also NaN: both NaN
    s = q;
    t = inv;
  }
}
/// a clamped to >= -1e4 (NaN kept).
template <typename C>
NUMGATE_GLU_HD C clamp_low(C a) {
  return a < C(-kClamp) ? C(-kClamp) : a;
}
/// a clamped to [-1e4, 1e4] (NaN kept).
template <typename C>
NUMGATE_GLU_HD C clamp_both(C a) {
  return a < C(-kClamp) ? C(-kClamp) : (a > C(kClamp) ? C(kClamp) : a);
}

// ---- SwiGLU -------------------------------------------------------------------------
template <typename C>
NUMGATE_GLU_HD C silu(C a) {
  const C x = clamp_low(a);
  C s, t;
  sigmoid_pair(x, s, t);
  return x * s;
}
template <typename C>
NUMGATE_GLU_HD C dsilu(C a) {
  const C x = clamp_both(a);
  C s, t;
  sigmoid_pair(x, s, t);
  if (x >= C(0)) return s * (C(1) + x * t);
  const Root<C> r = silu_root(C(0));
  const C d = (x - r.hi) - r.lo;
  const C c = d + C(kSiluE0) * xexpm1(d);  // = 1 + x + e^x
  return (s * c) * t;                      // s (1 + x (1 - s)) = s * c / (1 + e^x)
}

// ---- GeGLU --------------------------------------------------------------------------
template <typename C>
NUMGATE_GLU_HD C gelu_erf(C a) {
  const C x = clamp_low(a);
  return (C(0.5) * x) * xerfc(-x * C(kRsqrt2));
}
template <typename C>
NUMGATE_GLU_HD C dgelu_erf(C a) {
  const C x = clamp_both(a);
  const Root<C> r = gelu_erf_root(C(0));
  const C d = (x - r.hi) - r.lo;
  if (xabs(d) < C(kRootWindow)) return d * horner14(d * C(8), NUMGATE_GLU_ERF_POLY);
  return C(0.5) * xerfc(-x * C(kRsqrt2)) + x * (C(kInvSqrt2Pi) * xexp(C(-0.5) * (x * x)));
}
/// u = sqrt(2/pi) (x + 0.044715 x^3)
template <typename C>
NUMGATE_GLU_HD C tanh_arg(C x) {
  return C(kSqrt2OverPi) * (x + C(kTanhCubic) * (x * (x * x)));
}
template <typename C>
NUMGATE_GLU_HD C gelu_tanh(C a) {
  const C x = clamp_low(a);
  C s2, t2;
  sigmoid_pair(C(2) * tanh_arg(x), s2, t2);
  return x * s2;  // 0.5 x (1 + tanh u) = x sigmoid(2u)
}
template <typename C>
NUMGATE_GLU_HD C dgelu_tanh(C a) {
  const C x = clamp_both(a);
  const Root<C> r = gelu_tanh_root(C(0));
  const C d = (x - r.hi) - r.lo;
  if (xabs(d) < C(kRootWindow)) return d * horner14(d * C(8), NUMGATE_GLU_TANH_POLY);
  C s2, t2;
  sigmoid_pair(C(2) * tanh_arg(x), s2, t2);
  const C du = C(kSqrt2OverPi) * (C(1) + C(3.0 * kTanhCubic) * (x * x));  // u'
  return s2 * (C(1) + ((C(2) * x) * du) * t2);
}

}  // namespace numgate::glu::math
