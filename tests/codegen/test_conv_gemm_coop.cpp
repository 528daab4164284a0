// Codegen: the tensor-core conv_gemm kernel (kernels/conv_gemm_coop.comp) against the
// interpreter. Lavapipe has no cooperative matrices, so these run its plain-GLSL
// emulation (Target::tensor_cores = emulated, kernels/coopmat.glsl COOPMAT = 2): the
// same tiling, staging, im2col gather, bands and epilogue as on the H200, with the
// 16×16×16 products done by ordinary arithmetic. The native variant (COOPMAT = 1) is
// compiled and validated here; it runs on the H200 (docs/PERFORMANCE.md).
//
// The emulation's default tile is 2x2x1x1 (lower_conv_gemm.cpp): lavapipe runs a
// workgroup with barriers on a coroutine whose stack the emulated fragments of the
// native 2x2x4x4 tile overflow on long K loops (all-zero output, seen with Ci = 40 and
// 3×3). The native default tile is still run here on a short K loop (OtherTiles...).
//
// Tolerances: x, w, the residual and y are f16; the products of f16 values are exact
// in f32, so kernel and interpreter differ by f32 accumulation order only, then by at
// most one f16 rounding of the output: ≤ 1e-3 relative (about one half ULP of f16)
// plus 1e-5 of the largest |output| — the same bound as the portable kernel's f16 test.
#include "codegen/shader_compiler.h"
#include "codegen/vk_test_util.h"

#include "ir/builder.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace strata {
namespace {

using testing::random_tensor;

struct CoopCase {
  int64_t ci = 32, co = 64, h = 9, w = 7;
  int64_t k = 3, pad = 1, stride = 1;
  bool upsample = false, bias = true, residual = false;
  double acc_scale = 1.0, residual_scale = 1.0, out_scale = 1.0;
  int64_t band_rows = 0;           // attr band_rows (0: one band)
  int64_t frame_rows = 0, frame_shift = 0;  // attrs frame_rows, frame_shift (0: a plain image)
  int64_t frame_taps = 1;                   // attr frame_taps: kernel rows frame_taps · k
  int64_t x_padded = 0;            // x's NHWC channel slots (0: exactly ci)
  Layout x_layout{LayoutKind::nhwc, 0};
  std::string conv_tile;           // CodegenOptions::conv_tile
};

std::string describe(const CoopCase& c) {
  return fmt::format("x[1,{},{},{}] -> {} ch, k{} pad {} stride {}{}{}{} bands of {} tile '{}'", c.ci, c.h, c.w,
                     c.co, c.k, c.pad, c.stride, c.upsample ? " upsample2x" : "", c.bias ? " +bias" : "",
                     c.residual ? " +residual" : "", c.band_rows, c.conv_tile);
}

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
};

// x, w, the residual and y in f16, NHWC, o_hwi weights: what the passes hand codegen.
Built build(const CoopCase& c) {
  Built t;
  Builder b(t.graph, &t.weights);
  uint64_t seed = 11;
  auto input = [&](const std::string& name, Shape shape, Layout layout) {
    t.inputs.push_back(random_tensor(shape, seed++, -2.0f, 2.0f));
    ValueId v = b.input(name, std::move(shape), DType::f16);
    t.graph.value(v).type.layout = layout;
    return v;
  };
  auto constant = [&](const std::string& name, Shape shape, float range, DType dtype) {
    Tensor v = random_tensor(shape, seed++, -range, range);
    EXPECT_TRUE(t.weights.add_owned(name, shape, std::move(v.data)));
    return b.constant(name, TensorType{std::move(shape), dtype, {}});
  };
  const int64_t up = c.upsample ? 2 : 1;
  const int64_t ho = (c.h * up + 2 * c.pad - c.k) / c.stride + 1, wo = (c.w * up + 2 * c.pad - c.k) / c.stride + 1;
  ValueId x = input("x", {1, c.ci, c.h, c.w}, c.x_layout);
  const int64_t kr = c.k * c.frame_taps;  // kernel rows
  const float wr = 1.0f / std::sqrt(static_cast<float>(c.ci * kr * c.k));
  ValueId w = constant("w", {c.co, kr * c.k * c.ci}, wr, DType::f16);
  std::vector<ValueId> operands = {x, w, c.bias ? constant("b", {c.co}, 1.0f, DType::f32) : kNoValue};
  if (c.residual) operands.push_back(input("r", {1, c.co, ho, wo}, Layout{LayoutKind::nhwc, 0}));
  Attrs a = {{"kernel", std::vector<int64_t>{kr, c.k}},
             {"pad", std::vector<int64_t>{c.pad, c.pad}},
             {"stride", std::vector<int64_t>{c.stride, c.stride}},
             {"weight_layout", std::string("o_hwi")},
             {"gather", std::string(c.upsample ? "upsample2x" : "plain")}};
  if (c.acc_scale != 1.0) a.set("acc_scale", c.acc_scale);
  if (c.residual_scale != 1.0) a.set("residual_scale", c.residual_scale);
  if (c.out_scale != 1.0) a.set("out_scale", c.out_scale);
  if (c.band_rows > 0) a.set("band_rows", c.band_rows);
  set_frames(a, FrameGather{c.frame_rows, c.frame_shift, c.frame_taps});
  ValueId y = b.op(Op::conv_gemm, operands, a);
  EXPECT_TRUE(b.ok()) << b.status().message();
  t.graph.value(y).type.layout = Layout{LayoutKind::nhwc, 0};
  b.output(y);
  return t;
}

codegen::Target emulated_target() {
  auto device = testing::test_device_f16();
  EXPECT_TRUE(device) << device.message();
  codegen::Target target = device ? codegen::target_for((*device)->info()) : codegen::Target{};
  target.tensor_cores = codegen::TensorCores::emulated;
  return target;
}

// The names of the plan's pipelines, joined.
std::string pipeline_names(const runtime::Plan& plan) {
  std::string out;
  for (const auto& p : plan.pipelines) out += p.name + "\n";
  return out;
}

struct Ran {
  std::vector<Tensor> outputs;
  std::string pipelines;
};

// `phases`: CodegenOptions::phase_convs (the upsample convs as four 2×2 phase convs).
Ran run(const Built& t, const codegen::Target& target, const std::string& conv_tile = "",
        const codegen::Defines& coop_defines = {}, bool phases = false) {
  Ran r;
  codegen::CodegenOptions options;
  options.conv_tile = conv_tile;
  options.phase_convs = phases;
  if (!coop_defines.empty()) options.kernel_defines["conv_gemm_coop.comp"] = coop_defines;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
  EXPECT_TRUE(plan) << plan.message();
  if (!plan) return r;
  r.pipelines = pipeline_names(*plan);
  auto device = testing::test_device_for(plan->requirements);
  EXPECT_TRUE(device) << device.message();
  if (!device) return r;
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(t.weights));
  EXPECT_TRUE(exec) << exec.message();
  if (!exec) return r;
  for (ValueId v : t.graph.outputs()) r.outputs.emplace_back(t.graph.value(v).type.shape);
  std::vector<std::span<const std::byte>> in;
  std::vector<std::span<std::byte>> out;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  for (Tensor& y : r.outputs) out.push_back(std::as_writable_bytes(std::span(y.data)));
  Status s = (*exec)->run(in, out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return r;
}

// `variant`: a define the kernel variant must have (e.g. "VEC_OUT=1").
void check(const CoopCase& c, const std::string& variant = "") {
  SCOPED_TRACE(describe(c));
  const Built t = build(c);
  const Ran got = run(t, emulated_target(), c.conv_tile);
  ASSERT_EQ(got.outputs.size(), 1u);
  EXPECT_NE(got.pipelines.find("conv_gemm_coop.comp"), std::string::npos) << got.pipelines;
  if (!variant.empty()) {
    EXPECT_NE(got.pipelines.find(variant), std::string::npos) << got.pipelines;
  }
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  double scale = 0.0;
  for (float v : (*want)[0].data) scale = std::max(scale, double(std::fabs(v)));
  testing::expect_close(got.outputs[0], (*want)[0], 1e-3, 1e-5 * scale);
}

TEST(CodegenConvGemmCoop, TapsChannelsAndPartialTiles) {
  check({});  // 63 pixels: one partial pixel tile; 64 of 128 channel rows
  CoopCase odd;  // Ci = 40: the second chunk of 32 holds one load of 8; 3 pixel tiles
  odd.ci = 40, odd.co = 48, odd.h = 20, odd.w = 14;
  check(odd);
  CoopCase wide;  // two channel tiles, the second partial
  wide.ci = 16, wide.co = 144, wide.h = 6, wide.w = 5;
  check(wide);
  CoopCase one;  // 1×1
  one.k = 1, one.pad = 0, one.ci = 24, one.co = 40, one.h = 7, one.w = 12;
  check(one);
  CoopCase strided;
  strided.stride = 2, strided.ci = 16, strided.co = 32, strided.h = 11, strided.w = 9;
  check(strided);
  CoopCase three;  // conv_out: 3 output channels, a 16-channel tile
  three.ci = 32, three.co = 3, three.h = 12, three.w = 11;
  check(three);
  CoopCase padded_x;  // x with channel slots beyond Ci (read as zeros' neighbours, never used)
  padded_x.ci = 24, padded_x.co = 16, padded_x.x_layout = Layout{LayoutKind::nhwc, 32};
  check(padded_x);
}

TEST(CodegenConvGemmCoop, UpsampleResidualAndScales) {
  CoopCase c;
  c.upsample = true, c.ci = 32, c.co = 32, c.h = 5, c.w = 6, c.residual = true;
  c.acc_scale = 4.0, c.residual_scale = 0.25, c.out_scale = 0.5;
  check(c, "VEC_OUT=1");  // 16-byte residual loads and y stores
  c.bias = false, c.upsample = false, c.k = 1, c.pad = 0;
  check(c, "VEC_OUT=1");
  c.co = 20;  // 20 channel slots: not whole groups of 8, per-element stores
  check(c, "VEC_OUT=0");
}

TEST(CodegenConvGemmCoop, FrameStacks) {
  // HunyuanVideo's frame stacks (ir/ops.h frame_rows): 3 frames of 5 rows, taps clamped
  // to the frame (replicate padding), output frame f reading frame max(f − 1, 0); the
  // upsample gather with them, a residual, and bands of rows that cut frames.
  CoopCase c;
  c.ci = 16, c.co = 32, c.h = 15, c.w = 6, c.frame_rows = 5, c.frame_shift = 1, c.residual = true;
  check(c, "FRAMES=1");
  CoopCase up = c;  // X is the 2× upsample: frames of 10 virtual rows
  up.h = 9, up.frame_rows = 6, up.upsample = true, up.frame_shift = 2, up.residual = false;
  check(up, "FRAMES=1");
  CoopCase banded = c;
  banded.band_rows = 4;
  check(banded, "FRAMES=1");
  // All three temporal taps in one conv (frame_taps, fuse_frame_taps): 4 frames, the
  // first two reading frame 0 for their older taps; with the gather; in bands.
  CoopCase taps = c;
  taps.h = 20, taps.frame_shift = 0, taps.frame_taps = 3;
  check(taps, "FRAME_TAPS=3");
  CoopCase taps_up = up;
  taps_up.h = 12, taps_up.frame_shift = 0, taps_up.frame_taps = 3;
  check(taps_up, "FRAME_TAPS=3");
  CoopCase taps_banded = taps;
  taps_banded.band_rows = 7;
  check(taps_banded, "FRAME_TAPS=3");
}

TEST(CodegenConvGemmCoop, OtherTilesGiveTheSameResults) {
  // Tiles chosen by measurement (CodegenOptions::conv_tile) change the work split,
  // not the arithmetic of one output: same bytes as the default tile (same BK).
  CoopCase c;
  c.ci = 32, c.co = 48, c.h = 10, c.w = 9;
  const Built t = build(c);
  const Ran base = run(t, emulated_target());
  ASSERT_EQ(base.outputs.size(), 1u);
  for (const char* tile : {"2x2x4x4", "2x2x1x1x32x2", "2x2x1x1x32x1x0"}) {
    SCOPED_TRACE(tile);
    const Ran other = run(t, emulated_target(), tile);
    ASSERT_EQ(other.outputs.size(), 1u);
    testing::expect_identical(other.outputs[0], base.outputs[0]);
  }
  // Another BK sums the taps and channel chunks in another order: the test's f16
  // tolerance against the default tile, not the same bytes.
  for (const char* tile : {"1x1x2x2x16", "2x2x1x1x64"}) {
    SCOPED_TRACE(tile);
    const Ran other = run(t, emulated_target(), tile);
    ASSERT_EQ(other.outputs.size(), 1u);
    testing::expect_close(other.outputs[0], base.outputs[0], 1e-3, 1e-5);
  }
  codegen::CodegenOptions bad;
  bad.conv_tile = "2x2";
  auto plan = codegen::compile_plan(t.graph, t.weights, emulated_target(), bad);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("WPxWCxFPxFC"), std::string::npos) << plan.message();
  bad.conv_tile = "2x2x4x4x48";  // BK must be 16, 32 or 64
  plan = codegen::compile_plan(t.graph, t.weights, emulated_target(), bad);
  ASSERT_FALSE(plan);
  // Tile strings with halo rows (a ninth field, "thN"), a variant the kernel does not
  // have, are refused rather than read as another tile.
  for (const char* removed : {"2x2x1x1x32x1x1x0x32", "th2"}) {
    bad.conv_tile = removed;
    plan = codegen::compile_plan(t.graph, t.weights, emulated_target(), bad);
    EXPECT_FALSE(plan) << removed;
  }
}

TEST(CodegenConvGemmCoop, BandsAreBitIdentical) {
  // Bands of 3 and 1 output rows (with halos through the upsample and the conv) give
  // the bytes of one whole-frame dispatch.
  CoopCase c;
  c.upsample = true, c.ci = 16, c.co = 32, c.h = 5, c.w = 4, c.residual = true;
  const Ran whole = run(build(c), emulated_target(), "");
  ASSERT_EQ(whole.outputs.size(), 1u);
  // The bands also on a larger tile (64 pixels in the emulation): a band's last tile
  // has pixels past the band.
  for (int64_t rows : {3, 1}) {
    c.band_rows = rows;
    SCOPED_TRACE(describe(c));
    for (const char* tile : {"", "4x1x1x1x32"}) {
      SCOPED_TRACE(tile);
      const Ran banded = run(build(c), emulated_target(), tile);
      ASSERT_EQ(banded.outputs.size(), 1u);
      testing::expect_identical(banded.outputs[0], whole.outputs[0]);
    }
  }
}

// What the PHASES kernel computes (lower_conv_gemm.cpp, conv_gemm_coop.comp): output
// pixel (2i + py, 2j + px) as a 2×2 conv over the half-size f16 x at (i − 1 + py + dy,
// j − 1 + px + dx), each 2×2 weight the f16 rounding of the sum of the (f16) 3×3
// weights that land on that input pixel; then the epilogue (scales, bias, residual)
// and the output's f16 rounding. Computed in double from the test's tensors.
Tensor phase_reference(const Built& t, const CoopCase& c) {
  auto f16 = [](double v) { return static_cast<double>(half_to_float(float_to_half(static_cast<float>(v)))); };
  const std::vector<float> x = t.inputs[0].data;  // [1, ci, h, w], rounded below
  const std::vector<float> w = t.weights.get("w")->to_f32();  // o_hwi [co, 9·ci]
  const std::vector<float> bias = c.bias ? t.weights.get("b")->to_f32() : std::vector<float>{};
  const int64_t ho = 2 * c.h, wo = 2 * c.w;
  Tensor y({1, c.co, ho, wo});
  auto taps = [](int64_t parity, int64_t d) {  // kernel rows (or columns) of 2×2 tap d
    return d == 0 ? std::pair<int64_t, int64_t>{0, parity} : std::pair<int64_t, int64_t>{1 + parity, 2};
  };
  for (int64_t o = 0; o < c.co; ++o)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        const int64_t py = oy % 2, px = ox % 2, i = oy / 2, j = ox / 2;
        double acc = 0.0;
        for (int64_t dy = 0; dy < 2; ++dy)
          for (int64_t dx = 0; dx < 2; ++dx) {
            const int64_t sy = i - 1 + py + dy, sx = j - 1 + px + dx;
            if (sy < 0 || sy >= c.h || sx < 0 || sx >= c.w) continue;
            const auto [ky0, ky1] = taps(py, dy);
            const auto [kx0, kx1] = taps(px, dx);
            for (int64_t ci = 0; ci < c.ci; ++ci) {
              double sum = 0.0;
              for (int64_t ky = ky0; ky <= ky1; ++ky)
                for (int64_t kx = kx0; kx <= kx1; ++kx) sum += f16(w[static_cast<size_t>(o * 9 * c.ci + (ky * 3 + kx) * c.ci + ci)]);
              acc += f16(sum) * f16(x[static_cast<size_t>((ci * c.h + sy) * c.w + sx)]);
            }
          }
        double v = acc * c.acc_scale;
        if (c.bias) v += bias[static_cast<size_t>(o)];
        if (c.residual) v += f16(t.inputs[1].data[static_cast<size_t>((o * ho + oy) * wo + ox)]) * c.residual_scale;
        y.data[static_cast<size_t>((o * ho + oy) * wo + ox)] = static_cast<float>(f16(v * c.out_scale));
      }
  return y;
}

// The upsample convs as four 2×2 phase convs (CodegenOptions::phase_convs): against their
// reference within the tolerance above (the same error sources: f32 accumulation order
// and one f16 rounding of the output), with 16-byte and per-element stores, partial
// tiles in every phase, and a residual with scales.
TEST(CodegenConvGemmCoop, PhasesMatchTheirReference) {
  CoopCase a;
  a.upsample = true, a.ci = 32, a.co = 32, a.h = 5, a.w = 6, a.residual = true;
  a.acc_scale = 4.0, a.residual_scale = 0.25, a.out_scale = 0.5;
  CoopCase odd = a;  // per-element stores; 3 × 7 half-size pixels: one partial tile per phase
  odd.co = 20, odd.h = 3, odd.w = 7, odd.bias = false, odd.acc_scale = 1.0;
  CoopCase chunks = a;  // two channel chunks, the second partial
  chunks.ci = 40, chunks.residual = false;
  for (const CoopCase& c : {a, odd, chunks}) {
    SCOPED_TRACE(describe(c));
    const Built t = build(c);
    const Ran got = run(t, emulated_target(), "", {}, true);
    ASSERT_EQ(got.outputs.size(), 1u);
    EXPECT_NE(got.pipelines.find("PHASES=1"), std::string::npos) << got.pipelines;
    const Tensor want = phase_reference(t, c);
    double scale = 0.0;
    for (float v : want.data) scale = std::max(scale, double(std::fabs(v)));
    testing::expect_close(got.outputs[0], want, 1e-3, 1e-5 * scale);
    // And the 3×3 conv itself (the interpreter): each summed weight moves by at most
    // half an f16 ULP (2^-11 of its magnitude, at most Σ|w| of its taps), so an output
    // by at most 2^-11 · |acc_scale · out_scale| · 9·Ci · max|w| · max|x|, plus the
    // tolerance above.
    auto exact = interpret(t.graph, t.weights, t.inputs);
    ASSERT_TRUE(exact) << exact.message();
    double wmax = 0.0, xmax = 0.0, worst = 0.0;
    for (float v : t.weights.get("w")->to_f32()) wmax = std::max(wmax, double(std::fabs(v)));
    for (float v : t.inputs[0].data) xmax = std::max(xmax, double(std::fabs(v)));
    const double bound = std::ldexp(1.0, -11) * std::fabs(c.acc_scale * c.out_scale) * 9.0 *
                             static_cast<double>(c.ci) * wmax * xmax + 1e-3 * scale;
    for (size_t i = 0; i < want.data.size(); ++i)
      worst = std::max(worst, double(std::fabs(got.outputs[0].data[i] - (*exact)[0].data[i])));
    EXPECT_LE(worst, bound) << "the phases are not the 3x3 conv";
  }
}

// Bands of any height (odd ones too: rows of both parities) and 32 × 32 fragments give
// the bytes of one whole-frame dispatch of the phases.
TEST(CodegenConvGemmCoop, PhaseBandsAndFragmentsAreBitIdentical) {
  CoopCase c;
  c.upsample = true, c.ci = 16, c.co = 32, c.h = 5, c.w = 4, c.residual = true;
  const Ran whole = run(build(c), emulated_target(), "", {}, true);
  ASSERT_EQ(whole.outputs.size(), 1u);
  EXPECT_NE(whole.pipelines.find("PHASES=1"), std::string::npos) << whole.pipelines;
  for (int64_t rows : {3, 1, 4}) {
    c.band_rows = rows;
    SCOPED_TRACE(describe(c));
    const Ran banded = run(build(c), emulated_target(), "", {}, true);
    ASSERT_EQ(banded.outputs.size(), 1u);
    EXPECT_NE(banded.pipelines.find("PHASES=1"), std::string::npos) << banded.pipelines;
    testing::expect_identical(banded.outputs[0], whole.outputs[0]);
  }
  c.band_rows = 0;
  const Ran big = run(build(c), emulated_target(), "2x2x1x1x32x1x1x32", {}, true);
  ASSERT_EQ(big.outputs.size(), 1u);
  EXPECT_NE(big.pipelines.find("CM_M=32"), std::string::npos) << big.pipelines;
  testing::expect_identical(big.outputs[0], whole.outputs[0]);
}

// `c` with its weights summed into phases by passes/phase_weights.cpp.
Built build_phased(const CoopCase& c) {
  Built t = build(c);
  CompileOptions options;
  options.phase_weights = true;
  PassContext ctx{options, t.weights, {}};
  EXPECT_TRUE(run_phase_weights(t.graph, ctx).is_ok());
  int64_t phased = 0;
  for (const Node& n : t.graph.nodes()) phased += *conv_weight_layout(n.attrs) == WeightLayout::phases;
  EXPECT_EQ(phased, 1) << (ctx.log.empty() ? "" : ctx.log[0]);
  return t;
}

// Weights summed at compile time (PHASE_W) give the bytes of the sums the PHASES kernel
// forms as it fetches them: the same f32 sums of the f16 weights, rounded to f16 once
// (here by the upload, there by the kernel), the same products in the same order.
// Bands and 32 × 32 fragments as well.
TEST(CodegenConvGemmCoop, SummedPhaseWeightsGiveTheBytesOfTheKernelsSums) {
  CoopCase a;
  a.upsample = true, a.ci = 32, a.co = 32, a.h = 5, a.w = 6, a.residual = true;
  a.acc_scale = 4.0, a.residual_scale = 0.25, a.out_scale = 0.5;
  CoopCase odd = a;  // per-element stores; one partial tile per phase
  odd.co = 20, odd.h = 3, odd.w = 7, odd.bias = false, odd.acc_scale = 1.0;
  CoopCase chunks = a;  // two channel chunks, the second partial
  chunks.ci = 40, chunks.residual = false;
  CoopCase banded = a;  // odd band heights: rows of both parities per band
  banded.band_rows = 3;
  for (const CoopCase& c : {a, odd, chunks, banded}) {
    SCOPED_TRACE(describe(c));
    const Built phased = build_phased(c);
    const Ran summed_in_kernel = run(build(c), emulated_target(), "", {}, true);
    const Ran summed_before = run(phased, emulated_target());
    ASSERT_EQ(summed_in_kernel.outputs.size(), 1u);
    ASSERT_EQ(summed_before.outputs.size(), 1u);
    EXPECT_NE(summed_before.pipelines.find("PHASE_W=1"), std::string::npos) << summed_before.pipelines;
    EXPECT_EQ(summed_in_kernel.pipelines.find("PHASE_W=1"), std::string::npos) << summed_in_kernel.pipelines;
    testing::expect_identical(summed_before.outputs[0], summed_in_kernel.outputs[0]);
    // And the interpreter reads the phases layout as the kernel does.
    auto want = interpret(phased.graph, phased.weights, phased.inputs);
    ASSERT_TRUE(want) << want.message();
    double scale = 0.0;
    for (float v : (*want)[0].data) scale = std::max(scale, double(std::fabs(v)));
    testing::expect_close(summed_before.outputs[0], (*want)[0], 1e-3, 1e-5 * scale);
  }
  const Ran big = run(build_phased(a), emulated_target(), "2x2x1x1x32x1x1x32");
  const Ran whole = run(build_phased(a), emulated_target());
  ASSERT_EQ(big.outputs.size(), 1u);
  ASSERT_EQ(whole.outputs.size(), 1u);
  EXPECT_NE(big.pipelines.find("CM_M=32"), std::string::npos) << big.pipelines;
  testing::expect_identical(big.outputs[0], whole.outputs[0]);
}

// Phases weights have no portable kernel: lowering them without tensor cores is an
// error that says so (the pass runs only for targets with them).
TEST(CodegenConvGemmCoop, PhaseWeightsWithoutTensorCoresAreAnError) {
  CoopCase c;
  c.upsample = true, c.ci = 16, c.co = 16, c.h = 3, c.w = 4;
  codegen::Target none = emulated_target();
  none.tensor_cores = codegen::TensorCores::none;
  const Built t = build_phased(c);
  auto plan = codegen::compile_plan(t.graph, t.weights, none);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("tensor-core kernel only"), std::string::npos) << plan.message();
}

// The f16 epilogue loads each fragment's residual one fragment ahead and the bias once
// per channel fragment (EP_AHEAD), the first residual during the main loop's last step
// (EP_PEEL): the same values in the same arithmetic as loading them pass by pass
// (EP_AHEAD=0), so the same bytes. A tile of 2 × 2 subgroups of 2 × 2 fragments, so
// that the prefetch crosses fragments in both directions and subgroups; partial pixel
// tiles, bands of rows, a partial channel tile, scales; the upsample's phase tiles
// (their own pixel order; their summed weights are checked against their own reference
// in PhasesMatchTheirReference, so here only the plain conv against the interpreter).
TEST(CodegenConvGemmCoop, EpilogueLoadsAheadGiveTheSameBytes) {
  CoopCase plain;
  plain.ci = 32, plain.co = 48, plain.h = 10, plain.w = 9, plain.residual = true, plain.band_rows = 4;
  plain.acc_scale = 4.0, plain.residual_scale = 0.25, plain.out_scale = 0.5;
  plain.conv_tile = "2x2x2x2";
  CoopCase up = plain;
  up.upsample = true, up.h = 5, up.w = 6, up.band_rows = 0;
  for (const auto& [c, phases] : {std::pair{plain, false}, std::pair{up, true}}) {
    SCOPED_TRACE(describe(c) + (phases ? " phases" : ""));
    const Built t = build(c);
    const Ran before = run(t, emulated_target(), c.conv_tile, {{"EP_AHEAD", "0"}}, phases);
    const Ran ahead = run(t, emulated_target(), c.conv_tile, {}, phases);
    ASSERT_EQ(before.outputs.size(), 1u);
    ASSERT_EQ(ahead.outputs.size(), 1u);
    for (const char* define : {"HAS_RES=1", "HAS_BIAS=1", "VEC_OUT=1", "FP=2", "FC=2"})
      EXPECT_NE(ahead.pipelines.find(define), std::string::npos) << define << "\n" << ahead.pipelines;
    if (phases) {
      EXPECT_NE(ahead.pipelines.find("PHASES=1"), std::string::npos) << ahead.pipelines;
    }
    testing::expect_identical(ahead.outputs[0], before.outputs[0]);
    if (phases) continue;
    auto want = interpret(t.graph, t.weights, t.inputs);
    ASSERT_TRUE(want) << want.message();
    double scale = 0.0;
    for (float v : (*want)[0].data) scale = std::max(scale, double(std::fabs(v)));
    testing::expect_close(ahead.outputs[0], (*want)[0], 1e-3, 1e-5 * scale);
  }
}

TEST(CodegenConvGemmCoop, PortableKernelWhereTheLayoutDoesNotSuit) {
  const CoopCase ok;
  CoopCase nchw = ok;
  nchw.x_layout = Layout{};  // logical NCHW x: no 16-byte channel groups
  CoopCase few = ok;
  few.ci = 12;  // Ci % 8 != 0
  for (const CoopCase& c : {nchw, few}) {
    SCOPED_TRACE(describe(c));
    auto plan = codegen::compile_plan(build(c).graph, build(c).weights, emulated_target());
    ASSERT_TRUE(plan) << plan.message();
    EXPECT_EQ(pipeline_names(*plan).find("conv_gemm_coop.comp"), std::string::npos) << pipeline_names(*plan);
    EXPECT_NE(pipeline_names(*plan).find("conv_gemm.comp"), std::string::npos) << pipeline_names(*plan);
  }
  codegen::Target none = emulated_target();
  none.tensor_cores = codegen::TensorCores::none;
  auto plan = codegen::compile_plan(build(ok).graph, build(ok).weights, none);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_EQ(pipeline_names(*plan).find("conv_gemm_coop.comp"), std::string::npos);
}

TEST(CodegenConvGemmCoop, NativeVariantCompilesAndValidates) {
  // GL_NV_cooperative_matrix, as on the H200 (subgroup 32), the variants the
  // decoders use: 3×3 with upsample gather and residual, 1×1, the 96-channel tile
  // (FC 3) with the device's f16 rounding (F16_RTE), and the upsample conv as phases
  // (PHASES; phases "2": with summed weights, PHASE_W).
  struct Variant {
    const char *k, *fc, *bk, *stages, *rte, *phases = "0";
  };
  for (const Variant& v : {Variant{"1", "4", "64", "1", "0"}, Variant{"3", "4", "32", "2", "0"},
                           Variant{"3", "3", "32", "1", "1"}, Variant{"3", "4", "32", "1", "1", "1"},
                           Variant{"3", "4", "32", "1", "1", "2"}}) {
    codegen::Defines d = {{"COOPMAT", "1"}, {"CM_SG", "32"}, {"WP", "2"},       {"WC", "2"},
                          {"FP", "4"},      {"FC", v.fc},    {"BK", v.bk},      {"STAGES", v.stages},
                          {"PHASES", v.phases[0] == '0' ? "0" : "1"}, {"PHASE_W", v.phases[0] == '2' ? "1" : "0"},
                          {"KH", v.k},      {"KW", v.k},     {"U", "1"},        {"HAS_BIAS", "1"},
                          {"HAS_RES", "1"}, {"ROUND", "ROUND_F16"}, {"F16", "1"}, {"F16_RTE", v.rte},
                          {"R_T", "float16_t"}, {"Y_T", "float16_t"}};
    auto spirv = codegen::compile_kernel("conv_gemm_coop.comp", d);
    ASSERT_TRUE(spirv) << spirv.message();
    Status valid = codegen::validate_spirv(*spirv);
    EXPECT_TRUE(valid.is_ok()) << valid.message();
  }
}

// The default tile follows the output channels: 128-channel tiles for 128k channels,
// 96-channel tiles where those pad less (96, 192: Qwen-Image's up blocks).
TEST(CodegenConvGemmCoop, TileChannelsFollowTheOutputChannels) {
  codegen::Target nv = emulated_target();
  nv.tensor_cores = codegen::TensorCores::nv_coopmat;
  nv.subgroup_size = 32;
  for (const auto& [co, fc] : std::vector<std::pair<int64_t, std::string>>{{96, "3"}, {192, "3"}, {128, "4"},
                                                                            {256, "4"}, {384, "4"}}) {
    CoopCase c;
    c.co = co;
    const Built t = build(c);
    auto plan = codegen::compile_plan(t.graph, t.weights, nv);
    ASSERT_TRUE(plan) << plan.message();
    EXPECT_NE(pipeline_names(*plan).find("FC=" + fc + ","), std::string::npos) << co << ": " << pipeline_names(*plan);
  }
  // With flexible dimensions: 32 × 32 fragments, 96 channels as 3 subgroups of one.
  nv.coopmat_flexible = true;
  nv.max_shared_memory_bytes = 48 << 10;
  for (const auto& [co, wc] : std::vector<std::pair<int64_t, std::string>>{{96, "3"}, {192, "3"}, {384, "2"}}) {
    CoopCase c;
    c.co = co;
    const Built t = build(c);
    auto plan = codegen::compile_plan(t.graph, t.weights, nv);
    ASSERT_TRUE(plan) << plan.message();
    const std::string names = pipeline_names(*plan);
    EXPECT_NE(names.find("WC=" + wc + ","), std::string::npos) << co << ": " << names;
    EXPECT_NE(names.find("CM_M=32"), std::string::npos) << co << ": " << names;
  }
}

// Fragments of 32×32 (coopmat.glsl's CM_M, CM_N; flexible dimensions on the device)
// compute the same sums in the same order as 16×16 ones: the same bytes, through the
// emulation, for partial tiles, the vector and per-element epilogues, and a residual
// with the upsample gather.
TEST(CodegenConvGemmCoop, ThirtyTwoByThirtyTwoFragmentsGiveTheSameBytes) {
  CoopCase plain;
  plain.ci = 40, plain.co = 48, plain.h = 10, plain.w = 9;
  CoopCase up;
  up.ci = 32, up.co = 72, up.h = 5, up.w = 10, up.upsample = true, up.residual = true;
  CoopCase odd = plain;
  odd.co = 20;  // per-element stores
  // (One fragment per subgroup: the emulation's 32×32 fragments are large on lavapipe's
  // coroutine stacks.)
  for (const CoopCase& c : {plain, up, odd}) {
    SCOPED_TRACE(describe(c));
    const Built t = build(c);
    const Ran base = run(t, emulated_target(), "2x2x1x1");  // 16×16 fragments, BK 32
    ASSERT_EQ(base.outputs.size(), 1u);
    for (const char* tile : {"2x2x1x1x32x1x1x32"}) {
      SCOPED_TRACE(tile);
      const Ran other = run(t, emulated_target(), tile);
      ASSERT_EQ(other.outputs.size(), 1u);
      EXPECT_NE(other.pipelines.find("CM_M=32"), std::string::npos) << other.pipelines;
      testing::expect_identical(other.outputs[0], base.outputs[0]);
    }
  }
}

// On a device with flexible dimensions the default 128 × 128 tile takes 2 × 2 fragments
// of 32 × 32, rewritten to VK_KHR_cooperative_matrix; the plan says so in its
// requirements, and a device without them (lavapipe) is told what it lacks. Without
// flexible dimensions, 32 × 32 fragments are refused by name.
TEST(CodegenConvGemmCoop, FlexibleDevicesGetKhrFragmentsOf32) {
  codegen::Target nv = emulated_target();
  nv.tensor_cores = codegen::TensorCores::nv_coopmat;
  nv.subgroup_size = 32;
  nv.coopmat_flexible = true;
  nv.max_shared_memory_bytes = 48 << 10;  // the H200's
  CoopCase c;
  c.co = 128;
  const Built t = build(c);
  auto plan = codegen::compile_plan(t.graph, t.weights, nv);
  ASSERT_TRUE(plan) << plan.message();
  const std::string names = pipeline_names(*plan);
  EXPECT_NE(names.find("CM_M=32"), std::string::npos) << names;
  EXPECT_NE(names.find("COOPMAT_KHR=1"), std::string::npos) << names;
  EXPECT_NE(names.find("FP=2"), std::string::npos) << names;
  const runtime::DeviceRequirements& q = plan->requirements;
  EXPECT_TRUE(q.cooperative_matrix_flexible);
  EXPECT_TRUE(q.vulkan_memory_model);
  for (const runtime::PipelineDesc& p : plan->pipelines)
    if (p.name.find("conv_gemm_coop") != std::string::npos)
      for (size_t i = 5; i < p.spirv.size(); i += p.spirv[i] >> 16) {
        ASSERT_GT(p.spirv[i] >> 16, 0u);
        EXPECT_NE(p.spirv[i] & 0xFFFFu, 5358u) << "an NV matrix type in " << p.name;
      }
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  if (!(*device)->info().cooperative_matrix_flexible) {
    Status s = runtime::check_requirements((*device)->info(), q);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("flexible dimensions"), std::string::npos) << s.message();
  }

  nv.coopmat_flexible = false;
  codegen::CodegenOptions f32;
  f32.conv_tile = "f32";
  auto refused = codegen::compile_plan(t.graph, t.weights, nv, f32);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("16x16 cooperative matrices only"), std::string::npos) << refused.message();
  auto default16 = codegen::compile_plan(t.graph, t.weights, nv);
  ASSERT_TRUE(default16) << default16.message();
  EXPECT_EQ(pipeline_names(*default16).find("CM_M="), std::string::npos) << pipeline_names(*default16);
  EXPECT_FALSE(default16->requirements.cooperative_matrix_flexible);
}

TEST(CodegenConvGemmCoop, NativePlanRequiresCooperativeMatrices) {
  codegen::Target nv = emulated_target();
  nv.tensor_cores = codegen::TensorCores::nv_coopmat;
  nv.subgroup_size = 32;
  const Built t = build(CoopCase{});
  auto plan = codegen::compile_plan(t.graph, t.weights, nv);
  ASSERT_TRUE(plan) << plan.message();
  const runtime::DeviceRequirements& q = plan->requirements;
  EXPECT_TRUE(q.cooperative_matrix_nv);
  EXPECT_TRUE(q.vulkan_memory_model);
  EXPECT_TRUE(q.shader_float16 && q.storage_buffer_16bit_access);
  EXPECT_EQ(q.min_subgroup_size, 32u);
  EXPECT_EQ(q.max_subgroup_size, 32u);
  ASSERT_EQ(q.cooperative_matrix_shapes.size(), 1u);
  EXPECT_EQ(q.cooperative_matrix_shapes[0], codegen::kCoopShape16);
  // A device without them (lavapipe): opening a device for this plan names what is
  // missing.
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  if ((*device)->info().cooperative_matrix_nv) GTEST_SKIP() << "the test device has cooperative matrices";
  Status s = runtime::check_requirements((*device)->info(), q);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cooperative"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace strata
