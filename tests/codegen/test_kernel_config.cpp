// Kernel configs (codegen/kernel_config.h): a small graph with one node per kernel
// family the decoders lean on — a plain conv_gemm, an upsample2x conv_gemm, an RMS
// norm_act, an attention and a permute (a strided copy) — compiled for the default
// (lavapipe-like) Target, its configs printed and compared with text written from
// the kernels' sources and the lowerings' rules (tiles, grids, push-constant words),
// not from this code's output. No device is needed: codegen only compiles SPIR-V.
#include "codegen/codegen.h"
#include "codegen/kernel_config.h"
#include "ir/parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace strata::codegen {
namespace {

constexpr const char* kGraph = R"(graph @kernels(%x: f32[1,8,4,4], %q: f32[2,16,8], %k: f32[2,16,8], %v: f32[2,16,8]) {
  %w1: f32[8,8,3,3] = weight "w1"
  %c1: f32[1,8,4,4] = conv_gemm "c1" (%x, %w1) {gather = "plain", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "oihw"}
  %g: f32[8] = weight "g"
  %n: f32[1,8,4,4] = norm_act "n" (%c1, %g) {eps = 1e-06, norm = "rms", silu = 1}
  %w2: f32[4,8,3,3] = weight "w2"
  %u: f32[1,4,8,8] = conv_gemm "u" (%n, %w2) {gather = "upsample2x", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "oihw"}
  %a: f32[2,16,8] = attention "a" (%q, %k, %v) {scale = 0.35355339059327373}
  %p: f32[2,8,16] = permute "p" (%a) {perm = [0, 2, 1]}
  return %u, %p
}
)";

// Buffers (codegen/placement.h): 0 "input" x@0 q@512 k@1536 v@2560; 1 "output" u@0
// p@1024; 2 "weights" w1@0 (2304 bytes) g@2304 w2@2560; 3 "activations" c1@0, and n
// over c1 at @0 (the memory planner's in-place rule: a norm_act whose operand dies
// there writes over it, passes/memory_plan.h), then a@0 (c1 and n are free by then).
// 256-byte alignment.

// conv_gemm.comp's portable tile for 8 output channels: BM 8 × BN 128 pixels, BK 16,
// TM 1 × TN 4 per invocation, so (8/1)·(128/4) = 256 invocations; one pixel tile of
// 16 pixels, one channel tile: grid 1x1x1. Strides of NCHW [1,8,4,4]: 128, 16, 4, 1.
constexpr const char* kPlainConv = R"(node 'c1' (conv_gemm)
  kernel conv_gemm.comp
  variant BK=16 BM=8 BN=128 HAS_BIAS=0 HAS_RES=0 KH=3 KW=3 ROUND=ROUND_NONE TM=1 TN=4 U=0 W_OHWI=0 W_T=float X_CFAST=0 X_T=float Y_T=float
  tile BK=16 BM=8 BN=128 TM=1 TN=4
  workgroup 256x1x1
  push 124 bytes
    @0 uint ci = 8
    @4 uint co = 8
    @8 uint co_store = 8
    @12 uint h_in = 4
    @16 uint w_in = 4
    @20 uint w_out = 4
    @24 int pad_h = 1
    @28 int pad_w = 1
    @32 uint stride_h = 1
    @36 uint stride_w = 1
    @40 uint split = 1
    @44 uint xs_n = 128
    @48 uint xs_c = 16
    @52 uint xs_y = 4
    @56 uint xs_x = 1
    @60 uint ys_n = 128
    @64 uint ys_c = 16
    @68 uint ys_y = 4
    @72 uint ys_x = 1
    @76 uint rs_n = 0
    @80 uint rs_c = 0
    @84 uint rs_y = 0
    @88 uint rs_x = 0
    @92 float acc_scale = 1
    @96 float residual_scale = 1
    @100 float out_scale = 1
    @104 uint row0 = 0
    @108 uint rows = 4
    @112 uint x_off = 0
    @116 uint y_base = 0
    @120 uint r_base = 0
  dispatch grid 1x1x1
    x r: buffer 0 @0 +512
    w r: buffer 2 @0 +2304
    y w: buffer 3 @0 +512
)";

// norm_act "rms" on a logical (not nhwc) f32 x: the scalar norm_act_rms.comp, one
// invocation per position (16) in workgroups of 64; 15 push words; √8 = 2.828427.
constexpr const char* kNormAct = R"(node 'n' (norm_act)
  kernel norm_act_rms.comp
  variant G_T=float HAS_BETA=0 HAS_BIAS=0 ROUND=ROUND_NONE SILU=1 WG=64 X_T=float Y_T=float
  tile WG=64
  workgroup 64x1x1
  push 60 bytes
    @0 uint positions = 16
    @4 uint spatial = 16
    @8 uint slots = 8
    @12 uint channels = 8
    @16 uint xs_n = 128
    @20 uint xs_c = 16
    @24 uint xs_s = 1
    @28 uint ys_n = 128
    @32 uint ys_c = 16
    @36 uint ys_s = 1
    @40 float in_scale = 1
    @44 float eps = 1e-06
    @48 float sqrt_r = 2.828427
    @52 uint x_base = 0
    @56 uint y_base = 0
  dispatch grid 1x1x1
    x r: buffer 3 @0 +512
    gamma r: buffer 2 @2304 +32
    y w: buffer 3 @0 +512
)";

// The upsample2x gather: the same kernel with U=1, reading the 4×4 n as an 8×8 input
// (h_in, w_in stay 4; w_out 8); 4 output channels still take the 8-channel tile.
constexpr const char* kUpsampleConv = R"(node 'u' (conv_gemm)
  kernel conv_gemm.comp
  variant BK=16 BM=8 BN=128 HAS_BIAS=0 HAS_RES=0 KH=3 KW=3 ROUND=ROUND_NONE TM=1 TN=4 U=1 W_OHWI=0 W_T=float X_CFAST=0 X_T=float Y_T=float
  tile BK=16 BM=8 BN=128 TM=1 TN=4
  workgroup 256x1x1
  push 124 bytes
    @0 uint ci = 8
    @4 uint co = 4
    @8 uint co_store = 4
    @12 uint h_in = 4
    @16 uint w_in = 4
    @20 uint w_out = 8
    @24 int pad_h = 1
    @28 int pad_w = 1
    @32 uint stride_h = 1
    @36 uint stride_w = 1
    @40 uint split = 1
    @44 uint xs_n = 128
    @48 uint xs_c = 16
    @52 uint xs_y = 4
    @56 uint xs_x = 1
    @60 uint ys_n = 256
    @64 uint ys_c = 64
    @68 uint ys_y = 8
    @72 uint ys_x = 1
    @76 uint rs_n = 0
    @80 uint rs_c = 0
    @84 uint rs_y = 0
    @88 uint rs_x = 0
    @92 float acc_scale = 1
    @96 float residual_scale = 1
    @100 float out_scale = 1
    @104 uint row0 = 0
    @108 uint rows = 8
    @112 uint x_off = 0
    @116 uint y_base = 0
    @120 uint r_base = 0
  dispatch grid 1x1x1
    x r: buffer 3 @0 +512
    w r: buffer 2 @2560 +1152
    y w: buffer 1 @0 +1024
)";

// attention.comp, portable: 16 query rows × 32 keys per block, D 8 in one chunk,
// CT = the output columns' power of two clamped to [128/16, 128] = 8; both heads in
// one dispatch, one row block each: 2 workgroups of 128. No key windows (KEY_WINDOWS
// off: the block has no first_window / last_window words).
constexpr const char* kAttention = R"(node 'a' (attention)
  kernel attention.comp
  variant BC=32 BR=16 CT=8 D=8 DC=8 DV=8 KEY_WINDOWS=0 K_T=float O_T=float Q_T=float ROUND=ROUND_NONE V_T=float WG=128
  tile BC=32 BR=16 CT=8 DC=8 WG=128
  workgroup 128x1x1
  push 40 bytes
    @0 uint heads = 2
    @4 uint rows = 16
    @8 uint tk = 16
    @12 uint q_head_stride = 128
    @16 uint o_head_stride = 128
    @20 uint q_base = 0
    @24 uint k_base = 0
    @28 uint v_base = 0
    @32 uint o_base = 0
    @36 float scale = 0.35355338
  dispatch grid 2x1x1
    q r: buffer 0 @512 +1024
    k r: buffer 0 @1536 +1024
    v r: buffer 0 @2560 +1024
    o w: buffer 3 @0 +1024
)";

// permute [0, 2, 1] of [2,16,8]: strided_copy.comp over y's shape [2,8,16] with x's
// strides permuted (128, 1, 8) and y's (128, 16, 1); no dims merge, RANK 3; 256
// elements in workgroups of 64.
constexpr const char* kPermute = R"(node 'p' (permute)
  kernel strided_copy.comp
  variant RANK=3
  tile -
  workgroup 64x1x1
  push 48 bytes
    @0 uint n = 256
    @4 uint src_base = 0
    @8 uint dst_base = 0
    @12 uint shape[0] = 2
    @16 uint shape[1] = 8
    @20 uint shape[2] = 16
    @24 uint src_stride[0] = 128
    @28 uint src_stride[1] = 1
    @32 uint src_stride[2] = 8
    @36 uint dst_stride[0] = 128
    @40 uint dst_stride[1] = 16
    @44 uint dst_stride[2] = 1
  dispatch grid 4x1x1
    src r: buffer 3 @0 +1024
    dst w: buffer 1 @1024 +1024
)";

TEST(KernelConfig, SmallGraphPrintsTheExpectedConfigs) {
  auto g = parse_graph(kGraph);
  ASSERT_TRUE(g) << g.message();
  WeightStore store;
  for (const ValueId c : g->constants()) {
    const Value& v = g->value(c);
    ASSERT_TRUE(store.add_owned(v.weight, v.type.shape, std::vector<float>(v.type.elements(), 0.5f)).is_ok());
  }
  auto plan = compile_plan(*g, store, Target{});
  ASSERT_TRUE(plan) << plan.message();
  auto configs = kernel_configs(*g, *plan);
  ASSERT_TRUE(configs) << configs.message();
  std::map<std::string, std::string> by_node;
  for (const KernelConfig& c : *configs)
    if (!c.op.empty()) by_node[c.node] += to_string(c);
  ASSERT_EQ(by_node.size(), 5u) << explain_kernels(*configs);
  EXPECT_EQ(by_node["c1"], kPlainConv);
  EXPECT_EQ(by_node["n"], kNormAct);
  EXPECT_EQ(by_node["u"], kUpsampleConv);
  EXPECT_EQ(by_node["a"], kAttention);
  EXPECT_EQ(by_node["p"], kPermute);
}

TEST(KernelConfig, BandsListEveryDispatchAndTheWordsThatChange) {
  // A conv_gemm in bands of 2 of its 4 rows (bands need row-contiguous nhwc values):
  // two dispatches, the second differing in row0 (and its windows' words).
  auto g = parse_graph(R"(graph @b(%x: f32[1,8,4,4]{nhwc}) {
  %w1: f32[8,8,3,3] = weight "w1"
  %c1: f32[1,8,4,4]{nhwc} = conv_gemm "c1" (%x, %w1) {band_rows = 2, kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %y: f32[1,8,4,4] = silu "y" (%c1)
  return %y
}
)");
  ASSERT_TRUE(g) << g.message();
  WeightStore store;
  ASSERT_TRUE(store.add_owned("w1", {8, 8, 3, 3}, std::vector<float>(576, 0.5f)).is_ok());
  auto plan = compile_plan(*g, store, Target{});
  ASSERT_TRUE(plan) << plan.message();
  auto configs = kernel_configs(*g, *plan);
  ASSERT_TRUE(configs) << configs.message();
  const auto c1 = std::find_if(configs->begin(), configs->end(), [](const KernelConfig& c) { return c.node == "c1"; });
  ASSERT_NE(c1, configs->end());
  const std::string text = to_string(*c1);
  EXPECT_NE(text.find("  variant BK=16 BM=8 BN=128 HAS_BIAS=0 HAS_RES=0 KH=3 KW=3 ROUND=ROUND_NONE TM=1 TN=4 U=0 "
                      "W_OHWI=0 W_T=float X_CFAST=1 "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  dispatch band 1/2 grid 1x1x1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  dispatch band 2/2 grid 1x1x1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    push row0=2"), std::string::npos) << text;
  EXPECT_NE(text.find("    @108 uint rows = 2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("    push rows="), std::string::npos) << text;  // both bands have 2 rows
}

TEST(KernelConfig, VariantNamesParseBack) {
  const Defines d = {{"BM", "64"}, {"X_T", "float"}};
  auto back = parse_kernel_variant_name(kernel_variant_name("conv_gemm.comp", d));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->first, "conv_gemm.comp");
  EXPECT_EQ(back->second, d);
  auto plain = parse_kernel_variant_name("unary.comp");
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->second.empty());
  EXPECT_FALSE(parse_kernel_variant_name("unary.comp[OP"));
}

TEST(KernelConfig, InterfaceFollowsTheDefines) {
  // attention.comp declares first_window / last_window and a fifth buffer only with
  // KEY_WINDOWS = 1.
  Defines d = {{"D", "8"},  {"DV", "8"},  {"BR", "16"}, {"BC", "32"}, {"DC", "8"}, {"WG", "128"}, {"CT", "8"},
               {"ROUND", "ROUND_NONE"}, {"KEY_WINDOWS", "1"}};
  auto with = kernel_interface("attention.comp", d);
  ASSERT_TRUE(with) << with.message();
  ASSERT_EQ(with->push.size(), 12u);
  EXPECT_EQ(with->push[10].name, "first_window");
  EXPECT_EQ(with->push[11].offset, 44u);
  EXPECT_EQ(with->bindings, (std::vector<std::string>{"q", "k", "v", "o", "state"}));
  d["KEY_WINDOWS"] = "0";
  auto without = kernel_interface("attention.comp", d);
  ASSERT_TRUE(without) << without.message();
  EXPECT_EQ(without->push.size(), 10u);
  EXPECT_EQ(without->bindings.size(), 4u);
}

}  // namespace
}  // namespace strata::codegen
