// numgate-train — gate 3's arithmetic (SPEC §6 gate 3; seed article 000 §2, Gate 3) and the
// first-divergence rule (seed 000 §4.3). Plain host code: the CPU tests check it.
//
// Loss-curve gate: for each seed, the reference path and the all-target path train the same
// model on the same batches in the same order; with m_ref and m_tgt the means of the last
// `last_steps` losses,
//     relative_difference = |m_ref - m_tgt| / m_ref
// and the seed passes when it is < max_relative_difference (0.5%, seed 000's threshold).
// The gate passes when every seed passes (two seeds: one agreement may be luck). A curve
// shorter than min_steps, of unequal lengths, or holding a non-finite loss FAILs (a curve
// that diverged is not "close"), and so does a reference mean that is not positive.
// Parameters are declared here, before any run.
//
// First divergence: for every op output captured in execution order on both paths (from
// the same weights and batch), rel_l2 = ||t - r||_2 / ||r||_2 (0 when both are 0) and
// max_abs = max |t - r|. The noise an op inherits is the largest rel_l2 of the ops before
// it (equal values, infinities included, and NaN on both sides agree), at least the bf16 unit roundoff u = 2^-8 (one re-rounding of a bf16 value moves it by
// up to that); an op JUMPS when its rel_l2 exceeds kJumpFactor (8) times that. The first op
// that jumps is named: the first place the target computes something the noise before it
// does not explain. Non-finite differences always jump.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace numgate::train {

struct LossGateParams {
  int min_steps = 200;
  int last_steps = 50;
  double max_relative_difference = 0.005;
};

struct SeedVerdict {
  std::uint64_t seed = 0;
  double reference_mean = 0, target_mean = 0, relative_difference = 0;
  bool pass = false;
  std::string why;  ///< one line: the numbers, or why it failed
};

/// Mean of the last `last` entries; throws std::invalid_argument when there are fewer.
double tail_mean(const std::vector<double>& losses, int last);
/// One seed's comparison (never throws: a short or non-finite curve is a FAIL with why).
SeedVerdict compare_curves(std::uint64_t seed, const std::vector<double>& reference,
                           const std::vector<double>& target, const LossGateParams& p = {});

inline constexpr double kJumpFactor = 8.0;
inline constexpr double kBf16UnitRoundoff = 1.0 / 256.0;  // 2^-8

struct DivergenceRow {
  std::string name;     ///< "L0.attn_norm.y", in execution order
  double max_abs = 0;
  double rel_l2 = 0;
  double inherited = 0; ///< max(u, largest rel_l2 before it)
  bool jump = false;    ///< rel_l2 > kJumpFactor * inherited (or non-finite)
};
/// Differences of one captured tensor (same length; throws std::invalid_argument otherwise).
DivergenceRow difference(const std::string& name, const std::vector<float>& reference,
                         const std::vector<float>& target);
/// Fills inherited and jump over rows in execution order; returns the index of the first
/// jump, or -1 when none jumps.
int mark_jumps(std::vector<DivergenceRow>& rows);

}  // namespace numgate::train
