// The false-fail sweep (issue: "prove its false-fail rate"): for every selected op, the
// target's passes (the main target and its variants) on --sweep-seeds in-memory cases —
// the op's committed and small generated declared cases (shapes, patterns, parameters)
// cycled through with fresh seeds, materialized on the CPU exactly as the generator would —
// every gated tensor through the gate. A right kernel must never FAIL here: each FAIL is a
// false fail of the gate (or a kernel bug), counted per check and reported, never retried.
//   <op>/Sweep.FreshSeeds
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <mutex>
#include <optional>

#include "mutation_matrix.h"
#include "numgate/parallel.h"
#include "replay.h"

namespace numgate::testing {

std::map<std::string, SweepReport>& sweep_results() {
  static std::map<std::string, SweepReport> r;
  return r;
}

namespace {

// The declared cases a sweep cycles through: committed ones and generated ones of at most
// kSmallGeneratedCaseElements elements (the sizes the CPU tests materialize).
std::vector<CaseSpec> sweep_shapes(const Op& op) {
  std::vector<CaseSpec> v;
  for (const CaseSpec& s : op.cases())
    if (!s.production || static_cast<std::size_t>(numel(s.shape)) <= kSmallGeneratedCaseElements) v.push_back(s);
  return v;
}

// Seed of sweep case i: never one of the declared seeds (all below 2^20).
std::uint64_t sweep_seed(std::int64_t i) { return 0x5EED0000ull + static_cast<std::uint64_t>(i); }

SweepReport sweep(const std::string& op_name, std::int64_t seeds) {
  const Op& op = find_op(op_name);
  const std::vector<CaseSpec> shapes = sweep_shapes(op);
  SweepReport rep;
  rep.op = op_name;
  rep.shapes = static_cast<std::int64_t>(shapes.size());
  if (shapes.empty()) {
    rep.not_run_reason = "no committed or small generated case declared";
    return rep;
  }
  std::vector<std::pair<const TargetOp*, const TargetPass*>> passes;
  for (const TargetPass& p : find_target(op_name).passes) passes.push_back({&find_target(op_name), &p});
  for (const TargetOp* v : variants_of(op_name))
    for (const TargetPass& p : v->passes) passes.push_back({v, &p});
  const OpDescriptor& d = op.descriptor();
  constexpr std::int64_t kBatch = 64;  // materialized in parallel, then replayed one by one
  for (std::int64_t first = 0; first < seeds; first += kBatch) {
    const std::int64_t n = std::min(kBatch, seeds - first);
    std::vector<std::optional<CaseData>> batch(static_cast<std::size_t>(n));
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    parallel_for(static_cast<std::size_t>(n), [&](std::size_t k) {
      const std::int64_t i = first + static_cast<std::int64_t>(k);
      CaseSpec s = shapes[static_cast<std::size_t>(i) % shapes.size()];
      s.seed = sweep_seed(i);
      s.name += "_sweep" + std::to_string(i);
      try {
        batch[k] = materialize(op, s);
      } catch (const std::exception& e) {
        errors[k] = s.name + ": " + e.what();
      }
    });
    for (std::int64_t k = 0; k < n; ++k) {
      if (!errors[k].empty()) {
        if (rep.first_failure.empty()) rep.first_failure = "ERROR " + errors[k];
        continue;
      }
      const CaseData& c = *batch[k];
      ++rep.seeds;
      for (const auto& [target, pass] : passes) {
        const PassDecl& decl = d.pass(pass->name);
        try {
          // A deterministic pass once (NaN poison); a nondeterministic one as the replay
          // launches it (kNondeterministicLaunches launches, every distinct result gated).
          std::map<std::string, GateResult> gated;
          std::string memory;
          if (pass->deterministic) {
            const PassRun run = run_pass(c, *pass, decl.writes, 0, 0xFF, target->precheck);
            // With the order evidence and the length sweep (numgate/gate.h).
            const CaseGate gate(find_op(c.op), c, pass_runner(*pass, decl.writes, 0, target->precheck));
            for (const auto& t : decl.writes) gated[t] = gate(t, &run.outputs.at(t));
            if (!run.problems.empty()) memory = run.problems.front();
          } else {
            const GatedLaunches g = gate_launches(c, *pass, decl.writes, target->precheck, pass->name);
            gated = g.results;
            if (!g.problems.empty()) memory = g.problems.front();
          }
          for (const auto& t : decl.writes) {
            const GateResult& r = gated.at(t);
            ++rep.tensors;
            // The order evidence decided it (numgate/gate.h), whichever way: beyond the
            // max-abs threshold, or a gate not valid with the target inside its envelope.
            if (r.order_evaluations > 0) {
              ++rep.by_order_evidence;
              if (!r.sweep_lengths.empty()) ++rep.by_length_sweep;  // SPEC §4's fallback swept T (gate not valid)
              const double ratio = r.threshold > 0 ? r.target_error / r.threshold : INFINITY;
              if (rep.worst_order_evidence.empty() || ratio > rep.order_evidence_worst_ratio)
                rep.worst_order_evidence = target->label() + " " + pass->name + ":\n" + describe(r, c.spec);
              rep.order_evidence_worst_ratio = std::max(rep.order_evidence_worst_ratio, ratio);
            }
            // Anything but PASS / PASS WITH LIMITATIONS is a failure here (INCONCLUSIVE too).
            if (memory.empty() && (r.verdict == Verdict::pass || r.verdict == Verdict::pass_with_limitations)) continue;
            ++rep.fail;
            const std::vector<matrix::Check> fired = matrix::checks_fired(r);
            if (rep.first_failure.empty()) {
              rep.first_failure = target->label() + " " + pass->name + ":\n" + describe(r, c.spec) +
                                  (memory.empty() ? "" : "memory: " + memory);
            }
            for (matrix::Check k2 : fired) {
              if (k2 == matrix::Check::max_abs_gate) ++rep.fail_max_abs;
              if (k2 == matrix::Check::decidable_rounding) ++rep.fail_decidable;
              if (k2 == matrix::Check::structure) ++rep.fail_structure;
              if (k2 == matrix::Check::ulp_limit) ++rep.fail_ulp;
              if (k2 == matrix::Check::envelope) ++rep.fail_envelope;
            }
          }
        } catch (const std::exception& e) {
          ++rep.fail;
          if (rep.first_failure.empty()) rep.first_failure = "ERROR " + c.spec.name + " " + pass->name + ": " + e.what();
        }
      }
    }
  }
  return rep;
}

class Sweep : public ::testing::Test {
 public:
  explicit Sweep(std::string op) : op_(std::move(op)) {}
  void TestBody() override {
    if (!config().have_device) GTEST_SKIP() << config().no_device_reason;
    const SweepReport r = sweep(op_, config().sweep_seeds);
    sweep_results()[op_] = r;
    std::cout << "[ sweep ] " << op_ << ": " << r.seeds << " fresh-seed cases over " << r.shapes << " declared cases, "
              << r.tensors << " tensors gated, " << r.fail << " FAIL (max-abs " << r.fail_max_abs << ", decidable "
              << r.fail_decidable << ", structure " << r.fail_structure << ", ULP " << r.fail_ulp << ", envelope "
              << r.fail_envelope << "); decided by the order evidence: "
              << r.by_order_evidence << ", worst " << r.order_evidence_worst_ratio << " x threshold; with the length "
              << "sweep (gate not valid): " << r.by_length_sweep << "\n";
    if (!r.worst_order_evidence.empty())
      std::cout << "  largest target_error / threshold decided by the order evidence:\n" << r.worst_order_evidence;
    // Asserted: nothing FAILs, by any rule (the order evidence included), nothing is
    // INCONCLUSIVE, no error: a right kernel is never failed.
    EXPECT_EQ(r.fail, 0) << r.first_failure;
    EXPECT_TRUE(r.first_failure.empty()) << r.first_failure;
    EXPECT_NE(r.verdict(), Verdict::fail);
    EXPECT_EQ(r.seeds, config().sweep_seeds);
    // A reduction op's ill_conditioned case (gate not valid by construction) among the shapes
    // swept: the length sweep ran there on the GPU kernels (SPEC §4's fallback exercised).
    const std::vector<CaseSpec> shapes = sweep_shapes(find_op(op_));
    for (std::size_t i = 0; i < shapes.size(); ++i)
      if (shapes[i].pattern == "ill_conditioned" && static_cast<std::int64_t>(i) < r.seeds)
        EXPECT_GT(r.by_length_sweep, 0) << op_ << ": the ill_conditioned case got no length sweep";
  }

 private:
  std::string op_;
};

}  // namespace

void register_sweep_tests() {
  if (config().sweep_seeds <= 0) return;
  for (const auto& op : all_ops()) {
    if (!selected(op->name()) || cases_of(op->name()).empty()) continue;
    const std::string suite = op->name() + "/Sweep", name = op->name();
    ::testing::RegisterTest(suite.c_str(), "FreshSeeds", nullptr, nullptr, __FILE__, __LINE__,
                            [name]() -> ::testing::Test* { return new Sweep(name); });
  }
}

}  // namespace numgate::testing
