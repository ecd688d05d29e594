// SwiGLU / GeGLU targets: launch a case's passes (descriptors: glu_oracle.cpp) by dtype.
// The kernels are elementwise over the flattened tensor; a row window is rows x n elements.
#include "glu/glu.cuh"
#include "target.h"

namespace numgate::glu {
namespace {

// Elements of the launched rows (rows x hidden of the window; numel of the case shape for
// a whole-case launch).
std::int64_t launched_elements(const Launch& l) {
  const RowShape sh = launched_rows(l);
  return sh.rows * sh.hidden;
}
bool tanh_of(const CaseSpec& c) { return c.param("approximate_tanh") != 0.0; }

TargetOp make(const std::string& op, bool geglu) {
  auto forward = [geglu](const Launch& l) {
    return dispatch(l.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      const std::int64_t n = launched_elements(l);
      return geglu ? geglu_forward<T>(l.ptr<const T>("a"), l.ptr<const T>("b"), l.ptr<T>("y"), n, tanh_of(l.spec),
                                      l.stream)
                   : swiglu_forward<T>(l.ptr<const T>("a"), l.ptr<const T>("b"), l.ptr<T>("y"), n, l.stream);
    });
  };
  auto backward = [geglu](const Launch& l) {
    return dispatch(l.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *a = l.ptr<const T>("a"), *b = l.ptr<const T>("b"), *dy = l.ptr<const T>("dy");
      const std::int64_t n = launched_elements(l);
      return geglu ? geglu_backward<T>(a, b, dy, l.ptr<T>("da"), l.ptr<T>("db"), n, tanh_of(l.spec), l.stream)
                   : swiglu_backward<T>(a, b, dy, l.ptr<T>("da"), l.ptr<T>("db"), n, l.stream);
    });
  };
  return {op, {{"Forward", {}, forward}, {"Backward", {}, backward}}, {}};
}

}  // namespace

TargetOp make_swiglu_target() { return make("swiglu", false); }
TargetOp make_geglu_target() { return make("geglu", true); }

}  // namespace numgate::glu

NUMGATE_REGISTER_TARGETS(glu) {
  add(numgate::glu::make_swiglu_target());
  add(numgate::glu::make_geglu_target());
}
