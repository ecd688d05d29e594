// Softmax target: launches a case's passes (descriptor: softmax_oracle.cpp) by dtype.
//
// Rows. Row r of a case is query r mod q_len (q_len = shape[-2], 1 for rank 1), which the
// causal and additive masks depend on; the mask [q_len, k_len] is uploaded whole
// (Layout::whole) and indexed by query. A launch of the row window [first, first + count)
// gets x, y (and y_fwd, dy, dx) of those rows only and passes `first` to the launchers as
// the global index of its first row.
#include "softmax/softmax.cuh"
#include "target.h"

namespace numgate::softmax {
namespace {

std::int64_t q_len_of(const CaseSpec& c) { return c.shape.size() >= 2 ? c.shape[c.shape.size() - 2] : 1; }

cudaError_t launch_forward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("x"), l.ptr<const T>("mask"), l.ptr<T>("y"), sh.rows, q_len_of(l.spec), sh.hidden,
                      l.spec.param("scale"), static_cast<int>(l.spec.param("mask_mode")), l.window.first, l.stream);
  });
}

cudaError_t launch_backward(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(l.ptr<const T>("y_fwd"), l.ptr<const T>("dy"), l.ptr<T>("dx"), sh.rows, q_len_of(l.spec),
                       sh.hidden, l.spec.param("scale"), static_cast<int>(l.spec.param("mask_mode")), l.window.first,
                       l.stream);
  });
}

}  // namespace

TargetOp make_target() { return {"softmax", {{"Forward", {}, launch_forward}, {"Backward", {}, launch_backward}}, {}}; }

}  // namespace numgate::softmax

NUMGATE_REGISTER_TARGETS(softmax) { add(numgate::softmax::make_target()); }
