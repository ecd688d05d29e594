// RoPE golden (FP64) and reference (declared FP32 policy, rope_math.h) oracles, input
// patterns and mutants. Compiled with -ffp-contract=off: results do not depend on
// compiler flags.
#include "rope/rope_oracle.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numgate/random.h"
#include "rope/rope_math.h"

namespace numgate::rope {
namespace {

// Stream ids of the inputs (a case's tensors draw from different streams).
enum : std::uint32_t { kStreamQ = 1, kStreamK = 2, kStreamDq = 3, kStreamDk = 4 };

// Long positions: 1857, 15962 and 32767 (the examples: an angle held in bf16 or
// fp16, or a bf16 cos/sin table, is visibly wrong there), their neighbours and powers of
// two, with a 0 and a 1 in between (angle 0 / angle = inv_freq exactly).
constexpr std::int64_t kLongPositions[] = {32767, 1857, 15962, 32766, 0, 24575, 1, 30001, 16384, 8191, 2047, 32000};

// Flat element indices of pair f of a head starting at `base`.
struct Pair {
  std::size_t i1, i2;
};
Pair pair_of(std::size_t base, std::int64_t f, std::int64_t d, bool interleaved) {
  if (interleaved) return {base + static_cast<std::size_t>(2 * f), base + static_cast<std::size_t>(2 * f + 1)};
  return {base + static_cast<std::size_t>(f), base + static_cast<std::size_t>(f + d / 2)};
}

bool interleaved_of(const CaseSpec& c) {
  const double v = c.param("interleaved");
  if (v != 0.0 && v != 1.0)
    throw std::invalid_argument("rope case '" + c.name + "': parameter interleaved must be 0 or 1");
  return v != 0.0;
}

std::vector<std::int64_t> positions_of(const Tensor& p) {
  std::vector<std::int64_t> v(p.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(p.get(i));
  return v;
}

}  // namespace

Dims dims_of(const CaseSpec& c) {
  if (c.shape.size() != 4)
    throw std::invalid_argument("rope case '" + c.name + "': shape must be q's [batch, seq, q_heads, head_dim]");
  Dims d{c.shape[0], c.shape[1], c.shape[2], static_cast<std::int64_t>(c.param("kv_heads")), c.shape[3]};
  if (d.batch < 1 || d.seq < 1 || d.q_heads < 1 || d.kv_heads < 1 || d.q_heads % d.kv_heads != 0 ||
      d.head_dim < 2 || d.head_dim % 2 != 0 || d.head_dim > math::kMaxHeadDim)
    throw std::invalid_argument("rope case '" + c.name +
                                "': need batch, seq, q_heads, kv_heads >= 1, kv_heads dividing q_heads, "
                                "head_dim even in [2, 1024]");
  return d;
}

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::angle_in_bf16: return "angle_in_bf16";
    case Mutant::angle_in_fp16: return "angle_in_fp16";
    case Mutant::wrong_pairing: return "wrong_pairing";
    case Mutant::inv_freq_wrong_head_dim: return "inv_freq_wrong_head_dim";
    case Mutant::backward_not_inverted: return "backward_not_inverted";
  }
  return "?";
}

std::map<std::string, Tensor> RopeOp::make_inputs(const CaseSpec& c) const {
  const Dims d = dims_of(c);
  const bool il = interleaved_of(c);
  const std::vector<std::int64_t> kshape{d.batch, d.seq, d.kv_heads, d.head_dim};
  Tensor q(c.dtype, c.shape), k(c.dtype, kshape), dq(c.dtype, c.shape), dk(c.dtype, kshape);
  Tensor pos(DType::i64, {d.batch, d.seq});
  const RandomStream rq(c.seed, kStreamQ), rk(c.seed, kStreamK), rdq(c.seed, kStreamDq), rdk(c.seed, kStreamDk);
  for (std::size_t i = 0; i < q.numel(); ++i) {
    q.set(i, rq.normal(i));
    dq.set(i, rdq.normal(i));
  }
  for (std::size_t i = 0; i < k.numel(); ++i) {
    k.set(i, rk.normal(i));
    dk.set(i, rdk.normal(i));
  }
  auto set_pos = [&](std::int64_t b, std::int64_t t, std::int64_t p) {
    pos.set(static_cast<std::size_t>(b * d.seq + t), static_cast<double>(p));
  };
  const std::int64_t n_long = static_cast<std::int64_t>(sizeof(kLongPositions) / sizeof(kLongPositions[0]));
  if (c.pattern == "normal") {  // 0 .. seq-1 in every sequence
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t t = 0; t < d.seq; ++t) set_pos(b, t, t);
  } else if (c.pattern == "longpos") {  // 32767, 1857, 15962, ... cycled over the tokens
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t t = 0; t < d.seq; ++t) set_pos(b, t, kLongPositions[(b * d.seq + t) % n_long]);
  } else if (c.pattern == "leftpad") {
    // A left-padded batch, positions as HF builds them (cumsum(mask) - 1, pads filled with
    // 1): sequence b has (2b) % seq pad tokens at position 1, then 0, 1, 2, ...
    for (std::int64_t b = 0; b < d.batch; ++b) {
      const std::int64_t pad = (2 * b) % d.seq;
      for (std::int64_t t = 0; t < d.seq; ++t) set_pos(b, t, t < pad ? 1 : t - pad);
    }
  } else if (c.pattern == "offset") {  // continuation / chunked prefill: sequence b starts at 17 + 4093 b
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t t = 0; t < d.seq; ++t) set_pos(b, t, 17 + 4093 * b + t);
  } else if (c.pattern == "value_coverage") {
    // fp16, positions 0 .. seq-1, q_heads >= 2, head_dim >= 8 (issue 10, item 4):
    //   q and dq_rot of token 0, head 0: all 0 (a row of q_rot and dq exactly 0)
    //   frequency 1 (both elements of its pair): 0 in q, k, dq_rot, dk_rot (columns exactly 0)
    //   frequency 2 at token 0 (position 0: angle 0), q head 1 and kv head 0: both elements
    //     0.6 * 65504 in q, k, dq_rot, dk_rot (outputs near fp16 max)
    //   frequency 3: 2^-20 N(0,1) everywhere (subnormal outputs)
    if (c.dtype != DType::fp16 || d.q_heads < 2 || d.head_dim < 8)
      throw std::invalid_argument("rope case '" + c.name + "': pattern value_coverage needs fp16, q heads >= 2 and "
                                  "head_dim >= 8");
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t t = 0; t < d.seq; ++t) set_pos(b, t, t);
    const double big = 0.6 * 65504.0;
    auto base = [&](std::int64_t tok, std::int64_t heads, std::int64_t h) {
      return static_cast<std::size_t>((tok * heads + h) * d.head_dim);
    };
    auto each_head = [&](Tensor& t, std::int64_t heads, const RandomStream& r) {
      for (std::int64_t tok = 0; tok < d.tokens(); ++tok)
        for (std::int64_t h = 0; h < heads; ++h) {
          const Pair z = pair_of(base(tok, heads, h), 1, d.head_dim, il), s = pair_of(base(tok, heads, h), 3, d.head_dim, il);
          t.set(z.i1, 0.0);
          t.set(z.i2, 0.0);
          t.set(s.i1, 0x1p-20 * r.normal(s.i1 + 11));
          t.set(s.i2, 0x1p-20 * r.normal(s.i2 + 11));
        }
    };
    each_head(q, d.q_heads, rq);
    each_head(k, d.kv_heads, rk);
    each_head(dq, d.q_heads, rdq);
    each_head(dk, d.kv_heads, rdk);
    for (std::int64_t j = 0; j < d.head_dim; ++j) {
      q.set(base(0, d.q_heads, 0) + static_cast<std::size_t>(j), 0.0);
      dq.set(base(0, d.q_heads, 0) + static_cast<std::size_t>(j), 0.0);
    }
    for (Tensor* t : {&q, &dq}) {
      const Pair p = pair_of(base(0, d.q_heads, 1), 2, d.head_dim, il);
      t->set(p.i1, big);
      t->set(p.i2, big);
    }
    for (Tensor* t : {&k, &dk}) {
      const Pair p = pair_of(base(0, d.kv_heads, 0), 2, d.head_dim, il);
      t->set(p.i1, big);
      t->set(p.i2, big);
    }
  } else if (c.pattern == "nonfinite") {
    // NaN / +Inf / -Inf at the lowest frequency (angle = p * ~1e-4: cos ~ 1, sin > 0 in
    // both FP32 and FP64, so golden and reference agree on the signs of the infinities),
    // positions 3 + t + 5b > 0. Needs seq >= 2.
    if (d.seq < 2) throw std::invalid_argument("rope case '" + c.name + "': pattern nonfinite needs seq >= 2");
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t t = 0; t < d.seq; ++t) set_pos(b, t, 3 + t + 5 * b);
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const std::int64_t f = d.head_dim / 2 - 1;
    auto head_base = [&](std::int64_t tok, std::int64_t heads, std::int64_t h) {
      return static_cast<std::size_t>((tok * heads + h) * d.head_dim);
    };
    q.set(pair_of(head_base(0, d.q_heads, 0), f, d.head_dim, il).i1, nan);
    q.set(pair_of(head_base(1, d.q_heads, d.q_heads - 1), f, d.head_dim, il).i2, inf);
    k.set(pair_of(head_base(0, d.kv_heads, 0), f, d.head_dim, il).i1, -inf);
    dq.set(pair_of(head_base(d.tokens() - 1, d.q_heads, 0), f, d.head_dim, il).i1, inf);
    dk.set(pair_of(head_base(1, d.kv_heads, d.kv_heads - 1), f, d.head_dim, il).i2, nan);
  } else {
    throw std::invalid_argument("rope case '" + c.name + "': unknown pattern '" + c.pattern +
                                "' (known: normal, longpos, leftpad, offset, nonfinite, value_coverage)");
  }
  return {{"q", q}, {"k", k}, {"positions", pos}, {"dq_rot", dq}, {"dk_rot", dk}};
}

std::map<std::string, std::vector<bool>> RopeOp::nondifferentiable(const CaseSpec& c,
                                                                   const std::map<std::string, Tensor>& in) const {
  const std::size_t tokens = static_cast<std::size_t>(c.shape.at(0) * c.shape.at(1));
  std::vector<bool> bad(tokens, false);
  for (const char* n : {"q", "k", "dq_rot", "dk_rot"}) {
    const Tensor& t = in.at(n);
    const std::size_t per = t.numel() / tokens;
    for (std::size_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.get(i))) bad[i / per] = true;
  }
  std::map<std::string, std::vector<bool>> out;
  for (const char* n : {"q", "k"}) {
    const std::size_t numel = in.at(n).numel(), per = numel / tokens;
    std::vector<bool> m(numel);
    for (std::size_t i = 0; i < numel; ++i) m[i] = bad[i / per];
    out[n] = m;
  }
  return out;
}

std::map<std::string, GoldenTensor> RopeOp::golden(const CaseSpec& c, const std::map<std::string, Tensor>& in) const {
  const Dims d = dims_of(c);
  const bool il = interleaved_of(c);
  const double theta = c.param("theta");
  const std::int64_t half = d.head_dim / 2;
  const std::vector<std::int64_t> pos = positions_of(in.at("positions"));
  std::vector<double> inv(static_cast<std::size_t>(half));
  for (std::int64_t f = 0; f < half; ++f) inv[f] = math::inv_freq_fp64(theta, f, d.head_dim);

  auto apply = [&](const Tensor& x, std::int64_t heads, double sign) {
    GoldenTensor g{Tensor(DType::fp64, x.shape), Tensor(DType::fp64, x.shape), 2};
    std::vector<double> cs(half), sn(half), ang(half);
    for (std::int64_t t = 0; t < d.tokens(); ++t) {
      for (std::int64_t f = 0; f < half; ++f) {
        ang[f] = static_cast<double>(pos[t]) * inv[f];
        cs[f] = std::cos(ang[f]);
        sn[f] = sign * std::sin(ang[f]);
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::size_t base = static_cast<std::size_t>((t * heads + h) * d.head_dim);
        for (std::int64_t f = 0; f < half; ++f) {
          const Pair p = pair_of(base, f, d.head_dim, il);
          const double x1 = x.get(p.i1), x2 = x.get(p.i2);
          g.value.set(p.i1, x1 * cs[f] - x2 * sn[f]);
          g.value.set(p.i2, x2 * cs[f] + x1 * sn[f]);
          const double angle_term = ang[f] == 0.0 ? 0.0 : std::fabs(ang[f]) * (std::fabs(x1) + std::fabs(x2));
          g.abs_terms.set(p.i1, std::fabs(x1 * cs[f]) + std::fabs(x2 * sn[f]) + angle_term);
          g.abs_terms.set(p.i2, std::fabs(x2 * cs[f]) + std::fabs(x1 * sn[f]) + angle_term);
        }
      }
    }
    return g;
  };
  return {{"q_rot", apply(in.at("q"), d.q_heads, 1.0)},
          {"k_rot", apply(in.at("k"), d.kv_heads, 1.0)},
          {"dq", apply(in.at("dq_rot"), d.q_heads, -1.0)},
          {"dk", apply(in.at("dk_rot"), d.kv_heads, -1.0)}};
}

std::map<std::string, Tensor> reference_variant(const CaseSpec& c, const std::map<std::string, Tensor>& in,
                                                Mutant m, const SumPolicy& pol) {
  const Dims d = dims_of(c);
  bool il = interleaved_of(c);
  if (m == Mutant::wrong_pairing) il = !il;
  const double theta = c.param("theta");
  const std::int64_t half = d.head_dim / 2;
  const std::vector<std::int64_t> pos = positions_of(in.at("positions"));
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (std::int64_t f = 0; f < half; ++f)
    inv[f] = math::inv_freq(theta, f, m == Mutant::inv_freq_wrong_head_dim ? 2 * d.head_dim : d.head_dim);

  auto apply = [&](const Tensor& x, std::int64_t heads, bool backward) {
    Tensor y(c.dtype, x.shape);
    std::vector<float> cs(half), sn(half);
    for (std::int64_t t = 0; t < d.tokens(); ++t) {
      for (std::int64_t f = 0; f < half; ++f) {
        float a = math::angle_of(pos[t], inv[f]);
        if (m == Mutant::angle_in_bf16) a = static_cast<float>(round_to_dtype(a, DType::bf16));
        if (m == Mutant::angle_in_fp16) a = static_cast<float>(round_to_dtype(a, DType::fp16));
        math::cos_sin(a, cs[f], sn[f]);
        if (backward && m != Mutant::backward_not_inverted) sn[f] = -sn[f];
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::size_t base = static_cast<std::size_t>((t * heads + h) * d.head_dim);
        for (std::int64_t f = 0; f < half; ++f) {
          const Pair p = pair_of(base, f, d.head_dim, il);
          float y1, y2;
          const float x1 = static_cast<float>(x.get(p.i1)), x2 = static_cast<float>(x.get(p.i2));
          if (pol.fma) {  // each rotation as one FMA and one product
            y1 = std::fmaf(x1, cs[f], -(x2 * sn[f]));
            y2 = std::fmaf(x2, cs[f], x1 * sn[f]);
          } else {
            math::rotate(x1, x2, cs[f], sn[f], y1, y2);
          }
          y.set(p.i1, y1);
          y.set(p.i2, y2);
        }
      }
    }
    return y;
  };
  return {{"q_rot", apply(in.at("q"), d.q_heads, false)},
          {"k_rot", apply(in.at("k"), d.kv_heads, false)},
          {"dq", apply(in.at("dq_rot"), d.q_heads, true)},
          {"dk", apply(in.at("dk_rot"), d.kv_heads, true)}};
}


// ---- the descriptor ------------------------------------------------------------------
namespace {
std::vector<std::int64_t> k_shape(const CaseSpec& c) {
  if (c.shape.size() != 4) return {};
  return {c.shape[0], c.shape[1], static_cast<std::int64_t>(c.param("kv_heads")), c.shape[3]};
}
std::vector<std::int64_t> tokens_shape(const CaseSpec& c) {
  if (c.shape.size() != 4) return {};
  return {c.shape[0], c.shape[1]};
}
}  // namespace

const OpDescriptor& RopeOp::descriptor() const {
  constexpr DTypeRule T = DTypeRule::case_dtype;
  static const OpDescriptor d{
      "rope",
      1,
      {
          {"q", Role::input, Layout::rows, T, case_shape(), "[batch, seq, q_heads, head_dim]; a row is one head of one token"},
          {"k", Role::input, Layout::whole, T, k_shape, "[batch, seq, kv_heads, head_dim]"},
          {"positions", Role::index_input, Layout::whole, DTypeRule::i64, tokens_shape, "[batch, seq] position of each token"},
          {"dq_rot", Role::upstream_gradient, Layout::rows, T, case_shape(), "gradient of q_rot", {"q_rot"}},
          {"dk_rot", Role::upstream_gradient, Layout::whole, T, k_shape, "gradient of k_rot", {"k_rot"}},
          {"q_rot", Role::output, Layout::rows, T, case_shape(), "q rotated by +theta"},
          {"k_rot", Role::output, Layout::whole, T, k_shape, "k rotated by +theta"},
          {"dq", Role::gradient, Layout::rows, T, case_shape(), "dq_rot rotated by -theta", {"q"}},
          {"dk", Role::gradient, Layout::whole, T, k_shape, "dk_rot rotated by -theta", {"k"}},
      },
      {{"Forward", {"q", "k", "positions"}, {"q_rot", "k_rot"}},
          {"Backward", {"dq_rot", "dk_rot", "positions"}, {"dq", "dk"}}},
      [](const CaseSpec& c) { return c.shape.size() == 4 ? rows_of(c.shape) : std::int64_t{0}; }};
  return d;
}

}  // namespace numgate::rope

NUMGATE_REGISTER_OPS(rope) { add(std::make_unique<numgate::rope::RopeOp>()); }
