// RMSNorm golden (FP64) and reference (FP32 intermediates) oracles, input patterns and
// mutants. Compiled with -ffp-contract=off: results do not depend on compiler flags.
#include "rmsnorm/rmsnorm_oracle.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "numgate/random.h"

namespace numgate::rmsnorm {
namespace {

RowShape dims_of(const CaseSpec& c) { return row_shape(c, "rmsnorm"); }

// Stream ids of the inputs (a case's tensors must draw from different streams).
enum : std::uint32_t { kStreamX = 1, kStreamW = 2, kStreamDy = 3, kStreamPattern = 4 };

}  // namespace

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::bf16_sum_of_squares: return "bf16_sum_of_squares";
    case Mutant::eps_outside_sqrt: return "eps_outside_sqrt";
    case Mutant::cast_before_weight: return "cast_before_weight";
  }
  return "?";
}

void apply_value_coverage_pattern(const CaseSpec& c, const std::string& op, Tensor& x, Tensor& w, Tensor& dy,
                                  double w_zero, double w_big, double w_one) {
  const RowShape d = row_shape(c, op);
  if (c.dtype != DType::fp16 || d.rows < 8 || d.hidden < 8)
    throw std::invalid_argument(op + " case '" + c.name + "': pattern value_coverage needs fp16, rows >= 8 and hidden >= 8");
  const RandomStream rp(c.seed, kStreamPattern);
  const double M = 65504.0, tiny = 0x1p-17, sqrt_eps = std::sqrt(c.param("eps"));
  const std::int64_t H = d.hidden;
  auto at = [&](std::int64_t r, std::int64_t j) { return static_cast<std::size_t>(r * H + j); };
  for (std::int64_t j = 0; j < H; ++j) {
    x.set(at(0, j), 0.0);
    dy.set(at(0, j), sqrt_eps * dy.get(at(0, j)));
    dy.set(at(1, j), 0.0);
    dy.set(at(2, j), tiny * rp.normal(at(2, j)));
    x.set(at(3, j), 1.0);
    x.set(at(4, j), 0.5 * rp.normal(at(4, j)));
    x.set(at(5, j), 0x1p-20 * rp.normal(at(5, j)));
  }
  x.set(at(3, 5), 3.0);
  x.set(at(4, 6), 0.75);
  x.set(at(5, 0), 1.0);
  x.set(at(5, 2), -1.0);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    x.set(at(r, 1), 0.0);
    dy.set(at(r, 1), 0.0);
    dy.set(at(r, 4), r == 1 ? 0.0 : tiny * rp.normal(at(r, 4) + 7));
    dy.set(at(r, 5), 0.0);
  }
  dy.set(at(3, 6), 0.2 * M);
  dy.set(at(4, 6), 0.4 * M);
  w.set(2, w_zero);
  w.set(5, w_big);
  w.set(6, w_one);
}

void apply_ill_conditioned_dy(const CaseSpec& c, const std::string& op, const std::vector<double>& h,
                              const std::vector<double>& scale, bool centred, Tensor& dy) {
  const RowShape d = row_shape(c, op);
  if (c.dtype != DType::fp32 && c.dtype != DType::fp64)
    throw std::invalid_argument(op + " case '" + c.name +
                                "': pattern ill_conditioned needs fp32 or fp64 (a bf16 or fp16 dy's rounding leaves a "
                                "residue an FP32 reference resolves)");
  const RandomStream rp(c.seed, kStreamPattern);
  const double eps = c.param("eps");
  const auto H = static_cast<std::size_t>(d.hidden);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * H;
    double mean = 0.0, ms = 0.0;
    if (centred) {
      for (std::size_t j = 0; j < H; ++j) mean += h[base + j];
      mean /= static_cast<double>(H);
    }
    for (std::size_t j = 0; j < H; ++j) ms += (h[base + j] - mean) * (h[base + j] - mean);
    const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(H) + eps);
    const double a = centred ? rp.normal(2 * static_cast<std::uint64_t>(r)) : 0.0;
    const double b = 1.0 + 0.25 * rp.normal(2 * static_cast<std::uint64_t>(r) + 1);
    for (std::size_t j = 0; j < H; ++j) dy.set(base + j, (a + b * (h[base + j] - mean) * rstd) / scale[j]);
  }
}

void apply_ill_conditioned_pattern(const CaseSpec& c, const std::string& op, const RandomStream& rx,
                                   const RandomStream& rw, double w_offset, bool centred, Tensor& x, Tensor& w,
                                   Tensor& dy) {
  const std::size_t n = x.numel(), H = w.numel();
  std::vector<double> h(n), scale(H);
  for (std::size_t i = 0; i < n; ++i) {
    x.set(i, 100.0 * rx.normal(i));
    h[i] = x.get(i);
  }
  for (std::size_t j = 0; j < H; ++j) {
    w.set(j, 0.75 + 0.5 * rw.uniform(j) - w_offset);
    scale[j] = w_offset + w.get(j);
  }
  apply_ill_conditioned_dy(c, op, h, scale, centred, dy);
}

std::map<std::string, Tensor> RMSNormOp::make_inputs(const CaseSpec& c) const {
  const RowShape d = dims_of(c);
  Tensor x(c.dtype, c.shape), w(c.dtype, {d.hidden}), dy(c.dtype, c.shape);
  const RandomStream rx(c.seed, kStreamX), rw(c.seed, kStreamW), rdy(c.seed, kStreamDy);
  const std::size_t n = x.numel();
  for (std::size_t i = 0; i < n; ++i) {
    x.set(i, rx.normal(i));
    dy.set(i, rdy.normal(i));
  }
  for (std::int64_t j = 0; j < d.hidden; ++j) w.set(j, 1.0 + 0.25 * rw.normal(j));  // trained-like gains around 1

  if (c.pattern == "normal") {
  } else if (c.pattern == "near_zero_variance") {  // mean(x^2) ~ 1e-10 << eps
    for (std::size_t i = 0; i < n; ++i) x.set(i, 1e-5 * rx.normal(i));
  } else if (c.pattern == "zero_row") {
    // Row rows/2 is all zeros: y = 0 exactly, dx = rstd * dy * w with rstd = 1/sqrt(eps),
    // finite. Its dy is scaled by sqrt(eps) so that dx has the other rows' magnitude:
    // otherwise the zero row's dx (1/sqrt(eps) = 1000x larger) would set the tensor's
    // max-abs threshold and hide errors in every other row.
    const std::int64_t r = d.rows / 2;
    const double sqrt_eps = std::sqrt(c.param("eps"));
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      x.set(r * d.hidden + i, 0.0);
      dy.set(r * d.hidden + i, sqrt_eps * rdy.normal(r * d.hidden + i));
    }
  } else if (c.pattern == "spiky") {  // every row: one element 100, the rest 0
    const RandomStream rp(c.seed, kStreamPattern);
    for (std::int64_t r = 0; r < d.rows; ++r) {
      const auto spike = static_cast<std::int64_t>(rp.uniform(r) * static_cast<double>(d.hidden));
      for (std::int64_t i = 0; i < d.hidden; ++i) x.set(r * d.hidden + i, i == spike ? 100.0 : 0.0);
    }
  } else if (c.pattern == "constant_300") {  // fp16: sum of 300^2 overflows fp16, y must be ~w
    for (std::size_t i = 0; i < n; ++i) x.set(i, 300.0);
  } else if (c.pattern == "value_coverage") {  // rmsnorm_oracle.h
    apply_value_coverage_pattern(c, "rmsnorm", x, w, dy, 0.0, 0.3 * 65504.0, 1.0);
  } else if (c.pattern == "ill_conditioned") {  // x ~ 100 N(0,1), w in [0.75, 1.25]: rmsnorm_oracle.h
    apply_ill_conditioned_pattern(c, "rmsnorm", rx, rw, 0.0, false, x, w, dy);
  } else {
    throw std::invalid_argument("rmsnorm case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, near_zero_variance, zero_row, spiky, constant_300, value_coverage, "
                                "ill_conditioned)");
  }
  return {{"x", x}, {"w", w}, {"dy", dy}};
}

std::map<std::string, GoldenTensor> RMSNormOp::golden(const CaseSpec& c,
                                                      const std::map<std::string, Tensor>& in) const {
  const RowShape d = dims_of(c);
  const double eps = c.param("eps");
  const Tensor &x = in.at("x"), &w = in.at("w"), &dy = in.at("dy");
  GoldenTensor y{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.hidden};
  GoldenTensor dx{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.hidden};
  GoldenTensor dw{Tensor(DType::fp64, {d.hidden}), Tensor(DType::fp64, {d.hidden}), d.rows + d.hidden};
  std::vector<double> dw_sum(d.hidden, 0.0), dw_abs(d.hidden, 0.0);
  const double n = static_cast<double>(d.hidden);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r * d.hidden);
    double ss = 0.0, gx = 0.0, gx_abs = 0.0;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      const double xi = x.get(base + i), gi = dy.get(base + i) * w.get(i);
      ss += xi * xi;
      gx += gi * xi;
      gx_abs += std::fabs(gi * xi);
    }
    const double rstd = 1.0 / std::sqrt(ss / n + eps);
    const double r3 = rstd * rstd * rstd;
    for (std::int64_t i = 0; i < d.hidden; ++i) {
      const double xi = x.get(base + i), wi = w.get(i), dyi = dy.get(base + i), gi = dyi * wi;
      const double yi = xi * rstd * wi;
      y.value.set(base + i, yi);
      y.abs_terms.set(base + i, std::fabs(yi));
      dx.value.set(base + i, rstd * gi - r3 * xi * (gx / n));
      dx.abs_terms.set(base + i, std::fabs(rstd * gi) + r3 * std::fabs(xi) * (gx_abs / n));
      const double t = dyi * xi * rstd;
      dw_sum[i] += t;
      dw_abs[i] += std::fabs(t);
    }
  }
  for (std::int64_t i = 0; i < d.hidden; ++i) {
    dw.value.set(i, dw_sum[i]);
    dw.abs_terms.set(i, dw_abs[i]);
  }
  return {{"y", y}, {"dx", dx}, {"dw", dw}};
}

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                Mutant m, const SumPolicy& p) {
  const RowShape d = dims_of(c);
  const float eps = static_cast<float>(c.param("eps"));
  const float n = static_cast<float>(d.hidden);
  const Tensor &x = in.at("x"), &w = in.at("w"), &dy = in.at("dy");
  Tensor y(c.dtype, c.shape), dx(c.dtype, c.shape), dw(c.dtype, {d.hidden});
  const auto H = static_cast<std::size_t>(d.hidden);
  // dy and xhat of every row, for dw = sum over rows of dy * xhat (a column reduction).
  std::vector<float> dyf(static_cast<std::size_t>(d.rows) * H), xhatf(dyf.size());
  std::vector<float> xr(H), gr(H);
  auto bf16 = [](float v) { return static_cast<float>(round_to_dtype(v, DType::bf16)); };
  auto out = [&](float v) { return static_cast<float>(round_to_dtype(v, c.dtype)); };
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * H;
    for (std::size_t i = 0; i < H; ++i) {
      xr[i] = static_cast<float>(x.get(base + i));
      gr[i] = static_cast<float>(dy.get(base + i)) * static_cast<float>(w.get(i));
    }
    float ss = 0.0f;
    if (m == Mutant::bf16_sum_of_squares) {
      for (std::size_t i = 0; i < H; ++i) ss = bf16(ss + xr[i] * xr[i]);
    } else {
      ss = dot_fp32(xr.data(), xr.data(), d.hidden, p);
    }
    const float gx = dot_fp32(gr.data(), xr.data(), d.hidden, p);
    const float rstd = m == Mutant::eps_outside_sqrt ? 1.0f / (std::sqrt(ss / n) + eps) : 1.0f / std::sqrt(ss / n + eps);
    const float mgx = gx / n;
    for (std::size_t i = 0; i < H; ++i) {
      const float xi = xr[i], wi = static_cast<float>(w.get(i));
      const float dyi = static_cast<float>(dy.get(base + i)), gi = gr[i];
      const float xhat = xi * rstd;
      y.set(base + i, m == Mutant::cast_before_weight ? out(wi * out(xhat)) : (xi * rstd) * wi);
      dx.set(base + i, rstd * mul_add(-xhat, rstd * mgx, gi, p));
      dyf[base + i] = dyi;
      xhatf[base + i] = xhat;
    }
  }
  for (std::size_t i = 0; i < H; ++i)
    dw.set(i, dot_fp32(dyf.data() + i, xhatf.data() + i, d.rows, p, d.hidden, d.hidden));
  return {{"y", y}, {"dx", dx}, {"dw", dw}};
}


// ---- the descriptor ------------------------------------------------------------------
const OpDescriptor& RMSNormOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "rmsnorm",
      2,  // 2: the zero_row pattern scales that row's dy
      {
          {"x", Role::input, Layout::rows, T, case_shape(), "[..., hidden] activations; leading dims flattened into rows"},
          {"w", Role::input, Layout::per_column, T, last_dim(), "[hidden] weight"},
          {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "[..., hidden] gradient of y", {"y"}},
          {"y", Role::output, Layout::rows, T, case_shape(), "x * rstd * w"},
          {"dx", Role::gradient, Layout::rows, T, case_shape(), "gradient of x", {"x"}},
          {"dw", Role::gradient, Layout::per_column, T, last_dim(), "gradient of w: a sum over rows", {"w"}},
      },
      {{"Forward", {"x", "w"}, {"y"}},
          {"Backward", {"x", "w", "dy"}, {"dx", "dw"}}},
      [](const CaseSpec& c) { return rows_of(c.shape); }};
  return d;
}

}  // namespace numgate::rmsnorm

NUMGATE_REGISTER_OPS(rmsnorm) { add(std::make_unique<numgate::rmsnorm::RMSNormOp>()); }
