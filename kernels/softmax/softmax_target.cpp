// Softmax target: dispatches a fixture case to the CUDA launchers by dtype.
//
// Row positions. Row r of a case is query r mod q_len (q_len = shape[-2]), which the
// causal and additive masks depend on. A case may carry two optional params that the
// fixture cases never declare: "row_offset" (global index of the first launched row) and
// "q_len" (overrides shape[-2]); make_target().row_case sets them so that the replay's
// RowsIndependent check, which launches row r alone as a [1, k_len] case, gives that row
// its own query position.
#include <stdexcept>

#include "softmax/softmax.cuh"
#include "target.h"

namespace numgate::softmax {
namespace {

double optional_param(const CaseSpec& c, const std::string& key, double fallback) {
  for (const auto& [k, v] : c.params)
    if (k == key) return v;
  return fallback;
}

struct Shape {
  std::int64_t rows, q_len, k_len;
};
Shape shape_of(const CaseSpec& c) {
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < c.shape.size(); ++i) rows *= c.shape[i];
  const std::int64_t q = c.shape.size() >= 2 ? c.shape[c.shape.size() - 2] : 1;
  return {rows, static_cast<std::int64_t>(optional_param(c, "q_len", static_cast<double>(q))), c.shape.back()};
}

cudaError_t launch_forward(const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
  const Shape sh = shape_of(c);
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(static_cast<const T*>(p.at("x")), static_cast<const T*>(p.at("mask")),
                      static_cast<T*>(p.at("y")), sh.rows, sh.q_len, sh.k_len, c.param("scale"),
                      static_cast<int>(c.param("mask_mode")),
                      static_cast<std::int64_t>(optional_param(c, "row_offset", 0)), s);
  });
}

cudaError_t launch_backward(const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
  const Shape sh = shape_of(c);
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(static_cast<const T*>(p.at("y_fwd")), static_cast<const T*>(p.at("dy")),
                       static_cast<T*>(p.at("dx")), sh.rows, sh.k_len, c.param("scale"), s);
  });
}

}  // namespace

TargetOp make_target() {
  TargetOp t;
  t.op = "softmax";
  t.rows = [](const CaseSpec& c) { return shape_of(c).rows; };
  t.row_case = [](const CaseSpec& c, std::int64_t r) {
    CaseSpec one = c;
    one.shape = {1, c.shape.back()};
    // Rank 2 [q_len, k_len] with an additive mask: the mask has the case shape, so the
    // row-by-row replay uploads mask row r alone; launch it as query 0 of a 1-query case.
    // Otherwise the mask is uploaded whole: keep row r's query position.
    const bool mask_row_only = c.shape.size() == 2 && c.param("mask_mode") == 2;
    one.params.push_back({"q_len", mask_row_only ? 1.0 : static_cast<double>(shape_of(c).q_len)});
    one.params.push_back({"row_offset", mask_row_only ? 0.0 : static_cast<double>(r)});
    return one;
  };
  t.passes.push_back({"Forward", {"y"}, [](const CaseSpec&) -> std::size_t { return 0; }, launch_forward, {"x", "mask"}});
  t.passes.push_back({"Backward", {"dx"}, [](const CaseSpec&) -> std::size_t { return 0; }, launch_backward,
                      {"y_fwd", "dy"}});
  return t;
}

}  // namespace numgate::softmax
