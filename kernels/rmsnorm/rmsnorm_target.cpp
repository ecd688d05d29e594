// RMSNorm target: launches a case's passes (descriptor: rmsnorm_oracle.cpp) by dtype.
#include "rmsnorm/rmsnorm.cuh"
#include "target.h"

namespace numgate::rmsnorm {
namespace {

cudaError_t launch_forward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<T>("y"), sh.rows, sh.hidden, l.spec.param("eps"),
                      l.stream);
  });
}

cudaError_t launch_backward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<const T>("dy"), l.ptr<T>("dx"), l.ptr<T>("dw"),
                       sh.rows, sh.hidden, l.spec.param("eps"), l.workspace, l.workspace_bytes, l.stream);
  });
}

std::size_t backward_workspace(const CaseSpec& c) { return backward_workspace_bytes(rows_of(c.shape), hidden_of(c)); }

cudaError_t launch_backward_atomic_dw(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward_atomic_dw<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<const T>("dy"), l.ptr<T>("dx"),
                                 l.ptr<T>("dw"), sh.rows, sh.hidden, l.spec.param("eps"), l.workspace,
                                 l.workspace_bytes, l.stream);
  });
}

std::size_t backward_atomic_dw_workspace(const CaseSpec& c) {
  return backward_atomic_dw_workspace_bytes(rows_of(c.shape), hidden_of(c));
}

/// Tuning candidates of the forward (rmsnorm.cuh forward_tuned): delete with the variants.
cudaError_t launch_forward_tuned(const Launch& l, int target_threads, bool preload_w) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward_tuned<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<T>("y"), sh.rows, sh.hidden,
                            l.spec.param("eps"), target_threads, preload_w, l.stream);
  });
}

}  // namespace

TargetOp make_target() { return {"rmsnorm", {{"Forward", {}, launch_forward}, {"Backward", backward_workspace, launch_backward}}, {}}; }

/// The nondeterministic variant: Backward with dw reduced by atomics (rmsnorm.cuh).
TargetOp make_atomic_dw_target() {
  TargetOp t{"rmsnorm", {{"Backward", backward_atomic_dw_workspace, launch_backward_atomic_dw}}, {}};
  t.passes[0].deterministic = false;
  t.variant = "atomic_dw";
  return t;
}

/// Forward with w loaded together with x (before the reduction), 384-thread preferred block.
TargetOp make_tune_fwd_w_target() {
  TargetOp t{"rmsnorm", {{"Forward", {}, [](const Launch& l) { return launch_forward_tuned(l, 384, true); }}}, {}};
  t.variant = "tune_fwd_w";
  return t;
}

/// Forward with 64-thread preferred blocks (more rows in flight per SM, K up to 8).
TargetOp make_tune_fwd_t64_target() {
  TargetOp t{"rmsnorm", {{"Forward", {}, [](const Launch& l) { return launch_forward_tuned(l, 64, false); }}}, {}};
  t.variant = "tune_fwd_t64";
  return t;
}

}  // namespace numgate::rmsnorm

NUMGATE_REGISTER_TARGETS(rmsnorm) {
  add(numgate::rmsnorm::make_target());
  add(numgate::rmsnorm::make_atomic_dw_target());
  add(numgate::rmsnorm::make_tune_fwd_w_target());
  add(numgate::rmsnorm::make_tune_fwd_t64_target());
}
