// Index arithmetic shared by the pointwise and data-movement lowerings: row-major
// strides, numpy broadcast strides, and collapsing an iteration space to the fewest
// dims (so kernels with a RANK define get a small RANK and cheap index math).
#pragma once

#include "ir/types.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace strata::codegen {

// Row-major strides (in elements) of `shape`.
inline std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Strides of an operand of shape `in` (element strides `own`, row major if not
// given) read at every index of `out` under numpy broadcasting: missing leading
// dims and stretched size-1 dims get stride 0.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out, std::vector<int64_t> own = {}) {
  if (own.empty()) own = row_major_strides(in);
  std::vector<int64_t> s(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] == out[d + lead]) s[d + lead] = own[d];
  return s;
}

// An iteration shape and, per operand, the element stride of each dim.
struct StridedLoop {
  Shape shape;
  std::vector<std::vector<int64_t>> strides;  // strides[operand][dim]
};

// The same loop over the fewest dims: size-1 dims dropped, and dims d, d+1 merged
// where every operand steps through d+1 and on into d contiguously
// (stride[d] == stride[d+1] * shape[d+1]). Visits elements in the same order.
// Rank 0 becomes [1] (stride 0).
inline StridedLoop collapse(const StridedLoop& in) {
  StridedLoop out;
  out.strides.resize(in.strides.size());
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (size_t k = 0; merge && k < in.strides.size(); ++k)
      merge = out.strides[k].back() == in.strides[k][d] * in.shape[d];
    if (merge) {
      out.shape.back() *= in.shape[d];
      for (size_t k = 0; k < in.strides.size(); ++k) out.strides[k].back() = in.strides[k][d];
    } else {
      out.shape.push_back(in.shape[d]);
      for (size_t k = 0; k < in.strides.size(); ++k) out.strides[k].push_back(in.strides[k][d]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (auto& s : out.strides) s.push_back(0);
  }
  return out;
}

// One loop stepping through two views of the same logical elements in row-major
// order: x of shape xs (element strides sx) and y of shape ys (strides sy), as a
// reshape between layouts reads and writes them. Each view is collapsed first; then
// the dims are refined from the innermost so that every dim of x and of y is a run of
// whole joint dims (a dim of size 6 against one of 2 becomes 3 × 2). strides[0] are
// x's, strides[1] y's. nullopt when no such refinement exists ([4, 6] against [6, 4],
// both in layouts that do not collapse) or the element counts differ.
inline std::optional<StridedLoop> reshape_loop(const Shape& xs, const std::vector<int64_t>& sx, const Shape& ys,
                                              const std::vector<int64_t>& sy) {
  const StridedLoop x = collapse(StridedLoop{xs, {sx}}), y = collapse(StridedLoop{ys, {sy}});
  StridedLoop inner;  // joint dims, innermost first
  inner.strides.resize(2);
  size_t i = x.shape.size(), j = y.shape.size();
  int64_t rx = 1, ry = 1, stx = 0, sty = 0;  // what is left of the current dims, and their stride
  while (true) {
    if (rx == 1 && i > 0) rx = x.shape[--i], stx = x.strides[0][i];
    if (ry == 1 && j > 0) ry = y.shape[--j], sty = y.strides[0][j];
    if (rx == 1 && ry == 1) break;
    const int64_t t = std::gcd(rx, ry);
    if (t == 1) return std::nullopt;
    inner.shape.push_back(t);
    inner.strides[0].push_back(stx);
    inner.strides[1].push_back(sty);
    rx /= t, ry /= t, stx *= t, sty *= t;
  }
  std::reverse(inner.shape.begin(), inner.shape.end());
  for (auto& s : inner.strides) std::reverse(s.begin(), s.end());
  return collapse(inner);
}

// nearest upsampling of x into y (shape out, factor f[d] per dim) as a copy loop:
// a scaled dim d becomes (out[d] / f, f) with x strides (sx[d], 0) and y strides
// (f · sy[d], sy[d]), so every y element reads its source element. strides[0] are
// x's, strides[1] y's.
inline StridedLoop upsample_loop(const Shape& out, const std::vector<int64_t>& f, const std::vector<int64_t>& sx,
                                 const std::vector<int64_t>& sy) {
  StridedLoop loop;
  loop.strides.resize(2);
  auto add = [&](int64_t n, int64_t a, int64_t b) {
    loop.shape.push_back(n);
    loop.strides[0].push_back(a);
    loop.strides[1].push_back(b);
  };
  for (size_t d = 0; d < out.size(); ++d) {
    if (f[d] == 1) {
      add(out[d], sx[d], sy[d]);
    } else {
      add(out[d] / f[d], sx[d], f[d] * sy[d]);
      add(f[d], 0, sy[d]);
    }
  }
  return collapse(loop);
}

// The same loop with its dims ordered by operand k's strides, largest first (ties
// keep their order), then collapsed: the order memory has, so that split_boxes cuts
// the physically outermost dim and its boxes are few and contiguous. Elements are
// visited in another order; only for loops whose elements are independent (copies,
// pointwise ops).
inline StridedLoop physical_order(const StridedLoop& in, size_t k) {
  std::vector<size_t> order(in.shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return in.strides[k][a] > in.strides[k][b]; });
  StridedLoop out;
  out.strides.resize(in.strides.size());
  for (size_t d : order) {
    out.shape.push_back(in.shape[d]);
    for (size_t o = 0; o < in.strides.size(); ++o) out.strides[o].push_back(in.strides[o][d]);
  }
  return collapse(out);
}

// A box of a loop: its origin (an index per dim) and extents.
struct LoopBox {
  std::vector<int64_t> origin;
  Shape shape;
};

// Element offset of `index` under `strides`.
inline uint64_t loop_offset(const std::vector<int64_t>& strides, const std::vector<int64_t>& index) {
  uint64_t at = 0;
  for (size_t d = 0; d < index.size(); ++d) at += static_cast<uint64_t>(index[d] * strides[d]);
  return at;
}

// Elements from a box's first to its last element under `strides` (inclusive).
inline uint64_t box_span(const std::vector<int64_t>& strides, const Shape& shape) {
  uint64_t span = 1;
  for (size_t d = 0; d < shape.size(); ++d) span += static_cast<uint64_t>((shape[d] - 1) * strides[d]);
  return span;
}

// Splits `loop` into boxes in which every operand k spans at most max_span[k]
// elements, so each box can bind windows no larger than one binding. All boxes but
// those at the loop's far edges have one shape, found from the whole loop by
// shrinking, while some operand's span is too large, the dim that contributes most to
// it: to exactly the extent that fits when the other dims leave room, else to half.
// A transpose thus gets tiles of both dims (few boxes), a row-contiguous value runs of
// its outermost dim. Spans only shrink with extents, so the edge boxes fit too. Boxes
// come in the loop's order (an odometer over the tiles) and cover it exactly once. One
// box (the loop) when it fits whole; empty when not even one element fits
// (max_span 0). Strides must be ≥ 0.
inline std::vector<LoopBox> split_boxes(const StridedLoop& loop, const std::vector<uint64_t>& max_span) {
  const size_t rank = loop.shape.size(), ops = loop.strides.size();
  for (size_t k = 0; k < ops; ++k)
    if (max_span[k] == 0) return {};
  Shape box = loop.shape;
  while (true) {
    size_t over = ops;  // the first operand whose span is too large
    for (size_t k = 0; k < ops && over == ops; ++k)
      if (box_span(loop.strides[k], box) > max_span[k]) over = k;
    if (over == ops) break;
    const std::vector<int64_t>& st = loop.strides[over];
    size_t d = 0;  // the dim contributing most to its span
    for (size_t e = 1; e < rank; ++e)
      if ((box[e] - 1) * st[e] > (box[d] - 1) * st[d]) d = e;
    const uint64_t rest = box_span(st, box) - static_cast<uint64_t>((box[d] - 1) * st[d]);
    if (rest <= max_span[over])
      box[d] = std::min<int64_t>(box[d], static_cast<int64_t>((max_span[over] - rest) / static_cast<uint64_t>(st[d])) + 1);
    else
      box[d] = (box[d] + 1) / 2;
  }
  std::vector<LoopBox> boxes;
  std::vector<int64_t> origin(rank, 0);
  while (true) {
    LoopBox b{origin, box};
    for (size_t d = 0; d < rank; ++d) b.shape[d] = std::min(box[d], loop.shape[d] - origin[d]);
    boxes.push_back(std::move(b));
    size_t d = rank;  // advance the innermost dim by one box, carrying outward
    while (d-- > 0) {
      origin[d] += box[d];
      if (origin[d] < loop.shape[d]) break;
      origin[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return boxes;
  }
}

}  // namespace strata::codegen
