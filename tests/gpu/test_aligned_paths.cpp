// Kernels with an aligned fast path give the bits of their general kernel.
//
// Row norms (NormForwardPaths). The aligned forward kernel (hidden % VEC == 0 and every
// tensor 16-byte aligned) and the cached kernel (every other alignment) of
// common/row_norm.cuh do the same operations in the same order at the same block shape. The
// block shape depends on (policy, hidden, dtype, x's 16-byte phase) only, so a launch with
// x aligned and only y (and, for fused add, residual_out) one element off a 16-byte
// boundary takes the cached kernel at the aligned launch's block shape. Aligned rows of at
// most 32 units take the warp-rows kernel instead (several rows per warp, the 32-thread
// block's sums reproduced on the row's lanes), so at those hidden sizes the comparison is
// warp-rows against cached. For the four norms
// and bf16 / fp16 / fp32 / fp64, at hidden sizes that reach every forward block size K (units
// per thread) each policy and dtype has (checked against row_norm's block rule when the list
// was made: RMS K = 1, 2, 4, 8 (fp64 1, 2, 4), fused add and LayerNorm 1, 2, 4 (LayerNorm
// fp64 1, 2)) and at short rows that reach every lane-group size of the warp-rows kernel,
// y (and residual_out) of the two launches must be BITWISE equal; 37 rows of random values,
// one all-zero row (r = 1 / sqrt(eps)) and one row of huge values among them. Rows
// beyond the register cache are skipped (the RMS policies stream them in one kernel for
// both launches; LayerNorm refuses them).
//
// The check's mutant: the cached launch with eps = 1 instead of 1e-6 (r smaller by about 8%
// on the random rows, whose mean square is about 16 / 3) must be told apart at every shape.
// (eps = 1e-3 moved r by only ~1e-4: at the smallest shapes no bf16 output changed, which
// run 17 on the H200 showed.)
//
// Which kernel each launch took is checked too: the launcher records its choice
// (common/kernel_trace.h), and the launch with y off 16 bytes must have taken "cached", the
// aligned one "warp_rows" (at most 32 units), else "aligned". A launcher that stopped
// choosing a fast kernel fails here instead of comparing the general kernel with itself.
//
// GLU (GluPaths). SwiGLU and both GeGLU forms, forward and backward: the aligned kernels
// (n % VEC == 0, every tensor 16-byte aligned) and the general kernel (virtual 16-byte grid
// anchored at a) compute each element by the same operations (glu_kernels.cu); with a and b
// aligned and only the outputs one element off 16 bytes the general kernel runs, and every
// output must be bitwise the aligned launch's. Mutant: the general launch with b's last
// element changed must be told apart (at that element only). The launchers' records
// (common/kernel_trace.h) must say "aligned" for the aligned launch and "general" for the
// other, forward and backward.
//
// Softmax (SoftmaxBlockWidth). Rows of at most 128 16-byte units take a forward block of
// one unit per thread, the narrowest of 32, 64, 128 threads that holds the row (256 beyond),
// and rows of at most 64 units a backward block of 32 or 64 threads (128 beyond); the
// kernels' comment argues that the results are bitwise the wider block's (the threads a
// narrow block drops hold no unit: their +0 / -inf leaves of the fixed reduction trees are
// the same). For the four dtypes, row lengths that reach each width (aligned and
// unaligned rows) and mask modes 0, 1, 2, y of forward() must be BITWISE y of
// forward_with_block(256), and dx of backward() BITWISE dx of backward_with_block(128).
// Mutant: the wide launch with x (forward) or dy (backward) changed at the last row's
// first element must be told apart, first in that row (rows longer than one element).
// forward() and backward() must have recorded the narrow kernel the rule names ("cached_32"
// or "cached_64" both ways, then "cached_128" forward, "cached_128x1" backward) and the hooks
// "forced": a launcher that took the wide block everywhere would otherwise compare it with
// itself.
//
// Softmax causal backward (SoftmaxCausalBackward). In mask mode 1 the backward takes y as
// +0 without reading it in the 16-byte units wholly past a row's causal limit (softmax.cuh).
// For the four dtypes and nine geometries (square rows that wrap at q_len, q_len > k_len
// with fully masked rows, short rows (narrow blocks), windows of rows reaching each of the
// 128-thread register caches (1, 2, 4, 8 units per thread), of long rows (two-sweep
// backward) and of rows the forward streams, the windows launched with their row_offset;
// y aligned and one element off), on y of the causal forward and dy holding an Inf at a
// masked position: dx of mode 1 must be BITWISE dx of mode 0 (which reads every y; a
// skipped visible unit or an ignored row_offset would zero a y > 0 and fail this); with NaN
// planted in y from each row's first skipped unit on, mode 1 must still give those bits
// (it did not read them) while mode 0 must not (the control: the planted NaN is visible
// to a kernel that reads it); and NaN at the last element the documented rule reads (the
// end of the last unit with lo <= last_key, masked elements included) must change that
// row's dx (the rule is the documented one, not a tighter one). Only the backward's skip
// is observable; the forward's (x past the limit not loaded) can change no bit, which the
// replay's golden comparisons and SoftmaxBlockWidth see.
//
// Without a CUDA device (or with --op naming other ops) the tests are skipped.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/kernel_trace.h"
#include "fused_add_rmsnorm/fused_add_rmsnorm.cuh"
#include "glu/glu.cuh"
#include "layernorm/layernorm.cuh"
#include "offset_rmsnorm/offset_rmsnorm.cuh"
#include "host_values.h"
#include "replay.h"
#include "rmsnorm/rmsnorm.cuh"
#include "softmax/softmax.cuh"

namespace numgate {
namespace {

using numgate::testing::config;
using numgate::testing::first_difference;
using numgate::testing::from_double;
using Rng = numgate::testing::SplitMix64;
using numgate::testing::selected;
using numgate::kernel_trace::Launcher;

std::string skip_reason(const std::string& op) {
  if (!selected(op)) return op + " not selected by --op";
  return config().have_device ? "" : config().no_device_reason;
}

/// A device buffer of `n` elements of T placed `offset` elements past a 256-byte aligned
/// allocation (offset 1: not 16-byte aligned).
template <class T>
struct Placed {
  void* base = nullptr;
  T* p = nullptr;
  std::size_t n;
  Placed(std::size_t count, int offset) : n(count) {
    if (cudaMalloc(&base, (count + 16) * sizeof(T)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    p = static_cast<T*>(base) + offset;
    if (cudaMemset(base, 0xA5, (count + 16) * sizeof(T)) != cudaSuccess) {
      cudaFree(base);
      throw std::runtime_error("memset");
    }
  }
  ~Placed() { cudaFree(base); }
  Placed(const Placed&) = delete;
  Placed& operator=(const Placed&) = delete;
  void put(const std::vector<T>& h) {
    if (cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("upload");
  }
  std::vector<unsigned char> get() const {
    std::vector<unsigned char> h(n * sizeof(T));
    if (cudaMemcpy(h.data(), p, h.size(), cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("download");
    return h;
  }
};

enum class Op { rmsnorm, offset_rmsnorm, fused_add_rmsnorm, layernorm };

/// Outputs of one forward launch: y, and residual_out (fused add; empty otherwise), and
/// the kernel the launcher recorded (common/kernel_trace.h).
struct Out {
  std::vector<unsigned char> y, res_out;
  std::string kernel;
};

/// One forward of `op` with x, residual, w, b 16-byte aligned and the outputs `out_offset`
/// elements off a 16-byte boundary.
template <class T>
Out launch(Op op, const std::vector<T>& x, const std::vector<T>& res, const std::vector<T>& w,
           const std::vector<T>& b, std::int64_t rows, std::int64_t hidden, double eps, int out_offset) {
  const std::size_t n = static_cast<std::size_t>(rows * hidden), h = static_cast<std::size_t>(hidden);
  Placed<T> dx(n, 0), dr(n, 0), dw(h, 0), db(h, 0), dy(n, out_offset), dro(n, out_offset);
  dx.put(x);
  dr.put(res);
  dw.put(w);
  db.put(b);
  cudaError_t e = cudaSuccess;
  kernel_trace::record(Launcher::row_norm_forward, "");
  switch (op) {
    case Op::rmsnorm: e = rmsnorm::forward<T>(dx.p, dw.p, dy.p, rows, hidden, eps, 0); break;
    case Op::offset_rmsnorm: e = offset_rmsnorm::forward<T>(dx.p, dw.p, dy.p, rows, hidden, eps, 0); break;
    case Op::fused_add_rmsnorm:
      e = fused_add_rmsnorm::forward<T>(dx.p, dr.p, dw.p, dro.p, dy.p, rows, hidden, eps, 0);
      break;
    case Op::layernorm: e = layernorm::forward<T>(dx.p, dw.p, db.p, dy.p, rows, hidden, eps, 0); break;
  }
  if (e != cudaSuccess) throw std::runtime_error(std::string("forward launch: ") + cudaGetErrorString(e));
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("forward kernel failed");
  Out o;
  o.kernel = kernel_trace::last(Launcher::row_norm_forward);
  o.y = dy.get();
  if (op == Op::fused_add_rmsnorm) o.res_out = dro.get();
  return o;
}


/// The hidden sizes (16-byte units: 4096 bf16 = 512 units): together they reach every
/// forward block size K of every policy and dtype (file comment), plus a row of one unit,
/// rows that are not a multiple of 32 units, and rows of at most 32 units, which the
/// aligned launch gives to the warp-rows kernel with each group size L (lanes per row: 1,
/// 2, 4, 8, 16, 32 across the dtypes).
const std::int64_t kHidden[] = {8, 24, 64, 128, 200, 1000, 2048, 4096, 5120, 8192, 16384, 32768};

/// Largest row in 16-byte units that the forward caches in registers: K_max units per
/// thread (row_norm::Policy::kFwdMaxK) times 1024 threads.
template <class T>
std::int64_t max_cached_units(Op op) {
  const std::int64_t k_max = op == Op::layernorm ? (sizeof(T) == 8 ? 2 : 4)
                             : op == Op::fused_add_rmsnorm ? 4
                                                           : (sizeof(T) == 8 ? 4 : 8);
  return k_max * 1024;
}

template <class T>
void check_paths(Op op, const char* op_name, const char* dtype) {
  // 37 rows: the warp-rows kernel's blocks of 8 warps hold 8 to 256 rows, so its last warp
  // is partly past the last row (and with one unit per row, 5 of 32 lanes are rows).
  constexpr std::int64_t rows = 37;
  const double eps = 1e-6;
  int compared = 0, mutants_caught = 0;
  for (const std::int64_t hidden : kHidden) {
    if (hidden * static_cast<std::int64_t>(sizeof(T)) % 16 != 0) continue;  // the aligned kernel needs hidden % VEC == 0
    if (hidden * static_cast<std::int64_t>(sizeof(T)) / 16 > max_cached_units<T>(op)) continue;  // beyond the cache
    const std::size_t n = static_cast<std::size_t>(rows * hidden);
    Rng rng{0x5EED0000ull + static_cast<std::uint64_t>(hidden)};
    std::vector<T> x(n), r(n), w(static_cast<std::size_t>(hidden)), b(static_cast<std::size_t>(hidden));
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t row = static_cast<std::int64_t>(i) / hidden;
      x[i] = from_double<T>(row == 1 ? 0.0 : row == 2 ? 3.0e4 * rng.symmetric() : 4.0 * rng.symmetric());
      r[i] = from_double<T>(2.0 * rng.symmetric());
    }
    for (auto& v : w) v = from_double<T>(1.0 + 0.5 * rng.symmetric());
    for (auto& v : b) v = from_double<T>(0.25 * rng.symmetric());
    const Out aligned = launch<T>(op, x, r, w, b, rows, hidden, eps, 0);
    const Out cached = launch<T>(op, x, r, w, b, rows, hidden, eps, 1);
    // The two launches must have taken two different kernels: the cached one for y off 16
    // bytes; for the aligned one, warp-rows at <= 32 units, else the aligned kernel.
    const std::int64_t units = hidden * static_cast<std::int64_t>(sizeof(T)) / 16;
    const std::string where = std::string(op_name) + " " + dtype + " [" + std::to_string(rows) + " x " +
                              std::to_string(hidden) + "]";
    EXPECT_EQ(cached.kernel, "cached") << where << ": the launch with y off 16 bytes took the '" << cached.kernel
                                       << "' kernel, not the cached one";
    const char* want = units <= 32 ? "warp_rows" : "aligned";
    EXPECT_EQ(aligned.kernel, want) << where << ": the aligned launch of a row of " << units << " units took the '"
                                    << aligned.kernel << "' kernel, not the " << want << " one";
    const std::int64_t dy = first_difference(aligned.y, cached.y, sizeof(T));
    EXPECT_EQ(dy, -1) << op_name << " " << dtype << " [" << rows << " x " << hidden
                      << "]: y of the aligned kernel and of the cached kernel (y one element off 16 bytes) differ, first at "
                         "element "
                      << dy << " (row " << dy / hidden << ")";
    if (op == Op::fused_add_rmsnorm) {
      const std::int64_t dr = first_difference(aligned.res_out, cached.res_out, sizeof(T));
      EXPECT_EQ(dr, -1) << op_name << " " << dtype << " [" << rows << " x " << hidden
                        << "]: residual_out of the two kernels differs, first at element " << dr;
    }
    ++compared;
    // The mutant: the cached launch with eps = 1.
    const Out mutant = launch<T>(op, x, r, w, b, rows, hidden, 1.0, 1);
    if (first_difference(aligned.y, mutant.y, sizeof(T)) >= 0) ++mutants_caught;
  }
  EXPECT_GT(compared, 0) << op_name << " " << dtype << ": no hidden size compared";
  EXPECT_EQ(mutants_caught, compared) << op_name << " " << dtype
                                      << ": the eps mutant was not told apart at every shape (the comparison is blind)";
}

void run_all(Op op, const char* name) {
  check_paths<__nv_bfloat16>(op, name, "bf16");
  check_paths<__half>(op, name, "fp16");
  check_paths<float>(op, name, "fp32");
  check_paths<double>(op, name, "fp64");
}

TEST(NormForwardPaths, RmsnormAlignedAndCachedKernelsGiveTheSameBits) {
  const std::string why = skip_reason("rmsnorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all(Op::rmsnorm, "rmsnorm");
}
TEST(NormForwardPaths, OffsetRmsnormAlignedAndCachedKernelsGiveTheSameBits) {
  const std::string why = skip_reason("offset_rmsnorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all(Op::offset_rmsnorm, "offset_rmsnorm");
}
TEST(NormForwardPaths, FusedAddRmsnormAlignedAndCachedKernelsGiveTheSameBits) {
  const std::string why = skip_reason("fused_add_rmsnorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all(Op::fused_add_rmsnorm, "fused_add_rmsnorm");
}
TEST(NormForwardPaths, LayernormAlignedAndCachedKernelsGiveTheSameBits) {
  const std::string why = skip_reason("layernorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all(Op::layernorm, "layernorm");
}

// ---- row norms, backward: warp-rows against the ring kernel -----------------------------

/// Outputs of one backward launch: dx, dw (and db for LayerNorm), and the dx kernel the
/// launcher recorded (common/kernel_trace.h).
struct BwdOut {
  std::vector<unsigned char> dx, dw, db;
  std::string kernel;
};

/// One backward of `op` with x, residual, dy, d_residual_out 16-byte aligned and dx
/// `dx_offset` elements off a 16-byte boundary (dw, db aligned).
template <class T>
BwdOut launch_backward(Op op, const std::vector<T>& x, const std::vector<T>& res, const std::vector<T>& w,
                       const std::vector<T>& dy, const std::vector<T>& dres, std::int64_t rows, std::int64_t hidden,
                       double eps, int dx_offset) {
  const std::size_t n = static_cast<std::size_t>(rows * hidden), h = static_cast<std::size_t>(hidden);
  Placed<T> dxin(n, 0), dr(n, 0), dw_in(h, 0), ddy(n, 0), ddr(n, 0), ddx(n, dx_offset), ddw(h, 0), ddb(h, 0);
  dxin.put(x);
  dr.put(res);
  dw_in.put(w);
  ddy.put(dy);
  ddr.put(dres);
  std::size_t ws = 0;
  switch (op) {
    case Op::rmsnorm: ws = rmsnorm::backward_workspace_bytes(rows, hidden); break;
    case Op::offset_rmsnorm: ws = offset_rmsnorm::backward_workspace_bytes(rows, hidden); break;
    case Op::fused_add_rmsnorm: ws = fused_add_rmsnorm::backward_workspace_bytes(rows, hidden); break;
    case Op::layernorm: ws = layernorm::backward_workspace_bytes(rows, hidden); break;
  }
  void* work = nullptr;
  if (cudaMalloc(&work, ws) != cudaSuccess) throw std::runtime_error("cudaMalloc workspace");
  cudaError_t e = cudaSuccess;
  kernel_trace::record(Launcher::row_norm_backward, "");
  switch (op) {
    case Op::rmsnorm:
      e = rmsnorm::backward<T>(dxin.p, dw_in.p, ddy.p, ddx.p, ddw.p, rows, hidden, eps, work, ws, 0);
      break;
    case Op::offset_rmsnorm:
      e = offset_rmsnorm::backward<T>(dxin.p, dw_in.p, ddy.p, ddx.p, ddw.p, rows, hidden, eps, work, ws, 0);
      break;
    case Op::fused_add_rmsnorm:
      e = fused_add_rmsnorm::backward<T>(dxin.p, dr.p, dw_in.p, ddy.p, ddr.p, ddx.p, ddw.p, rows, hidden, eps, work,
                                         ws, 0);
      break;
    case Op::layernorm:
      e = layernorm::backward<T>(dxin.p, dw_in.p, ddy.p, ddx.p, ddw.p, ddb.p, rows, hidden, eps, work, ws, 0);
      break;
  }
  const cudaError_t sync = cudaDeviceSynchronize();
  cudaFree(work);
  if (e != cudaSuccess) throw std::runtime_error(std::string("backward launch: ") + cudaGetErrorString(e));
  if (sync != cudaSuccess) throw std::runtime_error("backward kernel failed");
  BwdOut o;
  o.kernel = kernel_trace::last(Launcher::row_norm_backward);
  o.dx = ddx.get();
  o.dw = ddw.get();
  if (op == Op::layernorm) o.db = ddb.get();
  return o;
}

/// NormBackwardPaths: rows of at most row_norm::kBwdWarpRowsMaxUnits (8) 16-byte units
/// with dx 16-byte aligned take the warp-rows backward (a chunk's rows spread over the lane
/// groups of a warp); with only dx one element off, the ring kernel runs at the same block
/// shape and chunking. dx, dw (and db) must be BITWISE equal: at 1, 2, 3, 5 and 8 units
/// per row (lane groups of 1, 2, 4 and 8 lanes: every width the kernel has at <= 8 units),
/// for 37 rows (one row per chunk), 70000 rows (3 per chunk at 8 units of bf16 LayerNorm,
/// its 70000 x 64 benchmark shape) and, at 8 units, 150000 rows (bf16 / fp16: 5 rows per
/// chunk for the RMS policies, 7 for LayerNorm, so a warp's 4 lane groups go round twice;
/// fp32 3 for the RMS policies, 4 for LayerNorm; fp64 2). Mutant: the ring launch with
/// eps = 1 must be told apart in dx at every shape. Each launch must have recorded the kernel
/// it is meant to take (common/kernel_trace.h): "warp_rows" for dx aligned, "ring" for dx
/// off 16 bytes, so a launcher that stopped choosing the warp-rows kernel fails here.
template <class T>
void check_backward_paths(Op op, const char* op_name, const char* dtype) {
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  const double eps = 1e-6;
  int compared = 0, mutants_caught = 0;
  for (const std::int64_t units : {1, 2, 3, 5, 8}) {
    const std::int64_t hidden = units * vec;
    for (const std::int64_t rows : {std::int64_t(37), std::int64_t(70000), std::int64_t(150000)}) {
      if (rows == 150000 && units != 8) continue;
      const std::size_t n = static_cast<std::size_t>(rows * hidden);
      Rng rng{0xB3D0000ull + static_cast<std::uint64_t>(hidden * 7 + rows)};
      std::vector<T> x(n), r(n), w(static_cast<std::size_t>(hidden)), dy(n), dres(n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t row = static_cast<std::int64_t>(i) / hidden;
        x[i] = from_double<T>(row == 1 ? 0.0 : row == 2 ? 3.0e4 * rng.symmetric() : 4.0 * rng.symmetric());
        r[i] = from_double<T>(2.0 * rng.symmetric());
        dy[i] = from_double<T>(rng.symmetric());
        dres[i] = from_double<T>(0.5 * rng.symmetric());
      }
      for (auto& v : w) v = from_double<T>(1.0 + 0.5 * rng.symmetric());
      const std::string where = std::string(op_name) + " " + dtype + " [" + std::to_string(rows) + " x " +
                                std::to_string(hidden) + "]";
      const BwdOut warp = launch_backward<T>(op, x, r, w, dy, dres, rows, hidden, eps, 0);
      const BwdOut ring = launch_backward<T>(op, x, r, w, dy, dres, rows, hidden, eps, 1);
      EXPECT_EQ(warp.kernel, "warp_rows") << where << ": the launch with dx aligned took the '" << warp.kernel
                                          << "' kernel";
      EXPECT_EQ(ring.kernel, "ring") << where << ": the launch with dx off 16 bytes took the '" << ring.kernel
                                     << "' kernel";
      const std::int64_t ddx = first_difference(warp.dx, ring.dx, sizeof(T));
      EXPECT_EQ(ddx, -1) << where << ": dx of the warp-rows and the ring kernel (dx one element off 16 bytes) differ, "
                         << "first at element " << ddx << " (row " << (ddx < 0 ? -1 : ddx / hidden) << ")";
      const std::int64_t ddw = first_difference(warp.dw, ring.dw, sizeof(T));
      EXPECT_EQ(ddw, -1) << where << ": dw of the two kernels differs, first at column " << ddw;
      if (op == Op::layernorm) {
        const std::int64_t ddb = first_difference(warp.db, ring.db, sizeof(T));
        EXPECT_EQ(ddb, -1) << where << ": db of the two kernels differs, first at column " << ddb;
      }
      ++compared;
      const BwdOut mutant = launch_backward<T>(op, x, r, w, dy, dres, rows, hidden, 1.0, 1);
      if (first_difference(warp.dx, mutant.dx, sizeof(T)) >= 0) ++mutants_caught;
    }
  }
  EXPECT_GT(compared, 0) << op_name << " " << dtype << ": no shape compared";
  EXPECT_EQ(mutants_caught, compared) << op_name << " " << dtype
                                      << ": the eps mutant was not told apart at every shape (the comparison is blind)";
}

void run_all_backward(Op op, const char* name) {
  check_backward_paths<__nv_bfloat16>(op, name, "bf16");
  check_backward_paths<__half>(op, name, "fp16");
  check_backward_paths<float>(op, name, "fp32");
  check_backward_paths<double>(op, name, "fp64");
}

TEST(NormBackwardPaths, RmsnormWarpRowsAndRingKernelsGiveTheSameBits) {
  const std::string why = skip_reason("rmsnorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all_backward(Op::rmsnorm, "rmsnorm");
}
TEST(NormBackwardPaths, OffsetRmsnormWarpRowsAndRingKernelsGiveTheSameBits) {
  const std::string why = skip_reason("offset_rmsnorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all_backward(Op::offset_rmsnorm, "offset_rmsnorm");
}
TEST(NormBackwardPaths, FusedAddRmsnormWarpRowsAndRingKernelsGiveTheSameBits) {
  const std::string why = skip_reason("fused_add_rmsnorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all_backward(Op::fused_add_rmsnorm, "fused_add_rmsnorm");
}
TEST(NormBackwardPaths, LayernormWarpRowsAndRingKernelsGiveTheSameBits) {
  const std::string why = skip_reason("layernorm");
  if (!why.empty()) GTEST_SKIP() << why;
  run_all_backward(Op::layernorm, "layernorm");
}

// ---- GLU ------------------------------------------------------------------------------

enum class Glu { swiglu, geglu_erf, geglu_tanh };

/// Forward y and backward da, db of one GLU launch pair with a, b, dy aligned and the
/// outputs `out_offset` elements off a 16-byte boundary; `kernels` gets the kernels the
/// forward and the backward launcher recorded (common/kernel_trace.h), as "forward/backward".
template <class T>
std::vector<std::vector<unsigned char>> glu_launch(Glu g, const std::vector<T>& a, const std::vector<T>& b,
                                                  const std::vector<T>& gy, int out_offset, std::string& kernels) {
  const std::size_t n = a.size();
  Placed<T> da_in(n, 0), db_in(n, 0), dg(n, 0), y(n, out_offset), da(n, out_offset), db(n, out_offset);
  da_in.put(a);
  db_in.put(b);
  dg.put(gy);
  const std::int64_t nn = static_cast<std::int64_t>(n);
  kernel_trace::record(Launcher::glu_forward, "");
  kernel_trace::record(Launcher::glu_backward, "");
  cudaError_t e1, e2;
  if (g == Glu::swiglu) {
    e1 = glu::swiglu_forward<T>(da_in.p, db_in.p, y.p, nn, 0);
    e2 = glu::swiglu_backward<T>(da_in.p, db_in.p, dg.p, da.p, db.p, nn, 0);
  } else {
    const bool tanh_form = g == Glu::geglu_tanh;
    e1 = glu::geglu_forward<T>(da_in.p, db_in.p, y.p, nn, tanh_form, 0);
    e2 = glu::geglu_backward<T>(da_in.p, db_in.p, dg.p, da.p, db.p, nn, tanh_form, 0);
  }
  if (e1 != cudaSuccess || e2 != cudaSuccess) throw std::runtime_error("GLU launch failed");
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("GLU kernel failed");
  kernels = std::string(kernel_trace::last(Launcher::glu_forward)) + "/" + kernel_trace::last(Launcher::glu_backward);
  return {y.get(), da.get(), db.get()};
}

template <class T>
void check_glu(Glu g, const char* name, const char* dtype) {
  const char* outs[] = {"y", "da", "db"};
  for (const std::size_t n : {std::size_t(64), std::size_t(4096) * 3, std::size_t(1) << 20}) {
    Rng rng{0x61550000ull + n};
    std::vector<T> a(n), b(n), gy(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = from_double<T>(8.0 * rng.symmetric());
      b[i] = from_double<T>(2.0 * rng.symmetric());
      gy[i] = from_double<T>(rng.symmetric());
    }
    std::string k_al, k_gen, k_mut;
    const auto al = glu_launch<T>(g, a, b, gy, 0, k_al);
    const auto gen = glu_launch<T>(g, a, b, gy, 1, k_gen);
    // The comparison means the aligned kernels against the general ones.
    EXPECT_EQ(k_al, "aligned/aligned") << name << " " << dtype << " n = " << n << ": the aligned launch's kernels";
    EXPECT_EQ(k_gen, "general/general") << name << " " << dtype << " n = " << n
                                        << ": the launch with the outputs one element off 16 bytes";
    for (int t = 0; t < 3; ++t) {
      const std::int64_t d = first_difference(al[t], gen[t], sizeof(T));
      EXPECT_EQ(d, -1) << name << " " << dtype << " n = " << n << ": " << outs[t]
                       << " of the aligned and the general kernel differ, first at element " << d;
    }
    // The mutant: b's last element changed (to -0.75 or 0.75, the other sign) in the general
    // launch: y must differ at that element only (act(a) != 0: a is a nonzero draw), db
    // (= dy act(a)) nowhere.
    std::vector<T> bm = b;
    bm[n - 1] = from_double<T>(static_cast<double>(static_cast<float>(b[n - 1])) > 0.0 ? -0.75 : 0.75);
    const auto mut = glu_launch<T>(g, a, bm, gy, 1, k_mut);
    EXPECT_EQ(k_mut, "general/general") << name << " " << dtype << " n = " << n << ": the mutant launch's kernels";
    EXPECT_EQ(first_difference(al[0], mut[0], sizeof(T)), static_cast<std::int64_t>(n - 1))
        << name << " " << dtype << " n = " << n << ": the changed b element was not found in y (the comparison is blind)";
    EXPECT_EQ(first_difference(al[2], mut[2], sizeof(T)), -1)
        << name << " " << dtype << " n = " << n << ": db does not depend on b, yet it changed";
  }
}

void run_glu(Glu g, const char* name) {
  check_glu<__nv_bfloat16>(g, name, "bf16");
  check_glu<__half>(g, name, "fp16");
  check_glu<float>(g, name, "fp32");
  check_glu<double>(g, name, "fp64");
}

TEST(GluPaths, SwigluAlignedAndGeneralKernelsGiveTheSameBits) {
  const std::string why = skip_reason("swiglu");
  if (!why.empty()) GTEST_SKIP() << why;
  run_glu(Glu::swiglu, "swiglu");
}
TEST(GluPaths, GegluAlignedAndGeneralKernelsGiveTheSameBits) {
  const std::string why = skip_reason("geglu");
  if (!why.empty()) GTEST_SKIP() << why;
  run_glu(Glu::geglu_erf, "geglu (erf)");
  run_glu(Glu::geglu_tanh, "geglu (tanh)");
}

// ---- softmax block width --------------------------------------------------------------

/// Units a softmax row spans (the launchers' rule for rows of a 16-byte aligned tensor).
template <class T>
std::int64_t softmax_units(std::int64_t k_len) {
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  return (k_len * static_cast<std::int64_t>(sizeof(T))) % 16 == 0 ? (k_len + vec - 1) / vec
                                                                   : (k_len + 2 * (vec - 1)) / vec;
}

/// The narrow kernel the softmax launchers must take for a row of `units` (at most 128):
/// forward one unit per thread in 32, 64 or 128 threads, backward in 32, 64 or 128 threads
/// (the names the launchers record, common/kernel_trace.h).
std::string softmax_narrow_kernel(std::int64_t units, bool backward) {
  if (units <= 32) return "cached_32";
  if (units <= 64) return "cached_64";
  return backward ? "cached_128x1" : "cached_128";
}

template <class T>
void check_softmax_width(const char* dtype) {
  constexpr std::int64_t rows = 37, q_len = 37;
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  const double scale = 0.125;
  for (const std::int64_t k_len : {std::int64_t(1), 3 * vec + 1, 32 * vec, 40 * vec - 3, 64 * vec, 100 * vec + 5,
                                   128 * vec}) {
    const std::int64_t units = softmax_units<T>(k_len);
    const std::size_t n = static_cast<std::size_t>(rows * k_len);
    for (int mask_mode = 0; mask_mode <= 2; ++mask_mode) {
      const std::string where = std::string(dtype) + " k_len = " + std::to_string(k_len) + " (" +
                                std::to_string(units) + " units), mask_mode " + std::to_string(mask_mode);
      Rng rng{0x50F70000ull + static_cast<std::uint64_t>(k_len * 3 + mask_mode)};
      std::vector<T> x(n), dy(n), mask(static_cast<std::size_t>(q_len * k_len));
      for (auto& v : x) v = from_double<T>(8.0 * rng.symmetric());
      for (auto& v : dy) v = from_double<T>(rng.symmetric());
      for (auto& v : mask) v = from_double<T>(rng.next() < 0.2 ? -INFINITY : 2.0 * rng.symmetric());
      // the mutated element (and one more) of the last row stay visible
      for (std::int64_t j = 0; j < std::min<std::int64_t>(k_len, 2); ++j)
        mask[static_cast<std::size_t>((q_len - 1) * k_len + j)] = from_double<T>(0.0);
      Placed<T> dx_in(n, 0), dmask(mask.size(), 0), ddy(n, 0), y_narrow(n, 0), y_wide(n, 0), dx_narrow(n, 0),
          dx_wide(n, 0);
      dx_in.put(x);
      dmask.put(mask);
      ddy.put(dy);
      auto fwd = [&](int width, T* y) {
        return width == 0 ? softmax::forward<T>(dx_in.p, dmask.p, y, rows, q_len, k_len, scale, mask_mode, 0, 0)
                          : softmax::forward_with_block<T>(width, dx_in.p, dmask.p, y, rows, q_len, k_len, scale,
                                                           mask_mode, 0, 0);
      };
      kernel_trace::record(Launcher::softmax_forward, "");
      ASSERT_EQ(fwd(0, y_narrow.p), cudaSuccess) << where;
      // The comparison means the narrow block against the 256-thread one.
      EXPECT_EQ(std::string(kernel_trace::last(Launcher::softmax_forward)), softmax_narrow_kernel(units, false))
          << where << ": the kernel forward() took";
      ASSERT_EQ(fwd(256, y_wide.p), cudaSuccess) << where;
      EXPECT_STREQ(kernel_trace::last(Launcher::softmax_forward), "forced") << where;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
      const auto yn = y_narrow.get(), yw = y_wide.get();
      EXPECT_EQ(first_difference(yn, yw, sizeof(T)), -1) << where << ": y of the narrow and the 256-thread block differ";
      // Backward from the forward's y.
      const bool bwd_hook = units <= 128;
      if (bwd_hook) {
        kernel_trace::record(Launcher::softmax_backward, "");
        ASSERT_EQ(softmax::backward<T>(y_narrow.p, ddy.p, dx_narrow.p, rows, q_len, k_len, scale, mask_mode, 0, 0),
                  cudaSuccess)
            << where;
        EXPECT_EQ(std::string(kernel_trace::last(Launcher::softmax_backward)), softmax_narrow_kernel(units, true))
            << where << ": the kernel backward() took";
        ASSERT_EQ(softmax::backward_with_block<T>(128, y_narrow.p, ddy.p, dx_wide.p, rows, q_len, k_len, scale, mask_mode,
                                                    0, 0),
                  cudaSuccess)
            << where;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
        EXPECT_EQ(first_difference(dx_narrow.get(), dx_wide.get(), sizeof(T)), -1)
            << where << ": dx of the narrow and the 128-thread block differ";
      }
      // The mutants: the wide launches with the last row's first x (forward) / dy (backward)
      // changed must differ, first in that row (not for k_len = 1: y = 1 and dx = 0 there
      // whatever x and dy are).
      if (k_len == 1) continue;
      const std::int64_t last_row = (rows - 1) * k_len;
      std::vector<T> xm = x;
      xm[static_cast<std::size_t>(last_row)] =
          from_double<T>(static_cast<double>(static_cast<float>(x[static_cast<std::size_t>(last_row)])) + 4.0);
      dx_in.put(xm);
      ASSERT_EQ(fwd(256, y_wide.p), cudaSuccess) << where;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
      const std::int64_t d = first_difference(yn, y_wide.get(), sizeof(T));
      EXPECT_TRUE(d >= last_row && d < last_row + k_len)
          << where << ": the forward mutant was not found in the last row (first difference " << d
          << "): the comparison is blind";
      if (bwd_hook) {
        std::vector<T> dym = dy;
        dym[static_cast<std::size_t>(last_row)] =
            from_double<T>(static_cast<double>(static_cast<float>(dy[static_cast<std::size_t>(last_row)])) + 4.0);
        ddy.put(dym);
        ASSERT_EQ(softmax::backward_with_block<T>(128, y_narrow.p, ddy.p, dx_wide.p, rows, q_len, k_len, scale, mask_mode,
                                                    0, 0),
                  cudaSuccess)
            << where;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
        const std::int64_t db = first_difference(dx_narrow.get(), dx_wide.get(), sizeof(T));
        EXPECT_TRUE(db >= last_row && db < last_row + k_len)
            << where << ": the backward mutant was not found in the last row (first difference " << db
            << "): the comparison is blind";
      }
    }
  }
  // The hooks refuse a width that is not theirs or a row longer than the block.
  Placed<T> a(64 * 16, 0), b(64 * 16, 0);
  EXPECT_EQ(softmax::forward_with_block<T>(96, a.p, nullptr, b.p, 1, 1, 8, 1.0, 0, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(softmax::forward_with_block<T>(32, a.p, nullptr, b.p, 1, 1, 33 * vec, 1.0, 0, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(softmax::backward_with_block<T>(256, a.p, a.p, b.p, 1, 1, 8, 1.0, 0, 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(softmax::backward_with_block<T>(64, a.p, a.p, b.p, 1, 1, 65 * vec, 1.0, 0, 0, 0), cudaErrorInvalidValue);
}

// ---- softmax causal backward: units of y past the causal limit are not read -----------

/// First element of the first 16-byte unit of a row at device address `row` wholly past
/// `last_key` (the kernels' unit grid, common/cuda_utils.cuh: unit u covers elements
/// [u * vec - shift, (u + 1) * vec - shift), shift = (row % 16) / sizeof(T)), clipped to
/// [0, k_len]: from there on the causal backward takes y as +0 without reading it.
template <class T>
std::int64_t first_skipped(const T* row, std::int64_t last_key, std::int64_t k_len) {
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  const std::int64_t shift = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(row) % 16 / sizeof(T));
  const std::int64_t t = last_key + shift;  // the unit holding last_key is floor(t / vec)
  const std::int64_t u = (t >= 0 ? t / vec : -((-t + vec - 1) / vec)) + 1;
  return std::clamp<std::int64_t>(u * vec - shift, 0, k_len);
}

/// One causal geometry of SoftmaxCausalBackward.
struct CausalRows {
  std::int64_t q_len, k_len, rows, row_offset;
  int y_offset;  ///< y placed this many elements past a 256-byte boundary
};

template <class T>
void check_softmax_causal_backward(const char* dtype) {
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  const double scale = 0.125;
  const std::int64_t long_row = 1100 * vec + 5, stream_row = 2100 * vec;  // two-sweep backward; streamed forward
  // Windows of square rows reaching each 128-thread register cache of the backward (R = 1,
  // 2, 4, 8 units per thread; R = 4 is bf16's 4096-key production row)
  const std::int64_t r1 = 100 * vec + 3, r2 = 200 * vec, r4 = 500 * vec, r8 = 900 * vec + 1;
  for (const CausalRows g : {CausalRows{40 * vec - 3, 40 * vec - 3, 2 * (40 * vec - 3), 0, 1},  // rows wrap at q_len
                             CausalRows{300, 37, 300, 0, 0},                 // q_len > k_len: fully masked rows
                             CausalRows{64, 9 * vec, 64, 0, 0},             // short rows (narrow blocks)
                             CausalRows{r1, r1, 16, r1 / 3, 1}, CausalRows{r2, r2, 16, r2 / 2, 0},
                             CausalRows{r4, r4, 24, r4 / 2 - 12, 0}, CausalRows{r8, r8, 16, r8 / 4, 1},
                             CausalRows{long_row, long_row, 24, long_row / 3, 0},
                             CausalRows{stream_row, stream_row, 16, stream_row / 2 - 8, 1}}) {
    const std::string where = std::string(dtype) + " q_len " + std::to_string(g.q_len) + ", k_len " +
                              std::to_string(g.k_len) + ", rows " + std::to_string(g.rows) + " from row_offset " +
                              std::to_string(g.row_offset);
    const std::size_t n = static_cast<std::size_t>(g.rows * g.k_len);
    Rng rng{0xCA05A1ull + static_cast<std::uint64_t>(g.k_len * 7 + g.q_len)};
    std::vector<T> x(n), dy(n);
    for (auto& v : x) v = from_double<T>(8.0 * rng.symmetric());
    for (auto& v : dy) v = from_double<T>(rng.symmetric());
    auto last_key = [&](std::int64_t r) { return (g.row_offset + r) % g.q_len + g.k_len - g.q_len; };
    // An Inf upstream gradient at a masked position (row 1's last element, masked there):
    // the row's dx is NaN in every mode, since dy is read everywhere.
    const bool inf_row1 = g.rows > 1 && last_key(1) < g.k_len - 1;
    if (inf_row1) dy[static_cast<std::size_t>(2 * g.k_len - 1)] = from_double<T>(INFINITY);
    Placed<T> dxin(n, 0), ddy(n, 0), dyv(n, g.y_offset), ddx(n, 0);
    dxin.put(x);
    ddy.put(dy);
    ASSERT_EQ(softmax::forward<T>(dxin.p, nullptr, dyv.p, g.rows, g.q_len, g.k_len, scale, 1, g.row_offset, 0),
              cudaSuccess)
        << where;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
    const auto y_bytes = dyv.get();
    std::vector<T> y(n);
    std::memcpy(y.data(), y_bytes.data(), y_bytes.size());
    auto bwd = [&](const std::vector<T>& yv, int mask_mode) {
      dyv.put(yv);
      EXPECT_EQ(softmax::backward<T>(dyv.p, ddy.p, ddx.p, g.rows, g.q_len, g.k_len, scale, mask_mode, g.row_offset, 0),
                cudaSuccess)
          << where;
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
      return ddx.get();
    };
    const auto dx_all = bwd(y, 0);  // mode 0 reads every y
    EXPECT_EQ(first_difference(bwd(y, 1), dx_all, sizeof(T)), -1)
        << where << ": the causal backward's dx differs from the read-everything backward's on the forward's y";
    // y poisoned with NaN from each row's first skipped unit on: the causal backward must not
    // see it (bitwise the same dx), the read-everything backward must (the check is not blind).
    std::vector<T> y_skip = y, y_edge = y;
    std::vector<std::int64_t> edge_rows;
    std::int64_t poisoned = 0;
    for (std::int64_t r = 0; r < g.rows; ++r) {
      const std::int64_t f = first_skipped(dyv.p + r * g.k_len, last_key(r), g.k_len);
      for (std::int64_t j = f; j < g.k_len; ++j, ++poisoned)
        y_skip[static_cast<std::size_t>(r * g.k_len + j)] = from_double<T>(NAN);
      // the last element the documented rule reads (possibly a masked one in the unit that
      // straddles the limit): NaN there must reach the row's dx
      if (f > 0 && !(inf_row1 && r == 1)) {  // row 1 may be NaN already
        y_edge[static_cast<std::size_t>(r * g.k_len + f - 1)] = from_double<T>(NAN);
        edge_rows.push_back(r);
      }
    }
    ASSERT_GT(poisoned, 0) << where << ": no unit lies past the causal limit; the geometry tests nothing";
    EXPECT_EQ(first_difference(bwd(y_skip, 1), dx_all, sizeof(T)), -1)
        << where << ": the causal backward read y past the causal limit (NaN planted there reached dx)";
    EXPECT_NE(first_difference(bwd(y_skip, 0), dx_all, sizeof(T)), -1)
        << where << ": the planted NaN did not reach the read-everything backward: the check is blind";
    const auto dx_edge = bwd(y_edge, 1);
    const std::size_t row_bytes = static_cast<std::size_t>(g.k_len) * sizeof(T);
    for (const std::int64_t r : edge_rows) {
      const std::size_t at = static_cast<std::size_t>(r) * row_bytes;
      EXPECT_NE(std::memcmp(dx_edge.data() + at, dx_all.data() + at, row_bytes), 0)
          << where << ", row " << r << ": a NaN at the last element the causal backward must read ("
          << first_skipped(dyv.p + r * g.k_len, last_key(r), g.k_len) - 1
          << ") did not reach dx: the unit holding it (the last unit with lo <= last_key) was not read";
    }
  }
}

TEST(SoftmaxCausalBackward, SkipsOnlyUnitsPastTheCausalLimit) {
  const std::string why = skip_reason("softmax");
  if (!why.empty()) GTEST_SKIP() << why;
  check_softmax_causal_backward<__nv_bfloat16>("bf16");
  check_softmax_causal_backward<__half>("fp16");
  check_softmax_causal_backward<float>("fp32");
  check_softmax_causal_backward<double>("fp64");
}

TEST(SoftmaxBlockWidth, NarrowBlocksGiveTheWideBlocksBits) {
  const std::string why = skip_reason("softmax");
  if (!why.empty()) GTEST_SKIP() << why;
  check_softmax_width<__nv_bfloat16>("bf16");
  check_softmax_width<__half>("fp16");
  check_softmax_width<float>("fp32");
  check_softmax_width<double>("fp64");
}

}  // namespace
}  // namespace numgate
