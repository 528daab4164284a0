// Band arithmetic: see band_math.h.
#include "ir/band_math.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace strata {
namespace {

bool well_formed(const RowOp& op) {
  switch (op.kind) {
    case RowOp::conv: return op.k >= 1 && op.pad >= 0 && op.stride >= 1;
    case RowOp::upsample: return op.factor >= 1;
    case RowOp::pointwise: return true;
    case RowOp::frame_conv:
      return op.k >= 1 && op.k % 2 == 1 && op.pad == op.k / 2 && op.stride == 1 && op.frame >= 1 && op.shift >= 0 &&
             op.taps >= 1;
  }
  return false;
}

// The rows a frame conv's output rows `out` read with a kernel of k rows and pad p:
// the range covering what the frames they touch read (each temporal tap reads one
// earlier-or-same frame, rows clamped to it). With several taps the rows read can
// leave gaps between frames; the covering range includes them (a band then holds a
// few rows it does not need, which changes no kept row).
RowRange frame_rows_read(const RowOp& op, RowRange out, int64_t k, int64_t pad) {
  RowRange r{INT64_MAX, INT64_MIN};
  for (int64_t f = out.begin / op.frame; f * op.frame < out.end; ++f) {
    const int64_t yb = std::max(out.begin - f * op.frame, int64_t{0});
    const int64_t ye = std::min(out.end - f * op.frame, op.frame);  // rows [yb, ye) of frame f
    for (int64_t t = 0; t < op.taps; ++t) {
      const int64_t src = std::max(f - op.shift - t, int64_t{0}) * op.frame;
      r.begin = std::min(r.begin, src + std::max(yb - pad, int64_t{0}));
      r.end = std::max(r.end, src + std::min(ye - 1 - pad + k - 1, op.frame - 1) + 1);
    }
  }
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

RowRange clamp(RowRange r, int64_t rows) {
  RowRange c{std::max<int64_t>(r.begin, 0), std::min(r.end, rows)};
  if (c.empty()) return RowRange{};
  return c;
}

// What op's output range reads with no kernel extent (the halo's reference).
RowRange direct_rows(const RowOp& op, RowRange out) {
  switch (op.kind) {
    case RowOp::conv: return {out.begin * op.stride, (out.end - 1) * op.stride + 1};
    case RowOp::upsample:
      return {floor_div(out.begin, op.factor), floor_div(out.end - 1, op.factor) + 1};
    case RowOp::pointwise: return out;
    case RowOp::frame_conv: return frame_rows_read(op, out, 1, 0);
  }
  return out;
}

}  // namespace

std::vector<RowOp> conv_row_ops(int64_t upsample, int64_t k, int64_t pad, int64_t stride, int64_t frame_rows,
                                int64_t frame_shift, int64_t frame_taps) {
  std::vector<RowOp> ops;
  if (upsample > 1) ops.push_back(RowOp::make_upsample(upsample));
  ops.push_back(frame_rows > 0 ? RowOp::make_frame_conv(k / frame_taps, pad, frame_rows, frame_shift, frame_taps)
                               : RowOp::make_conv(k, pad, stride));
  return ops;
}

std::string describe(const RowOp& op) {
  std::ostringstream os;
  switch (op.kind) {
    case RowOp::conv: os << "conv k" << op.k << " p" << op.pad << " s" << op.stride; break;
    case RowOp::upsample: os << "upsample x" << op.factor; break;
    case RowOp::pointwise: os << "pointwise"; break;
    case RowOp::frame_conv:
      os << "frame conv k" << op.k << " p" << op.pad << " frame " << op.frame << " shift " << op.shift;
      if (op.taps != 1) os << " taps " << op.taps;
      break;
  }
  return os.str();
}

std::string describe(const RowRange& r) {
  std::ostringstream os;
  os << "[" << r.begin << "," << r.end << ")";
  return os.str();
}

int64_t output_rows(const RowOp& op, int64_t input_rows) {
  if (!well_formed(op) || input_rows <= 0) return 0;
  switch (op.kind) {
    case RowOp::conv: {
      int64_t span = input_rows + 2 * op.pad - op.k;
      return span < 0 ? 0 : span / op.stride + 1;
    }
    case RowOp::upsample: return input_rows * op.factor;
    case RowOp::pointwise: return input_rows;
    case RowOp::frame_conv: return input_rows % op.frame == 0 ? input_rows : 0;
  }
  return 0;
}

std::vector<int64_t> stage_frame_rows(const std::vector<RowOp>& ops, int64_t input_rows) {
  std::vector<int64_t> rows{std::max<int64_t>(input_rows, 0)};
  for (const RowOp& op : ops) rows.push_back(output_rows(op, rows.back()));
  return rows;
}

RowRange input_rows_for(const RowOp& op, RowRange out) {
  if (out.empty()) return RowRange{};
  switch (op.kind) {
    case RowOp::conv:
      return {out.begin * op.stride - op.pad, (out.end - 1) * op.stride - op.pad + op.k};
    case RowOp::upsample:
      // ⌊b/f⌋ .. ⌊(e−1)/f⌋ inclusive, i.e. [⌊b/f⌋, ⌈e/f⌉): rounded outward.
      return {floor_div(out.begin, op.factor), floor_div(out.end - 1, op.factor) + 1};
    case RowOp::pointwise: return out;
    case RowOp::frame_conv: return frame_rows_read(op, out, op.k, op.pad);
  }
  return out;
}

std::vector<RowRange> needed_stage_rows(const std::vector<RowOp>& ops, int64_t input_rows,
                                        RowRange kept_output_rows) {
  std::vector<int64_t> frame = stage_frame_rows(ops, input_rows);
  std::vector<RowRange> need(ops.size() + 1);
  need[ops.size()] = clamp(kept_output_rows, frame.back());
  for (size_t i = ops.size(); i-- > 0;) {
    need[i] = need[i + 1].empty() || !well_formed(ops[i])
                  ? RowRange{}
                  : clamp(input_rows_for(ops[i], need[i + 1]), frame[i]);
  }
  return need;
}

RowRange needed_rows(const std::vector<RowOp>& ops, int64_t input_rows,
                     RowRange kept_output_rows) {
  return needed_stage_rows(ops, input_rows, kept_output_rows).front();
}

std::vector<Band> plan_bands(const std::vector<RowOp>& ops, int64_t input_rows,
                             int64_t max_rows_per_band) {
  std::vector<Band> bands;
  if (max_rows_per_band < 1) return bands;
  for (const RowOp& op : ops)
    if (!well_formed(op)) return bands;
  std::vector<int64_t> frame = stage_frame_rows(ops, input_rows);
  const int64_t out_rows = frame.back();
  for (int64_t b = 0; b < out_rows; b += max_rows_per_band) {
    Band band;
    band.index = static_cast<int64_t>(bands.size());
    band.output_frame_rows = out_rows;
    band.kept = {b, std::min(b + max_rows_per_band, out_rows)};
    std::vector<RowRange> need = needed_stage_rows(ops, input_rows, band.kept);
    for (size_t i = 0; i < ops.size(); ++i) {
      BandStage s;
      s.op = ops[i];
      s.frame_rows = frame[i];
      s.rows = need[i];
      RowRange direct = direct_rows(ops[i], need[i + 1]);
      s.halo_above = direct.begin - need[i].begin;
      s.halo_below = need[i].end - direct.end;
      band.stages.push_back(s);
    }
    bands.push_back(std::move(band));
  }
  return bands;
}

std::string describe(const Band& band) {
  std::ostringstream os;
  os << "band " << band.index << ": kept " << describe(band.kept) << " of "
     << band.output_frame_rows << "\n";
  for (size_t i = 0; i < band.stages.size(); ++i) {
    const BandStage& s = band.stages[i];
    os << "  " << i << " " << describe(s.op) << ": in " << describe(s.rows) << " of "
       << s.frame_rows << " (halo " << s.halo_above << " above, " << s.halo_below
       << " below)\n";
  }
  return os.str();
}

}  // namespace strata
