// Codegen: a token RMS norm writing the int8 rows of the W8A8 linears that read its
// result (codegen/lower_norm.cpp, layer_norm.comp QUANT), held in scratch memory until
// the last of them (Lowering::hold_scratch), instead of a row quantizer before the
// linears (lower_gemm_int8.cpp). On lavapipe with the emulated int8 kernels.
//
// What must hold:
//   - the plans with and without it (CodegenOptions::w8a8_norm_rows) give the same
//     bytes: the norm quantizes the values y holds with quantize_rows.comp's functions
//     (w8a8_codes.glsl). Rows whose codes end in a zero-padded tail (C not a multiple
//     of the 32-code step), a row of zeros (scale 0), short rows several to a
//     workgroup, and long rows of several vectors a lane;
//   - the rows outlive nodes between the norm and its last reader that take scratch
//     memory themselves (here another W8A8 linear's quantizer);
//   - y is written only where something other than the linears reads it;
//   - zimage_small at w8a8 with the token epilogues fused (as compile() runs it): the
//     same output bit for bit, and no quantizer left on a linear whose x a token norm
//     writes.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"
#include "ir/npy.h"
#include "models/zimage.h"
#include "passes/pass.h"
#include "tests/e2e/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <string>

namespace strata {
namespace {

using testing::random_tensor;

codegen::Target emulated_target() {
  auto device = testing::test_device_f16();
  EXPECT_TRUE(device) << device.message();
  codegen::Target target = device ? codegen::target_for((*device)->info()) : codegen::Target{};
  target.tensor_cores = codegen::TensorCores::emulated;
  return target;
}

struct Ran {
  std::vector<Tensor> outputs;
  std::vector<std::string> kernels;  // each dispatch's pipeline name, in order
  std::vector<std::string> labels;   // each dispatch's label
};

Ran compile_and_run(const Graph& g, const WeightStore& weights, const std::vector<Tensor>& inputs,
                    bool norm_rows) {
  Ran r;
  codegen::CodegenOptions options;
  options.w8a8_norm_rows = norm_rows;
  auto plan = codegen::compile_plan(g, weights, emulated_target(), options);
  EXPECT_TRUE(plan) << plan.message();
  if (!plan) return r;
  for (const runtime::DispatchDesc& d : plan->dispatches) {
    r.kernels.push_back(plan->pipelines[d.pipeline].name);
    r.labels.push_back(d.label);
  }
  auto device = testing::test_device_for(plan->requirements);
  EXPECT_TRUE(device) << device.message();
  if (!device) return r;
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(weights));
  EXPECT_TRUE(exec) << exec.message();
  if (!exec) return r;
  for (ValueId v : g.outputs()) r.outputs.emplace_back(g.value(v).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out;
  for (Tensor& y : r.outputs) out.push_back(std::as_writable_bytes(std::span(y.data)));
  Status s = (*exec)->run(in, out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return r;
}

int count_with(const std::vector<std::string>& kernels, const std::string& part) {
  int n = 0;
  for (const std::string& k : kernels) n += k.find(part) != std::string::npos;
  return n;
}

struct NormCase {
  const char* what;
  int64_t rows, cols;
  bool y_is_output;  // y is read by more than the linears
};

// y = token_rms_norm(x, γ, m) {f16}; a = linear(y, w1), c = linear(z, w3),
// d = linear(y, w2), all W8A8 with f32 results, in that order: c's quantizer takes
// scratch memory between y's two readers. x's first row is zeros.
struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
};

Built norm_and_linears(const NormCase& c, uint64_t seed) {
  Built t;
  Builder b(t.graph, &t.weights);
  const int64_t r = c.rows, k = c.cols, n1 = 40, n2 = 24, kz = 48;
  Tensor x = random_tensor({r, k}, seed, -3.0f, 3.0f);
  for (int64_t j = 0; j < k; ++j) x.data[static_cast<size_t>(j)] = 0.0f;
  t.inputs = {x, random_tensor({1, k}, seed + 1, 0.5f, 1.5f), random_tensor({r, kz}, seed + 2, -2.0f, 2.0f)};
  const ValueId xv = b.input("x", {r, k});
  const ValueId mv = b.cast(b.input("m", {1, k}), DType::f16);
  const ValueId zv = b.cast(b.input("z", {r, kz}), DType::f16);
  auto constant = [&](const char* name, Shape shape, uint64_t s, float lo, float hi) {
    EXPECT_TRUE(t.weights.add_owned(name, shape, std::move(random_tensor(shape, s, lo, hi).data)).is_ok());
    return b.constant(name, TensorType{shape, DType::f16, {}});
  };
  const ValueId gamma = constant("gamma", {k}, seed + 3, 0.5f, 1.5f);
  const ValueId y =
      b.op(Op::token_rms_norm, {xv, gamma, mv}, Attrs{{"eps", 1e-5}, {"dtype", std::string("f16")}});
  const Attrs w8a8{{"dtype", std::string("f32")}, {"quant", std::string("w8a8")}};
  const ValueId a = b.op(Op::linear, {y, constant("w1", {n1, k}, seed + 4, -0.2f, 0.2f)}, w8a8);
  const ValueId cz = b.op(Op::linear, {zv, constant("w3", {n1, kz}, seed + 5, -0.2f, 0.2f)}, w8a8);
  const ValueId d = b.op(Op::linear, {y, constant("w2", {n2, k}, seed + 6, -0.2f, 0.2f)}, w8a8);
  for (ValueId out : {a, cz, d}) b.output(out);
  if (c.y_is_output) b.output(b.cast(y, DType::f32));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return t;
}

TEST(CodegenW8A8NormRows, NormWritesTheRowsBitIdenticallyToTheQuantizer) {
  const std::vector<NormCase> cases = {
      {"rows of 72 (codes padded to 96), 16 rows a workgroup", 37, 72, false},
      {"rows of 1040, 3 vectors a lane, y also an output", 9, 1040, true},
      {"rows of 3840 (Z-Image), y also an output", 5, 3840, true},
  };
  uint64_t seed = 900;
  for (const NormCase& c : cases) {
    SCOPED_TRACE(c.what);
    const Built t = norm_and_linears(c, seed);
    seed += 10;
    const Ran fused = compile_and_run(t.graph, t.weights, t.inputs, true);
    const Ran apart = compile_and_run(t.graph, t.weights, t.inputs, false);
    // Without: a quantizer for each of a, c and d (c's runs between a and d, so d
    // cannot bind a's rows). With: c's alone.
    EXPECT_EQ(count_with(apart.kernels, "quantize_rows.comp"), 3);
    EXPECT_EQ(count_with(fused.kernels, "quantize_rows.comp"), 1);
    EXPECT_EQ(count_with(fused.kernels, "gemm_int8.comp"), 3);
    EXPECT_EQ(count_with(fused.kernels, "QUANT=1"), 1);
    EXPECT_EQ(count_with(fused.kernels, "WRITE_Y=0"), c.y_is_output ? 0 : 1);
    ASSERT_EQ(fused.outputs.size(), apart.outputs.size());
    for (size_t i = 0; i < fused.outputs.size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      testing::expect_identical(fused.outputs[i], apart.outputs[i]);
    }
    // Not zeros from both: a's first row (x's zero row) is 0, the others are not.
    bool nonzero = false;
    for (float v : fused.outputs[0].data) nonzero = nonzero || v != 0.0f;
    EXPECT_TRUE(nonzero);
  }
}

// zimage_small at w8a8 as compile() runs the passes (the token epilogues fused): the
// norms before q, k, v (attention_norm1 · (1 + scale)) and before w1, w3 (ffn_norm1 ·
// (1 + scale)) in each of the 6 blocks, and the caption embedder's norm before its
// linear, write their readers' rows. 52 int8 GEMMs; without it 31 quantizers (q, k
// and v share one, w1 and w3 another), with it 13 fewer: 18, those of to_out, w2, the
// embedders, the modulations and the final layer, whose x no token norm writes.
TEST(CodegenW8A8NormRows, ZImageSmallRunsNoQuantizerAfterANormAndIsBitIdentical) {
  constexpr const char* kCase = "zimage_small";
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(e2e::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(e2e::case_file(kCase, "latent.npy"));
  auto cap = read_npy(e2e::case_file(kCase, "cap_feats.npy"));
  auto t = read_npy(e2e::case_file(kCase, "timestep.npy"));
  ASSERT_TRUE(latent && cap && t);
  ZImageOptions o;
  o.latent_h = latent->shape[2];
  o.latent_w = latent->shape[3];
  o.caption_length = cap->shape[0];
  o.weight_dtype = DType::f16;
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();
  CompileOptions options;
  options.precision = Precision::f16;
  options.quantize = "w8a8";
  options.fuse_token_ops = true;
  PassContext ctx{options, model->weights, {}};
  ASSERT_TRUE(run_pipeline(*g, ctx).is_ok());
  ASSERT_EQ(ctx.quantized_linears, 52);

  // The linears whose x a token norm writes, read off the graph.
  const std::vector<int64_t> producers = g->producers();
  std::map<std::string, bool> after_norm;
  int norms_feeding_linears = 0;
  std::vector<bool> counted(g->values().size(), false);
  for (const Node& n : g->nodes()) {
    if (n.op != Op::linear || n.attrs.get_string("quant", "") != "w8a8") continue;
    const int64_t p = producers[static_cast<size_t>(n.inputs[0])];
    const bool norm = p >= 0 && g->nodes()[static_cast<size_t>(p)].op == Op::token_rms_norm;
    after_norm[n.name] = norm;
    if (norm && !counted[static_cast<size_t>(n.inputs[0])]) {
      counted[static_cast<size_t>(n.inputs[0])] = true;
      ++norms_feeding_linears;
    }
  }
  EXPECT_EQ(norms_feeding_linears, 13);  // 6 blocks × 2, and cap_embedder.0

  const std::vector<Tensor> inputs = {*latent, *cap, *t};
  const Ran fused = compile_and_run(*g, model->weights, inputs, true);
  const Ran apart = compile_and_run(*g, model->weights, inputs, false);
  EXPECT_EQ(count_with(fused.kernels, "gemm_int8.comp"), 52);
  EXPECT_EQ(count_with(apart.kernels, "gemm_int8.comp"), 52);
  EXPECT_EQ(count_with(apart.kernels, "quantize_rows.comp"), 31);
  EXPECT_EQ(count_with(fused.kernels, "quantize_rows.comp"), 31 - norms_feeding_linears);
  EXPECT_EQ(count_with(fused.kernels, "QUANT=1"), norms_feeding_linears);
  EXPECT_EQ(fused.kernels.size(), apart.kernels.size() - static_cast<size_t>(norms_feeding_linears));
  for (size_t i = 0; i < fused.kernels.size(); ++i) {
    if (fused.kernels[i].find("quantize_rows.comp") == std::string::npos) continue;
    const std::string linear = fused.labels[i].substr(0, fused.labels[i].rfind(':'));
    EXPECT_FALSE(after_norm[linear]) << linear << " quantizes the rows its token norm wrote";
  }
  ASSERT_EQ(fused.outputs.size(), 1u);
  ASSERT_EQ(apart.outputs.size(), 1u);
  for (float v : fused.outputs[0].data) ASSERT_TRUE(std::isfinite(v));
  testing::expect_identical(fused.outputs[0], apart.outputs[0]);
  std::printf("[ zimage   ] w8a8: %d quantizers for 52 GEMMs in %zu dispatches (without norm rows: %d in %zu)\n",
              count_with(fused.kernels, "quantize_rows.comp"), fused.kernels.size(),
              count_with(apart.kernels, "quantize_rows.comp"), apart.kernels.size());
}

}  // namespace
}  // namespace strata
