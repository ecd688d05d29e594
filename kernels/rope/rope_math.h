// numgate — RoPE scalar math shared by the reference oracle (host, g++) and the CUDA
// kernels (rope_kernels.cu), so that the two follow the declared policy operation for
// operation. Plain C++ when compiled by g++; __host__ __device__ under nvcc.
//
// Declared numerics policy (formula_version 1), for head_dim d, frequency index
// f in [0, d/2), integer position p:
//
//   inv_freq_f = RN_fp32( theta ^ (-2f / d) )
//       evaluated ONCE on the host in FP64 (std::pow, exponent -2f/d in FP64) and rounded
//       once to FP32. For the declared thetas (1e4, 1e6) and head_dims (64, 128) every
//       entry lies more than 2^-40 (relative) away from an FP32 rounding boundary
//       (tests/cpu/test_mutants_rope.cpp checks this for every declared case), so the
//       table is the correctly rounded FP32 value whatever libm computes the FP64 pow.
//       The kernel launcher builds the table with this same function and passes it to the
//       kernel as a launch parameter: kernel and reference use bitwise the same table.
//       (Hugging Face computes `1.0 / (base ** (arange(0, d, 2).float() / d))` in FP32,
//       i.e. powf then a division: the same quantity within ~1-2 FP32 ulp.)
//   angle      = RN_fp32( float(p) * inv_freq_f )           (one FP32 multiply)
//       float(p) is exact for |p| < 2^24 (positions here are at most 32,767). The FP32
//       angle carries up to ~2 u |angle| of error (u = 2^-24): ~2e-3 rad at p = 32,767.
//       That is the declared policy (it is what HF's FP32 `position_ids.float() @
//       inv_freq` computes); the gate measures the kernel against a reference with it.
//   c, s       = RN_fp32( cos / sin of the FP32 angle evaluated in FP64 )
//       host std::cos / std::sin, device sincos (double, full range reduction): both
//       within 1-2 FP64 ulp, so after the FP32 rounding they agree bit for bit except
//       with probability ~1e-8 per value (a 1-ulp FP32 difference there). This is at least
//       as accurate as CUDA sincosf (<= 2 ulp) or glibc sinf/cosf; never __sinf/__cosf.
//   rotation   y1 = RN(RN(x1 * c) - RN(x2 * s)),  y2 = RN(RN(x2 * c) + RN(x1 * s))
//       in FP32, no FMA contraction, then one rounding to the case dtype.
//   backward   the same with s -> -s (rotation by -angle: the transpose); the negation
//       is exact, so dx1 = RN(RN(g1 c) + RN(g2 s)), dx2 = RN(RN(g2 c) - RN(g1 s)).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define NUMGATE_ROPE_HD __host__ __device__ __forceinline__
#else
#define NUMGATE_ROPE_HD inline
#endif

namespace numgate::rope::math {

/// Largest head_dim the kernels accept (d/2 = 512 frequencies in one launch parameter).
constexpr int kMaxHeadDim = 1024;

/// theta^(-2f/d) in FP64 (the golden inv_freq, and the value the FP32 table rounds).
inline double inv_freq_fp64(double theta, std::int64_t f, std::int64_t head_dim) {
  return std::pow(theta, -static_cast<double>(2 * f) / static_cast<double>(head_dim));
}

/// The declared FP32 inv_freq table entry (host only).
inline float inv_freq(double theta, std::int64_t f, std::int64_t head_dim) {
  return static_cast<float>(inv_freq_fp64(theta, f, head_dim));
}

/// float(p) * inv_freq, one FP32 rounding.
NUMGATE_ROPE_HD float angle_of(std::int64_t p, float inv) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(__ll2float_rn(static_cast<long long>(p)), inv);
#else
  return static_cast<float>(p) * inv;
#endif
}

/// cos and sin of the FP32 angle, evaluated in FP64, each rounded once to FP32.
NUMGATE_ROPE_HD void cos_sin(float angle, float& c, float& s) {
#if defined(__CUDA_ARCH__)
  double sd, cd;
  ::sincos(static_cast<double>(angle), &sd, &cd);
  c = __double2float_rn(cd);
  s = __double2float_rn(sd);
#else
  const double a = static_cast<double>(angle);
  c = static_cast<float>(std::cos(a));
  s = static_cast<float>(std::sin(a));
#endif
}

/// (y1, y2) = (x1 c - x2 s, x2 c + x1 s), every operation rounded once in FP32 (no FMA).
NUMGATE_ROPE_HD void rotate(float x1, float x2, float c, float s, float& y1, float& y2) {
#if defined(__CUDA_ARCH__)
  y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
#else
  // the oracle library is compiled with -ffp-contract=off
  const float a = x1 * c, b = x2 * s, e = x2 * c, g = x1 * s;
  y1 = a - b;
  y2 = e + g;
#endif
}

}  // namespace numgate::rope::math
