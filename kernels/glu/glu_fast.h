// numgate — the fast FP32 activation path of the SwiGLU / GeGLU kernels (bf16 / fp16 tensors).
//
// The 16-bit kernels (glu_kernels.cu) evaluate act and act' with these functions; the fp32 /
// fp64 kernels and the CPU reference keep glu_math.h (accurate expf / erfcf / expm1f, IEEE
// divisions). Same mathematics and the same declared limits as glu_math.h; cheaper
// operations, one sigmoid (or one Gaussian tail) shared by act and act', no branches:
//
//   * exp(-y) = 2^(-y log2 e) by one MUFU.EX2 (ex2.approx.f32: <= 2 ulp, the instruction
//     CUDA's exp2f is; not .ftz, so subnormal results are kept). The rounding of the
//     argument y log2 e costs |y| u relative; for SiLU and the erf GELU that is inside the
//     gate's condition term |a act'| (y = |x|, resp. y = x^2 / 2 with x^2 exact for 16-bit
//     inputs); the tanh GELU puts the argument's rounding error back (tanh_gelu_exp), as
//     its bound has no condition term where act'' vanishes (a ~ -1.4). CUDA's expf (range
//     reduction, ~9 instructions) measured slower for the erf GELU and no more accurate
//     within the bound.
//   * 1/d for d in [1, 1e4 + 3] (1 + e, z + 3): rcp.approx.ftz (MUFU.RCP, <= 1 ulp) and
//     one Newton step (2 FMA): within about 1 FP32 rounding. .ftz cannot matter: neither
//     d nor 1/d is ever subnormal (d >= 1, and d <= 1e4 + 3 since every argument that
//     reaches a reciprocal is clamped to |x| <= 1e4 first).
//   * sigmoid(x) = 1/(1+e) or e/(1+e), e = exp(-|x|) (no overflow, no cancellation; e
//     may be subnormal, never flushed: no .ftz on any operation whose result can be).
//   * SiLU: act = x s, act' = s (1 + x (1 - s)); for x < 0, 1 + x (1 - s) = c / (1 + e),
//     c = 1 + x + e^x, which vanishes at the root r = -1.278464542761074 of silu': within
//     |x - r| < 1/8, c = d + e0 expm1(d), d = (x - r_hi) - r_lo, e0 = e^r, expm1 by its
//     Taylor polynomial of degree 6 (truncation < 2^-30 relative); outside, c = (1 + x) + e
//     (cancels at most 4x there, within the error bound below).
//   * erf GELU, z = |x|: Phi(-z) = phi(z) M(z), M the Mills ratio, written as
//     M(z) = r g(s), r = 1/(z + 3), s = (3 - z)/(3 + z) = 6 r - 1 in (-1, 1],
//     g a degree-10 polynomial (Chebyshev interpolant of M(z)(z + 3) on s in [-1, 1],
//     computed by us in long double from erfc: truncation error < 2^-25 relative for
//     z <= 4, < 2^-24.6 everywhere); Phi(x) = 1 - Phi(-z) for x >= 0. act' = Phi(x) +
//     x phi(x) = D or 1 - D, D = phi(z) (M(z) - z) (no cancellation away from the root).
//   * tanh GELU: act = x sigmoid(v), v = 2 sqrt(2/pi) (x + 0.044715 x^3);
//     act' = s (1 + x v' (1 - s)).
//   * gelu' roots (erf and tanh): within |x - r| < 1/8, act' = d P(8 d), P the first 7
//     terms of glu_math.h's binary128 fit (the dropped terms are < 1.2e-9, 2^-28 relative).
//   Every selection (x < 0, the root windows) is a select, not a branch.
//
// Error bound and why it keeps the declared envelope (ulp_limit 1, decidable rounding,
// the max-abs gate; kernels/glu/glu_cases.cpp, fixtures/src/gate.cpp). The gate's
// rounding bound for an output element is E = gamma * abs_terms + 10 * 2^-150, gamma =
// 10u / (1 - 10u), u = 2^-24, abs_terms = (|act| + |a act'|) |b| for y (and |dy| for db),
// (|act'| + |a act''|) |dy b| for da (glu_oracle.cpp): every evaluation whose FP32 value
// before the final rounding is within E of the golden rounds every decidable element
// correctly, and E is far below one ULP of the output. The kernels compute
// y = fl(act32 b), db = fl(dy act32), da = fl(fl(dy b) act32'), so it suffices that for
// every input a
//   |act32  - act | <= ((gamma - u) |act| + gamma |a act'|) / (1 + u)              (A)
//   |act32' - act'| <= ((gamma - 2u - u^2) |act'| + gamma |a act''|) / (1 + u)^2   (D)
// (the products' own roundings take the rest; an FP32 product that underflows adds at most
// 2^-150, inside the 10 * 2^-150 term). Where e = exp(-|x|) is an FP32 subnormal, act and
// act' carry its rounding (one subnormal quantum 2^-149 times the factor that multiplies
// e; the same for the accurate path and the reference, which round the same e).
// Independently of b and dy, a relative error of act and act' below 2^-13 (wherever they
// are normal FP32 numbers) keeps every output within 1 ULP: 2^-13 plus the products'
// roundings stays under half an fp16 ULP (>= 2^-12 relative), so the FP32 value lies within
// one ULP-interval of the golden's rounding. tests/gpu/test_glu_fast_math.cpp checks (A),
// (D) and the 2^-13 on the device for every one of the 65536 bf16 and 65536 fp16 inputs of
// each function (H200: no failure; largest error / bound 0.62, largest relative error
// 1.6e-5 = 2^-16.0), and that worse versions fail it, each check alone for the mutant
// built for it: act rounded to 16 significant bits fails (A) only, SiLU's window with expm1
// to degree 3 (Window::silu_degree3) (D) only, the sigmoid rounded to bf16 the 2^-13; and
// the GELUs without their root windows (Window::removed: fp16 inputs next to the gelu'
// roots) fail.
#pragma once

#include <cmath>

#include "glu/glu_math.h"

namespace numgate::glu::fast {

enum class Fn { silu, gelu_erf, gelu_tanh };

// ---- primitives -------------------------------------------------------------------------
/// 1/d for d in [1, 2^126): MUFU.RCP (<= 1 ulp) plus one Newton step.
NUMGATE_GLU_HD float rcp(float d) {
#ifdef __CUDA_ARCH__
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return fmaf(r, fmaf(-d, r, 1.0f), r);
#else
  return 1.0f / d;
#endif
}
/// max(a, lo) keeping NaN (max.NaN: a NaN operand gives NaN).
NUMGATE_GLU_HD float max_keep_nan(float a, float lo) {
#ifdef __CUDA_ARCH__
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(lo));
  return r;
#else
  return a < lo ? lo : a;
#endif
}
NUMGATE_GLU_HD float min_keep_nan(float a, float hi) {
#ifdef __CUDA_ARCH__
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(hi));
  return r;
#else
  return a > hi ? hi : a;
#endif
}
/// 2^t by MUFU.EX2 (ex2.approx.f32, <= 2 ulp like exp2f, which is the same instruction;
/// NOT .ftz: subnormal results kept).
NUMGATE_GLU_HD float ex2_approx(float t) {
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
#else
  return std::exp2(t);
#endif
}
constexpr float kLog2eF = 1.442695022e+00f;      ///< log2(e)
constexpr float kMHalfLog2eF = -7.213475108e-01f; ///< -log2(e) / 2
constexpr float kLn2F = 6.931471825e-01f;
/// exp(-|x|) = 2^(-|x| log2 e) by one MUFU.EX2 (the product's rounding and the constant's
/// add ~1.3 |x| u relative, inside the gate's condition term |a act'|).
NUMGATE_GLU_HD float exp_neg_abs(float x) { return ex2_approx(fabsf(x) * -kLog2eF); }

constexpr float kClampF = 1e4f;
constexpr float kWindow = 0.125f;

// ---- SiLU ---------------------------------------------------------------------------------
constexpr float kSiluE0 = 0.278464543f;  ///< e^r, r the root of 1 + a + e^a
/// expm1(d) for |d| < 1/8: Taylor to d^Degree; the kernels' 6 truncates below d^7/5040 <
/// 2^-33. Degree 3 (truncation ~d^4/24, 2^-16.6 at the window's edge) exists for the
/// exhaustive test's window mutant only (Window::silu_degree3).
template <int Degree = 6>
NUMGATE_GLU_HD float expm1_small(float d) {
  static_assert(Degree == 6 || Degree == 3, "the kernels' degree 6, or the mutant's 3");
  float p;
  if constexpr (Degree == 6) {
    p = 1.0f / 720.0f;
    p = fmaf(p, d, 1.0f / 120.0f);
    p = fmaf(p, d, 1.0f / 24.0f);
    p = fmaf(p, d, 1.0f / 6.0f);
  } else {
    p = 1.0f / 6.0f;
  }
  p = fmaf(p, d, 0.5f);
  p = fmaf(p, d, 1.0f);
  return p * d;
}

/// The root windows of act' as the kernels evaluate them (exact), or deliberately worse,
/// for the exhaustive test's mutants only (tests/gpu/glu_fast_eval.cu): removed (the direct
/// formula everywhere) or SiLU's expm1 polynomial cut to degree 3.
enum class Window { exact, removed, silu_degree3 };



/// act(a) alone (the forward).
template <Fn F>
NUMGATE_GLU_HD float act_only(float a);

template <>
NUMGATE_GLU_HD float act_only<Fn::silu>(float a) {
  const float xa = max_keep_nan(a, -kClampF);   // act(-inf) = -0
  const float x = min_keep_nan(xa, kClampF);    // same e for a > 1e4 (0)
  const float e = exp_neg_abs(x);
  const float r = rcp(1.0f + e);
  const float xr = xa * r;
  return x < 0.0f ? xr * e : xr;  // x sigmoid(x)
}

template <Window W>
NUMGATE_GLU_HD void silu_both(float a, float& act, float& dact) {
  const float xa = max_keep_nan(a, -kClampF);
  const float x = min_keep_nan(xa, kClampF);
  const float e = exp_neg_abs(x);
  const float r = rcp(1.0f + e);
  const float er = e * r;
  const bool neg = x < 0.0f;
  const float xr = xa * r;
  act = neg ? xr * e : xr;
  // x >= 0: s (1 + x t), s = r, t = e r.  x < 0: s c t, s = e r, t = r, c = 1 + x + e^x.
  const math::Root<float> rt = math::silu_root(0.0f);
  const float d = (x - rt.hi) - rt.lo;
  const float c_direct = (1.0f + x) + e;
  const float c_window = fmaf(kSiluE0, expm1_small<W == Window::silu_degree3 ? 3 : 6>(d), d);
  const float c = (W != Window::removed && fabsf(d) < kWindow) ? c_window : c_direct;
  const float dneg = (er * c) * r;
  const float dpos = r * fmaf(x, er, 1.0f);
  dact = neg ? dneg : dpos;
}

// ---- GELU (erf) ---------------------------------------------------------------------------
constexpr float kInvSqrt2PiF = 0.398942280f;
/// g(s) / sqrt(2 pi), g the Mills-ratio interpolant (header), by Horner.
NUMGATE_GLU_HD float mills_poly(float s) {
  // Chebyshev interpolant of M(z) (z + 3) / sqrt(2 pi) at 80 nodes in s, truncated to
  // degree 10, as monomial coefficients in s rounded to float (fitted in long double).
  float p = 3.545063737e-05f;
  p = fmaf(p, s, -1.120567540e-04f);
  p = fmaf(p, s, -2.142774465e-04f);
  p = fmaf(p, s, 1.002967474e-03f);
  p = fmaf(p, s, 1.007247483e-03f);
  p = fmaf(p, s, -6.953911390e-03f);
  p = fmaf(p, s, -1.045831293e-02f);
  p = fmaf(p, s, 4.725969955e-02f);
  p = fmaf(p, s, 2.300173342e-01f);
  p = fmaf(p, s, 5.093321204e-01f);
  return fmaf(p, s, 7.290837169e-01f);
}
/// For z = |x|: w = exp(-z^2/2) and m = M(z) / sqrt(2 pi), so Phi(-z) = w m and
/// phi(z) (M(z) - z) = w (m - z / sqrt(2 pi)).
/// w = 2^(z^2 (-log2 e / 2)) by one MUFU.EX2 (z^2 is exact for 16-bit inputs; the product's
/// rounding adds z^2 u / 2 relative, inside the condition term ~z^2 of the tail).
NUMGATE_GLU_HD void gauss_tail(float z, float& w, float& m) {
  const float r = rcp(z + 3.0f);
  const float s = fmaf(6.0f, r, -1.0f);
  m = r * mills_poly(s);
  w = ex2_approx((z * z) * kMHalfLog2eF);
}

template <>
NUMGATE_GLU_HD float act_only<Fn::gelu_erf>(float a) {
  const float xa = max_keep_nan(a, -kClampF);
  const float x = min_keep_nan(xa, kClampF);
  float w, m;
  gauss_tail(fabsf(x), w, m);
  // Phi(-|x|) = w m; 1 - Phi(-|x|) by one FMA (written out: no contraction left to the compiler)
  return x < 0.0f ? xa * (w * m) : xa * fmaf(-w, m, 1.0f);
}

/// act' = d P(8 d) near a gelu' root (the first 7 terms of glu_math.h's fit).
NUMGATE_GLU_HD float root_poly(float d, bool tanh_form) {
  const float t = 8.0f * d;
  float p;
  if (tanh_form) {
    p = 2.0069348353412087e-08f;
    p = fmaf(p, t, 6.0065641662087833e-07f);
    p = fmaf(p, t, -4.0574532087529625e-06f);
    p = fmaf(p, t, -0.00022254781851749802f);
    p = fmaf(p, t, -0.00024660708627887546f);
    p = fmaf(p, t, 0.048439805766973619f);
    p = fmaf(p, t, 0.43040009102485849f);
  } else {
    p = 1.7315782085748693e-08f;
    p = fmaf(p, t, 5.9270263178067212e-07f);
    p = fmaf(p, t, -3.6063286494736906e-06f);
    p = fmaf(p, t, -0.00022267233065863614f);
    p = fmaf(p, t, -0.00028436994372923574f);
    p = fmaf(p, t, 0.048535622873818997f);
    p = fmaf(p, t, 0.43149399231404689f);
  }
  return d * p;
}

template <Window W>
NUMGATE_GLU_HD void gelu_erf_both(float a, float& act, float& dact) {
  const float xa = max_keep_nan(a, -kClampF);
  const float x = min_keep_nan(xa, kClampF);
  const float z = fabsf(x);
  float w, m;
  gauss_tail(z, w, m);
  const bool neg = x < 0.0f;
  act = neg ? xa * (w * m) : xa * fmaf(-w, m, 1.0f);
  const float mz = fmaf(-kInvSqrt2PiF, z, m);          // (M(z) - z) / sqrt(2 pi)
  const float direct = neg ? w * mz : fmaf(-w, mz, 1.0f);  // D = phi(z) (M(z) - z); x >= 0: 1 - D
  const math::Root<float> rt = math::gelu_erf_root(0.0f);
  const float d = (x - rt.hi) - rt.lo;
  dact = (W != Window::removed && fabsf(d) < kWindow) ? root_poly(d, false) : direct;
}

// ---- GELU (tanh) --------------------------------------------------------------------------
constexpr float kV1 = 1.59576912f;          ///< 2 sqrt(2/pi)
constexpr float kV3 = 0.0713548162f;        ///< 2 sqrt(2/pi) 0.044715
constexpr float kDV3 = 0.214064449f;        ///< 3 kV3
constexpr float kV1L = 2.302208185e+00f;    ///< kV1 log2(e)
constexpr float kV3L = 1.029432416e-01f;    ///< kV3 log2(e)

/// e = exp(-|v|), v = x (kV1 + kV3 x^2) (x2 = x * x, exact for 16-bit inputs), by one
/// MUFU.EX2 with log2 e folded into the constants: t = x (kV1L + kV3L x^2) = v log2 e, and
/// the product's rounding error t_lo = x p - fl(x p) (exact, one FMA) put back through
/// 2^(-|t|) = 2^(-|t_hi|) (1 -+ t_lo ln 2): |v| reaches ~2.5 where act'' vanishes (a ~ -1.4),
/// where the bound leaves no condition term, and the rounding of v would be amplified that
/// much in e.
NUMGATE_GLU_HD float tanh_gelu_exp(float x, float x2) {
  const float pl = fmaf(kV3L, x2, kV1L);
  const float t = x * pl;
  const float t_lo = fmaf(x, pl, -t) * kLn2F;
  const float e = ex2_approx(-fabsf(t));
  return fmaf(x < 0.0f ? t_lo : -t_lo, e, e);
}

template <>
NUMGATE_GLU_HD float act_only<Fn::gelu_tanh>(float a) {
  const float xa = max_keep_nan(a, -kClampF);
  const float x = min_keep_nan(xa, kClampF);
  const float e = tanh_gelu_exp(x, x * x);
  const float r = rcp(1.0f + e);
  const float xr = xa * r;
  return x < 0.0f ? xr * e : xr;  // x sigmoid(v)
}

template <Window W>
NUMGATE_GLU_HD void gelu_tanh_both(float a, float& act, float& dact) {
  const float xa = max_keep_nan(a, -kClampF);
  const float x = min_keep_nan(xa, kClampF);
  const float x2 = x * x;
  const float e = tanh_gelu_exp(x, x2);
  const float r = rcp(1.0f + e);
  const float er = e * r;
  const bool neg = x < 0.0f;
  const float xr = xa * r;
  act = neg ? xr * e : xr;
  const float xdv = x * fmaf(kDV3, x2, kV1);  // x v'
  // s (1 + x v' (1 - s)): x < 0: s = e r, 1 - s = r; x >= 0: s = r, 1 - s = e r.
  const float direct = neg ? er * fmaf(xdv, r, 1.0f) : r * fmaf(xdv, er, 1.0f);
  const math::Root<float> rt = math::gelu_tanh_root(0.0f);
  const float d = (x - rt.hi) - rt.lo;
  dact = (W != Window::removed && fabsf(d) < kWindow) ? root_poly(d, true) : direct;
}

/// act(a) and act'(a) (the backward; W other than exact: the exhaustive test's mutants only).
template <Fn F, Window W = Window::exact>
NUMGATE_GLU_HD void act_dact(float a, float& act, float& dact) {
  if constexpr (F == Fn::silu) silu_both<W>(a, act, dact);
  else if constexpr (F == Fn::gelu_erf) gelu_erf_both<W>(a, act, dact);
  else gelu_tanh_both<W>(a, act, dact);
}

}  // namespace numgate::glu::fast
