// Fused residual-add + RMSNorm target: dispatches a fixture case to the CUDA launchers by dtype.
#include <stdexcept>

#include "fused_add_rmsnorm/fused_add_rmsnorm.cuh"
#include "target.h"

namespace numgate::fused_add_rmsnorm {
namespace {

struct Shape {
  std::int64_t rows, hidden;
};
Shape shape_of(const CaseSpec& c) {
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < c.shape.size(); ++i) rows *= c.shape[i];
  return {rows, c.shape.back()};
}

cudaError_t launch_forward(const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
  const Shape sh = shape_of(c);
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(static_cast<const T*>(p.at("x")), static_cast<const T*>(p.at("residual")),
                      static_cast<const T*>(p.at("w")), static_cast<T*>(p.at("residual_out")),
                      static_cast<T*>(p.at("y")), sh.rows, sh.hidden, c.param("eps"), s);
  });
}

cudaError_t launch_backward(const CaseSpec& c, const DevicePtrs& p, void* ws, std::size_t ws_bytes, cudaStream_t s) {
  const Shape sh = shape_of(c);
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(static_cast<const T*>(p.at("x")), static_cast<const T*>(p.at("residual")),
                       static_cast<const T*>(p.at("w")), static_cast<const T*>(p.at("dy")),
                       static_cast<const T*>(p.at("d_residual_out")), static_cast<T*>(p.at("dx")),
                       static_cast<T*>(p.at("dw")), sh.rows, sh.hidden, c.param("eps"), ws, ws_bytes, s);
  });
}

}  // namespace

TargetOp make_target() {
  TargetOp t;
  t.op = "fused_add_rmsnorm";
  t.rows = [](const CaseSpec& c) { return shape_of(c).rows; };
  t.passes.push_back(
      {"Forward", {"residual_out", "y"}, [](const CaseSpec&) -> std::size_t { return 0; }, launch_forward,
       {"x", "residual", "w"}});
  t.passes.push_back({"Backward", {"dx", "dw"},
                      [](const CaseSpec& c) {
                        const Shape sh = shape_of(c);
                        return backward_workspace_bytes(sh.rows, sh.hidden);
                      },
                      launch_backward, {"x", "residual", "w", "dy", "d_residual_out"}});
  return t;
}

}  // namespace numgate::fused_add_rmsnorm
