// Cross-entropy golden (FP64) and reference (FP32 intermediates) oracles, input patterns,
// target validation and mutants. Compiled with -ffp-contract=off: results do not depend on
// compiler flags. The formulas are specified in cross_entropy_oracle.h.
#include "cross_entropy/cross_entropy_oracle.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numgate/random.h"

namespace numgate::cross_entropy {
namespace {

// Stream ids of the inputs (a case's tensors must draw from different streams).
enum : std::uint32_t { kStreamLogits = 1, kStreamTargets = 2, kStreamDloss = 3, kStreamPattern = 4 };

template <class A>
A max_nan(A a, A b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}

std::vector<std::int64_t> targets_of(const Tensor& t) {
  std::vector<std::int64_t> v(t.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(t.get(i));
  return v;
}

std::int64_t count_kept(const std::vector<std::int64_t>& tg, std::int64_t ignore) {
  std::int64_t n = 0;
  for (auto y : tg) n += y != ignore;
  return n;
}

std::vector<std::int64_t> loss_shape(const Config& k) {
  return k.reduction == 0 ? std::vector<std::int64_t>{k.tokens} : std::vector<std::int64_t>{1};
}

void require_valid_targets(const CaseSpec& c, const Config& k, const std::vector<std::int64_t>& tg) {
  const std::string e = check_targets(tg.data(), k.tokens, k.vocab, k.ignore_index);
  if (!e.empty()) throw std::invalid_argument("cross_entropy case '" + c.name + "': " + e);
}

}  // namespace

Config config_of(const CaseSpec& c) {
  if (c.shape.size() != 2 || c.shape[0] < 1 || c.shape[1] < 1)
    throw std::invalid_argument("cross_entropy case '" + c.name + "': shape must be [tokens >= 1, vocab >= 1]");
  Config k{c.shape[0], c.shape[1], static_cast<std::int64_t>(c.param("ignore_index")), c.param("label_smoothing"),
           c.param("z_loss"), c.param("softcap"), static_cast<int>(c.param("reduction"))};
  if (!(k.eps >= 0 && k.eps <= 1) || !(k.z_loss >= 0) || !(k.softcap >= 0) ||
      (k.reduction != 0 && k.reduction != 1 && k.reduction != 2) || c.param("reduction") != k.reduction)
    throw std::invalid_argument("cross_entropy case '" + c.name +
                                "': need label_smoothing in [0, 1], z_loss >= 0, softcap >= 0, reduction 0/1/2");
  return k;
}

std::string check_targets(const std::int64_t* targets, std::int64_t tokens, std::int64_t vocab,
                          std::int64_t ignore_index) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t y = targets[t];
    if (y != ignore_index && (y < 0 || y >= vocab))
      return "target " + std::to_string(y) + " of token " + std::to_string(t) + " is outside [0, " +
             std::to_string(vocab) + ") and is not ignore_index (" + std::to_string(ignore_index) + ")";
  }
  return {};
}

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::smoothing_counts_ignored: return "smoothing_counts_ignored";
    case Mutant::mean_over_all_tokens: return "mean_over_all_tokens";
    case Mutant::no_max_shift: return "no_max_shift";
    case Mutant::softcap_no_derivative: return "softcap_no_derivative";
    case Mutant::probs_in_logits_dtype: return "probs_in_logits_dtype";
  }
  return "?";
}

// Patterns (logits; targets uniform in [0, vocab) unless said otherwise):
//   normal       logits 2 N(0,1), no ignored token
//   mixed        logits 2 N(0,1); tokens t % 3 == 1 ignored; tokens t % 5 == 0 confident
//                (target logit set to the row maximum + 10)
//   confident    every token confident (target logit = row max + 10)
//   ill_conditioned  every target logit = row max + 25: loss and the target's dlogit cancel
//                below FP32's resolution (their gates are not valid; see the pattern's code)
//   softcap      logits 20 N(0,1) (of the order of a soft cap of 30); tokens t % 4 == 3 ignored
//   extreme      logits 1e4 N(0,1) (fp16: 1e3 N(0,1)); token 0: two equal logits of 1e8
//                (fp16: 6e4) at j = 0 and j = vocab / 2, target 0 (loss log 2); token 1:
//                -inf everywhere but one finite logit at j = vocab / 2, its target (loss 0,
//                dlogits 0). Needs tokens >= 2, vocab >= 3.
//   all_ignored  logits 2 N(0,1), every target ignore_index
//   nonfinite    logits 2 N(0,1); token 0: NaN at j = 3 (target 0); token 1: +Inf at j = 5
//                (target 1); token 2: -Inf at j = 7 (target 2); token 3: ignored, NaN at
//                j = 1 (never read into loss and dlogits). Needs tokens >= 4, vocab >= 8.
//   underflow_tail  logits 2 N(0,1); per token the row maximum 16 at j = 0 (the draws stay
//                within +-12) and a tail of 11 logits 16 - 87 - k / 2 at j = 1 + k, k = 0..10
//                (s - m from -87 to -92: p = e^(s - m) / S from 1.6e-38 down to 1.1e-40,
//                below FP32's smallest normal 2^-126 from s - m = -87.5 on, so g p is an
//                FP32 and a bf16 subnormal there); the target moved out of j <= 11. Exact in
//                bf16, fp16 and fp32. Needs vocab >= 16.
// dloss: N(0,1), shape [1] (mean, sum) or [tokens] (none).
std::map<std::string, Tensor> CrossEntropyOp::make_inputs(const CaseSpec& c) const {
  const Config k = config_of(c);
  const RandomStream rx(c.seed, kStreamLogits), rt(c.seed, kStreamTargets), rd(c.seed, kStreamDloss);
  Tensor x(c.dtype, c.shape), tg(DType::i64, {k.tokens}), dl(c.dtype, loss_shape(k));
  const std::size_t n = x.numel();
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const auto V = static_cast<std::size_t>(k.vocab);
  for (std::size_t i = 0; i < dl.numel(); ++i) dl.set(i, rd.normal(i));
  for (std::int64_t t = 0; t < k.tokens; ++t) {
    auto y = static_cast<std::int64_t>(rt.uniform(static_cast<std::uint64_t>(t)) * static_cast<double>(k.vocab));
    tg.set(static_cast<std::size_t>(t), static_cast<double>(std::min(y, k.vocab - 1)));
  }
  double scale = 2.0;
  if (c.pattern == "softcap") scale = 20.0;
  if (c.pattern == "extreme") scale = c.dtype == DType::fp16 ? 1e3 : 1e4;
  for (std::size_t i = 0; i < n; ++i) x.set(i, scale * rx.normal(i));
  auto ignore = [&](std::int64_t t) { tg.set(static_cast<std::size_t>(t), static_cast<double>(k.ignore_index)); };
  auto confident = [&](std::int64_t t) {
    const std::size_t base = static_cast<std::size_t>(t) * V;
    double m = -inf;
    for (std::size_t j = 0; j < V; ++j) m = std::max(m, x.get(base + j));
    x.set(base + static_cast<std::size_t>(tg.get(static_cast<std::size_t>(t))), m + 10.0);
  };

  if (c.pattern == "normal" || c.pattern == "softcap") {
    if (c.pattern == "softcap")
      for (std::int64_t t = 3; t < k.tokens; t += 4) ignore(t);
  } else if (c.pattern == "mixed") {
    for (std::int64_t t = 0; t < k.tokens; ++t) {
      if (t % 3 == 1) ignore(t);
      else if (t % 5 == 0) confident(t);
    }
  } else if (c.pattern == "confident") {
    for (std::int64_t t = 0; t < k.tokens; ++t) confident(t);
  } else if (c.pattern == "ill_conditioned") {
    // Every target logit 25 above its row's maximum: the other probabilities are < e^-25
    // each, so loss = lse - z_target = log(1 + sum_j e^(z_j - z_target)) < (V - 1) e^-25
    // (~1e-8 for V = 1024, resolved by FP64 next to lse ~ 30) and the target's dlogit
    // p_target - 1 cancel below FP32's resolution of 1 (2^-24): a same-precision
    // reference gives 0 for both, the gates of loss and dlogits are not valid (SPEC §4's
    // fallback decides).
    for (std::int64_t t = 0; t < k.tokens; ++t) {
      const std::size_t base = static_cast<std::size_t>(t) * V;
      double m = -inf;
      for (std::size_t j = 0; j < V; ++j) m = std::max(m, x.get(base + j));
      x.set(base + static_cast<std::size_t>(tg.get(static_cast<std::size_t>(t))), m + 25.0);
    }
  } else if (c.pattern == "all_ignored") {
    for (std::int64_t t = 0; t < k.tokens; ++t) ignore(t);
  } else if (c.pattern == "extreme") {
    if (k.tokens < 2 || k.vocab < 3)
      throw std::invalid_argument("cross_entropy case '" + c.name + "': pattern extreme needs tokens >= 2, vocab >= 3");
    const double big = c.dtype == DType::fp16 ? 6e4 : 1e8;
    const std::size_t mid = V / 2;
    x.set(0, big);
    x.set(mid, big);
    tg.set(0, 0.0);
    for (std::size_t j = 0; j < V; ++j) x.set(V + j, j == mid ? 3.0 : -inf);
    tg.set(1, static_cast<double>(mid));
  } else if (c.pattern == "nonfinite") {
    if (k.tokens < 4 || k.vocab < 8)
      throw std::invalid_argument("cross_entropy case '" + c.name + "': pattern nonfinite needs tokens >= 4, vocab >= 8");
    x.set(0 * V + 3, nan);
    tg.set(0, 0.0);
    x.set(1 * V + 5, inf);
    tg.set(1, 1.0);
    x.set(2 * V + 7, -inf);
    tg.set(2, 2.0);
    x.set(3 * V + 1, nan);
    ignore(3);
  } else if (c.pattern == "underflow_tail") {
    if (k.vocab < 16)
      throw std::invalid_argument("cross_entropy case '" + c.name + "': pattern underflow_tail needs vocab >= 16");
    constexpr std::size_t kTail = 11;
    for (std::int64_t t = 0; t < k.tokens; ++t) {
      const std::size_t base = static_cast<std::size_t>(t) * V;
      x.set(base, 16.0);
      for (std::size_t j = 0; j < kTail; ++j) x.set(base + 1 + j, 16.0 - 87.0 - 0.5 * static_cast<double>(j));
      const auto y = static_cast<std::int64_t>(tg.get(static_cast<std::size_t>(t)));
      const auto first = static_cast<std::int64_t>(kTail + 1);
      if (y < first) tg.set(static_cast<std::size_t>(t), static_cast<double>(first + y % (k.vocab - first)));
    }
  } else if (c.pattern == "value_coverage") {
    // fp16, reduction none, tokens >= 5, vocab >= 64 (issue 10, item 4):
    //   token 0: target logit 14.5, the rest 0: loss = log(1 + (V-1) e^-14.5) ~ 3e-5, subnormal
    //   token 1: target logit -30000, one logit +30000, the rest 0: loss ~ 60000, near fp16 max
    //   token 2: normal logits, dloss 40000: dlogits[target] ~ -40000 (p ~ 1/V), near fp16 max
    //   token 3: every logit -4.15625 (~ -ln 64): lse = 0.0026, m and log S cancel; all tied
    //   token 4: logits -20000 - 16 k (k in [0, 8)): every one very negative, loss finite
    if (c.dtype != DType::fp16 || k.reduction != 0 || k.tokens < 5 || k.vocab < 64)
      throw std::invalid_argument("cross_entropy case '" + c.name +
                                  "': pattern value_coverage needs fp16, reduction none, tokens >= 5, vocab >= 64");
    const RandomStream rp(c.seed, kStreamPattern);
    for (std::size_t j = 0; j < V; ++j) {
      x.set(j, j == 0 ? 14.5 : 0.0);
      x.set(V + j, j == 0 ? -30000.0 : j == 1 ? 30000.0 : 0.0);
      x.set(3 * V + j, -4.15625);
      x.set(4 * V + j, -20000.0 - 16.0 * std::floor(8.0 * rp.uniform(4 * V + j)));
    }
    tg.set(0, 0.0);
    tg.set(1, 0.0);
    dl.set(1, 0.5);
    dl.set(2, 40000.0);
  } else {
    throw std::invalid_argument("cross_entropy case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, mixed, confident, softcap, extreme, all_ignored, nonfinite, "
                                "value_coverage, ill_conditioned, underflow_tail)");
  }
  require_valid_targets(c, k, targets_of(tg));
  return {{"logits", x}, {"targets", tg}, {"dloss", dl}};
}

std::map<std::string, std::vector<bool>> CrossEntropyOp::nondifferentiable(
    const CaseSpec& c, const std::map<std::string, Tensor>& in) const {
  auto out = nonfinite_rows(*this, c, in);
  if (c.param("reduction") != 0 && out.count("logits")) out["logits"].assign(out["logits"].size(), true);
  return out;
}

std::map<std::string, GoldenTensor> CrossEntropyOp::golden(const CaseSpec& c,
                                                           const std::map<std::string, Tensor>& in) const {
  const Config k = config_of(c);
  const Tensor &x = in.at("logits"), &dl = in.at("dloss");
  const std::vector<std::int64_t> tg = targets_of(in.at("targets"));
  require_valid_targets(c, k, tg);
  const auto V = static_cast<std::size_t>(k.vocab);
  const double Vd = static_cast<double>(k.vocab), eps = k.eps, zl = k.z_loss, cap = k.softcap;
  const double tiny = std::numeric_limits<double>::denorm_min(), inf = std::numeric_limits<double>::infinity();
  const std::int64_t n = count_kept(tg, k.ignore_index);
  const auto ls = loss_shape(k);
  GoldenTensor loss{Tensor(DType::fp64, ls), Tensor(DType::fp64, ls),
                    k.vocab + 8 + (k.reduction == 0 ? 0 : k.tokens)};
  GoldenTensor lse{Tensor(DType::fp64, {k.tokens}), Tensor(DType::fp64, {k.tokens}), k.vocab + 4};
  GoldenTensor dx{Tensor(DType::fp64, c.shape), Tensor(DType::fp64, c.shape), k.vocab + 8};
  double total = 0, total_abs = 0;
  std::vector<double> s(V);
  for (std::int64_t t = 0; t < k.tokens; ++t) {
    const std::size_t base = static_cast<std::size_t>(t) * V;
    double m = -inf;
    for (std::size_t j = 0; j < V; ++j) {
      const double xj = x.get(base + j);
      s[j] = cap > 0 ? cap * std::tanh(xj / cap) : xj;
      m = max_nan(m, s[j]);
    }
    double S = 0, sum_s = 0, sum_abs_s = 0, pa = 0;
    for (std::size_t j = 0; j < V; ++j) S += std::exp(s[j] - m);
    const double lS = std::log(S), L = m + lS;
    for (std::size_t j = 0; j < V; ++j) {
      const double p = std::exp(s[j] - m) / S;
      if (p != 0) pa += p * (std::fabs(s[j]) + std::fabs(m));
      sum_s += s[j];
      sum_abs_s += std::fabs(s[j]);
    }
    const double a_lse = std::fabs(m) + std::fabs(lS) + pa;
    lse.value.set(static_cast<std::size_t>(t), L);
    lse.abs_terms.set(static_cast<std::size_t>(t), a_lse);
    const std::int64_t y = tg[static_cast<std::size_t>(t)];
    const bool kept = y != k.ignore_index;
    double ce = 0, ce_abs = 0;
    if (kept) {
      const double sy = s[static_cast<std::size_t>(y)];
      ce = lS + (1 - eps) * (m - sy);
      ce_abs = std::fabs(lS) + pa + (1 - eps) * (std::fabs(m) + std::fabs(sy));
      if (eps > 0) {
        ce += eps * (m - sum_s / Vd);
        ce_abs += eps * (std::fabs(m) + sum_abs_s / Vd);
      }
      if (zl > 0) {
        ce += zl * (L * L);
        ce_abs += zl * (L * L + 2 * std::fabs(L) * a_lse);
      }
      total += ce;
      total_abs += ce_abs;
    }
    if (k.reduction == 0) {
      loss.value.set(static_cast<std::size_t>(t), ce);
      loss.abs_terms.set(static_cast<std::size_t>(t), ce_abs);
    }
    // backward
    double g = k.reduction == 0 ? dl.get(static_cast<std::size_t>(t)) : dl.get(0);
    if (k.reduction == 1) g = n > 0 ? g / static_cast<double>(n) : 0.0;
    const double zfac = zl > 0 ? 1 + 2 * zl * L : 1.0;
    const double zabs = zl > 0 ? 1 + 2 * zl * (std::fabs(L) + a_lse) : 1.0;
    for (std::size_t j = 0; j < V; ++j) {
      if (!kept || (k.reduction == 1 && n == 0)) {
        dx.value.set(base + j, 0.0);
        dx.abs_terms.set(base + j, 0.0);
        continue;
      }
      const double xj = x.get(base + j);
      const double p = std::exp(s[j] - m) / S;
      const bool is_y = static_cast<std::int64_t>(j) == y;
      double d = p * zfac;
      if (is_y) d -= 1 - eps;
      if (eps > 0) d -= eps / Vd;
      double dcap = 1, cap_abs = 1;
      if (cap > 0) {
        const double th = std::tanh(xj / cap);
        dcap = 1 - th * th;
        cap_abs = dcap * (1 + std::fabs(xj / cap));
      }
      dx.value.set(base + j, g * (d * dcap));
      const bool exact_zero = (s[j] == -inf && !is_y && eps == 0) || (cap > 0 && std::isinf(xj));
      double a = std::fabs(g) * cap_abs *
                 ((p != 0 ? p * (1 + std::fabs(s[j]) + std::fabs(m)) * zabs : 0.0) + (is_y ? 1 - eps : 0.0) + eps / Vd);
      if (!exact_zero && a == 0) a = tiny;
      if (exact_zero) a = 0;
      dx.abs_terms.set(base + j, a);
    }
  }
  if (k.reduction != 0) {
    if (k.reduction == 1) {
      total = n > 0 ? total / static_cast<double>(n) : 0.0;
      total_abs = n > 0 ? total_abs / static_cast<double>(n) : 0.0;
    }
    loss.value.set(0, total);
    loss.abs_terms.set(0, total_abs);
  }
  return {{"loss", loss}, {"lse", lse}, {"dlogits", dx}};
}

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                Mutant mu, const SumPolicy& pol) {
  const Config k = config_of(c);
  const Tensor &x = in.at("logits"), &dl = in.at("dloss");
  const std::vector<std::int64_t> tg = targets_of(in.at("targets"));
  require_valid_targets(c, k, tg);
  const auto V = static_cast<std::size_t>(k.vocab);
  const float cf = static_cast<float>(k.softcap), ef = static_cast<float>(k.eps), zf = static_cast<float>(k.z_loss);
  const float Vf = static_cast<float>(k.vocab), inf = std::numeric_limits<float>::infinity();
  const std::int64_t n = mu == Mutant::mean_over_all_tokens ? k.tokens : count_kept(tg, k.ignore_index);
  Tensor loss(c.dtype, loss_shape(k)), lse(c.dtype, {k.tokens}), dx(c.dtype, c.shape);
  std::vector<float> s(V), ev(V), counted;  // counted: ce of the tokens the loss sums
  for (std::int64_t t = 0; t < k.tokens; ++t) {
    const std::size_t base = static_cast<std::size_t>(t) * V;
    float m = -inf;
    for (std::size_t j = 0; j < V; ++j) {
      const float xj = static_cast<float>(x.get(base + j));
      s[j] = cf > 0 ? cf * tanh_fp32(xj / cf, pol) : xj;
      m = max_nan(m, s[j]);
    }
    const bool no_shift = mu == Mutant::no_max_shift;
    for (std::size_t j = 0; j < V; ++j) ev[j] = exp_fp32(no_shift ? s[j] : s[j] - m, pol);
    const float S = sum_fp32(ev.data(), k.vocab, pol), sum_s = sum_fp32(s.data(), k.vocab, pol);
    const float lS = log_fp32(S, pol);
    const float L = no_shift ? lS : m + lS;
    lse.set(static_cast<std::size_t>(t), L);
    const std::int64_t y = tg[static_cast<std::size_t>(t)];
    const bool kept = y != k.ignore_index;
    // The smoothing-only mutant keeps ignored tokens in the smoothing term.
    const bool smooth_only = !kept && mu == Mutant::smoothing_counts_ignored && ef > 0;
    float ce = 0.0f;
    if (kept) {
      const float a = no_shift ? L - s[static_cast<std::size_t>(y)] : m - s[static_cast<std::size_t>(y)];
      const float base_term = no_shift ? 0.0f : lS;
      if (ef > 0) {
        const float sm = no_shift ? L - sum_s / Vf : m - sum_s / Vf;
        ce = mul_add(ef, sm, mul_add(1.0f - ef, a, base_term, pol), pol);
      } else {
        ce = base_term + a;
      }
      if (zf > 0) ce = mul_add(zf, L * L, ce, pol);
      counted.push_back(ce);
    } else if (smooth_only) {
      ce = ef * (lS + (m - sum_s / Vf));
      counted.push_back(ce);
    }
    if (k.reduction == 0) loss.set(static_cast<std::size_t>(t), ce);
    // backward
    float g = k.reduction == 0 ? static_cast<float>(dl.get(static_cast<std::size_t>(t))) : static_cast<float>(dl.get(0));
    if (k.reduction == 1) g = n > 0 ? g / static_cast<float>(n) : 0.0f;
    for (std::size_t j = 0; j < V; ++j) {
      if ((!kept && !smooth_only) || (k.reduction == 1 && n == 0)) {
        dx.set(base + j, 0.0);
        continue;
      }
      float p = exp_fp32(no_shift ? s[j] : s[j] - m, pol) / S;
      if (mu == Mutant::probs_in_logits_dtype) p = static_cast<float>(round_to_dtype(p, c.dtype));
      float d;
      if (smooth_only) {
        d = ef * (p - 1.0f / Vf);
      } else {
        d = zf > 0 ? p * mul_add(2.0f * zf, L, 1.0f, pol) : p;
        if (static_cast<std::int64_t>(j) == y) d = d - (1.0f - ef);
        if (ef > 0) d = d - ef / Vf;
      }
      if (cf > 0 && mu != Mutant::softcap_no_derivative) {
        const float th = tanh_fp32(static_cast<float>(x.get(base + j)) / cf, pol);
        d = d * (1.0f - th * th);
      }
      dx.set(base + j, g * d);
    }
  }
  if (k.reduction != 0) {
    float total = sum_fp32(counted.data(), static_cast<std::int64_t>(counted.size()), pol);
    if (k.reduction == 1) total = n > 0 ? total / static_cast<float>(n) : 0.0f;
    loss.set(0, total);
  }
  return {{"loss", loss}, {"lse", lse}, {"dlogits", dx}};
}


// ---- the descriptor ------------------------------------------------------------------
namespace {
std::vector<std::int64_t> per_token(const CaseSpec& c) { return {c.shape.empty() ? 0 : c.shape[0]}; }
std::vector<std::int64_t> loss_shape_of(const CaseSpec& c) {
  return c.param("reduction") == 0 ? per_token(c) : std::vector<std::int64_t>{1};
}
}  // namespace

const OpDescriptor& CrossEntropyOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "cross_entropy",
      1,
      {
          {"logits", Role::input, Layout::rows, T, case_shape(), "[tokens, vocab]; a row is one token"},
          {"targets", Role::index_input, Layout::row_indexed, DTypeRule::i64, per_token, "[tokens] class index or ignore_index"},
          {"dloss", Role::upstream_gradient, Layout::whole, T, loss_shape_of, "[1] (mean, sum) or [tokens] (none): gradient of loss", {"loss"}},
          {"loss", Role::output, Layout::whole, T, loss_shape_of, "[1] (mean, sum) or [tokens] (none); z-loss folded in"},
          {"lse", Role::output, Layout::row_indexed, T, per_token, "[tokens] log-sum-exp of the (soft-capped) logits"},
          {"dlogits", Role::gradient, Layout::rows, T, case_shape(), "[tokens, vocab] gradient of the logits", {"logits"}},
      },
      {{"Forward", {"logits", "targets"}, {"loss", "lse"}},
          {"Backward", {"logits", "targets", "dloss"}, {"dlogits"}}},
      [](const CaseSpec& c) { return c.shape.empty() ? std::int64_t{0} : c.shape[0]; }};
  return d;
}

}  // namespace numgate::cross_entropy

NUMGATE_REGISTER_OPS(cross_entropy) { add(std::make_unique<numgate::cross_entropy::CrossEntropyOp>()); }
