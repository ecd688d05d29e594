// numgate-train — gate 3's arithmetic and the first-divergence rule (loss_gate.h).
#include "loss_gate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace numgate::train {

double tail_mean(const std::vector<double>& losses, int last) {
  if (last < 1 || losses.size() < static_cast<std::size_t>(last))
    throw std::invalid_argument(fmt::format("tail_mean: {} losses, need at least {}", losses.size(), last));
  double s = 0;
  for (std::size_t i = losses.size() - static_cast<std::size_t>(last); i < losses.size(); ++i) s += losses[i];
  return s / last;
}

SeedVerdict compare_curves(std::uint64_t seed, const std::vector<double>& reference,
                           const std::vector<double>& target, const LossGateParams& p) {
  SeedVerdict v;
  v.seed = seed;
  if (reference.size() != target.size()) {
    v.why = fmt::format("curves of unequal length: reference {} steps, target {}", reference.size(), target.size());
    return v;
  }
  if (reference.size() < static_cast<std::size_t>(std::max(p.min_steps, p.last_steps))) {
    v.why = fmt::format("{} steps, the gate needs at least {}", reference.size(), std::max(p.min_steps, p.last_steps));
    return v;
  }
  for (std::size_t i = 0; i < reference.size(); ++i)
    if (!std::isfinite(reference[i]) || !std::isfinite(target[i])) {
      v.why = fmt::format("non-finite loss at step {}: reference {}, target {}", i, reference[i], target[i]);
      return v;
    }
  v.reference_mean = tail_mean(reference, p.last_steps);
  v.target_mean = tail_mean(target, p.last_steps);
  if (!(v.reference_mean > 0)) {  // a cross-entropy loss is positive: a relative difference needs m_ref > 0
    v.why = fmt::format("reference last-{} mean loss {} is not positive", p.last_steps, v.reference_mean);
    return v;
  }
  v.relative_difference = std::fabs(v.reference_mean - v.target_mean) / v.reference_mean;
  v.pass = v.relative_difference < p.max_relative_difference;
  v.why = fmt::format("last-{} mean loss: reference {:.6f}, target {:.6f}, relative difference {:.4f}% {} {:.2f}%",
                      p.last_steps, v.reference_mean, v.target_mean, 100 * v.relative_difference,
                      v.pass ? "<" : ">=", 100 * p.max_relative_difference);
  return v;
}

DivergenceRow difference(const std::string& name, const std::vector<float>& reference,
                         const std::vector<float>& target) {
  if (reference.size() != target.size())
    throw std::invalid_argument(fmt::format("difference of '{}': reference has {} elements, target {}", name,
                                            reference.size(), target.size()));
  DivergenceRow r;
  r.name = name;
  double num = 0, den = 0;
  bool mismatched_nan = false;  // NaN on one side only, or a difference that is NaN (inf - inf)
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double a = reference[i], b = target[i];
    if (std::isnan(a) && std::isnan(b)) continue;  // both NaN: they agree
    if (a == b) {  // equal (infinities too): no difference; a finite value still counts in ||r||
      if (std::isfinite(a)) den += a * a;
      continue;
    }
    const double d = b - a;
    if (std::isnan(d)) {
      mismatched_nan = true;
      continue;
    }
    r.max_abs = std::max(r.max_abs, std::fabs(d));
    num += d * d;
    den += a * a;
  }
  r.rel_l2 = den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
  if (mismatched_nan) r.max_abs = r.rel_l2 = NAN;
  return r;
}

int mark_jumps(std::vector<DivergenceRow>& rows) {
  double seen = 0;
  int first = -1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    DivergenceRow& r = rows[i];
    r.inherited = std::max(kBf16UnitRoundoff, seen);
    r.jump = !std::isfinite(r.rel_l2) || r.rel_l2 > kJumpFactor * r.inherited;
    if (r.jump && first < 0) first = static_cast<int>(i);
    if (std::isfinite(r.rel_l2)) seen = std::max(seen, r.rel_l2);
  }
  return first;
}

}  // namespace numgate::train
