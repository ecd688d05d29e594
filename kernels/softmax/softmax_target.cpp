// Softmax target: launches a case's passes (descriptor: softmax_oracle.cpp) by dtype.
//
// Rows. Row r of a case is query r mod q_len (q_len = shape[-2], 1 for rank 1), which the
// causal and additive masks depend on; the mask [q_len, k_len] is uploaded whole
// (Layout::whole) and indexed by query. A launch of the row window [first, first + count)
// gets x, y (and y_fwd, dy, dx) of those rows only and passes `first` to the launchers as
// the global index of its first row.
#include <algorithm>

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

/// Minimal DRAM traffic (the benchmark's bandwidth). Forward: x where the launchers read
/// it (mask_mode 1: each row's visible keys only), the mask [q_len, k_len] once (mode 2),
/// y. Backward: y likewise (mode 1: visible keys only), dy, dx.
double visible_fraction(const CaseSpec& c) {
  if (static_cast<int>(c.param("mask_mode")) != 1) return 1.0;
  const std::int64_t q_len = q_len_of(c), k_len = c.shape.back();
  double visible = 0;
  for (std::int64_t i = 0; i < q_len; ++i)
    visible += static_cast<double>(std::clamp<std::int64_t>(i + k_len - q_len + 1, 0, k_len));
  return visible / (static_cast<double>(q_len) * static_cast<double>(k_len));
}
double tensor_bytes(const CaseSpec& c) { return static_cast<double>(numel(c.shape) * dtype_size(c.dtype)); }
double forward_traffic(const CaseSpec& c) {
  const double mask = static_cast<int>(c.param("mask_mode")) == 2
                          ? static_cast<double>(q_len_of(c) * c.shape.back() * dtype_size(c.dtype))
                          : 0.0;
  return tensor_bytes(c) * (visible_fraction(c) + 1.0) + mask;
}
double backward_traffic(const CaseSpec& c) { return tensor_bytes(c) * (visible_fraction(c) + 2.0); }

}  // namespace

TargetOp make_target() {
  return {"softmax",
          {{"Forward", {}, launch_forward, true, forward_traffic},
           {"Backward", {}, launch_backward, true, backward_traffic}},
          {}};
}

}  // namespace numgate::softmax

NUMGATE_REGISTER_TARGETS(softmax) { add(numgate::softmax::make_target()); }
