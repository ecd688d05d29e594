// Fused residual-add + RMSNorm golden (FP64) and reference (FP32 intermediates) oracles,
// input patterns and mutants. Compiled with -ffp-contract=off.
#include "fused_add_rmsnorm/fused_add_rmsnorm_oracle.h"
#include "rmsnorm/rmsnorm_oracle.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numgate/random.h"

namespace numgate::fused_add_rmsnorm {
namespace {

RowShape dims_of(const CaseSpec& c) { return row_shape(c, "fused_add_rmsnorm"); }

enum : std::uint32_t { kStreamX = 1, kStreamW = 2, kStreamDy = 3, kStreamRes = 4, kStreamDres = 5, kStreamPattern = 6 };

}  // namespace

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::variance_from_rounded_residual: return "variance_from_rounded_residual";
    case Mutant::residual_grad_dropped: return "residual_grad_dropped";
    case Mutant::residual_out_toward_zero: return "residual_out_toward_zero";
    case Mutant::eps_outside_sqrt: return "eps_outside_sqrt";
    case Mutant::bf16_sum_of_squares: return "bf16_sum_of_squares";
  }
  return "?";
}

std::map<std::string, Tensor> FusedAddRMSNormOp::make_inputs(const CaseSpec& c) const {
  const RowShape d = dims_of(c);
  Tensor x(c.dtype, c.shape), res(c.dtype, c.shape), w(c.dtype, {d.hidden}), dy(c.dtype, c.shape),
      dres(c.dtype, c.shape);
  const RandomStream rx(c.seed, kStreamX), rw(c.seed, kStreamW), rdy(c.seed, kStreamDy), rres(c.seed, kStreamRes),
      rdres(c.seed, kStreamDres);
  const std::size_t n = x.numel();
  for (std::size_t i = 0; i < n; ++i) {
    x.set(i, rx.normal(i));             // sublayer output
    res.set(i, 2.0 * rres.normal(i));   // residual stream, somewhat larger
    dy.set(i, rdy.normal(i));
    dres.set(i, rdres.normal(i));
  }
  for (std::int64_t j = 0; j < d.hidden; ++j) w.set(j, 1.0 + 0.25 * rw.normal(j));
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();

  if (c.pattern == "normal") {
  } else if (c.pattern == "near_zero_variance") {  // mean(h^2) ~ 1e-10 << eps
    for (std::size_t i = 0; i < n; ++i) {
      x.set(i, 1e-5 * rx.normal(i));
      res.set(i, 1e-5 * rres.normal(i));
    }
  } else if (c.pattern == "zero_row") {
    // Row rows/2: residual = -x exactly, so h = 0: residual_out and y exactly 0, dx =
    // rstd * dy * w + d_residual_out with rstd = 1/sqrt(eps). Its dy is scaled by
    // sqrt(eps) so that its dx has the other rows' magnitude (else it would set the
    // tensor's max-abs threshold and hide the other rows).
    const std::int64_t r = d.rows / 2;
    const double sqrt_eps = std::sqrt(c.param("eps"));
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      const std::size_t k = static_cast<std::size_t>(r * d.hidden + i);
      res.set(k, -x.get(k));
      dy.set(k, sqrt_eps * rdy.normal(k));
    }
  } else if (c.pattern == "nonfinite") {
    // Row 0: NaN in x; row 1: +Inf in residual (rstd = 0: y exactly 0 except NaN there);
    // row 2: x = -Inf and residual = +Inf at the same element (h = NaN); other rows normal.
    if (d.rows < 3 || d.hidden < 4) throw std::invalid_argument("nonfinite needs >= 3 rows and hidden >= 4");
    x.set(0 * d.hidden + 1, nan);
    res.set(1 * d.hidden + 2, inf);
    x.set(2 * d.hidden + 3, -inf);
    res.set(2 * d.hidden + 3, inf);
  } else if (c.pattern == "rounding_bias") {
    // Built to expose a variance taken from the rounded residual_out: residual = s * 2^k
    // (s a random sign, k = row % 3), x = s * 2^k * u * (1 - 2^-8) with u the dtype's unit
    // roundoff (bf16: 2^-8 - 2^-16), i.e. just under half an ulp of the residual. So h is
    // exact in FP32 but residual_out = dtype(h) = residual: every element rounds DOWN in
    // magnitude by ~u, the rounded sum of squares is low by ~2u, and the mutant's y is
    // ~u too large — about one ulp — while the correct y ~ s * w is exact up to the
    // eps term (reference error ~1e-6 relative), so the gate is sharp.
    const RandomStream rp(c.seed, kStreamPattern);
    const double u = dtype_unit_roundoff(c.dtype);
    for (std::int64_t r = 0; r < d.rows; ++r) {
      const double scale = std::ldexp(1.0, static_cast<int>(r % 3));
      for (std::int64_t i = 0; i < d.hidden; ++i) {
        const std::size_t k = static_cast<std::size_t>(r * d.hidden + i);
        const double s = rp.uniform(k) < 0.5 ? -1.0 : 1.0;
        res.set(k, s * scale);
        x.set(k, s * scale * u * (1.0 - 1.0 / 256.0));
      }
    }
  } else if (c.pattern == "overflow_sum") {
    // fp16: one element per row with x = +-40000, residual = +-30000: the sum 70000 is
    // finite in FP32 (y finite, ~ sqrt(hidden) * w there) but residual_out must be +-Inf.
    const RandomStream rp(c.seed, kStreamPattern);
    for (std::int64_t r = 0; r < d.rows; ++r) {
      const auto j = static_cast<std::int64_t>(rp.uniform(r) * static_cast<double>(d.hidden));
      const double s = r % 2 == 0 ? 1.0 : -1.0;
      x.set(r * d.hidden + j, s * 40000.0);
      res.set(r * d.hidden + j, s * 30000.0);
    }
  } else if (c.pattern == "value_coverage") {
    // RMSNorm's (rmsnorm_oracle.h) on h = x (residual 0), plus residual_out near overflow at
    // [7][7] (x = residual = 0.3 M); d_residual_out 0 where dx must be 0 (row 1, column 1)
    // and tiny in row 2 (subnormal dx).
    rmsnorm::apply_value_coverage_pattern(c, "fused_add_rmsnorm", x, w, dy, 0.0, 0.3 * 65504.0, 1.0);
    for (std::size_t i = 0; i < n; ++i) res.set(i, 0.0);
    x.set(static_cast<std::size_t>(7 * d.hidden + 7), 0.3 * 65504.0);
    res.set(static_cast<std::size_t>(7 * d.hidden + 7), 0.3 * 65504.0);
    for (std::int64_t j = 0; j < d.hidden; ++j) {
      dres.set(static_cast<std::size_t>(d.hidden + j), 0.0);
      dres.set(static_cast<std::size_t>(2 * d.hidden + j), 0x1p-17 * rdres.normal(static_cast<std::size_t>(2 * d.hidden + j)));
    }
    for (std::int64_t r = 0; r < d.rows; ++r) dres.set(static_cast<std::size_t>(r * d.hidden + 1), 0.0);
  } else if (c.pattern == "ill_conditioned") {
    // RMSNorm's (rmsnorm_oracle.h) on h = x + residual with residual = x / 2 (x ~ 100 N(0,1)
    // with its last 2 bits clear, so h = 1.5 x is exact in the dtype: the FP32 and FP64 h
    // agree), w in [0.75, 1.25], d_residual_out = 0 (dx is then the cancelling part alone).
    std::vector<double> h(n), scale(static_cast<std::size_t>(d.hidden));
    const double u = dtype_unit_roundoff(c.dtype);
    for (std::size_t i = 0; i < n; ++i) {
      // Round x to a multiple of 4 ulp of its binade: x, x / 2 and 1.5 x are then exact.
      const double v = 100.0 * rx.normal(i);
      int e = 0;
      std::frexp(v, &e);
      const double q = std::ldexp(8.0 * u, e - 1);
      x.set(i, std::nearbyint(v / q) * q);
      res.set(i, x.get(i) / 2.0);
      h[i] = x.get(i) + res.get(i);
      dres.set(i, 0.0);
    }
    for (std::int64_t j = 0; j < d.hidden; ++j) {
      w.set(j, 0.75 + 0.5 * rw.uniform(j));
      scale[static_cast<std::size_t>(j)] = w.get(j);
    }
    rmsnorm::apply_ill_conditioned_dy(c, "fused_add_rmsnorm", h, scale, false, dy);
  } else {
    throw std::invalid_argument("fused_add_rmsnorm case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, near_zero_variance, zero_row, nonfinite, rounding_bias, "
                                "overflow_sum, value_coverage, ill_conditioned)");
  }
  return {{"x", x}, {"residual", res}, {"w", w}, {"dy", dy}, {"d_residual_out", dres}};
}

std::map<std::string, GoldenTensor> FusedAddRMSNormOp::golden(const CaseSpec& c,
                                                              const std::map<std::string, Tensor>& in) const {
  const RowShape d = dims_of(c);
  const double eps = c.param("eps");
  const Tensor &x = in.at("x"), &res = in.at("residual"), &w = in.at("w"), &dy = in.at("dy"),
               &dres = in.at("d_residual_out");
  GoldenTensor ro{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), 2};
  GoldenTensor y{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.hidden};
  GoldenTensor dx{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.hidden + 1};
  GoldenTensor dw{Tensor(DType::fp64, {d.hidden}), Tensor(DType::fp64, {d.hidden}), d.rows + d.hidden};
  std::vector<double> dw_sum(d.hidden, 0.0), dw_abs(d.hidden, 0.0), h(d.hidden);
  const double n = static_cast<double>(d.hidden);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r * d.hidden);
    double ss = 0.0, gh = 0.0, gh_abs = 0.0;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      // Exact: two values of <= 24-bit significands within the FP64 exponent range.
      h[i] = x.get(base + i) + res.get(base + i);
      const double gi = dy.get(base + i) * w.get(i);
      ss += h[i] * h[i];
      gh += gi * h[i];
      gh_abs += std::fabs(gi * h[i]);
    }
    const double rstd = 1.0 / std::sqrt(ss / n + eps);
    const double r3 = rstd * rstd * rstd;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      const double wi = w.get(i), dyi = dy.get(base + i), gi = dyi * wi, di = dres.get(base + i);
      ro.value.set(base + i, h[i]);
      ro.abs_terms.set(base + i, std::fabs(x.get(base + i)) + std::fabs(res.get(base + i)));
      const double yi = h[i] * rstd * wi;
      y.value.set(base + i, yi);
      y.abs_terms.set(base + i, std::fabs(yi));
      dx.value.set(base + i, rstd * gi - r3 * h[i] * (gh / n) + di);
      dx.abs_terms.set(base + i, std::fabs(rstd * gi) + r3 * std::fabs(h[i]) * (gh_abs / n) + std::fabs(di));
      const double t = dyi * h[i] * rstd;
      dw_sum[i] += t;
      dw_abs[i] += std::fabs(t);
    }
  }
  for (std::int64_t i = 0; i < d.hidden; ++i) {
    dw.value.set(i, dw_sum[i]);
    dw.abs_terms.set(i, dw_abs[i]);
  }
  return {{"residual_out", ro}, {"y", y}, {"dx", dx}, {"dw", dw}};
}

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                Mutant m, const SumPolicy& p) {
  const RowShape d = dims_of(c);
  const float eps = static_cast<float>(c.param("eps"));
  const float n = static_cast<float>(d.hidden);
  const Tensor &x = in.at("x"), &res = in.at("residual"), &w = in.at("w"), &dy = in.at("dy"),
               &dres = in.at("d_residual_out");
  Tensor ro(c.dtype, c.shape), y(c.dtype, c.shape), dx(c.dtype, c.shape), dw(c.dtype, {d.hidden});
  const auto H = static_cast<std::size_t>(d.hidden);
  std::vector<float> h(H), hv(H), g(H);
  // dy and hhat of every row, for dw = sum over rows of dy * hhat (a column reduction).
  std::vector<float> dyf(static_cast<std::size_t>(d.rows) * H), hhatf(dyf.size());
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * H;
    float ss = 0.0f;
    for (std::size_t i = 0; i < H; ++i) {
      h[i] = static_cast<float>(x.get(base + i)) + static_cast<float>(res.get(base + i));
      ro.set(base + i, h[i]);  // one rounding FP32 -> dtype
      if (m == Mutant::residual_out_toward_zero)
        ro.set(base + i, round_toward_zero(x.get(base + i) + res.get(base + i), c.dtype));
      hv[i] = m == Mutant::variance_from_rounded_residual ? static_cast<float>(ro.get(base + i)) : h[i];
      g[i] = static_cast<float>(dy.get(base + i)) * static_cast<float>(w.get(i));
      if (m == Mutant::bf16_sum_of_squares) ss = static_cast<float>(round_to_dtype(ss + hv[i] * hv[i], DType::bf16));
    }
    if (m != Mutant::bf16_sum_of_squares) ss = dot_fp32(hv.data(), hv.data(), d.hidden, p);
    const float gh = dot_fp32(g.data(), h.data(), d.hidden, p);
    const float rstd = m == Mutant::eps_outside_sqrt ? 1.0f / (std::sqrt(ss / n) + eps) : 1.0f / std::sqrt(ss / n + eps);
    const float mgh = gh / n;
    for (std::size_t i = 0; i < H; ++i) {
      const float wi = static_cast<float>(w.get(i));
      const float dyi = static_cast<float>(dy.get(base + i)), gi = g[i];
      const float hhat = h[i] * rstd;
      y.set(base + i, hhat * wi);
      const float dh = rstd * mul_add(-hhat, rstd * mgh, gi, p);
      dx.set(base + i, m == Mutant::residual_grad_dropped ? dh : dh + static_cast<float>(dres.get(base + i)));
      dyf[base + i] = dyi;
      hhatf[base + i] = hhat;
    }
  }
  for (std::size_t i = 0; i < H; ++i)
    dw.set(i, dot_fp32(dyf.data() + i, hhatf.data() + i, d.rows, p, d.hidden, d.hidden));
  return {{"residual_out", ro}, {"y", y}, {"dx", dx}, {"dw", dw}};
}


// ---- the descriptor ------------------------------------------------------------------
const OpDescriptor& FusedAddRMSNormOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "fused_add_rmsnorm",
      1,
      {
          {"x", Role::input, Layout::rows, T, case_shape(), "[..., hidden] the sublayer output"},
          {"residual", Role::input, Layout::rows, T, case_shape(), "[..., hidden] the residual stream"},
          {"w", Role::input, Layout::per_column, T, last_dim(), "[hidden] weight"},
          {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of y", {"y"}},
          {"d_residual_out", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of residual_out", {"residual_out"}},
          {"residual_out", Role::output, Layout::rows, T, case_shape(), "h = x + residual, correctly rounded"},
          {"y", Role::output, Layout::rows, T, case_shape(), "h * rstd * w"},
          {"dx", Role::gradient, Layout::rows, T, case_shape(), "gradient of x (and of residual: the same tensor)", {"x", "residual"}},
          {"dw", Role::gradient, Layout::per_column, T, last_dim(), "gradient of w: a sum over rows", {"w"}},
      },
      {{"Forward", {"x", "residual", "w"}, {"residual_out", "y"}},
          {"Backward", {"x", "residual", "w", "dy", "d_residual_out"}, {"dx", "dw"}}},
      [](const CaseSpec& c) { return rows_of(c.shape); }};
  return d;
}

}  // namespace numgate::fused_add_rmsnorm

NUMGATE_REGISTER_OPS(fused_add_rmsnorm) { add(std::make_unique<numgate::fused_add_rmsnorm::FusedAddRMSNormOp>()); }
