// numgate — the mutation matrix (SPEC §6): for every op and each of the seven sources of
// discrepancy a kernel swap can introduce, the mutants proven caught and by which check,
// or why the class does not apply to the op (yet), or that it is not covered yet.
//
// The seven classes (SPEC §6): reduction order, FP32 vs low-precision intermediates,
// atomic-add order, cast timing (where and how a value is rounded to a narrower dtype),
// epsilon placement, RNG stream, mask/boundary off-by-one.
//
// Declared here, once, as data (the table is in mutation_matrix.cpp, one line per entry):
//   - CPU entries: a deliberately broken reference (the op's reference_variant with one
//     mutation, or a generic perturbation of the golden) gated as if it were the target on
//     the op's committed cases; run by the ctest MutationMatrix.* (cpu.unit) and by every
//     replay for its report section;
//   - GPU entries: a deliberately broken kernel replayed by a named GoogleTest of
//     numgate_replay (tests/gpu/test_replay_mutants.cpp), which records its outcome;
//   - legitimate-variation entries (reduction order): an evaluation that is NOT wrong (FP32
//     sums in other orders, FMA contraction) and must PASS, proven by a named CPU test;
//   - cells with a reason: does not apply (no epsilon in the formula, no random numbers
//     drawn, ...) or not covered yet.
// Every (op, class) cell must be declared (cells()); MutationMatrix.EveryCellIsDeclared fails
// otherwise.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "numgate/fixture_file.h"
#include "numgate/gate.h"

namespace numgate::matrix {

enum class Class {
  reduction_order,
  low_precision_intermediates,
  atomic_add_order,
  cast_timing,
  epsilon_placement,
  rng_stream,
  mask_boundary,
};
inline constexpr std::array<Class, 7> kClasses = {Class::reduction_order,   Class::low_precision_intermediates,
                                                  Class::atomic_add_order,  Class::cast_timing,
                                                  Class::epsilon_placement, Class::rng_stream,
                                                  Class::mask_boundary};
/// "reduction order", "FP32 vs low-precision intermediates", "atomic-add order", "cast timing",
/// "epsilon placement", "RNG stream", "mask/boundary off-by-one"
const char* class_name(Class c);

/// The checks of the test bed that can catch a mutant.
enum class Check {
  max_abs_gate,        ///< target error above the threshold of a valid gate
  decidable_rounding,  ///< a decidable element not rounded to round(golden)
  structure,           ///< NaN / Inf / exact zeros where the rounded golden has none (or the reverse)
  ulp_limit,           ///< an elementwise op's ULP limit exceeded
  envelope,            ///< outside the conditioning envelope of an invalid gate
  length_sweep,        ///< an invalid gate's length sweep: error growing faster with T than any
                       ///< legitimate evaluation's, or a sweep case failing its own rules
  error_distribution,  ///< an invalid gate's error distribution: a bias only the target has
  poison,              ///< two launches differ / an element never written (GPU)
  guard_bands,         ///< an out-of-bounds write (GPU)
  passes,              ///< a legitimate variation: must PASS (never a check that fires)
};
/// "max-abs gate", "decidable rounding", "structure", "ULP limit", "envelope", "length sweep",
/// "error distribution", "poison / two launches", "guard bands", "passes (legitimate)"
const char* check_name(Check c);
/// The checks that fired on one gated tensor (its verdict FAIL or not).
std::vector<Check> checks_fired(const GateResult& r);

enum class Where { cpu, gpu };

/// One mutant (or legitimate variation) of one cell.
struct Entry {
  std::string op;
  Class cls;
  std::string mutant;  ///< "bf16_sum_of_squares", "output rounded toward zero", ...
  Where where;
  Check check;         ///< the check declared to catch it (Check::passes: must pass)
  std::string proof;   ///< the GoogleTest that runs it: "MutationMatrix.CpuEntries", "ReplayMutants.*"
  /// CPU entries: the broken reference's outputs on a case, or a legitimate evaluation's
  /// (Check::passes: proven when no case FAILs); empty for GPU entries.
  std::function<std::map<std::string, Tensor>(const CaseData&)> outputs;
};
/// Every declared entry, by op then class.
const std::vector<Entry>& entries();

/// A cell without entries: why.
struct Reason {
  std::string op;
  Class cls;
  bool applies = false;  ///< false: does not apply (yet); true: applies but not covered yet
  std::string why;
};
const std::vector<Reason>& reasons();

/// What running a CPU entry on the op's committed cases showed.
struct Outcome {
  bool caught = false;     ///< FAIL on at least one case, with the declared check among the checks that fired
  int cases = 0;           ///< committed cases gated
  int failed = 0;          ///< of them FAIL
  std::string detail;      ///< the first failing case and tensor, and the checks that fired there
};
/// Gates the entry's outputs on every case of `committed` (the op's committed cases).
Outcome run_cpu_entry(const Entry& e, const std::vector<CaseData>& committed);

}  // namespace numgate::matrix
