// Codegen: producers writing the int8 rows of the W8A8 linears that read their result,
// held in scratch memory until the last of them (Lowering::hold_scratch), instead of a
// row quantizer before the linears (lower_gemm_int8.cpp): a token RMS norm
// (codegen/lower_norm.cpp, layer_norm.comp QUANT), silu_mul and the attention output's
// permute (codegen/lower_w8a8_rows.cpp, quantize_rows.comp SILU_MUL and HEADS). On
// lavapipe with the emulated int8 kernels.
//
// What must hold:
//   - the plans with and without it (CodegenOptions::w8a8_producer_rows) give the same
//     bytes: the norm quantizes the values y holds with quantize_rows.comp's functions
//     (w8a8_codes.glsl). Rows whose codes end in a zero-padded tail (C not a multiple
//     of the 32-code step), a row of zeros (scale 0), short rows several to a
//     workgroup, and long rows of several vectors a lane;
//   - the rows outlive nodes between the norm and its last reader that take scratch
//     memory themselves (here another W8A8 linear's quantizer);
//   - y is written only where something other than the linears reads it;
//   - silu_mul and permute {1, 0, 2} → reshape give the same bytes as the silu_mul or
//     the copy, then the quantizer, in one dispatch instead of two; a permute whose
//     result something else reads stays a copy;
//   - zimage_small at w8a8 with the token epilogues fused (as compile() runs it): the
//     same output bit for bit, and no quantizer left on a linear whose x a token norm,
//     a silu_mul or the attention's output permute writes.
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
  options.w8a8_producer_rows = norm_rows;
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

// The linears' x from `make(builder, inputs)`; then a = linear(x, w1), c = linear(z,
// w3) (its quantizer between x's readers), d = linear(x, w2), all W8A8, f32 results.
template <typename Make>
Built producer_and_linears(int64_t rows, int64_t k, uint64_t seed, Make make) {
  Built t;
  Builder b(t.graph, &t.weights);
  const ValueId x = make(b, t.inputs);
  const int64_t n1 = 40, n2 = 24, kz = 48;
  t.inputs.push_back(random_tensor({rows, kz}, seed + 2, -2.0f, 2.0f));
  const ValueId zv = b.cast(b.input("z", {rows, kz}), DType::f16);
  auto constant = [&](const char* name, Shape shape, uint64_t s) {
    EXPECT_TRUE(t.weights.add_owned(name, shape, std::move(random_tensor(shape, s, -0.2f, 0.2f).data)).is_ok());
    return b.constant(name, TensorType{shape, DType::f16, {}});
  };
  const Attrs w8a8{{"dtype", std::string("f32")}, {"quant", std::string("w8a8")}};
  const ValueId a = b.op(Op::linear, {x, constant("w1", {n1, k}, seed + 4)}, w8a8);
  const ValueId c = b.op(Op::linear, {zv, constant("w3", {n1, kz}, seed + 5)}, w8a8);
  const ValueId d = b.op(Op::linear, {x, constant("w2", {n2, k}, seed + 6)}, w8a8);
  for (ValueId out : {a, c, d}) b.output(out);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return t;
}

void expect_same_and_one_dispatch_fewer(const Built& t, const std::string& producer_kernel, int producer_outputs) {
  const Ran fused = compile_and_run(t.graph, t.weights, t.inputs, true);
  const Ran apart = compile_and_run(t.graph, t.weights, t.inputs, false);
  // Without: the producer's dispatch, and a quantizer for each of a, c and d. With: the
  // producer's quantizer and c's.
  EXPECT_EQ(count_with(apart.kernels, producer_kernel), producer_outputs);
  EXPECT_EQ(count_with(apart.kernels, "quantize_rows.comp"), 3);
  EXPECT_EQ(count_with(fused.kernels, producer_kernel), producer_outputs - 1);
  EXPECT_EQ(count_with(fused.kernels, "quantize_rows.comp"), 2);
  EXPECT_EQ(fused.kernels.size() + 2, apart.kernels.size());
  ASSERT_EQ(fused.outputs.size(), apart.outputs.size());
  for (size_t i = 0; i < fused.outputs.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    testing::expect_identical(fused.outputs[i], apart.outputs[i]);
  }
  bool nonzero = false;
  for (float v : fused.outputs[0].data) nonzero = nonzero || v != 0.0f;
  EXPECT_TRUE(nonzero);
}

TEST(CodegenW8A8NormRows, SiluMulWritesTheRowsBitIdentically) {
  struct Case {
    int64_t rows, k;
  };
  // Codes padded past K (72 → 96); 2 vectors an invocation; Z-Image's w2 rows (10240: 256
  // invocations, 5 vectors each).
  for (const Case c : {Case{37, 72}, Case{9, 1040}, Case{3, 10240}}) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.k));
    const uint64_t seed = 950 + static_cast<uint64_t>(c.k);
    const Built t = producer_and_linears(c.rows, c.k, seed, [&](Builder& b, std::vector<Tensor>& in) {
      Tensor a = random_tensor({c.rows, c.k}, seed, -6.0f, 6.0f);
      for (int64_t j = 0; j < c.k; ++j) a.data[static_cast<size_t>(j)] = 0.0f;  // silu(0) · b: a zero row
      in.push_back(a);
      in.push_back(random_tensor({c.rows, c.k}, seed + 1, -3.0f, 3.0f));
      const ValueId av = b.cast(b.input("a", {c.rows, c.k}), DType::f16);
      const ValueId bv = b.cast(b.input("b", {c.rows, c.k}), DType::f16);
      return b.op(Op::silu_mul, {av, bv}, Attrs{{"dtype", std::string("f16")}});
    });
    expect_same_and_one_dispatch_fewer(t, "OP=SILU_MUL", 1);
  }
}

TEST(CodegenW8A8NormRows, AttentionOutputPermuteWritesTheRowsBitIdentically) {
  struct Case {
    int64_t heads, tokens, head_dim;
  };
  for (const Case c : {Case{4, 37, 24}, Case{3, 5, 40}}) {  // K = 96; 120, codes padded to 128
    SCOPED_TRACE(std::to_string(c.heads) + " heads of " + std::to_string(c.head_dim));
    const uint64_t seed = 970 + static_cast<uint64_t>(c.head_dim);
    const Built t =
        producer_and_linears(c.tokens, c.heads * c.head_dim, seed, [&](Builder& b, std::vector<Tensor>& in) {
          in.push_back(random_tensor({c.heads, c.tokens, c.head_dim}, seed, -2.0f, 2.0f));
          const ValueId o = b.cast(b.input("o", {c.heads, c.tokens, c.head_dim}), DType::f16);
          return b.reshape(b.permute(o, {1, 0, 2}), {c.tokens, c.heads * c.head_dim});
        });
    expect_same_and_one_dispatch_fewer(t, "strided_copy.comp", 1);
  }
}

// zimage_small at w8a8 as compile() runs the passes (the token epilogues fused). Its 52
// int8 GEMMs run 31 quantizers without producer rows (q, k and v share one, w1 and w3
// another). With them, in each of the 6 blocks the norms before q, k, v
// (attention_norm1 · (1 + scale)) and w1, w3 (ffn_norm1 · (1 + scale)) write their
// readers' rows, as do the silu_mul before w2 and the attention output's permute
// before to_out, and so does the caption embedder's norm: 25 producers. The 13 norms
// take no dispatch of their own for it, the 12 others replace theirs; the linears
// quantize 6 x of their own (the embedders', the modulation's and the final layer's).
TEST(CodegenW8A8NormRows, ZImageSmallQuantizesNoProducersResultAndIsBitIdentical) {
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

  // The W8A8 linears whose x (through a reshape) a token norm, a silu_mul or a permute
  // of heads and tokens writes (the patch embedder's permute is another), and how many such x there are of each, read off the graph.
  const std::vector<int64_t> producers = g->producers();
  auto producer_of = [&](ValueId v) -> const Node* {
    const int64_t p = producers[static_cast<size_t>(v)];
    return p < 0 ? nullptr : &g->nodes()[static_cast<size_t>(p)];
  };
  std::map<std::string, bool> from_producer;
  std::map<Op, int> written;
  std::vector<bool> counted(g->values().size(), false);
  for (const Node& n : g->nodes()) {
    if (n.op != Op::linear || n.attrs.get_string("quant", "") != "w8a8") continue;
    const Node* p = producer_of(n.inputs[0]);
    if (p && p->op == Op::reshape) p = producer_of(p->inputs[0]);
    const bool heads = p && p->op == Op::permute && p->attrs.get_ints("perm") == std::vector<int64_t>{1, 0, 2};
    const bool rows = p && (p->op == Op::token_rms_norm || p->op == Op::silu_mul || heads);
    from_producer[n.name] = rows;
    if (rows && !counted[static_cast<size_t>(n.inputs[0])]) {
      counted[static_cast<size_t>(n.inputs[0])] = true;
      ++written[p->op];
    }
  }
  EXPECT_EQ(written[Op::token_rms_norm], 13);  // 6 blocks × 2, and cap_embedder.0
  EXPECT_EQ(written[Op::silu_mul], 6);
  EXPECT_EQ(written[Op::permute], 6);

  const std::vector<Tensor> inputs = {*latent, *cap, *t};
  const Ran fused = compile_and_run(*g, model->weights, inputs, true);
  const Ran apart = compile_and_run(*g, model->weights, inputs, false);
  EXPECT_EQ(count_with(fused.kernels, "gemm_int8.comp"), 52);
  EXPECT_EQ(count_with(apart.kernels, "gemm_int8.comp"), 52);
  EXPECT_EQ(count_with(apart.kernels, "quantize_rows.comp"), 31);
  EXPECT_EQ(count_with(fused.kernels, "QUANT=1"), 13);
  EXPECT_EQ(count_with(fused.kernels, "SILU_MUL=1"), 6);
  EXPECT_EQ(count_with(fused.kernels, "HEADS=1"), 6);
  EXPECT_EQ(count_with(apart.kernels, "OP=SILU_MUL"), 6);
  EXPECT_EQ(count_with(fused.kernels, "OP=SILU_MUL"), 0);
  EXPECT_EQ(count_with(fused.kernels, "strided_copy.comp"), count_with(apart.kernels, "strided_copy.comp") - 6);
  EXPECT_EQ(fused.kernels.size(), apart.kernels.size() - 25);
  int by_linears = 0;
  for (size_t i = 0; i < fused.kernels.size(); ++i) {
    if (fused.kernels[i].find("quantize_rows.comp") == std::string::npos) continue;
    const std::string label = fused.labels[i].substr(0, fused.labels[i].rfind(':'));
    if (!from_producer.count(label)) continue;  // a producer's own dispatch
    ++by_linears;
    EXPECT_FALSE(from_producer[label]) << label << " quantizes the rows its x's producer wrote";
  }
  EXPECT_EQ(by_linears, 6);
  ASSERT_EQ(fused.outputs.size(), 1u);
  ASSERT_EQ(apart.outputs.size(), 1u);
  for (float v : fused.outputs[0].data) ASSERT_TRUE(std::isfinite(v));
  testing::expect_identical(fused.outputs[0], apart.outputs[0]);
  std::printf("[ zimage   ] w8a8: %zu dispatches, %d row quantizers (%d on linears) for 52 GEMMs; without producer "
              "rows %zu dispatches, %d quantizers\n",
              fused.kernels.size(), count_with(fused.kernels, "quantize_rows.comp"), by_linears, apart.kernels.size(),
              count_with(apart.kernels, "quantize_rows.comp"));
}

}  // namespace
}  // namespace strata
