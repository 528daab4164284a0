// codegen/spirv_khr_rewrite.h: GL_NV_cooperative_matrix SPIR-V rewritten to
// VK_KHR_cooperative_matrix. lavapipe has neither extension, so these tests check the
// module's words: every NV instruction replaced, each matrix type given the use its
// multiply-adds imply, loads and stores given the layout their column-major flag said.
#include "codegen/shader_compiler.h"
#include "codegen/spirv_khr_rewrite.h"

#include <gtest/gtest.h>

#include <map>

namespace strata {
namespace {

struct Inst {
  uint32_t op;
  std::vector<uint32_t> ops;
};

// The module's instructions; fails the test on a malformed word stream.
std::vector<Inst> parse(const std::vector<uint32_t>& w) {
  std::vector<Inst> out;
  EXPECT_GE(w.size(), 5u);
  EXPECT_EQ(w[0], 0x07230203u);
  for (size_t i = 5; i < w.size();) {
    const uint32_t n = w[i] >> 16;
    EXPECT_GT(n, 0u) << "word " << i;
    EXPECT_LE(i + n, w.size()) << "word " << i;
    if (n == 0 || i + n > w.size()) break;
    out.push_back(Inst{w[i] & 0xFFFFu, std::vector<uint32_t>(w.begin() + i + 1, w.begin() + i + n)});
    i += n;
  }
  return out;
}

codegen::Defines conv_defines(const char* frag) {
  codegen::Defines d = {{"COOPMAT", "1"}, {"CM_SG", "32"}, {"WP", "2"},     {"WC", "2"},
                        {"FP", "2"},      {"FC", "2"},     {"BK", "32"},    {"STAGES", "1"},
                        {"KH", "3"},      {"KW", "3"},     {"U", "0"},      {"HAS_BIAS", "1"},
                        {"HAS_RES", "1"}, {"ROUND", "ROUND_F16"}, {"F16", "1"}, {"VEC_OUT", "1"},
                        {"R_T", "float16_t"}, {"Y_T", "float16_t"}};
  if (std::string(frag) != "16") d["CM_M"] = d["CM_N"] = frag;
  return d;
}

TEST(SpirvKhrRewrite, ConvKernelWith32x32FragmentsBecomesKhr) {
  auto nv = codegen::compile_kernel("conv_gemm_coop.comp", conv_defines("32"));
  ASSERT_TRUE(nv) << nv.message();
  Status valid = codegen::validate_spirv(*nv);  // the NV form, before the rewrite
  ASSERT_TRUE(valid.is_ok()) << valid.message();
  auto khr = codegen::rewrite_coopmat_nv_to_khr(*nv);
  ASSERT_TRUE(khr) << khr.message();
  const std::vector<Inst> insts = parse(*khr);
  ASSERT_FALSE(insts.empty());
  EXPECT_GT((*khr)[3], (*nv)[3]) << "the id bound grows by the new constants";

  std::map<uint32_t, uint32_t> constants;  // id -> value of 32-bit OpConstants
  std::map<uint32_t, std::vector<uint32_t>> types;  // KHR matrix type id -> operands
  int loads = 0, stores = 0, muladds = 0;
  bool khr_capability = false, nv_capability = false, khr_extension = false;
  for (const Inst& in : insts) {
    EXPECT_TRUE(in.op < 5357 || in.op > 5362) << "NV cooperative-matrix opcode " << in.op << " left";
    if (in.op == 17) {
      khr_capability |= in.ops[0] == 6022;
      nv_capability |= in.ops[0] == 5357;
    }
    if (in.op == 10) {
      const std::string name(reinterpret_cast<const char*>(in.ops.data()));
      khr_extension |= name == "SPV_KHR_cooperative_matrix";
      EXPECT_NE(name, "SPV_NV_cooperative_matrix");
    }
    if (in.op == 43 && in.ops.size() == 3) constants[in.ops[1]] = in.ops[2];
    if (in.op == 4456) types[in.ops[0]] = in.ops;
    if (in.op == 4457) ++loads;
    if (in.op == 4458) ++stores;
    if (in.op == 4459) ++muladds;
  }
  EXPECT_TRUE(khr_capability);
  EXPECT_FALSE(nv_capability);
  EXPECT_TRUE(khr_extension);
  EXPECT_GT(loads, 0);
  EXPECT_GT(stores, 0);
  EXPECT_GT(muladds, 0);
  // Three types: A 32×16, B 16×32 (f16) and the 32×32 accumulator, with uses 0, 1, 2.
  ASSERT_EQ(types.size(), 3u);
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> shape_by_use;  // use -> (rows, columns)
  for (const auto& [id, ops] : types) {
    ASSERT_EQ(ops.size(), 6u);  // result, component, scope, rows, columns, use
    shape_by_use[constants.at(ops[5])] = {constants.at(ops[3]), constants.at(ops[4])};
    EXPECT_EQ(constants.at(ops[2]), 3u) << "subgroup scope";
  }
  EXPECT_EQ(shape_by_use.at(0), std::make_pair(32u, 16u));
  EXPECT_EQ(shape_by_use.at(1), std::make_pair(16u, 32u));
  EXPECT_EQ(shape_by_use.at(2), std::make_pair(32u, 32u));
  // A is staged pixel-major (row-major), B channel-major (column-major), and the
  // epilogue stores the accumulator row-major.
  for (const Inst& in : insts) {
    if (in.op == 4457) {
      const uint32_t use = constants.at(types.at(in.ops[0])[5]);
      if (use != 2) {
        EXPECT_EQ(constants.at(in.ops[3]), use == 0 ? 0u : 1u) << "layout of a use-" << use << " load";
      }
    }
    if (in.op == 4458) {
      EXPECT_EQ(constants.at(in.ops[2]), 0u) << "store layout";
    }
  }
}

TEST(SpirvKhrRewrite, OneTypeForAAndBIsAnError) {
  // 16×16 fragments: glslang declares one f16 16×16 type for A and B; a KHR type
  // carries one use, so the rewrite refuses rather than guess.
  auto nv = codegen::compile_kernel("conv_gemm_coop.comp", conv_defines("16"));
  ASSERT_TRUE(nv) << nv.message();
  auto khr = codegen::rewrite_coopmat_nv_to_khr(*nv);
  ASSERT_FALSE(khr);
  EXPECT_NE(khr.message().find("used as both A and B"), std::string::npos) << khr.message();
}

TEST(SpirvKhrRewrite, RejectsWhatIsNotACooperativeMatrixModule) {
  EXPECT_FALSE(codegen::rewrite_coopmat_nv_to_khr({1, 2, 3}));
  auto plain = codegen::compile_kernel("unary.comp", {{"OP", "SILU"}, {"ROUND", "ROUND_NONE"}});
  ASSERT_TRUE(plain) << plain.message();
  auto r = codegen::rewrite_coopmat_nv_to_khr(*plain);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no GL_NV_cooperative_matrix type"), std::string::npos) << r.message();
  std::vector<uint32_t> truncated = *plain;
  truncated.resize(truncated.size() - 1);
  truncated.back() = 0xFFFF0000u | 17;  // an instruction claiming 65535 words
  EXPECT_FALSE(codegen::rewrite_coopmat_nv_to_khr(truncated));
}

TEST(SpirvKhrRewrite, CompileKernelRewritesWithCoopmatKhr) {
  codegen::Defines d = conv_defines("32");
  d["COOPMAT_KHR"] = "1";
  auto words = codegen::compile_kernel("conv_gemm_coop.comp", d);
  ASSERT_TRUE(words) << words.message();
  bool khr = false;
  for (const Inst& in : parse(*words)) khr |= in.op == 4456;
  EXPECT_TRUE(khr);
}

}  // namespace
}  // namespace strata
