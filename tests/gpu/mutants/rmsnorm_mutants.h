// Deliberately broken RMSNorm forward kernels (see rmsnorm_mutants.cu). Test use only.
// Same layout and arguments as numgate::rmsnorm::forward; T = float or __nv_bfloat16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::rmsnorm::mutant {

/// `none` is the same simple kernel without a mutation: the control.
enum class Kind { none, skip_last_element, write_past_end, bf16_sum_of_squares, eps_outside_sqrt };
const char* name(Kind k);

template <typename T>
cudaError_t forward(Kind kind, const T* x, const T* w, T* y, std::int64_t rows, std::int64_t hidden, double eps,
                    cudaStream_t stream);

}  // namespace numgate::rmsnorm::mutant
