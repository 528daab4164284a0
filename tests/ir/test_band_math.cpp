// Band arithmetic (ir/band_math.h): halo growth through conv / upsample chains,
// frame edges, one-row bands, a frame smaller than one band, stride-2 convs, with
// hand-computed expectations; and a brute-force property test that simulates random
// stretches on a 1-D column of integers, whole-frame and band by band from only the
// needed rows, and compares the kept rows.
#include "ir/band_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace strata {
namespace {

using Ops = std::vector<RowOp>;

RowOp conv3() { return RowOp::make_conv(3, 1, 1); }
RowOp up2() { return RowOp::make_upsample(2); }

TEST(BandMath, FrameRowsPerStage) {
  // 64 → conv k3 p1 → 64 → up2 → 128 → conv k3 p0 → 126 → conv k3 p1 s2 → 63 (125/2+1).
  Ops ops{conv3(), up2(), RowOp::make_conv(3, 0), RowOp::make_conv(3, 1, 2)};
  EXPECT_EQ(stage_frame_rows(ops, 64), (std::vector<int64_t>{64, 64, 128, 126, 63}));
  EXPECT_EQ(output_rows(RowOp::make_conv(5, 0), 4), 0);  // kernel larger than frame
  EXPECT_EQ(output_rows(RowOp::make_conv(3, 1, 0), 4), 0);  // malformed stride
}

TEST(BandMath, HaloGrowsThroughTwoConvs) {
  Ops ops{conv3(), conv3()};
  std::vector<RowRange> need = needed_stage_rows(ops, 64, {10, 20});
  ASSERT_EQ(need.size(), 3u);
  EXPECT_EQ(need[2], (RowRange{10, 20}));
  EXPECT_EQ(need[1], (RowRange{9, 21}));
  EXPECT_EQ(need[0], (RowRange{8, 22}));
  EXPECT_EQ(needed_rows(ops, 64, {10, 20}), (RowRange{8, 22}));
  // A 5×5 conv needs 2 rows each side.
  EXPECT_EQ(needed_rows({RowOp::make_conv(5, 2)}, 64, {10, 20}), (RowRange{8, 22}));
}

TEST(BandMath, UpsampleHalvesRoundingOutward) {
  EXPECT_EQ(needed_rows({up2()}, 32, {10, 20}), (RowRange{5, 10}));  // aligned
  EXPECT_EQ(needed_rows({up2()}, 32, {3, 8}), (RowRange{1, 4}));     // 3→1, ⌈8/2⌉=4
  EXPECT_EQ(needed_rows({up2()}, 32, {3, 9}), (RowRange{1, 5}));     // ⌈9/2⌉=5
  EXPECT_EQ(needed_rows({RowOp::make_upsample(3)}, 32, {4, 8}), (RowRange{1, 3}));
}

TEST(BandMath, ConvUpsampleConvChain) {
  // 32 rows → conv → 32 → up2 → 64 → conv → 64.
  Ops ops{conv3(), up2(), conv3()};
  // kept [10,20): conv2 needs [9,21); up2: [⌊9/2⌋, ⌈21/2⌉) = [4,11); conv1: [3,12).
  std::vector<RowRange> need = needed_stage_rows(ops, 32, {10, 20});
  EXPECT_EQ(need, (std::vector<RowRange>{{3, 12}, {4, 11}, {9, 21}, {10, 20}}));
  // kept [12,20): [11,21) → [5,11) → [4,12).
  need = needed_stage_rows(ops, 32, {12, 20});
  EXPECT_EQ(need, (std::vector<RowRange>{{4, 12}, {5, 11}, {11, 21}, {12, 20}}));
  // conv_gemm with the nearest-2× gather = {up2, conv}: kept [12,20) → [11,21) → [5,11).
  EXPECT_EQ(needed_rows({up2(), conv3()}, 32, {12, 20}), (RowRange{5, 11}));
}

TEST(BandMath, FrameEdgesNeedNoRowsOutside) {
  Ops ops{conv3(), conv3()};
  std::vector<Band> bands = plan_bands(ops, 64, 16);
  ASSERT_EQ(bands.size(), 4u);
  // First band: nothing above row 0.
  EXPECT_EQ(bands[0].kept, (RowRange{0, 16}));
  EXPECT_EQ(bands[0].stages[1].rows, (RowRange{0, 17}));
  EXPECT_EQ(bands[0].stages[0].rows, (RowRange{0, 18}));
  EXPECT_EQ(bands[0].stages[0].halo_above, 0);
  EXPECT_EQ(bands[0].stages[0].halo_below, 1);
  // A middle band: one row each side per conv.
  EXPECT_EQ(bands[1].kept, (RowRange{16, 32}));
  EXPECT_EQ(bands[1].stages[0].rows, (RowRange{14, 34}));
  EXPECT_EQ(bands[1].stages[0].halo_above, 1);
  EXPECT_EQ(bands[1].stages[0].halo_below, 1);
  // Last band: nothing below row 63.
  EXPECT_EQ(bands[3].kept, (RowRange{48, 64}));
  EXPECT_EQ(bands[3].stages[1].rows, (RowRange{47, 64}));
  EXPECT_EQ(bands[3].stages[0].rows, (RowRange{46, 64}));
  EXPECT_EQ(bands[3].stages[1].halo_below, 0);
  // Unpadded conv: the frame shrinks by 2, the last band reaches the input's last row.
  EXPECT_EQ(needed_rows({RowOp::make_conv(3, 0)}, 64, {50, 62}), (RowRange{50, 64}));
  // Kept rows beyond the output frame are clamped first.
  EXPECT_EQ(needed_rows(ops, 64, {60, 100}), (RowRange{58, 64}));
}

TEST(BandMath, OneRowBands) {
  std::vector<Band> bands = plan_bands({conv3()}, 5, 1);
  ASSERT_EQ(bands.size(), 5u);
  const RowRange expect_in[5] = {{0, 2}, {0, 3}, {1, 4}, {2, 5}, {3, 5}};
  for (int64_t r = 0; r < 5; ++r) {
    EXPECT_EQ(bands[r].index, r);
    EXPECT_EQ(bands[r].kept, (RowRange{r, r + 1}));
    EXPECT_EQ(bands[r].stages[0].rows, expect_in[r]) << r;
  }
  // One-row band through conv → up2 → conv: kept [7,8) of 16 → [6,9) → [3,5) → [2,6).
  EXPECT_EQ(plan_bands({conv3(), up2(), conv3()}, 8, 1)[7].stages[0].rows,
            (RowRange{2, 6}));
}

TEST(BandMath, FrameSmallerThanOneBand) {
  std::vector<Band> bands = plan_bands({conv3(), up2(), conv3()}, 8, 100);
  ASSERT_EQ(bands.size(), 1u);
  EXPECT_EQ(bands[0].kept, (RowRange{0, 16}));
  EXPECT_EQ(bands[0].stages[0].rows, (RowRange{0, 8}));
  EXPECT_EQ(bands[0].stages[1].rows, (RowRange{0, 8}));
  EXPECT_EQ(bands[0].stages[2].rows, (RowRange{0, 16}));
  EXPECT_EQ(bands[0].stage_rows(3), (RowRange{0, 16}));
  // Exactly one band's worth is also a single band.
  EXPECT_EQ(plan_bands({conv3(), up2(), conv3()}, 8, 16).size(), 1u);
  // Last band smaller: 16 rows in bands of 6 → [0,6) [6,12) [12,16).
  bands = plan_bands({conv3(), up2(), conv3()}, 8, 6);
  ASSERT_EQ(bands.size(), 3u);
  EXPECT_EQ(bands[2].kept, (RowRange{12, 16}));
}

TEST(BandMath, StrideTwoConv) {
  RowOp down = RowOp::make_conv(3, 1, 2);  // 64 → 32
  EXPECT_EQ(output_rows(down, 64), 32);
  // Output row r reads [2r−1, 2r+1]: kept [10,20) → [19, 19·2−1+3) = [19,40).
  EXPECT_EQ(needed_rows({down}, 64, {10, 20}), (RowRange{19, 40}));
  EXPECT_EQ(needed_rows({down}, 64, {0, 4}), (RowRange{0, 8}));     // top edge
  EXPECT_EQ(needed_rows({down}, 64, {16, 32}), (RowRange{31, 64}));  // bottom edge
  // k4 p1 s2: 64 → 32; row 31 reads [61,64], clamped to [61,64).
  EXPECT_EQ(needed_rows({RowOp::make_conv(4, 1, 2)}, 64, {31, 32}), (RowRange{61, 64}));
  // Downsample then two convs: kept [10,20) of 32 → [9,21) → [8,22) → [15,44).
  EXPECT_EQ(needed_rows({down, conv3(), conv3()}, 64, {10, 20}), (RowRange{15, 44}));
}

TEST(BandMath, InvalidInputsGiveNoBands) {
  EXPECT_TRUE(plan_bands({conv3()}, 64, 0).empty());
  EXPECT_TRUE(plan_bands({RowOp::make_upsample(0)}, 64, 8).empty());
  EXPECT_TRUE(plan_bands({RowOp::make_conv(5, 0)}, 3, 8).empty());  // empty output
  EXPECT_TRUE(needed_rows({conv3()}, 64, {20, 10}).empty());
}

TEST(BandMath, DescribeAndDeterminism) {
  Ops ops{conv3(), up2(), conv3()};
  std::vector<Band> a = plan_bands(ops, 32, 16);
  std::vector<Band> b = plan_bands(ops, 32, 16);
  ASSERT_EQ(a.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(describe(a[i]), describe(b[i]));
  // Band 1: kept [16,32) of 64 → conv2 in [15,33) → up2 in [7,17) → conv1 in [6,18).
  EXPECT_EQ(describe(a[1]),
            "band 1: kept [16,32) of 64\n"
            "  0 conv k3 p1 s1: in [6,18) of 32 (halo 1 above, 1 below)\n"
            "  1 upsample x2: in [7,17) of 32 (halo 0 above, 0 below)\n"
            "  2 conv k3 p1 s1: in [15,33) of 64 (halo 1 above, 1 below)\n");
  EXPECT_EQ(describe(RowOp::make_conv(4, 1, 2)), "conv k4 p1 s2");
}

// ---- brute force -------------------------------------------------------------------

// Value of the next stage at row r, reading the previous stage through `at`.
template <class At>
int64_t apply_row(const RowOp& op, int64_t r, At at) {
  switch (op.kind) {
    case RowOp::conv: {
      int64_t sum = 0;
      for (int64_t t = 0; t < op.k; ++t) sum += (t + 1) * at(r * op.stride - op.pad + t);
      return sum;
    }
    case RowOp::upsample: return at(r / op.factor);
    case RowOp::pointwise: return 3 * at(r) + 1;
    case RowOp::frame_conv: {  // rows clamped to the shifted source frame (replicate)
      const int64_t src = std::max<int64_t>(r / op.frame - op.shift, 0) * op.frame, y = r % op.frame;
      int64_t sum = 0;
      for (int64_t t = 0; t < op.k; ++t) sum += (t + 1) * at(src + std::clamp<int64_t>(y - op.pad + t, 0, op.frame - 1));
      return sum;
    }
  }
  return 0;
}

std::vector<int64_t> run_whole(const Ops& ops, const std::vector<int64_t>& input) {
  std::vector<int64_t> cur = input;
  for (const RowOp& op : ops) {
    int64_t rows = output_rows(op, static_cast<int64_t>(cur.size()));
    std::vector<int64_t> next(rows);
    auto at = [&](int64_t j) -> int64_t {
      return j < 0 || j >= static_cast<int64_t>(cur.size()) ? 0 : cur[j];  // real padding
    };
    for (int64_t r = 0; r < rows; ++r) next[r] = apply_row(op, r, at);
    cur = std::move(next);
  }
  return cur;
}

// Runs one band from only the needed input rows. Each stage's buffer covers its needed
// rows widened by `extra` rows each side (clamped to the frame); rows the band buffer
// lacks but the frame has are read as zero (the band's artificial edge). With extra = 0
// such a read is a failure: the needed ranges must cover every in-frame read. With
// extra > 0, the extra rows see the artificial edge and must never reach a kept row.
std::vector<int64_t> run_band(const Ops& ops, const std::vector<int64_t>& input,
                              const Band& band, int64_t extra, bool* bad_read) {
  std::vector<int64_t> frame = stage_frame_rows(ops, static_cast<int64_t>(input.size()));
  auto widen = [&](RowRange r, size_t stage) {
    return RowRange{std::max<int64_t>(r.begin - extra, 0),
                    std::min<int64_t>(r.end + extra, frame[stage])};
  };
  RowRange have = band.stage_rows(0);  // the band receives only its needed input rows
  std::vector<int64_t> buf(input.begin() + have.begin, input.begin() + have.end);
  for (size_t i = 0; i < ops.size(); ++i) {
    RowRange out = widen(band.stage_rows(i + 1), i + 1);
    std::vector<int64_t> next(out.size());
    auto at = [&](int64_t j) -> int64_t {
      if (j < 0 || j >= frame[i]) return 0;  // the frame's real padding
      if (!have.contains(j)) {
        if (extra == 0) *bad_read = true;
        return 0;  // the band's artificial edge
      }
      return buf[j - have.begin];
    };
    for (int64_t r = out.begin; r < out.end; ++r) next[r - out.begin] = apply_row(ops[i], r, at);
    buf = std::move(next);
    have = out;
  }
  RowRange kept = band.kept;
  std::vector<int64_t> kept_values;
  for (int64_t r = kept.begin; r < kept.end; ++r) kept_values.push_back(buf[r - have.begin]);
  return kept_values;
}

RowOp random_op(std::mt19937& rng) {
  switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
    case 6: {  // a frame conv over frames of 1-3 rows (rows not whole frames: trial skipped)
      const int64_t k = std::uniform_int_distribution<int64_t>(0, 1)(rng) * 2 + 1;
      return RowOp::make_frame_conv(k, k / 2, std::uniform_int_distribution<int64_t>(1, 3)(rng),
                                    std::uniform_int_distribution<int64_t>(0, 2)(rng));
    }
    case 0:
    case 1:
    case 2: {
      int64_t k = std::uniform_int_distribution<int64_t>(1, 5)(rng);
      int64_t pad = std::uniform_int_distribution<int64_t>(0, k - 1)(rng);
      int64_t stride = std::uniform_int_distribution<int64_t>(1, 2)(rng);
      return RowOp::make_conv(k, pad, stride);
    }
    case 3:
    case 4: return RowOp::make_upsample(std::uniform_int_distribution<int64_t>(2, 3)(rng));
    default: return RowOp::make_pointwise();
  }
}

TEST(BandMath, BruteForceBandsMatchWholeFrame) {
  std::mt19937 rng(12345);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Ops ops;
    int n = std::uniform_int_distribution<int>(1, 5)(rng);
    for (int i = 0; i < n; ++i) ops.push_back(random_op(rng));
    int64_t in_rows = std::uniform_int_distribution<int64_t>(1, 24)(rng);
    std::vector<int64_t> frame = stage_frame_rows(ops, in_rows);
    if (std::any_of(frame.begin(), frame.end(), [](int64_t r) { return r <= 0; })) continue;
    std::vector<int64_t> input(in_rows);
    for (int64_t& v : input) v = std::uniform_int_distribution<int64_t>(-9, 9)(rng);
    std::vector<int64_t> whole = run_whole(ops, input);
    ASSERT_EQ(static_cast<int64_t>(whole.size()), frame.back());

    int64_t max_rows = std::uniform_int_distribution<int64_t>(1, frame.back() + 2)(rng);
    std::vector<Band> bands = plan_bands(ops, in_rows, max_rows);
    std::string chain;
    for (const RowOp& op : ops) chain += describe(op) + "; ";
    SCOPED_TRACE("chain " + chain + "input rows " + std::to_string(in_rows) +
                 ", band rows " + std::to_string(max_rows));
    // The bands tile the output exactly, in order.
    ASSERT_FALSE(bands.empty());
    int64_t next_row = 0;
    for (const Band& band : bands) {
      EXPECT_EQ(band.kept.begin, next_row);
      EXPECT_LE(band.kept.size(), max_rows);
      EXPECT_GE(band.kept.size(), 1);
      next_row = band.kept.end;
      for (size_t i = 0; i < ops.size(); ++i) {
        RowRange r = band.stage_rows(i);
        EXPECT_GE(r.begin, 0);
        EXPECT_LE(r.end, frame[i]);
      }
    }
    EXPECT_EQ(next_row, frame.back());
    // Kept rows are identical, from only the needed rows, with or without extra rows
    // computed against the band's artificial edges.
    for (const Band& band : bands) {
      std::vector<int64_t> expect(whole.begin() + band.kept.begin,
                                  whole.begin() + band.kept.end);
      for (int64_t extra : {0, 2}) {
        bool bad_read = false;
        std::vector<int64_t> got = run_band(ops, input, band, extra, &bad_read);
        EXPECT_FALSE(bad_read) << describe(band);
        ASSERT_EQ(got, expect) << "extra " << extra << "\n" << describe(band);
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace strata
