// Value coverage by rule (issue 10, item 4): every op's checklist (Op::value_coverage, in
// its case file) covers each property of numgate/coverage.h for every gated tensor, and
// every item naming a case is true OF THAT CASE: the case is declared, small enough to
// materialize here, and its named tensor has the property (has_property). A case list or
// pattern change that loses a property fails here, with the item and the case.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "mutant_testbed.h"
#include "numgate/coverage.h"

namespace numgate {
namespace {

const ValueProperty kOutputProperties[] = {ValueProperty::exact_zero_row, ValueProperty::exact_zero_column,
                                           ValueProperty::subnormal_result, ValueProperty::cancellation,
                                           ValueProperty::near_overflow};

TEST(ValueCoverage, EveryGatedTensorHasEveryItemDeclared) {
  for (const auto& op : all_ops()) {
    const auto items = op->value_coverage();
    std::set<std::pair<std::string, ValueProperty>> seen;
    for (const CoverageItem& it : items) {
      EXPECT_TRUE(seen.insert({it.tensor, it.property}).second)
          << op->name() << ": item " << it.tensor << " " << property_name(it.property) << " declared twice";
      EXPECT_NE(it.case_name.empty(), it.not_applicable.empty())
          << op->name() << ": item " << it.tensor << " " << property_name(it.property)
          << " must name either a covering case or why it does not apply";
      const TensorDecl& d = op->descriptor().tensor(it.tensor);  // throws for an unknown tensor
      const bool gated = d.role == Role::output || d.role == Role::gradient;
      EXPECT_EQ(gated, !is_input_property(it.property))
          << op->name() << ": " << property_name(it.property) << " is a property of "
          << (is_input_property(it.property) ? "an input" : "a gated tensor") << ", not of " << it.tensor;
    }
    for (const auto& t : op->output_names())
      for (ValueProperty p : kOutputProperties)
        EXPECT_TRUE(seen.count({t, p})) << op->name() << ": no checklist item " << t << " " << property_name(p)
                                        << " (name the covering case, or why it does not apply)";
  }
}

TEST(ValueCoverage, EveryNamedCaseHasItsProperty) {
  std::int64_t checked = 0, not_applicable = 0;
  for (const auto& op : all_ops()) {
    std::map<std::string, CaseSpec> declared;
    for (const CaseSpec& c : op->cases()) declared[c.name] = c;
    std::map<std::string, CaseData> materialized;
    std::cout << "[ value coverage ] " << op->name() << ":";
    for (const CoverageItem& it : op->value_coverage()) {
      if (it.case_name.empty()) {
        ++not_applicable;
        continue;
      }
      const auto d = declared.find(it.case_name);
      if (d == declared.end()) {
        ADD_FAILURE() << op->name() << ": item " << it.tensor << " " << property_name(it.property)
                      << " names case '" << it.case_name << "', which the op does not declare";
        continue;
      }
      if (d->second.production && static_cast<std::size_t>(numel(d->second.shape)) > kSmallGeneratedCaseElements) {
        ADD_FAILURE() << op->name() << ": item " << it.tensor << " " << property_name(it.property) << " names case '"
                      << it.case_name << "' of " << numel(d->second.shape) << " elements: name one of at most "
                      << kSmallGeneratedCaseElements << " (checked on the CPU)";
        continue;
      }
      auto m = materialized.find(it.case_name);
      if (m == materialized.end()) m = materialized.emplace(it.case_name, materialize(*op, d->second)).first;
      std::string where;
      const bool ok = has_property(*op, m->second, it.tensor, it.property, where);
      EXPECT_TRUE(ok) << op->name() << ": case " << it.case_name << " does not have " << it.tensor << " "
                      << property_name(it.property) << ": " << where;
      ++checked;
    }
    std::cout << " " << materialized.size() << " cases\n";
  }
  std::cout << "[ value coverage ] " << checked << " items checked on their cases, " << not_applicable
            << " declared not applicable\n";
  EXPECT_GT(checked, 0);
}

// An item declared not applicable must be true of every case: no committed or small
// generated case of the op may have the property (else the reason given is false).
TEST(ValueCoverage, NoCaseHasAPropertyDeclaredNotApplicable) {
  std::int64_t checked = 0;
  for (const auto& op : all_ops()) {
    std::vector<CoverageItem> na;
    for (const CoverageItem& it : op->value_coverage())
      if (it.case_name.empty()) na.push_back(it);
    if (na.empty()) continue;
    std::vector<CaseData> cases = testing::committed_cases_of(op->name());
    for (auto& c : testing::small_generated_cases_of(op->name(), kSmallGeneratedCaseElements)) cases.push_back(std::move(c));
    for (const CoverageItem& it : na)
      for (const CaseData& c : cases) {
        std::string where;
        ++checked;
        EXPECT_FALSE(has_property(*op, c, it.tensor, it.property, where))
            << op->name() << ": " << it.tensor << " " << property_name(it.property) << " is declared not applicable ("
            << it.not_applicable << "), but case " << c.spec.name << " has it: " << where;
      }
  }
  EXPECT_GT(checked, 0);
}

// The property checks can fail: a plain normal-pattern case has no exact-zero row, no tie,
// no zero weight, no very negative row and nothing near overflow.
TEST(ValueCoverage, ThePropertyChecksCanFail) {
  const Op& op = find_op("rmsnorm");
  CaseSpec plain;
  for (const CaseSpec& c : op.cases())
    if (c.pattern == "normal" && !c.production) { plain = c; break; }
  ASSERT_FALSE(plain.name.empty());
  const CaseData c = materialize(op, plain);
  std::string where;
  for (ValueProperty p : {ValueProperty::exact_zero_row, ValueProperty::exact_zero_column, ValueProperty::near_overflow,
                          ValueProperty::subnormal_result, ValueProperty::cancellation})
    EXPECT_FALSE(has_property(op, c, "y", p, where)) << property_name(p) << ": " << where;
  for (ValueProperty p : {ValueProperty::tie_at_max, ValueProperty::zero_weight, ValueProperty::very_negative_row})
    EXPECT_FALSE(has_property(op, c, p == ValueProperty::zero_weight ? "w" : "x", p, where)) << property_name(p) << ": " << where;
  EXPECT_FALSE(has_property(op, c, "nonexistent", ValueProperty::subnormal_result, where));
}

}  // namespace
}  // namespace numgate
