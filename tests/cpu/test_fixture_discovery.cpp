// Fixture discovery (fixtures/include/numgate/fixture_discovery.h) on damaged fixture
// folders: every damage is one problem naming the file (and case / field where it
// applies) and a fix, nothing throws, nothing hangs. Then the real numgate_replay on a
// folder with damaged files: exit status 1, report and JUnit XML written, damage named.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "committed.h"
#include "numgate/fixture_discovery.h"
#include "numgate/fixture_file.h"
#include "numgate/op.h"

#ifndef NUMGATE_REPLAY_EXE
#error "NUMGATE_REPLAY_EXE must be defined by the build"
#endif

namespace numgate {
namespace {

namespace fs = std::filesystem;

// The smallest committed fixture: copies of it are the good (and damaged) files.
const std::string kGoodOp = "offset_rmsnorm";
fs::path good_source() { return fs::path(testing::golden_dir()) / (kGoodOp + ".h5"); }

std::vector<std::string> known_ops() {
  std::vector<std::string> v;
  for (const auto& op : all_ops()) v.push_back(op->name());
  return v;
}

// A fresh folder under the temp directory, removed at the end of the test.
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : dir_(fs::temp_directory_path() / ("numgate_discovery_" + std::to_string(::getpid())) / name) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::remove(dir_.parent_path(), ec);  // only when empty
  }
  const fs::path& dir() const { return dir_; }
  fs::path operator/(const std::string& n) const { return dir_ / n; }

 private:
  fs::path dir_;
};

void copy_good(const fs::path& to) { fs::copy_file(good_source(), to, fs::copy_options::overwrite_existing); }

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Replaces the int64 attribute `name` of the object `object` ("/" or "cases/<case>") by
// one holding `value`. Deleted and created again rather than written in place: identical
// attributes of a fixture may share one stored message, and an in-place write through one
// object was seen to change another's.
void patch_i64_attribute(const fs::path& p, const char* name, std::int64_t value, const std::string& object = "/") {
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << p;
  EXPECT_GE(H5Adelete_by_name(f, object.c_str(), name, H5P_DEFAULT), 0) << object << " " << name;
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(f, object.c_str(), name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT);
  EXPECT_GE(a, 0) << object << " " << name;
  if (a >= 0) {
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &value), 0);
    H5Aclose(a);
  }
  H5Sclose(space);
  H5Fclose(f);
}

// Deletes the link `link` (e.g. "cases/<case>/reference") of an HDF5 file.
void delete_link(const fs::path& p, const std::string& link) {
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << p;
  EXPECT_GE(H5Ldelete(f, link.c_str(), H5P_DEFAULT), 0) << link;
  H5Fclose(f);
}

FixtureDiscovery discover(const std::vector<fs::path>& dirs) {
  std::vector<FixtureFolder> folders;
  for (const auto& d : dirs) folders.push_back({d.string(), false});
  return discover_fixtures(folders, known_ops());
}

std::string all_messages(const FixtureDiscovery& d) {
  std::string s;
  for (const auto& p : d.problems) s += p.message() + "\n";
  return s;
}

// Exactly one problem, about `file`, whose message names the file, says `contains` and
// gives a fix.
const FixtureProblem& only_problem(const FixtureDiscovery& d, const fs::path& file, const std::string& contains) {
  static const FixtureProblem none;
  EXPECT_EQ(d.problems.size(), 1u) << all_messages(d);
  if (d.problems.empty()) return none;
  const FixtureProblem& p = d.problems.front();
  const std::string m = p.message();
  EXPECT_EQ(p.file, file.string()) << m;
  EXPECT_NE(m.find("'" + file.string() + "'"), std::string::npos) << "does not name the file: " << m;
  EXPECT_NE(m.find(contains), std::string::npos) << "does not say '" << contains << "': " << m;
  EXPECT_FALSE(p.fix.empty()) << "no fix: " << m;
  EXPECT_NE(m.find("Fix: "), std::string::npos) << m;
  return p;
}

TEST(FixtureDiscovery, CommittedFixturesHaveNoProblem) {
  // The control: the damaged-file tests below must not be failing on right input.
  const auto d = discover({testing::golden_dir()});
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  EXPECT_EQ(d.files.size(), all_ops().size());
  for (const auto& f : d.files) {
    EXPECT_FALSE(f.production) << f.path;
    EXPECT_EQ(fs::path(f.path).filename().string(), f.op + ".h5");
    EXPECT_FALSE(f.cases.empty()) << f.path;
    EXPECT_EQ(f.cases, read_fixture_info(f.path).cases) << f.path;
  }
}

TEST(FixtureDiscovery, GoodCopyAndProductionNameAreRead) {
  Scratch s("good");
  copy_good(s / (kGoodOp + "_production.h5"));
  const auto d = discover({s.dir()});
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  ASSERT_EQ(d.files.size(), 1u);
  EXPECT_TRUE(d.files[0].production);
  EXPECT_EQ(d.files[0].op, kGoodOp);
  EXPECT_EQ(d.files[0].cases, read_fixture_info(good_source().string()).cases);
}

TEST(FixtureDiscovery, TruncatedFileIsAProblem) {
  Scratch s("truncated");
  const std::string bytes = slurp(good_source());
  write_text(s / (kGoodOp + ".h5"), bytes.substr(0, bytes.size() / 2));
  const auto d = discover({s.dir()});
  const auto& p = only_problem(d, s / (kGoodOp + ".h5"), "not a readable HDF5 file");
  EXPECT_EQ(p.op, kGoodOp);
  EXPECT_TRUE(d.files.empty());
}

TEST(FixtureDiscovery, EmptyFileIsAProblem) {
  Scratch s("empty");
  write_text(s / "rmsnorm.h5", "");
  const auto d = discover({s.dir()});
  only_problem(d, s / "rmsnorm.h5", "empty file");
  EXPECT_TRUE(d.files.empty());
}

TEST(FixtureDiscovery, TextFileIsAProblem) {
  Scratch s("text");
  write_text(s / "swiglu.h5", "this is not an HDF5 file\n");
  const auto d = discover({s.dir()});
  only_problem(d, s / "swiglu.h5", "not a readable HDF5 file");
}

TEST(FixtureDiscovery, UnreadableSchemaVersionNamesTheField) {
  Scratch s("schema");
  copy_good(s / (kGoodOp + ".h5"));
  patch_i64_attribute(s / (kGoodOp + ".h5"), "schema_version", kSchemaVersion + 1000);
  const auto d = discover({s.dir()});
  const auto& p = only_problem(d, s / (kGoodOp + ".h5"), std::to_string(kSchemaVersion + 1000));
  EXPECT_EQ(p.field, "schema_version") << p.message();
  EXPECT_TRUE(d.files.empty());
}

TEST(FixtureDiscovery, DirectoryNamedLikeAFixtureIsNotOpened) {
  Scratch s("directory");
  fs::create_directory(s / "rmsnorm.h5");
  copy_good(s / (kGoodOp + ".h5"));  // still read
  const auto d = discover({s.dir()});
  only_problem(d, s / "rmsnorm.h5", "is a directory, not a regular file");
  ASSERT_EQ(d.files.size(), 1u);
  EXPECT_EQ(d.files[0].op, kGoodOp);
}

TEST(FixtureDiscovery, SymlinkLoopAndBrokenSymlinkAreProblems) {
  Scratch s("links");
  fs::create_symlink("rmsnorm.h5", s / "rmsnorm.h5");  // points at itself
  {
    const auto d = discover({s.dir()});
    only_problem(d, s / "rmsnorm.h5", "symbolic link loop");
  }
  fs::remove(s / "rmsnorm.h5");
  fs::create_symlink("nowhere.h5.missing", s / "swiglu.h5");
  const auto d = discover({s.dir()});
  only_problem(d, s / "swiglu.h5", "broken symbolic link");
}

TEST(FixtureDiscovery, SymlinkToAGoodFixtureIsFollowed) {
  Scratch s("goodlink");
  fs::create_symlink(good_source(), s / (kGoodOp + ".h5"));
  const auto d = discover({s.dir()});
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  EXPECT_EQ(d.files.size(), 1u);
}

TEST(FixtureDiscovery, FifoIsNeverOpenedAndDoesNotHang) {
  Scratch s("fifo");
  const fs::path fifo = s / "rmsnorm.h5";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto result = std::async(std::launch::async, [&] { return discover({s.dir()}); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "discovery blocked on the FIFO " << fifo;
    // Unblock a reader stuck in open() so the test ends.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  const auto d = result.get();
  only_problem(d, fifo, "FIFO");
}

TEST(FixtureDiscovery, DuplicateCaseAcrossTwoFoldersNamesBothFiles) {
  Scratch a("dup_a"), b("dup_b");
  copy_good(a / (kGoodOp + ".h5"));
  copy_good(b / (kGoodOp + "_production.h5"));
  const auto d = discover({a.dir(), b.dir()});
  const auto cases = read_fixture_info(good_source().string()).cases;
  ASSERT_EQ(d.problems.size(), cases.size()) << all_messages(d);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& p = d.problems[i];
    const std::string m = p.message();
    EXPECT_EQ(p.kase, cases[i]);
    EXPECT_NE(m.find("'" + (b / (kGoodOp + "_production.h5")).string() + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("'" + (a / (kGoodOp + ".h5")).string() + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("case '" + cases[i] + "'"), std::string::npos) << m;
    EXPECT_FALSE(p.fix.empty());
  }
  // Each case is replayed once: from the first file.
  ASSERT_EQ(d.files.size(), 2u);
  EXPECT_EQ(d.files[0].cases, cases);
  EXPECT_TRUE(d.files[1].cases.empty());
}

TEST(FixtureDiscovery, SameFolderTwiceIsReportedOnceAndReadOnce) {
  Scratch a("twice");
  copy_good(a / (kGoodOp + ".h5"));
  const fs::path again = a.dir() / "." ;  // the same folder, spelled differently
  const auto d = discover({a.dir(), again});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);  // no duplicate-case problems
  const auto& p = d.problems[0];
  EXPECT_TRUE(p.folder);
  EXPECT_EQ(p.file, again.string());
  EXPECT_NE(p.message().find("given twice"), std::string::npos) << p.message();
  EXPECT_NE(p.message().find("Fix: "), std::string::npos) << p.message();
  EXPECT_EQ(d.files.size(), 1u);
}

TEST(FixtureDiscovery, UnknownOpAttributeIsAProblem) {
  Scratch s("unknown_op");
  write_fixture_file((s / "rmsnorm.h5").string(), "no_such_op", 1, {}, false);
  const auto d = discover({s.dir()});
  const auto& p = only_problem(d, s / "rmsnorm.h5", "'no_such_op' is not a known op");
  EXPECT_EQ(p.field, "op");
  EXPECT_TRUE(d.files.empty());
}

TEST(FixtureDiscovery, OpAttributeThatDoesNotMatchTheFileNameIsAProblem) {
  Scratch s("wrong_op");
  copy_good(s / "swiglu.h5");  // holds op offset_rmsnorm
  const auto d = discover({s.dir()});
  const auto& p = only_problem(d, s / "swiglu.h5", "'" + kGoodOp + "' but the file name says 'swiglu'");
  EXPECT_EQ(p.field, "op");
  EXPECT_NE(p.fix.find("rename the file to " + kGoodOp + ".h5"), std::string::npos) << p.fix;
  EXPECT_TRUE(d.files.empty());  // never filed under swiglu
}

TEST(FixtureDiscovery, StrayFileIsAProblemAndNotOpened) {
  Scratch s("stray");
  write_text(s / "notes.h5", "not opened: a stray name is refused before reading");
  write_text(s / "rmsnorm.h5.tmp.123", "a writer's temporary: ignored");
  write_text(s / "README", "ignored");
  copy_good(s / (kGoodOp + ".h5"));
  const auto d = discover({s.dir()});
  const auto& p = only_problem(d, s / "notes.h5", "stray file");
  EXPECT_EQ(p.message().find("HDF5"), std::string::npos) << "a stray file must not be opened: " << p.message();
  EXPECT_EQ(d.files.size(), 1u);
}

TEST(FixtureDiscovery, InvalidCaseNameIsAProblem) {
  Scratch s("case_name");
  const fs::path f = s / (kGoodOp + ".h5");
  copy_good(f);
  const std::string first = read_fixture_info(f.string()).cases.at(0);
  {
    const hid_t h = H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(h, 0);
    const hid_t g = H5Gopen2(h, "cases", H5P_DEFAULT);
    EXPECT_GE(H5Lmove(g, first.c_str(), g, "bad-name", H5P_DEFAULT, H5P_DEFAULT), 0);
    H5Gclose(g);
    H5Fclose(h);
  }
  const auto d = discover({s.dir()});
  const auto& p = only_problem(d, f, "not a valid case name");
  EXPECT_EQ(p.kase, "bad-name");
  ASSERT_EQ(d.files.size(), 1u);
  EXPECT_EQ(d.files[0].cases.size(), read_fixture_info(good_source().string()).cases.size() - 1);
}

TEST(FixtureDiscovery, MissingFolderIsAProblemUnlessOptional) {
  Scratch s("missing");
  const fs::path missing = s / "golden_dta";
  {
    const auto d = discover({missing});
    ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
    EXPECT_TRUE(d.problems[0].folder);
    EXPECT_NE(d.problems[0].message().find("fixture folder '" + missing.string() + "': folder does not exist"),
              std::string::npos)
        << d.problems[0].message();
    EXPECT_FALSE(d.problems[0].fix.empty());
  }
  const auto d = discover_fixtures({{missing.string(), true}}, known_ops());
  EXPECT_TRUE(d.problems.empty()) << all_messages(d);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find(missing.string()), std::string::npos) << d.notes[0];
}

TEST(FixtureDiscovery, EmptyFolderAndFileGivenAsFolderAreProblems) {
  Scratch s("empty_folder");
  {
    const auto d = discover({s.dir()});
    ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
    EXPECT_NE(d.problems[0].message().find("holds no fixture file"), std::string::npos);
    EXPECT_TRUE(discover_fixtures({{s.dir().string(), true}}, known_ops()).problems.empty());
  }
  copy_good(s / (kGoodOp + ".h5"));
  const auto d = discover({s / (kGoodOp + ".h5")});
  ASSERT_EQ(d.problems.size(), 1u) << all_messages(d);
  EXPECT_NE(d.problems[0].message().find("not a folder"), std::string::npos) << d.problems[0].message();
}

// ---- the real numgate_replay -----------------------------------------------------------

struct ReplayRun {
  bool exited = false;  // false: killed by a signal, or timed out
  int code = -1;
  std::string output;
};

ReplayRun run_replay(const std::string& args, const fs::path& log) {
  // `timeout` turns a hang into exit status 124 (and a signal into 128 + signal).
  const std::string cmd = "timeout 120 " + std::string(NUMGATE_REPLAY_EXE) + " " + args + " > " + log.string() +
                          " 2>&1";
  const int status = std::system(cmd.c_str());
  ReplayRun r;
  r.exited = WIFEXITED(status);
  r.code = r.exited ? WEXITSTATUS(status) : -1;
  r.output = slurp(log);
  return r;
}

bool have_cuda_device(const std::string& replay_output) {
  return replay_output.find("no CUDA device") == std::string::npos;
}

TEST(ReplayEndToEnd, DamagedFixturesGiveExitOneWithReportAndJUnit) {
  Scratch s("e2e_damaged");
  const fs::path fx = s / "fixtures", out = s / "out";
  fs::create_directories(fx);
  copy_good(fx / (kGoodOp + ".h5"));
  const std::string bytes = slurp(good_source());
  write_text(fx / "rmsnorm.h5", bytes.substr(0, bytes.size() / 3));  // truncated
  write_text(fx / "swiglu.h5", "");                                    // empty
  write_text(fx / "stray.h5", "x");                                    // stray name
  ASSERT_EQ(::mkfifo((fx / "geglu.h5").c_str(), 0600), 0);            // would block an HDF5 open
  const fs::path xml = out / "junit.xml";
  const ReplayRun r = run_replay("--fixtures " + fx.string() + " --fixtures " + fx.string() + " --report-dir " +
                                     out.string() + " --gtest_output=xml:" + xml.string(),
                                 s / "replay.log");
  ASSERT_TRUE(r.exited) << "numgate_replay was killed or timed out:\n" << r.output;
  EXPECT_EQ(r.code, 1) << r.output;
  ASSERT_TRUE(fs::exists(out / "report.md")) << r.output;
  ASSERT_TRUE(fs::exists(out / "report.json")) << r.output;
  ASSERT_TRUE(fs::exists(xml)) << r.output;
  const std::string md = slurp(out / "report.md"), json = slurp(out / "report.json"), junit = slurp(xml);
  for (const std::string damaged : {"rmsnorm.h5", "swiglu.h5", "stray.h5", "geglu.h5"}) {
    const std::string path = (fx / damaged).string();
    EXPECT_NE(md.find(path), std::string::npos) << "report.md does not name " << path << ":\n" << md;
    EXPECT_NE(json.find(path), std::string::npos) << "report.json does not name " << path;
    EXPECT_NE(junit.find(path), std::string::npos) << "JUnit XML does not name " << path << ":\n" << junit;
  }
  EXPECT_NE(md.find("given twice"), std::string::npos) << md;
  EXPECT_NE(junit.find("<failure"), std::string::npos) << junit;
  EXPECT_NE(json.find("\"overall_verdict\": \"FAIL\""), std::string::npos) << json;
  // The good fixture is still in the report.
  EXPECT_NE(md.find("### " + kGoodOp + " / "), std::string::npos) << md;
}

TEST(ReplayEndToEnd, StaleAndUnloadableCasesFailWithoutADevice) {
  // Files discovery accepts, with a case the code no longer declares so (stale) and a
  // case whose data cannot be loaded: both are detectable on the CPU, so exit 1, not 77.
  Scratch s("e2e_cases");
  const fs::path fx = s / "fixtures", out = s / "out";
  fs::create_directories(fx);
  const fs::path stale = fx / (kGoodOp + ".h5"), broken = fx / "swiglu.h5";
  copy_good(stale);
  fs::copy_file(fs::path(testing::golden_dir()) / "swiglu.h5", broken);
  const std::string stale_case = read_fixture_info(stale.string()).cases.at(0);
  const std::string broken_case = read_fixture_info(broken.string()).cases.at(0);
  patch_i64_attribute(stale, "formula_version", 999, "cases/" + stale_case);
  delete_link(broken, "cases/" + broken_case + "/reference");
  ASSERT_TRUE(discover({fx}).problems.empty()) << all_messages(discover({fx}));
  const fs::path xml = out / "junit.xml";
  const ReplayRun r = run_replay("--fixtures " + fx.string() + " --report-dir " + out.string() +
                                     " --gtest_output=xml:" + xml.string(),
                                 s / "replay.log");
  ASSERT_TRUE(r.exited) << r.output;
  if (have_cuda_device(r.output)) GTEST_SKIP() << "a CUDA device is present: this test is for a no-GPU machine";
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string md = slurp(out / "report.md"), junit = slurp(xml);
  EXPECT_NE(md.find("### " + kGoodOp + " / " + stale_case + " — FAIL"), std::string::npos) << md;
  EXPECT_NE(md.find("STALE fixture: formula_version 999 (expected"), std::string::npos) << md;
  EXPECT_NE(junit.find(stale_case), std::string::npos) << junit;
  EXPECT_NE(junit.find("stale fixture"), std::string::npos) << junit;
  EXPECT_NE(md.find("### swiglu / " + broken_case + " — FAIL"), std::string::npos) << md;
  EXPECT_NE(md.find("case '" + broken_case + "'"), std::string::npos) << md;
}

TEST(ReplayEndToEnd, GoodFixturesOnlyReportNoProblem) {
  Scratch s("e2e_good");
  const fs::path fx = s / "fixtures", out = s / "out";
  fs::create_directories(fx);
  copy_good(fx / (kGoodOp + ".h5"));
  const fs::path xml = out / "junit.xml";
  const ReplayRun r = run_replay("--fixtures " + fx.string() + " --optional-fixtures " + (s / "absent").string() +
                                     " --report-dir " + out.string() + " --gtest_output=xml:" + xml.string(),
                                 s / "replay.log");
  ASSERT_TRUE(r.exited) << r.output;
  if (have_cuda_device(r.output)) GTEST_SKIP() << "a CUDA device is present: this control is for a no-GPU machine";
  EXPECT_EQ(r.code, 77) << r.output;  // no device and nothing broken: skipped
  ASSERT_TRUE(fs::exists(out / "report.md")) << r.output;
  ASSERT_TRUE(fs::exists(xml)) << r.output;
  const std::string md = slurp(out / "report.md"), junit = slurp(xml);
  EXPECT_EQ(md.find("FIXTURE PROBLEM"), std::string::npos) << md;
  EXPECT_EQ(junit.find("<failure"), std::string::npos) << junit;
  EXPECT_NE(md.find("### " + kGoodOp + " / "), std::string::npos) << md;
}

// A case the code declares for a file's set (committed: <op>.h5) that the file lacks is a
// fixture problem, device or not: exit 1, the case and the file named.
TEST(ReplayEndToEnd, DeclaredCaseMissingFromItsFileIsAProblem) {
  Scratch s("e2e_missing_case");
  const std::string op = "rmsnorm";  // a committed file of several cases
  const fs::path fx = s / "fixtures", out = s / "out", f = fx / (op + ".h5");
  fs::create_directories(fx);
  fs::copy_file(fs::path(testing::golden_dir()) / (op + ".h5"), f);
  const auto cases = read_fixture_info(f.string()).cases;
  ASSERT_GE(cases.size(), 2u);
  const std::string gone = cases.at(1);
  delete_link(f, "cases/" + gone);
  {
    const auto d = discover({fx});
    ASSERT_TRUE(d.problems.empty()) << all_messages(d);  // the library alone does not know the code's cases
    ASSERT_EQ(d.files.size(), 1u);
    EXPECT_EQ(d.files[0].file_cases.size(), cases.size() - 1);
  }
  const fs::path xml = out / "junit.xml";
  const ReplayRun r = run_replay("--fixtures " + fx.string() + " --report-dir " + out.string() +
                                     " --gtest_output=xml:" + xml.string(),
                                 s / "replay.log");
  ASSERT_TRUE(r.exited) << r.output;
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string md = slurp(out / "report.md"), junit = slurp(xml);
  const std::string expect = "fixture file '" + f.string() + "', case '" + gone +
                             "': declared in the code (committed set of op " + op + ") but missing from " +
                             f.string();
  EXPECT_NE(md.find(expect), std::string::npos) << md;
  EXPECT_NE(junit.find(expect), std::string::npos) << junit;
  EXPECT_NE(r.output.find("FIXTURE PROBLEM: " + expect), std::string::npos) << r.output;
  // Only that case: the others are not reported missing.
  for (const auto& c : cases)
    if (c != gone) EXPECT_EQ(md.find("case '" + c + "': declared in the code"), std::string::npos) << c << "\n" << md;
}

// A file whose file-level formula_version is not the code's is stale as a whole: exit 1,
// the field and both versions named (its cases' own attributes are untouched).
TEST(ReplayEndToEnd, FileLevelFormulaVersionThatDiffersFromTheCodeIsAProblem) {
  Scratch s("e2e_file_version");
  const fs::path fx = s / "fixtures", out = s / "out", f = fx / (kGoodOp + ".h5");
  fs::create_directories(fx);
  copy_good(f);
  const int code_version = find_op(kGoodOp).formula_version();
  patch_i64_attribute(f, "formula_version", code_version + 998);
  {
    const auto d = discover({fx});
    ASSERT_TRUE(d.problems.empty()) << all_messages(d);
    ASSERT_EQ(d.files.size(), 1u);
    EXPECT_EQ(d.files[0].formula_version, code_version + 998);
  }
  const ReplayRun r = run_replay("--fixtures " + fx.string() + " --report-dir " + out.string(), s / "replay.log");
  ASSERT_TRUE(r.exited) << r.output;
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string md = slurp(out / "report.md");
  const std::string expect = "fixture file '" + f.string() + "', field 'formula_version': stale file: file-level " +
                             "formula_version " + std::to_string(code_version + 998) + ", the code declares " +
                             std::to_string(code_version);
  EXPECT_NE(md.find(expect), std::string::npos) << md;
  EXPECT_NE(r.output.find("FIXTURE PROBLEM: " + expect), std::string::npos) << r.output;
  EXPECT_EQ(md.find("missing from"), std::string::npos) << md;  // every case is still there
}

// The control of the two above on every committed file: no declared case missing, no
// stale file-level version.
TEST(ReplayEndToEnd, CommittedFixturesGiveNoFixtureProblem) {
  Scratch s("e2e_committed");
  const fs::path out = s / "out";
  const ReplayRun r = run_replay("--fixtures " + testing::golden_dir() + " --report-dir " + out.string() +
                                     " --gtest_filter=Fixtures.*",
                                 s / "replay.log");
  ASSERT_TRUE(r.exited) << r.output;
  EXPECT_EQ(r.output.find("FIXTURE PROBLEM"), std::string::npos) << r.output;
  if (!have_cuda_device(r.output)) EXPECT_EQ(r.code, 77) << r.output;
}

TEST(ReplayEndToEnd, OpSelectsTheReplayedAndReportedFixtures) {
  Scratch s("e2e_op");
  const fs::path fx = s / "fixtures";
  fs::create_directories(fx);
  copy_good(fx / (kGoodOp + ".h5"));
  write_text(fx / "rmsnorm.h5", "");  // broken: a problem of rmsnorm only
  {
    const fs::path out = s / "good_op";
    const ReplayRun r =
        run_replay("--fixtures " + fx.string() + " --op " + kGoodOp + " --report-dir " + out.string(), s / "a.log");
    ASSERT_TRUE(r.exited) << r.output;
    const std::string md = slurp(out / "report.md");
    EXPECT_NE(md.find("### " + kGoodOp + " / "), std::string::npos) << md;
    EXPECT_EQ(md.find("rmsnorm.h5'"), std::string::npos) << "another op's file in the report:\n" << md;
    if (!have_cuda_device(r.output)) EXPECT_EQ(r.code, 77) << r.output;
  }
  const fs::path out = s / "broken_op";
  const ReplayRun r = run_replay("--fixtures " + fx.string() + " --op rmsnorm --report-dir " + out.string(), s / "b.log");
  ASSERT_TRUE(r.exited) << r.output;
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string md = slurp(out / "report.md");
  EXPECT_NE(md.find((fx / "rmsnorm.h5").string()), std::string::npos) << md;
  EXPECT_NE(md.find("no fixture case of op 'rmsnorm'"), std::string::npos) << md;
  EXPECT_EQ(md.find("### " + kGoodOp + " / "), std::string::npos) << md;
}

TEST(ReplayEndToEnd, UnknownOpIsAUsageError) {
  Scratch s("e2e_usage");
  const ReplayRun r = run_replay("--fixtures " + testing::golden_dir() + " --op no_such_op --report-dir " +
                                     (s / "out").string(),
                                 s / "replay.log");
  ASSERT_TRUE(r.exited) << r.output;
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("no_such_op"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rmsnorm"), std::string::npos) << "the error should list the known ops: " << r.output;
}

}  // namespace
}  // namespace numgate
