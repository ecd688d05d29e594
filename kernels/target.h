// numgate — how the replay and the benchmark launch an op's target kernels on a case.
//
// What a pass reads and writes, every tensor's layout, dtype and shape are declared once,
// in the op's descriptor (numgate/descriptor.h, returned by the op's numgate::Op). The
// target adds, per pass of the descriptor and by the same name, the function that launches
// it. Registered with NUMGATE_REGISTER_TARGETS in the op's folder (see below).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "numgate/op.h"

namespace numgate {

/// Device pointers by tensor name: every input of the case and every tensor the pass
/// writes, each in its declared dtype (TensorDecl::dtype_for), row-major with its declared
/// shape. Pointers carry no alignment guarantee beyond the element size (the misaligned
/// replay shifts every buffer by one element of its own dtype).
using DevicePtrs = std::map<std::string, void*>;

/// The rows (OpDescriptor::rows units) one launch covers. A whole-case launch covers all
/// of them (count < 0). The replay's row-by-row check launches rows alone: then the
/// buffers of Layout::rows tensors hold rows [first, first + count) only (their pointers
/// point at row `first`), and every other buffer (row_indexed, per-column, whole) is the
/// whole tensor, which the launch indexes from `first` where it must (a causal row's query
/// position, a token's position or target, a per-token output such as cross-entropy's lse).
struct RowWindow {
  std::int64_t first = 0;
  std::int64_t count = -1;  ///< -1: every row of the case
  /// The number of rows launched for a case of `total` rows.
  std::int64_t rows_of(std::int64_t total) const { return count < 0 ? total : count; }
};

/// Everything one launch gets.
struct Launch {
  const CaseSpec& spec;  ///< the whole case: shape, dtype, op parameters
  const DevicePtrs& ptrs;
  void* workspace;
  std::size_t workspace_bytes;
  cudaStream_t stream;
  RowWindow window;
  /// Typed pointer of a tensor (throws std::out_of_range naming nothing: a bug of the test bed).
  template <class T>
  T* ptr(const std::string& name) const {
    return static_cast<T*>(ptrs.at(name));
  }
};

/// A row-wise launch's [rows, hidden]: the window's rows of the case's flattened leading
/// dimensions, and the last dimension.
inline std::int64_t hidden_of(const CaseSpec& c) { return c.shape.empty() ? 0 : c.shape.back(); }
inline RowShape launched_rows(const Launch& l) { return {l.window.rows_of(rows_of(l.spec.shape)), hidden_of(l.spec)}; }

struct TargetPass {
  std::string name;  ///< a pass of the op's descriptor ("Forward", "Backward")
  /// Device workspace bytes the pass needs for this case (empty function: none).
  std::function<std::size_t(const CaseSpec&)> workspace_bytes;
  /// Launches the pass asynchronously on l.stream; returns the launch's CUDA status
  /// (cudaErrorInvalidValue for a case or window the launchers refuse).
  std::function<cudaError_t(const Launch&)> launch;
  /// Two launches on the same inputs give the same bits (no atomics, no order that varies
  /// between launches). The replay launches a deterministic pass twice (NaN, then 0x55
  /// poison) and requires bitwise equality (how an unwritten element or a race is found);
  /// a nondeterministic one kNondeterministicLaunches times, gates every distinct result
  /// and reports how many there were and the largest difference between launches.
  bool deterministic = true;
  /// The pass's minimal DRAM traffic in bytes for this case, where it is less than every
  /// tensor the descriptor's pass reads and writes, once (empty function: that sum), e.g. a
  /// causal softmax, which never reads the scores past each row's causal limit. Only the
  /// benchmark's bandwidth figure uses it.
  std::function<double(const CaseSpec&)> traffic_bytes;
};

/// Launches of a pass declared nondeterministic (SPEC §5: at least 5, every one gated).
inline constexpr int kNondeterministicLaunches = 5;

struct TargetOp {
  std::string op;  ///< the descriptor's name
  /// Passes by the descriptor's names. The op's main target (variant empty) has every pass
  /// of the descriptor, in order; a variant has some of them.
  std::vector<TargetPass> passes;
  /// Optional host-side check of a case's device inputs before the replay launches it, e.g.
  /// cross-entropy's class targets in [0, vocab) or ignore_index (the kernels never index
  /// memory with a target, an invalid one gives NaN). The replay calls it once per case and
  /// reports a refusal as a FAIL; the benchmark, whose inputs are valid by construction,
  /// does not call it, so it is never timed.
  std::function<cudaError_t(const CaseSpec&, const DevicePtrs&, cudaStream_t)> precheck;
  /// Empty: the op's main target (exactly one per op; gate 1, the misaligned and row-by-row
  /// replays and the benchmark use it). Else a second implementation of some of the op's
  /// passes registered beside it, e.g. "atomic_dw" (RMSNorm's backward with an atomics-based
  /// weight-gradient reduction): the replay gates it on every case, aligned, its rows
  /// reported as "<tensor> [<variant>]"; the benchmark times it too. [a-z0-9_]+. A variant
  /// without a precheck gets its main target's.
  std::string variant = {};

  /// "rmsnorm" or "rmsnorm [atomic_dw]".
  std::string label() const { return variant.empty() ? op : op + " [" + variant + "]"; }
  /// The pass of that name; throws std::invalid_argument naming the op and its passes.
  const TargetPass& pass(const std::string& name) const;
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

/// All registered targets, main targets and variants, by op then variant
/// (NUMGATE_REGISTER_TARGETS; the list is built from kernels/CMakeLists.txt's
/// numgate_add_op() lines). Throws std::logic_error at the first call if a main target's
/// passes are not its descriptor's one to one, a variant has a pass its descriptor lacks or
/// a malformed name, an op has no main target or two, or two variants share a name.
const std::vector<TargetOp>& all_targets();
/// The main target of op `name`; throws std::invalid_argument listing the known targets.
const TargetOp& find_target(const std::string& name);
/// The variants of op `name` (empty when it has none).
std::vector<const TargetOp*> variants_of(const std::string& name);

/// Registration: at global scope in the op folder's target file,
///   NUMGATE_REGISTER_TARGETS(glu) { add(glu::make_swiglu_target()); add(glu::make_geglu_target()); }
/// (a variant is one more add() of a TargetOp with `variant` set).
using TargetSink = std::function<void(TargetOp)>;
#define NUMGATE_REGISTER_TARGETS(folder) \
  void numgate_register_targets_##folder(const ::numgate::TargetSink& add)

}  // namespace numgate
