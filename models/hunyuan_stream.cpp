// The slab-streamed whole-clip HunyuanVideo decode (models/hunyuan_stream.h).
#include "models/hunyuan_stream.h"

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "models/hunyuan_builder.h"
#include "models/hunyuan_decoder.h"
#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

namespace strata {
namespace {

// A resnet of the tail, or (resnet empty) the output norm and conv; with the
// upsampler before it, when there is one.
struct Unit {
  std::string resnet;
  int64_t cout = 0;
  int64_t prefix_block = -1;  // the up block whose upsampler comes first (-1: none)
  bool spatial = false, temporal = false;

  std::string norm1() const { return resnet.empty() ? std::string("decoder.conv_norm_out") : resnet + ".norm1"; }
};

enum class PassKind { n1, n2, out, video };

// Frames of a stack at temporal `level` for a slab of n latent frames.
int64_t level_frames(int64_t level, int64_t n, bool first) {
  const int64_t f = int64_t{1} << level;
  return first ? 1 + f * (n - 1) : f * n;
}
// The frames [begin, end) of the clip at `level` that a slab (first, n) covers.
std::pair<int64_t, int64_t> level_range(int64_t level, int64_t first, int64_t n) {
  const int64_t f = int64_t{1} << level;
  if (first == 0) return {0, 1 + f * (n - 1)};
  return {1 + f * (first - 1), 1 + f * (first + n - 1)};
}

struct PassGraph {
  Graph graph;
  std::vector<std::string> stats;
  int64_t moments_values = 0;  // values per (group, row) of the moments' input
};

Expected<PassGraph> build_pass(const HunyuanVaeConfig& c, ModelWeights& w, const std::vector<Unit>& units,
                               PassKind kind, size_t unit, const HunyuanStream::Store& in, int64_t n, bool first,
                               const std::string& name) {
  PassGraph out;
  Graph& g = out.graph;
  g.name = name + (first ? ".first" : ".next");
  Builder b(g, &w.store());
  HunyuanSlab slab{first, 0};
  const int64_t frames = level_frames(in.level, n, first);
  HunyuanBuilder hb{c, w, b, frames, &slab, {}};
  const int64_t groups = c.norm_num_groups;
  ValueId x = b.input("x", {1, in.channels, frames * in.frame_rows, in.width});
  auto prefixed = [&](const Unit& u, ValueId v) {
    return u.prefix_block < 0 ? v
                              : hb.upsample(HunyuanBuilder::upsampler_name(u.prefix_block), v, u.spatial, u.temporal);
  };
  const Unit& u = units[unit];
  auto moments = [&](ValueId m) {
    if (!b.ok()) return;
    out.moments_values = b.shape(m)[1] / groups * b.shape(m)[3];
    b.output(b.group_moments(m, groups));
  };
  ValueId v = prefixed(u, x);
  switch (kind) {
    case PassKind::n1: moments(v); break;
    case PassKind::n2: moments(hb.resnet_conv1(u.resnet, v, u.cout)); break;
    case PassKind::out: {
      ValueId y = hb.resnet(u.resnet, v, u.cout);
      if (b.ok()) b.output(y);
      moments(prefixed(units[unit + 1], y));
      break;
    }
    case PassKind::video: b.output(hb.decode_out(v)); break;
  }
  STRATA_RETURN_IF_ERROR(b.status().with_context(fmt::format("building the streamed pass '{}'", g.name)));
  out.stats = hb.stats_inputs;
  return out;
}

// The host's cores, for copies of slabs (hundreds of MB each at released sizes).
const interp::Parallel& host_cores() {
  static const interp::Parallel p{static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), 1 << 20};
  return p;
}

// Frames [f0, f1) of a stack [1, C, F·R, W] into `out` [1, C, (f1 − f0)·R, W], whose
// buffer is reused when it has the size already (no page faults per slab).
void stack_frames(const Tensor& t, int64_t frame_rows, int64_t f0, int64_t f1, Tensor& out) {
  const int64_t c = t.shape[1], rows = t.shape[2], wd = t.shape[3];
  const int64_t from = f0 * frame_rows * wd, count = (f1 - f0) * frame_rows * wd;
  const Shape shape{1, c, (f1 - f0) * frame_rows, wd};
  if (out.shape != shape) out = Tensor(shape);
  interp::parallel_for(c, host_cores(), count, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch)
      std::copy_n(t.data.begin() + ch * rows * wd + from, count, out.data.begin() + ch * count);
  });
}
// Writes `part` [1, C, n, W] into rows [row, row + n) of the stack `t`.
void put_rows(Tensor& t, const Tensor& part, int64_t row) {
  const int64_t c = t.shape[1], rows = t.shape[2], wd = t.shape[3], count = part.shape[2] * wd;
  interp::parallel_for(c, host_cores(), count, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch)
      std::copy_n(part.data.begin() + ch * count, count, t.data.begin() + (ch * rows + row) * wd);
  });
}

// Chan's merge of (mean, M2) partials of `values` values each, in order, in f64.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  void add(double values, double mean_b, double m2_b) {
    const double total = n + values, d = mean_b - mean;
    mean += d * (values / total);
    m2 += m2_b + d * d * (n * values / total);
    n = total;
  }
};

}  // namespace

std::vector<std::pair<int64_t, int64_t>> hunyuan_slabs(int64_t latent_frames, int64_t slab_frames) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (latent_frames < 1 || slab_frames < 1) return out;
  const int64_t first = 1 + (latent_frames - 1) % slab_frames;
  out.push_back({0, first});
  for (int64_t a = first; a < latent_frames; a += slab_frames) out.push_back({a, slab_frames});
  return out;
}

int64_t hunyuan_stream_slab_frames(const HunyuanVaeConfig& c, int64_t latent_frames, int64_t latent_h,
                                   int64_t latent_w, uint64_t budget) {
  // Walk the up blocks as the decoder does: resolution, level and channels per resnet.
  const auto& ch = c.block_out_channels;
  const int64_t blocks = static_cast<int64_t>(ch.size());
  int64_t spatial_ups = 0;
  while ((int64_t{1} << spatial_ups) < c.spatial_compression_ratio) ++spatial_ups;
  double pixels = static_cast<double>(latent_h * latent_w), frames = 1, worst = 0;
  int64_t cin = ch.back();
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t cout = ch[static_cast<size_t>(blocks - 1 - i)];
    worst = std::max(worst, frames * pixels * static_cast<double>(6 * cin + 8 * cout));
    cin = cout;
    if (i < spatial_ups) pixels *= 4;
    if (i >= blocks - 3 && i != blocks - 1) frames *= 2;
    worst = std::max(worst, frames * pixels * static_cast<double>(6 * cin + 8 * cout));
  }
  const double fit = 0.6 * static_cast<double>(budget) / std::max(worst, 1.0);
  return std::clamp<int64_t>(static_cast<int64_t>(fit), 1, std::max<int64_t>(latent_frames, 1));
}

Expected<ProgramGraph> build_hunyuan_stream_program(const HunyuanVaeConfig& c, ModelWeights& w, int64_t latent_frames,
                                                    int64_t latent_h, int64_t latent_w, int64_t slab_frames,
                                                    HunyuanStream& schedule) {
  if (latent_frames < 1 || latent_h < 1 || latent_w < 1)
    return error("latent of {} frames of {}x{} is empty", latent_frames, latent_h, latent_w);
  if (slab_frames < 1) return error("slabs of {} latent frames: need at least 1", slab_frames);
  schedule = HunyuanStream{};
  schedule.latent_frames = latent_frames;
  schedule.slab_frames = slab_frames;
  schedule.groups = c.norm_num_groups;
  ProgramGraph p;
  p.name = "hunyuan_vae_stream";

  // The head: everything before the first temporal upsampler, over all frames.
  Graph head;
  head.name = kHunyuanHeadPlan;
  std::vector<Unit> units;
  {
    Builder b(head, &w.store());
    HunyuanBuilder hb{c, w, b, latent_frames, nullptr, {}};
    const auto blocks = hb.up_blocks();
    auto t0 = std::find_if(blocks.begin(), blocks.end(), [](const auto& u) { return u.temporal; });
    if (t0 == blocks.end()) return error("the decoder has no temporal upsampler: it cannot stream in slabs");
    ValueId x = hb.decode_mid(b.input("latent", {1, c.latent_channels, latent_frames * latent_h, latent_w}));
    for (auto it = blocks.begin(); it <= t0; ++it) {
      for (int64_t j = 0; j <= c.layers_per_block; ++j)
        x = hb.resnet(HunyuanBuilder::resnet_name(it->index, j), x, it->channels);
      if (it != t0 && (it->spatial || it->temporal))
        x = hb.upsample(HunyuanBuilder::upsampler_name(it->index), x, it->spatial, it->temporal);
    }
    if (b.ok()) b.output(x);
    STRATA_RETURN_IF_ERROR(b.status().with_context("building the streamed decode's head"));
    const Shape s = b.shape(x);
    schedule.stores.push_back({s[1], s[2] / latent_frames, s[3], 0});
    // The tail's units: t0's upsampler comes before the next block's first resnet.
    Unit pending{"", 0, t0->index, t0->spatial, t0->temporal};
    for (auto it = t0 + 1; it != blocks.end(); ++it) {
      for (int64_t j = 0; j <= c.layers_per_block; ++j) {
        Unit u = pending;
        u.resnet = HunyuanBuilder::resnet_name(it->index, j);
        u.cout = it->channels;
        units.push_back(u);
        pending = Unit{};
      }
      if (it->spatial || it->temporal) pending = Unit{"", 0, it->index, it->spatial, it->temporal};
    }
    units.push_back(pending);  // the output norm and conv
  }
  p.plans.push_back(std::move(head));

  const bool several = hunyuan_slabs(latent_frames, slab_frames).size() > 1;
  const int64_t first_n = hunyuan_slabs(latent_frames, slab_frames).front().second;
  auto add_pass = [&](HunyuanStream::Pass pass, PassKind kind, size_t unit) -> Status {
    const HunyuanStream::Store& in = schedule.stores[static_cast<size_t>(pass.input)];
    for (bool first : {true, false}) {
      if (!first && !several) break;
      STRATA_ASSIGN_OR_RETURN(PassGraph g, build_pass(c, w, units, kind, unit, in, first ? first_n : slab_frames,
                                                      first, pass.name));
      pass.stats = g.stats;
      pass.moments_values = g.moments_values;
      p.plans.push_back(std::move(g.graph));
    }
    schedule.passes.push_back(std::move(pass));
    return Status::ok();
  };
  int64_t store = 0;
  {
    HunyuanStream::Pass n1;
    n1.name = units.front().resnet + ".n1";
    n1.moments = units.front().norm1();
    STRATA_RETURN_IF_ERROR(add_pass(n1, PassKind::n1, 0));
  }
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& unit = units[u];
    const HunyuanStream::Store& in = schedule.stores[static_cast<size_t>(store)];
    const int64_t up = unit.spatial ? 2 : 1;
    const int64_t level = in.level + (unit.temporal ? 1 : 0);
    if (unit.resnet.empty()) {
      HunyuanStream::Pass video;
      video.name = "out";
      video.input = store;
      video.level = level;
      video.video = true;
      STRATA_RETURN_IF_ERROR(add_pass(video, PassKind::video, u));
      break;
    }
    HunyuanStream::Pass n2;
    n2.name = unit.resnet + ".n2";
    n2.input = store;
    n2.level = level;
    n2.moments = unit.resnet + ".norm2";
    STRATA_RETURN_IF_ERROR(add_pass(n2, PassKind::n2, u));
    schedule.stores.push_back({unit.cout, in.frame_rows * up, in.width * up, level});
    HunyuanStream::Pass out;
    out.name = unit.resnet + ".out";
    out.input = store;
    out.output = static_cast<int64_t>(schedule.stores.size()) - 1;
    out.level = level;
    out.moments = units[u + 1].norm1();
    STRATA_RETURN_IF_ERROR(add_pass(out, PassKind::out, u));
    store = out.output;
  }
  return p;
}

Status decode_hunyuan_streamed(const HunyuanStream& schedule, const Tensor& latent, const PlanRunner& run,
                               const FrameSink& sink, const std::function<void(size_t, const std::string&)>& progress) {
  Shape s = latent.shape;
  if (s.size() == 5 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 4) return error("a video latent is [C, T, h, w] or [1, C, T, h, w], not {}", shape_str(latent.shape));
  if (s[1] != schedule.latent_frames)
    return error("the program streams {} latent frames, the latent has {}", schedule.latent_frames, s[1]);
  const int64_t t = s[1], plane = s[2] * s[3];
  Tensor stack({1, s[0], t * s[2], s[3]});  // [C, T, h, w] is already the stack's memory order
  std::copy_n(latent.data.begin(), s[0] * t * plane, stack.data.begin());

  std::vector<Tensor> data(schedule.stores.size());
  {
    auto head = run(kHunyuanHeadPlan, {stack});
    if (!head) return head.status().with_context("running the streamed decode's head");
    if (head->size() != 1) return error("plan 'head' returned {} tensors, not 1", head->size());
    data[0] = std::move((*head)[0]);
  }
  const auto slabs = hunyuan_slabs(t, schedule.slab_frames);
  std::map<std::string, Tensor> stats;
  int64_t emitted = 0;
  for (size_t pi = 0; pi < schedule.passes.size(); ++pi) {
    const HunyuanStream::Pass& pass = schedule.passes[pi];
    const HunyuanStream::Store& in = schedule.stores[static_cast<size_t>(pass.input)];
    Tensor& source = data[static_cast<size_t>(pass.input)];
    bool in_place = false;
    if (pass.output >= 0) {
      const HunyuanStream::Store& o = schedule.stores[static_cast<size_t>(pass.output)];
      const Shape shape{1, o.channels, level_frames(o.level, t, true) * o.frame_rows, o.width};
      const bool read_later = std::any_of(schedule.passes.begin() + static_cast<std::ptrdiff_t>(pi) + 1,
                                          schedule.passes.end(), [&](const auto& q) { return q.input == pass.input; });
      in_place = !read_later && source.shape == shape;
      if (!in_place) data[static_cast<size_t>(pass.output)] = Tensor(shape);
    }
    Tensor& target = in_place ? source : data[static_cast<size_t>(pass.output >= 0 ? pass.output : pass.input)];
    std::vector<Moments> moments(static_cast<size_t>(schedule.groups));
    std::vector<Tensor> inputs(1 + pass.stats.size());
    for (size_t j = 0; j < pass.stats.size(); ++j) {
      auto it = stats.find(pass.stats[j]);
      if (it == stats.end())
        return error("pass '{}' needs the statistics of '{}', which no pass computed", pass.name, pass.stats[j]);
      inputs[1 + j] = it->second;
    }
    for (size_t k = 0; k < slabs.size(); ++k) {
      const auto [a, n] = slabs[k];
      const std::string plan = pass.name + (k == 0 ? ".first" : ".next");
      const auto [f0, f1] = level_range(in.level, a, n);
      stack_frames(source, in.frame_rows, f0, f1, inputs[0]);
      auto out = run(plan, inputs);
      if (!out)
        return out.status().with_context(
            fmt::format("running '{}' on latent frames [{}, {})", plan, a, a + n));
      const size_t want = (pass.output >= 0) + !pass.moments.empty() + pass.video;
      if (out->size() != want) return error("plan '{}' returned {} tensors, not {}", plan, out->size(), want);
      size_t i = 0;
      const auto [g0, g1] = level_range(pass.level, a, n);
      if (pass.output >= 0) {
        const Tensor& y = (*out)[i++];
        const HunyuanStream::Store& o = schedule.stores[static_cast<size_t>(pass.output)];
        if (y.shape != Shape{1, o.channels, (g1 - g0) * o.frame_rows, o.width})
          return error("plan '{}' returned {}, not {} frames of the stored tensor", plan, shape_str(y.shape), g1 - g0);
        put_rows(target, y, g0 * o.frame_rows);
      }
      if (!pass.moments.empty()) {
        const Tensor& m = (*out)[i++];
        const int64_t rows = m.shape[1];
        const double values = static_cast<double>(pass.moments_values);
        for (int64_t g = 0; g < schedule.groups; ++g)
          for (int64_t r = 0; r < rows; ++r) {
            const size_t at = static_cast<size_t>((g * rows + r) * 2);
            moments[static_cast<size_t>(g)].add(values, m.data[at], m.data[at + 1]);
          }
      }
      if (pass.video) {
        const Tensor& v = (*out)[i];
        const int64_t frames = g1 - g0, rows = v.shape[2] / frames, wd = v.shape[3], fplane = rows * wd;
        for (int64_t f = 0; f < frames; ++f) {
          Tensor frame({v.shape[1], rows, wd});
          for (int64_t ch = 0; ch < v.shape[1]; ++ch)
            std::copy_n(v.data.begin() + (ch * frames + f) * fplane, fplane, frame.data.begin() + ch * fplane);
          STRATA_RETURN_IF_ERROR(sink(emitted++, frame));
        }
      }
    }
    if (!pass.moments.empty()) {
      Tensor st({schedule.groups, 2});
      for (int64_t g = 0; g < schedule.groups; ++g) {
        const Moments& m = moments[static_cast<size_t>(g)];
        st.data[static_cast<size_t>(2 * g)] = static_cast<float>(m.mean);
        st.data[static_cast<size_t>(2 * g + 1)] = static_cast<float>(1.0 / std::sqrt(m.m2 / m.n + kHunyuanNormEps));
      }
      stats[pass.moments] = std::move(st);
    }
    if (in_place) data[static_cast<size_t>(pass.output)] = std::move(source);
    // A store no later pass reads is freed (at released sizes, tens of GB).
    for (size_t st = 0; st < data.size(); ++st)
      if (std::none_of(schedule.passes.begin() + static_cast<std::ptrdiff_t>(pi) + 1, schedule.passes.end(),
                       [&](const auto& q) { return q.input == static_cast<int64_t>(st); }) &&
          !(pass.output == static_cast<int64_t>(st)))
        data[st] = Tensor{};
    if (progress) progress(pi, pass.name);
  }
  const int64_t total = level_frames(schedule.passes.back().level, t, true);
  if (emitted != total) return error("the streamed decode gave {} frames, not {}", emitted, total);
  return Status::ok();
}

}  // namespace strata
