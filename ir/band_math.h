// Band arithmetic for split_bands (passes/) and the banded kernels (codegen/): which
// rows of each stage of a spatially local stretch a horizontal band of the output
// needs. Pure functions on row indices; no graph rewriting here.
//
// A stretch is a chain of row transforms in execution order, from its input (stage 0)
// to its output (stage ops.size()):
//   conv (kernel k, pad p, stride s)  output row r reads input rows [r·s − p, r·s − p + k − 1];
//                                     rows = (in + 2p − k) / s + 1 (floor)
//   upsample (nearest, factor f)      output row r reads input row ⌊r / f⌋; rows = in · f
//   pointwise (norms, activations)    output row r reads input row r; rows = in
//   frame conv (kernel k, pad k/2,    a conv over a stack of frames of R rows (ir/ops.h
//     frame rows R, shift d,          frame_rows): output row r of frame f = ⌊r / R⌋
//     taps n)                         reads rows clamp(r mod R − p + [0, k), 0, R − 1)
//                                     of frames max(f − d − [0, n), 0); rows = in
// A conv_gemm with the nearest-2× gather is {upsample 2, conv k p s}.
//
// Ranges are half-open [begin, end). Walking back from a band's kept output rows, each
// stage's needed rows are the union of the rows the next stage's needed rows read,
// clamped to the frame: rows outside the frame are the real zero padding at the
// frame's edges, which the kernel synthesises, so a band never needs a halo beyond the
// frame. An upsample divides the range, rounding outward (⌊b/f⌋, ⌈e/f⌉).
//
// Why a band reproduces the whole-frame result bit for bit. By induction over the
// stages: the band holds, at stage i, rows [lo_i, hi_i) with exactly the whole-frame
// values. Each needed row r of stage i+1 reads input rows that are either outside the
// frame (zero padding, as in the whole-frame run) or inside the frame and then, by
// construction of the walk back, inside [lo_i, hi_i). So row r is computed by the same
// kernel arithmetic (same taps, same order of accumulation) from the same input
// values, and is identical. The kept output rows are among the needed rows of the last
// stage. The only rows that differ are those a kernel computes beyond a stage's needed
// range (e.g. a kernel that runs over the whole band buffer and pads at the band's
// artificial top or bottom edge as if it were the frame's): such rows lie outside
// [lo_{i+1}, hi_{i+1}), so no needed row of the next stage reads them, and by
// induction they never reach a kept row. Nothing is blended, so there are no seams.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct RowOp {
  enum Kind { conv, upsample, pointwise, frame_conv } kind = pointwise;
  int64_t k = 1, pad = 0, stride = 1, factor = 1;
  int64_t frame = 0, shift = 0;  // frame_conv: rows per frame, temporal shift (newest tap)
  int64_t taps = 1;              // frame_conv: temporal taps (frames shift .. shift + taps − 1 back)

  static RowOp make_conv(int64_t k, int64_t pad, int64_t stride = 1) {
    return RowOp{conv, k, pad, stride, 1};
  }
  static RowOp make_upsample(int64_t factor) { return RowOp{upsample, 1, 0, 1, factor}; }
  static RowOp make_pointwise() { return RowOp{pointwise, 1, 0, 1, 1}; }
  static RowOp make_frame_conv(int64_t k, int64_t pad, int64_t frame, int64_t shift, int64_t taps = 1) {
    return RowOp{frame_conv, k, pad, 1, 1, frame, shift, taps};
  }
};

// The row transforms of a conv_gemm: {upsample f} when its gather upsamples (f > 1),
// then its conv, a frame conv when frame_rows > 0 (in rows of the upsampled image;
// `k` is the kernel's rows, frame_taps temporal taps of k / frame_taps rows each).
std::vector<RowOp> conv_row_ops(int64_t upsample, int64_t k, int64_t pad, int64_t stride, int64_t frame_rows,
                                int64_t frame_shift, int64_t frame_taps = 1);

// Half-open [begin, end); empty when begin >= end.
struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  bool contains(int64_t r) const { return r >= begin && r < end; }
  friend bool operator==(const RowRange&, const RowRange&) = default;
};

// "conv k3 p1 s1", "upsample x2", "pointwise".
std::string describe(const RowOp& op);
// "[8,22)".
std::string describe(const RowRange& r);

// Rows an op produces from `input_rows` rows; 0 when the op is malformed (k, stride or
// factor < 1, pad < 0) or the frame is too small for the kernel.
int64_t output_rows(const RowOp& op, int64_t input_rows);

// Frame rows at every stage: [0] = input_rows, [i+1] = output_rows(ops[i], [i]).
std::vector<int64_t> stage_frame_rows(const std::vector<RowOp>& ops, int64_t input_rows);

// Rows of op's input that output rows `out` read, unclamped (may extend past the frame).
RowRange input_rows_for(const RowOp& op, RowRange out);

// The needed rows at every stage, walking back from `kept_output_rows` (clamped to the
// output frame first): result[i] is the range of op i's input (stage i) a band needs,
// result[ops.size()] the kept output rows. Each range is clamped to its stage's frame.
// An empty kept range gives empty ranges everywhere.
std::vector<RowRange> needed_stage_rows(const std::vector<RowOp>& ops, int64_t input_rows,
                                        RowRange kept_output_rows);

// The rows of the stretch's input (stage 0) that kept_output_rows need:
// needed_stage_rows(...).front().
RowRange needed_rows(const std::vector<RowOp>& ops, int64_t input_rows,
                     RowRange kept_output_rows);

// One stage of a band: op i's input rows.
struct BandStage {
  RowOp op;
  int64_t frame_rows = 0;  // rows of the whole frame at this stage (op's input)
  RowRange rows;           // rows of it the band needs
  // Rows beyond what the op's output range reads without the kernel's extent (conv:
  // [b·s, (e−1)·s + 1); upsample: [⌊b/f⌋, ⌈e/f⌉); pointwise: [b, e)), after clamping.
  int64_t halo_above = 0, halo_below = 0;
};

struct Band {
  int64_t index = 0;
  int64_t output_frame_rows = 0;
  RowRange kept;                  // output rows this band writes
  std::vector<BandStage> stages;  // one per op, in execution order

  // rows[i] of stage i, i in [0, ops.size()]; the last is `kept`.
  RowRange stage_rows(size_t i) const { return i < stages.size() ? stages[i].rows : kept; }
};

// Splits the output rows into bands of max_rows_per_band kept rows, top to bottom (the
// last may be smaller), each with the needed rows at every stage. Deterministic.
// Returns no bands when max_rows_per_band < 1, an op is malformed or the output frame
// is empty. A frame of at most max_rows_per_band output rows gives one band: the whole
// frame at every stage.
std::vector<Band> plan_bands(const std::vector<RowOp>& ops, int64_t input_rows,
                             int64_t max_rows_per_band);

// Multi-line: "band 1: kept [16,32) of 64" then, per stage,
// "  0 conv k3 p1 s1: in [14,34) of 64 (halo 1 above, 1 below)".
std::string describe(const Band& band);

}  // namespace strata
