// Replay machinery shared by the replay tests: the fixture cases found on disk, loading
// them, and running one target pass on the device with poison, guard bands and an
// optional misalignment.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "numgate/fixture_discovery.h"
#include "numgate/op.h"
#include "numgate/report.h"
#include "target.h"

namespace numgate::testing {

struct Config {
  std::vector<FixtureFolder> fixture_folders;  ///< --fixtures (required), --optional-fixtures
  std::vector<std::string> ops;                ///< --op: the ops replayed and reported; empty: all
  std::string report_dir = ".";
  /// --sweep-seeds: fresh-seed in-memory cases per op of the false-fail sweep (0, the
  /// default: no sweep; README: the sweep is opt-in while its cross-entropy row FAILs).
  std::int64_t sweep_seeds = 0;
  bool have_device = false;
  std::string device = "no CUDA device";
  std::string no_device_reason;
  /// Set by discover(): what was found in the fixture folders, and the problems of the
  /// selected ops (plus those that concern no op: folders, stray files).
  FixtureDiscovery discovery;
  std::vector<FixtureProblem> problems;
};
Config& config();

/// Is `op` replayed in this run (no --op given, or named by one)?
bool selected(const std::string& op);
/// Searches config().fixture_folders (discover_fixtures with the registered ops) and
/// fills config().discovery and config().problems, adding a problem for every op named by
/// --op that has no fixture case. Never throws; call before InitGoogleTest, which lists
/// the cases.
void discover();
/// The problems of one readable fixture file against the code (discover() adds them for
/// every file of a selected op): its file-level formula_version or generator_version is
/// not the code's (stale file), or a case the op declares for the file's set (committed
/// for <op>.h5, production for <op>_production.h5) is missing from it. Never throws.
std::vector<FixtureProblem> file_problems(const FixtureEntry& f);

/// Where the replay's wall time goes (item: "measure where the time goes"), printed at
/// the end of every run with the peak host memory. Seconds, summed over the run.
struct Timings {
  double load = 0;    ///< reading fixture cases (HDF5, digests, promotion checks)
  double device = 0;  ///< uploads, poisoning, launches, synchronization, downloads
  double gate = 0;    ///< structure checks, conditioning, the gate (host, parallel)
  std::uint64_t bytes_loaded = 0;
};
Timings& timings();
/// Adds the lifetime of the object to a Timings field.
class ScopedTime {
 public:
  explicit ScopedTime(double& into);
  ~ScopedTime();
  ScopedTime(const ScopedTime&) = delete;
  ScopedTime& operator=(const ScopedTime&) = delete;

 private:
  double& into_;
  double start_;
};
/// "replay time: load 12.3 s (4.5 GB), device 3.2 s, gate 20.1 s; peak host memory 14.2 GB"
std::string timing_summary();

/// One case of one fixture file.
struct ReplayCase {
  std::string file, op, name;
  bool production = false;
  friend std::ostream& operator<<(std::ostream& os, const ReplayCase& c) {
    return os << c.op << "/" << c.name << " (" << c.file << ")";
  }
};

/// Every readable case of the selected ops found by discover() (an unreadable file is one
/// of config().problems instead, never an exception).
const std::vector<ReplayCase>& all_cases();
std::vector<ReplayCase> cases_of(const std::string& op);
/// Empty when the case's attributes can be read and match its declaration in the code;
/// else the whole message (file, case, what, fix). Cached; never throws.
std::string case_problem(const ReplayCase& rc);
/// Empty when the fixture case matches its declaration in the code (formula version,
/// dtype, shape, seed, pattern, op and gate parameters); else why it is stale.
std::string staleness(const CaseData& c);
/// Loads the case, or returns it from the cache; throws std::runtime_error if it is stale.
/// The cache holds the last case loaded only: the replay's tests run case by case (all
/// tests of one case, then the next), so each case is read once and host memory holds one
/// case at a time (production cases are GBs). The caller keeps what it uses alive.
std::shared_ptr<const CaseData> load(const ReplayCase& rc);

/// Outputs of one launch, and memory-safety problems seen (guard damage, modified inputs).
struct PassRun {
  std::map<std::string, Tensor> outputs;
  std::vector<std::string> problems;
};
/// Uploads every input, poisons the tensors the pass writes (`writes`) with `poison` bytes
/// (0xFF: NaN, 0x55: finite), runs `precheck` when given (a refusal throws), launches `pass`
/// on the whole case with every buffer shifted `offset_elems` elements of its own dtype off
/// its allocation (an i64 buffer by 8 bytes, a bf16 one by 2), synchronizes, downloads.
/// Throws std::runtime_error on a CUDA error.
using Precheck = std::function<cudaError_t(const CaseSpec&, const DevicePtrs&, cudaStream_t)>;
PassRun run_pass(const CaseData& c, const TargetPass& pass, const std::vector<std::string>& writes,
                 std::size_t offset_elems, unsigned char poison, const Precheck& precheck = {});
/// The pass as the length sweep's runner (numgate/gate.h: TargetRunner): run_pass on the
/// sweep case (NaN poison, buffers `offset_elems` off their alignment); a memory problem
/// (guard damage, modified inputs) or a CUDA error throws: the sweep then FAILs the target.
/// `pass` must outlive the runner.
TargetRunner pass_runner(const TargetPass& pass, const std::vector<std::string>& writes, std::size_t offset_elems,
                         const Precheck& precheck);
/// Empty when bitwise equal; else the first differing element with both values.
std::string first_bit_difference(const Tensor& a, const Tensor& b);

/// What launching one pass several times showed (SPEC §5), every launch gated.
struct GatedLaunches {
  /// Per tensor the pass writes: the gate of the worst of its bitwise-distinct results
  /// (every one gated), with launches, distinct_results and launch_spread(_ulp) set. FAIL
  /// when a deterministic pass gave two distinct results or any launch had a memory problem.
  std::map<std::string, GateResult> results;
  std::vector<std::string> problems;  ///< memory problems of any launch (guard bands, modified inputs)
  std::vector<std::string> failures;  ///< bitwise differences of a pass declared deterministic
  std::string note;                   ///< "Backward: guard bands and inputs intact, bitwise identical across 2 launches ..."
};
/// Launches `pass` on the whole case, aligned: a deterministic pass twice (NaN, then 0x55
/// poison) and requires the two bitwise equal (an unwritten element or a race otherwise);
/// a nondeterministic one kNondeterministicLaunches times (poison alternating NaN / 0x55),
/// gates every distinct result and reports their number and the largest difference between
/// launches. `label` begins the note (the pass, and the variant if any). Throws what
/// run_pass throws.
GatedLaunches gate_launches(const CaseData& c, const TargetPass& pass, const std::vector<std::string>& writes,
                            const Precheck& precheck, const std::string& label);
/// The zero tensor an output of the case is downloaded into.
Tensor output_like(const CaseData& c, const std::string& t);

/// Outcomes of the GPU entries of the mutation matrix (kernels/mutation_matrix.h), by the
/// full name of the test that proves them ("ReplayMutants.UnwrittenElementIsCaughtByPoison"):
/// whether the declared check caught the mutant (or, for a legitimate variation, whether it
/// passed), and what was seen. Filled by tests/gpu/test_replay_mutants.cpp.
struct MatrixOutcome {
  bool ok = true;
  std::string detail;
};
std::map<std::string, MatrixOutcome>& matrix_outcomes();
/// Records `ok` and `detail` for the running test (ANDed with what it recorded before).
void record_matrix_outcome(bool ok, const std::string& detail);
/// The mutation-matrix rows of every selected op with a fixture case: CPU entries run on the op's committed
/// fixture cases and its small generated cases (in memory), GPU entries from
/// matrix_outcomes() (absent: not run), legitimate CPU entries as proven by cpu.unit.
std::vector<MatrixRow> matrix_rows();

/// The false-fail sweep's report rows by op, filled by <op>/Sweep.FreshSeeds (test_sweep.cpp).
std::map<std::string, SweepReport>& sweep_results();
/// Registers <op>/Sweep.FreshSeeds for every selected op with a fixture case (none with
/// --sweep-seeds 0; call after InitGoogleTest).
void register_sweep_tests();

/// Gate 1's report rows by (op, implementation), filled by the <op>/Gate1 tests
/// (test_gate1.cpp); a row missing here is reported NOT RUN.
std::map<std::pair<std::string, std::string>, Gate1Report>& gate1_results();
/// Registers <op>/Gate1.Golden, <op>/Gate1.TargetDoubleKernels and the op's
/// <op>/Gate1.Mutant* for every selected op (call after InitGoogleTest).
void register_gate1_tests();

}  // namespace numgate::testing
