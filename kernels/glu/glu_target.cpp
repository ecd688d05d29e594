// SwiGLU / GeGLU targets: dispatch a fixture case to the CUDA launchers by dtype.
#include <stdexcept>

#include "glu/glu.cuh"
#include "target.h"

namespace numgate::glu {
namespace {

std::int64_t numel_of(const CaseSpec& c) {
  std::int64_t n = 1;
  for (auto s : c.shape) n *= s;
  return n;
}
std::int64_t rows_of(const CaseSpec& c) {
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < c.shape.size(); ++i) rows *= c.shape[i];
  return rows;
}

bool tanh_of(const CaseSpec& c) { return c.param("approximate_tanh") != 0.0; }

TargetOp make(const std::string& op, bool geglu) {
  TargetOp t;
  t.op = op;
  t.rows = rows_of;
  auto none = [](const CaseSpec&) -> std::size_t { return 0; };
  t.passes.push_back({"Forward", {"y"}, none,
                      [geglu](const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
                        return dispatch(c.dtype, [&](auto tag) {
                          using T = decltype(tag);
                          const auto* a = static_cast<const T*>(p.at("a"));
                          const auto* b = static_cast<const T*>(p.at("b"));
                          auto* y = static_cast<T*>(p.at("y"));
                          return geglu ? geglu_forward<T>(a, b, y, numel_of(c), tanh_of(c), s)
                                       : swiglu_forward<T>(a, b, y, numel_of(c), s);
                        });
                      },
                      {"a", "b"}});
  t.passes.push_back({"Backward", {"da", "db"}, none,
                      [geglu](const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
                        return dispatch(c.dtype, [&](auto tag) {
                          using T = decltype(tag);
                          const auto* a = static_cast<const T*>(p.at("a"));
                          const auto* b = static_cast<const T*>(p.at("b"));
                          const auto* dy = static_cast<const T*>(p.at("dy"));
                          auto* da = static_cast<T*>(p.at("da"));
                          auto* db = static_cast<T*>(p.at("db"));
                          return geglu ? geglu_backward<T>(a, b, dy, da, db, numel_of(c), tanh_of(c), s)
                                       : swiglu_backward<T>(a, b, dy, da, db, numel_of(c), s);
                        });
                      },
                      {"a", "b", "dy"}});
  return t;
}

}  // namespace

TargetOp make_swiglu_target() { return make("swiglu", false); }
TargetOp make_geglu_target() { return make("geglu", true); }

}  // namespace numgate::glu
