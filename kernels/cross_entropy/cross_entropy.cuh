// numgate — cross-entropy target kernels: public launcher API.
//
// The op, its semantics (ignore_index, label smoothing, z-loss folded into the loss, soft
// cap, reductions, all-ignored mean = 0) and the reference policy are specified in
// cross_entropy_oracle.h. Per token t (s = soft-capped logits, y = targets[t]):
//   forward:  lse_t = m + log S ;  ce_t as in the oracle ;  loss = ce (none) / sum / mean
//   backward: dlogits_tj = g_t (p_j (1 + 2 z lse) - (1 - eps)[j == y] - eps / V) * dcap_j
//             recomputing m, S and lse from the logits (no saved lse: see the oracle)
//
// Slices (row_offset, total_tokens). logits and dlogits point at the `tokens` launched
// rows; targets, dloss (none), loss (none) and lse are the WHOLE batch's arrays, indexed
// by row_offset + r; the mean's count n runs over targets[0, total_tokens). A whole
// tensor is row_offset = 0, total_tokens = tokens. (This lets a caller, and the replay's
// RowsIndependent check, launch one row of a batch with the batch's count.) With mean /
// sum, a slice's "loss" is the reduction over the launched rows only (divided by the
// batch's n for mean).
//
// Numerics: acc = FP32 (the reference policy; FP64 for the double instantiation). The
// exponential sum S and the smoothing sum sum_j s_j depend on the logits' dtype:
//   bf16 / fp16: FP32, as the reference's (whose sums run sequentially over the whole
//     vocabulary): per thread an online (max, sum) over the thread's units (~V / 1024
//     elements each), the terms 2^(RN(RN(s - m) * log2 e)) by the SFU's ex2.approx.ftz
//     (relative error <= ~2^-19 where |s - m| < 20, dominated by the roundings of the
//     argument, ln 2 |t| 2^-23.8 with |t| <= 28.9; <= ~2^-21 where |s - m| <= 2: at most
//     ~2^-10 of a bf16 and ~2^-7 of an fp16 output's half-ULP; smaller terms add below S's
//     rounding; terms below 2^-126, s - m < -87.3, are flushed to 0 by .ftz, which cannot
//     change S >= 1: together they are below V 2^-126 <= 2^-96 of it), a rescale
//     S * expf(m_old - m_new) (CUDA expf, <= 2 ulp) when the running max grows; threads
//     combined by a fixed butterfly (warp, then the block's 32 warps) of the same (m, S)
//     rule; log S in FP64 rounded once; backward p = e * RN_fp32(1 / S) with e the same
//     2^(RN(RN(s - m) * log2 e)) by ex2.approx.f32 WITHOUT .ftz (subnormal e and p kept:
//     a bf16 dlogits is still subnormal down to 2^-133, s - m down to about -92); soft cap
//     tanhf (<= 2 ulp).
//   float: S and sum_j s_j in FP64 (exp in FP64 per element, rescale exp(m_old - m_new) in
//     FP64), log S in FP64 rounded once, p = RN_fp32(e / S) with e in FP64, tanh in FP64
//     rounded once (the FP32 outputs' threshold is a few FP32 ulps, and the reference's
//     libm tanhf is within ~0.5 ulp where 1 / (1 - tanh^2) amplifies a 2-ulp tanhf in the
//     derivative).
//   double: FP64 throughout.
// All other acc operations are the reference's, each a single IEEE operation (no FMA
// contraction: mul_rn...). The token reduction (mean, sum) is a second single-block kernel
// summing the per-token losses in a fixed tree (per-thread sequential, then block_sum); the
// count n is an integer sum (order-free).
//
// Targets. Read byte-wise when not 8-byte aligned (the misaligned replay shifts every
// buffer by one element of the case dtype). The kernels never index memory with a target:
// s_y is captured during the sweep, so an invalid target (not ignore_index, outside
// [0, vocab)) cannot read out of bounds; it makes its token's loss and dlogits row NaN.
// VALIDATION is the caller's job before launching (check_targets in cross_entropy_oracle.h;
// the replay's target adapter copies the targets to the host and refuses the case with
// cudaErrorInvalidValue before any launch).
//
// Layout and alignment: row-major, pointers aligned to sizeof(T) (targets: any byte
// alignment); 16-byte vector loads/stores where a tensor's own alignment allows, element
// by element otherwise. No in-place.
//
// Launch shape: every pass processes a row with one block of 1024 threads (so a row's
// reduction tree is the same in the forward, the backward and the fused entry); grids of
// one block per SM loop over the rows; each thread keeps four 16-byte loads in flight in a
// statistics sweep, two in the gradient sweep. Forward: one read of each row (online
// logsumexp). Backward and fused: a statistics sweep and a gradient sweep per row; the
// gradient sweep reads the row's first 200 KiB from shared memory (the statistics sweep
// kept them there) and the rest from L2, so the logits cross DRAM once (vocab 151,936
// bf16: 12,800 of a row's ~18,993 16-byte units kept; rows much longer than 200 KiB +
// L2 / SMs re-read partly from DRAM); the first 96 KiB of a block's next row are prefetched
// into L2 (sm_90) when its gradient sweep starts. Forward and fused with mean / sum add one single-block reduce kernel,
// and mean a single-block count kernel (forward, backward and fused). Limits: 0 <= tokens
// <= 2^31 - 1, 1 <= vocab <= 2^30, row_offset >= 0,
// row_offset + tokens <= total_tokens; reduction in {0, 1, 2}; eps in [0, 1]; z_loss >= 0;
// softcap >= 0. Workspace: workspace_bytes(tokens) bytes at any byte alignment (per-token
// losses in acc and the count, placed from the next 16-byte boundary).
//
// Determinism: no atomics; every summation order depends only on vocab, the 16-byte
// phase of the row and tokens (not on the grid size), so repeated calls are bitwise
// identical, a row launched alone (same phase, its row_offset and the batch's
// total_tokens) gives bitwise its row, and forward_backward's loss, lse and dlogits are
// bitwise those of forward and backward on the same inputs.
//
// Shared memory: backward and forward_backward keep up to 200 KiB of each row in the
// block's dynamic shared memory (cudaFuncSetAttribute before each launch; less
// on a device whose opt-in limit is lower; the results do not depend on it).
//
// Errors: cudaErrorInvalidValue without launching for bad sizes or parameters, null
// pointers, pointers not aligned to sizeof(T) or too small a workspace; an error of
// cudaFuncSetAttribute (backward, forward_backward) as returned; else cudaGetLastError()
// after enqueueing on `stream`. Never synchronizes. Plain host C++ (compiles with g++).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::cross_entropy {

struct Params {
  std::int64_t ignore_index = -100;
  double label_smoothing = 0;  ///< eps
  double z_loss = 0;           ///< coefficient of lse^2 (0 = off)
  double softcap = 0;          ///< c of c * tanh(x / c) (0 = off)
  int reduction = 1;           ///< 0 none, 1 mean, 2 sum
};

/// Device workspace bytes either pass needs for `tokens` launched rows.
std::size_t workspace_bytes(std::int64_t tokens);

/// Forward: loss ([1] or the batch's [total_tokens] for none) and lse ([total_tokens]).
template <typename T>
cudaError_t forward(const T* logits, const std::int64_t* targets, T* loss, T* lse, std::int64_t tokens,
                    std::int64_t vocab, const Params& p, std::int64_t row_offset, std::int64_t total_tokens,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

/// Backward: dlogits [tokens, vocab] from logits, targets and dloss ([1] for mean / sum,
/// the batch's [total_tokens] for none).
template <typename T>
cudaError_t backward(const T* logits, const std::int64_t* targets, const T* dloss, T* dlogits, std::int64_t tokens,
                     std::int64_t vocab, const Params& p, std::int64_t row_offset, std::int64_t total_tokens,
                     void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

/// Fused forward + backward, how training calls it (the upstream gradient known in advance):
/// loss and lse as forward() and dlogits as backward() (bitwise), from ONE statistics sweep
/// per row followed by the gradient sweep (the row re-read from L2), instead of forward's
/// sweep plus backward's two. Shapes and layouts: logits, dlogits [tokens, vocab] (the
/// launched rows), targets, lse [total_tokens], dloss and loss [1] (mean, sum) or
/// [total_tokens] (none); dtypes T (targets i64); the slice rules, limits, errors and
/// determinism above; workspace: workspace_bytes(tokens). Ignored tokens get their lse,
/// ce 0 and exact-zero dlogits.
template <typename T>
cudaError_t forward_backward(const T* logits, const std::int64_t* targets, const T* dloss, T* loss, T* lse,
                             T* dlogits, std::int64_t tokens, std::int64_t vocab, const Params& p,
                             std::int64_t row_offset, std::int64_t total_tokens, void* workspace,
                             std::size_t workspace_bytes, cudaStream_t stream);

#define NUMGATE_CE_EXTERN(T)                                                                                     \
  extern template cudaError_t forward<T>(const T*, const std::int64_t*, T*, T*, std::int64_t, std::int64_t,     \
                                         const Params&, std::int64_t, std::int64_t, void*, std::size_t,          \
                                         cudaStream_t);                                                          \
  extern template cudaError_t backward<T>(const T*, const std::int64_t*, const T*, T*, std::int64_t, std::int64_t, \
                                          const Params&, std::int64_t, std::int64_t, void*, std::size_t,         \
                                          cudaStream_t);                                                         \
  extern template cudaError_t forward_backward<T>(const T*, const std::int64_t*, const T*, T*, T*, T*, std::int64_t, \
                                                  std::int64_t, const Params&, std::int64_t, std::int64_t, void*,   \
                                                  std::size_t, cudaStream_t);
NUMGATE_CE_EXTERN(float)
NUMGATE_CE_EXTERN(double)
NUMGATE_CE_EXTERN(__half)
NUMGATE_CE_EXTERN(__nv_bfloat16)
#undef NUMGATE_CE_EXTERN

}  // namespace numgate::cross_entropy
