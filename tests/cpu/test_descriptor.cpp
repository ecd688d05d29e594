// The op descriptors: every registered one is coherent, agrees with the fixtures and the
// oracles, and splits its row-wise tensors into whole rows for every declared case
// (committed and production: only shapes, no data); an incoherent descriptor is refused
// with a message naming what is wrong.
#include <gtest/gtest.h>

#include "committed.h"
#include "numgate/fixture_file.h"
#include "numgate/op.h"

namespace numgate {
namespace {

TEST(Descriptor, EveryRegisteredOpIsCoherent) {
  ASSERT_FALSE(all_ops().empty());
  for (const auto& op : all_ops()) {
    EXPECT_EQ(op->descriptor().problems(), "") << op->name();
    EXPECT_FALSE(op->input_names().empty()) << op->name();
    EXPECT_FALSE(op->output_names().empty()) << op->name();
  }
}

TEST(Descriptor, RegistryIsSortedByNameWithoutDuplicates) {
  for (std::size_t i = 1; i < all_ops().size(); ++i) EXPECT_LT(all_ops()[i - 1]->name(), all_ops()[i]->name());
}

TEST(Descriptor, RowWiseTensorsSplitIntoWholeRowsForEveryDeclaredCase) {
  for (const auto& op : all_ops()) {
    const OpDescriptor& d = op->descriptor();
    for (const CaseSpec& c : op->cases()) {
      const std::int64_t rows = d.rows(c);
      ASSERT_GT(rows, 0) << d.name << "/" << c.name;
      for (const TensorDecl& t : d.tensors) {
        const std::int64_t n = numel(t.shape(c));
        if (t.layout == Layout::rows) EXPECT_EQ(n % rows, 0) << d.name << "/" << c.name << " " << t.name;
        if (t.layout == Layout::per_column) EXPECT_EQ(t.shape(c).size(), 1u) << d.name << "/" << c.name << " " << t.name;
      }
    }
  }
}

TEST(Descriptor, CommittedFixturesHoldTheDeclaredShapesAndDtypes) {
  for (const auto& cc : testing::committed_cases()) {
    const CaseData attrs = read_case_attributes(cc.file, cc.name);
    const OpDescriptor& d = find_op(attrs.op).descriptor();
    EXPECT_EQ(attrs.input_names, d.input_names()) << cc;
    EXPECT_EQ(attrs.output_names, d.output_names()) << cc;
    for (const auto& [n, info] : read_case_tensor_info(cc.file, cc.name)) {
      EXPECT_EQ(info.shape, d.tensor(n).shape(attrs.spec)) << cc << " " << n;
      EXPECT_EQ(info.dtype, d.tensor(n).dtype_for(attrs.spec)) << cc << " " << n;
    }
  }
}

// A minimal op whose oracle disagrees with its descriptor: materialize refuses it.
class WrongShapeOp final : public Op {
 public:
  const OpDescriptor& descriptor() const override {
    static const OpDescriptor d{"wrong_shape",
                                1,
                                {{"x", Role::input, Layout::rows, DTypeRule::case_dtype, case_shape(), "x"},
                                 {"y", Role::output, Layout::rows, DTypeRule::case_dtype, case_shape(), "y"}},
                                {{"Forward", {"x"}, {"y"}}},
                                [](const CaseSpec& c) { return rows_of(c.shape); }};
    return d;
  }
  std::vector<CaseSpec> cases() const override { return {}; }
  std::map<std::string, Tensor> make_inputs(const CaseSpec& c) const override { return {{"x", Tensor(c.dtype, c.shape)}}; }
  std::map<std::string, GoldenTensor> golden(const CaseSpec&, const std::map<std::string, Tensor>&) const override {
    GoldenTensor g{Tensor(DType::fp64, {1}), Tensor(DType::fp64, {1}), 1};  // declared: the case shape
    return {{"y", g}};
  }
  std::map<std::string, Tensor> reference(const CaseSpec& c, const std::map<std::string, Tensor>&) const override {
    return {{"y", Tensor(c.dtype, c.shape)}};
  }
};

TEST(Descriptor, AnOracleThatDisagreesWithItsDescriptorIsRefused) {
  CaseSpec c;
  c.name = "bf16_2x3_seed1";
  c.shape = {2, 3};
  try {
    materialize(WrongShapeOp{}, c);
    FAIL() << "accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("golden/y has shape [1], declared [2, 3]"), std::string::npos) << e.what();
  }
}

TEST(Descriptor, IncoherentDeclarationsAreNamed) {
  auto base = [] {
    return OpDescriptor{"broken",
                        1,
                        {{"x", Role::input, Layout::rows, DTypeRule::case_dtype, case_shape(), "x"},
                         {"idx", Role::index_input, Layout::whole, DTypeRule::i64, fixed_shape({2}), "idx"},
                         {"y", Role::output, Layout::rows, DTypeRule::case_dtype, case_shape(), "y"}},
                        {{"Forward", {"x", "idx"}, {"y"}}},
                        [](const CaseSpec& c) { return rows_of(c.shape); }};
  };
  EXPECT_EQ(base().problems(), "");  // control
  struct Damage {
    const char* expect;
    std::function<void(OpDescriptor&)> apply;
  } damages[] = {
      {"reads undeclared 'z'", [](OpDescriptor& d) { d.passes[0].reads.push_back("z"); }},
      {"writes input 'x'", [](OpDescriptor& d) { d.passes[0].writes.push_back("x"); }},
      {"output 'y' is written by no pass", [](OpDescriptor& d) { d.passes[0].writes.clear(); }},
      {"index inputs, and only they, are i64", [](OpDescriptor& d) { d.tensors[1].dtype = DTypeRule::case_dtype; }},
      {"declared twice", [](OpDescriptor& d) { d.tensors.push_back(d.tensors[0]); }},
      {"declared after an output", [](OpDescriptor& d) { std::swap(d.tensors[1], d.tensors[2]); }},
      {"has no shape function", [](OpDescriptor& d) { d.tensors[0].shape = nullptr; }},
      {"no rows function", [](OpDescriptor& d) { d.rows = nullptr; }},
      {"written by two passes", [](OpDescriptor& d) { d.passes.push_back({"Again", {"x"}, {"y"}}); }},
  };
  for (const auto& dm : damages) {
    OpDescriptor d = base();
    dm.apply(d);
    EXPECT_NE(d.problems().find(dm.expect), std::string::npos) << dm.expect << " not in: " << d.problems();
  }
}

// Gate 1's declarations (TensorDecl::of, not_differentiated) are checked as well.
TEST(Descriptor, IncoherentGradientDeclarationsAreNamed) {
  auto base = [] {
    const DTypeRule T = DTypeRule::case_dtype;
    return OpDescriptor{"broken_backward",
                        1,
                        {{"x", Role::input, Layout::rows, T, case_shape(), "x"},
                         {"m", Role::input, Layout::rows, T, case_shape(), "mask", {}, "a constant"},
                         {"idx", Role::index_input, Layout::whole, DTypeRule::i64, fixed_shape({2}), "idx"},
                         {"dy", Role::upstream_gradient, Layout::rows, T, case_shape(), "dy", {"y"}},
                         {"y", Role::output, Layout::rows, T, case_shape(), "y"},
                         {"dx", Role::gradient, Layout::rows, T, case_shape(), "dx", {"x"}}},
                        {{"Forward", {"x", "m", "idx"}, {"y"}}, {"Backward", {"x", "dy"}, {"dx"}}},
                        [](const CaseSpec& c) { return rows_of(c.shape); }};
  };
  EXPECT_EQ(base().problems(), "");  // control
  struct Damage {
    const char* expect;
    std::function<void(OpDescriptor&)> apply;
  } damages[] = {
      {"declares no input it is the gradient of", [](OpDescriptor& d) { d.tensors[5].of.clear(); }},
      {"is the gradient of undeclared 'z'", [](OpDescriptor& d) { d.tensors[5].of = {"z"}; }},
      {"(not differentiable)", [](OpDescriptor& d) { d.tensors[5].of = {"idx"}; }},
      {"declared not differentiated", [](OpDescriptor& d) { d.tensors[5].of = {"x", "m"}; }},
      {"differentiable input 'x' has no gradient", [](OpDescriptor& d) { d.tensors[5].of = {}; d.tensors[5].of.push_back("m"); d.tensors[1].not_differentiated.clear(); }},
      {"differentiable input 'm' has no gradient", [](OpDescriptor& d) { d.tensors[1].not_differentiated.clear(); }},
      {"weights undeclared 'q'", [](OpDescriptor& d) { d.tensors[3].of = {"q"}; }},
      {"which is not an output", [](OpDescriptor& d) { d.tensors[3].of = {"dx"}; }},
      {"must weight exactly one output", [](OpDescriptor& d) { d.tensors[3].of.clear(); }},
      {"has two upstream gradients", [](OpDescriptor& d) { TensorDecl t = d.tensors[3]; t.name = "dy2"; d.tensors.insert(d.tensors.begin() + 4, t); }},
      {"only inputs can", [](OpDescriptor& d) { d.tensors[2].not_differentiated = "why"; }},
      {"only gradients, upstream gradients and saved forward outputs", [](OpDescriptor& d) { d.tensors[4].of = {"x"}; }},
  };
  for (const auto& dm : damages) {
    OpDescriptor d = base();
    dm.apply(d);
    EXPECT_NE(d.problems().find(dm.expect), std::string::npos) << dm.expect << " not in: " << d.problems();
  }
}

}  // namespace
}  // namespace numgate
