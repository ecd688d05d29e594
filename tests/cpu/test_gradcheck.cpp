// Gate 1 (SPEC §6) on the CPU: every op's golden backward against central differences of
// its golden forward (numgate/gradcheck.h), on every committed case and the small
// generated ones; and, per op, a gate-1 mutant: a derivative error that golden,
// reference and target would share (so gate 2 cannot see it), implemented as a mutant
// golden (the real golden with one gradient replaced by the wrong formula), which gate 1
// must FAIL while the real golden PASSes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <set>

#include "numgate/gradcheck.h"
#include "numgate/op.h"

namespace numgate {
namespace {

using Inputs = std::map<std::string, Tensor>;
using Gold = std::map<std::string, GoldenTensor>;

TEST(Gradcheck, EveryOpsGoldenBackwardMatchesFiniteDifferences) {
  for (const auto& op : all_ops()) {
    const auto t0 = std::chrono::steady_clock::now();
    int cases = 0, full = 0, dirs = 0;
    double worst = 0;
    std::string worst_line;
    for (const auto& c : gradcheck_cases(*op)) {
      const GradcheckResult r = gradcheck(*op, c);
      ++cases;
      EXPECT_TRUE(r.pass()) << r.summary();
      for (const auto& t : r.tensors) {
        (t.full_vjp ? full : dirs) += 1;
        const double ratio = t.worst_tolerance > 0 ? t.worst_discrepancy / t.worst_tolerance : 0;
        if (ratio >= worst) {
          worst = ratio;
          worst_line = r.summary();
        }
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ gate 1 ] " << op->name() << ": " << cases << " cases, " << full << " full-VJP and " << dirs
              << " direction checks, all PASS expected; worst discrepancy/tolerance " << worst << " (" << s
              << " s)\n  worst case:\n" << worst_line;
  }
}

// The GPU's gate 1 (tests/gpu/gradcheck_target.h) differentiates each case promoted to
// FP64 (dtype fp64, the case's own inputs) with the golden's FP64 rounding bounds and
// exclusions; the golden itself must pass there, so a failure on the GPU is the kernels'.
TEST(Gradcheck, GoldenPassesOnTheCasesPromotedToFp64) {
  for (const auto& op : all_ops()) {
    int cases = 0;
    for (const auto& c : gradcheck_cases(*op)) {
      CaseSpec c64 = c;
      c64.dtype = DType::fp64;
      const GradcheckResult r = gradcheck(*op, c64, {}, {}, {}, op->make_inputs(c));
      ++cases;
      EXPECT_TRUE(r.pass()) << r.summary();
    }
    EXPECT_GT(cases, 0) << op->name();
  }
}

// ---- gate-1 mutants ---------------------------------------------------------------------
// Each replaces one gradient of the real golden by a wrong derivative.

double row_rstd(const Tensor& x, std::size_t base, std::int64_t n, double eps, bool centered) {
  double mean = 0;
  if (centered) {
    for (std::int64_t i = 0; i < n; ++i) mean += x.get(base + i);
    mean /= static_cast<double>(n);
  }
  double ss = 0;
  for (std::int64_t i = 0; i < n; ++i) ss += (x.get(base + i) - mean) * (x.get(base + i) - mean);
  return 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
}

struct GateOneMutant {
  std::string op, what;
  std::function<Gold(const Op&, const CaseSpec&, const Inputs&)> golden;
};

std::vector<GateOneMutant> mutants() {
  return {
      {"rmsnorm", "dx without the -rstd^3 x mean(g x) term (dx = rstd * dy * w)",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         const Tensor &x = in.at("x"), &w = in.at("w"), &dy = in.at("dy");
         const std::int64_t n = c.shape.back(), rows = rows_of(c.shape);
         for (std::int64_t r = 0; r < rows; ++r) {
           const std::size_t b = static_cast<std::size_t>(r * n);
           const double rstd = row_rstd(x, b, n, c.param("eps"), false);
           for (std::int64_t i = 0; i < n; ++i) g.at("dx").value.set(b + i, rstd * dy.get(b + i) * w.get(i));
         }
         return g;
       }},
      {"offset_rmsnorm", "dx scaled by w instead of 1 + w (the offset forgotten in the backward)",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         g.at("dx") = find_op("rmsnorm").golden(c, in).at("dx");  // RMSNorm's golden with w itself
         return g;
       }},
      {"fused_add_rmsnorm", "dx without d_residual_out (the residual branch's gradient dropped)",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         Tensor& dx = g.at("dx").value;
         for (std::size_t i = 0; i < dx.numel(); ++i) dx.set(i, dx.get(i) - in.at("d_residual_out").get(i));
         return g;
       }},
      {"layernorm", "dx without the -rstd mean(g) term",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         const Tensor &x = in.at("x"), &w = in.at("w"), &dy = in.at("dy");
         const std::int64_t n = c.shape.back(), rows = rows_of(c.shape);
         for (std::int64_t r = 0; r < rows; ++r) {
           const std::size_t b = static_cast<std::size_t>(r * n);
           const double rstd = row_rstd(x, b, n, c.param("eps"), true);
           double mg = 0;
           for (std::int64_t i = 0; i < n; ++i) mg += dy.get(b + i) * w.get(i);
           mg /= static_cast<double>(n);
           Tensor& dx = g.at("dx").value;
           for (std::int64_t i = 0; i < n; ++i) dx.set(b + i, dx.get(b + i) + rstd * mg);
         }
         return g;
       }},
      {"softmax", "dx without the scale (dx = y (dy - <dy, y>))",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         Tensor& dx = g.at("dx").value;
         for (std::size_t i = 0; i < dx.numel(); ++i) dx.set(i, dx.get(i) / c.param("scale"));
         return g;
       }},
      {"cross_entropy", "dlogits without the soft cap's tanh' factor",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         const double cap = c.param("softcap");
         if (cap == 0) return g;
         Tensor& dx = g.at("dlogits").value;
         const Tensor& x = in.at("logits");
         for (std::size_t i = 0; i < dx.numel(); ++i) {
           const double t = std::tanh(x.get(i) / cap);
           if (std::isfinite(t)) dx.set(i, dx.get(i) / (1.0 - t * t));
         }
         return g;
       }},
      {"swiglu", "silu'(a) taken as sigmoid(a) (the a sigmoid(a)(1 - sigmoid(a)) term dropped)",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         Tensor& da = g.at("da").value;
         for (std::size_t i = 0; i < da.numel(); ++i) {
           const double a = in.at("a").get(i);
           da.set(i, in.at("dy").get(i) * in.at("b").get(i) / (1.0 + std::exp(-a)));
         }
         return g;
       }},
      {"geglu", "gelu'(a) taken as Phi(a) (the a phi(a) term dropped)",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         Tensor& da = g.at("da").value;
         for (std::size_t i = 0; i < da.numel(); ++i) {
           const double a = in.at("a").get(i);
           da.set(i, in.at("dy").get(i) * in.at("b").get(i) * 0.5 * std::erfc(-a / std::sqrt(2.0)));
         }
         return g;
       }},
      {"dropout_add", "dx without the scale s (dx = m dy instead of m dy / (1 - p))",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         const Tensor& m = g.at("mask").value;
         Tensor& dx = g.at("dx").value;
         for (std::size_t i = 0; i < dx.numel(); ++i) dx.set(i, m.get(i) != 0.0 ? in.at("dy").get(i) : 0.0);
         return g;
       }},
      {"rope", "backward rotating by +theta (the forward rotation) instead of -theta",
       [](const Op& op, const CaseSpec& c, const Inputs& in) {
         Gold g = op.golden(c, in);
         Inputs rot = in;
         rot.at("q") = in.at("dq_rot");
         rot.at("k") = in.at("dk_rot");
         const Gold f = op.golden(c, rot);
         g.at("dq").value = f.at("q_rot").value;
         g.at("dk").value = f.at("k_rot").value;
         return g;
       }},
  };
}

TEST(Gradcheck, EveryOpHasAGateOneMutantThatGateOneCatches) {
  std::set<std::string> covered;
  for (const auto& m : mutants()) {
    const Op& op = find_op(m.op);
    covered.insert(m.op);
    std::vector<std::string> caught, missed;
    int committed_caught = 0;
    for (const auto& c : op.cases()) {
      if (c.production) continue;  // the committed cases carry the mutants
      const GoldenFn fn = [&](const CaseSpec& cs, const Inputs& in) { return m.golden(op, cs, in); };
      const GradcheckResult r = gradcheck(op, c, {}, fn);
      (r.pass() ? missed : caught).push_back(c.name + (c.production ? "" : " (committed)"));
      if (!r.pass() && !c.production) {
        if (committed_caught++ == 0) std::cout << "[ gate 1 mutant ] " << m.op << ": " << m.what << "\n" << r.summary();
        // Control: the real golden passes the same case.
        EXPECT_TRUE(gradcheck(op, c).pass()) << m.op << "/" << c.name;
      }
    }
    std::cout << "[ gate 1 mutant ] " << m.op << ": FAIL (caught) on " << caught.size() << " of "
              << caught.size() + missed.size() << " cases:";
    for (const auto& n : caught) std::cout << " " << n;
    std::cout << "\n  not caught on:";
    for (const auto& n : missed) std::cout << " " << n;
    std::cout << "\n";
    EXPECT_GT(committed_caught, 0) << m.op << " mutant '" << m.what << "' caught on no committed case";
  }
  for (const auto& op : all_ops()) EXPECT_TRUE(covered.count(op->name())) << op->name() << " has no gate-1 mutant";
}

}  // namespace
}  // namespace numgate
