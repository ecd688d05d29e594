// Gate 1 (SPEC §6) in the replay, per selected op, on the op's gate-1 cases
// (numgate::gradcheck_cases):
//   <op>/Gate1.Golden               the golden backward against finite differences of the
//                                   golden forward, FP64 on the CPU (also without a device);
//   <op>/Gate1.TargetDoubleKernels  the target's backward kernel against finite
//                                   differences of its forward kernel, both the double
//                                   instantiation, on the GPU (gradcheck_target.h);
//   <op>/Gate1Mutants.<name>        a backward kernel with a derivative error the golden
//                                   could share (mutants/gate1_mutants.h) must FAIL the
//                                   target's gate 1 on at least one committed case.
// The first two fill the report's "Gate 1 (gradcheck)" rows (gate1_results()).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <limits>
#include <thread>

#include "gradcheck_target.h"
#include "mutants/gate1_mutants.h"
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

// f(i) for i in [0, n), on up to hardware_concurrency host threads (the cases of an op are
// independent; the golden is pure and every target function object has its own stream).
// f must not throw.
template <class F>
void for_each_case(std::size_t n, F&& f) {
  const std::size_t threads = std::max<std::size_t>(1, std::min<std::size_t>(std::thread::hardware_concurrency(), n));
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < n; i = next++) f(i);
    });
  for (auto& th : pool) th.join();
}

// Gate 1 of every case, in parallel; results in case order, an exception as its message.
struct CaseRun {
  GradcheckResult result;
  std::string error;
};
std::vector<CaseRun> run_cases(const std::vector<CaseSpec>& cases,
                               const std::function<GradcheckResult(const CaseSpec&)>& check) {
  std::vector<CaseRun> runs(cases.size());
  for_each_case(cases.size(), [&](std::size_t i) {
    try {
      runs[i].result = check(cases[i]);
    } catch (const std::exception& e) {
      runs[i].error = e.what();
    } catch (...) {
      runs[i].error = "unknown exception";
    }
  });
  return runs;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + (l.empty() || l.back() != '\n' ? "\n" : "");
  return s;
}

class Gate1Test : public ::testing::Test {
 public:
  Gate1Test(std::string op, bool target) : op_(std::move(op)), target_(target) {}
  void SetUp() override {
    if (target_ && !config().have_device) GTEST_SKIP() << config().no_device_reason;
  }
  void TestBody() override {
    const Op& op = find_op(op_);
    const char* impl = target_ ? kGate1Target : kGate1Golden;
    Gate1Report g;
    g.op = op_;
    g.implementation = impl;
    const auto t0 = std::chrono::steady_clock::now();
    std::int64_t evaluations = 0;
    const std::vector<CaseSpec> cases = gradcheck_cases(op);
    const TargetOp* target = target_ ? &find_target(op_) : nullptr;
    const auto runs = run_cases(cases, [&](const CaseSpec& c) {
      return target ? gradcheck_target(op, *target, c) : gradcheck(op, c);
    });
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (!runs[i].error.empty()) {
        g.failures.push_back(op_ + "/" + cases[i].name + " (" + impl + "): ERROR " + runs[i].error);
        continue;
      }
      evaluations += runs[i].result.evaluations;
      add(g, runs[i].result);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ gate 1 ] " << op_ << ", " << impl << ": " << g.cases << " cases, " << g.elements
              << " elements (full VJP), " << g.directions << " directions, " << g.excluded
              << " excluded; worst discrepancy/tolerance " << g.worst_ratio << "; " << evaluations
              << " forward evaluations, " << s << " s: " << verdict_name(g.verdict()) << "\n  worst: " << g.worst;
    EXPECT_GT(g.cases, 0) << op_ << " has no gate-1 case";
    EXPECT_TRUE(g.failures.empty()) << joined(g.failures);
    gate1_results()[{op_, impl}] = std::move(g);
  }

 private:
  std::string op_;
  bool target_;
};

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

class Gate1MutantTest : public ::testing::Test {
 public:
  explicit Gate1MutantTest(Gate1Mutant m) : m_(std::move(m)) {}
  void SetUp() override {
    if (!config().have_device) GTEST_SKIP() << config().no_device_reason;
  }
  void TestBody() override {
    const Op& op = find_op(m_.op);
    TargetOp mutant = find_target(m_.op);
    const TargetOp real = mutant;
    for (auto& p : mutant.passes)
      if (p.name == "Backward") {
        const auto bw = m_.backward;
        p.launch = [real, bw](const Launch& l) { return bw(real, l); };
      }
    std::vector<CaseSpec> committed;
    for (const CaseSpec& c : gradcheck_cases(op))
      if (!c.production) committed.push_back(c);  // the committed cases carry the mutants
    const auto runs = run_cases(committed, [&](const CaseSpec& c) { return gradcheck_target(op, mutant, c); });
    std::vector<std::string> caught, missed;
    for (std::size_t i = 0; i < committed.size(); ++i) {
      ASSERT_TRUE(runs[i].error.empty()) << m_.op << "/" << committed[i].name << ": " << runs[i].error;
      GradcheckResult r = runs[i].result;
      r.implementation = "target mutant";
      if (!r.pass() && caught.empty())
        std::cout << "[ gate 1 kernel mutant " << m_.name << " ] " << m_.op << ": " << m_.what << "\n" << r.summary();
      (r.pass() ? missed : caught).push_back(committed[i].name);
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
    ::testing::RegisterTest((m.op + "/Gate1Mutants").c_str(), m.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [m]() -> ::testing::Test* { return new Gate1MutantTest(m); });
  }
}

}  // namespace numgate::testing
