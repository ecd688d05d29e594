// The decidable-rounding rule (numgate/gate.h) on every op: the reference (a legitimate
// evaluation) is never misrounded (test_oracles.cpp checks that), and two systematic
// sub-ulp errors of the kind a max-abs threshold lets through are seen wherever the rule
// decides an element: every output one ulp toward +Inf (a small constant offset), and
// subnormal results flushed to zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>

#include "mutant_testbed.h"
#include "numgate/gate.h"

namespace numgate {
namespace {

// The raw bits of element i of a 2- or 4-byte float tensor, and back.
std::uint32_t bits_at(const Tensor& t, std::size_t i) {
  std::uint32_t b = 0;
  std::memcpy(&b, t.bytes.data() + i * dtype_size(t.dtype), dtype_size(t.dtype));
  return b;
}
void set_bits(Tensor& t, std::size_t i, std::uint32_t b) {
  std::memcpy(t.bytes.data() + i * dtype_size(t.dtype), &b, dtype_size(t.dtype));
}

// Every finite element moved to its neighbour toward +Inf (the largest finite value stays).
Tensor one_ulp_up(const Tensor& t) {
  Tensor out = t;
  for (std::size_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (!std::isfinite(v)) continue;
    const std::uint32_t b = bits_at(t, i);
    // +-0: the smallest positive subnormal; positive: one more magnitude; negative: one less.
    set_bits(out, i, v == 0.0 ? 1u : v > 0 ? b + 1 : b - 1);
    if (!std::isfinite(out.get(i))) set_bits(out, i, b);  // past the largest finite value
  }
  return out;
}

// Subnormal elements replaced by zero of the same sign (flush to zero).
Tensor flushed(const Tensor& t, double smallest_normal) {
  Tensor out = t;
  for (std::size_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (v != 0.0 && std::fabs(v) < smallest_normal) out.set(i, std::signbit(v) ? -0.0 : 0.0);
  }
  return out;
}

double smallest_normal(DType t) { return std::ldexp(1.0, t == DType::fp16 ? -14 : -126); }

std::vector<CaseData> cases_of(const std::string& op) {
  std::vector<CaseData> v = testing::committed_cases_of(op);
  for (auto& c : testing::small_generated_cases_of(op, testing::kSmallGeneratedElements)) v.push_back(std::move(c));
  return v;
}

TEST(DecidableRounding, EveryOpSeesAOneUlpOffsetWhereverAnElementIsDecidable) {
  for (const auto& op : all_ops()) {
    int tensors = 0, decided = 0, caught = 0;
    for (const CaseData& c : cases_of(op->name())) {
      if (c.spec.dtype == DType::fp64) continue;
      for (const auto& t : c.output_names) {
        ++tensors;
        const Tensor target = one_ulp_up(c.reference.at(t));
        const GateResult r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &target);
        if (r.decidable == 0 || !r.rounding_rule_valid) continue;
        ++decided;
        EXPECT_GT(r.target_misrounded, 0) << op->name() << "/" << c.spec.name << "/" << t << "\n" << describe(r, c.spec);
        EXPECT_EQ(r.verdict, Verdict::fail) << op->name() << "/" << c.spec.name << "/" << t << "\n"
                                            << describe(r, c.spec);
        caught += r.verdict == Verdict::fail;
      }
    }
    std::cout << "[ one ulp up ] " << op->name() << ": " << tensors << " tensors, " << decided
              << " with decidable elements, FAIL on " << caught << "\n";
    EXPECT_GT(decided, 0) << op->name() << ": no tensor with a decidable element";
  }
}

TEST(DecidableRounding, FlushedSubnormalResultsFailWhereTheyAreDecidable) {
  int tensors_with_subnormals = 0;
  for (const auto& op : all_ops()) {
    int with = 0, caught = 0;
    for (const CaseData& c : cases_of(op->name())) {
      if (c.spec.dtype == DType::fp64) continue;
      for (const auto& t : c.output_names) {
        const Tensor& ref = c.reference.at(t);
        const Tensor target = flushed(ref, smallest_normal(c.spec.dtype));
        if (testing::first_bit_difference(target, ref) < 0) continue;  // no subnormal result
        const GateResult r = evaluate_gate(t, c.spec, c.golden.at(t), ref, &target);
        if (r.target_misrounded == 0) continue;  // no flushed element decidable
        ++with;
        EXPECT_EQ(r.verdict, Verdict::fail) << op->name() << "/" << c.spec.name << "/" << t << "\n"
                                            << describe(r, c.spec);
        caught += r.verdict == Verdict::fail;
      }
    }
    std::cout << "[ flushed subnormals ] " << op->name() << ": " << with
              << " tensors with decidable subnormal results, FAIL on " << caught << "\n";
    tensors_with_subnormals += with;
  }
  EXPECT_GT(tensors_with_subnormals, 0) << "no case of any op produces a decidable subnormal result";
}

}  // namespace
}  // namespace numgate
