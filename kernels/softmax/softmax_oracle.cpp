// Softmax golden (FP64) and reference (FP32 intermediates) oracles, input patterns and
// mutants. Compiled with -ffp-contract=off: results do not depend on compiler flags.
#include "softmax/softmax_oracle.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numgate/random.h"

namespace numgate::softmax {
namespace {

struct Dims {
  std::int64_t rows, q_len, k_len;
};
Dims dims_of(const CaseSpec& c) {
  if (c.shape.empty() || c.shape.back() < 1)
    throw std::invalid_argument("softmax case '" + c.name + "': shape must end with k_len >= 1");
  const std::int64_t rows = rows_of(c.shape);
  const std::int64_t q = c.shape.size() >= 2 ? c.shape[c.shape.size() - 2] : 1;
  if (q < 1) throw std::invalid_argument("softmax case '" + c.name + "': q_len must be >= 1");
  return {rows, q, c.shape.back()};
}

int mask_mode_of(const CaseSpec& c) {
  const double m = c.param("mask_mode");
  if (m != 0 && m != 1 && m != 2)
    throw std::invalid_argument("softmax case '" + c.name + "': mask_mode must be 0, 1 or 2");
  return static_cast<int>(m);
}

/// The dtype's lowest finite value (-max_finite): a mask value at or below it masks out.
double lowest_finite(DType t) {
  switch (t) {
    case DType::fp16: return -65504.0;
    case DType::bf16: return -3.3895313892515355e38;
    case DType::fp32: return -3.4028234663852886e38;
    default: return -std::numeric_limits<double>::max();
  }
}

// Stream ids of the inputs (a case's tensors must draw from different streams).
enum : std::uint32_t { kStreamX = 1, kStreamMask = 2, kStreamDy = 3, kStreamMaskPick = 4 };

/// Which elements of a row are read (unmasked) and their additive bias; shared by all oracles.
struct RowMask {
  std::vector<char> keep;
  std::vector<double> bias;
};
void row_mask(const CaseSpec& c, const Dims& d, int mode, const Tensor& mask, std::int64_t r, bool top_left,
              RowMask& out) {
  const std::int64_t i = r % d.q_len;
  out.keep.assign(static_cast<std::size_t>(d.k_len), 1);
  out.bias.assign(static_cast<std::size_t>(d.k_len), 0.0);
  const double low = lowest_finite(c.dtype);
  for (std::int64_t j = 0; j < d.k_len; ++j) {
    if (mode == 1) {
      const std::int64_t last = top_left ? i : i + d.k_len - d.q_len;
      out.keep[j] = j <= last;
    } else if (mode == 2) {
      const double b = mask.get(static_cast<std::size_t>(i * d.k_len + j));
      if (b <= low) out.keep[j] = 0;
      else out.bias[j] = b;
    }
  }
}

/// NaN-propagating max.
template <class A>
A max_nan(A a, A b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}

/// The reference forward (FP32), with the forward mutants.
Tensor forward_reference(const CaseSpec& c, const Tensor& x, const Tensor& mask, Mutant mu, const SumPolicy& p = {}) {
  const Dims d = dims_of(c);
  const int mode = mask_mode_of(c);
  const float sf = static_cast<float>(c.param("scale"));
  const float inf = std::numeric_limits<float>::infinity();
  Tensor y(c.dtype, c.shape);
  RowMask rm;
  std::vector<float> z(static_cast<std::size_t>(d.k_len)), e(static_cast<std::size_t>(d.k_len)), kept;
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r * d.k_len);
    row_mask(c, d, mode, mask, r, mu == Mutant::causal_top_left, rm);
    float m = -inf;
    for (std::int64_t j = 0; j < d.k_len; ++j) {
      if (!rm.keep[j]) {
        z[j] = -inf;  // only the nan_fully_masked mutant reads it
        continue;
      }
      const float xs = static_cast<float>(x.get(base + j));
      const float bias = mode == 2 ? static_cast<float>(rm.bias[j]) : 0.0f;
      float zj;
      if (mu == Mutant::scale_after_softmax) zj = mode == 2 ? xs + bias : xs;
      else zj = mode == 2 ? mul_add(xs, sf, bias, p) : xs * sf;
      z[j] = zj;
      m = max_nan(m, zj);
    }
    if (mu == Mutant::nan_fully_masked) {
      // The additive arithmetic without the empty-row rule: masked scores are -inf.
      float s = 0.0f;
      for (std::int64_t j = 0; j < d.k_len; ++j) {
        e[j] = std::exp(z[j] - m);
        s = s + e[j];
      }
      for (std::int64_t j = 0; j < d.k_len; ++j) y.set(base + j, e[j] / s);
      continue;
    }
    if (m == -inf) {  // fully masked (or every score -inf): exactly 0
      for (std::int64_t j = 0; j < d.k_len; ++j) y.set(base + j, 0.0);
      continue;
    }
    kept.clear();
    for (std::int64_t j = 0; j < d.k_len; ++j) {
      if (!rm.keep[j]) continue;
      e[j] = exp_fp32(mu == Mutant::no_max_subtraction ? z[j] : z[j] - m, p);
      if (mu == Mutant::exp_in_output_dtype) e[j] = static_cast<float>(round_to_dtype(e[j], c.dtype));
      kept.push_back(e[j]);
    }
    const float s = sum_fp32(kept.data(), static_cast<std::int64_t>(kept.size()), p);
    for (std::int64_t j = 0; j < d.k_len; ++j) {
      if (!rm.keep[j]) {
        y.set(base + j, 0.0);
        continue;
      }
      float v = e[j] / s;
      if (mu == Mutant::scale_after_softmax) v = sf * v;
      y.set(base + j, v);
    }
  }
  return y;
}

}  // namespace

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::nan_fully_masked: return "nan_fully_masked";
    case Mutant::no_max_subtraction: return "no_max_subtraction";
    case Mutant::scale_after_softmax: return "scale_after_softmax";
    case Mutant::causal_top_left: return "causal_top_left";
    case Mutant::dx_missing_scale: return "dx_missing_scale";
    case Mutant::exp_in_output_dtype: return "exp_in_output_dtype";
  }
  return "?";
}

std::map<std::string, Tensor> SoftmaxOp::make_inputs(const CaseSpec& c) const {
  const Dims d = dims_of(c);
  const int mode = mask_mode_of(c);
  Tensor x(c.dtype, c.shape), mask(c.dtype, {d.q_len, d.k_len}), dy(c.dtype, c.shape);
  const RandomStream rx(c.seed, kStreamX), rm(c.seed, kStreamMask), rdy(c.seed, kStreamDy),
      rpick(c.seed, kStreamMaskPick);
  const std::size_t n = x.numel();
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) dy.set(i, rdy.normal(i));

  if (c.pattern == "normal") {  // attention-like logits: |scale * x| up to ~2.5 (scale 1/8)
    for (std::size_t i = 0; i < n; ++i) x.set(i, 3.0 * rx.normal(i));
  } else if (c.pattern == "large") {
    // Very large scores: fp16 |x| up to ~60000, else up to ~6e30. Without the max
    // subtracted, expf(scale * x) overflows FP32 (scale * x > 88.7).
    const double s = c.dtype == DType::fp16 ? 1e4 : 1e30;
    for (std::size_t i = 0; i < n; ++i) x.set(i, s * rx.normal(i));
  } else if (c.pattern == "very_negative") {
    // Every score very negative, spread 1% (fp16 around -50000, else around -1e30):
    // without the max subtracted every exp underflows to 0 and the row is 0 / 0.
    const double s = c.dtype == DType::fp16 ? 5e4 : 1e30;
    for (std::size_t i = 0; i < n; ++i) x.set(i, -s * (1.0 + 0.01 * rx.normal(i)));
  } else if (c.pattern == "nonfinite") {
    // Row 0: a NaN in x; row 1: +Inf; row 2: -Inf (an unmasked -Inf score is just a 0);
    // row 3: a NaN in dy (dx of row 3 NaN, y finite). Needs rows >= 4. Under a mask, an
    // element at a masked position is not read (its row stays finite).
    if (d.rows < 4) throw std::invalid_argument("softmax case '" + c.name + "': pattern nonfinite needs rows >= 4");
    for (std::size_t i = 0; i < n; ++i) x.set(i, 3.0 * rx.normal(i));
    x.set(static_cast<std::size_t>(0 * d.k_len + 3 % d.k_len), nan);
    x.set(static_cast<std::size_t>(1 * d.k_len + 5 % d.k_len), inf);
    x.set(static_cast<std::size_t>(2 * d.k_len + 7 % d.k_len), -inf);
    dy.set(static_cast<std::size_t>(3 * d.k_len + 9 % d.k_len), nan);
  } else if (c.pattern == "ill_conditioned") {
    // A genuinely ill-conditioned backward (SPEC §4's fallback): dy constant along each row
    // (a_r = 1 + 0.25 N(0,1), rounded once), so dx = y (dy - sum_j dy_j y_j) = a_r y (1 -
    // sum_j y_j) cancels to the rounding of the row sum of y: |dx| ~ 1e-16 a y in FP64,
    // while an FP32 evaluation leaves ~1e-7 a y: dx's gate is not valid. Scores as normal.
    for (std::size_t i = 0; i < n; ++i) x.set(i, 3.0 * rx.normal(i));
    const RandomStream rrow(c.seed, kStreamDy + 100);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t row = i / static_cast<std::size_t>(d.k_len);
      dy.set(i, 1.0 + 0.25 * rrow.normal(row));
    }
  } else {
    throw std::invalid_argument("softmax case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, large, very_negative, nonfinite, ill_conditioned)");
  }

  if (mode == 2) {
    // Additive mask, per element: ~25% masked (alternately -inf and the dtype's lowest
    // finite value), ~25% a finite bias (ALiBi-like, |b| up to ~6), else 0. Query 0 is
    // fully masked (half -inf, half lowest finite) and query 1 (when q_len >= 3) has a
    // single unmasked element, at k_len / 2: its y is exactly 1 there.
    const double low = lowest_finite(c.dtype);
    for (std::int64_t i = 0; i < d.q_len; ++i) {
      for (std::int64_t j = 0; j < d.k_len; ++j) {
        const auto k = static_cast<std::size_t>(i * d.k_len + j);
        const double u = rpick.uniform(k);
        double v = 0.0;
        if (u < 0.25) v = (k % 2) ? -inf : low;
        else if (u < 0.5) v = rm.normal(k);
        if (i == 0 && d.q_len >= 2) v = (j % 2) ? -inf : low;
        if (i == 1 && d.q_len >= 3) v = j == d.k_len / 2 ? 0.0 : ((j % 2) ? low : -inf);
        mask.set(k, v);
      }
    }
  }
  Tensor y_fwd = forward_reference(c, x, mask, Mutant::none);
  return {{"x", x}, {"mask", mask}, {"dy", dy}, {"y_fwd", y_fwd}};
}

// abs_terms (for the conditioning envelope; condition = abs_terms / |golden|):
//   y_j  = e_j / s: not a sum of terms; an FP32 evaluation errs by about
//          u (|z_j| + |m|) relative (scale * x and z - m rounded, then exp) plus the sum's
//          and the divide's roundings, so abs_terms = y_j (1 + |z_j| + |m|), envelope k_len.
//          Masked elements and fully masked rows: 0 (every term is 0: exact zeros required).
//          An unmasked element whose exp underflows FP64 is given the smallest positive
//          double, so an underflow is never declared an exact zero.
//   dx_j = scale y_j dy_j - scale y_j sum_k dy_k y_k
//          -> |scale| |y_j| (|dy_j| + sum_k |dy_k y_k|), envelope k_len + 2;
//          0 (exact zero) wherever y_fwd_j = 0, e.g. masked positions.
std::map<std::string, std::vector<bool>> SoftmaxOp::nondifferentiable(const CaseSpec& c,
                                                                      const std::map<std::string, Tensor>& in) const {
  auto out = nonfinite_rows(*this, c, in);
  const Tensor& x = in.at("x");
  const std::size_t n = x.numel(), k = static_cast<std::size_t>(c.shape.back());
  std::vector<bool> m = out.count("x") ? out.at("x") : std::vector<bool>(n, false);
  const double scale = std::fabs(c.param("scale"));
  for (std::size_t r = 0; r < n / k; ++r) {
    bool huge = false;
    for (std::size_t j = 0; j < k; ++j) huge = huge || scale * std::fabs(x.get(r * k + j)) > 0x1p40;
    if (huge)
      for (std::size_t j = 0; j < k; ++j) m[r * k + j] = true;
  }
  out["x"] = m;
  return out;
}

std::map<std::string, GoldenTensor> SoftmaxOp::golden(const CaseSpec& c, const std::map<std::string, Tensor>& in) const {
  const Dims d = dims_of(c);
  const int mode = mask_mode_of(c);
  const double scale = c.param("scale");
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor &x = in.at("x"), &mask = in.at("mask"), &dy = in.at("dy"), &yf = in.at("y_fwd");
  GoldenTensor y{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.k_len};
  GoldenTensor dx{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), d.k_len + 2};
  RowMask rm;
  std::vector<double> z(static_cast<std::size_t>(d.k_len));
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r * d.k_len);
    row_mask(c, d, mode, mask, r, false, rm);
    double m = -inf;
    for (std::int64_t j = 0; j < d.k_len; ++j) {
      if (!rm.keep[j]) continue;
      z[j] = scale * x.get(base + j) + rm.bias[j];
      m = max_nan(m, z[j]);
    }
    if (m == -inf) {
      for (std::int64_t j = 0; j < d.k_len; ++j) {
        y.value.set(base + j, 0.0);
        y.abs_terms.set(base + j, 0.0);
      }
    } else {
      double s = 0.0;
      for (std::int64_t j = 0; j < d.k_len; ++j)
        if (rm.keep[j]) s += std::exp(z[j] - m);
      for (std::int64_t j = 0; j < d.k_len; ++j) {
        if (!rm.keep[j]) {
          y.value.set(base + j, 0.0);
          y.abs_terms.set(base + j, 0.0);
          continue;
        }
        const double v = std::exp(z[j] - m) / s;
        y.value.set(base + j, v);
        double a = v * (1.0 + std::fabs(z[j]) + std::fabs(m));
        if (a == 0.0) a = std::numeric_limits<double>::denorm_min();
        y.abs_terms.set(base + j, a);
      }
    }
    // Backward from the saved output.
    double dot = 0.0, dot_abs = 0.0;
    for (std::int64_t j = 0; j < d.k_len; ++j) {
      dot += dy.get(base + j) * yf.get(base + j);
      dot_abs += std::fabs(dy.get(base + j) * yf.get(base + j));
    }
    for (std::int64_t j = 0; j < d.k_len; ++j) {
      const double yj = yf.get(base + j), dyj = dy.get(base + j);
      dx.value.set(base + j, scale * yj * (dyj - dot));
      dx.abs_terms.set(base + j, std::fabs(scale) * std::fabs(yj) * (std::fabs(dyj) + dot_abs));
    }
  }
  return {{"y", y}, {"dx", dx}};
}

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                Mutant m, const SumPolicy& p) {
  const Dims d = dims_of(c);
  const float sf = static_cast<float>(c.param("scale"));
  const Tensor &x = in.at("x"), &mask = in.at("mask"), &dy = in.at("dy"), &yf = in.at("y_fwd");
  Tensor y = forward_reference(c, x, mask, m, p);
  Tensor dx(c.dtype, c.shape);
  const auto K = static_cast<std::size_t>(d.k_len);
  std::vector<float> dyr(K), yr(K);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * K;
    for (std::size_t j = 0; j < K; ++j) {
      dyr[j] = static_cast<float>(dy.get(base + j));
      yr[j] = static_cast<float>(yf.get(base + j));
    }
    const float dot = dot_fp32(dyr.data(), yr.data(), d.k_len, p);
    for (std::size_t j = 0; j < K; ++j) {
      const float g = yr[j] * (dyr[j] - dot);
      dx.set(base + j, m == Mutant::dx_missing_scale ? g : sf * g);
    }
  }
  return {{"y", y}, {"dx", dx}};
}


// ---- the descriptor ------------------------------------------------------------------
namespace {
// [q_len, k_len]: q_len = shape[-2] (1 for rank 1).
std::vector<std::int64_t> mask_shape(const CaseSpec& c) {
  const std::int64_t q = c.shape.size() >= 2 ? c.shape[c.shape.size() - 2] : 1;
  return {q, c.shape.empty() ? 0 : c.shape.back()};
}
}  // namespace

const OpDescriptor& SoftmaxOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "softmax",
      1,
      {
          {"x", Role::input, Layout::rows, T, case_shape(), "[..., q_len, k_len] scores; row r is query r mod q_len"},
          {"mask", Role::input, Layout::whole, T, mask_shape, "[q_len, k_len] additive mask (mask_mode 2; zeros otherwise)", {}, "a constant of the attention pattern: no gradient is gated"},
          {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of y", {"y"}},
          {"y_fwd", Role::saved_forward, Layout::rows, T, case_shape(), "the saved forward output (the reference y, case dtype)", {"y"}},
          {"y", Role::output, Layout::rows, T, case_shape(), "softmax(scale * x + mask) over the last dim"},
          {"dx", Role::gradient, Layout::rows, T, case_shape(), "scale * y_fwd * (dy - sum(dy * y_fwd))", {"x"}},
      },
      {{"Forward", {"x", "mask"}, {"y"}},
          {"Backward", {"y_fwd", "dy"}, {"dx"}}},
      [](const CaseSpec& c) { return rows_of(c.shape); }};
  return d;
}

}  // namespace numgate::softmax

NUMGATE_REGISTER_OPS(softmax) { add(std::make_unique<numgate::softmax::SoftmaxOp>()); }
