// numgate — softmax target kernels: public launcher API.
//
// Scaled, optionally masked softmax over the last dimension and its backward from the
// saved output (the op, its masking rules and the reference policy are specified in
// softmax_oracle.h). For row r of x [rows, k_len] (leading dims flattened), query
// i = (row_offset + r) mod q_len, and the unmasked set U of the row:
//
//   z_j = acc(x_j) * acc(scale)            (mask_mode 2: + acc(mask[i, j]))
//   masked out: mask_mode 1 (causal, bottom-right aligned): j > i + k_len - q_len;
//               mask_mode 2: acc(mask[i, j]) <= the dtype's lowest finite value
//                            (-inf or -max_finite); masked elements are never read into
//                            the arithmetic and give y = 0 exactly
//   m   = max_{j in U} z_j, NaN-propagating; m == -inf (no unmasked finite-or-+inf score):
//         y = 0 for the whole row (exactly; never NaN)
//   e_j = exp(z_j - m) ;  s = sum_{j in U} e_j ;  y_j = T(e_j / s)
//         (bf16 / fp16 outputs: T(e_j * RN_fp32(1 / s)), one reciprocal per row)
// Backward: dot = sum_j acc(dy_j) * acc(y_j) ;  dx_j = T(acc(scale) * (acc(y_j) * (acc(dy_j) - dot)))
// where y is the saved forward output. Masked / fully masked rows have y = 0, hence dx = 0.
// Precondition in mask_mode 1: y is forward()'s output for the same q_len, k_len and
// row_offset, so y = +0 at every causally masked position; the backward does not read y in
// the 16-byte units that lie wholly past a row's causal limit and takes them as that +0
// (a y with anything else there gives another dx than the formula above). dy is read
// everywhere in every mode.
//
// Numerics: acc = float for float/__half/__nv_bfloat16 (double for double); every listed
// operation is one IEEE operation rounded to nearest, never contracted into an FMA
// (mul_rn/add_rn/sub_rn/div_rn); sums in a fixed tree order (per-thread sequential, then
// warp and block butterflies); the max is exact. exp(z - m): for float outputs evaluated
// in FP64 and rounded once to float (correctly rounded but for rare near-ties), matching
// the reference's libm expf (<= 0.502 ulp) where CUDA's expf errs by up to 2 ulp, so the
// exponentials are the reference's value for value and y differs from it only by the
// sum's order; for bf16 / fp16 outputs CUDA's FP32 expf (<= 2 FP32 ulp: 2^-13 of the
// output's rounding); for double, exp. No online rescaling (see softmax_kernels.cu).
//
// Layout: x, y, dy, dx, y_fwd row-major [rows, k_len] (contiguous); mask [q_len, k_len]
// (read only in mask_mode 2; may be null otherwise). Alignment: pointers aligned to
// sizeof(T); 16-byte vector accesses where a tensor's own alignment allows, element-wise
// otherwise. No overlap (no in-place). Element types: float, __half, __nv_bfloat16, double.
//
// Limits: 0 <= rows <= 2^31 - 1, 1 <= k_len <= 2^30, 1 <= q_len, 0 <= row_offset,
// mask_mode in {0, 1, 2}. Rows of any length in that range (1 .. 65,536 are tested).
// Forward: rows of up to 16,384 elements (bf16/fp16; fp32 8,192, double 4,096) are read
// once and held in registers (each exponential computed once); longer rows are swept
// three times (the later sweeps mostly L1/L2 hits), with bitwise the same result. The
// backward reads rows of up to 8,192 elements (bf16/fp16; fp32 4,096) once into registers
// (128 threads per row); longer rows are swept twice. Causal (mask_mode 1): the forward
// does not read x, nor the backward y, in units wholly past the row's causal limit
// (about half of a square causal score matrix); the backward reads every dy (a NaN or Inf
// dy at a masked position, where y = 0, makes the row's dx NaN, as the golden does).
// mask_mode 2: the backward reads every y (it is not given the mask).
//
// Determinism: no atomics; the launch shape (256 threads per row forward, backward 128,
// or 256 for rows it sweeps twice; rows of one 16-byte unit per thread get the narrowest
// block of 32, 64 or 128 threads that holds them, bitwise the wider block's results) and every summation
// order depend only on k_len and the row's 16-byte phase, so repeated calls give bitwise
// identical results, and a row launched alone (with its row_offset) gives bitwise its row
// of a batched launch when it has the same 16-byte phase.
//
// Errors: cudaErrorInvalidValue without launching for bad sizes, a mask_mode outside
// {0, 1, 2}, a null pointer (mask only in mode 2), or a pointer not aligned to sizeof(T);
// otherwise cudaGetLastError() after enqueueing on `stream`. Never synchronizes.
//
// Plain host C++ (compiles with g++); kernels and explicit instantiations in softmax_kernels.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::softmax {

/// Softmax forward on `stream`.
/// @param x          device, [rows, k_len] scores
/// @param mask       device, [q_len, k_len] additive mask (mask_mode 2), else unused (may be null)
/// @param y          device, [rows, k_len] output
/// @param rows       rows to process (0: nothing is launched)
/// @param q_len      query length: row r is query (row_offset + r) mod q_len
/// @param k_len      row length (keys)
/// @param scale      applied to x before the mask, converted to acc once
/// @param mask_mode  0 none, 1 causal (bottom-right), 2 additive
/// @param row_offset global index of the first row (0 for a whole tensor; lets a caller launch
///                   a slice of rows and keep their query positions)
template <typename T>
cudaError_t forward(const T* x, const T* mask, T* y, int64_t rows, int64_t q_len, int64_t k_len, double scale,
                    int mask_mode, int64_t row_offset, cudaStream_t stream);

/// Softmax backward on `stream`: dx from the saved forward output y and the gradient dy.
/// @param y, dy      device, [rows, k_len]: the forward's output and the upstream gradient
/// @param dx         device, [rows, k_len] output
/// @param q_len, k_len, scale, mask_mode, row_offset  the forward's (mask_mode 1: y is not
///                   read in units wholly past a row's causal limit, see the precondition
///                   above; modes 0 and 2 read all of y, and mode 2 needs no mask here)
template <typename T>
cudaError_t backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t q_len, int64_t k_len, double scale,
                     int mask_mode, int64_t row_offset, cudaStream_t stream);

/// Test hooks (tests/gpu/test_aligned_paths.cpp, SoftmaxBlockWidth): forward() / backward()
/// with the block width forced to `block_threads` threads per row, for rows of at most that
/// many 16-byte units (one unit per thread): forward 32, 64, 128 or 256, backward 32, 64 or
/// 128. The launchers give such a row the narrowest of these that holds it; the hooks let a
/// test launch the same rows on a wider block and compare the bits. cudaErrorInvalidValue
/// (nothing launched) for another width, a longer row, or what forward() / backward() refuse.
template <typename T>
cudaError_t forward_with_block(int block_threads, const T* x, const T* mask, T* y, int64_t rows, int64_t q_len,
                               int64_t k_len, double scale, int mask_mode, int64_t row_offset, cudaStream_t stream);
template <typename T>
cudaError_t backward_with_block(int block_threads, const T* y, const T* dy, T* dx, int64_t rows, int64_t q_len,
                                int64_t k_len, double scale, int mask_mode, int64_t row_offset, cudaStream_t stream);

#define NUMGATE_SOFTMAX_EXTERN(T)                                                                          \
  extern template cudaError_t forward<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, double, int,  \
                                         int64_t, cudaStream_t);                                           \
  extern template cudaError_t backward<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, double, int,  \
                                          int64_t, cudaStream_t);                                          \
  extern template cudaError_t forward_with_block<T>(int, const T*, const T*, T*, int64_t, int64_t, int64_t,  \
                                                    double, int, int64_t, cudaStream_t);                      \
  extern template cudaError_t backward_with_block<T>(int, const T*, const T*, T*, int64_t, int64_t, int64_t,  \
                                                     double, int, int64_t, cudaStream_t);
NUMGATE_SOFTMAX_EXTERN(float)
NUMGATE_SOFTMAX_EXTERN(double)
NUMGATE_SOFTMAX_EXTERN(__half)
NUMGATE_SOFTMAX_EXTERN(__nv_bfloat16)
#undef NUMGATE_SOFTMAX_EXTERN

}  // namespace numgate::softmax
