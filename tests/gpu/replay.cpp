#include "replay.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sys/resource.h>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "device_buffer.h"
#include "numgate/fixture_file.h"
#include "numgate/gate.h"
#include "mutation_matrix.h"
#include <gtest/gtest.h>

namespace numgate::testing {

Config& config() {
  static Config c;
  return c;
}


bool selected(const std::string& op) {
  const auto& ops = config().ops;
  return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
}

namespace {
std::vector<ReplayCase>& case_list() {
  static std::vector<ReplayCase> v;
  return v;
}
}  // namespace

std::vector<FixtureProblem> file_problems(const FixtureEntry& f) {
  std::vector<FixtureProblem> out;
  auto add = [&](const std::string& kase, const std::string& field, const std::string& what, const std::string& fix) {
    FixtureProblem p;
    p.file = f.path;
    p.op = f.op;
    p.kase = kase;
    p.field = field;
    p.what = what;
    p.fix = fix;
    out.push_back(std::move(p));
  };
  const std::string set = f.production ? "production" : "committed";
  const std::string regenerate = "regenerate it: `numgate-generate --set " + set + " --op " + f.op +
                                 "` (see README: Regenerating golden data)";
  try {
    const Op& op = find_op(f.op);
    if (f.formula_version != op.formula_version())
      add("", "formula_version",
          "stale file: file-level formula_version " + std::to_string(f.formula_version) + ", the code declares " +
              std::to_string(op.formula_version()) + " (op " + f.op + "'s descriptor)",
          regenerate);
    if (f.generator_version != kGeneratorVersion)
      add("", "generator_version",
          "stale file: file-level generator_version '" + f.generator_version + "', the code's is '" +
              kGeneratorVersion + "'",
          regenerate);
    for (const CaseSpec& c : op.cases()) {
      if (c.production != f.production) continue;
      if (std::binary_search(f.file_cases.begin(), f.file_cases.end(), c.name)) continue;
      add(c.name, "", "declared in the code (" + set + " set of op " + f.op + ") but missing from " + f.path +
                          ": never replayed",
          regenerate);
    }
  } catch (const std::exception& e) {
    add("", "", std::string("cannot be compared with the code's declaration: ") + e.what(), regenerate);
  } catch (...) {
    add("", "", "cannot be compared with the code's declaration (unknown error)", regenerate);
  }
  return out;
}

void discover() {
  Config& cfg = config();
  std::vector<std::string> known;
  for (const auto& op : all_ops()) known.push_back(op->name());
  cfg.discovery = discover_fixtures(cfg.fixture_folders, known);
  cfg.problems.clear();
  for (const auto& p : cfg.discovery.problems)
    if (p.op.empty() || selected(p.op)) cfg.problems.push_back(p);
  for (const auto& f : cfg.discovery.files)
    if (selected(f.op))
      for (auto& p : file_problems(f)) cfg.problems.push_back(std::move(p));
  auto& v = case_list();
  v.clear();
  for (const auto& f : cfg.discovery.files) {
    if (!selected(f.op)) continue;
    for (const auto& n : f.cases) v.push_back({f.path, f.op, n, f.production});
  }
  std::string folders;
  for (const auto& f : cfg.fixture_folders) folders += (folders.empty() ? "" : ", ") + f.path;
  for (const auto& op : cfg.ops) {
    if (std::any_of(v.begin(), v.end(), [&](const ReplayCase& c) { return c.op == op; })) continue;
    FixtureProblem p;
    p.file = folders;
    p.folder = true;
    p.op = op;
    p.what = "no fixture case of op '" + op + "' (--op " + op + ") found: nothing of it would be replayed";
    p.fix = "generate its fixtures (`numgate-generate --op " + op + "`) or check --fixtures";
    cfg.problems.push_back(std::move(p));
  }
}

const std::vector<ReplayCase>& all_cases() { return case_list(); }

std::vector<ReplayCase> cases_of(const std::string& op) {
  std::vector<ReplayCase> v;
  for (const auto& c : all_cases())
    if (c.op == op) v.push_back(c);
  return v;
}

std::string case_problem(const ReplayCase& rc) {
  static std::map<std::string, std::string> cache;
  const std::string key = rc.file + ":" + rc.name;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::string why;
  try {
    const CaseData a = read_case_attributes(rc.file, rc.name);
    if (const std::string s = staleness(a); !s.empty())
      why = "stale fixture " + rc.file + ", case " + rc.name + ": " + s +
            ". Fix: regenerate (numgate-generate; see README: Regenerating golden data)";
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "fixture " + rc.file + ", case " + rc.name + ": unreadable (unknown error)";
  }
  cache[key] = why;
  return why;
}

std::string staleness(const CaseData& c) {
  const Op* op = nullptr;
  try {
    op = &find_op(c.op);
  } catch (const std::exception& e) {
    return e.what();
  }
  for (const auto& d : op->cases()) {
    if (d.name != c.spec.name) continue;
    std::string why;
    for (const auto& diff : compare_declarations(declaration(*op, d), c)) why += (why.empty() ? "" : "; ") + diff;
    if (!why.empty()) return why;
    // Every stored tensor as the descriptor declares it (a fixture from another code version).
    const OpDescriptor& desc = op->descriptor();
    for (const auto& [n, t] : c.inputs)
      if (t.shape != desc.tensor(n).shape(c.spec) || t.dtype != desc.tensor(n).dtype_for(c.spec))
        why += (why.empty() ? "" : "; ") + ("inputs/" + n + " is " + std::string(dtype_name(t.dtype)) + " " +
                                            shape_to_string(t.shape) + ", the descriptor declares " +
                                            std::string(dtype_name(desc.tensor(n).dtype_for(c.spec))) + " " +
                                            shape_to_string(desc.tensor(n).shape(c.spec)));
    for (const auto& [n, g] : c.golden)
      if (g.value.shape != desc.tensor(n).shape(c.spec))
        why += (why.empty() ? "" : "; ") + ("golden/" + n + " has shape " + shape_to_string(g.value.shape) +
                                            ", the descriptor declares " + shape_to_string(desc.tensor(n).shape(c.spec)));
    return why;
  }
  return "no longer declared in the code";
}

std::shared_ptr<const CaseData> load(const ReplayCase& rc) {
  static std::string cached_key;
  static std::shared_ptr<const CaseData> cached;
  const std::string key = rc.file + ":" + rc.name;
  if (cached && cached_key == key) return cached;
  cached.reset();  // one case in memory at a time
  std::shared_ptr<CaseData> c;
  {
    ScopedTime timed(timings().load);
    c = std::make_shared<CaseData>(read_case(rc.file, rc.name));
  }
  for (const auto& [n, t] : c->inputs) timings().bytes_loaded += t.bytes.size();
  for (const auto& [n, g] : c->golden) timings().bytes_loaded += g.value.bytes.size() + g.abs_terms.bytes.size();
  for (const auto& [n, t] : c->reference) timings().bytes_loaded += t.bytes.size();
  if (const std::string why = staleness(*c); !why.empty())
    throw std::runtime_error("stale fixture " + rc.file + ", case " + rc.name + ": " + why +
                             ". Fix: regenerate (numgate-generate; see README: Regenerating golden data)");
  cached_key = key;
  cached = std::move(c);
  return cached;
}

// ---- where the time goes ---------------------------------------------------------------

Timings& timings() {
  static Timings t;
  return t;
}
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace
ScopedTime::ScopedTime(double& into) : into_(into), start_(now_s()) {}
ScopedTime::~ScopedTime() { into_ += now_s() - start_; }

std::string timing_summary() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const Timings& t = timings();
  char line[256];
  std::snprintf(line, sizeof line,
                "replay time: fixture loading %.1f s (%.2f GB), device %.1f s, gate %.1f s; peak host memory %.2f GB",
                t.load, static_cast<double>(t.bytes_loaded) / 1e9, t.device, t.gate,
                static_cast<double>(ru.ru_maxrss) * 1024 / 1e9);
  return line;
}

// ---- running a pass on the device -------------------------------------------------------

Tensor output_like(const CaseData& c, const std::string& t) { return Tensor(c.spec.dtype, c.golden.at(t).value.shape); }

PassRun run_pass(const CaseData& c, const TargetPass& pass, const std::vector<std::string>& writes,
                 std::size_t offset_elems, unsigned char poison, const Precheck& precheck) {
  ScopedTime timed(timings().device);
  std::map<std::string, std::unique_ptr<DeviceBuffer>> bufs;
  DevicePtrs ptrs;
  for (const auto& n : c.input_names) {
    const Tensor& in = c.inputs.at(n);
    bufs[n] = std::make_unique<DeviceBuffer>(in.bytes.size(), offset_elems * dtype_size(in.dtype), DeviceBuffer::kNaNGuard);
    bufs[n]->upload(in.data());
    ptrs[n] = bufs[n]->data();
  }
  for (const auto& t : writes) {
    bufs[t] = std::make_unique<DeviceBuffer>(output_like(c, t).bytes.size(), offset_elems * dtype_size(c.spec.dtype));
    bufs[t]->poison(poison);
    ptrs[t] = bufs[t]->data();
  }
  if (precheck) cuda_check(precheck(c.spec, ptrs, nullptr), "the target's precheck of the case's inputs");
  const std::size_t ws_bytes = pass.workspace_bytes ? pass.workspace_bytes(c.spec) : 0;
  DeviceBuffer ws(std::max<std::size_t>(ws_bytes, 1), offset_elems * dtype_size(c.spec.dtype));
  ws.poison(0xFF);  // a kernel that reads workspace it did not write sees NaN
  cuda_check(pass.launch(Launch{c.spec, ptrs, ws.data(), ws_bytes, nullptr, {}}), "kernel launch");
  cuda_check(cudaDeviceSynchronize(), "kernel execution");

  PassRun run;
  for (const auto& t : writes) {
    Tensor out = output_like(c, t);
    const auto h = bufs[t]->download();
    std::memcpy(out.data(), h.data(), h.size());
    run.outputs[t] = std::move(out);
  }
  for (const auto& [n, b] : bufs) {
    const std::string d = b->guard_damage();
    if (!d.empty()) run.problems.push_back(n + ": out-of-bounds " + d);
  }
  if (const std::string d = ws.guard_damage(); !d.empty()) run.problems.push_back("workspace: out-of-bounds " + d);
  for (const auto& n : c.input_names)
    if (bufs[n]->download() != c.inputs.at(n).bytes) run.problems.push_back("input " + n + " was modified");
  return run;
}

// First element whose bits differ between two launches (elements never written keep
// the poison, which differs between the two launches).
std::string first_bit_difference(const Tensor& a, const Tensor& b) {
  const std::size_t es = dtype_size(a.dtype);
  for (std::size_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.bytes.data() + i * es, b.bytes.data() + i * es, es) != 0)
      return "element " + unravel(static_cast<std::int64_t>(i), a.shape) + ": " + std::to_string(a.get(i)) +
             " after NaN poison vs " + std::to_string(b.get(i)) + " after 0x55 poison";
  return {};
}


// ---- the mutation matrix -------------------------------------------------------------------

std::map<std::string, MatrixOutcome>& matrix_outcomes() {
  static std::map<std::string, MatrixOutcome> m;
  return m;
}

void record_matrix_outcome(bool ok, const std::string& detail) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!info) return;
  MatrixOutcome& o = matrix_outcomes()[std::string(info->test_suite_name()) + "." + info->name()];
  o.ok = o.ok && ok;
  if (!detail.empty()) o.detail += (o.detail.empty() ? "" : "; ") + detail;
}

std::vector<MatrixRow> matrix_rows() {
  using namespace numgate::matrix;
  std::vector<MatrixRow> rows;
  for (const auto& op : all_ops()) {
    // The ops of this report: selected, with a fixture case in the folders.
    if (!selected(op->name()) || cases_of(op->name()).empty()) continue;
    std::vector<CaseData> cases;  // committed fixture cases, then the small generated ones
    bool loaded = false;
    for (Class cls : kClasses) {
      for (const Entry& e : entries()) {
        if (e.op != op->name() || e.cls != cls) continue;
        MatrixRow row{e.op, class_name(cls), e.mutant, e.where == Where::cpu ? "CPU" : "GPU", check_name(e.check), "", ""};
        if (e.where == Where::cpu && e.outputs) {
          if (!loaded) {
            try {
              for (const ReplayCase& rc : cases_of(e.op))
                if (!rc.production) cases.push_back(read_case(rc.file, rc.name));
              for (auto& c : materialize_small_generated(*op, kSmallGeneratedCaseElements)) cases.push_back(std::move(c));
            } catch (const std::exception& ex) {
              row.detail = std::string("cases could not be read: ") + ex.what();
            }
            loaded = true;
          }
          const Outcome o = run_cpu_entry(e, cases);
          const bool legit = e.check == Check::passes;
          row.status = o.caught ? (legit ? kMatrixPasses : kMatrixCaught) : (legit ? kMatrixFalseFail : kMatrixNotCaught);
          row.detail = (row.detail.empty() ? "" : row.detail + "; ") + "FAIL on " + std::to_string(o.failed) + " of " +
                       std::to_string(o.cases) + " cases; " + o.detail;
        } else if (e.where == Where::cpu) {
          row.status = kMatrixNotRun;
          row.detail = "proven by " + e.proof + " (cpu.unit)";
        } else {
          // The proof test: it must exist; one that ran and failed, or passed without
          // recording an outcome, did not prove the entry.
          const ::testing::TestInfo* info = nullptr;
          const auto* unit = ::testing::UnitTest::GetInstance();
          for (int i = 0; i < unit->total_test_suite_count() && !info; ++i) {
            const auto* suite = unit->GetTestSuite(i);
            for (int j = 0; j < suite->total_test_count() && !info; ++j)
              if (std::string(suite->name()) + "." + suite->GetTestInfo(j)->name() == e.proof)
                info = suite->GetTestInfo(j);
          }
          const auto it = matrix_outcomes().find(e.proof);
          if (!info) {
            row.status = kMatrixNotCaught;
            row.detail = "no test " + e.proof + " in numgate_replay";
          } else if (it == matrix_outcomes().end() && info->result()->Failed()) {
            row.status = e.check == Check::passes ? kMatrixFalseFail : kMatrixNotCaught;
            row.detail = e.proof + " failed before recording an outcome";
          } else if (it == matrix_outcomes().end() && info->should_run() && info->result()->Passed() &&
                     !info->result()->Skipped()) {
            row.status = kMatrixNotCaught;
            row.detail = e.proof + " passed without recording an outcome";
          } else if (it == matrix_outcomes().end()) {
            row.status = kMatrixNotRun;
            row.detail = e.proof + " did not run (" +
                         (!config().have_device ? config().no_device_reason
                          : info->result()->Skipped() ? std::string("skipped: no case of the kind, or not selected")
                                                      : std::string("filtered out")) +
                         ")";
          } else {
            const bool legit = e.check == Check::passes;
            row.status = it->second.ok ? (legit ? kMatrixPasses : kMatrixCaught) : (legit ? kMatrixFalseFail : kMatrixNotCaught);
            row.detail = e.proof + ": " + it->second.detail;
          }
        }
        rows.push_back(std::move(row));
      }
      for (const Reason& r : reasons())
        if (r.op == op->name() && r.cls == cls)
          rows.push_back({r.op, class_name(cls), "", "", "", r.applies ? kMatrixNotCovered : kMatrixNotApplicable, r.why});
    }
  }
  return rows;
}

TargetRunner pass_runner(const TargetPass& pass, const std::vector<std::string>& writes, std::size_t offset_elems,
                         const Precheck& precheck) {
  return [&pass, writes, offset_elems, precheck](const CaseData& cd) {
    PassRun run = run_pass(cd, pass, writes, offset_elems, 0xFF, precheck);
    if (!run.problems.empty()) throw std::runtime_error(cd.spec.name + ": " + run.problems.front());
    return std::move(run.outputs);
  };
}

GatedLaunches gate_launches(const CaseData& c, const TargetPass& pass, const std::vector<std::string>& writes,
                            const Precheck& precheck, const std::string& label) {
  const int n = pass.deterministic ? 2 : kNondeterministicLaunches;
  std::vector<PassRun> runs;
  for (int i = 0; i < n; ++i) runs.push_back(run_pass(c, pass, writes, 0, i % 2 == 0 ? 0xFF : 0x55, precheck));
  GatedLaunches out;
  for (const PassRun& r : runs) out.problems.insert(out.problems.end(), r.problems.begin(), r.problems.end());
  int differing = 0, max_distinct = 1;
  // With the order evidence and, for a gate not valid, the length sweep, whose runner
  // launches the pass on each sweep case (numgate/gate.h).
  const CaseGate gate(find_op(c.op), c, pass_runner(pass, writes, 0, precheck));
  for (const auto& t : writes) {
    // Bitwise-distinct results, in launch order.
    std::vector<const Tensor*> distinct;
    for (const PassRun& r : runs) {
      const Tensor& o = r.outputs.at(t);
      if (std::none_of(distinct.begin(), distinct.end(), [&](const Tensor* d) { return d->bytes == o.bytes; }))
        distinct.push_back(&o);
    }
    GateResult worst;
    bool first = true;
    for (const Tensor* d : distinct) {
      GateResult g;
      {
        ScopedTime timed(timings().gate);
        g = gate(t, d);
      }
      const bool worse = first || combine(worst.verdict, g.verdict) != worst.verdict ||
                         (g.verdict == worst.verdict && g.target_error > worst.target_error);
      if (worse) worst = g;
      first = false;
    }
    // The largest difference between two launches, over the elements finite in every launch.
    double spread = 0;
    std::int64_t spread_ulp = 0;
    if (distinct.size() > 1) {
      const std::size_t numel = distinct.front()->numel();
      for (std::size_t i = 0; i < numel; ++i) {
        double lo = distinct.front()->get(i), hi = lo;
        bool finite = std::isfinite(lo);
        for (const Tensor* d : distinct) {
          const double v = d->get(i);
          finite = finite && std::isfinite(v);
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
        if (!finite) continue;
        spread = std::max(spread, hi - lo);  // the largest absolute and the largest ULP spread,
        spread_ulp = std::max(spread_ulp, ulp_distance(lo, hi, c.spec.dtype));  // each over all elements
      }
      ++differing;
      if (pass.deterministic) {
        worst.verdict = Verdict::fail;  // unwritten or racy: never a pass
        out.failures.push_back("tensor " + t + ": two launches differ bitwise (element never written, or a race): " +
                               first_bit_difference(runs[0].outputs.at(t), runs[1].outputs.at(t)));
      }
    }
    max_distinct = std::max<int>(max_distinct, static_cast<int>(distinct.size()));
    worst.deterministic = pass.deterministic;
    worst.launches = n;
    worst.distinct_results = static_cast<int>(distinct.size());
    worst.launch_spread = spread;
    worst.launch_spread_ulp = spread_ulp;
    if (!out.problems.empty()) worst.verdict = Verdict::fail;  // out-of-bounds or modified input
    out.results[t] = worst;
  }
  std::string launches;  // what the launches showed, said as it is
  if (pass.deterministic && differing == 0)
    launches = ", bitwise identical across 2 launches (NaN / 0x55 poison)";
  else if (pass.deterministic)
    launches = ", NOT reproducible: " + std::to_string(differing) +
               " tensor(s) differ bitwise between 2 launches of a pass declared deterministic (an unwritten "
               "element or a race): FAIL";
  else
    launches = ", declared nondeterministic: " + std::to_string(n) + " launches (NaN / 0x55 poison alternating), " +
               std::to_string(differing) + " of " + std::to_string(writes.size()) +
               " tensor(s) differ between launches (at most " + std::to_string(max_distinct) +
               " distinct results), every distinct result gated";
  out.note = label + (out.problems.empty() ? ": guard bands and inputs intact" : ": MEMORY PROBLEMS") + launches;
  return out;
}

}  // namespace numgate::testing
