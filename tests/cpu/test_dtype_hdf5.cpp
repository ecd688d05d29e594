// Exact rounding between dtypes, and lossless, self-describing HDF5 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "numgate/fixture_file.h"
#include "numgate/random.h"

namespace numgate {
namespace {

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("numgate_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

Tensor all_patterns(DType t) {
  Tensor x(t, {65536});
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    std::memcpy(x.bytes.data() + 2 * i, &b, 2);
  }
  return x;
}

TEST(HDF5, EveryBf16AndFp16BitPatternRoundTripsUnchanged) {
  const std::string path = temp_path("patterns.h5");
  const Tensor bf = all_patterns(DType::bf16), hf = all_patterns(DType::fp16);
  write_tensors(path, {{"bf16", bf}, {"fp16", hf}});
  const Tensor bf2 = read_tensor(path, "bf16"), hf2 = read_tensor(path, "fp16");
  EXPECT_EQ(bf2.dtype, DType::bf16);  // told apart from the file alone
  EXPECT_EQ(hf2.dtype, DType::fp16);
  EXPECT_EQ(bf2.shape, bf.shape);
  EXPECT_TRUE(bf2.bytes == bf.bytes) << "bf16 bit patterns changed through HDF5";
  EXPECT_TRUE(hf2.bytes == hf.bytes) << "fp16 bit patterns changed through HDF5";
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(HDF5, I64IndexTensorsRoundTripUnchangedAndPromoteExactly) {
  // Index inputs (token positions, class targets) are signed 64-bit integers in the file,
  // told apart from the float dtypes by their HDF5 class.
  const std::vector<std::int64_t> values = {0, 1, -1, -100, 32767, 151935, std::int64_t{1} << 31,
                                            -(std::int64_t{1} << 31) - 1, std::int64_t{1} << 53,
                                            INT64_MAX, INT64_MIN};
  Tensor t(DType::i64, {static_cast<std::int64_t>(values.size())});
  std::memcpy(t.bytes.data(), values.data(), values.size() * 8);
  const std::string path = temp_path("i64.h5");
  write_tensors(path, {{"targets", t}});
  const Tensor back = read_tensor(path, "targets");
  EXPECT_EQ(back.dtype, DType::i64);
  EXPECT_TRUE(back.bytes == t.bytes) << "i64 values changed through HDF5";
  const Tensor p = t.to(DType::fp64);
  for (std::size_t i = 0; i + 2 < values.size(); ++i)  // |v| <= 2^53: exact
    EXPECT_EQ(p.get(i), static_cast<double>(values[i])) << values[i];
  EXPECT_EQ(parse_dtype("i64"), DType::i64);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  Tensor s(DType::i64, {3});
  s.set(0, 2.5);   // ties to even
  s.set(1, -7.0);
  s.set(2, 1e300); // saturates
  EXPECT_EQ(s.get(0), 2.0);
  EXPECT_EQ(s.get(1), -7.0);
  std::int64_t top = 0;
  std::memcpy(&top, s.bytes.data() + 16, 8);
  EXPECT_EQ(top, INT64_MAX);
}

// A minimal op with an i64 index input (a gather: y[i] = x[idx[i]]), to carry an index
// tensor through the whole fixture path: draw, promote, write, read, compare.
class GatherOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override {
    static const OpDescriptor d{"gather_test",
                                1,
                                {{"x", Role::input, Layout::whole, DTypeRule::case_dtype, fixed_shape({8}), "source"},
                                 {"idx", Role::index_input, Layout::whole, DTypeRule::i64, fixed_shape({5}), "picks"},
                                 {"y", Role::output, Layout::whole, DTypeRule::case_dtype, fixed_shape({5}), "x[idx]"}},
                                {{"Forward", {"x", "idx"}, {"y"}}},
                                [](const CaseSpec&) { return std::int64_t{1}; }};
    return d;
  }
  std::vector<CaseSpec> cases() const override { return {}; }
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override {
    Tensor x(c.dtype, {8}), idx(DType::i64, {5});
    for (std::size_t i = 0; i < 8; ++i) x.set(i, 0.25 * static_cast<double>(i) - 1.0);
    const double picks[5] = {7, 0, 3, 3, 5};
    for (std::size_t i = 0; i < 5; ++i) idx.set(i, picks[i]);
    return {{"x", x}, {"idx", idx}};
  }
  std::map<std::string, GoldenTensor> golden(const CaseSpec&, const std::map<std::string, Tensor>& in) const override {
    GoldenTensor g;
    g.value = Tensor(DType::fp64, {5});
    for (std::size_t i = 0; i < 5; ++i)
      g.value.set(i, in.at("x").get(static_cast<std::size_t>(in.at("idx").get(i))));
    g.abs_terms = g.value;
    for (std::size_t i = 0; i < 5; ++i) g.abs_terms.set(i, std::fabs(g.value.get(i)));
    return {{"y", g}};
  }
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>& in) const override {
    Tensor y(c.dtype, {5});
    for (std::size_t i = 0; i < 5; ++i) y.set(i, in.at("x").get(static_cast<std::size_t>(in.at("idx").get(i))));
    return {{"y", y}};
  }
};

TEST(HDF5, CaseWithAnI64IndexInputRoundTripsThroughAFixtureFile) {
  CaseSpec spec;
  spec.name = "bf16_gather";
  spec.dtype = DType::bf16;
  spec.shape = {8};
  const CaseData c = materialize(GatherOp{}, spec);
  ASSERT_EQ(c.inputs.at("idx").dtype, DType::i64);
  const std::string path = temp_path("gather.h5");
  write_fixture_file(path, "gather_test", 1, {c}, true);
  const CaseData back = read_case(path, "bf16_gather");
  EXPECT_TRUE(compare_cases(c, back).empty());
  EXPECT_EQ(back.inputs.at("idx").dtype, DType::i64);
  EXPECT_EQ(back.golden.at("y").value.get(0), 0.75);  // x[7] = 0.25 * 7 - 1
}

// Tensor::to(fp64) and canonicalize_nans have per-dtype fast loops; they must store
// exactly the bits of the element-by-element definition (set(i, get(i)); get(i) != get(i)),
// NaN payloads, signalling NaNs, subnormals and signed zeros included.
Tensor elementwise_fp64(const Tensor& t) {
  Tensor out(DType::fp64, t.shape);
  for (std::size_t i = 0; i < t.numel(); ++i) out.set(i, t.get(i));
  return out;
}
Tensor elementwise_canonical(Tensor t) {
  const std::size_t es = dtype_size(t.dtype);
  const std::uint64_t quiet = t.dtype == DType::fp64   ? 0x7FF8000000000000ull
                              : t.dtype == DType::fp32 ? 0x7FC00000ull
                              : t.dtype == DType::bf16 ? 0x7FC0ull
                                                       : 0x7E00ull;
  for (std::size_t i = 0; i < t.numel(); ++i)
    if (t.get(i) != t.get(i)) std::memcpy(t.bytes.data() + i * es, &quiet, es);
  return t;
}
Tensor bit_patterns(DType t, const std::vector<std::uint64_t>& bits) {
  Tensor x(t, {static_cast<std::int64_t>(bits.size())});
  for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(x.bytes.data() + i * dtype_size(t), &bits[i], dtype_size(t));
  return x;
}

TEST(Tensor, FastPromotionAndNaNCanonicalizationMatchTheElementwiseDefinition) {
  std::vector<Tensor> cases = {all_patterns(DType::bf16), all_patterns(DType::fp16)};
  std::vector<std::uint64_t> f32 = {0, 0x80000000u, 1, 0x807FFFFFu, 0x00800000u, 0x3F800000u, 0x7F7FFFFFu,
                                    0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFFBFFFFFu};
  const RandomStream rs(7, 3);
  auto word = [&](std::uint64_t i) { return static_cast<std::uint64_t>(rs.uniform(i) * 4294967296.0); };
  for (std::uint64_t i = 0; i < 100000; ++i) f32.push_back(word(i));
  cases.push_back(bit_patterns(DType::fp32, f32));
  std::vector<std::uint64_t> f64 = {0, 0x8000000000000000ull, 1, 0x7FF0000000000000ull, 0xFFF0000000000000ull,
                                    0x7FF8000000000000ull, 0xFFF0000000000001ull, 0x7FF7FFFFFFFFFFFFull,
                                    0x3FF0000000000000ull};
  for (std::uint64_t i = 0; i < 100000; ++i) f64.push_back((word(2 * i) << 32) | word(2 * i + 1));
  cases.push_back(bit_patterns(DType::fp64, f64));
  cases.push_back(bit_patterns(DType::i64, {0, 1, 0xFFFFFFFFFFFFFFFFull, 0x8000000000000000ull, 0x7FFFFFFFFFFFFFFFull,
                                            std::uint64_t{1} << 53, (std::uint64_t{1} << 53) + 1}));
  for (const Tensor& t : cases) {
    EXPECT_TRUE(t.to(DType::fp64).bytes == elementwise_fp64(t).bytes) << dtype_name(t.dtype) << " promotion";
    if (t.dtype == DType::i64) continue;
    Tensor fast = t;
    fast.canonicalize_nans();
    EXPECT_TRUE(fast.bytes == elementwise_canonical(t).bytes) << dtype_name(t.dtype) << " canonical NaNs";
  }
  // The control: the two definitions are told apart by a changed bit.
  Tensor p = cases[0].to(DType::fp64);
  p.bytes[8 * 0x7FC1 + 1] ^= 1;  // a NaN's payload
  EXPECT_FALSE(p.bytes == elementwise_fp64(cases[0]).bytes);
}

// Tensor::set rounds in integer arithmetic (bf16, fp16) or with the hardware conversion
// (fp32); it must store exactly bf16_bits / fp16_bits / fp32_bits (round_to_dtype, then
// the encoding): every halfway point between neighbours and its two double neighbours,
// every binade from far below the subnormals to past the largest finite, NaN, inf, zeros.
TEST(Tensor, SetRoundsExactlyAsTheDtypeEncoders) {
  std::vector<double> v = {0.0, -0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
                           -std::numeric_limits<double>::max()};
  auto around = [&](double x) {
    v.push_back(x);
    v.push_back(std::nextafter(x, 0.0));
    v.push_back(std::nextafter(x, std::numeric_limits<double>::infinity()));
    v.push_back(-x);
  };
  for (DType t : {DType::bf16, DType::fp16}) {
    const Tensor all = all_patterns(t);
    for (std::uint32_t b = 0; b < 65535; ++b) {
      const double lo = all.get(b), hi = all.get(b + 1);
      if (!std::isfinite(lo) || !std::isfinite(hi) || (b & 0x8000) != ((b + 1) & 0x8000)) continue;
      around(lo);
      around((lo + hi) / 2);  // exact in double: the tie
    }
  }
  const RandomStream rs(11, 5);
  for (std::uint64_t i = 0; i < 200000; ++i) {
    const double u = rs.uniform(i), w = rs.uniform(i, 1);
    around(std::ldexp(1.0 + u, static_cast<int>(w * 300) - 160));  // 2^-160 .. 2^140
    const auto f = static_cast<std::uint32_t>(rs.uniform(i, 2) * 4294967296.0);
    float x;
    std::memcpy(&x, &f, 4);
    if (std::isfinite(x)) around(static_cast<double>(x) + std::ldexp(static_cast<double>(x), -25));  // near fp32 ties
  }
  std::size_t checked = 0;
  for (DType t : {DType::bf16, DType::fp16, DType::fp32}) {
    Tensor out(t, {static_cast<std::int64_t>(v.size())});
    for (std::size_t i = 0; i < v.size(); ++i) out.set(i, v[i]);
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint32_t got = 0, want = 0;
      std::memcpy(&got, out.bytes.data() + i * dtype_size(t), dtype_size(t));
      want = t == DType::bf16 ? bf16_bits(v[i]) : t == DType::fp16 ? fp16_bits(v[i]) : fp32_bits(v[i]);
      ASSERT_EQ(got, want) << dtype_name(t) << " of " << std::hexfloat << v[i];
      ++checked;
    }
  }
  EXPECT_GT(checked, 3000000u);
}

TEST(DType, Bf16RoundingMatchesRoundNearestEvenOnFp32Bits) {
  const RandomStream rs(123, 9);
  for (std::uint64_t i = 0; i < 200000; ++i) {
    // random fp32 bit patterns (finite, non-NaN)
    std::uint32_t bits = static_cast<std::uint32_t>(rs.uniform(i) * 4294967296.0);
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f)) continue;
    const std::uint32_t lsb = (bits >> 16) & 1u;
    const std::uint32_t expect_bits = (bits + 0x7FFFu + lsb) >> 16;  // RNE to upper half
    const std::uint16_t got = bf16_bits(f);
    ASSERT_EQ(got, static_cast<std::uint16_t>(expect_bits)) << "fp32 bits 0x" << std::hex << bits;
  }
}

TEST(DType, Fp16EncodingRoundTripsEveryNonNaNPattern) {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    const double v = fp16_value(b);
    if (std::isnan(v)) continue;
    ASSERT_EQ(fp16_bits(v), b) << "pattern 0x" << std::hex << i;
    ASSERT_EQ(round_to_dtype(v, DType::fp16), v);
  }
}

TEST(DType, RoundToNearestEvenEdgeCases) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(round_to_dtype(65504.0, DType::fp16), 65504.0);
  EXPECT_EQ(round_to_dtype(65519.0, DType::fp16), 65504.0);
  EXPECT_EQ(round_to_dtype(65520.0, DType::fp16), inf);  // halfway to 2^16: ties to even -> overflow
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), DType::fp16), std::ldexp(1.0, -24));  // min subnormal
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -25), DType::fp16), 0.0);                   // tie -> even (0)
  EXPECT_EQ(round_to_dtype(3 * std::ldexp(1.0, -26), DType::fp16), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8), DType::bf16), 1.0);  // tie -> even
  EXPECT_EQ(round_to_dtype(1.0 + 3 * std::ldexp(1.0, -8), DType::bf16), 1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -24), DType::fp32), 1.0);
  EXPECT_EQ(round_to_dtype(-1e39, DType::bf16), -inf);
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::bf16)));
  EXPECT_EQ(dtype_unit_roundoff(DType::bf16), std::ldexp(1.0, -8));
}

TEST(Random, StreamIsAPureFunctionOfSeedStreamAndIndex) {
  const RandomStream a(7, 1), b(7, 1), c(7, 2), d(8, 1);
  EXPECT_EQ(a.normal(12345), b.normal(12345));
  EXPECT_NE(a.normal(12345), c.normal(12345));
  EXPECT_NE(a.normal(12345), d.normal(12345));
  // Known answers: these exact bits must come out on every machine and compiler.
  EXPECT_EQ(a.uniform(0), 0x1.ad4c4ae7p-1);
  EXPECT_EQ(a.normal(0), 0x1.8efdfc1cp-2);
  double mean = 0, var = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double z = a.normal(i);
    mean += z;
    var += z * z;
  }
  EXPECT_NEAR(mean / n, 0.0, 0.02);
  EXPECT_NEAR(var / n, 1.0, 0.02);
}

TEST(FixtureErrors, MissingFileNamesThePathAndTheFix) {
  try {
    read_fixture_info("/nonexistent/rmsnorm.h5");
    FAIL() << "no exception";
  } catch (const FixtureError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/nonexistent/rmsnorm.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("Fix:"), std::string::npos) << m;
  }
}

TEST(FixtureErrors, MissingDatasetNamesTheField) {
  const std::string path = temp_path("one.h5");
  write_tensors(path, {{"x", Tensor(DType::bf16, {4})}});
  try {
    read_tensor(path, "y");
    FAIL() << "no exception";
  } catch (const FixtureError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'y'"), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << m;
  }
}

TEST(FixtureErrors, UnwritableDestinationLeavesNoFileBehind) {
  EXPECT_THROW(write_tensors("/nonexistent-dir/x.h5", {{"x", Tensor(DType::bf16, {4})}}), FixtureError);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/x.h5"));
  // The temporary file is written, then the rename fails (the destination is a folder):
  // the temporary must be removed and the destination left as it was.
  const std::string dest = temp_path("occupied.h5");
  std::filesystem::create_directories(dest);
  EXPECT_ANY_THROW(write_tensors(dest, {{"x", Tensor(DType::bf16, {4})}}));
  EXPECT_TRUE(std::filesystem::is_directory(dest));
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(dest).parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
}

}  // namespace
}  // namespace numgate
