// LayerNorm target: launches a case's passes (descriptor: layernorm_oracle.cpp) by dtype.
#include "layernorm/layernorm.cuh"
#include "target.h"

namespace numgate::layernorm {
namespace {

cudaError_t launch_forward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<const T>("b"), l.ptr<T>("y"), sh.rows, sh.hidden,
                      l.spec.param("eps"), l.stream);
  });
}

cudaError_t launch_backward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<const T>("dy"), l.ptr<T>("dx"), l.ptr<T>("dw"),
                       l.ptr<T>("db"), sh.rows, sh.hidden, l.spec.param("eps"), l.workspace, l.workspace_bytes,
                       l.stream);
  });
}

std::size_t backward_workspace(const CaseSpec& c) { return backward_workspace_bytes(rows_of(c.shape), hidden_of(c)); }

}  // namespace

TargetOp make_target() {
  return {"layernorm", {{"Forward", {}, launch_forward}, {"Backward", backward_workspace, launch_backward}}, {}};
}

}  // namespace numgate::layernorm

NUMGATE_REGISTER_TARGETS(layernorm) { add(numgate::layernorm::make_target()); }
