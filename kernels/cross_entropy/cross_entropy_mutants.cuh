// numgate — a deliberately broken cross-entropy fused entry, for the tests only
// (CrossEntropyFused.KernelMutantWithAnotherReductionTreeIsCaught, tests/gpu/test_ce_fused.cpp):
// the real fused kernel (cross_entropy_kernels.cu's backward_rows, FUSED) instantiated with a
// compile-time mutation.
// The production entries never instantiate a mutation: their code does not change.
//
//   none                 the control: forward_backward itself, through this entry
//   butterfly_ascending  the fused kernel combines the threads' (max, sum) statistics by the
//                        butterflies in ascending order (offsets 1, 2, ..., 16 instead of 16,
//                        ..., 1; within each warp and over the 32 warps): another reduction
//                        tree than forward's and backward's, so other roundings of the FP32 S,
//                        and a fused entry that is no longer bitwise forward + backward (the
//                        gate cannot tell: both trees are legitimate).
// bf16 and fp16 logits only: float / double logits sum S in FP64, where another tree moves S
// by ~2^-53 and the FP32 / FP64 outputs (almost) never.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cross_entropy/cross_entropy.cuh"

namespace numgate::cross_entropy::mutant {

enum class Fused { none, butterfly_ascending };
const char* name(Fused m);

/// forward_backward (cross_entropy.cuh: same arguments, checks and results) with mutation m;
/// T = __half or __nv_bfloat16.
template <typename T>
cudaError_t forward_backward(Fused m, const T* logits, const std::int64_t* targets, const T* dloss, T* loss, T* lse,
                             T* dlogits, std::int64_t tokens, std::int64_t vocab, const Params& p,
                             std::int64_t row_offset, std::int64_t total_tokens, void* workspace,
                             std::size_t workspace_bytes, cudaStream_t stream);

extern template cudaError_t forward_backward<__half>(Fused, const __half*, const std::int64_t*, const __half*,
                                                     __half*, __half*, __half*, std::int64_t, std::int64_t,
                                                     const Params&, std::int64_t, std::int64_t, void*, std::size_t,
                                                     cudaStream_t);
extern template cudaError_t forward_backward<__nv_bfloat16>(Fused, const __nv_bfloat16*, const std::int64_t*,
                                                            const __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                            __nv_bfloat16*, std::int64_t, std::int64_t, const Params&,
                                                            std::int64_t, std::int64_t, void*, std::size_t,
                                                            cudaStream_t);

}  // namespace numgate::cross_entropy::mutant
