// Gate 1 (SPEC §6) in the replay, per selected op, on the op's gate-1 cases
// (numgate::gradcheck_cases):
//   <op>/Gate1.Golden               the golden backward against finite differences of the
//                                   golden forward, FP64 on the CPU (also without a device);
//   <op>/Gate1.TargetDoubleKernels  the target's backward kernel against finite
//                                   differences of its forward kernel, both the double
//                                   instantiation, on the GPU (gradcheck_target.h);
//   <op>/Gate1.Mutant<name>         a backward kernel with a derivative error the golden
//                                   could share (mutants/gate1_mutants.h) must FAIL the
//                                   target's gate 1 on at least one committed case.
// The first two fill the report's "Gate 1 (gradcheck)" rows (gate1_results()). The first
// of an op's Gate1 tests to run checks every case of every test of the suite that runs,
// in one pool of host threads, largest case first (so the op's gate 1 costs about its
// largest case, not the sum); each test then reports its part.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <limits>
#include <thread>

#include "gradcheck_target.h"
#include "mutants/gate1_mutants.h"
#include "numgate/parallel.h"
#include "replay.h"

namespace numgate::testing {

std::map<std::pair<std::string, std::string>, Gate1Report>& gate1_results() {
  static std::map<std::pair<std::string, std::string>, Gate1Report> r;
  return r;
}

namespace {

// Folds one case's gradcheck into the op's row: counts, the worst check, every failure.
void add(Gate1Report& g, const GradcheckResult& r) {
  ++g.cases;
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const GradcheckTensor& t = r.tensors[i];
    (t.full_vjp ? g.elements : g.directions) += t.checked;
    g.excluded += t.excluded;
    const double ratio = !(t.worst_discrepancy <= t.worst_tolerance) ? std::numeric_limits<double>::infinity()
                         : t.worst_tolerance > 0                     ? t.worst_discrepancy / t.worst_tolerance
                                                                     : 0.0;
    if (g.worst.empty() || ratio > g.worst_ratio) {
      g.worst_ratio = ratio;
      g.worst = r.line(i);
    }
    if (!t.pass) g.failures.push_back(r.line(i));
  }
}

// One case's gate 1, or the exception it threw.
struct CaseRun {
  GradcheckResult result;
  std::string error;
};

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + (l.empty() || l.back() != '\n' ? "\n" : "");
  return s;
}

// ---- double-kernel mutants --------------------------------------------------------------

struct Gate1Mutant {
  std::string op, name, what;
  /// The Backward pass's launch, given the real target (the mutant runs after the real one).
  std::function<cudaError_t(const TargetOp& real, const Launch& l)> backward;
};

cudaError_t real_backward(const TargetOp& real, const Launch& l) { return real.pass("Backward").launch(l); }

std::vector<Gate1Mutant> gate1_mutants() {
  auto elements = [](const Launch& l) { return numel(l.spec.shape); };
  return {
      {"rmsnorm", "DxWithoutMeanTerm", "dx = rstd * dy * w (the -rstd^3 x mean(dy w x) term dropped)",
       [](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         const RowShape sh = launched_rows(l);
         return gate1_mutant::rmsnorm_dx_without_mean_term(l.ptr<const double>("x"), l.ptr<const double>("w"),
                                                           l.ptr<const double>("dy"), l.ptr<double>("dx"), sh.rows,
                                                           sh.hidden, l.spec.param("eps"), l.stream);
       }},
      {"fused_add_rmsnorm", "DxWithoutResidualBranch", "dx without d_residual_out (the residual branch dropped)",
       [elements](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         return gate1_mutant::subtract(l.ptr<double>("dx"), l.ptr<const double>("d_residual_out"), elements(l),
                                       l.stream);
       }},
      {"swiglu", "SiluDerivativeAsSigmoid", "da = dy * b * sigmoid(a) (silu' without a sigmoid'(a))",
       [elements](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         return gate1_mutant::swiglu_da_as_sigmoid(l.ptr<const double>("a"), l.ptr<const double>("b"),
                                                   l.ptr<const double>("dy"), l.ptr<double>("da"), elements(l),
                                                   l.stream);
       }},
      {"geglu", "GeluDerivativeAsPhi", "da = dy * b * Phi(a) (gelu' without a phi(a))",
       [elements](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         return gate1_mutant::geglu_da_as_phi(l.ptr<const double>("a"), l.ptr<const double>("b"),
                                              l.ptr<const double>("dy"), l.ptr<double>("da"), elements(l), l.stream);
       }},
      {"softmax", "DxWithoutScale", "dx = y (dy - <dy, y>) (the logit scale's factor dropped)",
       [elements](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         return gate1_mutant::divide(l.ptr<double>("dx"), elements(l), l.spec.param("scale"), l.stream);
       }},
      {"cross_entropy", "DlogitsWithoutSoftcapDerivative", "dlogits without the soft cap's tanh' factor",
       [elements](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         return gate1_mutant::ce_without_softcap_derivative(l.ptr<const double>("logits"), l.ptr<double>("dlogits"),
                                                            elements(l), l.spec.param("softcap"), l.stream);
       }},
      {"dropout_add", "DxWithoutScale", "dx = m dy (the dropout scale 1 / (1 - p) dropped)",
       [elements](const TargetOp& real, const Launch& l) {
         if (const cudaError_t e = real_backward(real, l); e != cudaSuccess) return e;
         const double p = l.spec.param("p");
         return gate1_mutant::divide(l.ptr<double>("dx"), elements(l), 1.0 / (1.0 - p), l.stream);
       }},
      {"rope", "BackwardRotatesByPlusTheta", "the backward rotates by +theta (the forward's rotation), not -theta",
       [](const TargetOp& real, const Launch& l) {
         DevicePtrs p = l.ptrs;
         p["q"] = l.ptrs.at("dq_rot");
         p["k"] = l.ptrs.at("dk_rot");
         p["q_rot"] = l.ptrs.at("dq");
         p["k_rot"] = l.ptrs.at("dk");
         const Launch f{l.spec, p, l.workspace, l.workspace_bytes, l.stream, l.window};
         return real.pass("Forward").launch(f);
       }},
  };
}

// ---- the op's gate-1 work, in one pool ----------------------------------------------

TargetOp make_mutant_target(const Gate1Mutant& m) {
  TargetOp mutant = find_target(m.op);
  const TargetOp real = mutant;
  for (auto& p : mutant.passes)
    if (p.name == "Backward") {
      const auto bw = m.backward;
      p.launch = [real, bw](const Launch& l) { return bw(real, l); };
    }
  return mutant;
}

struct OpWork {
  bool done = false;
  double seconds = 0;                                   // wall time of the pool
  std::vector<CaseSpec> cases;                          // gradcheck_cases(op)
  std::vector<std::size_t> committed;                   // indices of the committed ones
  std::vector<CaseRun> golden, target;                  // by case; empty when not run
  std::map<std::string, std::vector<CaseRun>> mutants;  // by mutant name, by committed case
  std::map<std::string, TargetOp> mutant_targets;
};

// Runs, once per op, every case of every Gate1 test of the running suite that runs
// (should_run: --gtest_filter; the target and mutant parts need a device).
const OpWork& op_work(const std::string& op_name) {
  static std::map<std::string, OpWork> all;
  OpWork& w = all[op_name];
  if (w.done) return w;
  w.done = true;
  const Op& op = find_op(op_name);
  w.cases = gradcheck_cases(op);
  for (std::size_t i = 0; i < w.cases.size(); ++i)
    if (!w.cases[i].production) w.committed.push_back(i);
  bool golden = false, target = false;
  std::vector<Gate1Mutant> mutants;
  if (const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite())
    for (int k = 0; k < suite->total_test_count(); ++k) {
      const ::testing::TestInfo* t = suite->GetTestInfo(k);
      if (!t->should_run()) continue;
      const std::string name = t->name();
      if (name == "Golden") golden = true;
      if (name == "TargetDoubleKernels") target = config().have_device;
      for (const Gate1Mutant& m : gate1_mutants())
        if (m.op == op_name && name == "Mutant" + m.name && config().have_device) mutants.push_back(m);
    }
  struct Job {
    const CaseSpec* c;
    const TargetOp* target;  // null: the golden
    CaseRun* out;
    std::int64_t cost;       // input elements of the case: the largest first
  };
  auto cost = [&](const CaseSpec& c) {
    std::int64_t n = 0;
    for (const auto& t : op.descriptor().tensors)
      if (is_input(t.role)) n += numel(t.shape(c));
    return n;
  };
  std::vector<Job> jobs;
  if (golden) w.golden.resize(w.cases.size());
  if (target) w.target.resize(w.cases.size());
  for (std::size_t i = 0; i < w.cases.size(); ++i) {
    if (golden) jobs.push_back({&w.cases[i], nullptr, &w.golden[i], cost(w.cases[i])});
    if (target) jobs.push_back({&w.cases[i], &find_target(op_name), &w.target[i], cost(w.cases[i])});
  }
  for (const Gate1Mutant& m : mutants) {
    const TargetOp* mt = &w.mutant_targets.emplace(m.name, make_mutant_target(m)).first->second;
    auto& runs = w.mutants[m.name];
    runs.resize(w.committed.size());
    for (std::size_t k = 0; k < w.committed.size(); ++k)
      jobs.push_back({&w.cases[w.committed[k]], mt, &runs[k], cost(w.cases[w.committed[k]])});
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.cost > b.cost; });
  const auto t0 = std::chrono::steady_clock::now();
  parallel_for(jobs.size(), [&](std::size_t i) {  // the golden is pure; each target function object has its own stream
    const Job& j = jobs[i];
    try {
      j.out->result = j.target ? gradcheck_target(op, *j.target, *j.c) : gradcheck(op, *j.c);
    } catch (const std::exception& e) {
      j.out->error = e.what();
    } catch (...) {
      j.out->error = "unknown exception";
    }
  });
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ gate 1 ] " << op_name << ": " << jobs.size() << " case checks (golden " << (golden ? "yes" : "no")
            << ", target " << (target ? "yes" : "no") << ", " << mutants.size() << " mutants) in " << w.seconds
            << " s on up to " << std::thread::hardware_concurrency() << " threads\n";
  return w;
}

class Gate1Test : public ::testing::Test {
 public:
  Gate1Test(std::string op, bool target) : op_(std::move(op)), target_(target) {}
  void SetUp() override {
    if (target_ && !config().have_device) GTEST_SKIP() << config().no_device_reason;
  }
  void TestBody() override {
    const OpWork& w = op_work(op_);
    const std::vector<CaseRun>& runs = target_ ? w.target : w.golden;
    ASSERT_EQ(runs.size(), w.cases.size()) << "gate 1 of " << op_ << " was not run";
    const char* impl = target_ ? kGate1Target : kGate1Golden;
    Gate1Report g;
    g.op = op_;
    g.implementation = impl;
    std::int64_t evaluations = 0;
    for (std::size_t i = 0; i < w.cases.size(); ++i) {
      if (!runs[i].error.empty()) {
        g.failures.push_back(op_ + "/" + w.cases[i].name + " (" + impl + "): ERROR " + runs[i].error);
        continue;
      }
      evaluations += runs[i].result.evaluations;
      add(g, runs[i].result);
    }
    std::cout << "[ gate 1 ] " << op_ << ", " << impl << ": " << g.cases << " cases, " << g.elements
              << " elements (full VJP), " << g.directions << " directions, " << g.excluded
              << " excluded; worst discrepancy/tolerance " << g.worst_ratio << "; " << evaluations
              << " forward evaluations: " << verdict_name(g.verdict()) << "\n  worst: " << g.worst;
    EXPECT_GT(g.cases, 0) << op_ << " has no gate-1 case";
    EXPECT_TRUE(g.failures.empty()) << joined(g.failures);
    gate1_results()[{op_, impl}] = std::move(g);
  }

 private:
  std::string op_;
  bool target_;
};

class Gate1MutantTest : public ::testing::Test {
 public:
  explicit Gate1MutantTest(Gate1Mutant m) : m_(std::move(m)) {}
  void SetUp() override {
    if (!config().have_device) GTEST_SKIP() << config().no_device_reason;
  }
  void TestBody() override {
    const OpWork& w = op_work(m_.op);
    const auto it = w.mutants.find(m_.name);
    ASSERT_TRUE(it != w.mutants.end()) << "gate 1 of mutant " << m_.name << " was not run";
    std::vector<std::string> caught, missed;
    for (std::size_t k = 0; k < w.committed.size(); ++k) {
      const CaseSpec& c = w.cases[w.committed[k]];
      ASSERT_TRUE(it->second[k].error.empty()) << m_.op << "/" << c.name << ": " << it->second[k].error;
      GradcheckResult r = it->second[k].result;
      r.implementation = "target mutant";
      if (!r.pass() && caught.empty())
        std::cout << "[ gate 1 kernel mutant " << m_.name << " ] " << m_.op << ": " << m_.what << "\n" << r.summary();
      (r.pass() ? missed : caught).push_back(c.name);
    }
    std::cout << "[ gate 1 kernel mutant " << m_.name << " ] " << m_.op << ": FAIL (caught) on " << caught.size()
              << " of " << caught.size() + missed.size() << " committed cases; not caught on:";
    for (const auto& n : missed) std::cout << " " << n;
    std::cout << "\n";
    EXPECT_FALSE(caught.empty()) << m_.op << " double-kernel mutant '" << m_.what
                                 << "' passed gate 1 on every committed case";
  }

 private:
  Gate1Mutant m_;
};

}  // namespace

void register_gate1_tests() {
  for (const auto& op : all_ops()) {
    if (!selected(op->name())) continue;
    const std::string suite = op->name() + "/Gate1";
    for (const bool target : {false, true}) {
      const std::string name = op->name();
      ::testing::RegisterTest(suite.c_str(), target ? "TargetDoubleKernels" : "Golden", nullptr, nullptr, __FILE__,
                              __LINE__, [name, target]() -> ::testing::Test* { return new Gate1Test(name, target); });
    }
  }
  for (const Gate1Mutant& m : gate1_mutants()) {
    if (!selected(m.op)) continue;
    ::testing::RegisterTest((m.op + "/Gate1").c_str(), ("Mutant" + m.name).c_str(), nullptr, nullptr, __FILE__,
                            __LINE__, [m]() -> ::testing::Test* { return new Gate1MutantTest(m); });
  }
}

}  // namespace numgate::testing
