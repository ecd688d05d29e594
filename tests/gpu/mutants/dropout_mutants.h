// Deliberately broken dropout_add forward kernels (see dropout_mutants.cu): the random
// stream drawn wrongly. Test use only, never shipped.
// y = residual + (m ? x * s : 0), mask = m over n contiguous elements (the whole tensor,
// stream index = flat index), T = float, __nv_bfloat16 or __half; s = dropout_scale_fp32(p).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::dropout_add::mutant {

/// `none`: a plain one-thread-per-element kernel of the declared stream and numerics, the
/// control; the others draw element i's r from the wrong counter, lane or key:
///   counter_per_element    ctr = {lo32(i), hi32(i), offset}, lane i & 3
///   lanes_permuted         lane 3 - (i & 3) of group i >> 2
///   key_high_word_dropped  key = {lo32(seed), 0}
enum class Kind { none, counter_per_element, lanes_permuted, key_high_word_dropped };
const char* name(Kind k);

/// cudaErrorInvalidValue for n <= 0 or p outside [0, 1); else the launch's status.
template <typename T>
cudaError_t forward(Kind kind, const T* x, const T* residual, T* y, T* mask, std::int64_t n, double p,
                    std::uint64_t seed, std::uint64_t offset, cudaStream_t stream);

}  // namespace numgate::dropout_add::mutant
