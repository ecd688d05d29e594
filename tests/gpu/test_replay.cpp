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
//                  [--op NAME ...] --report-dir DIR [gtest flags]
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
#include "numgate/fixture_file.h"
#include "numgate/report.h"
#include "target.h"

namespace numgate {
namespace {

using testing::DeviceBuffer;
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
    const CaseData a = read_case_attributes(rc.file, rc.name);
    std::int64_t n = 1;
    for (auto d : a.spec.shape) n *= d;
    return n > (std::int64_t{1} << 22);
  } catch (...) {
    return false;
  }
}

class Replay : public ::testing::TestWithParam<ReplayCase> {
 protected:
  void SetUp() override {
    if (config().have_device) return;  // a stale or unreadable case then fails where it is loaded
    // Without a device a stale or unreadable case still fails: that is visible on the CPU.
    if (const std::string bad = case_problem(GetParam()); !bad.empty()) FAIL() << bad;
    GTEST_SKIP() << config().no_device_reason;
  }

  // Records FAIL rows for `outputs` when a replay could not complete (a launch error, an
  // illegal address, a stale or unreadable fixture): a crash is never a missing row.
  void record_error(const std::string& suffix, const std::vector<std::string>& outputs, const std::string& what) {
    const ReplayCase& rc = GetParam();
    CaseReport& rep = results()[rc.file + ":" + rc.name];
    if (rep.op.empty()) {
      rep.op = rc.op;
      rep.file = rc.file;
      rep.spec.name = rc.name;
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
    ADD_FAILURE() << rc.name << suffix << ": " << what;
  }

  // Two launches (NaN then 0x55 poison), reproducibility, memory safety, then the gate.
  void replay_pass(const std::string& pass_name) {
    const ReplayCase& rc = GetParam();
    const TargetPass& pass = find_pass(rc.op, pass_name);
    try {
      const CaseData& c = load(rc);
      const PassRun a = run_pass(c, pass, 0, 0xFF), b = run_pass(c, pass, 0, 0x55);
      CaseReport& rep = report_for(rc, c);
      std::vector<std::string> problems = a.problems;
      problems.insert(problems.end(), b.problems.begin(), b.problems.end());
      for (const auto& p : problems) ADD_FAILURE() << c.spec.name << " " << pass_name << ": " << p;
      for (const auto& t : pass.outputs) {
        GateResult r;
        {
          ScopedTime timed(timings().gate);
          r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &a.outputs.at(t));
        }
        const std::string diff = first_bit_difference(a.outputs.at(t), b.outputs.at(t));
        if (!diff.empty()) {
          r.verdict = Verdict::fail;  // unwritten or racy: never a pass
          ADD_FAILURE() << c.spec.name << ", tensor " << t << ": two launches differ bitwise (element never "
                        << "written, or a race): " << diff;
        }
        if (!problems.empty()) r.verdict = Verdict::fail;  // out-of-bounds or modified input
        rep.tensors.push_back(r);
        EXPECT_TRUE(gated(r, c.spec));
      }
      rep.notes.push_back(pass_name + (problems.empty() ? ": guard bands and inputs intact" : ": MEMORY PROBLEMS") +
                          ", bitwise identical across 2 launches (NaN / 0x55 poison)");
    } catch (const std::exception& e) {
      record_error("", pass.outputs, e.what());
    } catch (...) {
      record_error("", pass.outputs, "unknown exception");
    }
  }
};

TEST_P(Replay, Forward) { replay_pass("Forward"); }
TEST_P(Replay, Backward) { replay_pass("Backward"); }

// Every buffer one element off its 16-byte alignment: the scalar/peeled paths.
TEST_P(Replay, Misaligned) {
  const ReplayCase& rc = GetParam();
  if (large(rc)) GTEST_SKIP() << "production-size shapes are replayed aligned only";
  for (const auto& pass : find_target(rc.op).passes) {
    try {
      const CaseData& c = load(rc);
      CaseReport& rep = report_for(rc, c);
      const PassRun a = run_pass(c, pass, 1, 0xFF);
      for (const auto& p : a.problems) ADD_FAILURE() << c.spec.name << " misaligned " << pass.name << ": " << p;
      for (const auto& t : pass.outputs) {
        GateResult r;
        {
          ScopedTime timed(timings().gate);
          r = evaluate_gate(t, c.spec, c.golden.at(t), c.reference.at(t), &a.outputs.at(t));
        }
        r.tensor = t + " (misaligned)";
        if (!a.problems.empty()) r.verdict = Verdict::fail;
        rep.tensors.push_back(r);
        EXPECT_TRUE(gated(r, c.spec));
      }
    } catch (const std::exception& e) {
      record_error(" (misaligned)", pass.outputs, e.what());
    } catch (...) {
      record_error(" (misaligned)", pass.outputs, "unknown exception");
    }
  }
}

// The first (up to) 16 rows, each launched alone at its own address (same 16-byte
// phase), give bitwise the row of the batched launch for the row-wise outputs: no
// cross-row contamination, no dependence on the row count. Memory safety is checked too.
TEST_P(Replay, RowsIndependent) {
  const ReplayCase& rc = GetParam();
  if (large(rc)) GTEST_SKIP() << "checked on the shapes below production size";
  try {
    const CaseData& c = load(rc);
    const TargetOp& target = find_target(c.op);
    const std::int64_t rows = target.rows(c.spec), tried = std::min<std::int64_t>(rows, 16);
    const std::int64_t hidden = c.spec.shape.back();
    const std::size_t row_bytes = static_cast<std::size_t>(hidden) * elem(c);
    CaseSpec one = c.spec;
    one.shape = {1, hidden};
    int checked = 0;
    for (const auto& pass : target.passes) {
      const PassRun full = run_pass(c, pass, 0, 0xFF);
      for (const auto& p : full.problems) ADD_FAILURE() << c.spec.name << " " << pass.name << ": " << p;
      for (std::int64_t r = 0; r < tried; ++r) {
        const std::size_t phase = (static_cast<std::size_t>(r) * row_bytes) % 16;
        std::map<std::string, std::unique_ptr<DeviceBuffer>> bufs;
        DevicePtrs ptrs;
        for (const auto& n : c.input_names) {
          const Tensor& in = c.inputs.at(n);
          const bool row_wise = in.shape == c.spec.shape;
          bufs[n] = std::make_unique<DeviceBuffer>(row_wise ? row_bytes : in.bytes.size(), row_wise ? phase : 0,
                                                   DeviceBuffer::kNaNGuard);
          bufs[n]->upload(in.bytes.data() + (row_wise ? static_cast<std::size_t>(r) * row_bytes : 0));
          ptrs[n] = bufs[n]->data();
        }
        for (const auto& t : pass.outputs) {
          const bool row_wise = c.golden.at(t).value.shape == c.spec.shape;
          bufs[t] = std::make_unique<DeviceBuffer>(row_wise ? row_bytes : output_like(c, t).bytes.size(),
                                                   row_wise ? phase : 0);
          bufs[t]->poison(0xFF);
          ptrs[t] = bufs[t]->data();
        }
        const CaseSpec row_spec = target.row_case ? target.row_case(c.spec, r) : one;
        const std::size_t ws_bytes = pass.workspace_bytes(row_spec);
        DeviceBuffer ws(std::max<std::size_t>(ws_bytes, 1), phase);
        testing::cuda_check(pass.launch(row_spec, ptrs, ws.data(), ws_bytes, nullptr), "kernel launch");
        testing::cuda_check(cudaDeviceSynchronize(), "kernel execution");
        for (const auto& [n, b] : bufs)
          if (const std::string d = b->guard_damage(); !d.empty())
            ADD_FAILURE() << c.spec.name << " row " << r << " alone, " << n << ": out-of-bounds " << d;
        for (const auto& t : pass.outputs) {
          if (c.golden.at(t).value.shape != c.spec.shape) continue;  // reductions over rows (dw) differ by design
          const auto h = bufs[t]->download();
          const unsigned char* batched = full.outputs.at(t).bytes.data() + static_cast<std::size_t>(r) * row_bytes;
          EXPECT_EQ(0, std::memcmp(h.data(), batched, row_bytes))
              << c.spec.name << ", tensor " << t << ": row " << r << " launched alone differs from the batched launch";
          ++checked;
        }
      }
    }
    report_for(rc, c).notes.push_back("row-wise outputs of the first " + std::to_string(tried) +
                                      " row(s), each launched alone: bitwise equal to the batched launch (" +
                                      std::to_string(checked) + " comparisons)");
  } catch (const std::exception& e) {
    record_error(" (rows alone)", {}, e.what());
  } catch (...) {
    record_error(" (rows alone)", {}, "unknown exception");
  }
}

std::string case_name(const ::testing::TestParamInfo<ReplayCase>& info) { return info.param.name; }

// One line per op.
INSTANTIATE_TEST_SUITE_P(RMSNorm, Replay, ::testing::ValuesIn(cases_of("rmsnorm")), case_name);
INSTANTIATE_TEST_SUITE_P(SwiGLU, Replay, ::testing::ValuesIn(cases_of("swiglu")), case_name);
INSTANTIATE_TEST_SUITE_P(GeGLU, Replay, ::testing::ValuesIn(cases_of("geglu")), case_name);
// [instantiate:glu]
INSTANTIATE_TEST_SUITE_P(OffsetRMSNorm, Replay, ::testing::ValuesIn(cases_of("offset_rmsnorm")), case_name);
INSTANTIATE_TEST_SUITE_P(FusedAddRMSNorm, Replay, ::testing::ValuesIn(cases_of("fused_add_rmsnorm")), case_name);
// [instantiate:rmsnorm_variants]
INSTANTIATE_TEST_SUITE_P(LayerNorm, Replay, ::testing::ValuesIn(cases_of("layernorm")), case_name);
// [instantiate:layernorm]
INSTANTIATE_TEST_SUITE_P(Softmax, Replay, ::testing::ValuesIn(cases_of("softmax")), case_name);
// [instantiate:softmax]
INSTANTIATE_TEST_SUITE_P(RoPE, Replay, ::testing::ValuesIn(cases_of("rope")), case_name);
// [instantiate:rope]
INSTANTIATE_TEST_SUITE_P(CrossEntropy, Replay, ::testing::ValuesIn(cases_of("cross_entropy")), case_name);
// [instantiate:cross_entropy]
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Replay);

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
        for (const auto& t : read_case_attributes(rc.file, rc.name).output_names) {
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
    cr.op = p.op.empty() ? "(fixtures)" : p.op;
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
    rep.not_run.push_back("ops other than " + ops + ": not selected (--op)");
  }
  if (!config().have_device) rep.not_run.push_back(config().no_device_reason);
  if (!have_production)
    rep.not_run.push_back("production shapes: no *_production.h5 in the fixture folders (generated by "
                          "`numgate-generate --set production` only where a CUDA device is present)");
  rep.not_run.push_back("shapes of more than 2^22 elements: replayed aligned only (no misaligned or row-by-row replay)");
  rep.not_covered = {
      "FP64 gradcheck of the backward formulas (SPEC §6, gate 1): not implemented yet",
      "short training-run comparison (SPEC §6, gate 3): not implemented yet",
      "strided (non-contiguous) inputs: kernels take contiguous rows only",
      "fp64 cases: the double instantiation is compiled but has no fixture cases yet",
      "order-sensitivity and T-sweep diagnostics for INCONCLUSIVE cases (SPEC §4): envelope check only",
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
    "               --report-dir DIR [gtest flags]\n"
    "  --fixtures DIR           a fixture folder; one that does not exist is a fixture problem (exit 1)\n"
    "  --optional-fixtures DIR  a fixture folder that may not exist (a note in the report), e.g.\n"
    "                           build/golden_data where production fixtures are generated only with a GPU\n"
    "  --op NAME                replay and report only that op (repeatable)\n"
    "  --report-dir DIR         where report.md and report.json are written (default: .)\n"
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
    const bool ours = a == "--fixtures" || a == "--optional-fixtures" || a == "--report-dir" || a == "--op";
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
    numgate::register_problem_tests();
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
