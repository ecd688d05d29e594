// Deliberately broken RMSNorm forward kernels (see rmsnorm_mutants.cu). Test use only.
// Same layout and arguments as numgate::rmsnorm::forward; T = float or __nv_bfloat16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::rmsnorm::mutant {

/// `none` is the same simple kernel without a mutation: the control.
enum class Kind { none, skip_last_element, write_past_end, bf16_sum_of_squares, eps_outside_sqrt };
const char* name(Kind k);

template <typename T>
cudaError_t forward(Kind kind, const T* x, const T* w, T* y, std::int64_t rows, std::int64_t hidden, double eps,
                    cudaStream_t stream);

/// Weight-gradient mutants of the nondeterministic (atomics) kind, SPEC §6's atomic-add
/// class: dw[j] = sum_r dy[r,j] * x[r,j] * rstd_r, one block per row adding its row's terms
/// to the column totals. `none` (the control) adds with atomicAdd into an FP32 accumulator
/// and rounds once: a legitimate nondeterministic evaluation that must pass.
///   output_dtype_atomics  atomicAdd directly into dw in T (every addition rounded to bf16/fp16)
///   lost_update           a plain read-modify-write instead of atomicAdd (a race: updates lost)
enum class AtomicKind { none, output_dtype_atomics, lost_update };
const char* name(AtomicKind k);
/// Bytes of workspace backward_dw_atomic needs (an FP32 accumulator of `hidden`).
std::size_t atomic_workspace_bytes(std::int64_t hidden);
/// Writes dw only (T = __nv_bfloat16 or float); workspace of atomic_workspace_bytes(hidden).
template <typename T>
cudaError_t backward_dw_atomic(AtomicKind kind, const T* x, const T* dy, T* dw, std::int64_t rows,
                               std::int64_t hidden, double eps, void* workspace, cudaStream_t stream);

}  // namespace numgate::rmsnorm::mutant
