// numgate — small device helpers shared by the target kernels.
//
// What is here:
//   * dtype traits: the accumulation type of each element type (float for float,
//     __half and __nv_bfloat16; double for double), conversions T <-> acc with
//     round-to-nearest-even, and kVec<T>, the number of elements in 16 bytes;
//   * "units": up to kVec<T> consecutive elements of a row, kept packed as raw bits in
//     four 32-bit registers and widened on use, moved as ONE 16-byte vector access when
//     that is legal (full unit and 16-byte aligned address) and element by element
//     otherwise, so kernels are correct for any element alignment; load_unit_hint /
//     store_unit_hint move them with an evict-first cache hint (data touched once);
//   * deterministic warp and block sums: a warp shuffle-xor butterfly, then one value
//     per warp through shared memory, reduced again by a butterfly. The summation tree
//     depends only on blockDim.x, so the same inputs and launch shape give the same
//     bits on every run and every GPU. No atomics.
//
// Device code only: include this from .cu files (the public launcher headers never
// include it, so host C++ compiled by g++ does not see it).
#pragma once

#ifndef __CUDACC__
#error "common/cuda_utils.cuh holds device code; include it from .cu files only"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace numgate::device {

// ---------------------------------------------------------------------------------
// dtype traits
// ---------------------------------------------------------------------------------

/// Per element type: `acc` is the type sums and the normalization math run in;
/// to_acc widens exactly; from_acc rounds to nearest, ties to even (NaN stays NaN,
/// overflow goes to +-inf).
template <typename T>
struct DTypeTraits;

template <>
struct DTypeTraits<float> {
  using acc = float;
  static __device__ __forceinline__ float to_acc(float v) { return v; }
  static __device__ __forceinline__ float from_acc(float v) { return v; }
};

template <>
struct DTypeTraits<double> {
  using acc = double;
  static __device__ __forceinline__ double to_acc(double v) { return v; }
  static __device__ __forceinline__ double from_acc(double v) { return v; }
};

template <>
struct DTypeTraits<__half> {
  using acc = float;
  static __device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_acc(float v) { return __float2half_rn(v); }
};

template <>
struct DTypeTraits<__nv_bfloat16> {
  using acc = float;
  static __device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_acc(float v) { return __float2bfloat16_rn(v); }
};

/// Accumulation type of T: float for float/__half/__nv_bfloat16, double for double.
template <typename T>
using acc_t = typename DTypeTraits<T>::acc;

/// Elements of T in one 16-byte vector: 4 (float), 8 (__half, bf16), 2 (double).
template <typename T>
inline constexpr int kVec = static_cast<int>(16 / sizeof(T));

/// Exact widening T -> acc_t<T>.
template <typename T>
__device__ __forceinline__ acc_t<T> to_acc(T v) {
  return DTypeTraits<T>::to_acc(v);
}

/// Rounding acc_t<T> -> T (round to nearest even).
template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) {
  return DTypeTraits<T>::from_acc(v);
}

// Correctly rounded scalar operations, independent of -use_fast_math / -prec-div /
// -prec-sqrt: the numerics contract of the kernels names these exact operations.

/// a / b, IEEE round to nearest.
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
/// sqrt(a), IEEE round to nearest.
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }
/// a * b, a - b, a + b, each rounded once and never contracted into an FMA with a
/// neighbouring operation. Used where the reference's operation order must be followed
/// exactly: e.g. a gradient g = dy * w that is both summed and subtracted must be the
/// same rounded value in both places (contracting `dy * w - mean_g` into an FMA leaves the
/// rounding error of dy * w: a nonzero dx where the math and the reference give exactly 0),
/// and in dx = r * (g - xhat * c), which cancels for hidden 1, the kernel must round
/// exactly as the reference does or the cancellation amplifies the difference.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// ---------------------------------------------------------------------------------
// units: up to kVec<T> elements, loaded/stored as one 16-byte vector when legal
// ---------------------------------------------------------------------------------

/// kVec<T> raw elements packed in four 32-bit words (element j of a 16-bit type is
/// half (j % 2) of word j / 2, low half first; a double is words 2j (low) and 2j+1
/// (high)), i.e. exactly the 16 bytes of memory. Kernels cache raw values in Units and
/// widen to acc_t<T> on use, which keeps a cached unit at 4 registers for every T.
template <typename T>
struct alignas(16) Unit {
  std::uint32_t w[4];
};
static_assert(sizeof(Unit<float>) == 16 && kVec<float> * sizeof(float) == 16 &&
                  kVec<double> * sizeof(double) == 16 && kVec<__half> * sizeof(__half) == 16 &&
                  kVec<__nv_bfloat16> * sizeof(__nv_bfloat16) == 16,
              "a Unit is exactly one 16-byte vector of kVec<T> elements");

namespace detail {

/// Raw bits of one element, zero-extended (the low word for double: see elem_bits_hi).
template <typename T>
__device__ __forceinline__ std::uint32_t elem_bits(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half_as_ushort(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat16_as_ushort(v);
  } else if constexpr (sizeof(T) == 4) {
    return __float_as_uint(v);
  } else {
    return static_cast<std::uint32_t>(__double2loint(v));
  }
}

/// High word of a double's bits (0 for the other types).
template <typename T>
__device__ __forceinline__ std::uint32_t elem_bits_hi(T v) {
  if constexpr (sizeof(T) == 8) {
    return static_cast<std::uint32_t>(__double2hiint(v));
  } else {
    return 0u;
  }
}

/// Puts element j (raw bits lo/hi from elem_bits/elem_bits_hi) into a zeroed slot of u.
template <typename T>
__device__ __forceinline__ void place_bits(Unit<T>& u, int j, std::uint32_t lo, std::uint32_t hi) {
  if constexpr (sizeof(T) == 2) {
    u.w[j >> 1] |= lo << (16 * (j & 1));
  } else if constexpr (sizeof(T) == 4) {
    u.w[j] = lo;
  } else {
    u.w[2 * j] = lo;
    u.w[2 * j + 1] = hi;
  }
}

}  // namespace detail

/// A unit of zeros (all-zero bits are +0 for every T; padding contributes nothing).
template <typename T>
__device__ __forceinline__ Unit<T> zero_unit() {
  return Unit<T>{{0u, 0u, 0u, 0u}};
}

/// Element j of u as T (j must be a compile-time constant after unrolling, so this is
/// register moves and at most a shift).
template <typename T>
__device__ __forceinline__ T unit_elem(const Unit<T>& u, int j) {
  if constexpr (sizeof(T) == 2) {
    const auto b = static_cast<unsigned short>(u.w[j >> 1] >> (16 * (j & 1)));
    if constexpr (std::is_same_v<T, __half>) {
      return __ushort_as_half(b);
    } else {
      return __ushort_as_bfloat16(b);
    }
  } else if constexpr (sizeof(T) == 4) {
    return __uint_as_float(u.w[j]);
  } else {
    return __hiloint2double(static_cast<int>(u.w[2 * j + 1]), static_cast<int>(u.w[2 * j]));
  }
}

/// Element j of u widened to acc_t<T>.
template <typename T>
__device__ __forceinline__ acc_t<T> unit_acc(const Unit<T>& u, int j) {
  return to_acc(unit_elem(u, j));
}

/// Rounds kVec<T> acc values to T (round to nearest even) and packs them into a unit.
/// 16-bit types convert two at a time (cvt.rn.{bf16x2,f16x2}.f32).
template <typename T>
__device__ __forceinline__ Unit<T> pack_from_acc(const acc_t<T> (&v)[kVec<T>]) {
  Unit<T> u = zero_unit<T>();
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);  // .x = low half
      u.w[i] = detail::elem_bits(p.x) | (detail::elem_bits(p.y) << 16);
    }
  } else if constexpr (std::is_same_v<T, __half>) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2 p = __floats2half2_rn(v[2 * i], v[2 * i + 1]);  // .x = low half
      u.w[i] = detail::elem_bits(p.x) | (detail::elem_bits(p.y) << 16);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec<T>; ++j) {
      const T t = from_acc<T>(v[j]);
      detail::place_bits(u, j, detail::elem_bits(t), detail::elem_bits_hi(t));
    }
  }
  return u;
}

/// Makes the optimizer forget what `u` holds (an empty asm that "may rewrite" its four
/// registers). Kernels that cache raw units across a block reduction call this after
/// the reduction: otherwise the compiler may keep the kVec<T> widened acc values from
/// the first phase alive instead of the 4 packed registers, which doubles register use
/// for 16-bit types. The values are unchanged; widening again costs one ALU op.
template <typename T>
__device__ __forceinline__ void keep_packed(Unit<T>& u) {
  asm volatile("" : "+r"(u.w[0]), "+r"(u.w[1]), "+r"(u.w[2]), "+r"(u.w[3]));
}

/// True when the unit whose first element has index `lo` in a row of `n` elements
/// lies entirely inside the row (lo may be negative: units sit on a virtual grid).
template <typename T>
__device__ __forceinline__ bool unit_is_full(int lo, int n) {
  return lo >= 0 && lo + kVec<T> <= n;
}

/// Number of elements by which `p` lies past the previous 16-byte boundary
/// (p must be sizeof(T)-aligned). A row starting at p is viewed on a virtual
/// 16-byte grid starting `shift` elements before p.
template <typename T>
__device__ __forceinline__ int grid_shift(const T* p) {
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(p) & 15u) / sizeof(T));
}

/// True when p is 16-byte aligned (host launchers: may a kernel's aligned path, one 16-byte
/// access per unit, be taken for this tensor).
template <typename T>
__host__ __device__ inline bool aligned16(const T* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

/// True when the virtual grid of shift `shift`, laid over a row starting at `p`,
/// has its unit starts on 16-byte boundaries of p's memory, i.e. (p - shift) is
/// 16-byte aligned. Computed on integers: p - shift may lie outside the allocation.
template <typename T>
__device__ __forceinline__ bool grid_is_aligned(const T* p, int shift) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  return ((a - static_cast<std::uintptr_t>(shift) * sizeof(T)) & 15u) == 0;
}

/// Loads the unit covering row elements [lo, lo + kVec<T>) of `row` (n elements).
/// vector_ok: the unit is full (unit_is_full) AND row + lo is 16-byte aligned; then it
/// is one 16-byte load. Otherwise each in-range element is loaded on its own and
/// out-of-range slots (index < 0 or >= n) are zero. Slot j always holds element lo + j.
template <typename T>
__device__ __forceinline__ Unit<T> load_unit(const T* row, int lo, int n, bool vector_ok) {
  Unit<T> u = zero_unit<T>();
  if (vector_ok) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + lo);
    u.w[0] = q.x;
    u.w[1] = q.y;
    u.w[2] = q.z;
    u.w[3] = q.w;
    return u;
  }
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const int i = lo + j;
    if (i >= 0 && i < n) {
      const T t = row[i];
      detail::place_bits(u, j, detail::elem_bits(t), detail::elem_bits_hi(t));
    }
  }
  return u;
}

/// Stores slot j of `u` to row[lo + j] for every in-range j (same rules as load_unit).
template <typename T>
__device__ __forceinline__ void store_unit(T* row, int lo, int n, bool vector_ok, const Unit<T>& u) {
  if (vector_ok) {
    *reinterpret_cast<uint4*>(row + lo) = make_uint4(u.w[0], u.w[1], u.w[2], u.w[3]);
    return;
  }
#pragma unroll
  for (int j = 0; j < kVec<T>; ++j) {
    const int i = lo + j;
    if (i >= 0 && i < n) row[i] = unit_elem(u, j);
  }
}

/// load_unit / store_unit for elementwise kernels over a flat tensor of n elements at p
/// (64-bit indices): the unit whose first element has index lo. lo may be negative for the
/// first unit of a tensor whose start is not on the 16-byte grid (element-wise then), and
/// lo >= n reads / writes nothing.
template <typename T>
__device__ __forceinline__ Unit<T> load_at(const T* p, int64_t lo, int64_t n, bool vector_ok) {
  constexpr int V = kVec<T>;
  if (lo >= 0) return load_unit(p + lo, 0, static_cast<int>(n - lo < V ? n - lo : V), vector_ok);
  return load_unit(p, static_cast<int>(lo), static_cast<int>(n < V ? n : V), false);
}
template <typename T>
__device__ __forceinline__ void store_at(T* p, int64_t lo, int64_t n, bool vector_ok, const Unit<T>& u) {
  constexpr int V = kVec<T>;
  if (lo >= 0) {
    store_unit(p + lo, 0, static_cast<int>(n - lo < V ? n - lo : V), vector_ok, u);
  } else {
    store_unit(p, static_cast<int>(lo), static_cast<int>(n < V ? n : V), false, u);
  }
}

/// load_unit / store_unit (Index int: lo and n within a row) or load_at / store_at (Index
/// int64_t: a flat tensor of n elements) with an evict-first cache hint when kEvictFirst:
/// a unit that moves as one 16-byte vector (vector_ok: the unit is full AND p + lo is
/// 16-byte aligned, as for load_unit) is loaded by ld.global.cs (__ldcs) / stored by
/// st.global.cs (__stcs), "cache streaming": its lines are the first evicted from L1 and L2,
/// for data touched once, so they do not push out lines that other accesses will reuse.
/// A hint only: the values read and written are load_unit's / load_at's bit for bit; the
/// other units (partial, misaligned) move element by element without it. Global memory only.
template <bool kEvictFirst, typename T, typename Index>
__device__ __forceinline__ Unit<T> load_unit_hint(const T* p, Index lo, Index n, bool vector_ok) {
  static_assert(std::is_same_v<Index, int> || std::is_same_v<Index, std::int64_t>,
                "Index: int (a row, load_unit) or int64_t (a flat tensor, load_at)");
  if constexpr (kEvictFirst) {
    if (vector_ok) {
      const uint4 q = __ldcs(reinterpret_cast<const uint4*>(p + lo));
      return Unit<T>{{q.x, q.y, q.z, q.w}};
    }
  }
  if constexpr (std::is_same_v<Index, int>) return load_unit(p, lo, n, vector_ok);
  else return load_at(p, lo, n, vector_ok);
}
template <bool kEvictFirst, typename T, typename Index>
__device__ __forceinline__ void store_unit_hint(T* p, Index lo, Index n, bool vector_ok, const Unit<T>& u) {
  static_assert(std::is_same_v<Index, int> || std::is_same_v<Index, std::int64_t>,
                "Index: int (a row, store_unit) or int64_t (a flat tensor, store_at)");
  if constexpr (kEvictFirst) {
    if (vector_ok) {
      __stcs(reinterpret_cast<uint4*>(p + lo), make_uint4(u.w[0], u.w[1], u.w[2], u.w[3]));
      return;
    }
  }
  if constexpr (std::is_same_v<Index, int>) store_unit(p, lo, n, vector_ok, u);
  else store_at(p, lo, n, vector_ok, u);
}

// ---------------------------------------------------------------------------------
// deterministic reductions
// ---------------------------------------------------------------------------------

/// Sum over the 32 lanes of a warp by a shuffle-xor butterfly (all lanes active).
/// Every lane ends with the bitwise same value: at each level lanes i and i^off add
/// the same two operands (IEEE addition is commutative), so the trees agree.
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// Sums N values over a 1-D block, in place: on return every thread holds the block
/// totals in v[0..N). Requirements: blockDim.x is a multiple of 32 (at most 1024),
/// blockDim.y == blockDim.z == 1, every thread of the block calls it. `smem` is
/// N x 32 shared values; it is free for reuse when this returns (trailing barrier).
/// The order of additions is fixed by blockDim.x alone: butterfly within each warp,
/// then a butterfly over the per-warp totals (zero-padded to 32) done by every warp.
template <int N, typename A>
__device__ __forceinline__ void block_sum(A (&v)[N], A (*smem)[32]) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = warp_sum(v[i]);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) smem[i][warp] = v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = warp_sum(lane < nwarps ? smem[i][lane] : A(0));
  __syncthreads();
}

}  // namespace numgate::device
