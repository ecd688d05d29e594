// One GPU mutant per op family beyond RMSNorm's (tests/gpu/test_replay_mutants.cpp), each
// run through the replay's own launch path (gate_launches) on a committed case and required
// to be caught by the check the mutation matrix declares for it (kernels/mutation_matrix.h):
//   swiglu    a SwiGLU forward kernel with its sigmoid held in bf16        -> decidable rounding
//             (and its unbroken FP32 control, which must pass on the same cases)
//   softmax   the real kernel launched with the causal mask dropped        -> structure
//   rope      the real kernel launched with every position + 1             -> max-abs gate
//   cross_entropy  the real kernels launched with the targets shifted by one token -> max-abs gate
//   dropout_add    the real kernel launched with philox_offset + 1, and launched row by row
//                  with element_offset 0 (what an adapter ignoring the row window does)
//                  -> max-abs gate (mask, ULP limit 0 there too); three scalar kernels
//                  drawing the stream wrongly (counter per element, lanes permuted, the
//                  key's high word dropped) -> max-abs gate, their unbroken control passes
//   rmsnorm   the real kernel launched with eps 1e-5 instead of the case's   -> max-abs gate
//   softmax   the causal mask one key too wide (additive mask, mode 2)      -> structure
//   (the last two are gate 3's late-class mutants, numgate-train mutants, seen by gate 2)
// All but the SwiGLU and the scalar dropout kernels are launch mutants: the bug is in what
// the kernel is given (an index, a flag or a parameter off), where such bugs live in a
// training stack.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <type_traits>
#include <vector>

#include "dropout_add/dropout_add.cuh"
#include "dropout_add/dropout_add_oracle.h"
#include "gradcheck_target.h"
#include "mutants/dropout_mutants.h"
#include "mutants/glu_mutants.h"
#include "softmax/softmax.cuh"
#include "mutation_matrix.h"
#include "replay.h"

namespace numgate::testing {
namespace {

// The committed cases of `op` (from the fixture folders) that `pick` accepts.
std::vector<std::shared_ptr<const CaseData>> committed_where(const std::string& op,
                                                             const std::function<bool(const CaseData&)>& pick) {
  std::vector<std::shared_ptr<const CaseData>> out;
  for (const auto& rc : cases_of(op)) {
    if (rc.production) continue;
    auto c = std::make_shared<const CaseData>(read_case(rc.file, rc.name));
    if (pick(*c)) out.push_back(c);
  }
  return out;
}

// Gates the mutant pass on each case; caught where some tensor FAILs with `check` among the
// checks that fired. Records the matrix outcome (caught on at least one case) and returns it.
bool caught_somewhere(const std::string& op, const TargetPass& pass, const std::vector<std::string>& writes,
                      const std::vector<std::shared_ptr<const CaseData>>& cases, matrix::Check check) {
  bool caught = false;
  std::string seen;
  for (const auto& c : cases) {
    const GatedLaunches g = gate_launches(*c, pass, writes, find_target(op).precheck, pass.name);
    for (const auto& t : writes) {
      const GateResult& r = g.results.at(t);
      const auto fired = matrix::checks_fired(r);
      const bool here = r.verdict == Verdict::fail && std::find(fired.begin(), fired.end(), check) != fired.end();
      std::string checks;
      for (auto k : fired) checks += std::string(checks.empty() ? "" : "+") + matrix::check_name(k);
      std::cout << "[ family mutant " << pass.name << " ] " << c->spec.name << " " << t << ": "
                << verdict_name(r.verdict) << (checks.empty() ? "" : " (" + checks + ")") << "\n";
      if (here && !caught) seen = c->spec.name + " " + t + ": " + checks;
      caught = caught || here;
    }
  }
  record_matrix_outcome(caught, caught ? "caught on " + seen : "not caught by " + std::string(matrix::check_name(check)) +
                                                                   " on " + std::to_string(cases.size()) + " cases");
  return caught;
}

class FamilyMutants : public ::testing::Test {
 protected:
  /// Why the test of `op` cannot run here (empty: it can).
  static std::string skip_reason(const std::string& op) {
    if (!selected(op)) return op + " not selected by --op";
    return config().have_device ? "" : config().no_device_reason;
  }
};

// The launch of `op`'s pass `name` with the case or an input changed first. The workspace
// is the real pass's (first, `real_bytes` of it) followed by `extra(spec)` bytes for the
// mutant's own use at `extra_at`.
struct MutantLaunch {
  const Launch& l;
  const TargetPass& real;
  std::size_t real_bytes;
  void* extra_at;
  /// The real pass launched on `spec` and `ptrs` with its own workspace.
  cudaError_t run(const CaseSpec& spec, const DevicePtrs& ptrs) const {
    return real.launch(Launch{spec, ptrs, l.workspace, real_bytes, l.stream, l.window});
  }
};
TargetPass launch_mutant(const std::string& op, const std::string& name, const std::string& label,
                         std::function<std::size_t(const CaseSpec&)> extra,
                         std::function<cudaError_t(const MutantLaunch&)> launch) {
  const TargetPass real = find_target(op).pass(name);
  auto real_bytes = [real](const CaseSpec& s) -> std::size_t {
    return real.workspace_bytes ? (real.workspace_bytes(s) + 255) / 256 * 256 : 0;
  };
  TargetPass p;
  p.name = label;
  p.workspace_bytes = [real_bytes, extra](const CaseSpec& s) { return real_bytes(s) + (extra ? extra(s) : 0); };
  p.launch = [real, real_bytes, launch](const Launch& l) {
    const std::size_t rb = real_bytes(l.spec);
    return launch(MutantLaunch{l, real, rb, static_cast<char*>(l.workspace) + rb});
  };
  return p;
}

// The forward of `op` launched with its i64 index tensor `name` (`count(spec)` elements)
// edited on the host first: copied to the mutant's part of the workspace with `edit` applied.
TargetPass index_mutant(const std::string& op, const std::string& label, const std::string& name,
                        std::function<std::size_t(const CaseSpec&)> count,
                        std::function<void(std::vector<std::int64_t>&)> edit) {
  return launch_mutant(
      op, "Forward", label, [count](const CaseSpec& s) { return count(s) * sizeof(std::int64_t); },
      [name, count, edit](const MutantLaunch& m) {
        const std::size_t n = count(m.l.spec);
        std::vector<std::int64_t> h(n);
        cudaError_t e = cudaMemcpy(h.data(), m.l.ptrs.at(name), n * sizeof(std::int64_t), cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) return e;
        edit(h);
        e = cudaMemcpy(m.extra_at, h.data(), n * sizeof(std::int64_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return e;
        DevicePtrs ptrs = m.l.ptrs;
        ptrs[name] = m.extra_at;
        return m.run(m.l.spec, ptrs);
      });
}

TEST_F(FamilyMutants, SwigluSigmoidInBf16IsCaughtByDecidableRounding) {
  if (const std::string why = skip_reason("swiglu"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = committed_where("swiglu", [](const CaseData& c) { return c.spec.dtype == DType::bf16; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  auto pass = [](glu::mutant::Kind k) {
    TargetPass p;
    p.name = std::string("swiglu Forward kernel ") + glu::mutant::name(k);
    p.launch = [k](const Launch& l) {
      using T = __nv_bfloat16;
      return glu::mutant::swiglu_forward(k, l.ptr<const T>("a"), l.ptr<const T>("b"), l.ptr<T>("y"),
                                         numel(l.spec.shape), l.stream);
    };
    return p;
  };
  // The control first: the same kernel without the mutation passes every case.
  for (const auto& c : cases) {
    const GatedLaunches g = gate_launches(*c, pass(glu::mutant::Kind::none), {"y"}, {}, "control");
    EXPECT_EQ(g.results.at("y").verdict, Verdict::pass) << describe(g.results.at("y"), c->spec);
  }
  EXPECT_TRUE(caught_somewhere("swiglu", pass(glu::mutant::Kind::sigmoid_in_bf16), {"y"}, cases,
                               matrix::Check::decidable_rounding));
}

TEST_F(FamilyMutants, SoftmaxWithTheCausalMaskDroppedIsCaught) {
  if (const std::string why = skip_reason("softmax"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = committed_where("softmax", [](const CaseData& c) { return c.spec.param("mask_mode") == 1.0; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  const TargetPass p = launch_mutant("softmax", "Forward", "softmax Forward, causal mask dropped", nullptr,
                                     [](const MutantLaunch& m) {
                                       CaseSpec s = m.l.spec;
                                       for (auto& [k, v] : s.params)
                                         if (k == "mask_mode") v = 0;
                                       return m.run(s, m.l.ptrs);
                                     });
  EXPECT_TRUE(caught_somewhere("softmax", p, {"y"}, cases, matrix::Check::structure));
}

// Gate 3's late-class mutants (tools/train.cpp, numgate-train mutants) at the op level, where
// gate 2 sees them: the RMSNorm kernel launched with an epsilon other than the case's (the
// model's), and the causal softmax with its mask one key too wide.
TEST_F(FamilyMutants, RmsnormWithAnotherEpsilonIsCaught) {
  if (const std::string why = skip_reason("rmsnorm"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = committed_where("rmsnorm", [](const CaseData&) { return true; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  const TargetPass p = launch_mutant("rmsnorm", "Forward", "rmsnorm Forward, eps 1e-5 instead of the case's", nullptr,
                                     [](const MutantLaunch& m) {
                                       CaseSpec s = m.l.spec;
                                       for (auto& [k, v] : s.params)
                                         if (k == "eps") v = v == 1e-5 ? 1e-6 : 1e-5;
                                       return m.run(s, m.l.ptrs);
                                     });
  EXPECT_TRUE(caught_somewhere("rmsnorm", p, {"y"}, cases, matrix::Check::max_abs_gate));
}

// Gate 1 does not see the wrong epsilon: forward and backward launched with eps 1e-5 are one
// consistent function, whose backward is its forward's derivative. This test states the
// blind spot (seed 000: the RNG / epsilon / mask classes pass gradcheck); it fails, and the
// README's table must change, if gate 1 ever catches it.
TEST_F(FamilyMutants, RmsnormWithAnotherEpsilonPassesGateOne) {
  if (const std::string why = skip_reason("rmsnorm"); !why.empty()) GTEST_SKIP() << why;
  TargetOp t = find_target("rmsnorm");
  for (TargetPass& pass : t.passes) {
    const auto real = pass.launch;
    pass.launch = [real](const Launch& l) {
      CaseSpec s = l.spec;
      for (auto& [k, v] : s.params)
        if (k == "eps") v = v == 1e-5 ? 1e-6 : 1e-5;
      return real(Launch{s, l.ptrs, l.workspace, l.workspace_bytes, l.stream, l.window});
    };
  }
  int checked = 0;
  for (const CaseSpec& c : gradcheck_cases(find_op("rmsnorm"))) {
    if (c.production) continue;
    const GradcheckResult r = gradcheck_target(find_op("rmsnorm"), t, c);
    EXPECT_TRUE(r.pass()) << "gate 1 caught the wrong epsilon on " << c.name << ":\n" << r.summary();
    ++checked;
  }
  std::cout << "[ family mutant rmsnorm eps 1e-5 ] gate 1 on the double kernels: " << checked
            << " committed cases, every one PASS (a consistent function)\n";
  EXPECT_GT(checked, 0);
}

TEST_F(FamilyMutants, SoftmaxWithTheCausalMaskOffByOneIsCaught) {
  if (const std::string why = skip_reason("softmax"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = committed_where("softmax", [](const CaseData& c) { return c.spec.param("mask_mode") == 1.0; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  auto dims = [](const CaseSpec& s) {
    const std::int64_t k = s.shape.back(), q = s.shape.size() >= 2 ? s.shape[s.shape.size() - 2] : 1;
    return std::make_pair(q, k);
  };
  // The additive mask [q_len, k_len] of a causal mask one key too wide: 0 where
  // j <= i + (k_len - q_len) + 1, -inf elsewhere, uploaded into the mutant's workspace.
  const TargetPass p = launch_mutant(
      "softmax", "Forward", "softmax Forward, causal mask off by one (query i sees key i + 1)",
      [dims](const CaseSpec& s) { return static_cast<std::size_t>(dims(s).first * dims(s).second) * 8; },
      [dims](const MutantLaunch& m) {
        const auto [q, k] = dims(m.l.spec);
        return dispatch(m.l.spec.dtype, [&](auto tag) {
          using T = decltype(tag);
          std::vector<T> mask(static_cast<std::size_t>(q * k));
          for (std::int64_t i = 0; i < q; ++i)
            for (std::int64_t j = 0; j < k; ++j)
              mask[static_cast<std::size_t>(i * k + j)] =
                  static_cast<T>(j <= i + (k - q) + 1 ? 0.0f : -std::numeric_limits<float>::infinity());
          cudaError_t e = cudaMemcpyAsync(m.extra_at, mask.data(), mask.size() * sizeof(T), cudaMemcpyHostToDevice,
                                          m.l.stream);
          if (e == cudaSuccess) e = cudaStreamSynchronize(m.l.stream);  // the host mask dies here
          if (e != cudaSuccess) return e;
          const RowShape sh = launched_rows(m.l);
          return numgate::softmax::forward<T>(m.l.ptr<const T>("x"), static_cast<const T*>(m.extra_at), m.l.ptr<T>("y"),
                                              sh.rows, q, sh.hidden, m.l.spec.param("scale"), 2, m.l.window.first,
                                              m.l.stream);
        });
      });
  EXPECT_TRUE(caught_somewhere("softmax", p, {"y"}, cases, matrix::Check::structure));
}

TEST_F(FamilyMutants, RopeWithPositionsOffByOneIsCaught) {
  if (const std::string why = skip_reason("rope"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = committed_where("rope", [](const CaseData&) { return true; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  const TargetPass p = index_mutant(
      "rope", "rope Forward, positions + 1", "positions",
      [](const CaseSpec& s) { return static_cast<std::size_t>(s.shape[0] * s.shape[1]); },
      [](std::vector<std::int64_t>& v) {
        for (auto& x : v) x += 1;
      });
  EXPECT_TRUE(caught_somewhere("rope", p, {"q_rot", "k_rot"}, cases, matrix::Check::max_abs_gate));
}

TEST_F(FamilyMutants, CrossEntropyWithTargetsShiftedByOneTokenIsCaught) {
  if (const std::string why = skip_reason("cross_entropy"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = committed_where("cross_entropy", [](const CaseData&) { return true; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  const TargetPass p = index_mutant(
      "cross_entropy", "cross_entropy Forward, targets shifted by one token", "targets",
      [](const CaseSpec& s) { return static_cast<std::size_t>(s.shape[0]); },
      [](std::vector<std::int64_t>& v) { std::rotate(v.begin(), v.begin() + 1, v.end()); });  // t gets t+1's target
  EXPECT_TRUE(caught_somewhere("cross_entropy", p, find_op("cross_entropy").descriptor().pass("Forward").writes, cases,
                               matrix::Check::max_abs_gate));
}

// ---- dropout_add: the random stream and the row window ------------------------------------

CaseSpec with_param(CaseSpec s, const std::string& key, double v) {
  for (auto& [k, x] : s.params)
    if (k == key) x = v;
  return s;
}
// The committed dropout_add cases where the stream decides something (p > 0).
std::vector<std::shared_ptr<const CaseData>> dropout_cases(const std::function<bool(const CaseData&)>& more) {
  return committed_where("dropout_add", [more](const CaseData& c) { return c.spec.param("p") > 0.0 && more(c); });
}
const std::vector<std::string> kDropoutForward = {"y", "mask"};

TEST_F(FamilyMutants, DropoutAddWithTheOffsetPlusOneIsCaught) {
  if (const std::string why = skip_reason("dropout_add"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = dropout_cases([](const CaseData&) { return true; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  const TargetPass p = launch_mutant("dropout_add", "Forward", "dropout_add Forward, philox_offset + 1", nullptr,
                                     [](const MutantLaunch& m) {
                                       const double off = m.l.spec.param("philox_offset");
                                       return m.run(with_param(m.l.spec, "philox_offset", off + 1), m.l.ptrs);
                                     });
  EXPECT_TRUE(caught_somewhere("dropout_add", p, kDropoutForward, cases, matrix::Check::max_abs_gate));
}

TEST_F(FamilyMutants, DropoutAddIgnoringElementOffsetIsCaught) {
  if (const std::string why = skip_reason("dropout_add"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = dropout_cases([](const CaseData& c) { return rows_of(c.spec.shape) > 1; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  // Every row launched alone, as the row-window adapter does, but with element_offset 0 instead
  // of first_row * hidden: each row draws row 0's stream.
  TargetPass p;
  p.name = "dropout_add Forward, each row alone with element_offset 0";
  p.launch = [](const Launch& l) {
    dropout_add::Params P;
    if (!dropout_add::read_params(l.spec, P)) return cudaErrorInvalidValue;
    const RowShape sh = launched_rows(l);
    return dispatch(l.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *x = l.ptr<const T>("x"), *res = l.ptr<const T>("residual");
      T *y = l.ptr<T>("y"), *mask = l.ptr<T>("mask");
      for (std::int64_t r = 0; r < sh.rows; ++r) {
        const std::int64_t b = r * sh.hidden;
        const cudaError_t e = dropout_add::forward<T>(x + b, res + b, y + b, mask + b, sh.hidden, P.p, P.seed,
                                                      P.offset, /*element_offset=*/0, l.stream);
        if (e != cudaSuccess) return e;
      }
      return cudaSuccess;
    });
  };
  EXPECT_TRUE(caught_somewhere("dropout_add", p, kDropoutForward, cases, matrix::Check::max_abs_gate));
}

TEST_F(FamilyMutants, DropoutAddKernelStreamMutantsAreCaught) {
  if (const std::string why = skip_reason("dropout_add"); !why.empty()) GTEST_SKIP() << why;
  const auto cases = dropout_cases([](const CaseData& c) { return c.spec.dtype != DType::fp64; });
  if (cases.empty()) GTEST_SKIP() << "no committed case of the kind in the fixture folders";
  using dropout_add::mutant::Kind;
  auto pass = [](Kind k) {
    TargetPass p;
    p.name = std::string("dropout_add Forward kernel ") + dropout_add::mutant::name(k);
    p.launch = [k](const Launch& l) {
      dropout_add::Params P;
      if (!dropout_add::read_params(l.spec, P)) return cudaErrorInvalidValue;
      return dispatch(l.spec.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, double>) {
          return cudaErrorInvalidValue;
        } else {
          return dropout_add::mutant::forward<T>(k, l.ptr<const T>("x"), l.ptr<const T>("residual"), l.ptr<T>("y"),
                                                 l.ptr<T>("mask"), numel(l.spec.shape), P.p, P.seed, P.offset,
                                                 l.stream);
        }
      });
    };
    return p;
  };
  // The control first: the same simple kernel with the declared stream passes every case.
  for (const auto& c : cases) {
    const GatedLaunches g = gate_launches(*c, pass(Kind::none), kDropoutForward, {}, "control");
    for (const auto& t : kDropoutForward)
      EXPECT_EQ(g.results.at(t).verdict, Verdict::pass) << describe(g.results.at(t), c->spec);
  }
  for (Kind k : {Kind::counter_per_element, Kind::lanes_permuted, Kind::key_high_word_dropped})
    EXPECT_TRUE(caught_somewhere("dropout_add", pass(k), kDropoutForward, cases, matrix::Check::max_abs_gate))
        << dropout_add::mutant::name(k);
}

}  // namespace
}  // namespace numgate::testing
