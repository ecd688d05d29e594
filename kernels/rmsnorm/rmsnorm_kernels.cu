/*
RMSNorm forward and backward kernels (the numgate target kernels for RMSNorm).

The op (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; the Llama /
Qwen3 form: no mean subtraction, no bias, eps inside the square root, the weight
applied after normalizing). For a row x[0..H) of a row-major [rows, H] tensor:

    rstd = 1 / sqrt( sum_i x_i^2 / H + eps )
    y_i  = (x_i * rstd) * w_i

Backward. With g_i = dy_i * w_i and xhat_i = x_i * rstd, differentiating y through
rstd gives d rstd / d x_i = -rstd^3 * x_i / H, hence

    dx_i = rstd * ( g_i - xhat_i * rstd * (sum_j g_j * x_j) / H )
    dw_i = sum over rows of dy_i * xhat_i

Numerics contract (the CPU reference in rmsnorm_oracle.cpp mirrors it). acc is float
for T = float, __half, __nv_bfloat16 and double for T = double. Every listed scalar
operation is one IEEE operation, round to nearest; sums may be evaluated in any fixed
tree order and a*b+c may be fused (FMA) except in
the backward g_i and dx_i, which are computed without contraction (mul_rn/sub_rn), in the
reference's order: dx cancels for hidden 1 and must round as the reference does:

  forward, per row:   ss   = sum_i acc(x_i)^2
                      ms   = ss / acc(H)
                      r    = 1 / sqrt(ms + acc(eps))     (correctly rounded divide and
                                                          sqrt: __fdiv_rn/__fsqrt_rn,
                                                          never rsqrtf)
                      y_i  = T( (acc(x_i) * r) * acc(w_i) )
  backward, per row:  g_i  = acc(dy_i) * acc(w_i)
                      s    = sum_i acc(x_i)^2 ;  r as above
                      mgx  = (sum_i g_i * acc(x_i)) / acc(H)
                      xhat = acc(x_i) * r
                      dx_i = T( r * (g_i - xhat * (r * mgx)) )
  weight gradient:    dw_j = T( sum_rows acc(dy[r,j]) * (acc(x[r,j]) * r_r) )
                      with r_r bitwise the value used for dx (the fused path uses
                      the same register; the separate path stores r (as acc) in the
                      workspace and reads it back), summed in acc in a fixed order
                      by a two-stage reduction (below).

Inputs with NaN/Inf are not special-cased: a NaN anywhere in a row makes the row's
sums NaN and so every output of the row; an Inf in x gives rstd = 0 and Inf * 0 = NaN.

Design.

  Vector access on a virtual grid. A row of T starting at address p is viewed on a
  16-byte grid that starts shift = (p % 16) / sizeof(T) elements before p. "Unit" u
  covers row elements [u*VEC - shift, (u+1)*VEC - shift) clipped to [0, H), with
  VEC = 16 / sizeof(T); a row has nunits = ceil((H + shift) / VEC) units. The grid is
  chosen per row from x, so x's full units are always 16-byte aligned. Every other
  tensor (w, dy, dx, y) is checked once per row: if (ptr - shift) is 16-byte aligned
  its full units are too, and they move as one 16-byte access; otherwise (and for the
  partial first/last unit) the unit moves element by element. The check is uniform
  across the block, so this costs no divergence, and any element alignment of any
  pointer is correct. Production tensors (16-byte aligned, H % VEC == 0) take the
  vector path everywhere.

  forward: one block per row, ONE pass over x from DRAM. Each thread caches K units of
  x (raw T, 16 bytes each, 4 registers per unit) in registers, sums their squares, the
  block reduces, and the same registers are normalized and written. Thread t owns
  units t, t + B, ..., t + (K-1)B (B = blockDim.x), so every load/store instruction of
  a warp touches 512 contiguous bytes. K is the smallest of {1, 2, 4, 8} with
  ceil(units / K) <= 384 (else the largest allowed K, if that needs <= 1024 threads),
  B = ceil(units / K) rounded up to a multiple of 32. Preferring ~256-384 threads over
  one unit per thread keeps 32-64 bytes of loads in flight per thread and several rows
  per SM; on an H200 this took bf16 8192x5120 from 97 us (K = 1, 640 threads) to
  46 us (K = 2, 320 threads), about 86% of device-to-device copy bandwidth. fp64 caches
  at most K = 4 (at K = 8 it needs more than the 64 registers a 1024-thread block
  allows). Rows beyond the cache (more than 8192 units: fp32 H > 32768, bf16/fp16 only
  for H > 65529 or unaligned rows of 65536; fp64: more than 4096 units, H > 8192; a
  row's units are ceil((H + shift) / VEC)) use a streaming kernel that reads x twice
  (the second read mostly hits L2).

  backward, per row: the same scheme, caching x and dy, K in {1, 2, 4} with a preferred
  block of <= 256 threads (at most 4096 units per row, i.e. bf16/fp16 H <= 32768, fp32
  H <= 16384, fp64 H <= 8192, else a streaming kernel). w is re-read in the second
  phase (it is shared by all rows, so it is an L1/L2 hit). Both row sums (sum x^2 and
  sum g*x) go through one block reduction. The per-row code is the same in every path
  and the block shape depends only on (H, dtype, the row's 16-byte phase), so dx of a
  row never depends on how many rows are launched with it or which chunk it is in.

  backward_atomic_dw (the nondeterministic variant): dx and the per-chunk partials as
  below; stage 2 replaced by one atomicAdd per (chunk, column) into a zeroed FP32 (FP64)
  [H] accumulator, then one rounding kernel. The order of the additions is the blocks'
  arrival order.

  backward dw (deterministic, no atomics). Rows are split into chunks whose size is a
  function of (rows, H) only, never of the GPU, so results are bitwise reproducible on
  any device. Stage 1 leaves partial[chunk][col] = sum over the chunk's rows (acc) in
  the workspace; stage 2 sums partial[..][col] over the chunks in a fixed order (a
  32x32 block per 32 columns: thread row ty takes chunks ty, ty+32, ... ascending, then
  the 32 row sums in order 0..31) and rounds to T.

  Fused path (H % VEC == 0, so every row has x's 16-byte phase and a thread owns the
  same columns in every row; and the row's <= 1024 units fit a block of <= 256
  threads: with x 16-byte aligned bf16/fp16 H <= 8192, fp32 H <= 4096, fp64 H <= 2048;
  one VEC less otherwise). Stage 1 is fused into the dx kernel: one block per chunk of
  ceil(rows / max(1, 1966080 / H)) rows (about 480 chunks at H = 4096, 384 at 5120:
  at most one wave of resident blocks on a 132-SM H200, <= ~8 MB of partials). The
  block walks its rows in order, keeping the next rows' loads in flight while it
  reduces and writes one row. Each thread accumulates acc(dy) * xhat for its columns
  (xhat bitwise the value used for dx) over the chunk's rows in row order and finally
  writes them to partial[chunk][..] (16-byte stores where aligned). x and dy are read
  once: the backward moves the minimal 3 rows*H elements plus the partials.
    * x and dy 16-byte aligned (production): every unit is full and aligned, and each
      thread copies its own units of the next rows with cp.async into a ring of 3 row
      slots in shared memory (x and dy of one row per slot; 48 KB per block for bf16
      H = 4096), up to 2 rows ahead, and reads back only its own slots. Registers hold
      just the dw accumulators (<= 64 registers for K <= 2: 4 blocks of 256 threads per
      SM; <= 128 for K = 4), so the rows in flight are bounded by shared memory instead
      of the register file.
    * otherwise (x or dy not 16-byte aligned): the next row's x and dy are prefetched
      into a second register set; caps of 80 (K <= 2) and 128 (K = 4) registers keep 3
      blocks of 256 threads (or of the 160 threads of bf16 H = 5120) per SM.
  Both without spills. Measured on an H200 (device-to-device copy ~4.25 TB/s), whole
  backward, bf16, separate path -> fused: 8192x4096 99 -> 75 us (48% -> 63% of copy
  bandwidth), 8192x5120 116 -> 92 us (51% -> 64%), 4096x8192 96 -> 83 us, 2048x4096
  33 -> 29 us (36% -> 40%; this size is dominated by fixed costs: forward is 54%).
  Register prefetch alone (no shared-memory ring) gave 79 / 111 / 98 / 32 us: the
  register file, not DRAM, limited the rows in flight. 2 ring slots measured within
  1-2 points of 3; 4 slots (fewer blocks per SM) were worse, and so was a smaller chunk
  target (1.57M columns: 307 chunks at H = 5120, 57% instead of 64%).

  Separate path (H % VEC != 0, where rows have different 16-byte phases and column
  ownership would change from row to row, or rows too long for the fused block): the
  dx kernel runs one block per row and stores r to the workspace; stage 1 then re-reads
  x and dy in chunks of R rows (R = 64 for H >= 1024, taller for narrow rows, up to
  1024). A 32x8 block owns a column tile of one chunk: thread (tx, ty) sums rows ty,
  ty+8, ... of the chunk for its columns and the 8 row-lanes are combined in order 0..7
  through shared memory. When H % VEC == 0 and x, dy are 16-byte aligned, a thread owns
  one unit (VEC columns, 16-byte loads; tile = 32 units); otherwise it owns columns tx
  and tx + 32 (element loads; tile = 64 columns). Both variants add in the same order.

  Reductions are warp shuffle-xor butterflies plus one shared-memory round across warps
  (common/cuda_utils.cuh), with an order fixed by the block size. The block size
  depends only on H, the dtype and x's 16-byte phase, so repeated launches on
  the same buffers are bitwise identical; moving x to a different 16-byte phase may change the
  last bits of the sums (still within the contract above).

Limits: 1 <= H <= 65536, 0 <= rows <= 2^31 - 1 (at most one block per row in grid.x), pointers
aligned to sizeof(T), no overlap between tensors. Build without --use_fast_math (the
divide and sqrt use explicit _rn intrinsics, but fast-math would also flush denormals).
*/

#include "rmsnorm/rmsnorm.cuh"

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace numgate::rmsnorm {
namespace {

using numgate::device::acc_t;
using numgate::device::block_sum;
using numgate::device::add_rn;
using numgate::device::div_rn;
using numgate::device::mul_rn;
using numgate::device::sub_rn;
using numgate::device::from_acc;
using numgate::device::grid_is_aligned;
using numgate::device::grid_shift;
using numgate::device::keep_packed;
using numgate::device::kVec;
using numgate::device::load_unit;
using numgate::device::pack_from_acc;
using numgate::device::sqrt_rn;
using numgate::device::store_unit;
using numgate::device::to_acc;
using numgate::device::unit_acc;
using numgate::device::Unit;
using numgate::device::unit_is_full;
using numgate::device::zero_unit;

constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxRows = 2147483647;  // grid.x limit: one block per row
constexpr int kMaxThreads = 1024;
constexpr int kStreamThreads = 1024;
// forward caches up to 8 units of x per thread (8192 units/row); fp64 up to 4 (4096
// units, H <= 8192): at K = 8 the fp64 normalize step needs more than the 64 registers
// a 1024-thread block allows and would spill.
template <typename T>
constexpr int kFwdMaxK = sizeof(T) == 8 ? 4 : 8;
// Preferred block sizes: K is raised until the block is at most this many threads, so
// each thread keeps 32-64 bytes of loads in flight and several rows share an SM (on
// H200, bf16 8192x5120 forward: 97 us with K = 1 / 640 threads, 46 us with K = 2 / 320).
constexpr int kFwdTargetThreads = 384;
constexpr int kBwdTargetThreads = 256;
constexpr int kBwdMaxK = 4;  // backward caches x and dy: up to 4 units each (4096 units/row)

// dw stage 1 (per chunk of rows, 64 columns per block) and stage 2 tiles.
constexpr int kDwTx = 32;
constexpr int kDwTy = 8;
constexpr int kDwCols = 2 * kDwTx;  // each thread owns columns tx and tx + 32
constexpr int kDwRowUnroll = 4;     // rows in flight per thread per loop trip
constexpr int kFinTx = 32;          // dw stage 2: 32 columns x 32 chunk lanes
constexpr int kFinTy = 32;
// Fused backward (dx + dw partials): blocks of at most this many threads ...
constexpr int kFusedMaxThreads = 256;
// ... and about this many columns over all chunks of a launch: chunks ~ 1.97M / hidden
// (480 chunks of 4096 columns, 384 of 5120), i.e. ~8 MB of FP32 partials at most, and
// no more blocks than fit in one wave on a 132-SM H200 (bf16, aligned: 4 blocks per SM
// at H = 4096, 3 at 5120, 2 at 8192). A constant: never queried from the device.
constexpr int64_t kFusedChunkCols = int64_t(480) * 4096;
// Row slots of the shared-memory pipeline of the fused kernel for 16-byte aligned rows
// (kFusedStages - 1 rows in flight per block while it works on one).
constexpr int kFusedStages = 3;
static_assert(kFusedStages >= 2, "at least one row in flight");
constexpr int64_t kWorkspaceAlign = 256;

// =====================================================================================
// forward
// =====================================================================================

/// One block per row; each thread keeps its K units of x in registers between the
/// sum of squares and the normalize step, so x is read from memory exactly once.
template <typename T, int K>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_forward_cached_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                  T* __restrict__ y, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];

  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_aligned = grid_is_aligned(w, shift);
  const bool y_aligned = grid_is_aligned(static_cast<const T*>(yr), shift);

  // Phase 1: load the row once (all K loads in flight), sum of squares.
  Unit<T> xc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    const int lo = u * V - shift;
    xc[k] = u < nunits ? load_unit(xr, lo, hidden, unit_is_full<T>(lo, hidden)) : zero_unit<T>();
  }
  A ss[1] = {A(0)};
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A v = unit_acc(xc[k], j);
      ss[0] += v * v;
    }
  }
  block_sum<1>(ss, red);
  const A r = div_rn(A(1), sqrt_rn(div_rn(ss[0], A(hidden)) + eps));

  // Phase 2: normalize the cached values, scale by w, store.
#pragma unroll
  for (int k = 0; k < K; ++k) keep_packed(xc[k]);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    if (u < nunits) {
      const int lo = u * V - shift;
      const bool full = unit_is_full<T>(lo, hidden);
      const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
      A out[V];
#pragma unroll
      for (int j = 0; j < V; ++j) out[j] = (unit_acc(xc[k], j) * r) * unit_acc(wu, j);
      store_unit(yr, lo, hidden, full && y_aligned, pack_from_acc<T>(out));
    }
  }
}

/// Fallback for rows too long for the register cache: the same math, reading x twice
/// (the second pass mostly hits L2).
template <typename T>
__global__ void __launch_bounds__(kStreamThreads)
    rmsnorm_forward_streaming_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                     T* __restrict__ y, int hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[1][32];

  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_aligned = grid_is_aligned(w, shift);
  const bool y_aligned = grid_is_aligned(static_cast<const T*>(yr), shift);

  A ss[1] = {A(0)};
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const Unit<T> xu = load_unit(xr, lo, hidden, unit_is_full<T>(lo, hidden));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A v = unit_acc(xu, j);
      ss[0] += v * v;
    }
  }
  block_sum<1>(ss, red);
  const A r = div_rn(A(1), sqrt_rn(div_rn(ss[0], A(hidden)) + eps));

  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(xr, lo, hidden, full);
    const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
    A out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = (unit_acc(xu, j) * r) * unit_acc(wu, j);
    store_unit(yr, lo, hidden, full && y_aligned, pack_from_acc<T>(out));
  }
}

// =====================================================================================
// backward: dx (and rstd per row)
// =====================================================================================

/// Loads the K units thread threadIdx.x owns of x and dy row `row` (units t, t + B, ...
/// on the row's virtual grid; units past the row's end are zeros).
template <typename T, int K>
__device__ __forceinline__ void load_bwd_row(const T* __restrict__ x, const T* __restrict__ dy,
                                             int64_t row, int hidden, Unit<T> (&xc)[K],
                                             Unit<T> (&dc)[K]) {
  constexpr int V = kVec<T>;
  const T* xr = x + row * hidden;
  const T* dyr = dy + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool dy_aligned = grid_is_aligned(dyr, shift);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    xc[k] = u < nunits ? load_unit(xr, lo, hidden, full) : zero_unit<T>();
    dc[k] = u < nunits ? load_unit(dyr, lo, hidden, full && dy_aligned) : zero_unit<T>();
  }
}

/// Stores n consecutive acc values to p (p 16-byte aligned; n * sizeof(A) a multiple
/// of 16) as 16-byte vector stores.
template <typename A, int N>
__device__ __forceinline__ void store_acc_vec(A* p, const A (&v)[N]) {
  static_assert((N * sizeof(A)) % 16 == 0, "whole 16-byte vectors only");
  if constexpr (sizeof(A) == 4) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q)
      reinterpret_cast<float4*>(p)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  } else {
#pragma unroll
    for (int q = 0; q < N / 2; ++q) reinterpret_cast<double2*>(p)[q] = make_double2(v[2 * q], v[2 * q + 1]);
  }
}

/// Launch bounds of the backward row kernel. Unfused: blocks of up to 1024 threads (at
/// most 64 registers). Fused: blocks of at most kFusedMaxThreads threads, register caps
/// that keep 3 (K <= 2: <= 80 registers) or 2 (K = 4: <= 128) blocks of 256 threads
/// per SM (3 of the 160-thread blocks of bf16 H = 5120).
template <int K, bool kFused>
constexpr int kBwdBoundThreads = kFused ? kFusedMaxThreads : kMaxThreads;
template <int K, bool kFused>
constexpr int kBwdBoundBlocks = kFused ? (K >= 4 ? 2 : 3) : 1;

/// Backward for the rows of one chunk: grid = chunks, block = cfg.threads; block c
/// handles rows [c * rows_per_chunk, min((c + 1) * rows_per_chunk, rows)) in order.
/// Per row (identical code in both modes, so dx of a row does not depend on the mode,
/// the chunk or the number of rows): x and dy cached in registers (K units each), both
/// row sums through one block reduction, dx from the cached values.
///
/// kFused = false: rows_per_chunk must be 1 (one block per row); r goes to rstd[row]
/// for the separate dw stage 1.
/// kFused = true (requires hidden % VEC == 0, so every row has x's 16-byte phase and a
/// thread owns the same columns in every row): the next row's x and dy are loaded while
/// the current row is reduced and written; each thread accumulates
/// dwacc[k][j] += acc(dy) * xhat (xhat bitwise the value used for dx) over the chunk's
/// rows in row order, then writes them to partial[chunk][col] (acc). rstd is unused.
template <typename T, int K, bool kFused>
__global__ void __launch_bounds__(kBwdBoundThreads<K, kFused>, kBwdBoundBlocks<K, kFused>)
    rmsnorm_backward_rows_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                 const T* __restrict__ dy, T* __restrict__ dx,
                                 acc_t<T>* __restrict__ rstd, acc_t<T>* __restrict__ partial,
                                 int64_t rows, int hidden, int64_t rows_per_chunk, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[2][32];

  const int64_t chunk = blockIdx.x;
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;

  A dwacc[kFused ? K : 1][V];
#pragma unroll
  for (int k = 0; k < (kFused ? K : 1); ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dwacc[k][j] = A(0);
  }

  Unit<T> xc[K];
  Unit<T> dc[K];
  load_bwd_row<T, K>(x, dy, r_begin, hidden, xc, dc);

  for (int64_t row = r_begin; row < r_end; ++row) {
    const T* xr = x + row * hidden;
    T* dxr = dx + row * hidden;
    const int shift = grid_shift(xr);
    const int nunits = (hidden + shift + V - 1) / V;
    const bool w_aligned = grid_is_aligned(w, shift);
    const bool dx_aligned = grid_is_aligned(static_cast<const T*>(dxr), shift);

    // Fused: issue the next row's loads now; they are in flight during this row's work.
    Unit<T> xn[kFused ? K : 1];
    Unit<T> dn[kFused ? K : 1];
    if constexpr (kFused) {
      if (row + 1 < r_end) {
        load_bwd_row<T, K>(x, dy, row + 1, hidden, xn, dn);
      } else {
#pragma unroll
        for (int k = 0; k < K; ++k) xn[k] = dn[k] = zero_unit<T>();
      }
    }

    // Phase 1: sums of x^2 and g*x (g = dy*w).
    A sums[2] = {A(0), A(0)};  // {sum x^2, sum g*x}
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
      if (u < nunits) {
        const int lo = u * V - shift;
        const Unit<T> wu = load_unit(w, lo, hidden, unit_is_full<T>(lo, hidden) && w_aligned);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A xv = unit_acc(xc[k], j);
          const A g = mul_rn(unit_acc(dc[k], j), unit_acc(wu, j));
          sums[0] += xv * xv;
          sums[1] += g * xv;
        }
      }
    }
    block_sum<2>(sums, red);
    const A r = div_rn(A(1), sqrt_rn(div_rn(sums[0], A(hidden)) + eps));
    const A mgx = div_rn(sums[1], A(hidden));
    const A c = r * mgx;
    if constexpr (!kFused) {
      if (threadIdx.x == 0) rstd[row] = r;
    }

    // Phase 2: dx from the cached x and dy (w re-read: L1/L2 hit); fused: dw partials.
#pragma unroll
    for (int k = 0; k < K; ++k) {
      keep_packed(xc[k]);
      keep_packed(dc[k]);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
      if (u < nunits) {
        const int lo = u * V - shift;
        const bool full = unit_is_full<T>(lo, hidden);
        const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
        A out[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A xv = unit_acc(xc[k], j);
          const A dyv = unit_acc(dc[k], j);
          const A g = mul_rn(dyv, unit_acc(wu, j));
          const A xhat = xv * r;
          out[j] = mul_rn(r, sub_rn(g, mul_rn(xhat, c)));
          if constexpr (kFused) dwacc[k][j] += dyv * xhat;
        }
        store_unit(dxr, lo, hidden, full && dx_aligned, pack_from_acc<T>(out));
      }
    }

    if constexpr (kFused) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        xc[k] = xn[k];
        dc[k] = dn[k];
      }
    }
  }

  if constexpr (kFused) {
    // Every row of the launch has x's 16-byte phase, so the units (and the columns a
    // thread accumulated) are those of the chunk's first row.
    const int shift = grid_shift(x + r_begin * hidden);
    const int nunits = (hidden + shift + V - 1) / V;
    A* prow = partial + chunk * hidden;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
      if (u < nunits) {
        const int lo = u * V - shift;
        if (unit_is_full<T>(lo, hidden) && (reinterpret_cast<std::uintptr_t>(prow + lo) & 15u) == 0) {
          store_acc_vec(prow + lo, dwacc[k]);
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const int i = lo + j;
            if (i >= 0 && i < hidden) prow[i] = dwacc[k][j];
          }
        }
      }
    }
  }
}

// cp.async (sm_80+): 16-byte global -> shared copies that complete asynchronously, in
// commit groups; wait_group<N> returns once all but the newest N groups of this thread
// are complete and visible to it. Older architectures copy synchronously.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

template <typename T>
__device__ __forceinline__ Unit<T> unit_from_u4(const uint4& q) {
  Unit<T> u;
  u.w[0] = q.x;
  u.w[1] = q.y;
  u.w[2] = q.z;
  u.w[3] = q.w;
  return u;
}

/// Dynamic shared memory of the pipelined fused kernel: kFusedStages row slots, each
/// holding the row's x then dy units (nunits 16-byte units each).
template <typename T>
size_t fused_async_smem_bytes(int64_t hidden) {
  return static_cast<size_t>(kFusedStages) * 2 * static_cast<size_t>(hidden / kVec<T>) * 16;
}

template <int K>
constexpr int kAsyncBoundBlocks = K >= 4 ? 2 : 4;

/// Fused backward, pipelined through shared memory: the variant of
/// rmsnorm_backward_rows_kernel<T, K, true> for rows whose every unit is full and
/// 16-byte aligned in x and in dy (hidden % VEC == 0, x and dy 16-byte aligned: shift 0,
/// nunits = hidden / VEC). grid = chunks, block = cfg.threads, dynamic shared memory
/// fused_async_smem_bytes<T>(hidden).
///
/// Each thread copies its own units of x and dy (units t, t + B, ...) with cp.async into
/// a ring of kFusedStages row slots, up to kFusedStages - 1 rows ahead of the row it
/// works on, so rows are in flight without holding them in registers; it reads back only
/// the slots it copied itself (no barrier needed for the data). Group g of a thread's
/// commit groups always holds row r_begin + g. The slot of row i - 1 is refilled (with
/// row i + kFusedStages - 1) only after row i's block reduction, whose barrier orders
/// all of this thread's reads of that slot before the refill. The row math is that of
/// rmsnorm_backward_rows_kernel, expression for expression (x and dy read from shared
/// memory instead of registers).
template <typename T, int K>
__global__ void __launch_bounds__(kFusedMaxThreads, kAsyncBoundBlocks<K>)
    rmsnorm_backward_fused_async_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                        const T* __restrict__ dy, T* __restrict__ dx,
                                        acc_t<T>* __restrict__ partial, int64_t rows, int hidden,
                                        int64_t rows_per_chunk, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int S = kFusedStages;
  __shared__ A red[2][32];
  extern __shared__ uint4 ring[];  // [S][2][nunits]

  const int nunits = hidden / V;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthr = static_cast<int>(blockDim.x);
  const int64_t chunk = blockIdx.x;
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;
  const bool w_aligned = grid_is_aligned(w, 0);

  auto issue = [&](int64_t row, int slot) {
    const uint4* xs = reinterpret_cast<const uint4*>(x + row * hidden);
    const uint4* ds = reinterpret_cast<const uint4*>(dy + row * hidden);
    uint4* sx = ring + static_cast<size_t>(slot) * 2 * nunits;
    uint4* sd = sx + nunits;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        cp_async16(sx + u, xs + u);
        cp_async16(sd + u, ds + u);
      }
    }
  };

  A dwacc[K][V];
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) dwacc[k][j] = A(0);
  }

  // Prologue: rows r_begin .. r_begin + S - 2 in flight (one commit group each, empty
  // past the chunk's end, so that group i always holds row r_begin + i).
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (r_begin + s < r_end) issue(r_begin + s, s);
    cp_async_commit();
  }

  int slot = 0;
  for (int64_t row = r_begin; row < r_end; ++row) {
    // This row's group is complete once all but the newest S - 2 groups are.
    cp_async_wait<S - 2>();

    const uint4* sx = ring + static_cast<size_t>(slot) * 2 * nunits;
    const uint4* sd = sx + nunits;
    T* dxr = dx + row * hidden;
    const bool dx_aligned = grid_is_aligned(static_cast<const T*>(dxr), 0);

    // Phase 1: sums of x^2 and g*x (g = dy*w).
    A sums[2] = {A(0), A(0)};  // {sum x^2, sum g*x}
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        const int lo = u * V;
        const Unit<T> xu = unit_from_u4<T>(sx[u]);
        const Unit<T> du = unit_from_u4<T>(sd[u]);
        const Unit<T> wu = load_unit(w, lo, hidden, w_aligned);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A xv = unit_acc(xu, j);
          const A g = mul_rn(unit_acc(du, j), unit_acc(wu, j));
          sums[0] += xv * xv;
          sums[1] += g * xv;
        }
      }
    }
    block_sum<2>(sums, red);
    const A r = div_rn(A(1), sqrt_rn(div_rn(sums[0], A(hidden)) + eps));
    const A mgx = div_rn(sums[1], A(hidden));
    const A c = r * mgx;

    // After the barrier: refill the previous row's slot with row + S - 1 (one commit
    // group per iteration, empty past the chunk's end).
    if (row + S - 1 < r_end) issue(row + S - 1, slot == 0 ? S - 1 : slot - 1);
    cp_async_commit();

    // Phase 2: dx and the dw partials, x and dy read again from this thread's slots.
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int u = tid + k * nthr;
      if (u < nunits) {
        const int lo = u * V;
        const Unit<T> xu = unit_from_u4<T>(sx[u]);
        const Unit<T> du = unit_from_u4<T>(sd[u]);
        const Unit<T> wu = load_unit(w, lo, hidden, w_aligned);
        A out[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A xv = unit_acc(xu, j);
          const A dyv = unit_acc(du, j);
          const A g = mul_rn(dyv, unit_acc(wu, j));
          const A xhat = xv * r;
          out[j] = mul_rn(r, sub_rn(g, mul_rn(xhat, c)));
          dwacc[k][j] += dyv * xhat;
        }
        store_unit(dxr, lo, hidden, dx_aligned, pack_from_acc<T>(out));
      }
    }
    slot = slot == S - 1 ? 0 : slot + 1;
  }
  cp_async_wait<0>();  // nothing is left in flight (the trailing groups are empty)

  // partial rows are 16-byte aligned: the base is, and hidden * sizeof(A) is a multiple
  // of VEC * sizeof(A) >= 16.
  A* prow = partial + chunk * hidden;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int u = tid + k * nthr;
    if (u < nunits) store_acc_vec(prow + u * V, dwacc[k]);
  }
}

/// Fallback for rows too long for the register cache: reads x, dy and w twice.
template <typename T>
__global__ void __launch_bounds__(kStreamThreads)
    rmsnorm_backward_dx_streaming_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                         const T* __restrict__ dy, T* __restrict__ dx,
                                         acc_t<T>* __restrict__ rstd, int hidden,
                                         acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  __shared__ A red[2][32];

  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  const T* dyr = dy + row * hidden;
  T* dxr = dx + row * hidden;
  const int shift = grid_shift(xr);
  const int nunits = (hidden + shift + V - 1) / V;
  const bool w_aligned = grid_is_aligned(w, shift);
  const bool dy_aligned = grid_is_aligned(dyr, shift);
  const bool dx_aligned = grid_is_aligned(static_cast<const T*>(dxr), shift);

  A sums[2] = {A(0), A(0)};  // {sum x^2, sum g*x}
  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(xr, lo, hidden, full);
    const Unit<T> du = load_unit(dyr, lo, hidden, full && dy_aligned);
    const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A xv = unit_acc(xu, j);
      const A g = mul_rn(unit_acc(du, j), unit_acc(wu, j));
      sums[0] += xv * xv;
      sums[1] += g * xv;
    }
  }
  block_sum<2>(sums, red);
  const A r = div_rn(A(1), sqrt_rn(div_rn(sums[0], A(hidden)) + eps));
  const A mgx = div_rn(sums[1], A(hidden));
  const A c = r * mgx;
  if (threadIdx.x == 0) rstd[row] = r;

  for (int u = threadIdx.x; u < nunits; u += blockDim.x) {
    const int lo = u * V - shift;
    const bool full = unit_is_full<T>(lo, hidden);
    const Unit<T> xu = load_unit(xr, lo, hidden, full);
    const Unit<T> du = load_unit(dyr, lo, hidden, full && dy_aligned);
    const Unit<T> wu = load_unit(w, lo, hidden, full && w_aligned);
    A out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A xv = unit_acc(xu, j);
      const A g = mul_rn(unit_acc(du, j), unit_acc(wu, j));
      const A xhat = xv * r;
      out[j] = mul_rn(r, sub_rn(g, mul_rn(xhat, c)));
    }
    store_unit(dxr, lo, hidden, full && dx_aligned, pack_from_acc<T>(out));
  }
}

// =====================================================================================
// backward: dw, deterministic two-stage column reduction
// =====================================================================================

/// Stage 1. grid = (chunks, ceil(H / 64)), block = (32, 8). Block (c, b) writes
/// partial[c][j] = sum over rows r of chunk c of acc(dy[r,j]) * (acc(x[r,j]) * rstd[r])
/// for j in [64b, 64b + 64). Order: thread row ty sums rows ty, ty+8, ... ascending,
/// then the 8 thread rows are added in order 0..7.
template <typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy)
    rmsnorm_backward_dw_partial_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                       const acc_t<T>* __restrict__ rstd,
                                       acc_t<T>* __restrict__ partial, int64_t rows, int hidden,
                                       int64_t rows_per_chunk) {
  using A = acc_t<T>;
  __shared__ A tile[kDwTy][kDwCols];

  const int64_t chunk = blockIdx.x;
  const int col0 = static_cast<int>(blockIdx.y) * kDwCols;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int j0 = col0 + tx;
  const int j1 = j0 + kDwTx;
  const bool ok0 = j0 < hidden;
  const bool ok1 = j1 < hidden;
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;

  A a0 = A(0);
  A a1 = A(0);
  for (int64_t r = r_begin + ty; r < r_end; r += kDwTy * kDwRowUnroll) {
    // Issue all loads of kDwRowUnroll rows first, then accumulate in row order.
    A rv[kDwRowUnroll];
    T x0[kDwRowUnroll], d0[kDwRowUnroll], x1[kDwRowUnroll], d1[kDwRowUnroll];
    bool in[kDwRowUnroll];
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      const int64_t rq = r + q * kDwTy;
      in[q] = rq < r_end;
      rv[q] = A(0);
      x0[q] = d0[q] = x1[q] = d1[q] = from_acc<T>(A(0));
      if (in[q]) {
        const int64_t base = rq * hidden;
        rv[q] = rstd[rq];
        if (ok0) {
          x0[q] = x[base + j0];
          d0[q] = dy[base + j0];
        }
        if (ok1) {
          x1[q] = x[base + j1];
          d1[q] = dy[base + j1];
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      if (in[q]) {
        a0 += to_acc(d0[q]) * (to_acc(x0[q]) * rv[q]);
        a1 += to_acc(d1[q]) * (to_acc(x1[q]) * rv[q]);
      }
    }
  }
  tile[ty][tx] = a0;
  tile[ty][tx + kDwTx] = a1;
  __syncthreads();

  const int t = ty * kDwTx + tx;
  if (t < kDwCols && col0 + t < hidden) {
    A s = tile[0][t];
#pragma unroll
    for (int i = 1; i < kDwTy; ++i) s += tile[i][t];
    partial[chunk * hidden + col0 + t] = s;
  }
}

/// Stage 1, vector variant, used when H % VEC == 0 and x and dy are 16-byte aligned (so
/// every row is): thread (tx, ty) owns the VEC columns of unit 32 * blockIdx.y + tx and
/// moves 16 bytes of x and dy per row. grid = (chunks, ceil(H / (32 * VEC))). Same
/// summation order per column as the scalar kernel, hence the same bits.
template <typename T>
__global__ void __launch_bounds__(kDwTx* kDwTy)
    rmsnorm_backward_dw_partial_vec_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                           const acc_t<T>* __restrict__ rstd,
                                           acc_t<T>* __restrict__ partial, int64_t rows,
                                           int hidden, int64_t rows_per_chunk) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr int kCols = kDwTx * V;
  __shared__ A tile[kDwTy][kCols];

  const int64_t chunk = blockIdx.x;
  const int col0 = static_cast<int>(blockIdx.y) * kCols;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int jc = col0 + tx * V;  // first column of this thread's unit
  const bool ok = jc < hidden;   // H % VEC == 0: the unit is entirely in or out
  const int64_t r_begin = chunk * rows_per_chunk;
  const int64_t r_end = r_begin + rows_per_chunk < rows ? r_begin + rows_per_chunk : rows;

  A acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = A(0);
  for (int64_t r = r_begin + ty; r < r_end; r += kDwTy * kDwRowUnroll) {
    // Issue all loads of kDwRowUnroll rows first, then accumulate in row order.
    Unit<T> xu[kDwRowUnroll], du[kDwRowUnroll];
    A rv[kDwRowUnroll];
    bool in[kDwRowUnroll];
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      const int64_t rq = r + q * kDwTy;
      in[q] = rq < r_end;
      rv[q] = A(0);
      xu[q] = du[q] = zero_unit<T>();
      if (in[q] && ok) {
        const int64_t base = rq * hidden;
        rv[q] = rstd[rq];
        xu[q] = load_unit(x + base, jc, hidden, true);
        du[q] = load_unit(dy + base, jc, hidden, true);
      }
    }
#pragma unroll
    for (int q = 0; q < kDwRowUnroll; ++q) {
      if (in[q]) {
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += unit_acc(du[q], j) * (unit_acc(xu[q], j) * rv[q]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) tile[ty][tx * V + j] = acc[j];
  __syncthreads();

  for (int c = ty * kDwTx + tx; c < kCols; c += kDwTx * kDwTy) {
    if (col0 + c < hidden) {
      A s = tile[0][c];
#pragma unroll
      for (int i = 1; i < kDwTy; ++i) s += tile[i][c];
      partial[chunk * hidden + col0 + c] = s;
    }
  }
}

/// Stage 2. grid = ceil(H / 32), block = (32, 32). dw[j] = T(sum over chunks of
/// partial[c][j]): thread row ty sums chunks ty, ty+32, ... ascending (loads issued
/// four at a time, added in that order), then thread row 0 adds the 32 row sums in
/// order 0..31. 32 chunk lanes keep enough loads in flight for the few hundred chunks
/// of the fused path.
template <typename T>
__global__ void __launch_bounds__(kFinTx* kFinTy)
    rmsnorm_backward_dw_finalize_kernel(const acc_t<T>* __restrict__ partial, T* __restrict__ dw,
                                        int64_t chunks, int hidden) {
  using A = acc_t<T>;
  __shared__ A tile[kFinTy][kFinTx];

  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int j = static_cast<int>(blockIdx.x) * kFinTx + tx;

  A s = A(0);
  if (j < hidden) {
    const A* p = partial + j;
    int64_t c = ty;
    for (; c + 3 * kFinTy < chunks; c += 4 * kFinTy) {
      const A a0 = p[c * hidden];
      const A a1 = p[(c + kFinTy) * hidden];
      const A a2 = p[(c + 2 * kFinTy) * hidden];
      const A a3 = p[(c + 3 * kFinTy) * hidden];
      s += a0;
      s += a1;
      s += a2;
      s += a3;
    }
    for (; c < chunks; c += kFinTy) s += p[c * hidden];
  }
  tile[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && j < hidden) {
    A t = tile[0][tx];
#pragma unroll
    for (int i = 1; i < kFinTy; ++i) t += tile[i][tx];
    dw[j] = from_acc<T>(t);
  }
}

/// The atomics-based stage 2 of backward_atomic_dw (nondeterministic). grid = (chunks,
/// ceil(H / 256)) (chunks on x: up to 2^31 - 1 of them; H / 256 <= 256 on y), block = 256:
/// thread (chunk, j) adds partial[chunk][j] to acc[j] (acc, zeroed first) with atomicAdd,
/// so the order of the additions over chunks is the order in which the blocks get there,
/// which varies from launch to launch.
template <typename T>
__global__ void __launch_bounds__(256)
    rmsnorm_backward_dw_atomic_kernel(const acc_t<T>* __restrict__ partial, acc_t<T>* __restrict__ acc,
                                      int hidden) {
  const int j = static_cast<int>(blockIdx.y) * 256 + static_cast<int>(threadIdx.x);
  if (j < hidden) atomicAdd(acc + j, partial[static_cast<int64_t>(blockIdx.x) * hidden + j]);
}

/// dw[j] = T(acc[j]) (round to nearest even). grid = ceil(H / 256), block = 256.
template <typename T>
__global__ void __launch_bounds__(256) rmsnorm_backward_dw_round_kernel(const acc_t<T>* __restrict__ acc,
                                                                        T* __restrict__ dw, int hidden) {
  const int j = static_cast<int>(blockIdx.x) * 256 + static_cast<int>(threadIdx.x);
  if (j < hidden) dw[j] = from_acc<T>(acc[j]);
}

// =====================================================================================
// host side: argument checks and launch configuration
// =====================================================================================

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

template <typename T>
bool aligned_to_element(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0;
}

bool shape_ok(int64_t rows, int64_t hidden) {
  return rows >= 0 && rows <= kMaxRows && hidden >= 1 && hidden <= kMaxHidden;
}

/// The units per row that the launch shape is sized for: rows start at x + r*hidden, so
/// when hidden is a multiple of VEC every row shares x's 16-byte phase; otherwise any
/// phase can occur and the block is sized for the worst one, whatever the number of
/// rows. So a row's launch shape (and hence its bits) depends only on hidden, the dtype
/// and its own 16-byte phase, never on how many rows are launched with it.
template <typename T>
int64_t max_units_per_row(const T* x, int64_t hidden) {
  constexpr int V = kVec<T>;
  const int shift0 = static_cast<int>((reinterpret_cast<std::uintptr_t>(x) & 15u) / sizeof(T));
  const int max_shift = hidden % V == 0 ? shift0 : V - 1;
  return ceil_div(hidden + max_shift, V);
}

struct CachedConfig {
  int k = 0;        ///< units cached per thread; 0: row too long, use the streaming kernel
  int threads = 0;  ///< block size, a multiple of 32
};

/// Smallest K in {1, 2, 4, ..., max_k} with ceil(units / K) <= target_threads; if none,
/// K = max_k when ceil(units / max_k) <= 1024; else {0, 0} (streaming kernel). The block
/// is ceil(units / K) rounded up to a whole warp.
CachedConfig pick_cached_config(int64_t units, int max_k, int target_threads) {
  for (int k = 1; k <= max_k; k *= 2) {
    const int64_t threads = ceil_div(units, k);
    if (threads <= target_threads) return {k, static_cast<int>(round_up(threads, 32))};
  }
  const int64_t threads = ceil_div(units, max_k);
  if (threads <= kMaxThreads) return {max_k, static_cast<int>(round_up(threads, 32))};
  return {};
}

/// Rows per dw chunk: a function of (rows, hidden) only, never of the device. 64 rows
/// (8 per thread row of a stage-1 block) for hidden >= 1024; narrower rows get taller
/// chunks (up to 1024 rows) so a block still moves a useful amount of data.
int64_t dw_rows_per_chunk(int64_t /*rows*/, int64_t hidden) {
  const int64_t cols = round_up(hidden, kDwCols);
  const int64_t widen = cols >= 1024 ? 1 : 1024 / cols;
  return 64 * widen;
}

int64_t dw_chunks(int64_t rows, int64_t hidden) {
  return ceil_div(rows, dw_rows_per_chunk(rows, hidden));
}

/// Rows per chunk of the fused backward: a function of (rows, hidden) only, never of
/// the device. About kFusedChunkCols / hidden chunks (at least 1), each of at least one
/// row.
int64_t fused_rows_per_chunk(int64_t rows, int64_t hidden) {
  const int64_t target_chunks = kFusedChunkCols / hidden > 1 ? kFusedChunkCols / hidden : 1;
  const int64_t r = ceil_div(rows, target_chunks);
  return r > 1 ? r : 1;
}

int64_t fused_chunks(int64_t rows, int64_t hidden) {
  return ceil_div(rows, fused_rows_per_chunk(rows, hidden));
}

struct WorkspaceLayout {
  int64_t rstd_offset = 0;     ///< from the aligned base
  int64_t partial_offset = 0;  ///< from the aligned base
  int64_t bytes = 0;           ///< bytes needed from the aligned base
};

WorkspaceLayout workspace_layout(int64_t rows, int64_t hidden, int64_t acc_size) {
  WorkspaceLayout l;
  l.rstd_offset = 0;
  l.partial_offset = round_up(rows * acc_size, kWorkspaceAlign);
  // Room for the partials of either dw path (fused or separate stage 1).
  const int64_t chunks = dw_chunks(rows, hidden) > fused_chunks(rows, hidden) ? dw_chunks(rows, hidden)
                                                                               : fused_chunks(rows, hidden);
  l.bytes = l.partial_offset + chunks * hidden * acc_size;
  return l;
}

/// Launches rmsnorm_backward_fused_async_kernel<T, K> with its ring of row slots in
/// dynamic shared memory. The kernel's attributes are set on every call (cheap, and
/// correct for whichever device is current): the dynamic shared memory limit for the
/// largest ring of this K (K * kFusedMaxThreads units), and a preference for the
/// largest shared memory carveout so that several blocks fit per SM.
template <typename T, int K>
cudaError_t launch_fused_async(dim3 grid, int threads, cudaStream_t stream, const T* x, const T* w,
                               const T* dy, T* dx, acc_t<T>* partial, int64_t rows, int hidden,
                               int64_t rows_per_chunk, acc_t<T> eps) {
  auto* kernel = rmsnorm_backward_fused_async_kernel<T, K>;
  const size_t max_smem = fused_async_smem_bytes<T>(int64_t(K) * kFusedMaxThreads * kVec<T>);
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(max_smem));
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             static_cast<int>(cudaSharedmemCarveoutMaxShared));
  if (err != cudaSuccess) return err;
  kernel<<<grid, threads, fused_async_smem_bytes<T>(hidden), stream>>>(x, w, dy, dx, partial, rows, hidden,
                                                                      rows_per_chunk, eps);
  return cudaGetLastError();
}

}  // namespace

// -------------------------------------------------------------------------------------
// forward
// -------------------------------------------------------------------------------------

template <typename T>
cudaError_t forward(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, double eps,
                    cudaStream_t stream) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(y))
    return cudaErrorInvalidValue;

  const dim3 grid(static_cast<unsigned>(rows));
  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);
  const CachedConfig cfg = pick_cached_config(max_units_per_row(x, hidden), kFwdMaxK<T>, kFwdTargetThreads);
  switch (cfg.k) {
    case 1:
      rmsnorm_forward_cached_kernel<T, 1><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e);
      break;
    case 2:
      rmsnorm_forward_cached_kernel<T, 2><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e);
      break;
    case 4:
      rmsnorm_forward_cached_kernel<T, 4><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e);
      break;
    case 8:
      if constexpr (kFwdMaxK<T> >= 8) {
        rmsnorm_forward_cached_kernel<T, 8><<<grid, cfg.threads, 0, stream>>>(x, w, y, h, e);
      }
      break;
    default:
      rmsnorm_forward_streaming_kernel<T><<<grid, kStreamThreads, 0, stream>>>(x, w, y, h, e);
      break;
  }
  return cudaGetLastError();
}

// -------------------------------------------------------------------------------------
// backward
// -------------------------------------------------------------------------------------

size_t backward_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  // Sized for the widest accumulation type (double), plus slack to align the base.
  const WorkspaceLayout l = workspace_layout(rows, hidden, static_cast<int64_t>(sizeof(double)));
  return static_cast<size_t>(l.bytes + kWorkspaceAlign);
}

size_t backward_atomic_dw_workspace_bytes(int64_t rows, int64_t hidden) {
  if (!shape_ok(rows, hidden) || rows == 0) return 0;
  // The deterministic path's workspace, then the [hidden] accumulator (widest type).
  const WorkspaceLayout l = workspace_layout(rows, hidden, static_cast<int64_t>(sizeof(double)));
  return static_cast<size_t>(round_up(l.bytes, kWorkspaceAlign) + hidden * int64_t(sizeof(double)) + kWorkspaceAlign);
}

namespace {

/// Stage 2 of the weight gradient: dw[j] = T(sum over chunks of partial[c][j]), in the
/// fixed order of rmsnorm_backward_dw_finalize_kernel (acc == nullptr) or by atomicAdd
/// into acc (zeroed here) and then rounded (nondeterministic).
template <typename T>
cudaError_t finish_dw(const acc_t<T>* partial, T* dw, int64_t chunks, int h, acc_t<T>* acc, cudaStream_t stream) {
  if (acc == nullptr) {
    rmsnorm_backward_dw_finalize_kernel<T><<<dim3(static_cast<unsigned>(ceil_div(h, kFinTx))), dim3(kFinTx, kFinTy), 0,
                                             stream>>>(partial, dw, chunks, h);
    return cudaGetLastError();
  }
  cudaError_t err = cudaMemsetAsync(acc, 0, static_cast<size_t>(h) * sizeof(acc_t<T>), stream);
  if (err != cudaSuccess) return err;
  const unsigned cols = static_cast<unsigned>(ceil_div(h, 256));
  rmsnorm_backward_dw_atomic_kernel<T><<<dim3(static_cast<unsigned>(chunks), cols), 256, 0, stream>>>(partial, acc, h);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  rmsnorm_backward_dw_round_kernel<T><<<cols, 256, 0, stream>>>(acc, dw, h);
  return cudaGetLastError();
}

/// backward() and backward_atomic_dw(): the same dx and dw partials; stage 2 of dw in a
/// fixed order (atomic_dw false) or by atomics.
template <typename T>
cudaError_t backward_impl(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                          int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream, bool atomic_dw) {
  using A = acc_t<T>;
  if (!shape_ok(rows, hidden)) return cudaErrorInvalidValue;
  if (dw == nullptr || !aligned_to_element(dw)) return cudaErrorInvalidValue;
  if (rows == 0) {
    // No rows: the weight gradient is an empty sum. All-zero bits are +0 in every T.
    const cudaError_t err = cudaMemsetAsync(dw, 0, static_cast<size_t>(hidden) * sizeof(T), stream);
    return err != cudaSuccess ? err : cudaGetLastError();
  }
  if (x == nullptr || w == nullptr || dy == nullptr || dx == nullptr) return cudaErrorInvalidValue;
  if (!aligned_to_element(x) || !aligned_to_element(w) || !aligned_to_element(dy) ||
      !aligned_to_element(dx))
    return cudaErrorInvalidValue;
  const size_t needed = atomic_dw ? backward_atomic_dw_workspace_bytes(rows, hidden) : backward_workspace_bytes(rows, hidden);
  if (workspace == nullptr || workspace_bytes < needed) return cudaErrorInvalidValue;

  // Workspace: [rstd: rows x A][pad to 256][partial: chunks x hidden x A], from a
  // 256-byte aligned base inside the caller's buffer.
  const WorkspaceLayout layout = workspace_layout(rows, hidden, static_cast<int64_t>(sizeof(A)));
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t base =
      (raw + static_cast<std::uintptr_t>(kWorkspaceAlign - 1)) & ~static_cast<std::uintptr_t>(kWorkspaceAlign - 1);
  A* rstd = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.rstd_offset));
  A* partial = reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(layout.partial_offset));
  A* acc = atomic_dw ? reinterpret_cast<A*>(base + static_cast<std::uintptr_t>(round_up(layout.bytes, kWorkspaceAlign)))
                     : nullptr;

  const int h = static_cast<int>(hidden);
  const A e = static_cast<A>(eps);

  const CachedConfig cfg = pick_cached_config(max_units_per_row(x, hidden), kBwdMaxK, kBwdTargetThreads);

  // Fused path: every row has x's 16-byte phase (hidden % VEC == 0) and the row fits the
  // register cache of a block of <= kFusedMaxThreads threads. dx and the per-chunk dw
  // partials in one pass over x and dy, then the fixed-order sum over chunks. When x
  // and dy are 16-byte aligned (every unit full and aligned), rows are pipelined
  // through shared memory; otherwise the next row is prefetched into registers.
  if (hidden % kVec<T> == 0 && cfg.k != 0 && cfg.threads <= kFusedMaxThreads) {
    const int64_t rows_per_chunk = fused_rows_per_chunk(rows, hidden);
    const int64_t chunks = fused_chunks(rows, hidden);
    const dim3 grid(static_cast<unsigned>(chunks));
    cudaError_t err = cudaSuccess;
    if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dy) % 16 == 0) {
      switch (cfg.k) {
        case 1:
          err = launch_fused_async<T, 1>(grid, cfg.threads, stream, x, w, dy, dx, partial, rows, h, rows_per_chunk, e);
          break;
        case 2:
          err = launch_fused_async<T, 2>(grid, cfg.threads, stream, x, w, dy, dx, partial, rows, h, rows_per_chunk, e);
          break;
        default:
          err = launch_fused_async<T, 4>(grid, cfg.threads, stream, x, w, dy, dx, partial, rows, h, rows_per_chunk, e);
          break;
      }
      if (err != cudaSuccess) return err;
      return finish_dw<T>(partial, dw, chunks, h, acc, stream);
    }
    switch (cfg.k) {
      case 1:
        rmsnorm_backward_rows_kernel<T, 1, true><<<grid, cfg.threads, 0, stream>>>(
            x, w, dy, dx, nullptr, partial, rows, h, rows_per_chunk, e);
        break;
      case 2:
        rmsnorm_backward_rows_kernel<T, 2, true><<<grid, cfg.threads, 0, stream>>>(
            x, w, dy, dx, nullptr, partial, rows, h, rows_per_chunk, e);
        break;
      default:
        rmsnorm_backward_rows_kernel<T, 4, true><<<grid, cfg.threads, 0, stream>>>(
            x, w, dy, dx, nullptr, partial, rows, h, rows_per_chunk, e);
        break;
    }
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    return finish_dw<T>(partial, dw, chunks, h, acc, stream);
  }

  // Separate path (rows of varying 16-byte phase, or rows too long for the fused block).
  // 1. dx and rstd, one block per row.
  const dim3 grid(static_cast<unsigned>(rows));
  switch (cfg.k) {
    case 1:
      rmsnorm_backward_rows_kernel<T, 1, false><<<grid, cfg.threads, 0, stream>>>(
          x, w, dy, dx, rstd, nullptr, rows, h, 1, e);
      break;
    case 2:
      rmsnorm_backward_rows_kernel<T, 2, false><<<grid, cfg.threads, 0, stream>>>(
          x, w, dy, dx, rstd, nullptr, rows, h, 1, e);
      break;
    case 4:
      rmsnorm_backward_rows_kernel<T, 4, false><<<grid, cfg.threads, 0, stream>>>(
          x, w, dy, dx, rstd, nullptr, rows, h, 1, e);
      break;
    default:
      rmsnorm_backward_dx_streaming_kernel<T><<<grid, kStreamThreads, 0, stream>>>(x, w, dy, dx, rstd, h, e);
      break;
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  // 2. dw stage 1: per-chunk partial column sums (re-reads x and dy).
  const int64_t rows_per_chunk = dw_rows_per_chunk(rows, hidden);
  const int64_t chunks = dw_chunks(rows, hidden);
  const dim3 block(kDwTx, kDwTy);
  const dim3 grid1(static_cast<unsigned>(chunks), static_cast<unsigned>(ceil_div(hidden, kDwCols)));
  const bool vector_dw = hidden % kVec<T> == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                         reinterpret_cast<std::uintptr_t>(dy) % 16 == 0;
  if (vector_dw) {
    const dim3 grid1v(static_cast<unsigned>(chunks),
                      static_cast<unsigned>(ceil_div(hidden, int64_t(kDwTx) * kVec<T>)));
    rmsnorm_backward_dw_partial_vec_kernel<T><<<grid1v, block, 0, stream>>>(x, dy, rstd, partial, rows,
                                                                           h, rows_per_chunk);
  } else {
    rmsnorm_backward_dw_partial_kernel<T><<<grid1, block, 0, stream>>>(x, dy, rstd, partial, rows, h,
                                                                        rows_per_chunk);
  }
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  // 3. dw stage 2: sum over chunks (fixed order, or atomics), round to T.
  return finish_dw<T>(partial, dw, chunks, h, acc, stream);
}

}  // namespace

template <typename T>
cudaError_t backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                     int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream) {
  return backward_impl<T>(x, w, dy, dx, dw, rows, hidden, eps, workspace, workspace_bytes, stream, false);
}

template <typename T>
cudaError_t backward_atomic_dw(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t rows,
                               int64_t hidden, double eps, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  return backward_impl<T>(x, w, dy, dx, dw, rows, hidden, eps, workspace, workspace_bytes, stream, true);
}

// -------------------------------------------------------------------------------------
// explicit instantiations: the supported element types
// -------------------------------------------------------------------------------------

template cudaError_t forward<float>(const float*, const float*, float*, int64_t, int64_t, double,
                                    cudaStream_t);
template cudaError_t forward<double>(const double*, const double*, double*, int64_t, int64_t,
                                     double, cudaStream_t);
template cudaError_t forward<__half>(const __half*, const __half*, __half*, int64_t, int64_t,
                                     double, cudaStream_t);
template cudaError_t forward<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                            __nv_bfloat16*, int64_t, int64_t, double,
                                            cudaStream_t);

template cudaError_t backward<float>(const float*, const float*, const float*, float*, float*,
                                     int64_t, int64_t, double, void*, size_t, cudaStream_t);
template cudaError_t backward<double>(const double*, const double*, const double*, double*,
                                      double*, int64_t, int64_t, double, void*, size_t,
                                      cudaStream_t);
template cudaError_t backward<__half>(const __half*, const __half*, const __half*, __half*,
                                      __half*, int64_t, int64_t, double, void*, size_t,
                                      cudaStream_t);
template cudaError_t backward<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                             const __nv_bfloat16*, __nv_bfloat16*,
                                             __nv_bfloat16*, int64_t, int64_t, double, void*,
                                             size_t, cudaStream_t);

template cudaError_t backward_atomic_dw<float>(const float*, const float*, const float*, float*, float*, int64_t,
                                               int64_t, double, void*, size_t, cudaStream_t);
template cudaError_t backward_atomic_dw<double>(const double*, const double*, const double*, double*, double*,
                                                int64_t, int64_t, double, void*, size_t, cudaStream_t);
template cudaError_t backward_atomic_dw<__half>(const __half*, const __half*, const __half*, __half*, __half*,
                                                int64_t, int64_t, double, void*, size_t, cudaStream_t);
template cudaError_t backward_atomic_dw<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                       const __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                       int64_t, int64_t, double, void*, size_t, cudaStream_t);

}  // namespace numgate::rmsnorm
