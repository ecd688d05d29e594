// Replays every target kernel on every fixture case found in the fixture folders:
// load -> upload -> poison outputs (NaN) -> launch -> download -> poison again (0x55,
// finite) -> launch -> bitwise compare (every element written, reproducible) -> guard
// bands and inputs intact -> structure checks -> conditioning -> gate, per tensor.
// Then writes report.md / report.json. Without a CUDA device every replay test is skipped
// with the reason, the report still shows the oracle side (gate validity), and the binary
// exits 77 so ctest reports the test as skipped, never as passed.
//
// It never aborts on what it finds in the fixture folders: fixtures are discovered before
// GoogleTest lists the tests (numgate/fixture_discovery.h), every fixture problem (a file
// that cannot be read, a stray or non-regular file, a duplicate folder or case, an op
// attribute that does not match) is one failing test Fixtures.Problem<n>_<file> and a FAIL
// row in the report, also without a device; a stale case fails its Replay tests with or
// without a device. The report and the JUnit XML are written whatever happens.
//
//   numgate_replay --fixtures DIR [--fixtures DIR ...] [--optional-fixtures DIR ...]
//                  [--op NAME ...] --report-dir DIR [--sweep-seeds N] [gtest flags]
//
// Exit status: 0 every test passed; 77 no CUDA device and nothing broken (ctest: skipped);
// 1 a test failed, a fixture problem, a FAIL verdict or the report could not be written;
// 2 usage error (unknown flag value, unknown --op).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>

#include "device_buffer.h"
#include "replay.h"
#include "rows_alone.h"
#include "numgate/fixture_file.h"
#include "numgate/report.h"
#include "target.h"

namespace numgate {
namespace {

using namespace numgate::testing;

std::map<std::string, CaseReport>& results() {
  static std::map<std::string, CaseReport> r;
  return r;
}
CaseReport& report_for(const ReplayCase& rc, const CaseData& c) {
  CaseReport& r = results()[rc.file + ":" + rc.name];
  if (r.op.empty()) {
    r.op = c.op;
    r.file = rc.file;
    r.spec = c.spec;
  }
  return r;
}

::testing::AssertionResult gated(const GateResult& r, const CaseSpec& spec) {
  if (r.verdict == Verdict::pass || r.verdict == Verdict::pass_with_limitations) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << describe(r, spec);
}

// Production-size cases (more than 2^22 elements in the first input) are replayed
// aligned only: the misaligned and row-by-row replays would cost minutes there.
// An unreadable case is not large: its replay then fails to load it and records FAIL rows.
bool large(const ReplayCase& rc) {
  try {
    return numel(read_case_attributes(rc.file, rc.name).spec.shape) > (std::int64_t{1} << 22);
  } catch (...) {
    return false;
  }
}

// One replay test of one case: a pass of the op's descriptor ("Forward", "Backward"), or
// the misaligned or row-by-row replay of every pass. Registered case by case (all tests
// of a case, then the next case), so load() holds one case at a time.
class Replay : public ::testing::Test {
 public:
  enum class Kind { pass, misaligned, rows_alone };
  /// `variant`: empty for the op's main target, else the TargetOp::variant replayed (Kind::pass only).
  Replay(ReplayCase rc, Kind kind, std::string pass, std::string variant = {})
      : rc_(std::move(rc)), kind_(kind), pass_(std::move(pass)), variant_(std::move(variant)) {}

  void SetUp() override {
    if (config().have_device) return;  // a stale or unreadable case then fails where it is loaded
    // Without a device a stale or unreadable case still fails: that is visible on the CPU.
    if (const std::string bad = case_problem(rc_); !bad.empty()) FAIL() << bad;
    GTEST_SKIP() << config().no_device_reason;
  }
  void TestBody() override {
    switch (kind_) {
      case Kind::pass: return replay_pass();
      case Kind::misaligned: return misaligned();
      case Kind::rows_alone: return rows_alone();
    }
  }

 private:
  ReplayCase rc_;
  Kind kind_;
  std::string pass_;
  std::string variant_;

  const OpDescriptor& desc() const { return find_op(rc_.op).descriptor(); }
  const TargetOp& target() const {
    if (variant_.empty()) return find_target(rc_.op);
    for (const TargetOp* v : variants_of(rc_.op))
      if (v->variant == variant_) return *v;
    throw std::logic_error("no variant " + variant_ + " of op " + rc_.op);
  }

  // Records FAIL rows for `outputs` when a replay could not complete (a launch error, an
  // illegal address, a stale or unreadable fixture, a refused precheck): a crash is never
  // a missing row.
  void record_error(const std::string& suffix, const std::vector<std::string>& outputs, const std::string& what) {
    CaseReport& rep = results()[rc_.file + ":" + rc_.name];
    if (rep.op.empty()) {
      rep.op = rc_.op;
      rep.file = rc_.file;
      rep.spec.name = rc_.name;
    }
    for (const auto& t : outputs) {
      GateResult r;
      r.tensor = t + suffix;
      r.target_ran = true;
      r.verdict = Verdict::fail;
      r.target_structure = {false, what};
      rep.tensors.push_back(r);
    }
    rep.notes.push_back("ERROR" + suffix + ": " + what);
    ADD_FAILURE() << rc_.name << suffix << ": " << what;
  }

  GateResult gate(const CaseData& c, const std::string& t, const Tensor& out, const TargetRunner& runner) {
    ScopedTime timed(timings().gate);
    return CaseGate(find_op(c.op), c, runner)(t, &out);  // with the order evidence and length sweep (numgate/gate.h)
  }

  // The launches of one pass (numgate::testing::gate_launches): a deterministic pass twice
  // (NaN then 0x55 poison) and bitwise equal, a nondeterministic one
  // kNondeterministicLaunches times with every distinct result gated; memory safety; the
  // gate. A variant's rows are "<tensor> [<variant>]".
  void replay_pass() {
    const PassDecl& decl = desc().pass(pass_);
    const std::string suffix = variant_.empty() ? "" : " [" + variant_ + "]";
    try {
      const TargetPass& pass = target().pass(pass_);
      const auto held = load(rc_);
      const CaseData& c = *held;
      const GatedLaunches g = gate_launches(c, pass, decl.writes, target().precheck, pass_ + suffix);
      CaseReport& rep = report_for(rc_, c);
      for (const auto& p : g.problems) ADD_FAILURE() << c.spec.name << " " << pass_ << suffix << ": " << p;
      for (const auto& f : g.failures) ADD_FAILURE() << c.spec.name << " " << pass_ << suffix << ", " << f;
      for (const auto& t : decl.writes) {
        GateResult r = g.results.at(t);
        r.tensor = t + suffix;
        rep.tensors.push_back(r);
        EXPECT_TRUE(gated(r, c.spec));
      }
      rep.notes.push_back(g.note);
    } catch (const std::exception& e) {
      record_error(suffix, decl.writes, e.what());
    } catch (...) {
      record_error(suffix, decl.writes, "unknown exception");
    }
  }

  // Every buffer one element (of its own dtype) off its 16-byte alignment: the kernels'
  // scalar/peeled paths.
  void misaligned() {
    for (const PassDecl& decl : desc().passes) {
      try {
        const auto held = load(rc_);
        const CaseData& c = *held;
        CaseReport& rep = report_for(rc_, c);
        const PassRun a = run_pass(c, target().pass(decl.name), decl.writes, 1, 0xFF, target().precheck);
        for (const auto& p : a.problems) ADD_FAILURE() << c.spec.name << " misaligned " << decl.name << ": " << p;
        const TargetRunner misaligned_runner = pass_runner(target().pass(decl.name), decl.writes, 1, target().precheck);
        for (const auto& t : decl.writes) {
          GateResult r = gate(c, t, a.outputs.at(t), misaligned_runner);
          r.tensor = t + " (misaligned)";
          if (!a.problems.empty()) r.verdict = Verdict::fail;
          rep.tensors.push_back(r);
          EXPECT_TRUE(gated(r, c.spec));
        }
      } catch (const std::exception& e) {
        record_error(" (misaligned)", decl.writes, e.what());
      } catch (...) {
        record_error(" (misaligned)", decl.writes, "unknown exception");
      }
    }
  }

  // The first (up to) 16 rows (OpDescriptor::rows), each launched alone (RowWindow {r, 1}):
  // every Layout::rows tensor holds that row only, at an address of the same 16-byte phase
  // as in the whole tensor; every other tensor (Layout::row_indexed, per_column, whole) is
  // whole. The row's slice of every Layout::rows and Layout::row_indexed output must be
  // bitwise the batched launch's: no cross-row contamination, no dependence on the row
  // count or on what else is launched; a row_indexed output's other slices must keep their
  // poison. Memory safety too: outputs and workspace poisoned (0xFF), guard bands intact,
  // inputs unmodified. (Per-column outputs are reductions over rows and differ by design;
  // whole outputs are not compared.) Every finding is a FAIL row "<t> (rows alone)" of the
  // case's report (RowsAloneFindings, rows_alone.h) and a test failure.
  void rows_alone() {
    RowsAloneFindings found;
    std::int64_t tried = 0;
    const CaseData* case_seen = nullptr;
    std::shared_ptr<const CaseData> held;
    try {
      held = load(rc_);
      const CaseData& c = *held;
      case_seen = &c;
      const OpDescriptor& d = desc();
      if (const std::string bad = d.row_split_problem(c.spec); !bad.empty()) throw std::runtime_error(bad);
      const std::int64_t rows = d.rows(c.spec);
      tried = std::min<std::int64_t>(rows, 16);
      // Bytes of one row of each Layout::rows and Layout::row_indexed tensor.
      std::map<std::string, std::size_t> row_bytes;
      std::map<std::string, Layout> layout;
      for (const TensorDecl& t : d.tensors) {
        layout[t.name] = t.layout;
        if (t.layout != Layout::rows && t.layout != Layout::row_indexed) continue;
        const std::size_t numel = is_input(t.role) ? c.inputs.at(t.name).numel() : c.golden.at(t.name).value.numel();
        row_bytes[t.name] = numel / static_cast<std::size_t>(rows) * dtype_size(t.dtype_for(c.spec));
      }
      for (const PassDecl& decl : d.passes) {
        const TargetPass& pass = target().pass(decl.name);
        const PassRun full = run_pass(c, pass, decl.writes, 0, 0xFF, target().precheck);
        for (const auto& p : full.problems) found.memory_problem(decl.name, "the batched launch", p);
        for (std::int64_t r = 0; r < tried; ++r) {
          const std::string launch = decl.name + ", row " + std::to_string(r) + " launched alone";
          std::map<std::string, std::unique_ptr<DeviceBuffer>> bufs;
          DevicePtrs ptrs;
          // (A Layout::rows tensor's row slice, else the whole tensor.)
          auto sliced = [&](const std::string& n) { return layout.at(n) == Layout::rows; };
          auto at_of = [&](const std::string& n) { return sliced(n) ? static_cast<std::size_t>(r) * row_bytes.at(n) : 0; };
          auto place = [&](const std::string& n, const Tensor* data, std::size_t whole_bytes, bool guard_nan) {
            const std::size_t at = at_of(n);
            bufs[n] = std::make_unique<DeviceBuffer>(sliced(n) ? row_bytes.at(n) : whole_bytes, at % 16,
                                                     guard_nan ? DeviceBuffer::kNaNGuard : DeviceBuffer::kCanary);
            if (data) bufs[n]->upload(data->bytes.data() + at);
            else bufs[n]->poison(0xFF);
            ptrs[n] = bufs[n]->data();
          };
          for (const auto& n : c.input_names) place(n, &c.inputs.at(n), c.inputs.at(n).bytes.size(), true);
          for (const auto& t : decl.writes) place(t, nullptr, output_like(c, t).bytes.size(), false);
          if (target().precheck)
            cuda_check(target().precheck(c.spec, ptrs, nullptr), "the target's precheck of the case's inputs");
          const std::size_t ws_bytes = pass.workspace_bytes ? pass.workspace_bytes(c.spec) : 0;
          DeviceBuffer ws(std::max<std::size_t>(ws_bytes, 1), 0);
          ws.poison(0xFF);  // a kernel that reads workspace it did not write sees NaN (as run_pass)
          cuda_check(pass.launch(Launch{c.spec, ptrs, ws.data(), ws_bytes, nullptr, RowWindow{r, 1}}), "kernel launch");
          cuda_check(cudaDeviceSynchronize(), "kernel execution");
          for (const auto& [n, b] : bufs)
            if (const std::string dmg = b->guard_damage(); !dmg.empty())
              found.memory_problem(n, launch, "out-of-bounds " + dmg);
          if (const std::string dmg = ws.guard_damage(); !dmg.empty())
            found.memory_problem("workspace", launch, "out-of-bounds " + dmg);
          for (const auto& n : c.input_names) {
            const std::vector<unsigned char> now = bufs[n]->download();
            if (std::memcmp(now.data(), c.inputs.at(n).bytes.data() + at_of(n), now.size()) != 0)
              found.memory_problem(n, launch, "input " + n + " was modified");
          }
          for (const auto& t : decl.writes) {
            if (!row_bytes.count(t)) continue;  // per-column, whole: not compared
            const auto h = bufs[t]->download();
            const Tensor& batched = full.outputs.at(t);
            if (sliced(t)) {
              found.compare(t, batched, rows, r, h.data());
            } else {  // row_indexed: the whole buffer, indexed by the row's global index
              found.compare(t, batched, rows, r, h.data() + static_cast<std::size_t>(r) * row_bytes.at(t));
              found.untouched_outside(t, batched, rows, r, h, 0xFF);
            }
          }
        }
      }
    } catch (const std::exception& e) {
      found.error(desc().output_names(), e.what());
    } catch (...) {
      found.error(desc().output_names(), "unknown exception");
    }
    for (const auto& m : found.messages()) ADD_FAILURE() << rc_.name << " rows alone, " << m;
    CaseReport* rep = nullptr;
    if (case_seen) {
      rep = &report_for(rc_, *case_seen);
    } else {  // not loaded (stale, unreadable): the report names the case from its file
      rep = &results()[rc_.file + ":" + rc_.name];
      if (rep->op.empty()) {
        rep->op = rc_.op;
        rep->file = rc_.file;
        rep->spec.name = rc_.name;
      }
    }
    for (auto& row : found.report_rows()) rep->tensors.push_back(std::move(row));
    rep->notes.push_back(found.note(tried));
  }
};

// Registers the replay tests of every selected case, case by case:
//   <op>/Replay.<Pass>/<case>, <op>/Replay.Misaligned/<case>, <op>/Replay.RowsIndependent/<case>,
//   <op>/Replay.<Pass>_<variant>/<case> for every pass of every variant of the op
// (cases above 2^22 elements get no Misaligned / RowsIndependent test: aligned only).
void register_replay_tests() {
  for (const ReplayCase& rc : all_cases()) {
    const std::string suite = rc.op + "/Replay";
    auto add = [&](const std::string& test, Replay::Kind kind, const std::string& pass,
                   const std::string& variant = {}) {
      ::testing::RegisterTest(suite.c_str(), (test + "/" + rc.name).c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [rc, kind, pass, variant]() -> ::testing::Test* {
                                return new Replay(rc, kind, pass, variant);
                              });
    };
    for (const PassDecl& p : find_op(rc.op).descriptor().passes) add(p.name, Replay::Kind::pass, p.name);
    for (const TargetOp* v : variants_of(rc.op))
      for (const TargetPass& p : v->passes) add(p.name + "_" + v->variant, Replay::Kind::pass, p.name, v->variant);
    if (!large(rc)) {
      add("Misaligned", Replay::Kind::misaligned, "");
      add("RowsIndependent", Replay::Kind::rows_alone, "");
    }
  }
}

// ---- fixture problems: one failing test each ----------------------------------------
class FixtureProblemTest : public ::testing::Test {
 public:
  explicit FixtureProblemTest(std::string message) : message_(std::move(message)) {}
  void TestBody() override { ADD_FAILURE() << message_; }

 private:
  std::string message_;
};

// "Problem<n>_<file name with every character but [A-Za-z0-9_] as '_'>".
std::string problem_test_name(std::size_t n, const FixtureProblem& p) {
  std::filesystem::path path(p.file);
  if (path.filename().empty()) path = path.parent_path();  // "dir/"
  std::string tail = path.filename().string();
  for (char& ch : tail)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return "Problem" + std::to_string(n) + (tail.empty() ? "" : "_" + tail);
}

void register_problem_tests() {
  const auto& problems = config().problems;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const std::string message = problems[i].message();
    ::testing::RegisterTest("Fixtures", problem_test_name(i + 1, problems[i]).c_str(), nullptr, nullptr, __FILE__,
                            __LINE__, [message]() -> ::testing::Test* { return new FixtureProblemTest(message); });
  }
}

// ---- the report ------------------------------------------------------------------------
GateResult fail_row(const std::string& tensor, const std::string& why) {
  GateResult r;
  r.tensor = tensor;
  r.verdict = Verdict::fail;
  r.target_structure = {false, why};
  return r;
}

// The report of every selected case and every fixture problem. Written after
// RUN_ALL_TESTS (never from a GoogleTest hook), so nothing a test did can keep it unwritten.
Report assemble_report() {
  Report rep;
  rep.device = config().device;
  bool have_production = false;
  for (const auto& rc : all_cases()) {
    have_production |= rc.production;
    const std::string key = rc.file + ":" + rc.name;
    auto it = results().find(key);
    if (it == results().end() || it->second.tensors.empty()) {
      // Not replayed (no device, or filtered out): report the oracle side only.
      CaseReport cr;
      cr.op = rc.op;
      cr.file = rc.file;
      cr.spec.name = rc.name;
      if (it != results().end()) cr.notes = it->second.notes;  // e.g. an error of the row-by-row replay
      try {
        const CaseData c = read_case(rc.file, rc.name);
        cr.spec = c.spec;
        const std::string why = staleness(c);
        for (const auto& t : c.output_names) {
          GateResult g = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), nullptr);
          if (!why.empty()) {  // a stale case is never reported as merely not run
            g.verdict = Verdict::fail;
            g.target_structure = {false, "stale fixture: " + why};
          }
          cr.tensors.push_back(g);
        }
        if (!why.empty())
          cr.notes.push_back("STALE fixture: " + why +
                             ". Fix: regenerate (numgate-generate; see README: Regenerating golden data)");
      } catch (const std::exception& e) {
        cr.tensors.push_back(fail_row("(fixture)", e.what()));
        cr.notes.push_back(std::string("ERROR: ") + e.what());
      } catch (...) {
        cr.tensors.push_back(fail_row("(fixture)", "unknown error while reading the case"));
      }
      cr.notes.push_back(config().have_device ? "not replayed in this run (filtered out or failed to load)"
                                              : "oracles only: " + config().no_device_reason);
      rep.cases.push_back(std::move(cr));
    } else {
      // Every gated tensor must have a row: one a pass never reached reads NOT RUN.
      CaseReport cr = it->second;
      try {
        std::vector<std::string> expected = read_case_attributes(rc.file, rc.name).output_names;
        for (const TargetOp* v : variants_of(rc.op))
          for (const TargetPass& p : v->passes)
            for (const auto& t : find_op(rc.op).descriptor().pass(p.name).writes)
              expected.push_back(t + " [" + v->variant + "]");
        for (const auto& t : expected) {
          const bool seen = std::any_of(cr.tensors.begin(), cr.tensors.end(),
                                        [&](const GateResult& g) { return g.tensor == t; });
          if (!seen) {
            GateResult missing;
            missing.tensor = t;
            cr.tensors.push_back(missing);  // verdict NOT RUN
          }
        }
      } catch (const std::exception& e) {
        cr.tensors.push_back(fail_row("(fixture)", e.what()));
        cr.notes.push_back(std::string("ERROR: ") + e.what());
      }
      rep.cases.push_back(std::move(cr));
    }
  }
  // One FAIL row per fixture problem: the file (as the case's file), the case or the
  // file name, the field as the row's tensor, and the message with its fix as a note.
  for (const auto& p : config().problems) {
    CaseReport cr;
    cr.op = p.op.empty() ? kNoOpProblems : p.op;
    cr.file = p.file;
    cr.spec.name = !p.kase.empty() ? p.kase : (p.folder ? "folder " : "file ") + p.file;
    cr.tensors.push_back(fail_row(p.field.empty() ? "(fixture)" : p.field, p.message()));
    cr.notes.push_back("FIXTURE PROBLEM: " + p.message());
    rep.cases.push_back(std::move(cr));
  }
  for (const auto& n : config().discovery.notes) rep.not_run.push_back(n);
  if (!config().ops.empty()) {
    std::string ops;
    for (const auto& o : config().ops) ops += (ops.empty() ? "" : ", ") + o;
    rep.not_run.push_back(kOpsNotSelected + ops + ": not selected (--op)");
  }
  if (!config().have_device) rep.not_run.push_back(config().no_device_reason);
  if (!have_production)
    rep.not_run.push_back("production shapes: no *_production.h5 in the fixture folders (generated by "
                          "`numgate-generate --set production` only where a CUDA device is present)");
  rep.not_run.push_back("shapes of more than 2^22 elements: replayed aligned only (no misaligned or row-by-row replay)");
  for (const auto& t : all_targets())
    if (!t.variant.empty() && selected(t.op))
      rep.not_run.push_back("variant " + t.label() + ": replayed aligned on every case (no misaligned or row-by-row "
                            "replay; gate 1 differentiates the main target only)");
  for (const auto& op : all_ops()) {
    if (!selected(op->name())) continue;
    for (const char* impl : {kGate1Golden, kGate1Target}) {
      const auto it = gate1_results().find({op->name(), impl});
      if (it != gate1_results().end()) {
        rep.gate1.push_back(it->second);
        continue;
      }
      Gate1Report missing;
      missing.op = op->name();
      missing.implementation = impl;
      missing.not_run_reason = impl == std::string(kGate1Target) && !config().have_device
                                   ? config().no_device_reason
                                   : "not run (filtered out by --gtest_filter, or the test did not finish)";
      rep.gate1.push_back(missing);
    }
  }
  rep.matrix = matrix_rows();
  if (config().sweep_seeds > 0)
    for (const auto& op : all_ops()) {
      if (!selected(op->name()) || cases_of(op->name()).empty()) continue;
      const auto it = sweep_results().find(op->name());
      if (it != sweep_results().end()) {
        rep.sweep.push_back(it->second);
        continue;
      }
      SweepReport missing;
      missing.op = op->name();
      missing.not_run_reason = config().have_device ? "not run (filtered out by --gtest_filter, or did not finish)"
                                                    : config().no_device_reason;
      rep.sweep.push_back(missing);
    }
  rep.not_covered = {
      "gate 3 (SPEC §6, the training run, numgate-train) trains with rmsnorm, rope, softmax, swiglu, cross_entropy and "
      "dropout_add only: offset_rmsnorm, fused_add_rmsnorm, layernorm and geglu are not in its Qwen3-shaped model",
      "strided (non-contiguous) inputs: kernels take contiguous rows only",
      "fp64 cases in gate 2: no fixture case is fp64 (the double instantiations are checked by gate 1 only)",
      "SPEC §4 fallback for a gate that is not valid: the length sweep varies one reduction length (RoPE and the "
      "GLUs have none; a mean or sum cross-entropy loss sweeps the vocab, not the tokens) and needs 3 lengths >= 2 "
      "(a row of 1..7 elements gets the error distribution only)",
  };
  return rep;
}

// Writes the report; false (after saying why on stderr) when it could not. Sets *failed
// when the report's overall verdict is FAIL.
bool write_the_report(bool* failed) {
  try {
    const Report rep = assemble_report();
    *failed = rep.overall() == Verdict::fail;
    write_report(rep, config().report_dir);
    std::cout << "\n" << summary_table(rep) << "Report: " << config().report_dir << "/report.md, "
              << config().report_dir << "/report.json\n";
    for (const auto& p : config().problems) std::cout << "FIXTURE PROBLEM: " << p.message() << "\n";
    return true;
  } catch (const std::exception& e) {
    std::cerr << "numgate_replay: the report could not be written to '" << config().report_dir << "': " << e.what()
              << "\n";
  } catch (...) {
    std::cerr << "numgate_replay: the report could not be written to '" << config().report_dir
              << "' (unknown error)\n";
  }
  return false;
}

}  // namespace
}  // namespace numgate

namespace {

constexpr const char* kUsage =
    "numgate_replay --fixtures DIR [--fixtures DIR ...] [--optional-fixtures DIR ...] [--op NAME ...]\n"
    "               --report-dir DIR [--sweep-seeds N] [gtest flags]\n"
    "  --fixtures DIR           a fixture folder; one that does not exist is a fixture problem (exit 1)\n"
    "  --optional-fixtures DIR  a fixture folder that may not exist (a note in the report), e.g.\n"
    "                           build/golden_data where production fixtures are generated only with a GPU\n"
    "  --op NAME                replay and report only that op (repeatable)\n"
    "  --report-dir DIR         where report.md and report.json are written (default: .)\n"
    "  --sweep-seeds N          fresh-seed in-memory cases per op of the false-fail sweep (default 0: no\n"
    "                           sweep; README runs it with 1000); needs a CUDA device\n"
    "Without --fixtures / --optional-fixtures: --fixtures golden_data.\n"
    "Exit status: 0 passed; 77 no CUDA device and nothing broken; 1 failed; 2 usage error.\n";

// Our flags (they decide which cases exist) are taken out of argv; the rest go to
// GoogleTest. Returns false (after printing why) on a usage error.
bool parse_args(int argc, char** argv, std::vector<char*>& rest, bool& help) {
  using numgate::testing::config;
  auto& cfg = config();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], value;
    bool has_value = false;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos &&
                                     a.rfind("--gtest_", 0) != 0) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    const bool ours = a == "--fixtures" || a == "--optional-fixtures" || a == "--report-dir" || a == "--op" ||
                      a == "--sweep-seeds";
    if (!ours) {
      if (a == "--help-numgate") help = true;
      else rest.push_back(argv[i]);
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        std::cerr << "numgate_replay: " << a << " needs a value\n" << kUsage;
        return false;
      }
      value = argv[++i];
    }
    if (value.empty()) {
      std::cerr << "numgate_replay: " << a << " needs a non-empty value\n" << kUsage;
      return false;
    }
    if (a == "--fixtures") cfg.fixture_folders.push_back({value, false});
    else if (a == "--optional-fixtures") cfg.fixture_folders.push_back({value, true});
    else if (a == "--report-dir") cfg.report_dir = value;
    else if (a == "--sweep-seeds") {
      std::size_t used = 0;
      long long n = -1;
      try {
        n = std::stoll(value, &used);
      } catch (const std::exception&) {
      }
      if (used != value.size() || n < 0 || n > 1000000) {
        std::cerr << "numgate_replay: --sweep-seeds " << value << ": expected an integer in [0, 1000000]\n" << kUsage;
        return false;
      }
      cfg.sweep_seeds = n;
    }
    else {
      try {
        numgate::find_op(value);
      } catch (const std::exception& e) {
        std::cerr << "numgate_replay: --op " << value << ": " << e.what() << "\n";
        return false;
      }
      if (std::find(cfg.ops.begin(), cfg.ops.end(), value) == cfg.ops.end()) cfg.ops.push_back(value);
    }
  }
  if (cfg.fixture_folders.empty()) cfg.fixture_folders.push_back({"golden_data", false});
  return true;
}

void find_device() {
  using numgate::testing::config;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, 0);
    config().have_device = true;
    config().device = std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
  } else {
    config().no_device_reason = std::string("no CUDA device: target replay skipped (") +
                                (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) + ")";
    spdlog::warn("{}; the report covers fixtures and oracles only", config().no_device_reason);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using numgate::testing::config;
  std::vector<char*> rest{argv[0]};
  bool help = false;
  if (!parse_args(argc, argv, rest, help)) return 2;
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  int rc = 1;
  try {
    numgate::testing::discover();  // before InitGoogleTest: it instantiates the Replay tests
    find_device();
    int rargc = static_cast<int>(rest.size());
    ::testing::InitGoogleTest(&rargc, rest.data());
    numgate::register_replay_tests();
    numgate::register_problem_tests();
    numgate::testing::register_gate1_tests();
    numgate::testing::register_sweep_tests();
    rc = RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::cerr << "numgate_replay: " << e.what() << "\n";
    rc = 1;
  } catch (...) {
    std::cerr << "numgate_replay: unknown error\n";
    rc = 1;
  }
  if (GTEST_FLAG_GET(list_tests)) return rc;  // --gtest_list_tests: nothing ran, keep the last report
  bool report_fail = false;
  const bool written = numgate::write_the_report(&report_fail);
  std::cout << numgate::testing::timing_summary() << "\n";
  if (!written || rc != 0 || report_fail || !config().problems.empty()) return 1;
  if (!config().have_device) return 77;  // ctest: SKIP_RETURN_CODE
  return 0;
}
