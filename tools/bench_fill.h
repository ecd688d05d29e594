// numgate-bench — device-side pseudo-random fill of benchmark buffers.
//
// Benchmarks must not run on zeros (hardware and kernels can take shortcuts on them,
// and RMSNorm of a zero row is degenerate), so inputs are filled on the device with a
// counter-based hash: fast for multi-GiB buffer sets and reproducible from the seed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace numgate::bench {

/// Element type of the buffer to fill.
enum class FillType { fp32, fp64, fp16, bf16 };

/// Fills dst[0..n) (device memory of element type `type`) with values
///   sign * (lo + (hi - lo) * u),   u uniform in [0, 1) from a hash of (seed, index),
/// where sign is +1, or a random +-1 when random_sign is true. With 0 < lo < hi the
/// values are never zero. Asynchronous on `stream`; returns the launch error.
cudaError_t fill_random(void* dst, FillType type, std::size_t n, std::uint64_t seed, float lo,
                        float hi, bool random_sign, cudaStream_t stream);

}  // namespace numgate::bench
