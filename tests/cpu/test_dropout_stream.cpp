// dropout_add's random stream (kernels/dropout_add/dropout_stream.h) and oracles: Philox
// known answers, the stream rule, keep fractions, independence of n and of the launch
// split, threshold and scale arithmetic, parameter validation, the select semantics of the
// oracles, and the op's CPU mutants (which are caught, on which cases, and which are not).
#include <gtest/gtest.h>

#include <Random123/philox.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

#include "dropout_add/dropout_add_oracle.h"
#include "dropout_add/dropout_stream.h"
#include "mutant_testbed.h"

namespace numgate {
namespace {

using namespace numgate::dropout_add;

constexpr double kTwo32 = 4294967296.0;

// ---- Philox known answers ------------------------------------------------------------------

// Philox4x32-10 known-answer vectors of the Random123 distribution, file tests/kat_vectors
// (github.com/DEShawResearch/random123), its three "philox4x32 10" lines: ctr[4] key[2] ->
// result[4]. The Debian/Ubuntu package librandom123-dev ships the headers only (no
// kat_vectors), so the lines are copied here from the upstream file.
struct Kat {
  std::uint32_t ctr[4], key[2], out[4];
};
constexpr Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(DropoutStream, PhiloxKnownAnswersOfTheRandom123Distribution) {
  for (const Kat& k : kKats) {
    r123::Philox4x32 rng;
    const r123::Philox4x32::ctr_type ctr = {{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}};
    const r123::Philox4x32::key_type key = {{k.key[0], k.key[1]}};
    const auto r = rng(ctr, key);
    // The stream's composition of the counter and key from (group, seed, offset): word order.
    const std::uint64_t g = k.ctr[0] | (std::uint64_t{k.ctr[1]} << 32);
    const std::uint64_t off = k.ctr[2] | (std::uint64_t{k.ctr[3]} << 32);
    const std::uint64_t seed = k.key[0] | (std::uint64_t{k.key[1]} << 32);
    const auto d = dropout_group(g, seed, off);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(r[j], k.out[j]) << "Random123 Philox4x32-10 word " << j;
      EXPECT_EQ(d[j], k.out[j]) << "dropout_group word " << j;
      if (g < (std::uint64_t{1} << 62))  // element 4g + j exists (the all-ones and pi counters' 4g wraps)
        EXPECT_EQ(dropout_draw(4 * g + j, seed, off), k.out[j]) << "dropout_draw lane " << j;
    }
  }
}

TEST(DropoutStream, ElementIIsLaneIAnd3OfGroupIShiftedBy2) {
  const std::uint64_t seed = 0x123456789abcull, off = (std::uint64_t{1} << 40) + 3;
  for (std::uint64_t i : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{4},
                          std::uint64_t{1001}, (std::uint64_t{1} << 34) + 7, (std::uint64_t{1} << 40) + 5}) {
    r123::Philox4x32 rng;
    const std::uint64_t g = i >> 2;
    const r123::Philox4x32::ctr_type ctr = {{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32),
                                             static_cast<std::uint32_t>(off), static_cast<std::uint32_t>(off >> 32)}};
    const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
    EXPECT_EQ(dropout_draw(i, seed, off), rng(ctr, key)[i & 3]) << "element " << i;
  }
}

// ---- threshold, scale, keep rule ----------------------------------------------------------------

TEST(DropoutStream, ThresholdAndScaleArithmetic) {
  EXPECT_EQ(dropout_threshold(0.0), 0u);
  EXPECT_EQ(dropout_threshold(0.5), 2147483648u);
  EXPECT_EQ(dropout_threshold(0.25), 1073741824u);
  EXPECT_EQ(dropout_threshold(0.1), 429496729u);  // floor(0.1 * 2^32) = floor(429496729.6)
  EXPECT_EQ(dropout_threshold(std::nextafter(1.0, 0.0)), 4294967295u);  // p close to 1: t = 2^32 - 1
  EXPECT_EQ(dropout_threshold(0.999999), static_cast<std::uint32_t>(std::floor(0.999999 * kTwo32)));
  EXPECT_EQ(dropout_threshold(0x1p-33), 0u);  // below one draw in 2^32: nothing dropped
  EXPECT_EQ(dropout_threshold(0x1p-32), 1u);  // exactly the draw 0 dropped
  // p = 0 keeps everything, the draw 0 included; the keep rule is r >= t.
  EXPECT_TRUE(dropout_keep(0u, 0u));
  EXPECT_TRUE(dropout_keep(0xFFFFFFFFu, 0u));
  EXPECT_TRUE(dropout_keep(7u, 7u));
  EXPECT_FALSE(dropout_keep(6u, 7u));
  EXPECT_FALSE(dropout_keep(4294967294u, 4294967295u));
  EXPECT_TRUE(dropout_keep(4294967295u, 4294967295u));  // p close to 1: only the largest draw kept
  // Scales: RN_fp32(1 / (1 - p)) for the low-precision dtypes, FP64 for fp64.
  EXPECT_EQ(dropout_scale_fp32(0.0), 1.0f);
  EXPECT_EQ(dropout_scale_fp32(0.5), 2.0f);
  EXPECT_EQ(dropout_scale_fp32(0.9), static_cast<float>(1.0 / (1.0 - 0.9)));
  EXPECT_EQ(dropout_scale_fp32(0.1), static_cast<float>(1.0 / 0.9));
  EXPECT_EQ(dropout_scale_fp32(0.1), 1.11111116f);
  EXPECT_EQ(dropout_scale_fp64(0.1), 1.0 / 0.9);
  EXPECT_EQ(dropout_scale_fp64(0.5), 2.0);
}

CaseSpec spec(DType t, std::vector<std::int64_t> shape, double p, double seed, double offset) {
  CaseSpec c;
  c.name = "unit_case";
  c.dtype = t;
  c.shape = std::move(shape);
  c.seed = 1;
  c.params = {{"p", p}, {"philox_seed", seed}, {"philox_offset", offset}};
  return c;
}

TEST(DropoutStream, KeepFractionIsWithinFiveSigmaOfOneMinusP) {
  const std::size_t n = std::size_t{1} << 20;
  for (double p : {0.1, 0.5, 0.9}) {
    const CaseSpec c = spec(DType::bf16, {1024, 1024}, p, 20240601, 0);
    const auto keep = keep_mask(c, n, 1024);
    std::size_t kept = 0;
    for (unsigned char k : keep) kept += k;
    const double expected = static_cast<double>(n) * (1.0 - dropout_threshold(p) / kTwo32);
    const double sigma = std::sqrt(static_cast<double>(n) * p * (1.0 - p));
    std::cout << "[ dropout stream ] p " << p << ": " << kept << " of " << n << " kept (expected " << expected
              << ", sigma " << sigma << ", " << (static_cast<double>(kept) - expected) / sigma << " sigma)\n";
    EXPECT_LE(std::fabs(static_cast<double>(kept) - expected), 5.0 * sigma) << "p " << p;
  }
  // p = 0 keeps every element.
  const auto all = keep_mask(spec(DType::bf16, {1, 4096}, 0.0, 5, 9), 4096, 4096);
  for (unsigned char k : all) ASSERT_EQ(k, 1);
}

std::size_t differences(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
  return d;
}

TEST(DropoutStream, SameParametersGiveTheSameMaskOthersAnother) {
  const std::size_t n = 1 << 16;
  const auto base = keep_mask(spec(DType::fp32, {64, 1024}, 0.5, 77, 3), n, 1024);
  EXPECT_EQ(differences(base, keep_mask(spec(DType::fp32, {64, 1024}, 0.5, 77, 3), n, 1024)), 0u);
  // the same stream whatever the dtype
  EXPECT_EQ(differences(base, keep_mask(spec(DType::bf16, {64, 1024}, 0.5, 77, 3), n, 1024)), 0u);
  // another offset (each of its words), another seed (each of its words): about half differ
  const std::pair<double, double> others[] = {{77, 4}, {77, 3 + 4294967296.0}, {78, 3}, {77 + 4294967296.0, 3}};
  for (const auto& [seed, off] : others) {
    const std::size_t d = differences(base, keep_mask(spec(DType::fp32, {64, 1024}, 0.5, seed, off), n, 1024));
    EXPECT_GT(d, n / 2 - n / 16) << "seed " << seed << " offset " << off;
    EXPECT_LT(d, n / 2 + n / 16) << "seed " << seed << " offset " << off;
  }
}

TEST(DropoutStream, ElementIsDrawIndependentOfNAndOfTheLaunchSplit) {
  // A prefix of the tensor (a smaller n) draws the same elements.
  const CaseSpec big = spec(DType::bf16, {37, 1001}, 0.3, 991, 12);
  const std::size_t n = 37 * 1001;
  const auto whole = keep_mask(big, n, 1001);
  const auto prefix = keep_mask(spec(DType::bf16, {5, 1001}, 0.3, 991, 12), 5 * 1001, 1001);
  for (std::size_t i = 0; i < prefix.size(); ++i) ASSERT_EQ(prefix[i], whole[i]) << "element " << i;
  // Row windows [first, first + count) at every phase of the Philox groups (hidden 1001 is odd):
  // element_offset = first * hidden plus the local index is the whole tensor's element.
  const std::uint32_t t = dropout_threshold(0.3);
  for (std::int64_t first : {0, 1, 2, 3, 5, 17, 36})
    for (std::int64_t j = 0; j < 1001; ++j) {
      const std::int64_t e0 = first * 1001;
      ASSERT_EQ(dropout_keep(dropout_draw(static_cast<std::uint64_t>(e0 + j), 991, 12), t), whole[e0 + j] != 0)
          << "row " << first << " element " << j;
    }
  // A stream restarted at every row is NOT that (what a kernel ignoring element_offset gives).
  EXPECT_GT(differences(whole, keep_mask(big, n, 1001, Mutant::stream_restarts_each_row)), n / 4);
}

// ---- parameter validation ------------------------------------------------------------------------

void expect_refused(const CaseSpec& c, const std::string& field) {
  std::string why;
  Params p;
  EXPECT_FALSE(read_params(c, p, &why)) << field;
  EXPECT_NE(why.find("'" + c.name + "'"), std::string::npos) << why;
  EXPECT_NE(why.find(field + " = "), std::string::npos) << why;
  try {
    params_of(c);
    ADD_FAILURE() << "params_of accepted " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
  EXPECT_THROW(find_op("dropout_add").make_inputs(c), std::invalid_argument) << field;
}

TEST(DropoutStream, ParametersAreValidatedNamingTheCaseAndField) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (double p : {1.0, -0.1, 1.5, nan, -0.0 - 1e-300}) expect_refused(spec(DType::bf16, {2, 8}, p, 1, 0), "p");
  for (double v : {1.5, -1.0, 9007199254740994.0, inf, nan, 1e300}) {
    expect_refused(spec(DType::bf16, {2, 8}, 0.5, v, 0), "philox_seed");
    expect_refused(spec(DType::bf16, {2, 8}, 0.5, 1, v), "philox_offset");
  }
  // the edges accepted: p = 0 and just below 1, 0 and 2^53
  Params ok;
  EXPECT_TRUE(read_params(spec(DType::bf16, {2, 8}, 0.0, 0, 9007199254740992.0), ok));
  EXPECT_EQ(ok.offset, std::uint64_t{1} << 53);
  EXPECT_TRUE(read_params(spec(DType::bf16, {2, 8}, std::nextafter(1.0, 0.0), 9007199254740992.0, 0), ok));
  EXPECT_EQ(ok.threshold, 4294967295u);
  // a missing parameter is named too
  CaseSpec missing = spec(DType::bf16, {2, 8}, 0.5, 1, 0);
  missing.params.pop_back();
  try {
    params_of(missing);
    ADD_FAILURE() << "a case without philox_offset accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("philox_offset"), std::string::npos) << e.what();
  }
}

// ---- the oracles' semantics on the committed cases ---------------------------------------------

TEST(DropoutAddOracles, DroppedElementsAreASelectKeptOnesTheDeclaredFp32Policy) {
  const auto cases = testing::committed_cases_of("dropout_add");
  ASSERT_GE(cases.size(), 6u);
  bool saw_nonfinite_dropped = false;
  for (const CaseData& c : cases) {
    const Params P = params_of(c.spec);
    const float s = dropout_scale_fp32(P.p);
    const Tensor &x = c.inputs.at("x"), &res = c.inputs.at("residual"), &dy = c.inputs.at("dy");
    const auto keep = keep_mask(c.spec, x.numel(), c.spec.shape.back());
    const Tensor &y = c.reference.at("y"), &mask = c.reference.at("mask"), &dx = c.reference.at("dx");
    for (std::size_t i = 0; i < x.numel(); ++i) {
      ASSERT_EQ(mask.get(i), keep[i] ? 1.0 : 0.0) << c.spec.name << " " << i;
      ASSERT_EQ(c.golden.at("mask").value.get(i), keep[i] ? 1.0 : 0.0);
      const double g = c.golden.at("y").value.get(i);
      if (!keep[i]) {
        saw_nonfinite_dropped = saw_nonfinite_dropped || !std::isfinite(x.get(i));
        // residual exactly, whatever x is (NaN compares by position)
        if (std::isnan(res.get(i))) {
          ASSERT_TRUE(std::isnan(y.get(i)) && std::isnan(g));
        } else {
          ASSERT_EQ(y.get(i), res.get(i)) << c.spec.name << " element " << i;
          ASSERT_EQ(g, res.get(i)) << c.spec.name << " element " << i;
        }
        ASSERT_EQ(dx.get(i), 0.0);
        ASSERT_EQ(c.golden.at("dx").value.get(i), 0.0);
        ASSERT_EQ(c.golden.at("dx").abs_terms.get(i), 0.0);  // an exact 0 is required
      } else {
        const float want = static_cast<float>(x.get(i)) * s + static_cast<float>(res.get(i));
        const double rounded = round_to_dtype(static_cast<double>(want), c.spec.dtype);
        if (std::isnan(rounded)) ASSERT_TRUE(std::isnan(y.get(i)));
        else ASSERT_EQ(y.get(i), rounded) << c.spec.name << " element " << i;
      }
    }
    ASSERT_EQ(0, std::memcmp(c.reference.at("dresidual").data(), dy.data(), dy.bytes.size()))
        << c.spec.name << ": dresidual must be dy's bits";
  }
  EXPECT_TRUE(saw_nonfinite_dropped) << "no committed case drops a NaN / Inf x";
}

TEST(DropoutAddOracles, TheTieCaseDrawsOneElementExactlyAtTheThreshold) {
  int tie_cases = 0;
  for (const CaseData& c : testing::committed_cases_of("dropout_add")) {
    if (c.spec.name.find("_pt") == std::string::npos) continue;
    ++tie_cases;
    const Params P = params_of(c.spec);
    EXPECT_EQ(dropout_draw(5, P.seed, P.offset), P.threshold) << c.spec.name;
    EXPECT_EQ(c.reference.at("mask").get(5), 1.0) << "r == t is kept";
    EXPECT_EQ(reference_variant(c.spec, c.inputs, Mutant::threshold_strict).at("mask").get(5), 0.0);
  }
  EXPECT_EQ(tie_cases, 1);
}

// ---- CPU mutants: what catches each, and where -------------------------------------------------

const std::vector<CaseData>& generated() {
  static const std::vector<CaseData> v = testing::small_generated_cases_of("dropout_add", testing::kSmallGeneratedElements);
  return v;
}
testing::MutantSpec mutant(Mutant m, std::function<bool(const CaseData&)> must_fail) {
  return {mutant_name(m), [m](const CaseData& c) { return reference_variant(c.spec, c.inputs, m); },
          std::move(must_fail)};
}
double p_of(const CaseData& c) { return c.spec.param("p"); }
std::int64_t n_of(const CaseData& c) { return numel(c.spec.shape); }
// p strictly inside (0, 1) with enough elements that a wrong stream changes the mask.
bool stream_matters(const CaseData& c) { return p_of(c) > 0.0 && n_of(c) >= 64; }

TEST(DropoutAddMutants, StreamMutantsAreCaught) {
  const auto committed = testing::committed_cases_of("dropout_add");
  testing::expect_caught(mutant(Mutant::stream_ignores_offset,
                                [](const CaseData& c) { return stream_matters(c) && c.spec.param("philox_offset") != 0; }),
                         committed, generated());
  testing::expect_caught(mutant(Mutant::counter_per_element, stream_matters), committed, generated());
  testing::expect_caught(mutant(Mutant::lanes_permuted, stream_matters), committed, generated());
  testing::expect_caught(
      mutant(Mutant::key_high_word_dropped,
             [](const CaseData& c) { return stream_matters(c) && c.spec.param("philox_seed") >= 4294967296.0; }),
      committed, generated());
  testing::expect_caught(mutant(Mutant::stream_restarts_each_row,
                                [](const CaseData& c) { return stream_matters(c) && rows_of(c.spec.shape) > 1; }),
                         committed, generated());
}

// keep iff r > t differs from r >= t only where a draw equals the threshold (2^-32 per
// element): caught on the tie case, built for it, and (as expected) on no other case.
TEST(DropoutAddMutants, StrictThresholdIsCaughtOnTheTieCaseOnly) {
  const auto committed = testing::committed_cases_of("dropout_add");
  auto is_tie = [](const CaseData& c) { return c.spec.name.find("_pt") != std::string::npos; };
  testing::expect_caught(mutant(Mutant::threshold_strict, is_tie), committed, generated());
  int passed_elsewhere = 0, others = 0;
  for (const std::vector<CaseData>* set : {&committed, &generated()})
    for (const CaseData& c : *set) {
      if (is_tie(c)) continue;
      ++others;
      passed_elsewhere += testing::gate_outputs(c, reference_variant(c.spec, c.inputs, Mutant::threshold_strict)).verdict !=
                          Verdict::fail;
    }
  std::cout << "[ dropout mutant threshold_strict ] not caught (identical mask) on " << passed_elsewhere << " of "
            << others << " other cases\n";
}

TEST(DropoutAddMutants, MaskByMultiplicationLeaksDroppedNaNAndInf) {
  testing::expect_caught(mutant(Mutant::mask_by_multiplication, [](const CaseData& c) { return c.spec.pattern == "specials"; }),
                         testing::committed_cases_of("dropout_add"), generated());
}

TEST(DropoutAddMutants, ArithmeticMutantsAreCaught) {
  const auto committed = testing::committed_cases_of("dropout_add");
  // s in bf16: 1/(1-p) not a bf16 value (p 0.1: 1.109375 for 1.1111112), fp32 cases
  testing::expect_caught(
      mutant(Mutant::scale_in_bf16,
             [](const CaseData& c) { return c.spec.dtype == DType::fp32 && p_of(c) == 0.1 && n_of(c) >= 64; }),
      committed, generated());
  // x s rounded to bf16 / fp16 before the add (fp32: that is the policy itself)
  testing::expect_caught(
      mutant(Mutant::product_in_dtype,
             [](const CaseData& c) {  // s = 2 (p 0.5) and 1 (p 0): x s is exact in the dtype, nothing to catch
               return c.spec.dtype != DType::fp32 && stream_matters(c) && c.spec.pattern == "normal" &&
                      p_of(c) != 0.5 && n_of(c) >= 200;
             }),
      committed, generated());
}

}  // namespace
}  // namespace numgate
