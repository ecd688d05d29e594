// dropout_add target: launches a case's passes (descriptor: dropout_add_oracle.cpp) by dtype.
// Elementwise over the flattened tensor; a row window is rows x hidden elements starting at
// stream index first_row * hidden (the launchers' element_offset).
#include "dropout_add/dropout_add.cuh"
#include "dropout_add/dropout_add_oracle.h"
#include "target.h"

namespace numgate::dropout_add {
namespace {

struct Window {
  std::int64_t n, element_offset;
};
Window window_of(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return {sh.rows * sh.hidden, l.window.first * sh.hidden};
}

cudaError_t launch_forward(const Launch& l) {
  Params P;
  if (!read_params(l.spec, P)) return cudaErrorInvalidValue;  // the generator refuses such a case by name
  const Window w = window_of(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("x"), l.ptr<const T>("residual"), l.ptr<T>("y"), l.ptr<T>("mask"), w.n, P.p,
                      P.seed, P.offset, w.element_offset, l.stream);
  });
}

cudaError_t launch_backward(const Launch& l) {
  Params P;
  if (!read_params(l.spec, P)) return cudaErrorInvalidValue;
  const Window w = window_of(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(l.ptr<const T>("dy"), l.ptr<T>("dx"), l.ptr<T>("dresidual"), w.n, P.p, P.seed, P.offset,
                       w.element_offset, l.stream);
  });
}

}  // namespace

TargetOp make_target() { return {"dropout_add", {{"Forward", {}, launch_forward}, {"Backward", {}, launch_backward}}, {}}; }

}  // namespace numgate::dropout_add

NUMGATE_REGISTER_TARGETS(dropout_add) { add(numgate::dropout_add::make_target()); }
