// Fused add + RMSNorm target: launches a case's passes (descriptor: fused_add_rmsnorm_oracle.cpp) by dtype.
#include "fused_add_rmsnorm/fused_add_rmsnorm.cuh"
#include "target.h"

namespace numgate::fused_add_rmsnorm {
namespace {

cudaError_t launch_forward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("x"), l.ptr<const T>("residual"), l.ptr<const T>("w"), l.ptr<T>("residual_out"),
                      l.ptr<T>("y"), sh.rows, sh.hidden, l.spec.param("eps"), l.stream);
  });
}

cudaError_t launch_backward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(l.ptr<const T>("x"), l.ptr<const T>("residual"), l.ptr<const T>("w"), l.ptr<const T>("dy"),
                       l.ptr<const T>("d_residual_out"), l.ptr<T>("dx"), l.ptr<T>("dw"), sh.rows, sh.hidden,
                       l.spec.param("eps"), l.workspace, l.workspace_bytes, l.stream);
  });
}

std::size_t backward_workspace(const CaseSpec& c) { return backward_workspace_bytes(rows_of(c.shape), hidden_of(c)); }

}  // namespace

TargetOp make_target() {
  return {"fused_add_rmsnorm", {{"Forward", {}, launch_forward}, {"Backward", backward_workspace, launch_backward}}, {}};
}

}  // namespace numgate::fused_add_rmsnorm

NUMGATE_REGISTER_TARGETS(fused_add_rmsnorm) { add(numgate::fused_add_rmsnorm::make_target()); }
