// numgate CPU tests — the testbed shared by the mutant tests of every op: an op's
// committed and small generated cases, and the gate applied to a set of outputs (a
// deliberately broken reference) as if they were the target.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "committed.h"
#include "numgate/gate.h"
#include "numgate/op.h"

namespace numgate::testing {

/// The gate's verdict on a set of outputs, over all of a case's gated tensors.
struct MutantRun {
  Verdict verdict = Verdict::pass;  ///< every tensor's verdict combined (the worst wins)
  std::string failing_tensors;      ///< " y dx": the tensors reported FAIL
  double worst_ratio = 0;           ///< max over tensors of target_error / threshold
  std::string worst_detail;         ///< describe() of the first tensor reported FAIL, else of
                                    ///< the tensor with the largest ratio
};

/// Gates `out` (tensor name -> values in the case dtype) against the case's golden and
/// reference, tensor by tensor, exactly as the GPU replay gates a kernel's outputs.
inline MutantRun gate_outputs(const CaseData& c, const std::map<std::string, Tensor>& out) {
  MutantRun run;
  const CaseGate gate(find_op(c.op), c);  // with the order evidence (numgate/gate.h)
  for (const auto& t : c.output_names) {
    const GateResult r = gate(t, &out.at(t));
    run.verdict = combine(run.verdict, r.verdict);
    const bool first_fail = r.verdict == Verdict::fail && run.failing_tensors.empty();
    if (r.verdict == Verdict::fail) run.failing_tensors += " " + t;
    // A structure failure can have a ratio of 0 (no finite element differs), so a failing
    // tensor's description wins over a larger ratio of one that passed.
    const double ratio = r.threshold > 0 ? r.target_error / r.threshold : (r.target_error > 0 ? INFINITY : 0);
    if (first_fail || (run.failing_tensors.empty() && ratio >= run.worst_ratio)) run.worst_detail = describe(r, c.spec);
    run.worst_ratio = std::max(run.worst_ratio, ratio);
  }
  return run;
}

/// The committed cases of `op` (golden_data/<op>.h5), read from disk.
inline std::vector<CaseData> committed_cases_of(const std::string& op) {
  std::vector<CaseData> v;
  for (const auto& cc : committed_cases()) {
    CaseData c = read_case(cc.file, cc.name);
    if (c.op == op) v.push_back(std::move(c));
  }
  return v;
}

/// Generated cases up to this many elements (case shape) are materialized in memory by
/// the CPU tests (numgate/op.h).
inline constexpr std::size_t kSmallGeneratedElements = kSmallGeneratedCaseElements;

/// The generated cases of `op` (declared with production = true, so never committed) of at
/// most `max_elements` elements in the case shape, materialized in memory
/// (numgate::materialize_small_generated).
inline std::vector<CaseData> small_generated_cases_of(const std::string& op, std::size_t max_elements) {
  return materialize_small_generated(find_op(op), max_elements);
}

/// A deliberately broken reference and the cases built to expose it.
/// Flat index of the first element whose bits differ between two tensors of one dtype and
/// shape (a different dtype or shape: 0), or -1 when they are bitwise equal.
inline std::int64_t first_bit_difference(const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape) return 0;
  const std::size_t es = dtype_size(a.dtype);
  for (std::size_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.bytes.data() + i * es, b.bytes.data() + i * es, es) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

struct MutantSpec {
  std::string name;  ///< printed, and named in failure messages
  std::function<std::map<std::string, Tensor>(const CaseData&)> outputs;  ///< the broken reference's outputs
  std::function<bool(const CaseData&)> must_fail;  ///< the cases (committed and generated) it must FAIL on
  /// When set, the generated cases it must FAIL on (must_fail then selects committed cases
  /// only), and at least one generated case must be selected.
  std::function<bool(const CaseData&)> must_fail_generated = nullptr;
};

/// Gates the mutant's outputs on every committed case, then every generated case, printing
/// one verdict line per case and the first committed failure as a user sees it. Requires
/// FAIL on every case its predicate selects, and at least one committed case selected (so
/// CI catches the mutant from golden_data/ alone).
inline void expect_caught(const MutantSpec& m, const std::vector<CaseData>& committed,
                          const std::vector<CaseData>& generated = {}) {
  int committed_selected = 0, generated_selected = 0;
  for (const bool is_committed : {true, false}) {
    const auto& select = is_committed || !m.must_fail_generated ? m.must_fail : m.must_fail_generated;
    for (const CaseData& c : is_committed ? committed : generated) {
      const MutantRun run = gate_outputs(c, m.outputs(c));
      std::cout << "[ mutant " << m.name << " ] " << (is_committed ? "" : "(in memory) ") << c.op << "/"
                << c.spec.name << ": " << verdict_name(run.verdict)
                << (run.failing_tensors.empty() ? "" : " (" + run.failing_tensors.substr(1) + ")") << "\n";
      if (!select(c)) continue;
      if (is_committed && committed_selected == 0 && run.verdict == Verdict::fail)
        std::cout << "  first failure, as a user sees it:\n" << run.worst_detail;
      ++(is_committed ? committed_selected : generated_selected);
      EXPECT_EQ(run.verdict, Verdict::fail) << "mutant " << m.name << " not caught on " << c.op << "/"
                                            << c.spec.name << ":\n" << run.worst_detail;
    }
  }
  EXPECT_GT(committed_selected, 0) << "no committed case is designed to catch mutant " << m.name;
  if (m.must_fail_generated)
    EXPECT_GT(generated_selected, 0) << "no generated case is designed to catch mutant " << m.name;
}

}  // namespace numgate::testing
