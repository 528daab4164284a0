// Every embedded kernel compiles and its SPIR-V validates (Vulkan 1.2):
//   - the pointwise and data-movement kernels in every variant their lowerings use
//     (the table below: each define's full range);
//   - every pipeline of a plan that uses every op of the table, so the variants the
//     other families choose are checked as they are chosen today;
//   - and no embedded .comp file is left out of both.
// Also: compiler errors name the kernel variant and carry shaderc's message.
#include "codegen/kernel_sources.h"
#include "codegen/lowering.h"
#include "codegen/shader_compiler.h"
#include "ir/builder.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace strata::codegen {
namespace {

struct Variant {
  std::string file;
  Defines defines;
};

// The variants lower_elementwise.cpp and lower_shuffle.cpp can ask for: each define
// over its range (ranks, rounding, f32 / f16 element types), not every combination.
std::vector<Variant> pointwise_and_shuffle_variants() {
  std::vector<Variant> v;
  const std::vector<std::string> rounds = {"ROUND_NONE", "ROUND_F16", "ROUND_BF16"};
  const Defines half_io = {{"F16", "1"}, {"X_T", "float16_t"}, {"Y_T", "float16_t"}};
  for (const char* op : {"SILU", "GELU", "TANH", "SCALE", "CLAMP", "COPY"}) {
    for (const auto& r : rounds) v.push_back({"unary.comp", {{"OP", op}, {"ROUND", r}}});
    Defines d = half_io;
    d.insert({{"OP", op}, {"ROUND", "ROUND_F16"}});
    v.push_back({"unary.comp", d});
  }
  for (int rank = 1; rank <= 6; ++rank) {
    const std::string r = std::to_string(rank), other = std::to_string(7 - rank);
    v.push_back({"unary.comp", {{"OP", "COPY"}, {"ROUND", "ROUND_NONE"}, {"XRANK", r}, {"YRANK", other}}});
    for (const char* op : {"ADD", "MUL"})
      for (const auto& rd : rounds) v.push_back({"binary.comp", {{"OP", op}, {"RANK", r}, {"ROUND", rd}}});
    v.push_back({"binary.comp", {{"OP", "ADD"}, {"RANK", r}, {"ROUND", "ROUND_F16"}, {"F16", "1"},
                                 {"A_T", "float16_t"}, {"B_T", "float"}, {"Z_T", "float16_t"}}});
    v.push_back({"strided_copy.comp", {{"RANK", r}}});
    v.push_back({"strided_copy.comp", {{"RANK", r}, {"F16", "1"}, {"SRC_T", "float16_t"}, {"DST_T", "float16_t"}}});
    v.push_back({"strided_copy.comp", {{"RANK", r}, {"F16", "1"}, {"CONVERT", "1"}, {"ROUND", "ROUND_F16"},
                                       {"SRC_T", "float"}, {"DST_T", "float16_t"}}});
    v.push_back({"upsample_nearest.comp", {{"RANK", r}}});
    v.push_back({"upsample_nearest.comp", {{"RANK", r}, {"F16", "1"}, {"ELEM", "float16_t"}}});
  }
  return v;
}

// A graph with one node of every op (f32, small awkward shapes).
Graph every_op_graph(WeightStore& w) {
  Graph g;
  auto add_weight = [&](const std::string& name, Shape shape) {
    EXPECT_TRUE(w.add_owned(name, shape, std::vector<float>(static_cast<size_t>(num_elements(shape)), 0.5f)));
  };
  add_weight("conv2d.weight", {6, 5, 3, 3});
  add_weight("conv2d.bias", {6});
  add_weight("conv3d.weight", {6, 6, 3, 3, 3});
  add_weight("norm.gamma", {6});
  add_weight("norm.beta", {6});
  add_weight("linear.weight", {7, 6});
  add_weight("conv_gemm.weight", {6, 6, 3, 3});
  add_weight("rope.table", {42, 3});
  add_weight("freqs", {4});
  Builder b(g, &w);
  ValueId x = b.input("x", {1, 5, 6, 7});
  ValueId h = b.conv2d(x, b.weight("conv2d.weight"), b.weight("conv2d.bias"), {.pad = 1});
  h = b.group_norm(h, b.weight("norm.gamma"), b.weight("norm.beta"), 3, 1e-6);
  h = b.rms_norm(h, b.weight("norm.gamma"));
  h = b.clamp(b.scale(b.gelu(b.silu(h)), 0.5, 0.1), -1, 1);
  ValueId v = b.conv3d(b.reshape(b.upsample_nearest(h, {1, 1}), {1, 6, 1, 6, 7}), b.weight("conv3d.weight"),
                       kNoValue, {.pad = 1});
  ValueId t = b.permute(b.reshape(v, {6, 42}), {1, 0});  // [42, 6] tokens
  t = b.layer_norm(t, b.weight("norm.gamma"), b.weight("norm.beta"), 1e-5);
  ValueId q = b.linear(t, b.weight("linear.weight"));  // [42, 7]
  ValueId a = b.attention(q, q, b.slice(b.concat({q, q}, 1), 1, 0, 7), 0.3);
  ValueId m = b.softmax(b.matmul(a, b.permute(a, {1, 0})));
  b.output(b.mul(b.add(m, m), b.cast(m, DType::f16)));
  // The diffusion transformer's ops: token_rms_norm, tanh, rope, sinusoidal.
  ValueId table = b.weight("rope.table");
  b.output(b.rope(b.tanh(b.token_rms_norm(t, b.weight("norm.gamma"), 1e-5)), table, table));
  b.output(b.sinusoidal(b.reshape(b.slice(t, 0, 0, 1), {6}), b.weight("freqs")));
  // The fused ops: norm_act (group, then rms with SiLU) feeding a conv_gemm with an
  // upsample gather, a residual and an f16 output.
  ValueId na = b.op(Op::norm_act, {h, b.weight("norm.gamma"), b.weight("norm.beta"), b.weight("conv2d.bias")},
                    {{"norm", std::string("group")}, {"groups", int64_t{3}}, {"eps", 1e-6}});
  na = b.op(Op::norm_act, {na, b.weight("norm.gamma")},
            {{"norm", std::string("rms")}, {"eps", 1e-12}, {"silu", int64_t{1}}, {"dtype", std::string("f16")}});
  ValueId cg = b.op(Op::conv_gemm, {na, b.weight("conv_gemm.weight"), b.weight("conv2d.bias")},
                    {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
                     {"weight_layout", std::string("oihw")}, {"gather", std::string("upsample2x")}});
  b.output(b.op(Op::conv_gemm, {na, b.weight("conv_gemm.weight"), kNoValue, cg},
                {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
                 {"weight_layout", std::string("oihw")}, {"gather", std::string("upsample2x")},
                 {"residual_scale", 0.5}, {"dtype", std::string("f16")}}));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

TEST(CodegenKernels, PointwiseAndShuffleVariantsCompileAndValidate) {
  for (const Variant& v : pointwise_and_shuffle_variants()) {
    SCOPED_TRACE(kernel_variant_name(v.file, v.defines));
    auto spirv = compile_kernel(v.file, v.defines);
    ASSERT_TRUE(spirv) << spirv.message();
    Status s = validate_spirv(*spirv);
    EXPECT_TRUE(s) << s.message();
  }
}

TEST(CodegenKernels, EveryEmbeddedKernelIsCovered) {
  std::set<std::string> covered;
  for (const Variant& v : pointwise_and_shuffle_variants()) covered.insert(v.file);
  WeightStore w;
  Graph g = every_op_graph(w);
  auto plan = compile_plan(g, w, Target{});
  ASSERT_TRUE(plan) << plan.message();
  for (const runtime::PipelineDesc& p : plan->pipelines) {
    SCOPED_TRACE(p.name);
    Status s = validate_spirv(p.spirv);
    EXPECT_TRUE(s) << s.message();
    covered.insert(p.name.substr(0, p.name.find('[')));
  }
  // Kernels the every-op plan (f32, logical layouts, no tensor cores) does not reach;
  // each of these tests asserts that its plans use the kernel.
  const std::map<std::string, std::string> elsewhere = {
      {"conv_gemm_coop.comp", "test_conv_gemm_coop.cpp"},
      {"attention_coop.comp", "test_attention_coop.cpp"},
      {"attention_coop_dsplit.comp", "test_attention_coop.cpp"},
      {"attention_coop_rows.comp", "test_attention_coop.cpp"},
      {"block_softmax.comp", "test_attention_gemms.cpp"},
      {"gemm_int8.comp", "test_w8a8.cpp"},
      {"quantize_rows.comp", "test_w8a8.cpp"},
      {"norm_act_stats_vec.comp", "test_norm_act.cpp"},
      {"norm_act_apply_vec.comp", "test_norm_act.cpp"},
      {"norm_act_rms_vec.comp", "test_norm_act.cpp"},
      {"winograd_input.comp", "test_winograd.cpp"},
      {"winograd_gemm.comp", "test_winograd.cpp"},
      {"winograd_output.comp", "test_winograd.cpp"},
      {"winograd_weights.comp", "test_winograd.cpp"}};
  for (std::string_view f : kernel_files()) {
    if (!f.ends_with(".comp") || elsewhere.count(std::string(f))) continue;
    EXPECT_TRUE(covered.count(std::string(f))) << "kernels/" << f << " is neither in the variant table of "
                                               << "test_kernels.cpp nor used by the every-op plan";
  }
}

TEST(CodegenKernels, EmbeddedSourcesArePresent) {
  EXPECT_FALSE(kernel_source("common.glsl").empty());
  EXPECT_FALSE(kernel_source("unary.comp").empty());
  EXPECT_TRUE(kernel_source("no_such_kernel.comp").empty());
  auto prelude = kernel_source_with_prelude("unary.comp", {{"OP", "SILU"}});
  ASSERT_TRUE(prelude) << prelude.message();
  EXPECT_EQ(prelude->rfind("#version 450\n", 0), 0u);
  EXPECT_NE(prelude->find("#define OP SILU\n"), std::string::npos);
  EXPECT_NE(prelude->find("#define linear_index()"), std::string::npos);
}

TEST(CodegenKernels, CompileErrorsNameTheKernel) {
  auto bad = compile_kernel("unary.comp", {{"OP", "NOPE"}, {"ROUND", "ROUND_NONE"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("unary.comp[OP=NOPE,ROUND=ROUND_NONE]"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("unknown OP"), std::string::npos) << bad.message();
  auto missing = compile_kernel("no_such_kernel.comp", {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("no_such_kernel.comp"), std::string::npos) << missing.message();
  EXPECT_FALSE(validate_spirv({0x07230203u, 0x00010500u, 0, 1, 0}));
}

}  // namespace
}  // namespace strata::codegen
