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

/// Tuning candidates of the launch shape (glu.cuh glu_*_tuned): delete with the variants.
TargetOp make_tuned(const std::string& op, bool geglu, const std::string& variant, int units, int blocks_per_sm,
                    bool ex2, bool cs) {
  auto act = [geglu](const Launch& l) { return geglu ? (tanh_of(l.spec) ? 2 : 1) : 0; };
  auto forward = [=](const Launch& l) {
    return dispatch(l.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      return glu_forward_tuned<T>(act(l), l.ptr<const T>("a"), l.ptr<const T>("b"), l.ptr<T>("y"),
                                  launched_elements(l), units, blocks_per_sm, ex2, cs, l.stream);
    });
  };
  auto backward = [=](const Launch& l) {
    return dispatch(l.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      return glu_backward_tuned<T>(act(l), l.ptr<const T>("a"), l.ptr<const T>("b"), l.ptr<const T>("dy"),
                                   l.ptr<T>("da"), l.ptr<T>("db"), launched_elements(l), units, blocks_per_sm,
                                   ex2, cs, l.stream);
    });
  };
  TargetOp t{op, {{"Forward", {}, forward}, {"Backward", {}, backward}}, {}};
  t.variant = variant;
  return t;
}

}  // namespace

TargetOp make_swiglu_target() { return make("swiglu", false); }
TargetOp make_geglu_target() { return make("geglu", true); }

}  // namespace numgate::glu

NUMGATE_REGISTER_TARGETS(glu) {
  add(numgate::glu::make_swiglu_target());
  add(numgate::glu::make_geglu_target());
  for (const bool geglu : {false, true}) {
    const std::string op = geglu ? "geglu" : "swiglu";
    add(numgate::glu::make_tuned(op, geglu, "tune_nocs", 1, 0, true, false));
    add(numgate::glu::make_tuned(op, geglu, "tune_expf", 1, 0, false, true));
    add(numgate::glu::make_tuned(op, geglu, "tune_u2cs", 2, 0, true, true));
  }
}
