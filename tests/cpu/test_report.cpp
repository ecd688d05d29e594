// The report as a library: report.json written and read back exactly, refusals that name
// the file and field, merging per-op reports, and the benchmark's console lines and JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_json.h"
#include "numgate/report.h"

namespace numgate {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A fresh, empty folder under the test temp dir.
std::string fresh_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("numgate_report_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

Gate1Report gate1(const std::string& op, const std::string& impl, Verdict v) {
  Gate1Report g;
  g.op = op;
  g.implementation = impl;
  if (v == Verdict::not_run) {
    g.not_run_reason = "no CUDA device";
    return g;
  }
  g.cases = 19;
  g.elements = 40961;
  g.directions = 24;
  g.excluded = 3;
  g.worst_ratio = v == Verdict::fail ? 7.25 : 0.242742;
  g.worst = op + "/bf16_3x257_seed3 dx (d/dx, " + impl + "): full VJP, 771 elements; worst ... PASS\n";
  if (v == Verdict::fail) g.failures = {op + "/fp32_2x67 dx (d/dx, target): worst |FD - target| 1.2 <= tol 0.17: FAIL"};
  return g;
}

GateResult tensor(const std::string& name, Verdict v) {
  GateResult t;
  t.tensor = name;
  t.shape = {3, 257};
  t.params.ulp_limit = -1;
  t.target_ran = v != Verdict::not_run;
  t.golden_scale = 4.122533214092255;
  t.reference_error = 0.0071238232895731926;
  t.target_error = 0.08815425783395767;
  t.rounding_floor = 0.0071238232895731926;
  t.absolute_floor = 0.0071238232895731926;
  t.threshold = 0.021371469868719578;
  t.reference_relative_error = 0.0017280208393931389;
  t.condition = 1.0;
  t.gate_valid = true;
  t.worst_index = 123;
  t.worst_golden = -3.3962207431346178;
  t.worst_reference = -3.390625;
  t.worst_target = -3.484375;
  // The length sweep's figures (a not-valid gate's fallback) round-trip as well.
  t.sweep_lengths = {1024, 512, 256, 128};
  t.sweep_seeds = 4;
  t.target_growth = 0.4812345678901234;
  t.legitimate_growth = 0.6191722584;
  t.bias_compared = true;
  t.bias_units = 128;
  t.target_bias = 0.0091641;
  t.legitimate_bias = 0.0122;
  t.sweep_unavailable = "";
  t.decided_by = "conditioning envelope and order evidence and length sweep (noise)";
  t.verdict = v;
  return t;
}

CaseReport case_report(const std::string& op, const std::string& file, const std::string& name, DType dt,
                       std::vector<GateResult> tensors) {
  CaseReport c;
  c.op = op;
  c.file = file;
  c.spec.name = name;
  c.spec.dtype = dt;
  c.spec.shape = {3, 257};
  c.spec.seed = 3;
  c.spec.pattern = "normal";
  c.spec.description = "odd hidden size";
  c.tensors = std::move(tensors);
  return c;
}

/// Every verdict, every kind of double (NaN of both signs, infinities, -0, subnormal,
/// extremes), ULP counts, structure messages, op parameters in declaration order, notes
/// and strings that need escaping.
Report full_report() {
  Report r;
  r.device = "NVIDIA H200 (sm_90)";
  r.not_run = {"ReplayMutants: filtered out"};
  r.not_covered = {"FP64 gradcheck", "strided inputs"};

  CaseReport a = case_report("rmsnorm", "golden_data/rmsnorm.h5", "bf16_3x257_seed3", DType::bf16,
                             {tensor("y", Verdict::pass), tensor("dx", Verdict::pass_with_limitations),
                              tensor("dw", Verdict::fail)});
  a.spec.params = {{"eps", 1e-6}, {"alpha", -0.0}, {"beta", 5e-324}};  // not alphabetical on purpose
  a.spec.gate.fudge_factor = 2.0;
  a.spec.gate.project_atol = 1e-300;
  a.spec.gate.tensor_ulp_limits = {{"residual_out", 0}};
  a.notes = {"bitwise reproducible across 2 launches", "quote \" backslash \\ newline \n tab \t end",
             "UTF-8: \xc3\xa9 \xe2\x80\x94"};
  a.tensors[2].target_structure = {false, "NaN expected at [1, 2] (flat 259), target 1.5"};
  a.tensors[2].reference_structure = {false, "+Inf expected at [0, 0]"};
  a.tensors[2].target_error = kInf;
  a.tensors[2].threshold = -kInf;
  a.tensors[1].condition = kNaN;
  a.tensors[1].reference_relative_error = -kNaN;
  a.tensors[1].reference_in_envelope = true;
  a.tensors[1].target_in_envelope = false;
  a.tensors[0].worst_golden = DBL_MAX;
  a.tensors[0].worst_reference = -DBL_MIN;
  a.tensors[0].worst_target = DBL_TRUE_MIN;
  a.tensors[0].golden_scale = -0.0;
  a.tensors[2].deterministic = false;  // a nondeterministic pass: 5 launches, 3 distinct results
  a.tensors[2].launches = 5;
  a.tensors[2].distinct_results = 3;
  a.tensors[2].launch_spread = 1.1920928955078125e-07;
  a.tensors[2].launch_spread_ulp = 2;

  CaseReport b = case_report("swiglu", "build/golden_data/swiglu_production.h5", "fp16_4x512x12288_seed5",
                             DType::fp16, {tensor("y", Verdict::inconclusive), tensor("da", Verdict::not_run)});
  b.spec.production = true;
  b.spec.seed = 18446744073709551615ull;  // the largest seed
  b.spec.gate.ulp_limit = 1;
  b.spec.shape = {4, 512, 12288};
  for (auto& t : b.tensors) {
    t.params.ulp_limit = 1;
    t.ulp_counts = {25165000, 824, 0, 0};
    t.max_ulp = 1;
    t.max_ulp_index = 7;
    t.shape = {4, 512, 12288};
  }
  b.tensors[1].ulp_counts = {0, 0, 0, 0};
  b.tensors[1].max_ulp = -1;
  b.tensors[1].max_ulp_index = -1;
  b.tensors[1].worst_index = -1;

  CaseReport none = case_report("softmax", "golden_data/softmax.h5", "fp32_2x3_seed1", DType::fp32, {});
  none.notes = {"replay threw: illegal address"};

  r.cases = {a, b, none};
  r.gate1 = {gate1("rmsnorm", kGate1Golden, Verdict::pass), gate1("rmsnorm", kGate1Target, Verdict::fail),
             gate1("softmax", kGate1Golden, Verdict::pass), gate1("softmax", kGate1Target, Verdict::not_run),
             gate1("swiglu", kGate1Golden, Verdict::pass), gate1("swiglu", kGate1Target, Verdict::pass)};
  r.matrix = {{"rmsnorm", "epsilon placement", "eps_outside_sqrt", "CPU", "max-abs gate", kMatrixCaught,
               "FAIL on 6 of 21 cases; bf16_1x1_seed10, dx: max-abs gate"},
              {"rmsnorm", "RNG stream", "", "", "", kMatrixNotApplicable, "no op draws random numbers"},
              {"softmax", "reduction order", "FP32 sums \"reversed\"", "CPU", "passes (legitimate)", kMatrixNotRun,
               "proven by LegitimateVariation.X (cpu.unit)"}};
  SweepReport s;
  s.op = "rmsnorm";
  s.seeds = 1000;
  s.shapes = 21;
  s.tensors = 3000;
  SweepReport t = s;
  t.op = "softmax";
  t.fail = 1;
  t.fail_decidable = 1;
  t.first_failure = "case x, tensor y: FAIL\n  decidable rounding: ...";
  r.sweep = {s, t};
  return r;
}

Report round_trip(const Report& r, const std::string& dir_name) {
  const std::string dir = fresh_dir(dir_name);
  write_report(r, dir);
  return read_report(dir + "/report.json");
}

// ---- round trip ------------------------------------------------------------------------

TEST(Report, RoundTripGivesAnEqualReport) {
  const Report r = full_report();
  const std::string dir = fresh_dir("round_trip");
  write_report(r, dir);
  const Report back = read_report(dir + "/report.json");
  EXPECT_EQ(report_difference(r, back), "");
  EXPECT_EQ(to_markdown(back), to_markdown(r));
  EXPECT_EQ(slurp(dir + "/report.md"), to_markdown(r));
  EXPECT_EQ(back.overall(), Verdict::fail);
  // Written again, the read-back report gives the same bytes.
  const std::string again = fresh_dir("round_trip_again");
  write_report(back, again);
  EXPECT_EQ(slurp(again + "/report.json"), slurp(dir + "/report.json"));
  // The schema version is the first key and an integer.
  const std::string text = slurp(dir + "/report.json");
  EXPECT_EQ(text.rfind("{\n  \"schema_version\": 6,", 0), 0u) << text.substr(0, 80);
}

TEST(Report, NonFiniteDoublesAreStoredAsStrings) {
  const std::string dir = fresh_dir("nonfinite");
  write_report(full_report(), dir);
  const json j = json::parse(slurp(dir + "/report.json"));
  const json& t = j.at("cases").at(0).at("tensors");
  EXPECT_EQ(t.at(2).at("target_error"), "inf");
  EXPECT_EQ(t.at(2).at("threshold"), "-inf");
  EXPECT_EQ(t.at(1).at("condition"), "nan");
  EXPECT_EQ(t.at(1).at("reference_relative_error"), "-nan");
  const Report back = read_report(dir + "/report.json");
  EXPECT_TRUE(std::isnan(back.cases[0].tensors[1].condition));
  EXPECT_FALSE(std::signbit(back.cases[0].tensors[1].condition));
  EXPECT_TRUE(std::signbit(back.cases[0].tensors[1].reference_relative_error));
  EXPECT_TRUE(std::signbit(back.cases[0].tensors[0].golden_scale));  // -0.0 kept
}

TEST(Report, EveryVerdictRoundTripsByName) {
  const std::string dir = fresh_dir("verdicts");
  write_report(full_report(), dir);
  const json j = json::parse(slurp(dir + "/report.json"));
  std::vector<std::string> names;
  for (const auto& c : j.at("cases"))
    for (const auto& t : c.at("tensors")) names.push_back(t.at("verdict").get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"PASS", "PASS WITH LIMITATIONS", "FAIL", "INCONCLUSIVE", "NOT RUN"}));
  EXPECT_EQ(j.at("cases").at(0).at("verdict"), "FAIL");
  EXPECT_EQ(j.at("overall_verdict"), "FAIL");
  const Report back = read_report(dir + "/report.json");
  EXPECT_EQ(back.cases[1].tensors[0].verdict, Verdict::inconclusive);
  EXPECT_EQ(back.cases[1].tensors[1].verdict, Verdict::not_run);
  EXPECT_EQ(back.cases[0].tensors[1].verdict, Verdict::pass_with_limitations);
}

TEST(Report, RandomDoublesRoundTripBitForBit) {
  // 20,000 random bit patterns (every exponent, subnormals included) through every
  // double field kind: shortest-form JSON numbers must parse back to the same bits.
  std::mt19937_64 rng(12345);
  Report r;
  r.device = "d";
  CaseReport c = case_report("op", "f.h5", "c", DType::fp32, {});
  for (int i = 0; i < 2000; ++i) {
    GateResult t = tensor("t" + std::to_string(i), Verdict::pass);
    double* fields[] = {&t.golden_scale, &t.reference_error, &t.target_error, &t.rounding_floor,
                        &t.absolute_floor, &t.threshold, &t.reference_relative_error, &t.condition,
                        &t.worst_golden, &t.worst_target, &t.launch_spread};
    for (double* f : fields) {
      const std::uint64_t bits = rng();
      std::memcpy(f, &bits, sizeof bits);
      if (!std::isfinite(*f)) *f = std::ldexp(static_cast<double>(bits >> 11), -1074);  // a subnormal or small
    }
    c.tensors.push_back(t);
  }
  r.cases = {c};
  const Report back = round_trip(r, "random_doubles");
  EXPECT_EQ(report_difference(r, back), "");
}

TEST(Report, DifferenceSeesOneBitAndTheSignOfNaN) {
  // report_difference is what the round-trip tests rely on: it must see a one-ulp change,
  // -0 vs +0, and the sign of a NaN, and name the field.
  const Report r = full_report();
  Report s = r;
  s.cases[0].tensors[1].threshold = std::nextafter(s.cases[0].tensors[1].threshold, 1.0);
  EXPECT_NE(report_difference(r, s).find("cases[0].tensors[1].threshold"), std::string::npos);
  s = r;
  s.cases[0].tensors[0].golden_scale = 0.0;
  EXPECT_NE(report_difference(r, s).find("golden_scale"), std::string::npos);
  s = r;
  s.cases[0].tensors[1].condition = -kNaN;
  EXPECT_NE(report_difference(r, s).find("condition"), std::string::npos);
  s = r;
  std::swap(s.cases[0].spec.params[0], s.cases[0].spec.params[1]);
  EXPECT_NE(report_difference(r, s).find("spec.params[0].name"), std::string::npos);
  s = r;
  s.cases[1].tensors[0].ulp_counts[1] += 1;
  EXPECT_NE(report_difference(r, s).find("ulp_counts"), std::string::npos);
}

// ---- refusals --------------------------------------------------------------------------

/// Writes the full report, applies `damage` to its JSON, and returns the ReportError that
/// read_report raises (fails the test when it raises none).
ReportError refusal(const std::string& name, const std::function<void(json&)>& damage) {
  const std::string dir = fresh_dir("damaged_" + name);
  write_report(full_report(), dir);
  json j = json::parse(slurp(dir + "/report.json"));
  damage(j);
  spit(dir + "/report.json", j.dump(1));
  try {
    read_report(dir + "/report.json");
  } catch (const ReportError& e) {
    EXPECT_EQ(e.file(), dir + "/report.json");
    EXPECT_NE(std::string(e.what()).find(dir + "/report.json"), std::string::npos) << e.what();
    return e;
  }
  ADD_FAILURE() << name << ": damaged report was accepted";
  return ReportError("", "", "");
}

void expect_refused(const std::string& name, const std::string& pointer, const std::string& says,
                    const std::function<void(json&)>& damage) {
  const ReportError e = refusal(name, damage);
  EXPECT_EQ(e.field(), pointer) << name << ": " << e.what();
  EXPECT_NE(std::string(e.what()).find(pointer), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << name << ": " << e.what();
  EXPECT_NE(std::string(e.what()).find("re-running the replay"), std::string::npos) << e.what();  // the fix
}

TEST(Report, RefusesAMissingFileNamingIt) {
  const std::string path = fresh_dir("missing") + "/report.json";
  try {
    read_report(path);
    FAIL() << "missing file accepted";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Run the replay first"), std::string::npos) << e.what();
  }
}

TEST(Report, RefusesADirectory) {
  const std::string dir = fresh_dir("is_dir");
  EXPECT_THROW(read_report(dir), ReportError);
}

TEST(Report, RefusesInvalidJson) {
  const std::string dir = fresh_dir("bad_json");
  write_report(full_report(), dir);
  const std::string text = slurp(dir + "/report.json");
  spit(dir + "/report.json", text.substr(0, text.size() / 2));  // truncated
  try {
    read_report(dir + "/report.json");
    FAIL() << "truncated JSON accepted";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.field(), "");
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  spit(dir + "/report.json", "");
  EXPECT_THROW(read_report(dir + "/report.json"), ReportError);
}

TEST(Report, RefusesASchemaVersionItDoesNotRead) {
  expect_refused("schema1", "/schema_version", "version 1 is not read", [](json& j) { j["schema_version"] = 1; });
  expect_refused("schema2", "/schema_version", "version 2 is not read", [](json& j) { j["schema_version"] = 2; });
  expect_refused("schema3", "/schema_version", "version 3 is not read", [](json& j) { j["schema_version"] = 3; });
  expect_refused("schema4", "/schema_version", "version 4 is not read", [](json& j) { j["schema_version"] = 4; });
  expect_refused("schema5", "/schema_version", "version 5 is not read", [](json& j) { j["schema_version"] = 5; });
  expect_refused("schema7", "/schema_version", "version 7 is not read", [](json& j) { j["schema_version"] = 7; });
  expect_refused("schema0", "/schema_version", "version 0 is not read", [](json& j) { j["schema_version"] = 0; });
  expect_refused("schema_str", "/schema_version", "expected an integer", [](json& j) { j["schema_version"] = "2"; });
  expect_refused("schema_missing", "/schema_version", "missing", [](json& j) { j.erase("schema_version"); });
  expect_refused("not_object", "", "expected an object", [](json& j) { j = json::array({1, 2}); });
}

TEST(Report, RefusesAFieldOfTheWrongTypeNamingIt) {
  expect_refused("threshold_str", "/cases/0/tensors/1/threshold", "expected a number",
                 [](json& j) { j["cases"][0]["tensors"][1]["threshold"] = "abc"; });
  expect_refused("threshold_bool", "/cases/0/tensors/1/threshold", "found boolean",
                 [](json& j) { j["cases"][0]["tensors"][1]["threshold"] = true; });
  expect_refused("seed_negative", "/cases/1/seed", "expected a non-negative integer",
                 [](json& j) { j["cases"][1]["seed"] = -1; });
  expect_refused("max_ulp_float", "/cases/1/tensors/0/max_ulp", "expected an integer",
                 [](json& j) { j["cases"][1]["tensors"][0]["max_ulp"] = 1.5; });
  expect_refused("device_number", "/device", "expected a string", [](json& j) { j["device"] = 7; });
  expect_refused("cases_object", "/cases", "expected an array", [](json& j) { j["cases"] = json::object(); });
  expect_refused("note_number", "/cases/0/notes/1", "expected a string", [](json& j) { j["cases"][0]["notes"][1] = 3; });
  expect_refused("gate_valid_str", "/cases/0/tensors/0/gate_valid", "true or false",
                 [](json& j) { j["cases"][0]["tensors"][0]["gate_valid"] = "yes"; });
  expect_refused("ulp_limit_in_map", "/cases/0/gate_params/tensor_ulp_limits/residual_out", "expected an integer",
                 [](json& j) { j["cases"][0]["gate_params"]["tensor_ulp_limits"]["residual_out"] = "0"; });
  expect_refused("param_value", "/cases/0/params/2/value", "expected a number",
                 [](json& j) { j["cases"][0]["params"][2]["value"] = nullptr; });
  expect_refused("ulp_limit_range", "/cases/0/gate_params/ulp_limit", "out of range",
                 [](json& j) { j["cases"][0]["gate_params"]["ulp_limit"] = 4294967296ll; });
}

TEST(Report, RefusesAMissingField) {
  expect_refused("no_gate_valid", "/cases/0/tensors/2/gate_valid", "missing",
                 [](json& j) { j["cases"][0]["tensors"][2].erase("gate_valid"); });
  expect_refused("no_file", "/cases/1/file", "missing", [](json& j) { j["cases"][1].erase("file"); });
  expect_refused("no_target_structure_message", "/cases/0/tensors/0/target_structure/message", "missing",
                 [](json& j) { j["cases"][0]["tensors"][0]["target_structure"].erase("message"); });
  expect_refused("no_not_run", "/not_run", "missing", [](json& j) { j.erase("not_run"); });
  expect_refused("no_gate1", "/gate1", "missing", [](json& j) { j.erase("gate1"); });
  expect_refused("no_gate1_elements", "/gate1/1/elements", "missing", [](json& j) { j["gate1"][1].erase("elements"); });
}

TEST(Report, RefusesAnEditedGate1Row) {
  expect_refused("gate1_verdict", "/gate1/1/verdict", "its cases and failures give \"FAIL\"",
                 [](json& j) { j["gate1"][1]["verdict"] = "PASS"; });
  // Failures deleted: the row says FAIL with none, and the overall verdict no longer follows.
  expect_refused("gate1_failures", "/gate1/1/verdict", "give \"PASS\"",
                 [](json& j) { j["gate1"][1]["failures"] = json::array(); });
  expect_refused("gate1_impl", "/gate1/0/implementation", "unknown implementation \"cpu\"",
                 [](json& j) { j["gate1"][0]["implementation"] = "cpu"; });
  expect_refused("gate1_cases", "/gate1/0/cases", "expected an integer", [](json& j) { j["gate1"][0]["cases"] = "19"; });
}

TEST(Report, RefusesUnknownNamesAndEditedVerdicts) {
  expect_refused("verdict_name", "/cases/0/tensors/0/verdict", "unknown verdict \"OK\"",
                 [](json& j) { j["cases"][0]["tensors"][0]["verdict"] = "OK"; });
  expect_refused("dtype_name", "/cases/0/dtype", "unknown dtype 'bfloat16'",
                 [](json& j) { j["cases"][0]["dtype"] = "bfloat16"; });
  expect_refused("ulp_counts_3", "/cases/1/tensors/0/ulp_counts", "expected 4 counts",
                 [](json& j) { j["cases"][1]["tensors"][0]["ulp_counts"].erase(3); });
  // A case verdict edited to PASS while a tensor says FAIL: the benchmark must not time it.
  expect_refused("case_verdict", "/cases/0/verdict", "its tensors' verdicts give \"FAIL\"",
                 [](json& j) { j["cases"][0]["verdict"] = "PASS"; });
  expect_refused("overall_verdict", "/overall_verdict", "the cases, gates 1 and 3, the sweep and the mutation matrix give \"FAIL\"",
                 [](json& j) { j["overall_verdict"] = "PASS"; });
}

// ---- writing ---------------------------------------------------------------------------

TEST(Report, AtomicWriteFailureKeepsWhatWasThereAndLeavesNoTemporary) {
  const std::string dir = fresh_dir("atomic");
  // Target path is a non-empty directory: the rename fails after the temporary was written.
  fs::create_directories(dir + "/report.json/keep");
  try {
    write_file_atomically(dir + "/report.json", "{}");
    FAIL() << "rename over a directory succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/report.json"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(dir + "/report.json/keep"));
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename(), "report.json") << "left behind: " << entry.path();
  // A missing folder is named too.
  EXPECT_THROW(write_file_atomically(dir + "/no/such/folder/x.json", "{}"), std::runtime_error);
  // And a successful write replaces the file whole.
  write_file_atomically(dir + "/ok.json", "first");
  write_file_atomically(dir + "/ok.json", "second");
  EXPECT_EQ(slurp(dir + "/ok.json"), "second");
}

// ---- merge -----------------------------------------------------------------------------

std::vector<Report> per_op_reports() {
  const Report full = full_report();
  Report a, b, c;
  a.device = b.device = c.device = full.device;
  a.cases = {full.cases[0]};
  a.not_run = {"ReplayMutants: filtered out", "rmsnorm: production fixtures missing"};
  a.not_covered = full.not_covered;
  b.cases = {full.cases[1]};
  b.not_run = {"ReplayMutants: filtered out"};
  b.not_covered = full.not_covered;
  c.cases = {full.cases[2], full.cases[0]};
  c.cases[1].file = "build/golden_data/rmsnorm_production.h5";
  c.cases[1].spec.name = "bf16_4x512x4096_seed101";
  c.not_covered = {"FP64 gradcheck", "strided inputs", "training-run gate"};
  a.gate1 = {full.gate1[1], full.gate1[0]};  // rmsnorm, not in order
  b.gate1 = {full.gate1[4], full.gate1[5]};
  c.gate1 = {full.gate1[2], full.gate1[3]};
  return {a, b, c};
}

TEST(Report, MergeIsIndependentOfTheOrderOfItsInputs) {
  std::vector<Report> in = per_op_reports();
  const Report first = merge_reports(in);
  ASSERT_EQ(first.cases.size(), 4u);
  // op, then file, then case name
  EXPECT_EQ(first.cases[0].file, "build/golden_data/rmsnorm_production.h5");
  EXPECT_EQ(first.cases[1].file, "golden_data/rmsnorm.h5");
  EXPECT_EQ(first.cases[2].op, "softmax");
  EXPECT_EQ(first.cases[3].op, "swiglu");
  EXPECT_EQ(first.not_run,
            (std::vector<std::string>{"ReplayMutants: filtered out", "rmsnorm: production fixtures missing"}));
  EXPECT_EQ(first.not_covered, (std::vector<std::string>{"FP64 gradcheck", "strided inputs", "training-run gate"}));
  EXPECT_EQ(first.overall(), Verdict::fail);
  std::vector<int> order = {0, 1, 2};
  int permutations = 0;
  do {
    std::vector<Report> p;
    for (int i : order) p.push_back(in[static_cast<std::size_t>(i)]);
    const Report m = merge_reports(p);
    EXPECT_EQ(report_difference(first, m), "") << "order " << order[0] << order[1] << order[2];
    EXPECT_EQ(to_markdown(m), to_markdown(first));
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 6);
  // Written and read back, the merged report is the same.
  EXPECT_EQ(report_difference(first, round_trip(first, "merged")), "");
}

TEST(Report, MergeRefusesACaseReportedTwice) {
  std::vector<Report> in = per_op_reports();
  in[1].cases.push_back(in[0].cases[0]);  // rmsnorm/bf16_3x257_seed3 again
  try {
    merge_reports(in, {"rmsnorm.json", "swiglu.json", "softmax.json"});
    FAIL() << "duplicate case merged";
  } catch (const ReportError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("rmsnorm/bf16_3x257_seed3 is reported twice"), std::string::npos) << w;
    EXPECT_NE(w.find("rmsnorm.json"), std::string::npos) << w;
    EXPECT_NE(w.find("swiglu.json"), std::string::npos) << w;
    EXPECT_EQ(e.file(), "swiglu.json");
    EXPECT_EQ(e.field(), "/cases/1");
  }
  // Twice within one input, too.
  Report one = per_op_reports()[0];
  one.cases.push_back(one.cases[0]);
  EXPECT_THROW(merge_reports({one}), ReportError);
}

TEST(Report, MergeRefusesAGate1RowReportedTwice) {
  std::vector<Report> in = per_op_reports();
  in[2].gate1.push_back(in[0].gate1[0]);  // rmsnorm's target gate 1 again
  try {
    merge_reports(in, {"rmsnorm.json", "swiglu.json", "softmax.json"});
    FAIL() << "duplicate gate-1 row merged";
  } catch (const ReportError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("gate 1 of rmsnorm (target) is reported twice"), std::string::npos) << w;
    EXPECT_NE(w.find("rmsnorm.json"), std::string::npos) << w;
    EXPECT_EQ(e.file(), "softmax.json");
    EXPECT_EQ(e.field(), "/gate1/2");
  }
}

// ---- gate 1 in the overall verdict -----------------------------------------------------

Report passing_report() {
  Report r;
  r.device = "NVIDIA H200 (sm_90)";
  r.cases = {case_report("rmsnorm", "golden_data/rmsnorm.h5", "bf16_3x257_seed3", DType::bf16,
                         {tensor("y", Verdict::pass)}),
             case_report(kNoOpProblems, "golden_data/stray.h5", "file golden_data/stray.h5", DType::fp32,
                         {tensor("(fixture)", Verdict::pass)})};
  r.gate1 = {gate1("rmsnorm", kGate1Golden, Verdict::pass), gate1("rmsnorm", kGate1Target, Verdict::pass)};
  return r;
}

TEST(Report, OverallVerdictIncludesTheMutationMatrixAndTheSweep) {
  Report r = passing_report();
  r.matrix = {{"rmsnorm", "cast timing", "m", "CPU", "decidable rounding", kMatrixCaught, ""},
              {"rmsnorm", "RNG stream", "", "", "", kMatrixNotApplicable, "none"},
              {"rmsnorm", "reduction order", "", "", "", kMatrixNotCovered, "no mutant yet"},
              {"rmsnorm", "atomic-add order", "g", "GPU", "max-abs gate", kMatrixNotRun, "no device"}};
  EXPECT_EQ(r.overall(), Verdict::pass);  // gaps and rows not run are reported, not failed
  for (const char* bad : {kMatrixNotCaught, kMatrixFalseFail}) {
    Report f = r;
    f.matrix[0].status = bad;
    EXPECT_EQ(f.overall(), Verdict::fail) << bad;
  }
  SweepReport s;
  s.op = "rmsnorm";
  s.seeds = 1000;
  s.tensors = 3000;
  r.sweep = {s};
  EXPECT_EQ(r.overall(), Verdict::pass);
  r.sweep[0].fail = 1;
  EXPECT_EQ(r.overall(), Verdict::fail);
  r.sweep[0].fail = 0;
  r.sweep[0].by_order_evidence = 1;  // beyond the max-abs threshold, passed by the order evidence
  r.sweep[0].by_length_sweep = 1;    // a gate not valid: the length sweep ran too
  r.sweep[0].order_evidence_worst_ratio = 19.3;
  EXPECT_EQ(r.sweep[0].verdict(), Verdict::pass_with_limitations);
  EXPECT_EQ(r.overall(), Verdict::pass_with_limitations);
  r.sweep[0].first_failure = "ERROR x";
  EXPECT_EQ(r.overall(), Verdict::fail);
  r.sweep[0].first_failure.clear();
  // Any FAIL, whatever rule decided it, is a FAIL of the row: there is no budget.
  r.sweep[0].fail = r.sweep[0].fail_max_abs = 1;
  EXPECT_EQ(r.sweep[0].verdict(), Verdict::fail);
  r.sweep[0].order_evidence_worst_ratio = 0;
  r.sweep[0].by_order_evidence = 0;
  r.sweep[0].by_length_sweep = 0;
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("## Mutation matrix"), std::string::npos) << md;
  EXPECT_NE(md.find("| rmsnorm | 1 caught | n/a | gap | 1 not run |"), std::string::npos) << md;  // classes as they come
  EXPECT_NE(md.find("| rmsnorm | 1000 | 0 | 3000 | 1 | 1 | 0 | 0 | 0 | 0 | 0 (0.000e+00) | 0 | FAIL |"), std::string::npos) << md;
  expect_refused("matrix_status", "/mutation_matrix/0/status", "unknown mutation-matrix status \"ok\"",
                 [](json& j) { j["mutation_matrix"][0]["status"] = "ok"; });
  expect_refused("sweep_verdict", "/sweep/1/verdict", "its counts give \"FAIL\"",
                 [](json& j) { j["sweep"][1]["verdict"] = "PASS"; });
  expect_refused("no_sweep", "/sweep", "missing", [](json& j) { j.erase("sweep"); });
  expect_refused("sweep_negative", "/sweep/0/fail", "cannot be negative", [](json& j) { j["sweep"][0]["fail"] = -1; });
  expect_refused("sweep_counts", "/sweep/1/by_order_evidence", "do not add up",
                 [](json& j) { j["sweep"][1]["by_order_evidence"] = 1000000000; });
  expect_refused("sweep_counts_length", "/sweep/1/by_order_evidence", "do not add up",
                 [](json& j) { j["sweep"][1]["by_length_sweep"] = 1000000000; });
}

TEST(Report, OverallVerdictIncludesGate1) {
  EXPECT_EQ(passing_report().overall(), Verdict::pass);  // no gate 1 asked of the no-op row
  Report failing = passing_report();
  failing.gate1[1] = gate1("rmsnorm", kGate1Target, Verdict::fail);
  EXPECT_EQ(failing.overall(), Verdict::fail);
  Report not_run = passing_report();
  not_run.gate1[1] = gate1("rmsnorm", kGate1Target, Verdict::not_run);
  EXPECT_EQ(not_run.overall(), Verdict::not_run);
  // A missing row counts as NOT RUN, and the summary says it is missing.
  Report missing = passing_report();
  missing.gate1.pop_back();
  EXPECT_EQ(missing.overall(), Verdict::not_run);
  EXPECT_NE(summary_table(missing).find("| rmsnorm | target | — | — | — | — | — | NOT RUN (missing) |"),
            std::string::npos)
      << summary_table(missing);
  missing.gate1.clear();
  EXPECT_EQ(missing.overall(), Verdict::not_run);
  // A report without cases never reads PASS, but its gate-1 FAIL shows.
  Report no_cases;
  no_cases.gate1 = {gate1("rmsnorm", kGate1Golden, Verdict::pass)};
  EXPECT_EQ(no_cases.overall(), Verdict::not_run);
  no_cases.gate1.push_back(gate1("rmsnorm", kGate1Target, Verdict::fail));
  EXPECT_EQ(no_cases.overall(), Verdict::fail);
  // A gate-1 row of an op without cases still counts.
  Report extra = passing_report();
  extra.gate1.push_back(gate1("softmax", kGate1Golden, Verdict::fail));
  EXPECT_EQ(extra.overall(), Verdict::fail);
  // Markdown: the section, the worst line, every failure.
  const std::string md = to_markdown(failing);
  EXPECT_NE(md.find("## Gate 1 (gradcheck)"), std::string::npos) << md;
  EXPECT_NE(md.find("- rmsnorm, target: FAIL; worst: rmsnorm/bf16_3x257_seed3 dx"), std::string::npos) << md;
  EXPECT_NE(md.find("  - FAIL: rmsnorm/fp32_2x67 dx"), std::string::npos) << md;
  EXPECT_NE(md.find("| rmsnorm | golden | 19 | 40961 | 24 | 3 | 2.427e-01 | PASS |"), std::string::npos) << md;
  EXPECT_EQ(report_difference(failing, round_trip(failing, "gate1_fail")), "");
}

TEST(Report, MergeRefusesDifferentDevices) {
  std::vector<Report> in = per_op_reports();
  in[2].device = "no CUDA device";
  try {
    merge_reports(in, {"a.json", "b.json", "c.json"});
    FAIL() << "reports of two devices merged";
  } catch (const ReportError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("NVIDIA H200 (sm_90)"), std::string::npos) << w;
    EXPECT_NE(w.find("no CUDA device"), std::string::npos) << w;
    EXPECT_NE(w.find("a.json"), std::string::npos) << w;
    EXPECT_NE(w.find("c.json"), std::string::npos) << w;
    EXPECT_EQ(e.field(), "/device");
  }
  EXPECT_THROW(merge_reports({}), ReportError);
}

TEST(Report, MergeCommandWritesTheSameReportWhateverTheArgumentOrder) {
  const std::string dir = fresh_dir("cli");
  const std::vector<Report> in = per_op_reports();
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::string d = dir + "/in" + std::to_string(i);
    write_report(in[i], d);
    paths.push_back(d + "/report.json");
  }
  const std::string exe = NUMGATE_REPORT_EXE;
  auto run = [&](const std::string& args) { return std::system((exe + " " + args + " > /dev/null 2>&1").c_str()); };
  ASSERT_EQ(run("--merge " + paths[0] + " " + paths[1] + " " + paths[2] + " --out-dir " + dir + "/m1"), 0);
  ASSERT_EQ(run("--merge " + paths[2] + " " + paths[0] + " " + paths[1] + " --out-dir " + dir + "/m2"), 0);
  EXPECT_EQ(slurp(dir + "/m1/report.md"), slurp(dir + "/m2/report.md"));
  EXPECT_EQ(slurp(dir + "/m1/report.json"), slurp(dir + "/m2/report.json"));
  EXPECT_EQ(report_difference(read_report(dir + "/m1/report.json"), merge_reports(in)), "");
  // Refusals: exit status 1 and nothing written.
  EXPECT_NE(run("--merge " + paths[0] + " " + paths[0] + " --out-dir " + dir + "/m3"), 0);
  EXPECT_FALSE(fs::exists(dir + "/m3"));
  EXPECT_NE(run("--merge " + dir + "/none.json --out-dir " + dir + "/m4"), 0);
  EXPECT_NE(run("--merge " + paths[0] + " --out-dir ''"), 0);
  EXPECT_FALSE(fs::exists(dir + "/m4"));
}

// ---- the benchmark's console lines and JSON --------------------------------------------

bench::Line bench_line() {
  bench::Line l;
  l.op = "softmax";
  l.pass = "Forward";
  l.case_name = "bf16_1x8x4096x4096_causal_seed40";
  l.dtype = DType::bf16;
  l.shape = {4, 8, 4096, 4096};
  l.scaled_from = {1, 8, 4096, 4096};
  l.duplicates = 2;
  l.rows = 131072;
  l.bytes = 2.0 * 2 * 4 * 8 * 4096.0 * 4096;
  l.median_us = 250.5;
  l.min_us = 248.25;
  return l;
}

TEST(Bench, ConsoleLineIsTheDocumentedFormat) {
  bench::DeviceInfo d{"NVIDIA H200", 60 * 1024 * 1024, 132, 4000.0};
  const bench::Line l = bench_line();
  EXPECT_EQ(bench::console_line(l, d),
            "bench softmax           forward  bf16 [4x8x4096x4096]  median 250.50 us  min 248.25 us  8572.8 GB/s  "
            "(214.3% of D2D copy 4000.0 GB/s)  case bf16_1x8x4096x4096_causal_seed40 (+2 more with this dtype, shape "
            "and parameters) (benchmark shape; numerics verified on that case at [1x8x4096x4096], same parameters)\n");
  bench::Line small = l;
  small.op = "cross_entropy";
  small.pass = "Backward";
  small.scaled_from.clear();
  small.duplicates = 0;
  small.rows = 100;
  small.case_name = "c";
  EXPECT_EQ(bench::console_line(small, d),
            "bench cross_entropy     backward bf16 [4x8x4096x4096]  median 250.50 us  min 248.25 us  8572.8 GB/s  "
            "(214.3% of D2D copy 4000.0 GB/s)  case c (latency-bound: 100 rows < 132 SMs)\n");
}

TEST(Bench, MedianOfOddAndEvenCounts) {
  std::vector<double> odd = {5.0, 1.0, 3.0};
  EXPECT_DOUBLE_EQ(bench::median_of(odd), 3.0);
  EXPECT_DOUBLE_EQ(odd.front(), 1.0);  // sorted in place: the event timing takes its minimum from the front
  std::vector<double> even = {4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(bench::median_of(even), 2.5);
  std::vector<double> none;
  EXPECT_THROW(bench::median_of(none), std::invalid_argument);
}

TEST(Bench, KernelClockSplitsTheWindowIntoLaunchesAndKeepsTheMeanAsKernelTime) {
  // Two activities per launch (a kernel and a memset), three launches, given out of order,
  // every duration distinct (groups taken round-robin would give other sums).
  const std::vector<bench::Activity> acts = {{3000, 3900}, {1000, 1500}, {0, 100}, {5000, 5300},
                                             {2000, 2200}, {5400, 5450}};
  const bench::KernelClockStats st = bench::summarize_kernel_clock(acts, 3);
  // Per launch: 100 + 500 = 600 ns, 200 + 900 = 1100 ns, 300 + 50 = 350 ns.
  EXPECT_DOUBLE_EQ(st.mean_us, (0.6 + 1.1 + 0.35) / 3);
  EXPECT_DOUBLE_EQ(st.median_us, 0.6);
  EXPECT_DOUBLE_EQ(st.span_us, 5.45 / 3);
  // The window ends at the latest end, not at the end of the last activity to start.
  EXPECT_DOUBLE_EQ(bench::summarize_kernel_clock({{0, 1500}, {500, 1000}}, 1).span_us, 1.5);
  // A record without timestamps (CUPTI: start = end = 0) counts 0 in the mean; no window, no median.
  const bench::KernelClockStats untimed =
      bench::summarize_kernel_clock({{0, 0}, {1700000000000000000ull, 1700000000000000400ull}}, 1);
  EXPECT_DOUBLE_EQ(untimed.mean_us, 0.4);
  EXPECT_LT(untimed.median_us, 0);
  EXPECT_LT(untimed.span_us, 0);
  // Even launches: the mean of the middle two.
  EXPECT_DOUBLE_EQ(bench::summarize_kernel_clock({{0, 100}, {200, 500}, {600, 1000}, {1000, 1800}}, 4).median_us,
                   0.35);
  // Activities that do not split evenly: no median, the mean and window still measured.
  const bench::KernelClockStats odd = bench::summarize_kernel_clock({{0, 100}, {100, 300}, {300, 400}}, 2);
  EXPECT_DOUBLE_EQ(odd.mean_us, 0.2);
  EXPECT_LT(odd.median_us, 0);
  EXPECT_DOUBLE_EQ(odd.span_us, 0.2);
  // Overlapping activities: the summed durations exceed the window.
  const bench::KernelClockStats ov = bench::summarize_kernel_clock({{0, 1000}, {500, 1500}}, 1);
  EXPECT_DOUBLE_EQ(ov.mean_us, 2.0);
  EXPECT_DOUBLE_EQ(ov.span_us, 1.5);
  const bench::KernelClockStats none = bench::summarize_kernel_clock({}, 5);
  EXPECT_LT(none.mean_us, 0);
  EXPECT_LT(none.span_us, 0);
  EXPECT_THROW(bench::summarize_kernel_clock({{0, 1}}, 0), std::invalid_argument);
  EXPECT_THROW(bench::summarize_kernel_clock({{10, 5}}, 1), std::invalid_argument);
}

TEST(Bench, ConsoleLineNamesAMedianOrWindowThatDisagreesWithTheKernelTime) {
  bench::DeviceInfo d{"NVIDIA H200", 60 * 1024 * 1024, 132, 4000.0};
  bench::Line l = bench_line();
  l.duplicates = 0;
  l.scaled_from.clear();
  l.kernel_us = 200.0;
  l.kernel_median_us = 201.9;  // within 1%: not named
  l.kernel_span_us = 205.0;
  const std::string base = "bench softmax           forward  bf16 [4x8x4096x4096]  median 250.50 us  min 248.25 us";
  const std::string tail = "  8572.8 GB/s  (214.3% of D2D copy 4000.0 GB/s)  case bf16_1x8x4096x4096_causal_seed40\n";
  EXPECT_EQ(bench::console_line(l, d), base + "  kernel 200.00 us" + tail);
  l.kernel_median_us = 197.0;  // 1.5% off: named
  EXPECT_EQ(bench::console_line(l, d), base + "  kernel 200.00 us (per-launch median 197.00 us)" + tail);
  l.kernel_median_us = 190.0;
  EXPECT_EQ(bench::console_line(l, d), base + "  kernel 200.00 us (per-launch median 190.00 us)" + tail);
  l.kernel_median_us = 200.0;
  l.kernel_span_us = 180.0;
  EXPECT_EQ(bench::console_line(l, d),
            base + "  kernel 200.00 us (window 180.00 us per launch < kernel time: activities overlap or records off)" + tail);
  // JSON: both fields, null where not measured.
  bench::Results r;
  r.have_device = true;
  r.device = {"NVIDIA H200", 62914560, 132, 4000.0};
  bench::Line unmeasured = bench_line();
  r.lines = {l, unmeasured};
  const std::string path = fresh_dir("bench_kc") + "/bench.json";
  bench::write_json(r, path);
  const json j = json::parse(slurp(path));
  EXPECT_EQ(j.at("results").at(0).at("kernel_median_us"), 200.0);
  EXPECT_EQ(j.at("results").at(0).at("kernel_span_us"), 180.0);
  EXPECT_TRUE(j.at("results").at(1).at("kernel_median_us").is_null());
  EXPECT_TRUE(j.at("results").at(1).at("kernel_span_us").is_null());
}

TEST(Bench, JsonHasEveryResultField) {
  bench::Results r;
  r.report = "build/report.json";
  r.iters = 200;
  r.warmup = 20;
  r.have_device = true;
  r.device = {"NVIDIA H200", 62914560, 132, 4000.0};
  bench::Line small = bench_line();
  small.rows = 64;
  small.scaled_from.clear();
  r.lines = {bench_line(), small};
  r.skipped = {"bench rmsnorm x: skipped: numerics not PASS (verdict FAIL)"};
  const std::string path = fresh_dir("bench") + "/bench.json";
  bench::write_json(r, path);
  const json j = json::parse(slurp(path));
  EXPECT_EQ(j.at("schema_version"), bench::kBenchSchemaVersion);
  EXPECT_EQ(j.at("status"), "ok");
  EXPECT_EQ(j.at("report"), "build/report.json");
  EXPECT_EQ(j.at("device").at("name"), "NVIDIA H200");
  EXPECT_EQ(j.at("device").at("sm_count"), 132);
  EXPECT_EQ(j.at("device").at("l2_bytes"), 62914560);
  EXPECT_EQ(j.at("device").at("d2d_copy_gbps"), 4000.0);
  ASSERT_EQ(j.at("results").size(), 2u);
  const json& e = j.at("results").at(0);
  EXPECT_EQ(e.at("op"), "softmax");
  EXPECT_EQ(e.at("pass"), "forward");
  EXPECT_EQ(e.at("dtype"), "bf16");
  EXPECT_EQ(e.at("shape"), json({4, 8, 4096, 4096}));
  EXPECT_EQ(e.at("case"), "bf16_1x8x4096x4096_causal_seed40");
  EXPECT_EQ(e.at("duplicates"), 2);
  EXPECT_EQ(e.at("median_us"), 250.5);
  EXPECT_EQ(e.at("min_us"), 248.25);
  const double gbps = bench_line().bytes / (250.5 * 1e3);
  EXPECT_EQ(e.at("gbps").get<double>(), gbps);
  EXPECT_EQ(e.at("fraction_of_d2d").get<double>(), gbps / 4000.0);
  EXPECT_EQ(e.at("latency_bound"), false);
  EXPECT_EQ(e.at("scaled_from"), json({1, 8, 4096, 4096}));
  EXPECT_EQ(j.at("results").at(1).at("latency_bound"), true);
  EXPECT_EQ(j.at("results").at(1).at("rows"), 64);
  EXPECT_TRUE(j.at("results").at(1).at("scaled_from").is_null());
  EXPECT_EQ(j.at("skipped"), json(r.skipped));

  // A run that ended early says so; a device never opened is null; non-finite numbers
  // (no D2D measurement) use the report's string encoding.
  bench::Results early;
  early.status = "nothing_to_do";
  early.message = "no CUDA device available";
  early.lines = {bench_line()};
  bench::write_json(early, path);
  const json k = json::parse(slurp(path));
  EXPECT_EQ(k.at("status"), "nothing_to_do");
  EXPECT_EQ(k.at("message"), "no CUDA device available");
  EXPECT_TRUE(k.at("device").is_null());
  EXPECT_EQ(k.at("results").at(0).at("fraction_of_d2d"), "inf");
}

// ---- the peer comparison (numgate-bench --peers, tools/bench_peers.py's JSON) ----------

bool has_substr(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

std::string peers_doc(const std::string& rows) {
  return R"({"schema_version": 1, "device": "NVIDIA H200", "rows": [)" + rows + "]}";
}
std::string peer_row(const std::string& peer, const std::string& pass, double us, bool same = true,
                     const std::string& params = R"({"eps": 1e-06})", const std::string& shape = "[4, 512, 4096]") {
  return R"({"op": "rmsnorm", "pass": ")" + pass + R"(", "dtype": "bf16", "shape": )" + shape + R"(, "params": )" +
         params + R"(, "peer": ")" + peer + R"(", "kernel_us": )" + std::to_string(us) +
         R"(, "same_semantics": )" + (same ? "true" : "false") + R"(, "note": ""})";
}
bench::Line rms_line(const std::string& pass, double kernel_us, double median_us, const std::string& variant = "") {
  bench::Line l;
  l.op = "rmsnorm";
  l.pass = pass;
  l.variant = variant;
  l.dtype = DType::bf16;
  l.shape = {4, 512, 4096};
  l.params = {{"eps", 1e-6}};
  l.kernel_us = kernel_us;
  l.median_us = median_us;
  return l;
}
bench::Peers peers_from(const std::string& text) {
  const std::string path = fresh_dir("peers") + "/peers.json";
  write_file_atomically(path, text);
  return bench::read_peers(path);
}

TEST(BenchPeers, TheFastestPeerOfTheSameSemanticsAtTheSameShapeAndParametersIsChosen) {
  const bench::Peers p = peers_from(peers_doc(
      peer_row("torch.compile", "forward", 10.6) + "," + peer_row("liger", "forward", 9.6) + "," +
      peer_row("liger_unmasked", "forward", 1.0, false) + "," +                      // other semantics: never chosen
      peer_row("other_eps", "forward", 2.0, true, R"({"eps": 1e-05})") + "," +      // other parameters
      peer_row("other_shape", "forward", 3.0, true, R"({"eps": 1e-06})", "[1, 8192, 4096]") + "," +
      peer_row("torch.compile", "backward", 38.1)));
  ASSERT_EQ(p.rows.size(), 6u);
  EXPECT_EQ(p.device, "NVIDIA H200");
  EXPECT_EQ(p.outputs, "reuse");  // a file without the field: bench_peers.py's default
  const std::string rotated = R"({"schema_version": 1, "outputs": "rotate", "rows": []})";
  EXPECT_EQ(peers_from(rotated).outputs, "rotate");
  EXPECT_EQ(p.launch, "per-call");  // a file without the field: bench_peers.py's default
  EXPECT_EQ(peers_from(R"({"schema_version": 1, "launch": "queued", "rows": []})").launch, "queued");
  EXPECT_EQ(p.ce_ignored_every, 7);  // a file without the field: the script then ignored every 7th token
  EXPECT_EQ(peers_from(R"({"schema_version": 1, "ce_ignored_every": 0, "rows": []})").ce_ignored_every, 0);
  const auto m = bench::compare_with_peers(rms_line("Forward", 9.0, 11.2), p);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->best.peer, "liger");
  EXPECT_DOUBLE_EQ(m->ratio, 9.0 / 9.6);
  EXPECT_DOUBLE_EQ(m->event_ratio, 11.2 / 9.6);
  EXPECT_TRUE(m->won);
  EXPECT_TRUE(m->counted);
  // Slower than the peer: lost; 1.004 prints as 1.00 (a tie, won); 1.006 as 1.01 (lost).
  EXPECT_FALSE(bench::compare_with_peers(rms_line("Backward", 40.0, 41.0), p)->won);
  EXPECT_TRUE(bench::compare_with_peers(rms_line("Backward", 38.1 * 1.004, 41.0), p)->won);
  EXPECT_FALSE(bench::compare_with_peers(rms_line("Backward", 38.1 * 1.006, 41.0), p)->won);
  // No kernel clock: the event median is compared.
  EXPECT_DOUBLE_EQ(bench::compare_with_peers(rms_line("Forward", -1, 12.0), p)->ratio, 12.0 / 9.6);
  // A parameter the peer row names but the line lacks: no match.
  bench::Line no_eps = rms_line("Forward", 9.0, 11.2);
  no_eps.params.clear();
  EXPECT_FALSE(bench::compare_with_peers(no_eps, p).has_value());
  // Another dtype: no match.
  bench::Line fp16 = rms_line("Forward", 9.0, 11.2);
  fp16.dtype = DType::fp16;
  EXPECT_FALSE(bench::compare_with_peers(fp16, p).has_value());
}

TEST(BenchPeers, VariantsAreComparedButOnlyTheMainTargetAndFusedAreCounted) {
  const bench::Peers p = peers_from(peers_doc(peer_row("liger", "forward", 10.0) + "," + peer_row("liger", "backward", 30.0) +
                                              "," + peer_row("liger", "fused", 100.0)));
  std::vector<bench::Line> lines = {rms_line("Forward", 9.0, 12.0), rms_line("Backward", 31.0, 33.0),
                                    rms_line("Forward", 8.0, 9.0, "tune_x"), rms_line("Backward", 90.0, 95.0, "fused")};
  lines.push_back(rms_line("Forward", 5.0, 5.0));
  lines.back().shape = {7, 7};  // no peer at this shape
  for (auto& l : lines) l.peer = bench::compare_with_peers(l, p);
  EXPECT_EQ(bench::peer_pass(lines[3]), "fused");
  ASSERT_TRUE(lines[3].peer.has_value());
  EXPECT_DOUBLE_EQ(lines[3].peer->best.kernel_us, 100.0);
  EXPECT_FALSE(lines[2].peer->counted);
  const bench::PeerSummary s = bench::summarize_peers(lines);
  EXPECT_EQ(s.won, 2);        // forward 9 < 10, fused 90 < 100
  EXPECT_EQ(s.lost, 1);       // backward 31 > 30
  EXPECT_EQ(s.event_won, 1);  // fused 95 < 100; forward's events 12 > 10
  EXPECT_EQ(s.no_peer, 1);
  EXPECT_EQ(bench::peer_line(lines[0]),
            "peer rmsnorm           forward  bf16 [4x512x4096]  numgate 9.00 us (events 12.00)  best peer liger 10.00 us  "
            "ratio 0.90 (events 1.20)  WON\n");
  EXPECT_EQ(bench::peer_line(lines[2]),
            "peer rmsnorm           forward [tune_x] bf16 [4x512x4096]  numgate 8.00 us (events 9.00)  best peer liger "
            "10.00 us  ratio 0.80 (events 0.90)  WON (variant: not counted)\n");
  EXPECT_EQ(bench::peer_line(lines[4]),
            "peer rmsnorm           forward  bf16 [7x7]  numgate 5.00 us (events 5.00)  no peer of the same semantics\n");
  EXPECT_EQ(bench::peer_summary_line(s),
            "peers: 2 of 3 rows won or tied (kernel time, the peers' method), 1 lost; by event-timed median 1 won; "
            "1 line(s) without a peer of the same semantics\n");

  // The JSON carries the comparison and the count.
  bench::Results r;
  r.have_device = true;
  r.device = {"NVIDIA H200", 62914560, 132, 4000.0};
  r.peers = p;
  r.kernel_clock = "cupti";
  r.lines = lines;
  const std::string path = fresh_dir("bench_peers") + "/bench.json";
  bench::write_json(r, path);
  const json j = json::parse(slurp(path));
  EXPECT_EQ(j.at("kernel_clock"), "cupti");
  EXPECT_EQ(j.at("peers").at("won"), 2);
  EXPECT_EQ(j.at("peers").at("lost"), 1);
  EXPECT_EQ(j.at("peers").at("no_peer"), 1);
  EXPECT_EQ(j.at("peers").at("outputs"), "reuse");  // the peers file's output handling, carried over
  EXPECT_EQ(j.at("outputs"), "rotate");             // numgate's own (Results' default)
  EXPECT_EQ(j.at("peers").at("same_outputs"), false);
  r.outputs = "reuse";
  bench::write_json(r, path);
  EXPECT_EQ(json::parse(slurp(path)).at("peers").at("same_outputs"), true);
  EXPECT_EQ(j.at("peers").at("launch"), "per-call");  // a peers file without the field: per call
  EXPECT_EQ(j.at("peers").at("ce_ignored_every"), 7);  // a peers file without the field: the old script's 7
  r.peers->ce_ignored_every = 3;
  bench::write_json(r, path);
  EXPECT_EQ(json::parse(slurp(path)).at("peers").at("ce_ignored_every"), 3);
  const json& e = j.at("results").at(3);
  EXPECT_EQ(e.at("variant"), "fused");
  EXPECT_EQ(e.at("pass"), "backward");
  EXPECT_EQ(e.at("params").at("eps"), 1e-6);
  EXPECT_EQ(e.at("kernel_us"), 90.0);
  EXPECT_EQ(e.at("peer").at("name"), "liger");
  EXPECT_EQ(e.at("peer").at("won"), true);
  EXPECT_TRUE(j.at("results").at(4).at("peer").is_null());
}

TEST(BenchPeers, NumgateWritesItsOutputsAsThePeersDidUnlessToldOtherwise) {
  bench::Peers reused;
  reused.file = "p.json";
  reused.device = "NVIDIA H200";
  reused.outputs = "reuse";
  reused.ce_ignored_every = 0;  // the script's default: the same targets as numgate-bench's
  bench::Peers rotated = reused;
  rotated.outputs = "rotate";
  // Not given: the peers file's handling (a symmetric comparison); no peers file: rotate.
  EXPECT_EQ(bench::choose_outputs("", reused), "reuse");
  EXPECT_EQ(bench::choose_outputs("", rotated), "rotate");
  EXPECT_EQ(bench::choose_outputs("", std::nullopt), "rotate");
  // Given: as given, whatever the peers did.
  EXPECT_EQ(bench::choose_outputs("rotate", reused), "rotate");
  EXPECT_EQ(bench::choose_outputs("reuse", std::nullopt), "reuse");
  EXPECT_THROW((void)bench::choose_outputs("keep", reused), std::invalid_argument);
  // The comparison's head says whether both sides wrote alike.
  EXPECT_EQ(bench::peers_header_line(reused, "reuse"),
            "bench peers: p.json (0 rows, device NVIDIA H200); outputs reuse on both sides; peers launched per call "
            "(the GPU idles where the host is slower)\n");
  EXPECT_EQ(bench::peers_header_line(reused, "rotate"),
            "bench peers: p.json (0 rows, device NVIDIA H200); numgate's outputs rotate, the peers' reuse: NOT the "
            "same handling (see --outputs); peers launched per call (the GPU idles where the host is slower)\n");
  bench::Peers queued = reused;
  queued.launch = "queued";
  EXPECT_EQ(bench::peers_header_line(queued, "reuse"),
            "bench peers: p.json (0 rows, device NVIDIA H200); outputs reuse on both sides; peers' calls queued (back "
            "to back, like numgate's)\n");
  // Cross-entropy targets with ignored tokens on the peers' side only: said on the head line.
  queued.ce_ignored_every = 7;
  EXPECT_EQ(bench::peers_header_line(queued, "reuse"),
            "bench peers: p.json (0 rows, device NVIDIA H200); outputs reuse on both sides; peers' calls queued (back "
            "to back, like numgate's); the peers' cross-entropy targets ignore one token in 7, numgate-bench's none: "
            "NOT the same inputs (see --ce-ignored-every)\n");
}

TEST(BenchPeers, AMalformedPeersFileIsRefusedNamingTheFileRowAndField) {
  auto error_of = [](const std::string& text) {
    try {
      (void)peers_from(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_PRED2(has_substr, error_of("{"), "is not JSON");
  EXPECT_PRED2(has_substr, error_of(R"({"schema_version": 2, "rows": []})"), "'schema_version' must be 1");
  EXPECT_PRED2(has_substr, error_of(R"({"schema_version": 1})"), "field 'rows'");
  EXPECT_PRED2(has_substr, error_of(R"({"schema_version": 1, "outputs": "keep", "rows": []})"), "field 'outputs'");
  EXPECT_PRED2(has_substr, error_of(R"({"schema_version": 1, "launch": "batched", "rows": []})"), "field 'launch'");
  EXPECT_PRED2(has_substr, error_of(R"({"schema_version": 1, "ce_ignored_every": -7, "rows": []})"),
               "field 'ce_ignored_every'");
  EXPECT_PRED2(has_substr, error_of(R"({"schema_version": 1, "ce_ignored_every": "7", "rows": []})"),
               "field 'ce_ignored_every'");
  EXPECT_PRED2(has_substr, error_of(peers_doc(peer_row("liger", "sideways", 1.0))), "rows[0]: field 'pass'");
  EXPECT_PRED2(has_substr, error_of(peers_doc(peer_row("liger", "forward", 1.0) + "," + peer_row("liger", "forward", -1.0))),
               "rows[1]: field 'kernel_us' must be a positive number");
  EXPECT_PRED2(has_substr, error_of(peers_doc(peer_row("liger", "forward", 1.0, true, R"({"eps": "x"})"))),
               "rows[0]: field 'params.eps' is not a number");
  EXPECT_PRED2(has_substr, error_of(peers_doc(R"({"op": "rmsnorm"})")), "rows[0]: field 'pass'");
  const std::string e = error_of(peers_doc(peer_row("liger", "forward", 1.0, true, R"({"eps": 1e-06})", "[-1]")));
  EXPECT_PRED2(has_substr, e, "peers.json");
  EXPECT_PRED2(has_substr, e, "tools/bench_peers.py");
  EXPECT_PRED2(has_substr, e, "field 'shape'");
  try {
    (void)bench::read_peers("/nonexistent/peers.json");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const std::runtime_error& x) {
    EXPECT_PRED2(has_substr, std::string(x.what()), "cannot be opened");
  }
}

}  // namespace
}  // namespace numgate
