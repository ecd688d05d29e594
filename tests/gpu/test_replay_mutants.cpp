// The replay can fail: deliberately broken forward kernels (tests/gpu/mutants/
// rmsnorm_mutants.cu) are run through the same test bed on committed cases chosen to
// expose them, and each must be caught — by the poison / two-launch check, the guard
// bands, or the numeric gate. Broken atomics-based weight gradients go through the
// nondeterministic path (gate_launches: kNondeterministicLaunches launches, every
// distinct result gated) and must be caught there, while their unbroken control passes.
#include <gtest/gtest.h>

#include <iostream>

#include "numgate/gate.h"
#include "replay.h"
#include "mutants/rmsnorm_mutants.h"
#include "mutation_matrix.h"
#include "rmsnorm/rmsnorm.cuh"

namespace numgate::testing {
namespace {

using rmsnorm::mutant::Kind;

TargetPass mutant_pass(Kind kind) {
  TargetPass p;
  p.name = std::string("Forward mutant ") + rmsnorm::mutant::name(kind);
  p.launch = [kind](const Launch& l) {
    const RowShape sh = launched_rows(l);
    if (l.spec.dtype == DType::bf16) {
      using T = __nv_bfloat16;
      return rmsnorm::mutant::forward<T>(kind, l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<T>("y"), sh.rows,
                                         sh.hidden, l.spec.param("eps"), l.stream);
    }
    if (l.spec.dtype == DType::fp32)
      return rmsnorm::mutant::forward<float>(kind, l.ptr<const float>("x"), l.ptr<const float>("w"), l.ptr<float>("y"),
                                             sh.rows, sh.hidden, l.spec.param("eps"), l.stream);
    return cudaErrorInvalidValue;
  };
  return p;
}

// How the test bed judged one mutant on one case.
struct Caught {
  bool gate_fail = false, unwritten_or_racy = false, memory = false;
  std::string detail;
  std::string checks;  ///< the gate's checks that fired (numgate::matrix::checks_fired)
  bool any() const { return gate_fail || unwritten_or_racy || memory; }
};

Caught replay_mutant(const CaseData& c, Kind kind) {
  const TargetPass pass = mutant_pass(kind);
  const PassRun a = run_pass(c, pass, {"y"}, 0, 0xFF), b = run_pass(c, pass, {"y"}, 0, 0x55);
  Caught k;
  k.memory = !a.problems.empty();
  for (const auto& p : a.problems) k.detail += p + "\n";
  const std::string diff = first_bit_difference(a.outputs.at("y"), b.outputs.at("y"));
  k.unwritten_or_racy = !diff.empty();
  if (!diff.empty()) k.detail += "two launches differ: " + diff + "\n";
  const GateResult r = CaseGate(find_op(c.op), c)("y", &a.outputs.at("y"));  // as the replay gates
  k.gate_fail = r.verdict == Verdict::fail;
  for (auto c : matrix::checks_fired(r)) k.checks += std::string(k.checks.empty() ? "" : "+") + matrix::check_name(c);
  k.detail += describe(r, c.spec);
  return k;
}

std::shared_ptr<const CaseData> committed(const std::string& name) {
  for (const auto& rc : cases_of("rmsnorm"))
    if (rc.name == name) return load(rc);
  throw std::runtime_error("committed case " + name + " not found in the fixture folders");
}

class ReplayMutants : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!selected("rmsnorm")) GTEST_SKIP() << "rmsnorm not selected by --op";
    if (!config().have_device) GTEST_SKIP() << config().no_device_reason;
  }
  void expect(Kind kind, const std::string& case_name, bool Caught::*by) {
    const Caught k = replay_mutant(*committed(case_name), kind);
    std::cout << "[ kernel mutant " << rmsnorm::mutant::name(kind) << " ] " << case_name << ": "
              << (k.any() ? "caught" : "NOT caught") << " (gate " << (k.gate_fail ? "FAIL" : "pass")
              << ", unwritten/racy " << k.unwritten_or_racy << ", out-of-bounds " << k.memory << ")\n";
    EXPECT_TRUE(k.*by) << "kernel mutant " << rmsnorm::mutant::name(kind) << " not caught on " << case_name
                       << " by the expected check:\n" << k.detail;
    record_matrix_outcome(k.*by, std::string(k.*by ? "caught" : "NOT caught") + " on " + case_name +
                                     (k.checks.empty() ? "" : " (gate checks that fired: " + k.checks + ")"));
  }
};

TEST_F(ReplayMutants, UnwrittenElementIsCaughtByPoison) {
  expect(Kind::skip_last_element, "bf16_8x4097_seed7", &Caught::unwritten_or_racy);
  expect(Kind::skip_last_element, "bf16_8x4097_seed7", &Caught::gate_fail);  // NaN where golden is finite
}
TEST_F(ReplayMutants, OutOfBoundsWriteIsCaughtByGuardBands) {
  expect(Kind::write_past_end, "bf16_3x257_seed3", &Caught::memory);
}
TEST_F(ReplayMutants, Bf16SumOfSquaresIsCaughtByTheGate) {
  expect(Kind::bf16_sum_of_squares, "bf16_8x4096_seed7", &Caught::gate_fail);
}
TEST_F(ReplayMutants, EpsilonOutsideTheSquareRootIsCaughtByTheGate) {
  expect(Kind::eps_outside_sqrt, "bf16_8x5120_near_zero_variance_seed13", &Caught::gate_fail);
}
TEST_F(ReplayMutants, UnbrokenSerialKernelIsNotCaught) {
  // Control: the same simple kernel without a mutation passes every check on every case
  // the mutants were caught on, so the tests above are not vacuous.
  for (const char* name : {"bf16_8x4097_seed7", "bf16_3x257_seed3", "bf16_8x4096_seed7",
                           "bf16_8x5120_near_zero_variance_seed13"}) {
    const Caught k = replay_mutant(*committed(name), Kind::none);
    EXPECT_FALSE(k.any()) << name << ":\n" << k.detail;
  }
}

// ---- the nondeterministic path ----------------------------------------------------------

using rmsnorm::mutant::AtomicKind;

// Backward as a pass declared nondeterministic: the real kernels write dx and dw, then the
// atomics mutant overwrites dw (its accumulator after the real backward's workspace).
TargetPass atomic_dw_pass(AtomicKind kind) {
  TargetPass p;
  p.name = std::string("Backward atomic mutant ") + rmsnorm::mutant::name(kind);
  p.deterministic = false;
  auto real_bytes = [](const CaseSpec& c) {
    const std::size_t b = rmsnorm::backward_workspace_bytes(rows_of(c.shape), hidden_of(c));
    return (b + 255) / 256 * 256;
  };
  p.workspace_bytes = [real_bytes](const CaseSpec& c) {
    return real_bytes(c) + rmsnorm::mutant::atomic_workspace_bytes(hidden_of(c));
  };
  p.launch = [kind, real_bytes](const Launch& l) {
    const RowShape sh = launched_rows(l);
    const double eps = l.spec.param("eps");
    char* ws = static_cast<char*>(l.workspace);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      cudaError_t e = rmsnorm::backward<T>(l.ptr<const T>("x"), l.ptr<const T>("w"), l.ptr<const T>("dy"),
                                           l.ptr<T>("dx"), l.ptr<T>("dw"), sh.rows, sh.hidden, eps, ws,
                                           real_bytes(l.spec), l.stream);
      if (e != cudaSuccess) return e;
      return rmsnorm::mutant::backward_dw_atomic<T>(kind, l.ptr<const T>("x"), l.ptr<const T>("dy"), l.ptr<T>("dw"),
                                                    sh.rows, sh.hidden, eps, ws + real_bytes(l.spec), l.stream);
    };
    if (l.spec.dtype == DType::bf16) return run(__nv_bfloat16{});
    if (l.spec.dtype == DType::fp32) return run(float{});
    return cudaErrorInvalidValue;
  };
  return p;
}

class NondeterministicMutants : public ReplayMutants {
 protected:
  GatedLaunches replay(AtomicKind kind, const std::string& case_name) {
    const auto c = committed(case_name);
    const GatedLaunches g = gate_launches(*c, atomic_dw_pass(kind), {"dx", "dw"}, {}, "Backward");
    const GateResult& dw = g.results.at("dw");
    std::cout << "[ atomics mutant " << rmsnorm::mutant::name(kind) << " ] " << case_name << ": dw "
              << verdict_name(dw.verdict) << ", " << dw.launches << " launches, " << dw.distinct_results
              << " distinct, spread " << dw.launch_spread << " (" << dw.launch_spread_ulp << " ULP), misrounded "
              << dw.target_misrounded << " of " << dw.decidable << " decidable\n";
    EXPECT_EQ(dw.launches, kNondeterministicLaunches);
    EXPECT_FALSE(dw.deterministic);
    EXPECT_EQ(g.results.at("dx").verdict, Verdict::pass) << describe(g.results.at("dx"), c->spec);
    EXPECT_TRUE(g.problems.empty());
    EXPECT_TRUE(g.failures.empty());  // differing launches are no failure of a nondeterministic pass
    return g;
  }
};

TEST_F(NondeterministicMutants, AtomicsInTheOutputDtypeAreCaught) {
  // 8 rows: each dw element is 8 additions rounded to bf16 instead of one rounding.
  const GatedLaunches g = replay(AtomicKind::output_dtype_atomics, "bf16_8x4096_seed7");
  const GateResult& dw = g.results.at("dw");
  EXPECT_EQ(dw.verdict, Verdict::fail) << describe(dw, committed("bf16_8x4096_seed7")->spec);
  EXPECT_GT(dw.target_misrounded, 0);
  record_matrix_outcome(dw.verdict == Verdict::fail && dw.rounding_rule_valid && dw.target_misrounded > 0,
                        "bf16_8x4096_seed7 dw: " + std::string(verdict_name(dw.verdict)) + ", " +
                            std::to_string(dw.target_misrounded) + " of " + std::to_string(dw.decidable) +
                            " decidable misrounded, " + std::to_string(dw.distinct_results) + " distinct of " +
                            std::to_string(dw.launches) + " launches");
}
TEST_F(NondeterministicMutants, LostUpdatesAreCaught) {
  // 48 blocks add to the same 256 columns at once: a plain read-modify-write loses terms.
  const GatedLaunches g = replay(AtomicKind::lost_update, "bf16_8x6x256_seed5");
  const GateResult& dw = g.results.at("dw");
  EXPECT_EQ(dw.verdict, Verdict::fail);
  record_matrix_outcome(dw.verdict == Verdict::fail && dw.gate_valid && dw.target_error > dw.threshold,
                        "bf16_8x6x256_seed5 dw: " + std::string(verdict_name(dw.verdict)) + ", target error " +
                            std::to_string(dw.target_error) + " vs threshold " + std::to_string(dw.threshold) + ", " +
                            std::to_string(dw.distinct_results) + " distinct of " + std::to_string(dw.launches) +
                            " launches");
}
TEST_F(NondeterministicMutants, FP32AtomicsPassEveryLaunch) {
  // Control: the same kernel with FP32 atomics is a legitimate evaluation in every launch,
  // on the cases the mutants were caught on.
  for (const char* name : {"bf16_8x4096_seed7", "bf16_8x6x256_seed5"}) {
    const GatedLaunches g = replay(AtomicKind::none, name);
    const GateResult& dw = g.results.at("dw");
    EXPECT_EQ(dw.verdict, Verdict::pass) << describe(dw, committed(name)->spec);
    record_matrix_outcome(dw.verdict == Verdict::pass, std::string(name) + " dw: " + std::string(verdict_name(dw.verdict)) +
                                                           ", " + std::to_string(dw.distinct_results) + " distinct of " +
                                                           std::to_string(dw.launches) + " launches");
  }
}

TEST_F(NondeterministicMutants, AtomicDwVariantHoldsWithMoreChunksThanAGridDimension) {
  // 65,536 rows of 8 bf16: the fused path makes one dw chunk per row, more chunks than a
  // grid's y dimension (65,535) holds; the variant's atomics kernel puts chunks on x.
  CaseSpec s = committed("bf16_3x256_seed2")->spec;
  s.shape = {65536, 8};
  s.seed = 0x5EED0001u;
  s.name = "bf16_65536x8_atomic_dw";
  const CaseData c = materialize(find_op("rmsnorm"), s);
  const TargetOp& v = *variants_of("rmsnorm").at(0);
  const GatedLaunches g = gate_launches(c, v.pass("Backward"), {"dx", "dw"}, v.precheck, "Backward [atomic_dw]");
  std::cout << "[ atomic_dw ] " << s.name << ": " << g.note << "\n";
  EXPECT_TRUE(g.problems.empty());
  for (const char* t : {"dx", "dw"}) EXPECT_EQ(g.results.at(t).verdict, Verdict::pass) << describe(g.results.at(t), s);
}

}  // namespace
}  // namespace numgate::testing
