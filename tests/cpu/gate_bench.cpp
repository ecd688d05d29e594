// Gate benchmark (not a test): times evaluate_gate on one large synthetic tensor per dtype,
// and the pre-rewrite implementation (gate_legacy.cpp) with --legacy.
//
//   build/tests/numgate_gate_bench [--n 33554432] [--reps 3] [--legacy] [dtype ...]
//
// The tensor looks like a production output: golden FP64 with sum|terms| of ~1.5 |golden|
// (k = 4096), reference the rounded golden, target the same with 10% of the elements one
// ulp off; it is gated twice, without and with a ULP rule (limit 2).
#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gate_legacy.h"
#include "numgate/gate.h"

namespace {

using namespace numgate;

struct Mix {
  std::uint64_t s;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// One representable step of `t` away from the representable value v (towards +inf).
double next_up(double v, DType t) {
  const double step = std::fabs(v) * 2.0 * dtype_unit_roundoff(t);
  return round_to_dtype(v + (step > 0 ? step : 1e-30), t);
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t{1} << 25;
  int reps = 3;
  bool legacy = false;
  std::vector<DType> dtypes;
  for (int a = 1; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "--n" && a + 1 < argc) n = std::strtoull(argv[++a], nullptr, 10);
    else if (s == "--reps" && a + 1 < argc) reps = std::atoi(argv[++a]);
    else if (s == "--legacy") legacy = true;
    else dtypes.push_back(parse_dtype(s));
  }
  if (dtypes.empty()) dtypes = {DType::bf16, DType::fp32};
  for (DType t : dtypes) {
    CaseSpec spec;
    spec.name = "bench";
    spec.dtype = t;
    spec.shape = {static_cast<std::int64_t>(n)};
    GoldenTensor g{Tensor(DType::fp64, spec.shape), Tensor(DType::fp64, spec.shape), 4096};
    Tensor ref(t, spec.shape), tgt(t, spec.shape);
    Mix rng{42};
    for (std::size_t i = 0; i < n; ++i) {
      const double v = (rng.uniform() - 0.5) * 8.0;
      g.value.set(i, v);
      g.abs_terms.set(i, std::fabs(v) * 1.5 + 0.01);
      const double r = round_to_dtype(v, t);
      ref.set(i, r);
      tgt.set(i, rng.uniform() < 0.1 ? next_up(r, t) : r);
    }
    for (int ulp : {-1, 2}) {
      spec.gate.ulp_limit = ulp;
      double best = 1e300, best_legacy = 1e300;
      GateResult r, l;
      for (int k = 0; k < reps; ++k) {
        best = std::min(best, seconds_of([&] { r = evaluate_gate("y", spec, g, ref, &tgt); }));
        if (legacy) best_legacy = std::min(best_legacy, seconds_of([&] { l = legacy::legacy_evaluate_gate("y", spec, g, ref, &tgt); }));
      }
      std::printf("%s n=%zu ulp_limit=%d: evaluate_gate %.3f s (best of %d)", std::string(dtype_name(t)).c_str(), n, ulp,
                  best, reps);
      if (legacy)
        std::printf(", legacy %.3f s, speed-up %.2fx, same describe(): %s", best_legacy, best_legacy / best,
                    describe(r, spec) == describe(l, spec) ? "yes" : "NO");
      std::printf("  [%s, target_error %.9g]\n", std::string(verdict_name(r.verdict)).c_str(), r.target_error);
    }
  }
  return 0;
}
