// The loop arithmetic (codegen/strided.h) that lets copies, conversions, upsamples and
// pointwise ops run in boxes under a binding limit: reshape_loop, upsample_loop,
// physical_order and split_boxes' tiles, each checked by enumerating every element.
#include "codegen/strided.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace strata::codegen {
namespace {

using Pairs = std::vector<std::pair<uint64_t, uint64_t>>;

// (operand 0 offset, operand 1 offset) of every index of `loop`, in its order.
Pairs visit(const StridedLoop& loop) {
  Pairs out;
  std::vector<int64_t> index(loop.shape.size(), 0);
  const int64_t n = num_elements(loop.shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    for (size_t d = loop.shape.size(); d-- > 0;) index[d] = rest % loop.shape[d], rest /= loop.shape[d];
    out.emplace_back(loop_offset(loop.strides[0], index), loop_offset(loop.strides[1], index));
  }
  return out;
}

// The physical offset of logical row-major element i of a view.
uint64_t offset_of(const Shape& shape, const std::vector<int64_t>& strides, int64_t i) {
  uint64_t at = 0;
  for (size_t d = shape.size(); d-- > 0;) at += static_cast<uint64_t>(i % shape[d] * strides[d]), i /= shape[d];
  return at;
}

TEST(StridedLoops, ReshapeLoopStepsThroughBothViewsInLogicalOrder) {
  struct Case {
    Shape xs;
    std::vector<int64_t> sx;
    Shape ys;
    std::vector<int64_t> sy;
  };
  const Case cases[] = {
      // nhwc [1, 5, 3, 4] (channels innermost) -> logical [1, 5, 12]: the attention's reshape.
      {{1, 5, 3, 4}, {60, 1, 20, 5}, {1, 5, 12}, {60, 12, 1}},
      // logical [6, 4] -> nhwc-padded [1, 3, 2, 4] (4 slots of 3 channels).
      {{6, 4}, {4, 1}, {1, 3, 2, 4}, {32, 1, 16, 4}},
      // [2, 6] column-major -> [2, 3, 2] row-major: the 6 splits into 3 x 2.
      {{2, 6}, {1, 2}, {2, 3, 2}, {6, 2, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.xs) + " -> " + shape_str(c.ys));
    const auto loop = reshape_loop(c.xs, c.sx, c.ys, c.sy);
    ASSERT_TRUE(loop.has_value());
    Pairs expected;
    for (int64_t i = 0; i < num_elements(c.xs); ++i)
      expected.emplace_back(offset_of(c.xs, c.sx, i), offset_of(c.ys, c.sy, i));
    EXPECT_EQ(visit(*loop), expected);
  }
  // Neither view collapses and 6 against 4 has no common refinement; counts differ.
  EXPECT_FALSE(reshape_loop({4, 6}, {1, 4}, {6, 4}, {1, 6}).has_value());
  EXPECT_FALSE(reshape_loop({2, 3}, {3, 1}, {4}, {1}).has_value());
}

TEST(StridedLoops, UpsampleLoopReadsTheNearestSource) {
  // x nhwc [1, 3, 2, 5] -> y nhwc [1, 3, 4, 15] by factors (2, 3).
  const Shape xs{1, 3, 2, 5}, ys{1, 3, 4, 15};
  const std::vector<int64_t> sx{30, 1, 15, 3}, sy{180, 1, 45, 3}, f{1, 1, 2, 3};
  const StridedLoop loop = upsample_loop(ys, f, sx, sy);
  std::set<std::pair<uint64_t, uint64_t>> expected;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t w = 0; w < 15; ++w)
        expected.emplace(static_cast<uint64_t>(c * sx[1] + h / 2 * sx[2] + w / 3 * sx[3]),
                         static_cast<uint64_t>(c * sy[1] + h * sy[2] + w * sy[3]));
  const Pairs got = visit(loop);
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::set(got.begin(), got.end()), expected);
}

TEST(StridedLoops, PhysicalOrderVisitsTheSameElementsOuterStridesFirst) {
  // A transpose [4, 6] -> [6, 4] read in the output's logical order.
  const StridedLoop loop{{6, 4}, {{1, 6}, {4, 1}}};
  const StridedLoop by_src = physical_order(loop, 0);
  const Pairs a = visit(loop), b = visit(by_src);
  EXPECT_EQ(std::set(a.begin(), a.end()), std::set(b.begin(), b.end()));
  EXPECT_EQ(by_src.strides[0], (std::vector<int64_t>{6, 1}));  // source memory order
}

TEST(StridedLoops, SplitBoxesTileBothDimsOfATranspose) {
  // [A = 40, B = 30] -> its transpose: a box of a × b spans about b·40 source and a·30
  // destination elements. With 400 of each allowed the tiles are 13 × 10: 4 × 3 boxes
  // (one index of the outer dim at a time would take 40 × 3).
  const StridedLoop loop{{40, 30}, {{1, 40}, {30, 1}}};
  const auto boxes = split_boxes(loop, {400, 400});
  ASSERT_FALSE(boxes.empty());
  EXPECT_LE(boxes.size(), 12u);
  std::vector<int> seen(40 * 30, 0);
  for (const LoopBox& box : boxes) {
    for (size_t k = 0; k < 2; ++k) EXPECT_LE(box_span(loop.strides[k], box.shape), 400u);
    for (int64_t a = 0; a < box.shape[0]; ++a)
      for (int64_t b = 0; b < box.shape[1]; ++b) ++seen[static_cast<size_t>((box.origin[0] + a) * 30 + box.origin[1] + b)];
  }
  for (int s : seen) ASSERT_EQ(s, 1);
  // One element per box is the least; a stride-0 operand (a broadcast) spans one.
  const StridedLoop broadcast{{7, 9}, {{9, 1}, {0, 0}}};
  EXPECT_EQ(split_boxes(broadcast, {1, 1}).size(), 63u);
  EXPECT_EQ(split_boxes(broadcast, {9, 1}).size(), 7u);
}

}  // namespace
}  // namespace strata::codegen
