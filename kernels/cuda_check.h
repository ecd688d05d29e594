// numgate — the one check of a CUDA runtime status on the host (the replay, its device
// buffers and the benchmark).
#pragma once

#include <cuda_runtime.h>

namespace numgate {

/// Does nothing on cudaSuccess; else throws std::runtime_error
///   "<what> failed at <file>:<line>: <CUDA error name> (<CUDA error string>)",
/// without " at <file>:<line>" when file is null. `what` names the call or the step
/// ("kernel launch", "cudaMemcpy(download)"). The error is not cleared (cudaGetLastError).
void cuda_check(cudaError_t e, const char* what, const char* file = nullptr, int line = 0);

}  // namespace numgate

/// Checks a CUDA runtime call, naming the call's text and where it is.
#define NUMGATE_CUDA_CHECK(call) ::numgate::cuda_check((call), #call, __FILE__, __LINE__)
