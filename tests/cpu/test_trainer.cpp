// numgate-train's CPU parts (gate 3): the synthetic corpus, the loss-curve gate's
// arithmetic, the first-divergence rule, the per-op switch and gate 3 in the report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "corpus.h"
#include "loss_gate.h"
#include "model.h"
#include "numgate/report.h"

namespace nt = numgate::train;

namespace {

nt::CorpusConfig small() {
  nt::CorpusConfig c;
  c.batch = 4;
  c.seq = 128;
  return c;
}

TEST(TrainerCorpus, IsAPureFunctionOfSeedAndIndex) {
  const auto c = small();
  const nt::Batch a = nt::make_batch(c, 7, 3), b = nt::make_batch(c, 7, 3);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_NE(a.tokens, nt::make_batch(c, 7, 4).tokens) << "another batch index must give other data";
  EXPECT_NE(a.tokens, nt::make_batch(c, 8, 3).tokens) << "another seed must give other data";
}

TEST(TrainerCorpus, DocumentsArePaddedAndTargetsAreTheNextToken) {
  const auto c = small();
  for (std::uint64_t index : {0u, 1u, 17u}) {
    const nt::Batch b = nt::make_batch(c, 1, index);
    ASSERT_EQ(b.tokens.size(), static_cast<std::size_t>(c.batch * c.seq));
    std::int64_t valid = 0;
    for (std::int64_t s = 0; s < c.batch; ++s) {
      const std::int32_t* tok = b.tokens.data() + s * c.seq;
      const std::int64_t* tgt = b.targets.data() + s * c.seq;
      EXPECT_EQ(tok[0], nt::kBos);
      std::int64_t len = 0;
      while (len < c.seq && tok[len] != nt::kPad) ++len;
      EXPECT_GE(len, c.seq / 2) << "batch " << index << " sequence " << s;
      for (std::int64_t j = len; j < c.seq; ++j) EXPECT_EQ(tok[j], nt::kPad) << "PAD only after the document";
      for (std::int64_t j = 0; j < c.seq; ++j) {
        EXPECT_LT(tok[j], c.vocab);
        EXPECT_EQ(b.positions[static_cast<std::size_t>(s * c.seq + j)], j);
        if (j + 1 < len) {
          EXPECT_EQ(tgt[j], tok[j + 1]) << "target = next token, sequence " << s << " position " << j;
          ++valid;
        } else {
          EXPECT_EQ(tgt[j], nt::kIgnoreIndex) << "last token and padding are ignored, position " << j;
        }
      }
    }
    EXPECT_EQ(b.valid, valid);
  }
}

TEST(TrainerCorpus, CopySegmentsRepeatTheirTokens) {
  const auto c = small();
  int segments = 0;
  for (std::uint64_t index = 0; index < 8; ++index) {
    const nt::Batch b = nt::make_batch(c, 2, index);
    for (std::int64_t s = 0; s < c.batch; ++s) {
      const std::int32_t* tok = b.tokens.data() + s * c.seq;
      for (std::int64_t j = 0; j < c.seq; ++j) {
        if (tok[j] != nt::kCopy) continue;
        std::int64_t k = j + 1;  // the closing marker
        while (k < c.seq && tok[k] != nt::kCopy) ++k;
        ASSERT_LT(k, c.seq) << "an opened copy segment is closed";
        const std::int64_t l = k - j - 1;
        EXPECT_GE(l, 8);
        for (std::int64_t i = 0; i < l; ++i) EXPECT_EQ(tok[k + 1 + i], tok[j + 1 + i]) << "copy differs at " << i;
        ++segments;
        j = k + l;
      }
    }
  }
  EXPECT_GT(segments, 10) << "copy segments must occur (copy_probability 0.25)";
}

TEST(TrainerCorpus, TheMarkovPartIsFarBelowUniformEntropy) {
  // The floor the loss approaches: the Zipf law's entropy, well below ln(vocab).
  const double h = nt::zipf_entropy(nt::CorpusConfig{}.zipf_exponent, 1021);
  EXPECT_LT(h, std::log(1024.0) - 1.5) << h;
  EXPECT_NEAR(nt::zipf_entropy(0.0, 1021), std::log(1021.0), 1e-9) << "exponent 0 is the uniform law";
  // Next-token given the previous one: the most frequent successor of a context accounts
  // for far more than 1/M of its occurrences (a learnable bigram structure).
  const auto c = small();
  std::vector<std::vector<int>> counts(static_cast<std::size_t>(c.vocab), std::vector<int>(static_cast<std::size_t>(c.vocab)));
  for (std::uint64_t index = 0; index < 40; ++index) {
    const nt::Batch b = nt::make_batch(c, 3, index);
    for (std::size_t i = 0; i + 1 < b.tokens.size(); ++i)
      if (b.targets[i] != nt::kIgnoreIndex) ++counts[static_cast<std::size_t>(b.tokens[i])][static_cast<std::size_t>(b.targets[i])];
  }
  long top = 0, all = 0;
  for (const auto& row : counts) {
    int mx = 0, sum = 0;
    for (int v : row) { mx = std::max(mx, v); sum += v; }
    if (sum >= 20) { top += mx; all += sum; }
  }
  ASSERT_GT(all, 1000);
  EXPECT_GT(static_cast<double>(top) / all, 0.1) << "most frequent successor share";
}

TEST(TrainerCorpus, RefusesABadConfiguration) {
  auto c = small();
  c.vocab = 1000;  // 997 is prime: allowed
  EXPECT_NO_THROW(nt::make_batch(c, 1, 0));
  c.vocab = 1025;  // 1022 is not prime
  EXPECT_THROW(nt::make_batch(c, 1, 0), std::invalid_argument);
  c = small();
  c.seq = 16;
  EXPECT_THROW(nt::make_batch(c, 1, 0), std::invalid_argument);
}

std::vector<double> flat(int n, double v) { return std::vector<double>(static_cast<std::size_t>(n), v); }

TEST(LossCurveGate, PassesBelowHalfAPercentAndFailsAtIt) {
  const auto ref = flat(200, 4.0);
  EXPECT_TRUE(nt::compare_curves(1, ref, flat(200, 4.0 * 1.004)).pass);
  EXPECT_TRUE(nt::compare_curves(1, ref, flat(200, 4.0 * 0.996)).pass);
  EXPECT_FALSE(nt::compare_curves(1, ref, flat(200, 4.0 * 1.006)).pass);
  EXPECT_FALSE(nt::compare_curves(1, ref, flat(200, 4.0 * 0.994)).pass);
  // Exactly 0.5% (200 vs 201: the quotient rounds like the declared 0.005) is not below it.
  const nt::SeedVerdict edge = nt::compare_curves(1, flat(200, 200.0), flat(200, 201.0));
  EXPECT_EQ(edge.relative_difference, 0.005);
  EXPECT_FALSE(edge.pass) << "the gate is strict: < 0.5%";
  EXPECT_FALSE(nt::compare_curves(1, flat(200, -4.0), flat(200, -8.0)).pass) << "a non-positive reference mean fails";
  const nt::SeedVerdict v = nt::compare_curves(1, ref, flat(200, 4.0 * 1.006));
  EXPECT_NEAR(v.relative_difference, 0.006, 1e-12);
  EXPECT_NE(v.why.find("0.6000%"), std::string::npos) << v.why;
}

TEST(LossCurveGate, UsesTheLastFiftyStepsOnly) {
  auto ref = flat(200, 4.0), tgt = flat(200, 4.0);
  for (int i = 0; i < 150; ++i) tgt[static_cast<std::size_t>(i)] = 9.0;  // early steps: anything
  EXPECT_TRUE(nt::compare_curves(1, ref, tgt).pass);
  tgt[150] = 4.0 + 50 * 4.0 * 0.006;  // one late step moves the last-50 mean by 0.6%
  EXPECT_FALSE(nt::compare_curves(1, ref, tgt).pass);
  EXPECT_DOUBLE_EQ(nt::tail_mean({1, 2, 3, 4}, 2), 3.5);
  EXPECT_THROW(nt::tail_mean({1, 2}, 3), std::invalid_argument);
}

TEST(LossCurveGate, ShortUnequalOrNonFiniteCurvesFail) {
  EXPECT_FALSE(nt::compare_curves(1, flat(199, 4), flat(199, 4)).pass) << "fewer than 200 steps";
  EXPECT_FALSE(nt::compare_curves(1, flat(200, 4), flat(201, 4)).pass);
  auto nan = flat(200, 4.0);
  nan[10] = std::numeric_limits<double>::quiet_NaN();  // a diverged step, early
  const nt::SeedVerdict v = nt::compare_curves(1, flat(200, 4), nan);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.why.find("step 10"), std::string::npos) << v.why;
  auto inf = flat(200, 4.0);
  inf[199] = INFINITY;
  EXPECT_FALSE(nt::compare_curves(1, inf, flat(200, 4)).pass);
}

TEST(FirstDivergence, DifferencesAndTheFirstJump) {
  const nt::DivergenceRow same = nt::difference("a", {1, 2, 3}, {1, 2, 3});
  EXPECT_EQ(same.max_abs, 0);
  EXPECT_EQ(same.rel_l2, 0);
  const nt::DivergenceRow d = nt::difference("b", {3, 4}, {3, 4.5f});
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(d.rel_l2, 0.5 / 5.0);
  EXPECT_THROW(nt::difference("c", {1}, {1, 2}), std::invalid_argument);
  EXPECT_TRUE(std::isnan(nt::difference("n", {1, 2}, {1, NAN}).rel_l2)) << "NaN on one side";
  EXPECT_EQ(nt::difference("nn", {NAN, 2}, {NAN, 2}).rel_l2, 0) << "NaN on both sides agrees";
  EXPECT_EQ(nt::difference("ii", {INFINITY, 1}, {INFINITY, 1}).rel_l2, 0) << "equal infinities agree";
  EXPECT_TRUE(std::isnan(nt::difference("i-", {INFINITY, 1}, {-INFINITY, 1}).rel_l2)) << "opposite infinities do not";

  // Noise at the bf16 rounding level, growing slowly, then a jump, then noise again.
  std::vector<nt::DivergenceRow> rows(5);
  const double rel[] = {0.002, 0.004, 0.02, 0.5, 0.6};
  for (int i = 0; i < 5; ++i) rows[i].name = "op" + std::to_string(i), rows[i].rel_l2 = rel[i];
  EXPECT_EQ(nt::mark_jumps(rows), 3);
  EXPECT_FALSE(rows[2].jump) << "0.02 < 8 x 2^-8: inherited noise";
  EXPECT_DOUBLE_EQ(rows[3].inherited, 0.02);
  EXPECT_FALSE(rows[4].jump) << "after the jump, 0.6 is what it inherits";
  rows[1].rel_l2 = NAN;
  EXPECT_EQ(nt::mark_jumps(rows), 1) << "a non-finite difference always jumps";
  std::vector<nt::DivergenceRow> quiet(3);
  EXPECT_EQ(nt::mark_jumps(quiet), -1);
}

TEST(TrainerSwitch, ParsesTargetListsAndMutants) {
  EXPECT_EQ(nt::TargetSet::parse("all").str(), "all");
  EXPECT_EQ(nt::TargetSet::parse("none").str(), "none");
  const nt::TargetSet t = nt::TargetSet::parse("rope,rmsnorm");
  EXPECT_TRUE(t.has(nt::OpId::rmsnorm));
  EXPECT_TRUE(t.has(nt::OpId::rope));
  EXPECT_FALSE(t.has(nt::OpId::softmax));
  EXPECT_EQ(t.str(), "rmsnorm,rope");
  std::string list;
  for (nt::OpId op : nt::kOps) list += std::string(list.empty() ? "" : ",") + nt::op_name(op);
  EXPECT_EQ(nt::TargetSet::parse(list), nt::TargetSet::all());
  try {
    nt::TargetSet::parse("rmsnorm,layernrom");
    FAIL() << "an unknown op must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layernrom"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dropout_add"), std::string::npos) << "lists the known ops: " << e.what();
  }
  for (nt::Mutant m : nt::kMutants) EXPECT_EQ(nt::parse_mutant(nt::mutant_name(m)), m);
  EXPECT_THROW(nt::parse_mutant("eps"), std::invalid_argument);
}

numgate::Gate3Report passing_gate3() {
  numgate::Gate3Report g;
  g.steps = 200;
  g.last_steps = 50;
  g.max_relative_difference = 0.005;
  g.reproducibility_checked = g.reference_reproducible = true;
  g.seeds = {{1, 3.5, 3.51, std::fabs(3.5 - 3.51) / 3.5, true, "ok"}, {2, 3.6, 3.6, 0, true, "ok"}};
  g.curves_csv = "curves.csv";
  g.divergence_step = 50;
  g.first_divergence = "";
  g.seconds = 12.5;
  return g;
}

TEST(Gate3Report, VerdictRoundTripAndMerge) {
  numgate::Gate3Report g = passing_gate3();
  EXPECT_EQ(g.verdict(), numgate::Verdict::pass);
  g.reference_reproducible = false;
  EXPECT_EQ(g.verdict(), numgate::Verdict::fail) << "a reference path that is not reproducible fails gate 3";
  g = passing_gate3();
  g.seeds[1].pass = false;
  EXPECT_EQ(g.verdict(), numgate::Verdict::fail);
  EXPECT_EQ(numgate::Gate3Report{}.verdict(), numgate::Verdict::not_run);

  numgate::Report r;
  r.device = "NVIDIA H200 (sm_90)";
  r.gate3 = {passing_gate3()};
  EXPECT_EQ(r.overall(), numgate::Verdict::pass) << "a report of gate 3 alone has its verdict";
  r.gate3[0].seeds[0].pass = false;
  EXPECT_EQ(r.overall(), numgate::Verdict::fail);
  r.gate3 = {passing_gate3()};

  const auto dir = std::filesystem::temp_directory_path() / ("numgate_gate3_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  numgate::write_report(r, dir.string());
  const numgate::Report back = numgate::read_report((dir / "report.json").string());
  EXPECT_EQ(numgate::report_difference(r, back), "");
  const std::string md = numgate::to_markdown(r);
  EXPECT_NE(md.find("## Gate 3 (training run)"), std::string::npos);
  EXPECT_NE(numgate::summary_table(r).find("Gate 3"), std::string::npos);

  // Merged with a per-op report, gate 3 counts in the overall verdict; twice is refused.
  numgate::Report op;
  op.device = r.device;
  numgate::Report failing = r;
  failing.gate3[0].seeds[0].pass = false;
  EXPECT_EQ(numgate::merge_reports({op, failing}).gate3.size(), 1u);
  EXPECT_EQ(numgate::merge_reports({op, failing}).overall(), numgate::Verdict::fail);
  try {
    numgate::merge_reports({r, r}, {"a.json", "b.json"});
    FAIL() << "gate 3 merged twice";
  } catch (const numgate::ReportError& e) {
    EXPECT_EQ(e.field(), "/gate3/0") << e.what();
  }

  // A seed of 2^63 + 5 survives the round trip.
  numgate::Report big = r;
  big.gate3[0].seeds[0].seed = (1ull << 63) + 5;
  numgate::write_report(big, dir.string());
  EXPECT_EQ(numgate::read_report((dir / "report.json").string()).gate3[0].seeds[0].seed, (1ull << 63) + 5);

  // Tampering: a passing seed whose numbers do not give a pass, a reproducibility check
  // without seeds, two gate-3 rows: each refused naming the field.
  auto refused = [&](const std::string& field, const std::function<void(nlohmann::json&)>& edit) {
    numgate::write_report(r, dir.string());
    const std::string path = (dir / "report.json").string();
    nlohmann::json j;
    std::ifstream(path) >> j;
    edit(j);
    std::ofstream(path) << j.dump(2);
    try {
      numgate::read_report(path);
      ADD_FAILURE() << field << ": the edited report was accepted";
    } catch (const numgate::ReportError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  };
  refused("/gate3/0/seeds/0/pass", [](nlohmann::json& j) { j["gate3"][0]["seeds"][0]["relative_difference"] = 0.9; });
  refused("/gate3/0/seeds/0/pass", [](nlohmann::json& j) { j["gate3"][0]["seeds"][0]["target_mean"] = 9.0; });
  refused("/gate3/0/reproducibility_checked", [](nlohmann::json& j) {
    j["gate3"][0]["seeds"] = nlohmann::json::array();
    j["gate3"][0]["verdict"] = "NOT RUN";
    j["overall_verdict"] = "NOT RUN";
  });
  refused("/gate3", [](nlohmann::json& j) { j["gate3"].push_back(j["gate3"][0]); });
  std::filesystem::remove_all(dir);
}

}  // namespace
