// The case builder (numgate::Case, fixtures/include/numgate/op.h) and every op's case list
// built with it: names derived one way, unique per op, every case placed.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "numgate/op.h"

namespace numgate {
namespace {

TEST(CaseBuilder, NameIsDtypeDimsPatternUnlessNormalSeed) {
  const Case c = Case().param("eps", 1e-6);
  EXPECT_EQ(CaseSpec(c(DType::bf16, {8, 4097}, 7).committed()).name, "bf16_8x4097_seed7");
  const CaseSpec s = c(DType::fp16, {2, 3, 40}, 12).pattern("spiky").description("why").production();
  EXPECT_EQ(s.name, "fp16_2x3x40_spiky_seed12");
  EXPECT_EQ(s.dtype, DType::fp16);
  EXPECT_EQ(s.shape, (std::vector<std::int64_t>{2, 3, 40}));
  EXPECT_EQ(s.seed, 12u);
  EXPECT_EQ(s.pattern, "spiky");
  EXPECT_EQ(s.description, "why");
  EXPECT_TRUE(s.production);
  EXPECT_EQ(s.gate, GateParams{});
}

TEST(CaseBuilder, ParamsKeepTheDefaultsOrderAndNamePartsComeFromFields) {
  const Case c = Case()
                     .param("a", 1)
                     .required_param("b")
                     .param("c", 3)
                     .ulp_limit(1)
                     .tensor_ulp_limit("residual_out", 0)
                     .name_parts({param_part("b", [](double b) { return b ? "_on" : "_off"; })},
                                 {param_part("c", [](double v) { return "_c" + std::to_string(int(v)); }),
                                  pattern_always(), param_part("absent", [](double) { return "_never"; })});
  const CaseSpec s = c(DType::fp32, {1, 1}, 3).param("c", 5).param("b", 1).param("d", 4).committed();
  EXPECT_EQ(s.name, "fp32_on_1x1_c5_normal_seed3");
  ASSERT_EQ(s.params.size(), 4u);
  EXPECT_EQ(s.params[0], (std::pair<std::string, double>{"a", 1}));
  EXPECT_EQ(s.params[1], (std::pair<std::string, double>{"b", 1}));
  EXPECT_EQ(s.params[2], (std::pair<std::string, double>{"c", 5}));
  EXPECT_EQ(s.params[3], (std::pair<std::string, double>{"d", 4}));
  EXPECT_FALSE(s.production);
  EXPECT_EQ(s.gate.ulp_limit, 1);
  EXPECT_EQ(s.gate.ulp_limit_for("residual_out"), 0);
}

TEST(CaseBuilder, RefusesAnUnplacedCaseAnUnsetRequiredParamAndMissingFields) {
  const Case c = Case().required_param("scale");
  EXPECT_THROW(CaseSpec(c(DType::bf16, {1, 1}, 1).param("scale", 1)), std::logic_error);  // neither
  EXPECT_THROW(CaseSpec(c(DType::bf16, {1, 1}, 1).committed()), std::logic_error);        // scale unset
  EXPECT_THROW(CaseSpec(Case().committed()), std::logic_error);                           // no dtype/shape/seed
  EXPECT_NO_THROW(CaseSpec(c(DType::bf16, {1, 1}, 1).param("scale", 1).committed()));
}

// Every op's list: unique names, each of the builder's form "<dtype>..._<dims>..._seed<seed>"
// with the pattern in it where not "normal", a description, and at least one committed case.
TEST(CaseLists, NamesAreUniqueAndBuiltFromTheFields) {
  for (const auto& op : all_ops()) {
    std::set<std::string> names;
    int committed = 0;
    for (const CaseSpec& c : op->cases()) {
      SCOPED_TRACE(op->name() + "/" + c.name);
      EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name";
      const std::string dtype(dtype_name(c.dtype)), dims = "_" + dims_str(c.shape) + "_",
                        seed = "_seed" + std::to_string(c.seed);
      EXPECT_EQ(c.name.rfind(dtype, 0), 0u) << "does not start with the dtype";
      ASSERT_GE(c.name.size(), seed.size());
      EXPECT_EQ(c.name.substr(c.name.size() - seed.size()), seed) << "does not end with the seed";
      EXPECT_NE((c.name + "_").find(dims), std::string::npos) << "does not hold the dims";
      if (c.pattern != "normal") EXPECT_NE(c.name.find("_" + c.pattern + "_"), std::string::npos) << "no pattern";
      EXPECT_FALSE(c.description.empty());
      committed += !c.production;
    }
    EXPECT_GT(committed, 0) << op->name() << " has no committed case";
  }
}

}  // namespace
}  // namespace numgate
