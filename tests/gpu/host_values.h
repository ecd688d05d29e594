// Host-side helpers of the standalone GPU tests (test_ce_fused.cpp, test_aligned_paths.cpp):
// a deterministic splitmix64 input stream, the conversion of a double to each element type,
// and the element-wise bit comparison of two downloaded outputs. Host code only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace numgate::testing {

/// Deterministic host stream (splitmix64; Steele, Lea, Flood 2014): next() is uniform in
/// [0, 1) with 53 random bits, the same sequence on every platform for a given seed s.
struct SplitMix64 {
  std::uint64_t s;
  double next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }
  /// Uniform in [-1, 1).
  double symmetric() { return 2.0 * next() - 1.0; }
};

/// v rounded to T (through float for the 16-bit types: round to nearest even, the same
/// result as rounding v directly except in double-rounding ties, which these tests accept).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(v));
  else return static_cast<T>(v);
}

/// Index of the first element (of `es` bytes) whose bits differ between a and b, -1 when
/// none does, 0 when the sizes differ.
inline std::int64_t first_difference(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                                     std::size_t es) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); i += es)
    if (std::memcmp(a.data() + i, b.data() + i, es) != 0) return static_cast<std::int64_t>(i / es);
  return -1;
}

}  // namespace numgate::testing
