// dropout_add golden (FP64) and reference (kernel dtype policy) oracles, input patterns,
// parameter validation and mutants. Compiled with -ffp-contract=off: results do not depend
// on compiler flags.
#include "dropout_add/dropout_add_oracle.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "dropout_add/dropout_stream.h"
#include "numgate/random.h"

namespace numgate::dropout_add {
namespace {

// Stream ids of the inputs (a case's tensors must draw from different streams).
enum : std::uint32_t { kStreamX = 1, kStreamResidual = 2, kStreamDy = 3, kStreamPattern = 4 };

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTwo53 = 9007199254740992.0;

std::string shortest(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

bool read_integer(const CaseSpec& c, const char* field, std::uint64_t& out, std::string* why) {
  const double v = c.param(field);
  if (!(v >= 0.0) || v > kTwo53 || v != std::floor(v)) {
    if (why)
      *why = "dropout_add case '" + c.name + "': " + field + " = " + shortest(v) +
             " must be an integer in [0, 2^53] (stored as a double: larger values are not exact)";
    return false;
  }
  out = static_cast<std::uint64_t>(v);
  return true;
}

/// The scale of kept elements for the case dtype (dropout_stream.h), as a double.
double scale_for(const CaseSpec& c, double p) {
  return c.dtype == DType::fp64 ? dropout_scale_fp64(p) : static_cast<double>(dropout_scale_fp32(p));
}

RowShape dims_of(const CaseSpec& c) { return row_shape(c, "dropout_add"); }

}  // namespace

bool read_params(const CaseSpec& c, Params& out, std::string* why) {
  Params r;
  r.p = c.param("p");
  if (!(r.p >= 0.0 && r.p < 1.0)) {
    if (why) *why = "dropout_add case '" + c.name + "': p = " + shortest(r.p) + " is outside [0, 1)";
    return false;
  }
  if (!read_integer(c, "philox_seed", r.seed, why) || !read_integer(c, "philox_offset", r.offset, why)) return false;
  r.threshold = dropout_threshold(r.p);
  out = r;
  return true;
}

Params params_of(const CaseSpec& c) {
  Params p;
  std::string why;
  if (!read_params(c, p, &why)) throw std::invalid_argument(why);
  return p;
}

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::stream_ignores_offset: return "stream_ignores_offset";
    case Mutant::counter_per_element: return "counter_per_element";
    case Mutant::lanes_permuted: return "lanes_permuted";
    case Mutant::key_high_word_dropped: return "key_high_word_dropped";
    case Mutant::threshold_strict: return "threshold_strict";
    case Mutant::stream_restarts_each_row: return "stream_restarts_each_row";
    case Mutant::mask_by_multiplication: return "mask_by_multiplication";
    case Mutant::scale_in_bf16: return "scale_in_bf16";
    case Mutant::product_in_dtype: return "product_in_dtype";
  }
  return "?";
}

std::vector<unsigned char> keep_mask(const CaseSpec& c, std::size_t n, std::int64_t hidden, Mutant m) {
  const Params P = params_of(c);
  const std::uint64_t seed = m == Mutant::key_high_word_dropped ? (P.seed & 0xFFFFFFFFu) : P.seed;
  const std::uint64_t offset = m == Mutant::stream_ignores_offset ? 0 : P.offset;
  const auto H = static_cast<std::uint64_t>(hidden > 0 ? hidden : 1);
  std::vector<unsigned char> keep(n);
  std::uint64_t cached = ~std::uint64_t{0};
  r123::Philox4x32::ctr_type r{};
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t i = m == Mutant::stream_restarts_each_row ? k % H : k;
    const std::uint64_t g = m == Mutant::counter_per_element ? i : i >> 2;
    if (g != cached) {
      r = dropout_group(g, seed, offset);
      cached = g;
    }
    const unsigned lane = m == Mutant::lanes_permuted ? 3u - static_cast<unsigned>(i & 3u) : static_cast<unsigned>(i & 3u);
    const std::uint32_t draw = r[lane];
    keep[k] = m == Mutant::threshold_strict ? draw > P.threshold : dropout_keep(draw, P.threshold);
  }
  return keep;
}

// ---- inputs -------------------------------------------------------------------------------

std::map<std::string, Tensor> DropoutAddOp::make_inputs(const CaseSpec& c) const {
  const Params P = params_of(c);  // refuses bad parameters before anything is drawn
  const RowShape d = dims_of(c);
  Tensor x(c.dtype, c.shape), res(c.dtype, c.shape), dy(c.dtype, c.shape);
  const RandomStream rx(c.seed, kStreamX), rr(c.seed, kStreamResidual), rg(c.seed, kStreamDy);
  const std::size_t n = x.numel();
  for (std::size_t i = 0; i < n; ++i) {
    x.set(i, rx.normal(i));
    res.set(i, rr.normal(i));
    dy.set(i, rg.normal(i));
  }
  const double s = scale_for(c, P.p);
  const auto H = static_cast<std::size_t>(d.hidden);
  // residual = -round(x s): y = x s - round(x s) cancels to the rounding of x s in the dtype
  auto cancel = [&](std::size_t i) { res.set(i, -round_to_dtype(x.get(i) * s, c.dtype)); };
  if (c.pattern == "normal") {
  } else if (c.pattern == "specials") {
    // NaN / +-Inf in x (kept ones propagate, dropped ones must give residual exactly), a few
    // +-Inf residuals (Inf - Inf where a kept x is the opposite Inf), NaN / Inf in dy.
    for (std::size_t i = 0; i < n; ++i) {
      if (i % 4 == 1) x.set(i, kNaN);
      if (i % 8 == 3) x.set(i, kInf);
      if (i % 8 == 7) x.set(i, -kInf);
      if (i % 16 == 5) res.set(i, kInf);
      if (i % 16 == 15) res.set(i, -kInf);  // with x = -inf at i % 8 == 7: -inf + -inf s
      if (i % 16 == 11) res.set(i, -kInf);  // with x = +inf at i % 8 == 3: inf - inf = NaN where kept
      if (i % 16 == 9) dy.set(i, kNaN);
      if (i % 32 == 2) dy.set(i, kInf);
    }
  } else if (c.pattern == "cancellation") {
    for (std::size_t i = 0; i < n; ++i)
      if ((i % H) % 2 == 1) cancel(i);  // odd columns cancel, even ones are ordinary sums
  } else if (c.pattern == "zeros") {
    // row 0 and column 1: x = residual = dy = 0 (y, dx, dresidual exactly 0 there); scattered
    // zeros of one input only, and signed zeros.
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = i / H, j = i % H;
      if (r == 0 || j == 1) {
        x.set(i, 0.0);
        res.set(i, 0.0);
        dy.set(i, 0.0);
      }
      if (i % 7 == 3) x.set(i, 0.0);
      if (i % 7 == 5) res.set(i, 0.0);
      if (i % 11 == 4) dy.set(i, 0.0);
      if (i % 13 == 6) {
        x.set(i, -0.0);
        res.set(i, -0.0);
        dy.set(i, -0.0);
      }
    }
  } else if (c.pattern == "value_coverage") {
    // fp16, rows >= 4, hidden >= 8. Row 0 and column 1 all zero (x, residual, dy); row 1:
    // x = 0, residual and dy ~ 2^-20 N(0,1) (subnormal y, dx, dresidual); row 2: odd columns
    // cancel (residual = -round(x s)); row 3: x = 60000 (kept y = 60000 s + residual rounds
    // to Inf at p = 0.1), dy = 40000 (dx = 40000 s and dresidual near fp16's maximum).
    if (c.dtype != DType::fp16 || d.rows < 4 || d.hidden < 8)
      throw std::invalid_argument("dropout_add case '" + c.name +
                                  "': pattern value_coverage needs fp16, rows >= 4 and hidden >= 8");
    const RandomStream rp(c.seed, kStreamPattern);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = i / H, j = i % H;
      if (r == 1) {
        x.set(i, 0.0);
        res.set(i, 0x1p-20 * rp.normal(i));
        dy.set(i, 0x1p-20 * rp.normal(i + n));
      }
      if (r == 2 && j % 2 == 1) cancel(i);
      if (r == 3) {
        x.set(i, 60000.0);
        dy.set(i, 40000.0);
      }
      if (r == 0 || j == 1) {
        x.set(i, 0.0);
        res.set(i, 0.0);
        dy.set(i, 0.0);
      }
    }
  } else {
    throw std::invalid_argument("dropout_add case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, specials, cancellation, zeros, value_coverage)");
  }
  return {{"x", x}, {"residual", res}, {"dy", dy}};
}

// ---- golden ---------------------------------------------------------------------------------

std::map<std::string, GoldenTensor> DropoutAddOp::golden(const CaseSpec& c,
                                                         const std::map<std::string, Tensor>& in) const {
  const Params P = params_of(c);
  const RowShape d = dims_of(c);
  const Tensor &x = in.at("x"), &res = in.at("residual"), &dy = in.at("dy");
  const std::size_t n = x.numel();
  const double s = scale_for(c, P.p);
  const std::vector<unsigned char> keep = keep_mask(c, n, d.hidden);
  auto make = [&](std::int64_t k) { return GoldenTensor{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), k}; };
  GoldenTensor y = make(2), mask = make(1), dx = make(1), dres = make(1);
  // abs_terms: the sum of |terms|; |value| where a term is NaN (the value is NaN then too).
  auto put = [](GoldenTensor& g, std::size_t i, double v, double terms) {
    g.value.set(i, v);
    g.abs_terms.set(i, std::isnan(terms) ? std::fabs(v) : terms);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const double xv = x.get(i), rv = res.get(i), gv = dy.get(i);
    if (keep[i]) {
      const double xs = xv * s;  // exact for fp32 / bf16 / fp16 inputs (s has 24 bits)
      put(y, i, rv + xs, std::fabs(rv) + std::fabs(xs));
      put(dx, i, gv * s, std::fabs(gv * s));
    } else {  // a select: x and dy do not enter
      put(y, i, rv, std::fabs(rv));
      put(dx, i, 0.0, 0.0);
    }
    put(mask, i, keep[i] ? 1.0 : 0.0, keep[i] ? 1.0 : 0.0);
    put(dres, i, gv, std::fabs(gv));
  }
  return {{"y", y}, {"mask", mask}, {"dx", dx}, {"dresidual", dres}};
}

// ---- reference --------------------------------------------------------------------------------

namespace {

template <typename C>
void reference_loop(const CaseSpec& c, C s, const std::vector<unsigned char>& keep, const Tensor& x, const Tensor& res,
                    const Tensor& dy, Tensor& y, Tensor& mask, Tensor& dx, Mutant m) {
  for (std::size_t i = 0; i < keep.size(); ++i) {
    const C xv = static_cast<C>(x.get(i)), rv = static_cast<C>(res.get(i)), gv = static_cast<C>(dy.get(i));
    const bool k = keep[i] != 0;
    if (m == Mutant::mask_by_multiplication) {  // x * m * s: a dropped NaN / Inf x is not 0
      const C mv = k ? C(1) : C(0);
      const C xm = xv * mv;
      const C xs = xm * s;
      y.set(i, static_cast<double>(xs + rv));
      const C gm = gv * mv;
      dx.set(i, static_cast<double>(gm * s));
    } else if (k) {
      C xs = xv * s;
      if (m == Mutant::product_in_dtype) xs = static_cast<C>(round_to_dtype(static_cast<double>(xs), c.dtype));
      y.set(i, static_cast<double>(xs + rv));
      dx.set(i, static_cast<double>(gv * s));
    } else {
      y.set(i, static_cast<double>(rv));
      dx.set(i, 0.0);
    }
    mask.set(i, k ? 1.0 : 0.0);
  }
}

}  // namespace

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in, Mutant m) {
  const Params P = params_of(c);
  const RowShape d = dims_of(c);
  const Tensor &x = in.at("x"), &res = in.at("residual"), &dy = in.at("dy");
  const std::vector<unsigned char> keep = keep_mask(c, x.numel(), d.hidden, m);
  Tensor y(c.dtype, c.shape), mask(c.dtype, c.shape), dx(c.dtype, c.shape);
  if (c.dtype == DType::fp64) {
    reference_loop<double>(c, dropout_scale_fp64(P.p), keep, x, res, dy, y, mask, dx, m);
  } else {
    float s = dropout_scale_fp32(P.p);
    if (m == Mutant::scale_in_bf16) s = static_cast<float>(round_to_dtype(s, DType::bf16));
    reference_loop<float>(c, s, keep, x, res, dy, y, mask, dx, m);
  }
  return {{"y", y}, {"mask", mask}, {"dx", dx}, {"dresidual", dy}};  // dresidual: dy's bits
}

std::map<std::string, std::vector<bool>> DropoutAddOp::nondifferentiable(const CaseSpec&,
                                                                         const std::map<std::string, Tensor>& in) const {
  const Tensor &x = in.at("x"), &res = in.at("residual"), &dy = in.at("dy");
  std::vector<bool> out(x.numel(), false);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = !std::isfinite(x.get(i)) || !std::isfinite(res.get(i)) || !std::isfinite(dy.get(i));
  return {{"x", out}, {"residual", out}};
}

// ---- the descriptor -----------------------------------------------------------------------
const OpDescriptor& DropoutAddOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "dropout_add",
      1,
      {
          {"x", Role::input, Layout::rows, T, case_shape(), "[..., hidden] the dropout's input; leading dims flattened into rows"},
          {"residual", Role::input, Layout::rows, T, case_shape(), "[..., hidden] the residual stream added to dropout(x)"},
          {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of y", {"y"}},
          {"y", Role::output, Layout::rows, T, case_shape(), "residual + (m ? x * s : 0)"},
          {"mask", Role::output, Layout::rows, T, case_shape(), "m: 1 kept, 0 dropped (no upstream gradient: weight 0 in gate 1)"},
          {"dx", Role::gradient, Layout::rows, T, case_shape(), "m ? dy * s : 0 (m regenerated from the stream)", {"x"}},
          {"dresidual", Role::gradient, Layout::rows, T, case_shape(), "dy, exactly", {"residual"}},
      },
      {{"Forward", {"x", "residual"}, {"y", "mask"}}, {"Backward", {"dy"}, {"dx", "dresidual"}}},
      [](const CaseSpec& c) { return rows_of(c.shape); }};
  return d;
}

}  // namespace numgate::dropout_add

NUMGATE_REGISTER_OPS(dropout_add) { add(std::make_unique<numgate::dropout_add::DropoutAddOp>()); }
