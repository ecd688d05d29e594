// The op descriptors: every registered one is coherent, agrees with the fixtures and the
// oracles, and splits its row-wise tensors into whole rows for every declared case
// (committed and production: only shapes, no data); an incoherent descriptor is refused
// with a message naming what is wrong. Then the row-by-row replay's report rows
// (tests/gpu/rows_alone.h), host code that needs no GPU.
#include <gtest/gtest.h>

#include <cstring>

#include "../gpu/rows_alone.h"
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
        if (t.layout == Layout::rows || t.layout == Layout::row_indexed)
          EXPECT_EQ(n % rows, 0) << d.name << "/" << c.name << " " << t.name << " (" << layout_name(t.layout) << ")";
        if (t.layout == Layout::per_column) EXPECT_EQ(t.shape(c).size(), 1u) << d.name << "/" << c.name << " " << t.name;
      }
      EXPECT_EQ(d.row_split_problem(c), "");  // what the row-by-row replay checks
    }
  }
}

// The split check above can fail: a row_indexed (or rows) tensor that is not a whole
// number of rows is named, a whole one is not.
TEST(Descriptor, ARowIndexedTensorThatDoesNotSplitIntoRowsIsNamed) {
  OpDescriptor d{"split",
                 1,
                 {{"x", Role::input, Layout::rows, DTypeRule::case_dtype, case_shape(), "x [tokens, vocab]"},
                  {"t", Role::index_input, Layout::row_indexed, DTypeRule::i64,
                   [](const CaseSpec& c) { return std::vector<std::int64_t>{c.shape.at(0)}; }, "[tokens]"},
                  {"lse", Role::output, Layout::row_indexed, DTypeRule::case_dtype,
                   [](const CaseSpec& c) { return std::vector<std::int64_t>{c.shape.at(0)}; }, "[tokens]"},
                  {"loss", Role::output, Layout::whole, DTypeRule::case_dtype, fixed_shape({1}), "[1]"}},
                 {{"Forward", {"x", "t"}, {"lse", "loss"}}},
                 [](const CaseSpec& c) { return rows_of(c.shape); }};
  ASSERT_EQ(d.problems(), "");
  CaseSpec c;
  c.name = "fp32_4x8_seed1";
  c.shape = {4, 8};
  EXPECT_EQ(d.row_split_problem(c), "");  // control: loss [1] is whole, never split
  EXPECT_STREQ(layout_name(Layout::row_indexed), "row indexed");
  d.tensors[2].shape = fixed_shape({5});  // lse of 5 elements for 4 rows
  EXPECT_EQ(d.row_split_problem(c),
            "op split, case fp32_4x8_seed1: tensor lse (row indexed) of 5 elements does not split into 4 rows");
  d.tensors[2].shape = fixed_shape({4});
  d.tensors[3].layout = Layout::row_indexed;  // the [1] loss declared row-indexed: refused
  EXPECT_NE(d.row_split_problem(c).find("tensor loss (row indexed) of 1 elements does not split into 4 rows"),
            std::string::npos)
      << d.row_split_problem(c);
  c.shape = {0, 8};
  EXPECT_NE(d.row_split_problem(c).find("0 rows"), std::string::npos) << d.row_split_problem(c);
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

// ---- the row-by-row replay's findings (tests/gpu/rows_alone.h) ---------------------------
// Its device side needs a GPU; what reaches the report is host code, checked here.

namespace numgate {
namespace {

using testing::RowsAloneFindings;

Tensor iota_tensor(DType t, std::vector<std::int64_t> shape) {
  Tensor x(t, std::move(shape));
  for (std::size_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(i));
  return x;
}

TEST(RowsAloneFindings, EqualSlicesGiveNoRowAndCountTheComparisons) {
  const Tensor batched = iota_tensor(DType::fp32, {4, 3});
  RowsAloneFindings f;
  for (std::int64_t r = 0; r < 4; ++r)
    EXPECT_TRUE(f.compare("y", batched, 4, r, batched.bytes.data() + r * 3 * sizeof(float)));
  EXPECT_TRUE(f.clean());
  EXPECT_TRUE(f.report_rows().empty());
  EXPECT_EQ(f.comparisons(), 4);
  EXPECT_EQ(f.differing(), 0);
  EXPECT_EQ(f.note(4), "row-wise outputs (Layout::rows, Layout::row_indexed) of the first 4 row(s), each launched "
                       "alone: bitwise equal to the batched launch (4 comparisons); guard bands, workspace and inputs "
                       "intact");
  EXPECT_NE(RowsAloneFindings().note(2).find("0 comparisons"), std::string::npos);
}

TEST(RowsAloneFindings, ADifferingRowIsAFailRowNamingRowAndElement) {
  const Tensor batched = iota_tensor(DType::fp32, {4, 3});
  Tensor alone = iota_tensor(DType::fp32, {3});
  for (std::size_t i = 0; i < 3; ++i) alone.set(i, static_cast<double>(6 + i));  // row 2 of batched
  RowsAloneFindings f;
  EXPECT_TRUE(f.compare("y", batched, 4, 2, alone.bytes.data()));  // control
  alone.set(1, -1.0);
  EXPECT_FALSE(f.compare("y", batched, 4, 2, alone.bytes.data()));
  EXPECT_EQ(f.comparisons(), 2);
  EXPECT_EQ(f.differing(), 1);
  const auto rows = f.report_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].tensor, "y (rows alone)");
  EXPECT_EQ(rows[0].verdict, Verdict::fail);
  EXPECT_FALSE(rows[0].target_structure.ok);
  EXPECT_NE(rows[0].target_structure.message.find("row 2 launched alone differs from the batched launch, first at "
                                                  "element [2, 1] (element 1 of the row): -1.000000 alone vs "
                                                  "7.000000 batched"),
            std::string::npos)
      << rows[0].target_structure.message;
  EXPECT_NE(f.note(4).find("1 of 2 comparisons DIFFER"), std::string::npos) << f.note(4);
  EXPECT_EQ(f.note(4).find("bitwise equal"), std::string::npos) << f.note(4);
}

TEST(RowsAloneFindings, RowIndexedWriteOutsideItsSliceIsAFinding) {
  const Tensor batched = iota_tensor(DType::bf16, {4});  // lse [tokens]: one element per row
  std::vector<unsigned char> whole(batched.bytes.size(), 0xFF);
  std::memcpy(whole.data() + 2 * 2, batched.bytes.data() + 2 * 2, 2);  // row 2 wrote its element
  RowsAloneFindings f;
  EXPECT_TRUE(f.compare("lse", batched, 4, 2, whole.data() + 2 * 2));
  EXPECT_TRUE(f.untouched_outside("lse", batched, 4, 2, whole, 0xFF));  // control
  EXPECT_TRUE(f.clean());
  whole[0] = 0;  // and element 0, another row's
  EXPECT_FALSE(f.untouched_outside("lse", batched, 4, 2, whole, 0xFF));
  const auto rows = f.report_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].tensor, "lse (rows alone)");
  EXPECT_NE(rows[0].target_structure.message.find("row 2 launched alone wrote outside its own slice, first at "
                                                  "element [0]"),
            std::string::npos)
      << rows[0].target_structure.message;
  EXPECT_NE(f.note(4).find("1 other finding(s)"), std::string::npos) << f.note(4);
}

TEST(RowsAloneFindings, MemoryProblemsAndErrorsAreFailRows) {
  RowsAloneFindings f;
  f.memory_problem("x", "Forward, row 3 launched alone", "out-of-bounds write after the end");
  f.memory_problem("x", "Forward, row 4 launched alone", "input x was modified");
  f.error({"loss", "lse"}, "kernel launch: invalid argument");
  const auto rows = f.report_rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].tensor, "x (rows alone)");
  EXPECT_EQ(rows[0].target_structure.message,
            "2 finding(s): Forward, row 3 launched alone: out-of-bounds write after the end; Forward, row 4 launched "
            "alone: input x was modified");
  EXPECT_EQ(rows[1].tensor, "loss (rows alone)");
  EXPECT_EQ(rows[2].tensor, "lse (rows alone)");
  for (const auto& r : rows) EXPECT_EQ(r.verdict, Verdict::fail) << r.tensor;
  EXPECT_NE(rows[2].target_structure.message.find("could not complete: kernel launch: invalid argument"),
            std::string::npos);
  EXPECT_EQ(f.messages().size(), 4u);
  EXPECT_NE(f.note(16).find("4 other finding(s)"), std::string::npos) << f.note(16);
}

}  // namespace
}  // namespace numgate
