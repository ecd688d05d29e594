// The gate gives the result of its pre-rewrite implementation (gate_legacy.cpp, a verbatim
// copy of evaluate_gate / check_structure before they were rewritten for speed) bit for
// bit: every GateResult field (doubles by their bits), the structure messages and the
// describe() text (the decidable-rounding rule, added since, aside: its FAIL and its line), on every committed fixture case with the reference and perturbed
// targets (ulps off, NaN/Inf injected, wrong shape or dtype, exact-zero violations, ULP
// rules, a perturbed reference, no abs_terms) and on random tensors of more than 2^20
// elements in every dtype (ties in different chunks, NaN/Inf, subnormals, overflow),
// whatever the number of threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>

#include "committed.h"
#include "gate_legacy.h"
#include "numgate/fixture_file.h"
#include "numgate/gate.h"

namespace numgate {
namespace {

using testing::CommittedCase;

std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

// describe() without its decidable-rounding line, and without its first line (the
// verdict) when the rule decided the verdict.
std::string without_rounding_line(const std::string& text, bool drop_verdict) {
  std::istringstream in(text);
  std::string line, out;
  bool first = true;
  while (std::getline(in, line)) {
    // (and without its "decided by" line: the legacy gate names no rule)
    const bool skip = (first && drop_verdict) || line.rfind("  decidable rounding:", 0) == 0 ||
                      line.rfind("  decided by:", 0) == 0;
    first = false;
    if (!skip) out += line + "\n";
  }
  return out;
}

// Every difference between two results, one line each ("" when bit-identical).
std::string differences(const GateResult& a, const GateResult& b, const CaseSpec& spec) {
  std::ostringstream os;
  os.precision(17);
  auto dbl = [&](const char* name, double x, double y) {
    if (bits_of(x) != bits_of(y)) os << name << ": " << x << " vs legacy " << y << "\n";
  };
  auto same = [&](const char* name, bool equal) {
    if (!equal) os << name << " differs\n";
  };
  same("tensor", a.tensor == b.tensor);
  same("shape", a.shape == b.shape);
  same("params", a.params == b.params);
  same("target_ran", a.target_ran == b.target_ran);
  same("reference_structure.ok", a.reference_structure.ok == b.reference_structure.ok);
  same("reference_structure.message", a.reference_structure.message == b.reference_structure.message);
  same("target_structure.ok", a.target_structure.ok == b.target_structure.ok);
  same("target_structure.message", a.target_structure.message == b.target_structure.message);
  dbl("golden_scale", a.golden_scale, b.golden_scale);
  dbl("reference_error", a.reference_error, b.reference_error);
  dbl("target_error", a.target_error, b.target_error);
  dbl("rounding_floor", a.rounding_floor, b.rounding_floor);
  dbl("absolute_floor", a.absolute_floor, b.absolute_floor);
  dbl("threshold", a.threshold, b.threshold);
  dbl("reference_relative_error", a.reference_relative_error, b.reference_relative_error);
  dbl("condition", a.condition, b.condition);
  same("gate_valid", a.gate_valid == b.gate_valid);
  same("reference_in_envelope", a.reference_in_envelope == b.reference_in_envelope);
  same("target_in_envelope", a.target_in_envelope == b.target_in_envelope);
  same("ulp_counts", a.ulp_counts == b.ulp_counts);
  same("max_ulp", a.max_ulp == b.max_ulp);
  same("max_ulp_index", a.max_ulp_index == b.max_ulp_index);
  same("worst_index", a.worst_index == b.worst_index);
  dbl("worst_golden", a.worst_golden, b.worst_golden);
  dbl("worst_reference", a.worst_reference, b.worst_reference);
  dbl("worst_target", a.worst_target, b.worst_target);
  // The decidable-rounding rule came after the rewrite: where it fails the target, the
  // verdict is FAIL whatever the legacy gate said; elsewhere the verdicts agree. Its line
  // of describe() is new; the rest of the text is the legacy one.
  const bool rule_failed = a.rounding_rule_valid && a.target_misrounded > 0;
  same("verdict", rule_failed ? a.verdict == Verdict::fail : a.verdict == b.verdict);
  same("describe()", without_rounding_line(describe(a, spec), rule_failed) ==
                         without_rounding_line(describe(b, spec), rule_failed));
  return os.str();
}

struct Counts {
  int evaluations = 0;
  std::array<int, 5> verdicts{};  // by Verdict value
};

// evaluate_gate with 1, 2, 3 and 8 threads against the legacy gate, and check_structure
// against the legacy structure checks; counts the legacy verdicts (coverage).
void expect_same(const std::string& label, const std::string& tensor, const CaseSpec& spec,
                 const GoldenTensor& golden, const Tensor& reference, const Tensor* target, Counts& counts) {
  const GateResult want = legacy::legacy_evaluate_gate(tensor, spec, golden, reference, target);
  ++counts.evaluations;
  ++counts.verdicts[static_cast<std::size_t>(want.verdict)];
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    set_gate_threads(threads);
    const GateResult got = evaluate_gate(tensor, spec, golden, reference, target);
    set_gate_threads(0);
    const std::string d = differences(got, want, spec);
    EXPECT_EQ(d, "") << label << ", " << threads << " thread(s):\n" << describe(want, spec);
    if (!d.empty()) return;
  }
  // check_structure: the legacy evaluate_gate's structure results are legacy_check_structure's,
  // unless the exact-zero rule (which runs only on a structure that was ok) replaced them.
  auto expect_structure = [&](const Tensor& t, const StructureCheck& legacy_gate) {
    StructureCheck want = legacy_gate;
    if (want.message.find("whose FP64 terms are all zero") != std::string::npos) want = StructureCheck{};
    const StructureCheck got = check_structure(golden.value, spec.dtype, t);
    EXPECT_EQ(got.ok, want.ok) << label;
    EXPECT_EQ(got.message, want.message) << label;
  };
  expect_structure(reference, want.reference_structure);
  if (target) expect_structure(*target, want.target_structure);
}

struct Mix {  // splitmix64: a small deterministic stream for perturbations
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

// Moves element i of t by k representable values (sign-magnitude ordinals on its bits;
// may step onto Inf/NaN at the end of the range, which is a fine input too).
void shift_ulps(Tensor& t, std::size_t i, std::int64_t k) {
  const std::size_t es = dtype_size(t.dtype);
  std::uint64_t b = 0;
  std::memcpy(&b, t.bytes.data() + i * es, es);
  const std::uint64_t sign = std::uint64_t{1} << (8 * es - 1);
  std::int64_t ord = (b & sign) ? -static_cast<std::int64_t>(b & ~sign) : static_cast<std::int64_t>(b);
  ord += k;
  b = ord < 0 ? (static_cast<std::uint64_t>(-ord) | sign) : static_cast<std::uint64_t>(ord);
  std::memcpy(t.bytes.data() + i * es, &b, es);
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// All the variants of one tensor of one case.
void check_variants(const std::string& label, const std::string& tensor, const CaseSpec& spec0,
                    const GoldenTensor& golden, const Tensor& reference, Counts& counts, std::uint64_t seed) {
  const std::size_t n = golden.value.numel();
  Mix rng{seed};
  CaseSpec spec = spec0;
  auto run = [&](const std::string& what, const CaseSpec& s, const GoldenTensor& g, const Tensor& r, const Tensor* t) {
    expect_same(label + " / " + what, tensor, s, g, r, t, counts);
  };
  run("no target", spec, golden, reference, nullptr);
  run("target = reference", spec, golden, reference, &reference);
  if (n == 0) return;

  Tensor ulps = reference;  // a few percent of the elements 1..5 ulps off, either way
  for (std::size_t k = 0; k < n / 50 + 1; ++k)
    shift_ulps(ulps, rng.below(n), static_cast<std::int64_t>(rng.below(5) + 1) * (rng.below(2) ? 1 : -1));
  run("ulps off", spec, golden, reference, &ulps);
  for (int limit : {0, 1, 2}) {
    CaseSpec u = spec;
    u.gate.ulp_limit = limit;
    run("ulps off, ulp_limit " + std::to_string(limit), u, golden, reference, &ulps);
    run("target = reference, ulp_limit " + std::to_string(limit), u, golden, reference, &reference);
  }
  CaseSpec atol = spec;
  atol.gate.project_atol = 1e-3;
  atol.gate.fudge_factor = 1.0;
  run("ulps off, project_atol 1e-3, fudge 1", atol, golden, reference, &ulps);
  CaseSpec strict = spec;  // gate not valid wherever the reference has any error: the envelope decides
  strict.gate.max_reference_relative_error = 0.0;
  run("max_reference_relative_error 0, target = reference", strict, golden, reference, &reference);
  run("max_reference_relative_error 0, ulps off", strict, golden, reference, &ulps);

  Tensor one = reference;  // a single element, far off
  one.set(rng.below(n), reference.get(rng.below(n)) * 3.0 + 1.0);
  run("one element off", spec, golden, reference, &one);

  Tensor nonfinite = ulps;  // NaN, +Inf, -Inf where golden is finite (or not)
  for (double v : {kNaN, kInf, -kInf, kNaN}) nonfinite.set(rng.below(n), v);
  run("NaN/Inf injected", spec, golden, reference, &nonfinite);
  CaseSpec u1 = spec;
  u1.gate.ulp_limit = 1;
  run("NaN/Inf injected, ulp_limit 1", u1, golden, reference, &nonfinite);

  Tensor reshaped = reference;  // structure: wrong shape, same elements
  reshaped.shape = {static_cast<std::int64_t>(n), 1};
  run("wrong shape", spec, golden, reference, &reshaped);
  {  // wrong dtype: still compared elementwise (another dtype for each tensor, from the seed)
    const DType others[] = {DType::fp32, DType::bf16, DType::fp16, DType::fp64};
    DType other = others[seed % 4];
    if (other == spec.dtype) other = others[(seed + 1) % 4];
    const Tensor converted = ulps.to(other);
    run("dtype " + std::string(dtype_name(other)), u1, golden, reference, &converted);
    run("reference in dtype " + std::string(dtype_name(other)), spec, golden, converted, &ulps);
  }

  Tensor ref_off = reference;  // a reference outside its envelope somewhere
  for (int k = 0; k < 3; ++k) shift_ulps(ref_off, rng.below(n), 3);
  run("reference off", spec, golden, ref_off, &ulps);
  run("reference off, target = reference", spec, golden, ref_off, &reference);

  GoldenTensor zeroed = golden;  // elements whose terms are all zero: must be exactly 0
  for (std::size_t k = 0; k < n / 100 + 1; ++k) {
    const std::size_t i = rng.below(n);
    zeroed.value.set(i, 0.0);
    if (zeroed.abs_terms.numel() == n) zeroed.abs_terms.set(i, 0.0);
  }
  run("golden zeroed (exact-zero rule)", spec, zeroed, reference, &ulps);
  Tensor zero_ok = ulps;
  for (std::size_t i = 0; i < n; ++i)
    if (zeroed.value.get(i) == 0.0) zero_ok.set(i, (i % 2) ? 0.0 : -0.0);
  run("golden zeroed, target zero there", spec, zeroed, zero_ok, &zero_ok);

  GoldenTensor no_terms = golden;  // abs_terms absent: |golden| stands in
  no_terms.abs_terms = Tensor(DType::fp64, {0});
  run("no abs_terms", spec, no_terms, reference, &ulps);
  GoldenTensor long_env = golden;
  long_env.envelope_length = 1 << 20;
  run("envelope_length 2^20", spec, long_env, ref_off, &ulps);
}

// The inline conversions of the gate's loops (dtype.h, namespace fast) against the
// out-of-line ones: every bf16/fp16 pattern, every midpoint between neighbouring values
// (ties, and one FP64 ulp either side), and millions of random doubles of every exponent.
template <DType T>
void expect_fast_conversions() {
  const char* name = dtype_name(T).data();
  auto same_bits = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b); };
  int failures = 0;
  auto check_round = [&](double v) {
    const double want = round_to_dtype(v, T), got = fast::round<T>(v);
    if (!same_bits(got, want) && failures++ < 10)
      ADD_FAILURE() << name << " round(" << std::hexfloat << v << ") = " << got << ", want " << want;
  };
  Mix rng{static_cast<std::uint64_t>(T) + 7};
  for (int k = 0; k < 1000000; ++k) check_round(fast::double_of(rng.next()));  // any pattern
  for (int k = 0; k < 1000000; ++k) {  // around the dtype's range, subnormals to overflow
    const int e = T == DType::fp64 ? static_cast<int>(rng.below(2100)) - 1080
                  : T == DType::fp16 ? static_cast<int>(rng.below(50)) - 30 : static_cast<int>(rng.below(300)) - 160;
    check_round((rng.below(2) ? -1.0 : 1.0) * std::ldexp(1.0 + rng.uniform(), e));
  }
  if constexpr (T == DType::bf16 || T == DType::fp16) {
    Tensor all(T, {65536});
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      std::memcpy(all.bytes.data() + 2 * b, &h, 2);
    }
    for (std::size_t i = 0; i < 65536; ++i) {
      const double v = all.get(i);
      EXPECT_TRUE(same_bits(fast::load<T>(all.bytes.data(), i), v)) << name << " pattern " << i;
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(fast::ordinal_at<T>(all.bytes.data(), i), fast::ordinal<T>(v)) << name << " pattern " << i;
      EXPECT_EQ(ulp_distance(v, 0.0, T), std::abs(fast::ordinal<T>(v))) << name << " pattern " << i;
      if ((i & 0x7FFF) == 0x7FFF) continue;
      double next = all.get(i + 1);  // the neighbour away from zero; past the largest finite
      if (std::isinf(next)) next = v + (v - all.get(i - 1));  // value, where it would be: overflow ties
      if (!std::isfinite(next)) continue;
      const double mid = 0.5 * (v + next);  // exact in FP64
      for (double x : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) check_round(x);
      const std::size_t j = rng.below(65536);
      if (std::isfinite(all.get(j)))
        EXPECT_EQ(ulp_distance(v, all.get(j), T), std::abs(fast::ordinal<T>(v) - fast::ordinal<T>(all.get(j))))
            << name << " patterns " << i << ", " << j;
    }
  } else {
    Tensor some(T, {1 << 16});
    const std::size_t es = dtype_size(T);
    for (std::size_t i = 0; i < some.numel(); ++i) {
      const std::uint64_t b = rng.next();
      std::memcpy(some.bytes.data() + es * i, &b, es);
    }
    for (std::size_t i = 0; i < some.numel(); ++i) {
      const double v = some.get(i);
      EXPECT_TRUE(same_bits(fast::load<T>(some.bytes.data(), i), v)) << name << " element " << i;
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(fast::ordinal_at<T>(some.bytes.data(), i), fast::ordinal<T>(v)) << name << " element " << i;
      const double w = some.get(rng.below(some.numel()));
      if (std::isfinite(w) && T == DType::fp32)
        EXPECT_EQ(ulp_distance(v, w, T), std::abs(fast::ordinal<T>(v) - fast::ordinal<T>(w))) << name << " " << i;
      if constexpr (T == DType::fp32) {  // midpoints to the neighbour away from zero
        const double next = std::nextafter(static_cast<float>(v), std::copysign(INFINITY, static_cast<float>(v)));
        if (!std::isfinite(next)) continue;  // the overflow tie is checked below
        const double mid = 0.5 * (v + next);
        for (double x : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) check_round(x);
      }
    }
  }
  // Edges: the overflow tie and its neighbours, the largest finite, the smallest subnormal
  // and half of it (a tie to zero), the smallest normal, signed zeros.
  const int p = dtype_precision(T);
  const int emin = T == DType::fp16 ? -14 : T == DType::fp64 ? -1022 : -126;
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - p), T == DType::fp16 ? 15 : T == DType::fp64 ? 1023 : 127);
  const double tie = T == DType::fp64 ? max_finite : max_finite + std::ldexp(1.0, (T == DType::fp16 ? 15 : 127) - p);
  const double sub = std::ldexp(1.0, emin - p + 1);
  for (double s : {1.0, -1.0})
    for (double x : {tie, std::nextafter(tie, 0.0), std::nextafter(tie, INFINITY), max_finite, sub, sub / 2,
                     std::nextafter(sub / 2, 0.0), std::nextafter(sub / 2, 1.0), 1.5 * sub, 2.5 * sub,
                     std::ldexp(1.0, emin), std::nextafter(std::ldexp(1.0, emin), 0.0), 0.0, 0x1p-1074,
                     std::numeric_limits<double>::max()})
      check_round(s * x);
  EXPECT_EQ(failures, 0) << name;
}

TEST(GateEquivalence, InlineConversionsGiveTheOutOfLineBits) {
  expect_fast_conversions<DType::bf16>();
  expect_fast_conversions<DType::fp16>();
  expect_fast_conversions<DType::fp32>();
  expect_fast_conversions<DType::fp64>();
}

// One test over all committed cases, so that it can require the variants to reach every verdict.
TEST(GateEquivalence, EveryCommittedCaseGivesTheLegacyResultBitForBit) {
  Counts counts;
  std::uint64_t seed = 1;
  for (const CommittedCase& cc : testing::committed_cases()) {
    const CaseData c = read_case(cc.file, cc.name);
    for (const auto& t : c.output_names)
      check_variants(c.op + "/" + c.spec.name + "/" + t, t, c.spec, c.golden.at(t), c.reference.at(t), counts, seed++);
  }
  std::cout << "[ gate ] " << counts.evaluations << " legacy evaluations on committed cases; verdicts PASS "
            << counts.verdicts[0] << ", PASS WITH LIMITATIONS " << counts.verdicts[1] << ", FAIL " << counts.verdicts[2]
            << ", INCONCLUSIVE " << counts.verdicts[3] << ", NOT RUN " << counts.verdicts[4] << "\n";
  for (int v : counts.verdicts) EXPECT_GT(v, 0);
}

// Random tensors of more than 2^20 elements in every dtype: many chunks whatever the
// thread count, ties of the largest error and of the largest ULP distance in different
// chunks, NaN/Inf, signed zeros, subnormals of the dtype and values near its overflow.
TEST(GateEquivalence, LargeRandomTensorsOfEveryDtype) {
  const std::vector<std::int64_t> shape = {1025, 1024};
  const std::size_t n = 1025 * 1024;
  Counts counts;
  for (DType t : {DType::bf16, DType::fp16, DType::fp32, DType::fp64}) {
    Mix rng{static_cast<std::uint64_t>(t) + 100};
    CaseSpec spec;
    spec.name = "random";
    spec.dtype = t;
    spec.shape = shape;
    GoldenTensor g{Tensor(DType::fp64, shape), Tensor(DType::fp64, shape), 64};
    const int p = dtype_precision(t);
    const double tiny = t == DType::fp16 ? 0x1p-24 : t == DType::fp64 ? 0x1p-1074 : t == DType::bf16 ? 0x1p-133 : 0x1p-149;
    const double big = t == DType::fp16 ? 65504.0 : t == DType::fp64 ? std::numeric_limits<double>::max()
                                                                     : std::ldexp(2.0 - std::ldexp(1.0, 1 - p), 127);
    for (std::size_t i = 0; i < n; ++i) {
      const double u = rng.uniform(), s = rng.below(2) ? -1.0 : 1.0;
      double v;
      if (u < 0.5) v = s * rng.uniform() * 8.0;                               // ordinary
      else if (u < 0.6) v = 4.0;                                              // exact: ties
      else if (u < 0.65) v = s * 0.0;                                         // signed zeros
      else if (u < 0.75) v = s * tiny * rng.uniform() * 4096.0;               // subnormal range
      else if (u < 0.8) v = s * big * (0.999 + 0.002 * rng.uniform());        // near overflow
      else if (u < 0.805) v = rng.below(3) == 0 ? kNaN : s * kInf;            // non-finite golden
      else v = s * std::ldexp(rng.uniform() + 0.5, static_cast<int>(rng.below(60)) - 30);  // wide range
      g.value.set(i, v);
      const double terms = rng.below(10) == 0 ? 0.0 : std::fabs(v) * (1.0 + 4.0 * rng.uniform());
      g.abs_terms.set(i, rng.below(100000) == 0 ? kNaN : terms);
    }
    Tensor ref(t, shape);
    for (std::size_t i = 0; i < n; ++i) ref.set(i, g.value.get(i));  // the rounded golden
    for (std::size_t k = 0; k < n / 20; ++k) shift_ulps(ref, rng.below(n), rng.below(2) ? 1 : -1);
    Tensor tgt = ref;
    for (std::size_t k = 0; k < n / 20; ++k) shift_ulps(tgt, rng.below(n), rng.below(2) ? 2 : -2);
    // The same largest error and ULP distance (7 ulps of 4.0) in different chunks.
    std::vector<std::size_t> ties;
    for (std::size_t i = 0; i < n && ties.size() < 6; i += n / 6)
      for (std::size_t j = i; j < n; ++j)
        if (g.value.get(j) == 4.0) { ties.push_back(j); break; }
    for (std::size_t j : ties) {
      tgt.set(j, 4.0);
      ref.set(j, 4.0);
      shift_ulps(tgt, j, 7);
    }
    const std::string label = "random " + std::string(dtype_name(t));
    expect_same(label + " / no target", "y", spec, g, ref, nullptr, counts);
    expect_same(label + " / target", "y", spec, g, ref, &tgt, counts);
    CaseSpec u = spec;
    u.gate.ulp_limit = 2;
    expect_same(label + " / target, ulp_limit 2", "y", u, g, ref, &tgt, counts);
    // Structure: the reference mirrors the golden's NaN/Inf (set() rounds, so overflow
    // is Inf already); break a few places of the target far apart.
    Tensor broken = tgt;
    for (std::size_t k = 0; k < 5; ++k) broken.set(k * (n / 5) + rng.below(n / 5), k % 2 ? kNaN : 1.0);
    expect_same(label + " / structure broken", "y", spec, g, ref, &broken, counts);
    // Exact zeros violated far apart.
    Tensor nonzero = tgt;
    for (std::size_t i = 0, hit = 0; i < n && hit < 4; ++i)
      if (g.value.get(i) == 0.0 && g.abs_terms.get(i) == 0.0 && i > hit * (n / 4)) {
        nonzero.set(i, tiny);
        ++hit;
      }
    GoldenTensor long_env = g;  // and an envelope wide enough for some of the shifts
    long_env.envelope_length = 1 << 24;
    expect_same(label + " / exact zeros violated, envelope 2^24", "y", u, long_env, ref, &nonzero, counts);
  }
  // The inputs reach FAIL and NOT RUN at least (the committed cases cover every verdict).
  EXPECT_GT(counts.verdicts[static_cast<std::size_t>(Verdict::fail)], 0);
  EXPECT_GT(counts.verdicts[static_cast<std::size_t>(Verdict::not_run)], 0);
}

}  // namespace
}  // namespace numgate
