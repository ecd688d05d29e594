// The replay can fail: deliberately broken forward kernels (tests/gpu/mutants/
// rmsnorm_mutants.cu) are run through the same test bed on committed cases chosen to
// expose them, and each must be caught — by the poison / two-launch check, the guard
// bands, or the numeric gate.
#include <gtest/gtest.h>

#include <iostream>

#include "numgate/gate.h"
#include "replay.h"
#include "mutants/rmsnorm_mutants.h"

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
  const GateResult r = evaluate_gate("y", c.spec, c.golden.at("y"), c.reference.at("y"), &a.outputs.at("y"));
  k.gate_fail = r.verdict == Verdict::fail;
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

}  // namespace
}  // namespace numgate::testing
