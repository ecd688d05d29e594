// Fixtures damaged in each way a file can be damaged must be refused, by name: by the
// loader (read_fixture_info / read_case, which the replay uses), by `numgate-generate
// --check`, and by the production "is current" check (fixture_not_current). A reference
// edited with its digest recomputed (a determined editor) still cannot widen the gate.
// Writing: a disk that fills up mid-write keeps the previous file and exits non-zero
// without a signal. No device needed.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "committed.h"
#include "numgate/fixture_file.h"
#include "numgate/gate.h"

#ifndef NUMGATE_GENERATE_EXE
#error "NUMGATE_GENERATE_EXE must be defined by the build"
#endif

namespace numgate {
namespace {

namespace fs = std::filesystem;

const std::string kCase = "bf16_3x256_seed2";  // a committed RMSNorm case
const std::string kFile = "rmsnorm.h5";

fs::path root() { return fs::temp_directory_path() / ("numgate_damage_" + std::to_string(::getpid())); }
fs::path scratch(const std::string& name) {
  const fs::path d = root() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
// A copy of the committed RMSNorm fixture in a fresh folder.
fs::path fresh_copy(const std::string& name) {
  const fs::path d = scratch(name);
  fs::copy_file(testing::golden_dir() + "/" + kFile, d / kFile);
  return d / kFile;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct CliRun {
  int code;        ///< exit status; -1 when killed by a signal (then `signal` says which)
  int signal = 0;
  double seconds = 0;
  std::string output;
};
// Runs a shell command line (60 s limit, so a hang is a failure, not a stuck test).
CliRun shell(const std::string& line) {
  const fs::path log = root() / "cli.log";
  fs::create_directories(root());
  const std::string cmd = "timeout -s KILL 60 sh -c '" + line + "' > " + log.string() + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.signal = WIFEXITED(status) && WEXITSTATUS(status) > 128 ? WEXITSTATUS(status) - 128 : 0;
  r.output = slurp(log);
  return r;
}
CliRun generate(const std::string& args) { return shell(std::string(NUMGATE_GENERATE_EXE) + " " + args); }

// ---- ways of damaging a file (HDF5 C API, as a person with h5py would) -------------------
hid_t open_rw(const fs::path& p) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  EXPECT_GE(f, 0) << p;
  return f;
}
// Adds `delta` to element `i` of a dataset (HDF5 converts through double, as h5py does).
void edit_element(const fs::path& p, const std::string& dataset, std::size_t i, double delta) {
  const hid_t f = open_rw(p), d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const hid_t s = H5Dget_space(d);
  std::vector<double> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s)));
  ASSERT_GE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  v.at(i) += delta;
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
}
// Recomputes a dataset's crc32 attribute (schema 3: the CRC of its key "<case>/<group>/<tensor>"
// then its bytes) for a reference dataset, what a determined editor would do.
void redigest(const fs::path& p, const std::string& dataset) {
  const hid_t f = open_rw(p), d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const hid_t t = H5Dget_type(d), s = H5Dget_space(d);
  std::vector<unsigned char> b(H5Tget_size(t) * static_cast<std::size_t>(H5Sget_simple_extent_npoints(s)));
  ASSERT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.data()), 0);
  const std::string key = dataset.substr(std::string("/cases/").size());
  const auto crc = static_cast<std::uint32_t>(
      ::crc32_z(::crc32_z(0, reinterpret_cast<const unsigned char*>(key.data()), key.size()), b.data(), b.size()));
  H5Adelete(d, "crc32");
  const hid_t as = H5Screate(H5S_SCALAR), a = H5Acreate2(d, "crc32", H5T_STD_U32LE, as, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(a, H5T_NATIVE_UINT32, &crc), 0);
  H5Aclose(a);
  H5Sclose(as);
  H5Tclose(t);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
}
// Replaces a scalar attribute (delete + create: an in-place H5Awrite can land in an
// attribute message HDF5 shares between objects with identical attributes).
template <class T>
void set_attr(const fs::path& p, const std::string& object, const char* name, hid_t filetype, hid_t memtype, T value) {
  const hid_t f = open_rw(p), o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  ASSERT_GE(H5Adelete(o, name), 0) << object << "@" << name;
  const hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(o, name, filetype, s, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(a, memtype, &value), 0);
  H5Aclose(a);
  H5Sclose(s);
  H5Oclose(o);
  H5Fclose(f);
}
void set_string_attr(const fs::path& p, const std::string& object, const char* name, const std::string& v) {
  const hid_t f = open_rw(p), o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  H5Adelete(o, name);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, v.size());
  const hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(o, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, v.data());
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
  H5Oclose(o);
  H5Fclose(f);
}
void replace_with_empty_array_attr(const fs::path& p, const std::string& object, const char* name) {
  const hid_t f = open_rw(p), o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  H5Adelete(o, name);
  const hsize_t zero = 0;
  const hid_t s = H5Screate_simple(1, &zero, nullptr), a = H5Acreate2(o, name, H5T_STD_U64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Aclose(a);
  H5Sclose(s);
  H5Oclose(o);
  H5Fclose(f);
}
// Replaces a dataset by one declaring `n` fp32 elements that were never written.
void replace_with_huge_dataset(const fs::path& p, const std::string& group, const std::string& name, hsize_t n) {
  const hid_t f = open_rw(p), g = H5Gopen2(f, group.c_str(), H5P_DEFAULT);
  H5Ldelete(g, name.c_str(), H5P_DEFAULT);
  const hid_t s = H5Screate_simple(1, &n, nullptr);
  const hid_t d = H5Dcreate2(g, name.c_str(), H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  const std::uint32_t crc = 0;
  const hid_t as = H5Screate(H5S_SCALAR), a = H5Acreate2(d, "crc32", H5T_STD_U32LE, as, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_UINT32, &crc);
  H5Aclose(a);
  H5Sclose(as);
  H5Dclose(d);
  H5Sclose(s);
  H5Gclose(g);
  H5Fclose(f);
}

// The loader's refusal: a FixtureError whose text names every `part`.
::testing::AssertionResult refused(const fs::path& p, const std::vector<std::string>& parts) {
  try {
    const FixtureFileInfo info = read_fixture_info(p.string());
    for (const auto& c : info.cases) read_case(p.string(), c);
  } catch (const FixtureError& e) {
    const std::string m = e.what();
    for (const auto& s : parts)
      if (m.find(s) == std::string::npos) return ::testing::AssertionFailure() << "'" << s << "' missing in: " << m;
    if (m.find("Fix:") == std::string::npos) return ::testing::AssertionFailure() << "no fix in: " << m;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "escaped as a " << typeid(e).name() << ": " << e.what();
  }
  return ::testing::AssertionFailure() << p << " was accepted";
}
// --check's refusal: exit 1, every `part` in the output.
::testing::AssertionResult check_refuses(const fs::path& dir, const std::vector<std::string>& parts,
                                         const std::string& extra = "--op rmsnorm") {
  const CliRun r = generate("--check " + extra + " --out-dir " + dir.string());
  if (r.code != 1) return ::testing::AssertionFailure() << "exit " << r.code << " (expected 1):\n" << r.output;
  for (const auto& s : parts)
    if (r.output.find(s) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << s << "' missing in:\n" << r.output;
  return ::testing::AssertionSuccess();
}
std::string not_current(const fs::path& p) {
  const Op& op = find_op("rmsnorm");
  std::vector<CaseSpec> committed;
  for (const auto& c : op.cases())
    if (!c.production) committed.push_back(c);
  return fixture_not_current(p.string(), op, committed);
}

// A small op whose production case has datasets of several 4 MiB chunks, so that the
// production layout (uncompressed, contiguous, no inputs_fp64) is exercised without the
// minutes a real production case takes: y = 2x, sum of |terms| 3|x| (condition 1.5, so
// golden_abs_terms is stored).
class ToyOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override {
    static const OpDescriptor d{"toy_scale",
                                1,
                                {{"x", Role::input, Layout::rows, DTypeRule::case_dtype, case_shape(), "x"},
                                 {"y", Role::output, Layout::rows, DTypeRule::case_dtype, case_shape(), "2x"}},
                                {{"Forward", {"x"}, {"y"}}},
                                [](const CaseSpec& c) { return rows_of(c.shape); }};
    return d;
  }
  std::vector<CaseSpec> cases() const override {
    CaseSpec c;
    c.name = "bf16_3x1048576_seed1";
    c.dtype = DType::bf16;
    c.shape = {3, 1 << 20};
    c.seed = 1;
    c.production = true;
    return {c};
  }
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override {
    Tensor x(c.dtype, c.shape);
    for (std::size_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(i % 1000) / 64.0 - 7.0);
    return {{"x", x}};
  }
  std::map<std::string, GoldenTensor> golden(const CaseSpec&, const std::map<std::string, Tensor>& in) const override {
    const Tensor& x = in.at("x");
    GoldenTensor g;
    g.value = Tensor(DType::fp64, x.shape);
    g.abs_terms = Tensor(DType::fp64, x.shape);
    for (std::size_t i = 0; i < x.numel(); ++i) {
      g.value.set(i, 2 * x.get(i));
      g.abs_terms.set(i, 3 * std::fabs(x.get(i)));
    }
    return {{"y", g}};
  }
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    Tensor y(c.dtype, in.at("x").shape);
    for (std::size_t i = 0; i < y.numel(); ++i) y.set(i, 2 * in.at("x").get(i));
    return {{"y", y}};
  }
};
const ToyOp kToy;
const std::string kToyCase = "bf16_3x1048576_seed1";

// The toy op's production case written as numgate-generate --set production writes it
// (production = false: as a committed case, with inputs_fp64, for the layout tests).
// Each layout is written once per test program and copied.
fs::path toy_file(const std::string& name, bool production = true) {
  const fs::path master = root() / (production ? "toy_master_production.h5" : "toy_master_committed.h5");
  if (!fs::exists(master)) {
    CaseSpec spec = kToy.cases()[0];
    spec.production = production;
    fs::create_directories(root());
    write_fixture_file(master.string(), kToy.name(), kToy.formula_version(), {materialize(kToy, spec)}, false);
  }
  const fs::path p = scratch(name) / "toy_scale_production.h5";
  fs::copy_file(master, p);
  return p;
}
std::string toy_not_current(const fs::path& p) { return fixture_not_current(p.string(), kToy, kToy.cases()); }

// Where a contiguous dataset's bytes are in the file, and how many.
std::pair<haddr_t, hsize_t> data_location(const fs::path& p, const std::string& dataset) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const std::pair<haddr_t, hsize_t> at{H5Dget_offset(d), H5Dget_storage_size(d)};
  H5Dclose(d);
  H5Fclose(f);
  return at;
}
// Flips one bit of the stored data, `fraction` of the way into the dataset (a disk error,
// or an edit with a hex editor; HDF5 is not involved, so no attribute changes).
void flip_stored_bit(const fs::path& p, const std::string& dataset, double fraction) {
  const auto [offset, size] = data_location(p, dataset);
  ASSERT_NE(offset, HADDR_UNDEF) << dataset << " is not contiguous";
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(offset + static_cast<hsize_t>(fraction * static_cast<double>(size - 1)));
  f.seekg(at);
  char b = 0;
  f.read(&b, 1);
  b ^= 0x10;
  f.seekp(at);
  f.write(&b, 1);
}
void delete_link(const fs::path& p, const std::string& link) {
  const hid_t f = open_rw(p);
  EXPECT_GE(H5Ldelete(f, link.c_str(), H5P_DEFAULT), 0) << link;
  H5Fclose(f);
}
bool has_link(const fs::path& p, const std::string& link) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const bool yes = H5Lexists(f, link.c_str(), H5P_DEFAULT) > 0;
  H5Fclose(f);
  return yes;
}
std::string string_attr(const fs::path& p, const std::string& object, const char* name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  std::string v;
  if (H5Aexists(o, name) > 0) {
    const hid_t a = H5Aopen(o, name, H5P_DEFAULT), t = H5Aget_type(a);
    v.assign(H5Tget_size(t), '\0');
    H5Aread(a, t, v.data());
    H5Tclose(t);
    H5Aclose(a);
  }
  H5Oclose(o);
  H5Fclose(f);
  return v;
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root(), ec);
  }
};
[[maybe_unused]] const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

TEST(DamagedFixtures, ControlAnUndamagedCopyIsAccepted) {
  const fs::path p = fresh_copy("control");
  EXPECT_FALSE(refused(p, {}));
  EXPECT_EQ(not_current(p), "");
  const CliRun r = generate("--check --op rmsnorm --out-dir " + p.parent_path().string());
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(DamagedFixtures, TruncatedFile) {
  const fs::path p = fresh_copy("truncated");
  fs::resize_file(p, fs::file_size(p) / 2);
  EXPECT_TRUE(refused(p, {p.string()}));
  EXPECT_NE(not_current(p), "");
  EXPECT_TRUE(check_refuses(p.parent_path(), {p.string()}));
}

TEST(DamagedFixtures, EmptyAndNotHdf5Files) {
  const fs::path d = scratch("empty");
  std::ofstream(d / kFile).close();
  EXPECT_TRUE(refused(d / kFile, {(d / kFile).string(), "empty file"}));
  std::ofstream(d / "text.h5") << "not an HDF5 file\n";
  EXPECT_TRUE(refused(d / "text.h5", {"not a readable HDF5 file"}));
}

TEST(DamagedFixtures, FileLevelOpAttributeNamingAnotherOp) {
  const fs::path p = fresh_copy("wrong_op");
  set_string_attr(p, "/", "op", "softmax");
  EXPECT_TRUE(refused(p, {p.string(), "case '", "field 'op'", "differs from the file's op 'softmax'"}));
  EXPECT_NE(not_current(p).find("file op 'softmax'"), std::string::npos) << not_current(p);
  EXPECT_TRUE(check_refuses(p.parent_path(), {"file attribute op 'softmax' does not match the file name"}));
}

TEST(DamagedFixtures, EditedReferenceElement) {
  // The issue's measurement: one reference/y element moved by 9% of max|golden| kept the
  // gate "valid" and raised the threshold 285,000-fold. Now the digest refuses the file.
  const fs::path p = fresh_copy("reference");
  edit_element(p, "/cases/" + kCase + "/reference/y", 5, 0.09 * 4.0);
  EXPECT_TRUE(refused(p, {p.string(), kCase + "/reference", "'y'", "digest"}));
  EXPECT_NE(not_current(p).find("digest"), std::string::npos) << not_current(p);
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase, "digest"}));
}

TEST(DamagedFixtures, EditedGoldenElementAndEnvelopeLength) {
  const fs::path p = fresh_copy("golden");
  edit_element(p, "/cases/" + kCase + "/golden/y", 0, 1e-3);
  EXPECT_TRUE(refused(p, {kCase + "/golden", "'y'", "digest"}));
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase}));
  // Widening the conditioning envelope through its attribute is caught the same way.
  const fs::path q = fresh_copy("envelope");
  set_attr<std::int64_t>(q, "/cases/" + kCase + "/golden/y", "envelope_length", H5T_STD_I64LE, H5T_NATIVE_INT64, 1 << 30);
  EXPECT_TRUE(refused(q, {kCase + "/golden", "'y'", "digest"}));
}

TEST(DamagedFixtures, EditedGateAttribute) {
  // Attributes are not digested: they are compared with the declaration in the code, by
  // every consumer (compare_declarations).
  const fs::path p = fresh_copy("gate");
  set_attr<double>(p, "/cases/" + kCase, "fudge_factor", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1000.0);
  const CaseData stored = read_case(p.string(), kCase);
  const Op& op = find_op("rmsnorm");
  CaseSpec declared;
  for (const auto& c : op.cases())
    if (c.name == kCase) declared = c;
  const auto diffs = compare_declarations(declaration(op, declared), stored);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(diffs[0], "gate parameter fudge_factor 1000 (declared 2)");
  EXPECT_NE(not_current(p).find("fudge_factor 1000 (declared 2)"), std::string::npos) << not_current(p);
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase, "fudge_factor 1000 (declared 2)"}));
}

TEST(DamagedFixtures, EditedReferenceWithItsDigestRecomputedCannotWidenTheGate) {
  const fs::path p = fresh_copy("redigested");
  const CaseData honest = read_case(p.string(), kCase);
  const double scale = [&] {
    double m = 0;
    for (std::size_t i = 0; i < honest.golden.at("y").value.numel(); ++i)
      m = std::max(m, std::fabs(honest.golden.at("y").value.get(i)));
    return m;
  }();
  edit_element(p, "/cases/" + kCase + "/reference/y", 5, 0.09 * scale);
  redigest(p, "/cases/" + kCase + "/reference/y");
  const CaseData edited = read_case(p.string(), kCase);  // the digest now agrees
  // A wrong target: the honest reference plus 8 bf16 ulps at one element (FAIL on the honest data).
  Tensor wrong = honest.reference.at("y");
  wrong.set(7, wrong.get(7) + 8 * std::ldexp(std::fabs(wrong.get(7)), -7));
  const GateResult before = evaluate_gate("y", honest.spec, honest.golden.at("y"), honest.reference.at("y"), &wrong);
  EXPECT_EQ(before.verdict, Verdict::fail) << describe(before, honest.spec);
  const GateResult after = evaluate_gate("y", edited.spec, edited.golden.at("y"), edited.reference.at("y"), &wrong);
  EXPECT_GT(after.threshold, 10 * before.threshold);  // what the edit would have bought
  EXPECT_LE(after.reference_relative_error, after.params.max_reference_relative_error);
  EXPECT_FALSE(after.gate_valid) << describe(after, edited.spec);
  EXPECT_EQ(after.verdict, Verdict::inconclusive) << describe(after, edited.spec);
}

// Links `from` to `to` in the same file (H5Ocopy: data and attributes, its crc32 included),
// replacing what was at `to`, as h5py's f.copy would.
void copy_object(const fs::path& p, const std::string& from, const std::string& to) {
  const hid_t f = open_rw(p);
  if (H5Lexists(f, to.c_str(), H5P_DEFAULT) > 0) H5Ldelete(f, to.c_str(), H5P_DEFAULT);
  ASSERT_GE(H5Ocopy(f, from.c_str(), f, to.c_str(), H5P_DEFAULT, H5P_DEFAULT), 0) << from << " -> " << to;
  H5Fclose(f);
}
void delete_object(const fs::path& p, const std::string& path) {
  const hid_t f = open_rw(p);
  ASSERT_GE(H5Ldelete(f, path.c_str(), H5P_DEFAULT), 0) << path;
  H5Fclose(f);
}

TEST(DamagedFixtures, GoldenAbsTermsCannotBeDeletedAddedOrReshaped) {
  // golden_abs_terms/<t> scales the conditioning envelope and holds 0 where every term is
  // 0 (the rule that a kernel writes exactly 0 there, e.g. on the zero row). Deleting it
  // (condition 1 everywhere), adding one where it was omitted (copied from another tensor,
  // with that tensor's valid crc32) or replacing it by one of another shape would change the
  // gate without touching the data of golden/<t>: golden/<t>'s digest covers it.
  const std::string k = "bf16_4x1024_zero_row_seed14", base = "/cases/" + k + "/golden_abs_terms/";
  const fs::path deleted = fresh_copy("abs_deleted");
  delete_object(deleted, base + "dx");
  EXPECT_TRUE(refused(deleted, {k + "/golden", "'dx'", "digest"}));
  EXPECT_NE(not_current(deleted).find("digest"), std::string::npos) << not_current(deleted);
  const fs::path added = fresh_copy("abs_added");
  copy_object(added, base + "dx", base + "y");  // y's terms are omitted (condition 1): now "stored"
  EXPECT_TRUE(refused(added, {k + "/golden", "'y'", "digest"}));
  const fs::path reshaped = fresh_copy("abs_reshaped");
  copy_object(reshaped, base + "dw", base + "dx");  // [1024] where dx is [4, 1024]
  EXPECT_TRUE(refused(reshaped, {k, "digest"}));
  EXPECT_TRUE(check_refuses(reshaped.parent_path(), {"STALE rmsnorm/" + k}));
}

TEST(DamagedFixtures, DataMovedToAnotherCaseOrTensorIsRefused) {
  // Every group of one case replaced by another case's (same shapes, every crc32 valid for
  // the data it covers): the digests are keyed by case, group and tensor.
  const fs::path p = fresh_copy("moved");
  const std::string a = "/cases/bf16_8x5120_seed8/", b = "/cases/bf16_8x5120_near_zero_variance_seed13/";
  for (const char* g : {"inputs", "inputs_fp64", "golden", "golden_abs_terms", "reference"}) copy_object(p, b + g, a + g);
  EXPECT_TRUE(refused(p, {"bf16_8x5120_seed8", "digest"}));
  EXPECT_NE(not_current(p).find("digest"), std::string::npos) << not_current(p);
  const fs::path q = fresh_copy("swapped");
  copy_object(q, "/cases/bf16_3x256_seed2/reference/dx", "/cases/bf16_3x256_seed2/reference/y");
  EXPECT_TRUE(refused(q, {"bf16_3x256_seed2/reference", "'y'", "digest"}));
}

TEST(DamagedFixtures, EmptySeedAttribute) {
  const fs::path p = fresh_copy("seed");
  replace_with_empty_array_attr(p, "/cases/" + kCase, "seed");
  EXPECT_TRUE(refused(p, {kCase, "'seed'", "expected a scalar"}));
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase, "seed"}));
}

TEST(DamagedFixtures, DatasetDeclaringTerabytesIsNotAnAllocation) {
  const fs::path p = fresh_copy("huge");
  replace_with_huge_dataset(p, "/cases/" + kCase + "/reference", "y", hsize_t{1} << 41);  // 8 TiB of fp32
  EXPECT_LT(fs::file_size(p), std::uintmax_t{1} << 30);  // the file is megabytes, the dataset 8 TiB
  EXPECT_TRUE(refused(p, {kCase + "/reference", "'y'", "but the file holds"}));
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase, "but the file holds"}));
}

TEST(DamagedFixtures, FifoNamedLikeAFixtureIsRefusedWithoutHanging) {
  const fs::path d = scratch("fifo");
  ASSERT_EQ(::mkfifo((d / kFile).c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(refused(d / kFile, {(d / kFile).string(), "not a regular file"}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  const CliRun r = generate("--check --op rmsnorm --out-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_NE(r.output.find("not a regular file"), std::string::npos) << r.output;
}

TEST(DamagedFixtures, StrayFileInTheFixtureFolder) {
  const fs::path d = scratch("stray");
  for (const auto& e : fs::directory_iterator(testing::golden_dir())) fs::copy_file(e.path(), d / e.path().filename());
  fs::copy_file(d / kFile, d / "rmsnorm_old.h5");
  EXPECT_TRUE(check_refuses(d, {"STRAY " + (d / "rmsnorm_old.h5").string()}, ""));
  fs::remove(d / "rmsnorm_old.h5");
  const CliRun control = generate("--check --out-dir " + d.string());
  EXPECT_EQ(control.code, 0) << control.output;
}

TEST(DamagedFixtures, OneBrokenOpDoesNotStopTheCheckOfTheOthers) {
  const fs::path d = scratch("others");
  for (const auto& e : fs::directory_iterator(testing::golden_dir())) fs::copy_file(e.path(), d / e.path().filename());
  fs::resize_file(d / kFile, 100);
  const CliRun r = generate("--check --out-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find((d / kFile).string()), std::string::npos) << r.output;
  for (const char* later : {"ok    softmax/", "ok    cross_entropy/", "ok    swiglu/"})
    EXPECT_NE(r.output.find(later), std::string::npos) << later << " not checked:\n" << r.output;
}

TEST(DamagedFixtures, DiskFullMidWriteKeepsThePreviousFileAndExitsWithoutASignal) {
  // RLIMIT_FSIZE with SIGXFSZ ignored makes writes past 200 KiB fail (EFBIG) as a full
  // disk does (ENOSPC): after the free-space check passed, in the middle of the file.
  const fs::path p = fresh_copy("disk_full");
  const std::string before = slurp(p);
  const CliRun r = shell("trap \"\" XFSZ; ulimit -f 200; exec " + std::string(NUMGATE_GENERATE_EXE) +
                         " --op rmsnorm --out-dir " + p.parent_path().string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.signal, 0);
  EXPECT_NE(r.output.find("writing fixture file '" + p.string() + "' failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the previous file is unchanged"), std::string::npos) << r.output;
  EXPECT_TRUE(slurp(p) == before) << "the previous file changed";
  for (const auto& e : fs::directory_iterator(p.parent_path()))
    EXPECT_EQ(e.path().filename(), kFile) << "leftover " << e.path();
}

TEST(DamagedFixtures, EmptyOutDirIsRefused) {
  const CliRun r = generate("--check --out-dir \"\"");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("must not be empty"), std::string::npos) << r.output;
}

TEST(DamagedFixtures, OracleNaNsAreStoredCanonically) {
  Tensor t(DType::bf16, {3});
  const std::uint16_t neg_nan = 0xFFC1, pos = 0x3F80;
  std::memcpy(t.bytes.data(), &neg_nan, 2);
  std::memcpy(t.bytes.data() + 2, &pos, 2);
  t.canonicalize_nans();
  std::uint16_t b0, b1;
  std::memcpy(&b0, t.bytes.data(), 2);
  std::memcpy(&b1, t.bytes.data() + 2, 2);
  EXPECT_EQ(b0, 0x7FC0);
  EXPECT_EQ(b1, pos);
  // Every committed fixture's oracle outputs hold only canonical NaNs.
  for (const auto& cc : testing::committed_cases()) {
    const CaseData c = read_case(cc.file, cc.name);
    for (const auto& [n, g] : c.golden) {
      Tensor v = g.value;
      v.canonicalize_nans();
      EXPECT_TRUE(v.bytes == g.value.bytes) << cc << " golden/" << n;
    }
    for (const auto& [n, r] : c.reference) {
      Tensor v = r;
      v.canonicalize_nans();
      EXPECT_TRUE(v.bytes == r.bytes) << cc << " reference/" << n;
    }
  }
}


// ---- the production layout: uncompressed, contiguous, no inputs_fp64 ------------------

TEST(ProductionLayout, OmitsInputsFp64SaysSoAndReadsBackBitForBit) {
  const fs::path p = toy_file("layout");
  const std::string c = "/cases/" + kToyCase;
  EXPECT_FALSE(has_link(p, c + "/inputs_fp64"));
  EXPECT_EQ(string_attr(p, c, "inputs_fp64"), "omitted");
  for (const char* d : {"/inputs/x", "/golden/y", "/golden_abs_terms/y", "/reference/y"})
    EXPECT_NE(data_location(p, c + d).first, HADDR_UNDEF) << d << " should be contiguous";
  const CaseData back = read_case(p.string(), kToyCase);
  EXPECT_TRUE(compare_cases(materialize(kToy, kToy.cases()[0]), back).empty());
  EXPECT_EQ(toy_not_current(p), "");
  // What dropping inputs_fp64 saves: 8 bytes per input element.
  const fs::path stored = toy_file("layout_stored", /*production=*/false);
  EXPECT_TRUE(has_link(stored, c + "/inputs_fp64"));
  EXPECT_EQ(string_attr(stored, c, "inputs_fp64"), "");  // committed layout: no attribute
  EXPECT_GE(fs::file_size(stored), fs::file_size(p) + 8 * (3u << 20));
}

TEST(ProductionLayout, AFlippedBitInAnyDatasetIsRefusedByTheLoaderAndTheCurrentCheck) {
  // Chunks of 4 MiB are hashed on several threads: a bit early, in the middle and at the
  // end of each dataset (golden/y has 6 chunks) must each be found.
  for (const std::string d : {"inputs/x", "golden/y", "golden_abs_terms/y", "reference/y"})
    for (double where : {0.0, 0.55, 1.0}) {
      const fs::path p = toy_file("flip");
      flip_stored_bit(p, "/cases/" + kToyCase + "/" + d, where);
      const std::string group = d.substr(0, d.find('/')), name = d.substr(d.find('/') + 1);
      EXPECT_TRUE(refused(p, {p.string(), kToyCase + "/" + group, "'" + name + "'", "digest"})) << d << " at " << where;
      const std::string why = toy_not_current(p);
      EXPECT_NE(why.find("digest"), std::string::npos) << d << " at " << where << ": " << why;
      EXPECT_NE(why.find(kToyCase + "/" + group), std::string::npos) << why;
    }
  // The envelope length is covered by the golden digest here too.
  const fs::path q = toy_file("flip_envelope");
  set_attr<std::int64_t>(q, "/cases/" + kToyCase + "/golden/y", "envelope_length", H5T_STD_I64LE, H5T_NATIVE_INT64, 99);
  EXPECT_TRUE(refused(q, {kToyCase + "/golden", "'y'", "digest"}));
  EXPECT_NE(toy_not_current(q).find("digest"), std::string::npos) << toy_not_current(q);
}

TEST(ProductionLayout, InputsFp64IsOmittedOnlyWhereTheFileSaysSo) {
  const std::string c = "/cases/" + kCase;
  // Deleted from a committed file: refused.
  const fs::path p = fresh_copy("fp64_deleted");
  delete_link(p, c + "/inputs_fp64");
  EXPECT_TRUE(refused(p, {kCase, "'inputs_fp64'", "group missing"}));
  EXPECT_NE(not_current(p).find("inputs_fp64"), std::string::npos) << not_current(p);
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase, "inputs_fp64"}));
  // ... and the attribute of the production layout added: a committed case may not omit it.
  set_string_attr(p, c, "inputs_fp64", "omitted");
  EXPECT_TRUE(refused(p, {kCase, "'inputs_fp64'", "committed case"}));
  EXPECT_TRUE(check_refuses(p.parent_path(), {"STALE rmsnorm/" + kCase, "committed case"}));
  // A production file's attribute with another value.
  const fs::path q = toy_file("fp64_value");
  set_string_attr(q, "/cases/" + kToyCase, "inputs_fp64", "stored");
  EXPECT_TRUE(refused(q, {kToyCase, "'inputs_fp64'", "only value is 'omitted'"}));
  EXPECT_NE(toy_not_current(q).find("only value is 'omitted'"), std::string::npos) << toy_not_current(q);
  // A production case of an earlier build (inputs_fp64 stored, no attribute): readable,
  // the promotion verified, but not what this build writes, so not current.
  const fs::path old = toy_file("fp64_old", /*production=*/false);
  set_attr<std::int64_t>(old, "/cases/" + kToyCase, "production", H5T_STD_I64LE, H5T_NATIVE_INT64, 1);
  EXPECT_FALSE(refused(old, {}));
  EXPECT_NE(toy_not_current(old).find("stores inputs_fp64"), std::string::npos) << toy_not_current(old);
  // ... saying omitted while the group is there: refused.
  set_string_attr(old, "/cases/" + kToyCase, "inputs_fp64", "omitted");
  EXPECT_TRUE(refused(old, {kToyCase, "the group inputs_fp64 exists"}));
}

TEST(ProductionLayout, StoredPromotionThatDiffersIsRefused) {
  // Where inputs_fp64 is stored it must be the promotion of inputs, digest or not.
  const fs::path p = fresh_copy("fp64_edited");
  edit_element(p, "/cases/" + kCase + "/inputs_fp64/x", 3, 0.5);
  redigest(p, "/cases/" + kCase + "/inputs_fp64/x");
  EXPECT_TRUE(refused(p, {kCase, "inputs_fp64/x", "is not the FP64 promotion"}));
  EXPECT_NE(not_current(p).find("is not the FP64 promotion"), std::string::npos) << not_current(p);
}

}  // namespace
}  // namespace numgate
