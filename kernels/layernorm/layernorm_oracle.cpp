// LayerNorm golden (FP64) and reference (FP32 intermediates) oracles, input patterns and
// mutants. Compiled with -ffp-contract=off: results do not depend on compiler flags.
#include "layernorm/layernorm_oracle.h"
#include "rmsnorm/rmsnorm_oracle.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numgate/random.h"

namespace numgate::layernorm {
namespace {

RowShape dims_of(const CaseSpec& c) { return row_shape(c, "layernorm"); }

// Stream ids of the inputs (a case's tensors must draw from different streams).
enum : std::uint32_t { kStreamX = 1, kStreamW = 2, kStreamB = 3, kStreamDy = 4 };

// Mutant (a): rows padded with zeros to a multiple of this many elements (8 = one 16-byte
// vector of bf16/fp16, the padding a vectorized kernel loads past the end of a row).
constexpr std::int64_t kPad = 8;

}  // namespace

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::padded_lanes: return "padded_lanes";
    case Mutant::naive_variance: return "naive_variance";
    case Mutant::eps_outside_sqrt: return "eps_outside_sqrt";
    case Mutant::mean_in_bf16: return "mean_in_bf16";
  }
  return "?";
}

std::map<std::string, Tensor> LayerNormOp::make_inputs(const CaseSpec& c) const {
  const RowShape d = dims_of(c);
  Tensor x(c.dtype, c.shape), w(c.dtype, {d.hidden}), b(c.dtype, {d.hidden}), dy(c.dtype, c.shape);
  const RandomStream rx(c.seed, kStreamX), rw(c.seed, kStreamW), rb(c.seed, kStreamB), rdy(c.seed, kStreamDy);
  const std::size_t n = x.numel();
  for (std::size_t i = 0; i < n; ++i) {
    x.set(i, rx.normal(i));
    dy.set(i, rdy.normal(i));
  }
  for (std::int64_t j = 0; j < d.hidden; ++j) {
    w.set(j, 1.0 + 0.25 * rw.normal(j));  // trained-like gains around 1
    b.set(j, 0.5 * rb.normal(j));         // non-zero biases
  }
  const double sqrt_eps = std::sqrt(c.param("eps"));
  // A row whose variance is 0 has rstd = 1/sqrt(eps) (~316x the other rows'): its dy is
  // scaled by sqrt(eps) so that its dx has the other rows' magnitude and does not set the
  // tensor's max-abs threshold (which would hide errors in every other row).
  auto scale_dy_row = [&](std::int64_t r) {
    for (std::int64_t i = 0; i < d.hidden; ++i)
      dy.set(static_cast<std::size_t>(r * d.hidden + i), sqrt_eps * rdy.normal(static_cast<std::uint64_t>(r * d.hidden + i)));
  };

  if (c.pattern == "normal") {
  } else if (c.pattern == "mean1") {  // non-zero mean: padded lanes would shift mean and variance
    for (std::size_t i = 0; i < n; ++i) x.set(i, 1.0 + rx.normal(i));
  } else if (c.pattern == "constant_row") {
    // Row 0: 1234.0 repeated (var = 0 exactly: y = b exactly, no NaN; E[x^2] - E[x]^2 in
    // FP32 is a difference of two ~1.5e6 values, wrong by ulps of 1.5e6 >> eps, possibly
    // negative). The other rows: mean 1.
    for (std::size_t i = 0; i < n; ++i) x.set(i, 1.0 + rx.normal(i));
    for (std::int64_t i = 0; i < d.hidden; ++i) x.set(static_cast<std::size_t>(i), 1234.0);
    scale_dy_row(0);
  } else if (c.pattern == "zero_row") {  // row rows/2 all zeros: y = b exactly, dx finite
    const std::int64_t r = d.rows / 2;
    for (std::int64_t i = 0; i < d.hidden; ++i) x.set(static_cast<std::size_t>(r * d.hidden + i), 0.0);
    scale_dy_row(r);
  } else if (c.pattern == "near_zero_variance") {  // var ~1e-6 < eps = 1e-5: eps dominates rstd
    for (std::size_t i = 0; i < n; ++i) x.set(i, 1e-3 * rx.normal(i));
  } else if (c.pattern == "offset_near_zero_variance") {  // mean 10, var ~1e-6: E[x^2]-E[x]^2 cancels
    for (std::size_t i = 0; i < n; ++i) x.set(i, 10.0 + 1e-3 * rx.normal(i));
  } else if (c.pattern == "large") {  // large magnitudes (fp16: up to ~48000; else up to ~6e15)
    const double s = c.dtype == DType::fp16 ? 8000.0 : 1e15;
    for (std::size_t i = 0; i < n; ++i) x.set(i, s * rx.normal(i));
  } else if (c.pattern == "nonfinite") {
    // Row 0: a NaN in x; row 1: +Inf in x; row 2: -Inf in x (each makes its whole row of y
    // and dx NaN, and every dw NaN); row 3: a NaN in dy (row 3 of dx and one column of db
    // NaN; y of row 3 finite). Needs rows >= 4.
    if (d.rows < 4) throw std::invalid_argument("layernorm case '" + c.name + "': pattern nonfinite needs rows >= 4");
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    x.set(static_cast<std::size_t>(0 * d.hidden + 3 % d.hidden), nan);
    x.set(static_cast<std::size_t>(1 * d.hidden + 5 % d.hidden), inf);
    x.set(static_cast<std::size_t>(2 * d.hidden + 7 % d.hidden), -inf);
    dy.set(static_cast<std::size_t>(3 * d.hidden + 9 % d.hidden), nan);
  } else if (c.pattern == "value_coverage") {
    // rmsnorm_oracle.h (the norm family's pattern), with b = 0 (a zero row of x gives y = b = 0)
    // and a scale 0.1 M in column 5 (LayerNorm's row 3 has rstd ~3.6, not ~1).
    rmsnorm::apply_value_coverage_pattern(c, "layernorm", x, w, dy, 0.0, 0.1 * 65504.0, 1.0);
    for (std::int64_t j = 0; j < d.hidden; ++j) b.set(j, 0.0);
  } else if (c.pattern == "ill_conditioned") {
    // x ~ 100 N(0,1), w in [0.75, 1.25], and dy = (a + b xhat) / w per row
    // (rmsnorm_oracle.h: apply_ill_conditioned_dy, centred): w dy lies in the null space of
    // dx = rstd (g - mean(g) - xhat mean(g xhat)) up to dy's rounding: dx's gate is not valid.
    rmsnorm::apply_ill_conditioned_pattern(c, "layernorm", rx, rw, 0.0, true, x, w, dy);
  } else {
    throw std::invalid_argument("layernorm case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, mean1, constant_row, zero_row, near_zero_variance, "
                                "offset_near_zero_variance, large, nonfinite, value_coverage, ill_conditioned)");
  }
  return {{"x", x}, {"w", w}, {"b", b}, {"dy", dy}};
}

// abs_terms (sum of |terms| of each element's FP64 evaluation, for the conditioning
// envelope). The terms are those of the expansion in the inputs, with mean = sum_j x_j / H
// expanded (so x_i - mean contributes |x_i| + mean_j |x_j|, written ax_i below):
//   y_i  = x_i r w_i - sum_j (x_j / H) r w_i + b_i       -> r |w_i| ax_i + |b_i|
//   dx_i = r g_i - sum_j r g_j / H - xhat_i r sum_j g_j xhat_j / H
//                                                         -> r (|g_i| + mean|g| + r ax_i mean_j(|g_j| r ax_j))
//   dw_i = sum_r dy xhat                                  -> sum_r |dy| r ax_i
//   db_i = sum_r dy                                       -> sum_r |dy|
// so an element is an "exact zero" (abs_terms 0) only when every term is 0: y of an
// all-zero row with b_i = 0, dw of a column whose rows are all zero, ... A constant row
// (x_i = mean) has y = b exactly but non-zero terms that cancel exactly (x_i r w and the
// -x_j/H r w), so it is not required to be an exact zero even where b_i = 0; likewise
// dx = 0 at hidden = 1 (g - g/1 - 0).
std::map<std::string, GoldenTensor> LayerNormOp::golden(const CaseSpec& c,
                                                        const std::map<std::string, Tensor>& in) const {
  const RowShape d = dims_of(c);
  const double eps = c.param("eps");
  const Tensor &x = in.at("x"), &w = in.at("w"), &b = in.at("b"), &dy = in.at("dy");
  GoldenTensor y{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.hidden};
  GoldenTensor dx{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.hidden};
  GoldenTensor dw{Tensor(DType::fp64, {d.hidden}), Tensor(DType::fp64, {d.hidden}), d.rows + d.hidden};
  GoldenTensor db{Tensor(DType::fp64, {d.hidden}), Tensor(DType::fp64, {d.hidden}), d.rows};
  std::vector<double> dw_sum(d.hidden, 0.0), dw_abs(d.hidden, 0.0), db_sum(d.hidden, 0.0), db_abs(d.hidden, 0.0);
  std::vector<double> xh(d.hidden), axh(d.hidden), g(d.hidden);
  const double n = static_cast<double>(d.hidden);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r * d.hidden);
    double s = 0.0, sa = 0.0;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      s += x.get(base + i);
      sa += std::fabs(x.get(base + i));
    }
    const double mean = s / n, mean_abs = sa / n;
    double q = 0.0;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      const double di = x.get(base + i) - mean;
      q += di * di;
    }
    const double rstd = 1.0 / std::sqrt(q / n + eps);
    double sg = 0.0, sga = 0.0, sgx = 0.0, sgxa = 0.0;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      xh[i] = (x.get(base + i) - mean) * rstd;
      axh[i] = rstd * (std::fabs(x.get(base + i)) + mean_abs);
      g[i] = dy.get(base + i) * w.get(i);
      sg += g[i];
      sga += std::fabs(g[i]);
      sgx += g[i] * xh[i];
      sgxa += std::fabs(g[i]) * axh[i];
    }
    const double mg = sg / n, mgx = sgx / n;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      const double wi = w.get(i), bi = b.get(i), dyi = dy.get(base + i);
      y.value.set(base + i, xh[i] * wi + bi);
      y.abs_terms.set(base + i, std::fabs(wi) * axh[i] + std::fabs(bi));
      dx.value.set(base + i, rstd * (g[i] - mg - xh[i] * mgx));
      dx.abs_terms.set(base + i, rstd * (std::fabs(g[i]) + sga / n + axh[i] * (sgxa / n)));
      dw_sum[i] += dyi * xh[i];
      dw_abs[i] += std::fabs(dyi) * axh[i];
      db_sum[i] += dyi;
      db_abs[i] += std::fabs(dyi);
    }
  }
  for (std::int64_t i = 0; i < d.hidden; ++i) {
    dw.value.set(i, dw_sum[i]);
    dw.abs_terms.set(i, dw_abs[i]);
    db.value.set(i, db_sum[i]);
    db.abs_terms.set(i, db_abs[i]);
  }
  return {{"y", y}, {"dx", dx}, {"dw", dw}, {"db", db}};
}

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                Mutant m, const SumPolicy& p) {
  const RowShape d = dims_of(c);
  const float eps = static_cast<float>(c.param("eps"));
  const float n = static_cast<float>(d.hidden);
  const Tensor &x = in.at("x"), &w = in.at("w"), &b = in.at("b"), &dy = in.at("dy");
  Tensor y(c.dtype, c.shape), dx(c.dtype, c.shape), dw(c.dtype, {d.hidden}), db(c.dtype, {d.hidden});
  const auto H = static_cast<std::size_t>(d.hidden);
  std::vector<float> xr(H), dv(H), g(H);
  // dy and xhat of every row, for dw and db (column reductions over rows).
  std::vector<float> dyf(static_cast<std::size_t>(d.rows) * H), xhatf(dyf.size());
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * H;
    for (std::size_t i = 0; i < H; ++i) xr[i] = static_cast<float>(x.get(base + i));
    auto xv = [&](std::int64_t i) { return xr[static_cast<std::size_t>(i)]; };
    float mean = 0.0f, var = 0.0f;
    if (m == Mutant::naive_variance) {
      float s = 0.0f, ss = 0.0f;
      for (std::int64_t i = 0; i < d.hidden; ++i) {
        s = s + xv(i);
        ss = ss + xv(i) * xv(i);
      }
      mean = s / n;
      var = ss / n - mean * mean;
    } else if (m == Mutant::padded_lanes) {
      const std::int64_t padded = (d.hidden + kPad - 1) / kPad * kPad;
      const float np = static_cast<float>(padded);
      float s = 0.0f;
      for (std::int64_t i = 0; i < d.hidden; ++i) s = s + xv(i);
      mean = s / np;  // the zero lanes are in the count
      float q = 0.0f;
      for (std::int64_t i = 0; i < padded; ++i) {
        const float di = (i < d.hidden ? xv(i) : 0.0f) - mean;  // ... and in the variance
        q = q + di * di;
      }
      var = q / np;
    } else {
      mean = sum_fp32(xr.data(), d.hidden, p) / n;
      if (m == Mutant::mean_in_bf16) mean = static_cast<float>(round_to_dtype(mean, DType::bf16));
      for (std::size_t i = 0; i < H; ++i) dv[i] = xr[i] - mean;
      var = dot_fp32(dv.data(), dv.data(), d.hidden, p) / n;
    }
    const float rstd = m == Mutant::eps_outside_sqrt ? 1.0f / (std::sqrt(var) + eps) : 1.0f / std::sqrt(var + eps);
    for (std::size_t i = 0; i < H; ++i) {
      g[i] = static_cast<float>(dy.get(base + i)) * static_cast<float>(w.get(i));
      dv[i] = xr[i] - mean;
    }
    const float sg = sum_fp32(g.data(), d.hidden, p), sgd = dot_fp32(g.data(), dv.data(), d.hidden, p);
    const float a = sg / n;
    const float cc = rstd * (sgd / n);
    for (std::size_t i = 0; i < H; ++i) {
      const float wi = static_cast<float>(w.get(i)), bi = static_cast<float>(b.get(i));
      const float dyi = static_cast<float>(dy.get(base + i)), gi = g[i];
      const float xhat = dv[i] * rstd;
      y.set(base + i, mul_add(xhat, wi, bi, p));
      dx.set(base + i, rstd * mul_add(-xhat, cc, gi - a, p));
      dyf[base + i] = dyi;
      xhatf[base + i] = xhat;
    }
  }
  for (std::size_t i = 0; i < H; ++i) {
    dw.set(i, dot_fp32(dyf.data() + i, xhatf.data() + i, d.rows, p, d.hidden, d.hidden));
    db.set(i, sum_fp32(dyf.data() + i, d.rows, p, d.hidden));
  }
  return {{"y", y}, {"dx", dx}, {"dw", dw}, {"db", db}};
}


// ---- the descriptor ------------------------------------------------------------------
const OpDescriptor& LayerNormOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "layernorm",
      1,
      {
          {"x", Role::input, Layout::rows, T, case_shape(), "[..., hidden] activations; leading dims flattened into rows"},
          {"w", Role::input, Layout::per_column, T, last_dim(), "[hidden] weight (gamma)"},
          {"b", Role::input, Layout::per_column, T, last_dim(), "[hidden] bias (beta)"},
          {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of y", {"y"}},
          {"y", Role::output, Layout::rows, T, case_shape(), "(x - mean) * rstd * w + b"},
          {"dx", Role::gradient, Layout::rows, T, case_shape(), "gradient of x", {"x"}},
          {"dw", Role::gradient, Layout::per_column, T, last_dim(), "gradient of w: a sum over rows", {"w"}},
          {"db", Role::gradient, Layout::per_column, T, last_dim(), "gradient of b: a sum over rows", {"b"}},
      },
      {{"Forward", {"x", "w", "b"}, {"y"}},
          {"Backward", {"x", "w", "dy"}, {"dx", "dw", "db"}}},
      [](const CaseSpec& c) { return rows_of(c.shape); }};
  return d;
}

}  // namespace numgate::layernorm

NUMGATE_REGISTER_OPS(layernorm) { add(std::make_unique<numgate::layernorm::LayerNormOp>()); }
