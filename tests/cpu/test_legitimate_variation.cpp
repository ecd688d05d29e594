// Legitimate variation (issue 10, gate 2's false-fail rate): evaluations that follow an
// op's reference dtype policy but differ from the reference in every freedom a kernel has
// — the order of every sum (serial, reversed, pairwise, blocked by 256 and by 4096, GPU
// block reductions over vectors of 4 and of 8 terms) and
// FMA contraction of every multiply-add — fed to the whole gate as the target, the way the
// replay gates a kernel (numgate::CaseGate: every rule, with the order evidence). The
// evaluations are the ops' own references under a summation policy (Op::reference_under,
// numgate/summation.h), for every op with a reduction or a multiply-add (RMSNorm,
// OffsetRMSNorm, fused add + RMSNorm, LayerNorm, softmax, cross-entropy, RoPE), on 200
// cases per op: its declared committed and small generated cases as declared, then with
// fresh seeds (shapes, patterns, parameters cycled through), all sixteen policies each.
//
// Asserted: nothing FAILs and nothing is INCONCLUSIVE — neither by decidable rounding
// (a proof: every legitimate evaluation rounds a decidable element as the golden does)
// nor by the max-abs threshold with the order evidence. Four of the sixteen policies
// (blocked256 and blocked4096, without and with FMA) are held out of the evidence
// (order_evidence_policies()); printed: how many of their evaluations differ bitwise from
// the reference and from every evidence evaluation (blocked orders equal serial below 256
// terms), i.e. were unseen by the evidence, and whether any of those FAILs.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <vector>

#include "numgate/gate.h"
#include "numgate/op.h"
#include "glu/glu_oracle.h"
#include "mutant_testbed.h"

namespace numgate {
namespace {

bool in_evidence(const SumPolicy& p) {
  for (const SumPolicy& e : order_evidence_policies())
    if (e == p) return true;
  return false;
}

// The pool of declared case specs the seeds cycle through: the op's committed cases and
// its generated ones of at most 20,000 elements (cheap: 200 seeds x 10 policies each).
std::vector<CaseSpec> case_pool(const Op& op) {
  std::vector<CaseSpec> pool;
  for (const CaseSpec& c : op.cases())
    if (!c.production || numel(c.shape) <= 20000) pool.push_back(c);
  return pool;
}

TEST(LegitimateVariation, ReferenceUnderTheDefaultPolicyIsTheReference) {
  // SumPolicy{} (serial, no FMA) must give the stored reference bit for bit, or the order
  // evidence would not be the reference's own code in another order.
  int ops = 0;
  for (const auto& op : all_ops()) {
    std::vector<CaseData> cases = testing::committed_cases_of(op->name());
    for (auto& c : testing::small_generated_cases_of(op->name(), 20000)) cases.push_back(std::move(c));
    bool has = false;
    for (const CaseData& c : cases) {
      auto out = op->reference_under(c.spec, c.inputs, SumPolicy{});
      if (out.empty()) continue;
      has = true;
      for (const auto& t : c.output_names)
        EXPECT_EQ(testing::first_bit_difference((out.at(t).canonicalize_nans(), out.at(t)), c.reference.at(t)), -1)
            << op->name() << " case " << c.spec.name << " tensor " << t;
    }
    ops += has;
  }
  EXPECT_EQ(ops, 7);  // all but the GLU ops (elementwise, no sum or multiply-add freedom)
}

// Known false-fails of the gate, kept visible rather than sampled away (README, "Known gate
// false-fail"): a held-out summation order that the order evidence does not cover, judged
// FAIL by the max-abs threshold. Each entry must still FAIL (once the gate covers it, this
// test flags the stale entry); every other evaluation must pass as before.
struct KnownFalseFail {
  const char* op;
  const char* case_name;
  const char* policy;
  const char* tensor;
};
constexpr KnownFalseFail kKnownFalseFails[] = {
    // fp32 softmax, 8193 keys (the streaming forward), seed index 149 (seed 0x1e9a1 + 149 x 7919): blocked4096 with and
    // without FMA, tensor y: max-abs 5.0e-10 against the threshold 3.5e-10.
    {"softmax", "fp32_2x8193_seed56_legit149", "blocked4096", "y"},
    {"softmax", "fp32_2x8193_seed56_legit149", "blocked4096+FMA", "y"},
};
bool is_known_false_fail(const std::string& op, const std::string& case_name, const std::string& policy,
                         const std::string& tensor) {
  for (const KnownFalseFail& k : kKnownFalseFails)
    if (op == k.op && case_name == k.case_name && policy == k.policy && tensor == k.tensor) return true;
  return false;
}
std::int64_t known_false_fails_of(const std::string& op) {
  std::int64_t n = 0;
  for (const KnownFalseFail& k : kKnownFalseFails) n += op == k.op;
  return n;
}

void expect_legitimate_variation_passes(const std::string& op_name) {
  const Op& op = find_op(op_name);
  const std::vector<CaseSpec> pool = case_pool(op);
  ASSERT_FALSE(pool.empty());
  constexpr int kSeeds = 200;
  std::int64_t evaluations = 0, held_out = 0, held_out_unseen = 0, decidable = 0, rule_fails = 0, fails = 0, held_out_fails = 0;
  std::int64_t inconclusive = 0, by_evidence = 0, by_envelope_evidence = 0, by_sweep = 0, max_abs_exceeded = 0;
  std::int64_t known_hit = 0;  // kKnownFalseFails met (each a FAIL beyond the max-abs threshold)
  std::map<std::string, std::int64_t> fails_by;
  for (int s = 0; s < kSeeds; ++s) {
    CaseSpec c = pool[static_cast<std::size_t>(s) % pool.size()];
    if (static_cast<std::size_t>(s) >= pool.size()) {  // the first pass: the declared cases as declared
      c.seed = 0x1e9a1u + static_cast<std::uint64_t>(s) * 7919u;
      c.name += "_legit" + std::to_string(s);
    }
    const CaseData d = materialize(op, c);
    std::vector<std::map<std::string, Tensor>> outs;
    for (const SumPolicy& p : all_sum_policies()) {
      outs.push_back(op.reference_under(d.spec, d.inputs, p));
      ASSERT_FALSE(outs.back().empty()) << op_name << " declares no summation freedom";
    }
    for (std::size_t k = 0; k < outs.size(); ++k) {
      const SumPolicy& p = all_sum_policies()[k];
      const auto& out = outs[k];
      const bool held = !in_evidence(p);
      // The policy is the target, also as the runner of the length sweep (a gate not valid).
      const CaseGate gate(op, d, [&op, p](const CaseData& cd) { return op.reference_under(cd.spec, cd.inputs, p); });
      for (const auto& name : d.output_names) {
        const GateResult r = gate(name, &out.at(name));
        ++evaluations;
        held_out += held;
        // Held out AND bitwise unlike the reference and every evidence evaluation: a result
        // the order evidence has not seen (blocked orders equal serial below 256 terms).
        bool unseen = held && testing::first_bit_difference(out.at(name), d.reference.at(name)) >= 0;
        for (std::size_t e = 0; unseen && e < outs.size(); ++e)
          if (in_evidence(all_sum_policies()[e]) && testing::first_bit_difference(out.at(name), outs[e].at(name)) < 0)
            unseen = false;
        held_out_unseen += unseen;
        decidable += r.decidable;
        if (r.gate_valid && r.target_error > r.threshold) ++max_abs_exceeded;
        if (r.verdict == Verdict::pass_with_limitations) {
          by_evidence += r.decided_by == "order evidence";
          by_envelope_evidence += r.decided_by.rfind("conditioning envelope and order evidence", 0) == 0;
          by_sweep += r.decided_by.find("and length sweep (noise:") != std::string::npos;
        }
        if (r.rounding_rule_valid && r.target_misrounded > 0) ++rule_fails;
        if (r.verdict == Verdict::pass || r.verdict == Verdict::pass_with_limitations) continue;
        if (r.verdict == Verdict::fail && is_known_false_fail(op_name, c.name, std::string(policy_name(p)), name)) {
          // Excused only as what it is: a FAIL by the max-abs threshold, the rounding rule silent.
          EXPECT_TRUE(r.gate_valid && r.target_error > r.threshold && r.target_misrounded == 0)
              << op_name << " " << c.name << ": the known false-fail now fails for another reason:\n" << describe(r, d.spec);
          ++known_hit;
          std::cout << "[ legitimate variation ] KNOWN FALSE-FAIL (README, Known gate false-fail): " << op_name
                    << " case " << c.name << " (" << policy_name(p) << ") tensor " << name << "\n";
          continue;
        }
        if (r.verdict == Verdict::inconclusive) ++inconclusive;
        else ++fails;
        held_out_fails += held;
        ++fails_by[std::string(dtype_name(c.dtype)) + " " + name + " (" + std::string(verdict_name(r.verdict)) + ", " +
                   r.decided_by + ")"];
        ADD_FAILURE() << op_name << ": legitimate evaluation (" << policy_name(p) << ") "
                      << verdict_name(r.verdict) << ":\n" << describe(r, d.spec);
      }
    }
  }
  std::cout << "[ legitimate variation ] " << op_name << ": " << evaluations << " tensor evaluations ("
            << all_sum_policies().size() << " policies x " << kSeeds << " seeds over " << pool.size()
            << " declared cases; " << held_out << " of them by the "
            << all_sum_policies().size() - order_evidence_policies().size() - 1
            << " policies held out of the order evidence, " << held_out_unseen
            << " of those bitwise unlike the reference and every evidence evaluation), "
            << decidable << " decidable elements; FAIL: " << fails << " (held out: " << held_out_fails
            << "), INCONCLUSIVE: " << inconclusive << ", decidable rounding FAIL: " << rule_fails
            << "; beyond the max-abs threshold: " << max_abs_exceeded
            << ", all PASS WITH LIMITATIONS by the order evidence: " << by_evidence
            << "; gate not valid, inside the envelope and within the order evidence: " << by_envelope_evidence
            << " (with the length sweep: " << by_sweep << ")";
  for (const auto& [k, n] : fails_by) std::cout << "; " << k << " " << n;
  std::cout << "\n";
  EXPECT_EQ(rule_fails, 0);
  EXPECT_EQ(fails, 0);
  EXPECT_EQ(inconclusive, 0);
  EXPECT_EQ(by_evidence + known_hit, max_abs_exceeded);
  EXPECT_EQ(known_hit, known_false_fails_of(op_name)) << op_name << ": a known false-fail no longer fails (or was not sampled): update kKnownFalseFails and the README";
  EXPECT_GT(decidable, 0);
}

TEST(LegitimateVariation, RMSNorm) { expect_legitimate_variation_passes("rmsnorm"); }
TEST(LegitimateVariation, OffsetRMSNorm) { expect_legitimate_variation_passes("offset_rmsnorm"); }
TEST(LegitimateVariation, FusedAddRMSNorm) { expect_legitimate_variation_passes("fused_add_rmsnorm"); }
TEST(LegitimateVariation, LayerNorm) { expect_legitimate_variation_passes("layernorm"); }
TEST(LegitimateVariation, Softmax) { expect_legitimate_variation_passes("softmax"); }
TEST(LegitimateVariation, CrossEntropy) { expect_legitimate_variation_passes("cross_entropy"); }
TEST(LegitimateVariation, RoPE) { expect_legitimate_variation_passes("rope"); }

// The GLU ops, elementwise: the reference's own scalar code in the other math precision
// (FP64 math for bf16/fp16 outputs, more accurate than the reference's FP32 math; FP32
// math — expf, erfcf — for fp32 outputs, where the reference uses FP64), on every committed
// case and every small generated one. Asserted: decidable rounding fails none. Printed:
// what the whole gate (its ULP rule of 1 ULP among them) does with them.
TEST(LegitimateVariation, GluInTheOtherMathPrecisionPassesDecidableRounding) {
  for (const char* op : {"swiglu", "geglu"}) {
    std::vector<CaseData> cases = testing::committed_cases_of(op);
    for (auto& c : testing::small_generated_cases_of(op, testing::kSmallGeneratedElements)) cases.push_back(std::move(c));
    std::int64_t evaluations = 0, decidable = 0, rule_fails = 0, fails = 0;
    std::map<std::string, std::int64_t> fails_by, evaluations_by;  // by dtype (evaluations)
    for (const CaseData& c : cases) {
      if (c.spec.dtype == DType::fp64) continue;
      evaluations_by[std::string(dtype_name(c.spec.dtype))] += static_cast<std::int64_t>(c.output_names.size());
      // The other math than the reference's: FP32 math for fp32 outputs, FP64 math for bf16/fp16.
      const DType variant = c.spec.dtype == DType::fp32 ? DType::fp32 : DType::fp64;
      const auto out = glu::reference_in_math(op, c.spec, c.inputs, variant);
      for (const auto& name : c.output_names) {
        const GateResult r = evaluate_gate(name, c.spec, c.golden.at(name), c.reference.at(name), &out.at(name));
        ++evaluations;
        decidable += r.decidable;
        if (r.rounding_rule_valid && r.target_misrounded > 0) {
          ++rule_fails;
          ADD_FAILURE() << op << ": the reference's code in the other math precision misrounded by the "
                        << "decidable-rounding rule:\n" << describe(r, c.spec);
        }
        if (r.verdict != Verdict::pass && r.verdict != Verdict::pass_with_limitations) {
          ++fails;
          const bool ulp_rule = r.params.ulp_limit >= 0 && r.max_ulp > r.params.ulp_limit;
          ++fails_by[std::string(dtype_name(c.spec.dtype)) + " " + name + (ulp_rule ? " (ULP rule)" : "")];
        }
      }
    }
    std::cout << "[ legitimate variation ] " << op << " in the other math precision: " << evaluations
              << " tensor evaluations (";
    for (const auto& [k, n] : evaluations_by) std::cout << k << " " << n << " ";
    std::cout << "), " << decidable << " decidable elements; decidable rounding: " << rule_fails
              << " FAIL; the whole gate: " << fails << " FAIL:";
    for (const auto& [k, n] : fails_by) std::cout << " " << k << " " << n << ";";
    std::cout << "\n";
    EXPECT_EQ(rule_fails, 0) << op;
    EXPECT_GT(decidable, 0) << op;
  }
}

}  // namespace
}  // namespace numgate
