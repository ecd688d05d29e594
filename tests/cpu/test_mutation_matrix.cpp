// The mutation matrix (kernels/mutation_matrix.h): every (op, class) cell of the seven
// sources of discrepancy (SPEC §6) is declared — mutants proven caught, or why it does not
// apply, or that it is not covered yet — and every CPU mutant of the table is caught on the
// op's committed cases and small generated cases (materialized in memory, as the other
// mutant tests) by the check the table declares for it (not merely by some check).
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "mutant_testbed.h"
#include "mutation_matrix.h"
#include "numgate/op.h"

namespace numgate {
namespace {

using namespace numgate::matrix;

bool test_exists(const std::string& full_name) {
  const auto* u = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < u->total_test_suite_count(); ++i) {
    const auto* s = u->GetTestSuite(i);
    for (int j = 0; j < s->total_test_count(); ++j)
      if (std::string(s->name()) + "." + s->GetTestInfo(j)->name() == full_name) return true;
  }
  return false;
}

TEST(MutationMatrix, EveryCellIsDeclared) {
  std::set<std::string> ops;
  for (const auto& op : all_ops()) ops.insert(op->name());
  int caught = 0, not_applicable = 0, not_covered = 0;
  for (const auto& op : ops) {
    for (Class cls : kClasses) {
      int n_entries = 0, n_reasons = 0;
      for (const Entry& e : entries()) n_entries += e.op == op && e.cls == cls;
      for (const Reason& r : reasons()) {
        if (r.op != op || r.cls != cls) continue;
        ++n_reasons;
        EXPECT_FALSE(r.why.empty()) << op << " / " << class_name(cls) << ": a reason without a text";
        (r.applies ? not_covered : not_applicable) += 1;
      }
      caught += n_entries > 0;
      EXPECT_EQ(n_entries > 0 ? 1 : 0, 1 - n_reasons)
          << op << " / " << class_name(cls) << ": " << n_entries << " entries and " << n_reasons
          << " reasons; a cell has entries or exactly one reason";
    }
  }
  for (const Entry& e : entries()) EXPECT_TRUE(ops.count(e.op)) << "entry of an unregistered op " << e.op;
  for (const Reason& r : reasons()) EXPECT_TRUE(ops.count(r.op)) << "reason of an unregistered op " << r.op;
  // RNG stream: dropout_add draws random numbers (its dropout mask), so its cell holds real
  // mutants, CPU ones among them; no other op draws any, so the class applies to none of them.
  const std::set<std::string> draws_random_numbers = {"dropout_add"};
  for (const auto& op : ops) {
    const bool not_applicable = std::any_of(reasons().begin(), reasons().end(), [&](const Reason& r) {
      return r.op == op && r.cls == Class::rng_stream && !r.applies;
    });
    if (draws_random_numbers.count(op)) {
      EXPECT_FALSE(not_applicable) << op << " draws random numbers: its RNG cell needs mutants";
      EXPECT_TRUE(std::any_of(entries().begin(), entries().end(), [&](const Entry& e) {
        return e.op == op && e.cls == Class::rng_stream && e.where == Where::cpu && e.check != Check::passes;
      })) << op << ": no CPU mutant of its random stream";
    } else {
      EXPECT_TRUE(not_applicable) << op;
    }
  }
  std::cout << "[ mutation matrix ] " << ops.size() << " ops x " << kClasses.size() << " classes: " << caught
            << " cells with entries, " << not_applicable << " do not apply, " << not_covered << " not covered yet\n";
}

TEST(MutationMatrix, CpuEntriesAreCaughtByTheirCheck) {
  std::map<std::string, std::vector<CaseData>> committed;
  int run = 0;
  for (const Entry& e : entries()) {
    if (e.where != Where::cpu || !e.outputs) continue;
    if (!committed.count(e.op)) {
      committed[e.op] = testing::committed_cases_of(e.op);
      for (auto& c : testing::small_generated_cases_of(e.op, testing::kSmallGeneratedElements))
        committed[e.op].push_back(std::move(c));
    }
    const Outcome o = run_cpu_entry(e, committed[e.op]);
    ++run;
    std::cout << "[ matrix ] " << e.op << " / " << class_name(e.cls) << " / " << e.mutant << ": "
              << (e.check == Check::passes ? (o.caught ? "passes" : "FALSE FAIL") : o.caught ? "caught by " : "NOT CAUGHT by ")
              << (e.check == Check::passes ? "" : check_name(e.check)) << " (FAIL on " << o.failed
              << " of " << o.cases << " committed and small generated cases; " << o.detail << ")\n";
    EXPECT_TRUE(o.caught) << e.op << " / " << class_name(e.cls) << " / " << e.mutant << ": " << o.detail;
  }
  EXPECT_GT(run, 0);
}

// What the order evidence takes away from the max-abs threshold, measured: per CPU mutant,
// the cases it FAILs on without the evidence (evaluate_gate) and those the evidence passes
// anyway (CaseGate). Asserted: the evidence rescues a mutant on fewer cases than it leaves
// it caught on (a yardstick of legitimate variation may blur a few one-ulp mutants on a
// scalar, never most of a mutant's cases).
TEST(MutationMatrix, TheOrderEvidenceRescuesFewMutantCases) {
  std::map<std::string, std::vector<CaseData>> cases;
  std::int64_t rescued_total = 0;
  for (const Entry& e : entries()) {
    if (e.where != Where::cpu || !e.outputs || e.check == Check::passes) continue;
    if (!cases.count(e.op)) {
      cases[e.op] = testing::committed_cases_of(e.op);
      for (auto& c : testing::small_generated_cases_of(e.op, testing::kSmallGeneratedElements))
        cases[e.op].push_back(std::move(c));
    }
    int plain = 0, rescued = 0;
    std::string first;
    for (const CaseData& c : cases[e.op]) {
      const auto out = e.outputs(c);
      const CaseGate gate(find_op(c.op), c);
      bool plain_fail = false, still_fail = false;
      for (const auto& t : c.output_names) {
        plain_fail = plain_fail ||
                     evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &out.at(t)).verdict == Verdict::fail;
        still_fail = still_fail || gate(t, &out.at(t)).verdict == Verdict::fail;
      }
      plain += plain_fail;
      if (plain_fail && !still_fail) {
        ++rescued;
        if (first.empty()) first = c.spec.name;
      }
    }
    rescued_total += rescued;
    if (rescued)
      std::cout << "[ matrix ] " << e.op << " / " << e.mutant << ": FAIL on " << plain << " cases without the order "
                << "evidence, " << rescued << " of them passed by it (first: " << first << ")\n";
    EXPECT_LT(rescued, plain - rescued) << e.op << " / " << e.mutant;
  }
  std::cout << "[ matrix ] the order evidence passed a CPU mutant on " << rescued_total << " case(s) in all\n";
}

TEST(MutationMatrix, CpuProofTestsExist) {
  // The legitimate variations are proven by named tests of this binary; the GPU entries by
  // tests of numgate_replay, which reports an entry whose test did not run as NOT RUN.
  for (const Entry& e : entries()) {
    if (e.where == Where::cpu && !e.outputs)
      EXPECT_TRUE(test_exists(e.proof)) << e.op << " / " << e.mutant << ": no test " << e.proof;
    if (e.where == Where::gpu) EXPECT_FALSE(e.proof.empty()) << e.op << " / " << e.mutant;
    if (e.where == Where::cpu && e.outputs) EXPECT_TRUE(test_exists(e.proof)) << e.proof;
  }
}

TEST(MutationMatrix, TheCheckAttributionCanFail) {
  // The declared check matters: a mutant caught by another check is NOT caught by the table's
  // claim. The rmsnorm epsilon mutant fails the max-abs gate, not the ULP limit (none declared).
  Entry e = entries().front();
  for (const Entry& x : entries())
    if (x.op == "rmsnorm" && x.cls == Class::epsilon_placement && x.where == Where::cpu) e = x;
  ASSERT_EQ(e.mutant, "eps_outside_sqrt");
  const std::vector<CaseData> committed = testing::committed_cases_of("rmsnorm");
  EXPECT_TRUE(run_cpu_entry(e, committed).caught);
  e.check = Check::ulp_limit;
  EXPECT_FALSE(run_cpu_entry(e, committed).caught);
  // And a correct reference is caught by nothing.
  e.check = Check::max_abs_gate;
  e.outputs = [](const CaseData& c) { return c.reference; };
  EXPECT_FALSE(run_cpu_entry(e, committed).caught);
  // A legitimate entry is proven only when nothing fails: the reference passes, the epsilon
  // mutant declared legitimate is a FALSE FAIL.
  Entry legit = e;
  legit.check = Check::passes;
  EXPECT_TRUE(run_cpu_entry(legit, committed).caught);
  for (const Entry& x : entries())
    if (x.op == "rmsnorm" && x.cls == Class::epsilon_placement && x.where == Where::cpu) legit.outputs = x.outputs;
  const Outcome o = run_cpu_entry(legit, committed);
  EXPECT_FALSE(o.caught);
  EXPECT_NE(o.detail.find("FALSE FAIL"), std::string::npos) << o.detail;
}

}  // namespace
}  // namespace numgate
