// The exhaustive check of the GLU kernels' fast FP32 activation path (kernels/glu/glu_fast.h)
// against long-double mathematics, for every one of the 65536 bit patterns of a 16-bit input
// type. Host code; tests/gpu/test_glu_fast_math.cpp feeds it the device's values.
//
// Per input a (widened exactly to float) it checks, with u = 2^-24, gamma = 10u / (1 - 10u)
// (the replay's rounding bound for GLU, fixtures/src/gate.cpp, envelope_length 1) and
// S the FP32-subnormal allowance (subnormal_allowance: e = exp(-|x|) rounded once in the
// subnormal range, scaled on its way to act or act'):
//   (A) |act32  - act | <= ((gamma - u) |act| + gamma |a act'|) / (1 + u) + S
//   (D) |act32' - act'| <= ((gamma - 2u - u^2) |act'| + gamma |a act''|) / (1 + u)^2 + S
// Why these suffice (glu_fast.h): y = fl(act32 b), db = fl(dy act32) and da =
// fl(fl(dy b) act32') then stay within the gate's E = gamma abs_terms + 10 2^-150 of the golden
// before their final rounding, so every decidable element rounds correctly and every element
// is within 1 ULP. It also reports the plain relative error |act32 - act| / |act| (where
// |act| >= 2^-126), which must stay below 2^-13 (kRelLimit).
// Structure: NaN exactly where act is NaN, +-Inf exactly where act is +-Inf; the act of the
// forward-only function equal bit for bit to the act of the joint act/act' function.
// Each input's failures are counted per check (Check), so a mutant can be shown caught by
// the check it was built to violate, and by no other where it touches one value only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace numgate::testing::glu_fast {

enum class Fn { silu, gelu_erf, gelu_tanh };
inline const char* fn_name(Fn f) { return f == Fn::silu ? "silu" : f == Fn::gelu_erf ? "gelu_erf" : "gelu_tanh"; }

/// The 65536 inputs of a 16-bit type, widened to float (bf16: the top half of a float;
/// fp16: decoded, subnormals included).
inline std::vector<float> all_inputs(bool fp16) {
  std::vector<float> v(65536);
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    float f;
    if (!fp16) {
      const std::uint32_t w = bits << 16;
      std::memcpy(&f, &w, 4);
    } else {
      const int sign = (bits >> 15) & 1, ex = (bits >> 10) & 31, man = bits & 1023;
      double m;
      if (ex == 31) m = man ? NAN : INFINITY;
      else if (ex == 0) m = std::ldexp(static_cast<double>(man), -24);
      else m = std::ldexp(static_cast<double>(1024 + man), ex - 25);
      f = static_cast<float>(sign ? -m : m);
    }
    v[bits] = f;
  }
  return v;
}

/// The plain relative-error limit (where |value| >= 2^-126): 2^-13, under half an fp16 ULP
/// (2^-11 relative at least) after the output's own FP32 products: within 1 ULP for any b, dy.
constexpr double kRelLimit = 1.0 / 8192;

struct Exact {
  long double act, dact, ddact;  ///< act, act', act'' (finite a)
};

/// act, act', act'' in long double (sigmoid from exp(-|v|): no overflow, no cancellation).
inline Exact exact(Fn f, long double x) {
  const long double pi = 3.141592653589793238462643383279502884L;
  auto sig = [](long double v, long double& s, long double& t) {
    const long double e = expl(-fabsl(v));
    s = v >= 0 ? 1 / (1 + e) : e / (1 + e);
    t = v >= 0 ? e / (1 + e) : 1 / (1 + e);
  };
  long double s, t;
  switch (f) {
    case Fn::silu:
      sig(x, s, t);
      return {x * s, s * (1 + x * t), s * t * (2 + x * (t - s))};
    case Fn::gelu_erf: {
      const long double Phi = 0.5L * erfcl(-x / sqrtl(2.0L)), phi = expl(-0.5L * x * x) / sqrtl(2 * pi);
      return {x * Phi, Phi + x * phi, phi * (2 - x * x)};
    }
    case Fn::gelu_tanh: {
      const long double k = sqrtl(2 / pi), c = 0.044715L;
      const long double v = 2 * k * (x + c * x * x * x), dv = 2 * k * (1 + 3 * c * x * x), ddv = 12 * k * c * x;
      sig(v, s, t);
      const long double s1 = s * t, s2 = s1 * (t - s);
      return {x * s, s * (1 + x * dv * t), 2 * s1 * dv + x * (s2 * dv * dv + s1 * ddv)};
    }
  }
  return {NAN, NAN, NAN};
}

/// S: where e = exp(-|v|) is an FP32 subnormal (or below the smallest one), its absolute
/// error of one subnormal quantum 2^-149 reaches act and act' multiplied by at most the
/// factor that multiplies e there: 2 + |a| for SiLU (x e r; e r r (1 + x + e)) and the erf
/// GELU (x w m, w (m - z/sqrt(2 pi)) with m <= 0.4), 2 + |a| (1 + |v'(a)|) for the tanh GELU
/// (e r (1 + x v' r), v' = 2 sqrt(2/pi) (1 + 3 0.044715 a^2)). The accurate path
/// (glu_math.h, the reference) rounds the same e; the test reports its ratios too.
inline double subnormal_allowance(Fn f, double a) {
  const double ax = std::fabs(a);
  const double factor = f == Fn::gelu_tanh ? 2.0 + ax * (1.0 + 1.6 * (1.0 + 0.134145 * ax * ax)) : 2.0 + ax;
  return factor * std::ldexp(1.0, -149);
}

/// The checks, counted apart: bound (A) on act, bound (D) on act', the plain 2^-13 limit
/// (on act or act'), and structure (NaN / Inf, non-finite results, forward act != joint act).
enum class Check { bound_act, bound_dact, rel_limit, structure };
inline constexpr int kChecks = 4;
inline const char* check_name(Check c) {
  return c == Check::bound_act ? "(A)" : c == Check::bound_dact ? "(D)" : c == Check::rel_limit ? "2^-13" : "structure";
}

struct Result {
  std::int64_t checked = 0, failures = 0;
  std::int64_t failed[kChecks] = {};  ///< inputs failing each Check (an input counts once per check)
  std::int64_t failed_by(Check c) const { return failed[static_cast<int>(c)]; }
  double worst_ratio_act = 0, worst_ratio_dact = 0;  ///< max error / bound
  double worst_a_act = 0, worst_a_dact = 0;          ///< the inputs where they occur
  double max_rel_act = 0, max_rel_dact = 0;          ///< max relative error (|value| >= 2^-126)
  std::string first_failure;
  std::string summary(const char* dtype, Fn f) const {
    std::ostringstream os;
    os.precision(3);
    os << fn_name(f) << " " << dtype << ": " << checked << " inputs, max rel err act " << max_rel_act << " (2^"
       << (max_rel_act > 0 ? std::log2(max_rel_act) : -999) << "), act' " << max_rel_dact << " (2^"
       << (max_rel_dact > 0 ? std::log2(max_rel_dact) : -999) << "); worst error/bound act " << worst_ratio_act
       << " at a=" << worst_a_act << ", act' " << worst_ratio_dact << " at a=" << worst_a_dact << "; " << failures
       << " failure(s); inputs failing";
    for (int k = 0; k < kChecks; ++k) os << " " << check_name(static_cast<Check>(k)) << " " << failed[k];
    return os.str();
  }
};

/// Checks the device's values act_fwd (forward-only act), act and dact (joint) for inputs a.
inline Result check(Fn f, const std::vector<float>& a, const std::vector<float>& act_fwd,
                    const std::vector<float>& act, const std::vector<float>& dact) {
  const double u = std::ldexp(1.0, -24), gamma = 10 * u / (1 - 10 * u);
  Result r;
  bool fired[kChecks] = {};  // this input's checks that failed
  auto fail = [&](std::size_t i, Check c, const std::string& what) {
    fired[static_cast<int>(c)] = true;
    if (r.failures++ == 0) {
      std::ostringstream os;
      os.precision(9);
      os << fn_name(f) << "(a = " << a[i] << "): " << what;
      r.first_failure = os.str();
    }
  };
  auto same_bits = [](float x, float y) { return std::memcmp(&x, &y, 4) == 0; };
  // One input: its failures go to fail(), which marks the checks that fired.
  auto check_input = [&](std::size_t i) {
    const float x = a[i];
    if (!same_bits(act_fwd[i], act[i]) && !(std::isnan(act_fwd[i]) && std::isnan(act[i])))
      fail(i, Check::structure,
           "forward act " + std::to_string(act_fwd[i]) + " differs from the backward's " + std::to_string(act[i]));
    if (std::isnan(x)) {
      if (!std::isnan(act[i]) || !std::isnan(dact[i])) fail(i, Check::structure, "NaN input must give NaN");
      return;
    }
    if (std::isinf(x)) {
      const bool ok = x > 0 ? (act[i] == INFINITY && dact[i] == 1.0f) : (act[i] == 0.0f && dact[i] == 0.0f);
      if (!ok) fail(i, Check::structure, "wrong limit " + std::to_string(act[i]) + ", " + std::to_string(dact[i]));
      return;
    }
    const Exact e = exact(f, x);
    const double S = subnormal_allowance(f, x);
    const double ax = std::fabs(static_cast<double>(x));
    const double bound_a = ((gamma - u) * std::fabs(double(e.act)) + gamma * ax * std::fabs(double(e.dact))) / (1 + u) + S;
    const double bound_d = ((gamma - 2 * u - u * u) * std::fabs(double(e.dact)) + gamma * ax * std::fabs(double(e.ddact))) /
                               ((1 + u) * (1 + u)) + S;
    if (!std::isfinite(act[i]) || !std::isfinite(dact[i])) {
      fail(i, Check::structure, "non-finite result for a finite input");
      return;
    }
    const double err_a = std::fabs(static_cast<double>(static_cast<long double>(act[i]) - e.act));
    const double err_d = std::fabs(static_cast<double>(static_cast<long double>(dact[i]) - e.dact));
    const double ra = err_a / bound_a, rd = err_d / bound_d;
    if (ra > r.worst_ratio_act) { r.worst_ratio_act = ra; r.worst_a_act = x; }
    if (rd > r.worst_ratio_dact) { r.worst_ratio_dact = rd; r.worst_a_dact = x; }
    const double tiny = std::ldexp(1.0, -126);
    if (std::fabs(double(e.act)) >= tiny) r.max_rel_act = std::max(r.max_rel_act, err_a / std::fabs(double(e.act)));
    if (std::fabs(double(e.dact)) >= tiny) r.max_rel_dact = std::max(r.max_rel_dact, err_d / std::fabs(double(e.dact)));
    if (ra > 1) fail(i, Check::bound_act, "act " + std::to_string(act[i]) + " error/bound " + std::to_string(ra));
    if (std::fabs(double(e.act)) >= tiny && err_a > kRelLimit * std::fabs(double(e.act)))
      fail(i, Check::rel_limit, "act " + std::to_string(act[i]) + " relative error above 2^-13");
    if (std::fabs(double(e.dact)) >= tiny && err_d > kRelLimit * std::fabs(double(e.dact)))
      fail(i, Check::rel_limit, "act' " + std::to_string(dact[i]) + " relative error above 2^-13");
    if (rd > 1) fail(i, Check::bound_dact, "act' " + std::to_string(dact[i]) + " error/bound " + std::to_string(rd));
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    ++r.checked;
    std::fill(fired, fired + kChecks, false);
    check_input(i);
    for (int k = 0; k < kChecks; ++k) r.failed[k] += fired[k];
  }
  return r;
}

}  // namespace numgate::testing::glu_fast
