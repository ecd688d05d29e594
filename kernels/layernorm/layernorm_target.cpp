// LayerNorm target: launches a case's passes (descriptor: layernorm_oracle.cpp) by dtype.
#include "layernorm/layernorm.cuh"
#include "target.h"

namespace numgate::layernorm {
namespace {

cudaError_t launch_forward_mode(const Launch& l, int mode) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<const T>("b"), l.ptr<T>("y"), sh.rows, sh.hidden,
                      l.spec.param("eps"), l.stream, mode);
  });
}
cudaError_t launch_forward(const Launch& l) { return launch_forward_mode(l, 0); }

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

/// Forward tuning candidates (row_norm::ForwardOptions modes): delete after the measurement.
TargetOp make_tune_fwd_target(const char* name, int mode) {
  TargetOp t{"layernorm", {{"Forward", {}, [mode](const Launch& l) { return launch_forward_mode(l, mode); }}}, {}};
  t.variant = name;
  return t;
}


}  // namespace numgate::layernorm

NUMGATE_REGISTER_TARGETS(layernorm) {
  add(numgate::layernorm::make_target());
  add(numgate::layernorm::make_tune_fwd_target("tune_fwd_row", 1));
  add(numgate::layernorm::make_tune_fwd_target("tune_fwd_ring3", 2));
  add(numgate::layernorm::make_tune_fwd_target("tune_fwd_ring4", 3));
  add(numgate::layernorm::make_tune_fwd_target("tune_fwd_ring6", 4));
}
