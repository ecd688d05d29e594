// numgate — how the replay tests launch an op's target kernels on a fixture case.
//
// Each op exposes its kernels as a list of passes (e.g. "Forward" producing y,
// "Backward" producing dx and dw). A pass reads the device copies of the case's inputs
// and writes its outputs into device buffers the test bed allocated, poisoned and
// surrounded by guard bands. Registered in kernels/target_registry.cpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "numgate/op.h"

namespace numgate {

/// Device pointers by tensor name (inputs and outputs of a pass), each in the case dtype,
/// row-major with the fixture's shape. Pointers carry no alignment guarantee beyond the
/// element size (the test bed deliberately misaligns them in one replay).
using DevicePtrs = std::map<std::string, void*>;

struct TargetPass {
  std::string name;                  ///< "Forward", "Backward"
  std::vector<std::string> outputs;  ///< gated tensors this pass writes
  /// Device workspace bytes the pass needs for this case (0 if none).
  std::function<std::size_t(const CaseSpec&)> workspace_bytes;
  /// Launches the pass on `stream` (asynchronously); returns the launch's CUDA status.
  std::function<cudaError_t(const CaseSpec&, const DevicePtrs&, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream)>
      launch;
  /// Inputs the pass reads (each once at least): the benchmark's minimal-traffic count is
  /// these bytes plus the outputs' bytes.
  std::vector<std::string> reads;
};

struct TargetOp {
  std::string op;  ///< matches numgate::Op::name()
  std::vector<TargetPass> passes;
  /// Rows of the case (product of all dims but the last) and row length; used by the
  /// row-independence replay, which launches single rows at their own addresses.
  std::function<std::int64_t(const CaseSpec&)> rows;
  /// Optional: the case row r is launched as ALONE in the row-independence replay (shape
  /// [1, row length]). Unset: the case with shape {1, hidden}. Ops whose rows depend on
  /// their position (causal and per-query masks, RoPE) carry the position in params here.
  std::function<CaseSpec(const CaseSpec&, std::int64_t row)> row_case;
};

/// Calls f(T{}) with the kernel element type of a floating-point case dtype (fp32 float,
/// bf16 __nv_bfloat16, fp16 __half, fp64 double) and returns its status;
/// cudaErrorInvalidValue for i64 (index tensors are never a case dtype).
template <class F>
cudaError_t dispatch(DType t, F&& f) {
  switch (t) {
    case DType::fp32: return f(float{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::fp16: return f(__half{});
    case DType::fp64: return f(double{});
    case DType::i64: break;
  }
  return cudaErrorInvalidValue;
}

/// The target of op `name`; throws std::invalid_argument listing the known targets.
const TargetOp& find_target(const std::string& name);

}  // namespace numgate
