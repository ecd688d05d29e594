// The shape helpers of numgate/tensor.h: one implementation each of numel, rows_of and the
// three shape spellings (case names, messages, Tensor::shape_str).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "numgate/tensor.h"

namespace numgate {
namespace {

TEST(Shapes, NumelIsTheProductOfTheExtents) {
  EXPECT_EQ(numel({}), 1);  // a scalar
  EXPECT_EQ(numel({7}), 7);
  EXPECT_EQ(numel({8, 4097}), 8 * 4097);
  EXPECT_EQ(numel({4, 8, 4096, 4096}), std::int64_t{4} * 8 * 4096 * 4096);
  EXPECT_EQ(numel({3, 0, 5}), 0);
  EXPECT_EQ(numel({std::int64_t{1} << 31, std::int64_t{1} << 31}), std::int64_t{1} << 62);
  EXPECT_EQ(Tensor(DType::bf16, {3, 5}).numel(), 15u);
}

TEST(Shapes, NumelNeverWraps) {
  try {
    numel({std::int64_t{1} << 32, std::int64_t{1} << 32});
    FAIL() << "accepted";
  } catch (const std::overflow_error& e) {
    EXPECT_STREQ(e.what(), "shape [4294967296, 4294967296] has more than 2^63 - 1 elements");
  }
  EXPECT_THROW(numel({INT64_MAX, 2}), std::overflow_error);
  EXPECT_EQ(numel({INT64_MAX, 1}), INT64_MAX);
  try {
    numel({2, -3});
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "negative extent in shape [2, -3]");
  }
  // A negative extent is refused even where the product would be 0.
  EXPECT_THROW(numel({0, -1}), std::invalid_argument);
}

TEST(Shapes, RowsOfIsTheProductOfTheLeadingExtents) {
  EXPECT_EQ(rows_of({}), 1);
  EXPECT_EQ(rows_of({4097}), 1);
  EXPECT_EQ(rows_of({8, 4097}), 8);
  EXPECT_EQ(rows_of({4, 4096, 32, 128}), 4 * 4096 * 32);
  EXPECT_EQ(rows_of({2, -1}), 2);  // the last extent is not a row extent
  EXPECT_THROW(rows_of({-2, 5}), std::invalid_argument);
  EXPECT_THROW(rows_of({std::int64_t{1} << 32, std::int64_t{1} << 32, 1}), std::overflow_error);
}

TEST(Shapes, EachSpellingIsFixed) {
  EXPECT_EQ(dims_str({8, 4097}), "8x4097");  // case names: fixture keys
  EXPECT_EQ(dims_str({4, 8, 4096, 4096}), "4x8x4096x4096");
  EXPECT_EQ(dims_str({}), "");
  EXPECT_EQ(shape_to_string({8, 4097}), "[8, 4097]");
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(Tensor(DType::fp32, {8, 4097}).shape_str(), "8x4097");
  EXPECT_EQ(Tensor(DType::fp32, {}).shape_str(), "scalar");
}

}  // namespace
}  // namespace numgate
