// split_bands: band_rows on a small parsed graph and on the flux-small decoder, checked
// against band heights worked out here from the shapes and windows recomputed here
// with ir/band_math.h; limit 0 leaves the graph alone; a limit nothing fits names the
// node; explain_bands prints the bands and windows.
#include "passes/split_bands.h"

#include "ir/band_math.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "models/vae.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <regex>

namespace strata {
namespace {

// An upsampling 3×3 conv_gemm (x: 4 rows of 8 → y: 8 rows of 16) and a norm_act, f16
// nhwc: x rows are 8 × 4 × 2 = 64 bytes, the others 16 × 4 × 2 = 128. The weight
// (4 × 36 f16, 288 bytes) is bound whole.
constexpr const char* kSmall = R"(graph @bands(%x: f16[1,4,4,8]{nhwc}) {
  %c.weight: f16[4,36] = weight "c.weight"
  %c: f16[1,4,8,16]{nhwc} = conv_gemm "c" (%x, %c.weight) {gather = "upsample2x", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "o_hwi"}
  %n.weight: f32[4] = weight "n.weight"
  %n: f16[1,4,8,16]{nhwc} = norm_act "n" (%c, %n.weight) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  return %n
}
)";

constexpr uint64_t kRow = 16 * 4 * 2;
// Room for exactly three rows per window.
constexpr uint64_t kSmallLimit = kWindowSlack + 3 * kRow;

Graph parsed(const char* text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g) << g.message();
  return g ? std::move(*g) : Graph();
}

Node* find_node(Graph& g, const std::string& name) {
  for (Node& n : g.nodes())
    if (n.name == name) return &n;
  return nullptr;
}

Status split(Graph& g, uint64_t limit, std::vector<std::string>* log = nullptr, int64_t min_bands = 0) {
  WeightStore store;
  CompileOptions options;
  options.binding_limit = limit;
  options.min_bands = min_bands;
  PassContext ctx{options, store, {}};
  Status s = run_split_bands(g, ctx);
  if (log) *log = ctx.log;
  return s;
}

TEST(SplitBands, SmallGraphGetsThreeRowBands) {
  Graph g = parsed(kSmall);
  std::vector<std::string> log;
  Status s = split(g, kSmallLimit, &log);
  ASSERT_TRUE(s.is_ok()) << s.message();
  // y windows hold 3 rows (4 would not fit); the conv's x window for kept [3,6) is
  // conv rows [2,7) → upsampled-from rows [1,4): 3 half-size rows, which fit.
  EXPECT_EQ(find_node(g, "c")->attrs.get_int("band_rows", 0), 3) << print_graph(g);
  EXPECT_EQ(find_node(g, "n")->attrs.get_int("band_rows", 0), 3) << print_graph(g);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], "split_bands: binding limit 640 bytes: 2 nodes banded (up to 3 bands), largest tensor 1.0 KiB");
}

// min_bands (ranks sharing the plan): without a limit, 8 rows in at least 3 bands are
// bands of ⌈8/3⌉ = 3 rows; under a limit that allows 3, a minimum of 2 changes
// nothing (bands of 3 are already more than 2); a minimum above the rows leaves the
// node whole.
TEST(SplitBands, MinimumBandCountForRanks) {
  Graph g = parsed(kSmall);
  std::vector<std::string> log;
  ASSERT_TRUE(split(g, 0, &log, 3).is_ok());
  EXPECT_EQ(find_node(g, "c")->attrs.get_int("band_rows", 0), 3) << print_graph(g);
  EXPECT_EQ(find_node(g, "n")->attrs.get_int("band_rows", 0), 3) << print_graph(g);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], "split_bands: binding limit none, at least 3 bands: 2 nodes banded (up to 3 bands), largest "
                    "tensor 1.0 KiB");
  Graph four = parsed(kSmall);
  ASSERT_TRUE(split(four, 0, nullptr, 4).is_ok());
  EXPECT_EQ(find_node(four, "c")->attrs.get_int("band_rows", 0), 2);
  Graph limited = parsed(kSmall);
  ASSERT_TRUE(split(limited, kSmallLimit, nullptr, 2).is_ok());
  EXPECT_EQ(find_node(limited, "c")->attrs.get_int("band_rows", 0), 3);
  Graph too_many = parsed(kSmall);
  ASSERT_TRUE(split(too_many, 0, nullptr, 9).is_ok());
  EXPECT_FALSE(find_node(too_many, "c")->attrs.has("band_rows"));
}

TEST(SplitBands, WholeFrameThatFitsGetsNoAttribute) {
  Graph g = parsed(kSmall);
  find_node(g, "c")->attrs.set("band_rows", int64_t{2});  // stale: must go
  ASSERT_TRUE(split(g, kWindowSlack + 8 * kRow).is_ok());
  EXPECT_FALSE(find_node(g, "c")->attrs.has("band_rows"));
  EXPECT_FALSE(find_node(g, "n")->attrs.has("band_rows"));
}

TEST(SplitBands, OneRowTooWideIsAnErrorNamingTheNode) {
  Graph g = parsed(kSmall);
  Status s = split(g, kWindowSlack + kRow - 1);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("node 'c' (conv_gemm)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("a band of one output row"), std::string::npos) << s.message();
}

TEST(SplitBands, ExplainListsBandsAndWindows) {
  Graph g = parsed(kSmall);
  ASSERT_TRUE(split(g, kSmallLimit).is_ok());
  const std::string text = explain_bands(g, kSmallLimit);
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("bands for a binding limit of 640 bytes: each window at most 384 bytes (256 kept for offset "
                  "alignment)"))
      << text;
  EXPECT_TRUE(has("node 'c' (conv_gemm): 8 output rows in 3 bands of 3")) << text;
  EXPECT_TRUE(has("  band 1: kept [3,6) of 8")) << text;
  EXPECT_TRUE(has("    1 conv k3 p1 s1: in [2,7) of 8 (halo 1 above, 1 below)")) << text;
  EXPECT_TRUE(has("    x        %x: rows [1,4) of 4 (halo 0 above, 1 below), 3 x 64 = 192 bytes")) << text;
  EXPECT_TRUE(has("    y        %c: rows [3,6) of 8, 3 x 128 = 384 bytes")) << text;
  EXPECT_TRUE(has("node 'n' (norm_act): 8 output rows in 3 bands of 3")) << text;
  EXPECT_TRUE(has("    y        %n: rows [6,8) of 8, 2 x 128 = 256 bytes")) << text;
  EXPECT_TRUE(has("not banded: 0 conv_gemm / norm_act nodes run whole")) << text;
  EXPECT_TRUE(has("total: 2 nodes banded into 6 bands, largest window 384 bytes of 384 allowed")) << text;
  EXPECT_EQ(text.find("OVER"), std::string::npos) << text;
  // A tighter limit than the one the bands were made for marks the windows.
  EXPECT_NE(explain_bands(g, kWindowSlack + 2 * kRow).find("OVER"), std::string::npos);
}

// ---- the flux-small decoder, f32, through lower_precision ----------------------

Graph flux_small_lowered() {
  Vae vae = seeded_vae(flux_small_config(), 0);
  auto built = build_decoder(vae, {.latent_h = 8, .latent_w = 8});
  EXPECT_TRUE(built) << built.message();
  Graph g = std::move(*built);
  CompileOptions options;  // f32 storage: 4 bytes per element
  options.stop_after = "lower_precision";
  PassContext ctx{options, vae.weights, {}};
  Status s = run_pipeline(g, ctx);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return g;
}

// 160 KiB: above the largest weight (64 × 576 f32 = 144 KiB), below the 64-row
// activations (512 KiB).
constexpr uint64_t kFluxLimit = 160 << 10;

uint64_t row_bytes(const TensorType& t) {
  const int64_t c = std::max(t.shape[1], t.layout.padded_channels);
  return static_cast<uint64_t>(t.shape[3] * c) * (t.dtype == DType::f16 ? 2 : 4);
}

// The bytes of every window a band of `n` binds, recomputed from the interface:
// conv_gemm x through {upsample 2?, conv}, residual and y the kept rows; norm_act x and
// y the kept rows.
std::vector<uint64_t> windows(const Graph& g, const Node& n, RowRange kept) {
  const TensorType& x = g.value(n.inputs[0]).type;
  RowRange x_rows = kept;
  std::vector<uint64_t> bytes;
  if (n.op == Op::conv_gemm) {
    std::vector<RowOp> ops;
    if (*conv_gather(n.attrs) == GatherKind::upsample2x) ops.push_back(RowOp::make_upsample(2));
    ops.push_back(RowOp::make_conv(n.attrs.get_ints("kernel")[0], n.attrs.get_ints("pad", {0, 0})[0],
                                   n.attrs.get_ints("stride", {1, 1})[0]));
    x_rows = needed_rows(ops, x.shape[2], kept);
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue)
      bytes.push_back(static_cast<uint64_t>(kept.size()) * row_bytes(g.value(n.inputs[3]).type));
  }
  bytes.push_back(static_cast<uint64_t>(x_rows.size()) * row_bytes(x));
  bytes.push_back(static_cast<uint64_t>(kept.size()) * row_bytes(g.value(n.outputs[0]).type));
  return bytes;
}

bool all_fit(const Graph& g, const Node& n, int64_t r, uint64_t limit) {
  const int64_t h = g.value(n.outputs[0]).type.shape[2];
  for (int64_t a = 0; a < h; a += r)
    for (uint64_t b : windows(g, n, {a, std::min(a + r, h)}))
      if (b > limit - kWindowSlack) return false;
  return true;
}

TEST(SplitBands, FluxSmallBandsFitAndAreAsTallAsPossible) {
  Graph g = flux_small_lowered();
  ASSERT_TRUE(split(g, kFluxLimit).is_ok());

  // conv_out: 3×3, pad 1, x f32[1,32,64,64]: an inner band of R rows reads R + 2 rows
  // of x, each 64 · 32 · 4 bytes; y (4 channels) is smaller. (R + 2) · 8192 ≤
  // 160 KiB − 256 gives R = 17: bands [0,17), [17,34), [34,51), [51,64).
  const Node* conv_out = find_node(g, "decoder.conv_out");
  ASSERT_NE(conv_out, nullptr);
  const TensorType& x = g.value(conv_out->inputs[0]).type;
  ASSERT_EQ(x.shape, (Shape{1, 32, 64, 64}));
  const int64_t r_conv = static_cast<int64_t>((kFluxLimit - kWindowSlack) / (64 * 32 * 4)) - 2;
  EXPECT_EQ(r_conv, 17);
  EXPECT_EQ(conv_out->attrs.get_int("band_rows", 0), r_conv);

  // conv_norm_out (norm_act): x and y are f32[1,32,64,64]: R · 8192 ≤ 160 KiB − 256,
  // R = 19: four bands.
  const Node* norm = find_node(g, "decoder.conv_norm_out");
  ASSERT_NE(norm, nullptr);
  ASSERT_EQ(norm->op, Op::norm_act);
  EXPECT_EQ(norm->attrs.get_int("band_rows", 0), static_cast<int64_t>((kFluxLimit - kWindowSlack) / (64 * 32 * 4)));

  int64_t banded = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::conv_gemm && n.op != Op::norm_act) continue;
    const int64_t h = g.value(n.outputs[0]).type.shape[2];
    const int64_t r = n.attrs.get_int("band_rows", h);
    EXPECT_TRUE(all_fit(g, n, r, kFluxLimit)) << n.name << " band_rows " << r;
    if (n.attrs.has("band_rows")) {
      ++banded;
      EXPECT_LT(r, h) << n.name;
      EXPECT_FALSE(all_fit(g, n, r + 1, kFluxLimit)) << n.name << ": band_rows " << r << " is not the largest";
    }
  }
  EXPECT_GE(banded, 2);
}

TEST(SplitBands, ZeroLimitLeavesTheGraphAndALimitOnlyAddsBandRows) {
  Graph g = flux_small_lowered();
  const std::string before = print_graph(g);
  Graph unlimited = g;
  std::vector<std::string> log;
  ASSERT_TRUE(split(unlimited, 0, &log).is_ok());
  EXPECT_EQ(print_graph(unlimited), before);
  EXPECT_TRUE(log.empty());

  ASSERT_TRUE(split(g, kFluxLimit).is_ok());
  const std::string after = print_graph(g);
  EXPECT_NE(after, before);
  EXPECT_EQ(std::regex_replace(after, std::regex("band_rows = [0-9]+, "), ""), before);
}

TEST(SplitBands, LimitBelowAWeightIsAnErrorNamingTheNode) {
  Graph g = flux_small_lowered();
  Status s = split(g, 64 << 10);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("node 'decoder."), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("147456 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("weights are bound whole"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace strata
