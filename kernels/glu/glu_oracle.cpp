// SwiGLU / GeGLU golden (FP64) and reference (kernel dtype policy) oracles, input patterns
// and mutants. Compiled with -ffp-contract=off: results do not depend on compiler flags.
#include "glu/glu_oracle.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "glu/glu_math.h"
#include "numgate/random.h"

namespace numgate::glu {
namespace {

// Stream ids of the inputs (a case's tensors must draw from different streams).
enum : std::uint32_t { kStreamA = 1, kStreamB = 2, kStreamDy = 3, kStreamPattern = 4 };

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Act { silu, gelu_erf, gelu_tanh };

Act act_of(const std::string& op, const CaseSpec& c) {
  if (op == "swiglu") return Act::silu;
  if (op == "geglu") return c.param("approximate_tanh") != 0.0 ? Act::gelu_tanh : Act::gelu_erf;
  throw std::invalid_argument("glu: unknown op '" + op + "'");
}

// ---------------------------------------------------------------------------------
// golden: FP64, written independently of glu_math.h (same mathematical decisions)
// ---------------------------------------------------------------------------------

/// sigmoid(x) and 1 - sigmoid(x) from e = exp(-|x|) (no overflow, no cancellation).
void g_sigmoid(double x, double& s, double& one_minus_s) {
  const double e = std::exp(-std::fabs(x));
  if (x >= 0) {
    s = 1.0 / (1.0 + e);
    one_minus_s = e / (1.0 + e);
  } else {
    s = e / (1.0 + e);
    one_minus_s = 1.0 / (1.0 + e);
  }
}

double g_act(Act f, double a) {
  if (std::isnan(a)) return kNaN;
  if (a == -kInf) return -0.0;  // lim a->-inf of a * sigmoid(a), a * Phi(a): -0
  if (a == kInf) return kInf;
  double s, t;
  switch (f) {
    case Act::silu:
      g_sigmoid(a, s, t);
      return a * s;
    case Act::gelu_erf:
      return 0.5 * a * std::erfc(-a / std::sqrt(2.0));  // 1 + erf(x) = erfc(-x)
    case Act::gelu_tanh: {
      const double u = std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a);
      g_sigmoid(2.0 * u, s, t);  // 0.5 (1 + tanh u) = sigmoid(2u)
      return a * s;
    }
  }
  return kNaN;
}

double g_poly(const math::PolyTable& p, double t) {
  double acc = 0;
  for (int k = math::kPolyTerms - 1; k >= 0; --k) acc = acc * t + p.c[k];
  return acc;
}

double g_dact(Act f, double a) {
  if (std::isnan(a)) return kNaN;
  if (a == kInf) return 1.0;  // limits of the derivatives
  if (a == -kInf) return 0.0;
  double s, t;
  switch (f) {
    case Act::silu: {
      g_sigmoid(a, s, t);
      if (a >= 0) return s * (1.0 + a * t);
      // 1 + a (1 - s) = (1 + a + e^a) / (1 + e^a), 1 + a + e^a = d + e0 expm1(d), d = a - r
      const math::Root<double> r = math::silu_root(0.0);
      const double d = (a - r.hi) - r.lo;
      return s * (d + math::kSiluE0 * std::expm1(d)) * t;
    }
    case Act::gelu_erf: {
      const math::Root<double> r = math::gelu_erf_root(0.0);
      const double d = (a - r.hi) - r.lo;
      if (std::fabs(d) < math::kRootWindow) return d * g_poly(math::kGeluErfPoly, 8.0 * d);
      return 0.5 * std::erfc(-a / std::sqrt(2.0)) + a * std::exp(-0.5 * a * a) / std::sqrt(2.0 * M_PI);
    }
    case Act::gelu_tanh: {
      const math::Root<double> r = math::gelu_tanh_root(0.0);
      const double d = (a - r.hi) - r.lo;
      if (std::fabs(d) < math::kRootWindow) return d * g_poly(math::kGeluTanhPoly, 8.0 * d);
      const double k = std::sqrt(2.0 / M_PI);
      const double u = k * (a + 0.044715 * a * a * a), du = k * (1.0 + 3.0 * 0.044715 * a * a);
      g_sigmoid(2.0 * u, s, t);
      return s * (1.0 + 2.0 * a * du * t);  // d/da [a sigmoid(2u)]
    }
  }
  return kNaN;
}

/// act''(a), FP64, for the rounding bound only (abs_terms of da): how fast act' changes.
/// silu'' = s (1 - s) (2 + a (1 - 2 s)); gelu'' = phi(a) (2 - a^2); tanh GELU, act = a S(v),
/// v = 2 k (a + c a^3): act'' = 2 S'(v) v' + a (S''(v) v'^2 + S'(v) v''), S' = S (1 - S),
/// S'' = S' (1 - 2 S). Finite a only.
double g_ddact(Act f, double a) {
  double s, t;
  switch (f) {
    case Act::silu:
      g_sigmoid(a, s, t);
      return s * t * (2.0 + a * (t - s));
    case Act::gelu_erf:
      return std::exp(-0.5 * a * a) / std::sqrt(2.0 * M_PI) * (2.0 - a * a);
    case Act::gelu_tanh: {
      const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
      const double v = 2.0 * k * (a + c * a * a * a), dv = 2.0 * k * (1.0 + 3.0 * c * a * a), ddv = 12.0 * k * c * a;
      g_sigmoid(v, s, t);
      const double s1 = s * t, s2 = s1 * (t - s);
      return 2.0 * s1 * dv + a * (s2 * dv * dv + s1 * ddv);
    }
  }
  return kNaN;
}

// ---------------------------------------------------------------------------------
// reference: the kernels' scalar code (glu_math.h) in the compute type C
// ---------------------------------------------------------------------------------

template <typename C>
C r_act(Act f, C a, bool wrong_variant) {
  if (wrong_variant && f != Act::silu) f = f == Act::gelu_erf ? Act::gelu_tanh : Act::gelu_erf;
  switch (f) {
    case Act::silu: return math::silu(a);
    case Act::gelu_erf: return math::gelu_erf(a);
    case Act::gelu_tanh: return math::gelu_tanh(a);
  }
  return C(kNaN);
}
template <typename C>
C r_dact(Act f, C a, bool wrong_variant) {
  if (wrong_variant && f != Act::silu) f = f == Act::gelu_erf ? Act::gelu_tanh : Act::gelu_erf;
  switch (f) {
    case Act::silu: return math::dsilu(a);
    case Act::gelu_erf: return math::dgelu_erf(a);
    case Act::gelu_tanh: return math::dgelu_tanh(a);
  }
  return C(kNaN);
}

double bf16r(double v) { return round_to_dtype(v, DType::bf16); }

template <typename C>
void reference_loop(Act f, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& y, Tensor& da, Tensor& db,
                    Mutant m) {
  const bool wrong = m == Mutant::wrong_gelu_variant;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    const C av = static_cast<C>(a.get(i)), bv = static_cast<C>(b.get(i)), dyv = static_cast<C>(dy.get(i));
    C act, dact;
    if (f == Act::silu && m == Mutant::sigmoid_in_bf16) {
      // sigmoid (and 1 - sigmoid) held in bf16; everything else exactly as declared
      // (same clamps, same cancellation-free derivative).
      auto bf16_sigmoid = [](C x, C& s, C& t) {
        math::sigmoid_pair(x, s, t);
        s = static_cast<C>(bf16r(s));
        t = static_cast<C>(bf16r(t));
      };
      C s, t;
      const C xa = math::clamp_low(av);
      bf16_sigmoid(xa, s, t);
      act = xa * s;
      const C xd = math::clamp_both(av);
      bf16_sigmoid(xd, s, t);
      if (xd >= C(0)) {
        dact = s * (C(1) + xd * t);
      } else {
        const math::Root<C> r = math::silu_root(C(0));
        const C d = (xd - r.hi) - r.lo;
        dact = (s * (d + C(math::kSiluE0) * math::xexpm1(d))) * t;
      }
    } else if (f == Act::silu && m == Mutant::dsilu_missing_factor) {
      C s, t;
      math::sigmoid_pair(math::clamp_both(av), s, t);
      act = r_act<C>(f, av, false);
      dact = s;
    } else {
      act = r_act<C>(f, av, wrong);
      dact = r_dact<C>(f, av, wrong);
      if (m == Mutant::activation_in_bf16) act = static_cast<C>(bf16r(act));
    }
    y.set(i, static_cast<double>(act * bv));
    da.set(i, static_cast<double>((dyv * bv) * dact));
    db.set(i, static_cast<double>(dyv * act));
  }
}

// ---------------------------------------------------------------------------------
// input patterns
// ---------------------------------------------------------------------------------

/// v moved by k units in the last place of dtype t (v representable, same binade).
double step_ulp(double v, int k, DType t) {
  const int e = std::ilogb(v);
  return v + k * std::ldexp(1.0, e - (dtype_precision(t) - 1));
}

double root_of(Act f) {
  switch (f) {
    case Act::silu: return math::silu_root(0.0).hi;
    case Act::gelu_erf: return math::gelu_erf_root(0.0).hi;
    case Act::gelu_tanh: return math::gelu_tanh_root(0.0).hi;
  }
  return 0;
}

std::map<std::string, Tensor> draw(Act f, const CaseSpec& c, const std::string& op) {
  Tensor a(c.dtype, c.shape), b(c.dtype, c.shape), dy(c.dtype, c.shape);
  const RandomStream ra(c.seed, kStreamA), rb(c.seed, kStreamB), rdy(c.seed, kStreamDy), rp(c.seed, kStreamPattern);
  const std::size_t n = a.numel();
  for (std::size_t i = 0; i < n; ++i) {
    a.set(i, 2.0 * ra.normal(i));  // typical pre-activation spread, incl. both roots
    b.set(i, rb.normal(i));
    dy.set(i, rdy.normal(i));
  }
  // Adversarial values, by element: each helper sets element i (k: its index within the
  // pattern's own numbering).
  const double fp16_as[4] = {96, 100, 104, 108}, fp16_bs[6] = {580, 600, 620, 640, 660, 680}, fp16_ds[3] = {90, 100, 110};
  auto special = [&](std::size_t i, std::size_t k) {  // NaN / Inf in each input, exact zeros, 0 * inf
    switch (k % 16) {
      case 0: a.set(i, kNaN); break;
      case 1: a.set(i, kInf); break;
      case 2: a.set(i, -kInf); break;
      case 3: b.set(i, kNaN); break;
      case 4: b.set(i, kInf); break;
      case 5: b.set(i, -kInf); break;
      case 6: dy.set(i, kNaN); break;
      case 7: dy.set(i, -kInf); break;
      case 8: a.set(i, 0.0); break;
      case 9: b.set(i, 0.0); break;
      case 10: dy.set(i, 0.0); break;
      case 11: a.set(i, 0.0); b.set(i, kInf); break;     // y = 0 * inf = NaN
      case 12: a.set(i, -kInf); b.set(i, -kInf); break;  // y = -0 * -inf = NaN
      case 13: a.set(i, kInf); b.set(i, 0.0); break;     // y = inf * 0 = NaN
      case 14: a.set(i, -0.0); break;
      default: break;
    }
  };
  auto large = [&](std::size_t i) { a.set(i, 150.0 * (2.0 * rp.uniform(i) - 1.0)); };  // |a| up to 150
  // a ~ 100, |b| ~ 600, |dy| ~ 100: y and da near and beyond fp16 max (65504); no product
  // lies within 240 of the fp16 overflow threshold 65520.
  auto overflow = [&](std::size_t i, std::size_t k) {
    const double sb = rp.uniform(i, 1) < 0.5 ? -1.0 : 1.0, sd = rp.uniform(i, 2) < 0.5 ? -1.0 : 1.0;
    a.set(i, fp16_as[k % 4]);
    b.set(i, sb * fp16_bs[(k / 4) % 6]);
    dy.set(i, sd * fp16_ds[(k / 24) % 3]);
  };
  // a on the dtype grid next to the root of the derivative (where direct formulas cancel):
  // k in [0, 32): the declared function's root, offsets -16..15 ulp; k in [32, 48) (GeGLU):
  // the other variant's root, offsets -8..7 ulp.
  const Act other = f == Act::gelu_erf ? Act::gelu_tanh : Act::gelu_erf;
  auto near_root = [&](std::size_t i, std::size_t k) {
    if (k < 32) {
      a.set(i, step_ulp(round_to_dtype(root_of(f), c.dtype), static_cast<int>(k) - 16, c.dtype));
    } else if (k < 48 && op == "geglu") {
      a.set(i, step_ulp(round_to_dtype(root_of(other), c.dtype), static_cast<int>(k) - 40, c.dtype));
    }
  };
  auto gap = [&](std::size_t i) {  // |a| in [1, 3], either sign: where the two GELUs differ
    const double mag = 1.0 + 2.0 * rp.uniform(i);
    a.set(i, rp.uniform(i, 1) < 0.5 ? -mag : mag);
    b.set(i, 1.0 + 0.25 * rb.normal(i));
  };
  auto gap_neg = [&](std::size_t i) {  // a in [-3, -2.25]: up to ~10% apart, |y| small
    a.set(i, -(2.25 + 0.75 * rp.uniform(i)));
    b.set(i, 1.0 + 0.25 * rb.normal(i));
  };

  const std::string& p = c.pattern;
  for (std::size_t i = 0; i < n; ++i) {
    if (p == "normal") {
    } else if (p == "specials") {
      special(i, i);
    } else if (p == "large") {
      large(i);
    } else if (p == "fp16_overflow") {
      overflow(i, i);
    } else if (p == "near_root") {
      near_root(i, i);
    } else if (p == "variant_gap") {
      gap(i);
    } else if (p == "variant_gap_neg") {
      gap_neg(i);
    } else if (p == "db_overflow") {
      // fp16 (value coverage): a in [200, 240], dy = +-250, b ~ 0.01: db = dy act(a) ~ 50,000-60,000
      // (near fp16's 65504) while y and da stay small.
      a.set(i, 200.0 + 40.0 * rp.uniform(i));
      b.set(i, 0.01 * rb.normal(i));
      dy.set(i, rp.uniform(i, 1) < 0.5 ? -250.0 : 250.0);
    } else if (p == "mixed") {
      // Everything adversarial in one small committed tensor (the ULP rule checks every
      // element, so large values elsewhere hide nothing): [0,16) specials, [16,64) near
      // the roots, [64,80) |a| up to 150, [80,96) fp16 overflow, [96,112) |a| in [1,3],
      // [112,120) a in [-3,-2.25], the rest normal.
      if (i < 16) special(i, i);
      else if (i < 64) near_root(i, i - 16);
      else if (i < 80) large(i);
      else if (i < 96) overflow(i, (i - 80) * 5);  // spread over the (a, b, dy) grid
      else if (i < 112) gap(i);
      else if (i < 120) gap_neg(i);
    } else {
      throw std::invalid_argument(op + " case '" + c.name + "': unknown pattern '" + p +
                                  "' (known: normal, specials, large, fp16_overflow, near_root, variant_gap, "
                                  "variant_gap_neg, db_overflow, mixed)");
    }
  }
  return {{"a", a}, {"b", b}, {"dy", dy}};
}

std::map<std::string, GoldenTensor> golden_of(Act f, const CaseSpec& c, const std::map<std::string, Tensor>& in) {
  const Tensor &a = in.at("a"), &b = in.at("b"), &dy = in.at("dy");
  GoldenTensor y{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), 1};
  GoldenTensor da = y, db = y;
  // abs_terms (the rounding bound's scale, numgate/op.h): the product of the factors'
  // magnitudes, the activation's factor including how much it moves when its argument is
  // perturbed relatively: |act(a)| + |a act'(a)| for y and db, |act'(a)| + |a act''(a)| for
  // da (condition number 1 + |a act'/act|: an evaluation rounds a / sqrt 2, or the tanh
  // GELU's inner polynomial, before erfc / sigmoid, and in the tails that rounding is
  // amplified ~2 a^2 times). 0 only where a factor is exactly zero (a = 0 or -inf give
  // act = 0 by definition; a = -inf gives act' = 0); a value that merely underflowed to 0
  // gets at least the smallest positive double (no exact zero required).
  auto put = [](GoldenTensor& g, std::size_t i, double v, double terms, bool exact_zero) {
    g.value.set(i, v);
    const double t = std::isnan(terms) ? std::fabs(v) : std::max(std::fabs(terms), std::fabs(v));
    g.abs_terms.set(i, exact_zero ? std::fabs(v) : t != 0.0 ? t : std::numeric_limits<double>::denorm_min());
  };
  for (std::size_t i = 0; i < a.numel(); ++i) {
    const double av = a.get(i), bv = b.get(i), dv = dy.get(i);
    const double act = g_act(f, av), dact = g_dact(f, av);
    const bool act0 = av == 0.0 || av == -kInf, dact0 = av == -kInf;
    const bool finite = std::isfinite(av);
    const double act_scale = std::fabs(act) + (finite ? std::fabs(av * dact) : 0.0);
    const double dact_scale = std::fabs(dact) + (finite ? std::fabs(av * g_ddact(f, av)) : 0.0);
    put(y, i, act * bv, act_scale * std::fabs(bv), act0 || bv == 0.0);
    put(da, i, dv * bv * dact, std::fabs(dv) * std::fabs(bv) * dact_scale, dv == 0.0 || bv == 0.0 || dact0);
    put(db, i, dv * act, std::fabs(dv) * act_scale, dv == 0.0 || act0);
  }
  return {{"y", y}, {"da", da}, {"db", db}};
}

}  // namespace

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::sigmoid_in_bf16: return "sigmoid_in_bf16";
    case Mutant::dsilu_missing_factor: return "dsilu_missing_factor";
    case Mutant::wrong_gelu_variant: return "wrong_gelu_variant";
    case Mutant::activation_in_bf16: return "activation_in_bf16";
  }
  return "?";
}

std::map<std::string, Tensor> reference_variant(const std::string& op, const CaseSpec& c,
                                                const std::map<std::string, Tensor>& in, Mutant m) {
  const Act f = act_of(op, c);
  const Tensor &a = in.at("a"), &b = in.at("b"), &dy = in.at("dy");
  Tensor y(c.dtype, a.shape), da(c.dtype, a.shape), db(c.dtype, a.shape);
  if (c.dtype == DType::bf16 || c.dtype == DType::fp16) {
    reference_loop<float>(f, a, b, dy, y, da, db, m);
  } else {
    reference_loop<double>(f, a, b, dy, y, da, db, m);  // fp32 (and fp64): FP64 math
  }
  return {{"y", y}, {"da", da}, {"db", db}};
}

std::map<std::string, Tensor> reference_in_math(const std::string& op, const CaseSpec& c,
                                                const std::map<std::string, Tensor>& in, DType math) {
  if (math != DType::fp32 && math != DType::fp64)
    throw std::invalid_argument("glu::reference_in_math: math must be fp32 or fp64, not " +
                                std::string(dtype_name(math)));
  const Act f = act_of(op, c);
  const Tensor &a = in.at("a"), &b = in.at("b"), &dy = in.at("dy");
  Tensor y(c.dtype, a.shape), da(c.dtype, a.shape), db(c.dtype, a.shape);
  if (math == DType::fp32) reference_loop<float>(f, a, b, dy, y, da, db, Mutant::none);
  else reference_loop<double>(f, a, b, dy, y, da, db, Mutant::none);
  return {{"y", y}, {"da", da}, {"db", db}};
}

std::map<std::string, Tensor> SwiGLUOp::make_inputs(const CaseSpec& c) const {
  return draw(Act::silu, c, name());
}
namespace {
std::map<std::string, std::vector<bool>> elementwise_nonfinite(const std::map<std::string, Tensor>& in) {
  const Tensor &a = in.at("a"), &b = in.at("b"), &dy = in.at("dy");
  std::vector<bool> m(a.numel(), false);
  for (std::size_t i = 0; i < m.size(); ++i)
    m[i] = !std::isfinite(a.get(i)) || !std::isfinite(b.get(i)) || !std::isfinite(dy.get(i));
  return {{"a", m}, {"b", m}};
}
}  // namespace

std::map<std::string, std::vector<bool>> SwiGLUOp::nondifferentiable(const CaseSpec&,
                                                                     const std::map<std::string, Tensor>& in) const {
  return elementwise_nonfinite(in);
}
std::map<std::string, std::vector<bool>> GeGLUOp::nondifferentiable(const CaseSpec&,
                                                                    const std::map<std::string, Tensor>& in) const {
  return elementwise_nonfinite(in);
}

std::map<std::string, GoldenTensor> SwiGLUOp::golden(const CaseSpec& c, const std::map<std::string, Tensor>& in) const {
  return golden_of(Act::silu, c, in);
}
std::map<std::string, Tensor> GeGLUOp::make_inputs(const CaseSpec& c) const { return draw(act_of(name(), c), c, name()); }
std::map<std::string, GoldenTensor> GeGLUOp::golden(const CaseSpec& c, const std::map<std::string, Tensor>& in) const {
  return golden_of(act_of(name(), c), c, in);
}


// ---- the descriptors: SwiGLU and GeGLU declare the same tensors and passes ----------------
namespace {
OpDescriptor glu_descriptor(const char* name) {
  const DTypeRule T = DTypeRule::case_dtype;
  return {name,
          2,  // 2: abs_terms include the activation's condition (the rounding bound of GELU's tails)
          {
              {"a", Role::input, Layout::rows, T, case_shape(), "[..., n] gate input (activation argument)"},
              {"b", Role::input, Layout::rows, T, case_shape(), "[..., n] up projection"},
              {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of y", {"y"}},
              {"y", Role::output, Layout::rows, T, case_shape(), "act(a) * b"},
              {"da", Role::gradient, Layout::rows, T, case_shape(), "dy * b * act'(a)", {"a"}},
              {"db", Role::gradient, Layout::rows, T, case_shape(), "dy * act(a)", {"b"}},
          },
          {{"Forward", {"a", "b"}, {"y"}}, {"Backward", {"a", "b", "dy"}, {"da", "db"}}},
          [](const CaseSpec& c) { return rows_of(c.shape); }};
}
}  // namespace

const OpDescriptor& SwiGLUOp::descriptor() const {
  static const OpDescriptor d = glu_descriptor("swiglu");
  return d;
}
const OpDescriptor& GeGLUOp::descriptor() const {
  static const OpDescriptor d = glu_descriptor("geglu");
  return d;
}

}  // namespace numgate::glu

NUMGATE_REGISTER_OPS(glu) {
  add(std::make_unique<numgate::glu::SwiGLUOp>());
  add(std::make_unique<numgate::glu::GeGLUOp>());
}
