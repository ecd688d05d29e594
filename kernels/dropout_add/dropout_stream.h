// numgate — dropout_add's random stream: the one declared, bit-exact rule shared by the
// golden (FP64), the reference (CPU) and the CUDA kernels. Plain C++: compiles with g++ and
// with nvcc (host and device: NUMGATE_DROPOUT_HD is __host__ __device__ under __CUDACC__
// only). Depends on Random123's Philox-4x32-10 (<Random123/philox.h>, header only,
// Debian/Ubuntu package librandom123-dev; Salmon et al., SC'11).
//
// The rule, for a tensor of dropout probability p, Philox key `seed` and counter offset
// `offset` (both 64-bit; the op's case parameters philox_seed and philox_offset):
//
//   threshold t = floor(p * 2^32)     computed once on the host in FP64 (p in [0, 1):
//                                     p * 2^32 is exact, so t is exact and fits uint32)
//   element i (the flat, row-major index over the WHOLE tensor, 0-based):
//     ctr = { lo32(i >> 2), hi32(i >> 2), lo32(offset), hi32(offset) }
//     key = { lo32(seed), hi32(seed) }
//     r_i = Philox4x32_10(ctr, key)[i & 3]
//     keep (m_i = 1) iff r_i >= t     (drop probability exactly t / 2^32; p = 0 keeps all)
//
// One Philox call serves the 4 consecutive elements 4g..4g+3 of group g = i >> 2 (lane
// i & 3); offsets at least 1 apart give disjoint counter sets, so disjoint streams, for
// any tensor of fewer than 2^64 elements. A kernel that processes a slice of the tensor
// (a row window) draws with i = element_offset + local index, so element i's draw does
// not depend on the launch split.
//
// The scale applied to kept elements (dropout_add.cuh):
//   s = RN_fp32(1 / (1 - p))  for fp32 / bf16 / fp16 tensors (the FP64 quotient rounded
//                             once to FP32: PyTorch forms the scale in its FP32
//                             accumulation type); dropout_scale_fp32
//   s = 1 / (1 - p)           in FP64 for fp64 tensors (gate 1's promoted cases and the
//                             double kernels); dropout_scale_fp64
#pragma once

#include <Random123/philox.h>

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define NUMGATE_DROPOUT_HD __host__ __device__
#else
#define NUMGATE_DROPOUT_HD
#endif

namespace numgate::dropout_add {

/// The four 32-bit draws of Philox group g (elements 4g .. 4g+3) under (seed, offset).
NUMGATE_DROPOUT_HD inline r123::Philox4x32::ctr_type dropout_group(std::uint64_t g, std::uint64_t seed,
                                                                     std::uint64_t offset) {
  r123::Philox4x32 rng;
  const r123::Philox4x32::ctr_type ctr = {{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32),
                                           static_cast<std::uint32_t>(offset),
                                           static_cast<std::uint32_t>(offset >> 32)}};
  const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  return rng(ctr, key);
}

/// r_i: the 32-bit draw of element i (lane i & 3 of group i >> 2).
NUMGATE_DROPOUT_HD inline std::uint32_t dropout_draw(std::uint64_t i, std::uint64_t seed, std::uint64_t offset) {
  return dropout_group(i >> 2, seed, offset)[static_cast<unsigned>(i & 3u)];
}

/// The keep rule: m_i = 1 iff r_i >= t.
NUMGATE_DROPOUT_HD inline bool dropout_keep(std::uint32_t r, std::uint32_t t) { return r >= t; }

/// Host: the threshold t = floor(p * 2^32) for p in [0, 1) (callers validate p first; for
/// p outside [0, 1) or NaN the result is unspecified). FP64, exact.
inline std::uint32_t dropout_threshold(double p) {
  return static_cast<std::uint32_t>(std::floor(p * 4294967296.0));
}

/// Host: the scale of kept elements of fp32 / bf16 / fp16 tensors, RN_fp32(1 / (1 - p)):
/// the FP64 quotient 1 / (1 - p) (1 - p and the division each rounded to nearest in FP64)
/// rounded once to FP32.
inline float dropout_scale_fp32(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

/// Host: the scale of kept elements of fp64 tensors, 1 / (1 - p) in FP64.
inline double dropout_scale_fp64(double p) { return 1.0 / (1.0 - p); }

}  // namespace numgate::dropout_add
