// Generator determinism and staleness detection (--check).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

#include "committed.h"
#include "numgate/fixture_file.h"

#ifndef NUMGATE_GENERATE_EXE
#error "NUMGATE_GENERATE_EXE must be defined by the build"
#endif

namespace numgate {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("numgate_gen_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct CliRun {
  int code;
  std::string output;
};
CliRun run(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("numgate_gen_" + std::to_string(::getpid()) + ".log");
  const std::string cmd = std::string(NUMGATE_GENERATE_EXE) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(log)};
}

// Removes this process's scratch folders when the test program ends.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("numgate_gen_" + std::to_string(::getpid())), ec);
    fs::remove(fs::temp_directory_path() / ("numgate_gen_" + std::to_string(::getpid()) + ".log"), ec);
    fs::remove_all(fs::temp_directory_path() / ("numgate_test_" + std::to_string(::getpid())), ec);
  }
};
[[maybe_unused]] const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

TEST(Generator, TwoRunsWriteByteIdenticalFiles) {
  const fs::path a = scratch("a"), b = scratch("b");
  ASSERT_EQ(run("--out-dir " + a.string()).code, 0);
  ASSERT_EQ(run("--out-dir " + b.string()).code, 0);
  for (const auto& e : fs::directory_iterator(a)) {
    ASSERT_TRUE(fs::exists(b / e.path().filename()));
    EXPECT_TRUE(slurp(e.path()) == slurp(b / e.path().filename())) << e.path().filename() << " differs between runs";
  }
  for (const auto& e : fs::directory_iterator(a)) EXPECT_EQ(e.path().extension(), ".h5") << "leftover " << e.path();
}

TEST(Generator, CommittedDataIsCurrent) {
  const CliRun r = run("--check --out-dir " + testing::golden_dir());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("all fixtures current"), std::string::npos) << r.output;
}

TEST(Generator, CheckNamesEveryStaleCase) {
  const fs::path d = scratch("stale");
  const std::string src = testing::golden_dir() + "/rmsnorm.h5";
  const FixtureFileInfo info = read_fixture_info(src);
  ASSERT_GE(info.cases.size(), 3u);
  // Rewrite the file with: one case dropped, one case with an altered input element,
  // one case claiming an older formula version, the rest untouched.
  std::vector<CaseData> cases;
  for (const auto& n : info.cases) cases.push_back(read_case(src, n));
  const std::string dropped = cases[0].spec.name, altered = cases[1].spec.name, old = cases[2].spec.name;
  cases[1].inputs["x"].bytes[0] ^= 1;
  cases[2].formula_version -= 1;
  cases.erase(cases.begin());
  write_fixture_file((d / "rmsnorm.h5").string(), "rmsnorm", info.formula_version, cases, true);

  const CliRun r = run("--check --op rmsnorm --out-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.output;
  for (const auto& n : {dropped, altered, old})
    EXPECT_NE(r.output.find("STALE rmsnorm/" + n), std::string::npos) << "not named: " << n << "\n" << r.output;
  EXPECT_NE(r.output.find("3 stale case(s)"), std::string::npos) << r.output;
}

TEST(Generator, CheckFailsOnAFileLevelFormulaVersionAlone) {
  // Every case current, only the file's own formula_version differs: still stale.
  const fs::path d = scratch("file_version");
  const std::string src = testing::golden_dir() + "/offset_rmsnorm.h5";
  const FixtureFileInfo info = read_fixture_info(src);
  std::vector<CaseData> cases;
  for (const auto& n : info.cases) cases.push_back(read_case(src, n));
  write_fixture_file((d / "offset_rmsnorm.h5").string(), "offset_rmsnorm", info.formula_version + 1, cases, true);
  const CliRun r = run("--check --op offset_rmsnorm --out-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("every case is stale"), std::string::npos) << r.output;
}

TEST(Generator, WritingRemovesTemporariesOfKilledWriters) {
  // A writer killed mid-write leaves <file>.tmp.<pid>; the next write removes it when
  // that process is gone, and keeps the temporary of a process that is alive.
  const fs::path d = scratch("orphans");
  const fs::path file = d / "t.h5";
  const fs::path dead = d / "t.h5.tmp.2147483646", alive = d / "t.h5.tmp.1";  // pid 1 always exists
  std::ofstream(dead) << "half";
  std::ofstream(alive) << "in use";
  write_tensors(file.string(), {{"a", Tensor(DType::fp32, {1})}});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(file));
}

TEST(FixtureWriter, UnfinishedWriterKeepsThePreviousFileAndLeavesNoTemporary) {
  // An exception between appends (an oracle that throws, a refused case) destroys the
  // writer before commit(): the previous file stays byte for byte, the temporary goes.
  const fs::path d = scratch("writer_abandoned");
  const std::string src = testing::golden_dir() + "/rmsnorm.h5", dst = (d / "rmsnorm.h5").string();
  fs::copy_file(src, dst);
  const FixtureFileInfo info = read_fixture_info(src);
  const std::string before = slurp(dst);
  {
    FixtureWriter w(dst, "rmsnorm", info.formula_version, true);
    w.append(read_case(src, info.cases[0]));
    EXPECT_EQ(w.cases_written(), 1u);
    EXPECT_TRUE(fs::exists(dst + ".tmp." + std::to_string(::getpid())));
  }
  EXPECT_TRUE(slurp(dst) == before);
  for (const auto& e : fs::directory_iterator(d)) EXPECT_EQ(e.path().filename(), "rmsnorm.h5") << "leftover " << e.path();
}

TEST(FixtureWriter, CommittedFileHoldsTheCasesAppendedInOrderAndTakesNoMore) {
  const fs::path d = scratch("writer_commit");
  const std::string src = testing::golden_dir() + "/rmsnorm.h5", dst = (d / "rmsnorm.h5").string();
  const FixtureFileInfo info = read_fixture_info(src);
  std::vector<CaseData> cases;
  for (std::size_t i = 0; i < 3; ++i) cases.push_back(read_case(src, info.cases[i]));
  FixtureWriter w(dst, "rmsnorm", info.formula_version, true);
  for (const auto& c : cases) w.append(c);
  EXPECT_FALSE(fs::exists(dst));  // nothing at the destination before commit()
  w.commit();
  EXPECT_THROW(w.append(cases[0]), FixtureError);
  EXPECT_THROW(w.commit(), FixtureError);
  const FixtureFileInfo back = read_fixture_info(dst);
  ASSERT_EQ(back.cases.size(), 3u);
  for (const auto& c : cases) EXPECT_TRUE(compare_cases(c, read_case(dst, c.spec.name)).empty()) << c.spec.name;
  // The same cases through write_fixture_file: the same bytes.
  const std::string whole = (d / "whole.h5").string();
  write_fixture_file(whole, "rmsnorm", info.formula_version, cases, true);
  EXPECT_TRUE(slurp(whole) == slurp(dst));
}

TEST(Generator, CheckOnAMissingFileFailsWithTheFix) {
  const CliRun r = run("--check --out-dir " + scratch("empty").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
}

TEST(Generator, CommittedDataStaysSmall) {
  std::uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(testing::golden_dir())) total += fs::file_size(e.path());
  EXPECT_LT(total, 8u << 20) << "golden_data/ is " << total << " bytes: move large cases to the production set";
}

}  // namespace
}  // namespace numgate
