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

}  // namespace

TargetOp make_target() { return {"rmsnorm", {{"Forward", {}, launch_forward}, {"Backward", backward_workspace, launch_backward}}, {}}; }

/// The nondeterministic variant: Backward with dw reduced by atomics (rmsnorm.cuh).
TargetOp make_atomic_dw_target() {
  TargetOp t{"rmsnorm", {{"Backward", backward_atomic_dw_workspace, launch_backward_atomic_dw}}, {}};
  t.passes[0].deterministic = false;
  t.variant = "atomic_dw";
  return t;
}

}  // namespace numgate::rmsnorm

NUMGATE_REGISTER_TARGETS(rmsnorm) {
  add(numgate::rmsnorm::make_target());
  add(numgate::rmsnorm::make_atomic_dw_target());
}
