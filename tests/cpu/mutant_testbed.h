// numgate CPU tests — the testbed shared by the mutant tests of every op: an op's
// committed and small generated cases, and the gate applied to a set of outputs (a
// deliberately broken reference) as if they were the target.
#pragma once

#include <algorithm>
#include <cmath>
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
  for (const auto& t : c.output_names) {
    const GateResult r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &out.at(t));
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
/// the CPU tests (151,936 x 2 cross-entropy logits included).
inline constexpr std::size_t kSmallGeneratedElements = 400000;

/// The generated cases of `op` (declared with production = true, so never committed) of at
/// most `max_elements` elements in the case shape, materialized in memory exactly as the
/// generator writes them: cheap on the CPU, so their oracles and mutants are checked in CI
/// too, not only where a GPU generates them.
inline std::vector<CaseData> small_generated_cases_of(const std::string& op, std::size_t max_elements) {
  std::vector<CaseData> v;
  const Op& o = find_op(op);
  for (const CaseSpec& s : o.cases()) {
    std::size_t n = 1;
    for (auto d : s.shape) n *= static_cast<std::size_t>(d);
    if (s.production && n <= max_elements) v.push_back(materialize(o, s));
  }
  return v;
}

}  // namespace numgate::testing
