// conv_gemm's typed attributes (ir/ops.h): GatherKind and WeightLayout, their one
// text spelling each, and the errors for text that names neither.
#include "ir/infer.h"
#include "ir/ops.h"
#include "ir/parser.h"
#include "ir/printer.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(ConvAttrs, GatherKindsSpellAsTheTextFormDoes) {
  EXPECT_EQ(gather_name(GatherKind::plain), "plain");
  EXPECT_EQ(gather_name(GatherKind::upsample2x), "upsample2x");
  EXPECT_EQ(gather_upsample(GatherKind::plain), 1);
  EXPECT_EQ(gather_upsample(GatherKind::upsample2x), 2);
  for (GatherKind g : {GatherKind::plain, GatherKind::upsample2x}) EXPECT_EQ(gather_from_name(gather_name(g)), g);
  EXPECT_EQ(gather_from_name("Upsample2x"), std::nullopt);
  EXPECT_EQ(gather_from_name(""), std::nullopt);
}

TEST(ConvAttrs, AbsentGatherIsPlainAndSetGatherPrintsItsName) {
  Attrs a;
  auto g = conv_gather(a);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(*g, GatherKind::plain);
  set_gather(a, GatherKind::upsample2x);
  EXPECT_EQ(attrs_str(a), "{gather = \"upsample2x\"}");
  EXPECT_EQ(*conv_gather(a), GatherKind::upsample2x);
  a.set("gather", std::string("bilinear"));
  EXPECT_EQ(conv_gather(a).message(), "conv_gemm gather 'bilinear' is not one of plain, upsample2x");
}

TEST(ConvAttrs, WeightLayoutIsRequiredAndSpelledOnce) {
  Attrs a;
  EXPECT_EQ(conv_weight_layout(a).message(), "conv_gemm weight_layout '' is not oihw, o_hwi or phases");
  set_weight_layout(a, WeightLayout::o_hwi);
  EXPECT_EQ(attrs_str(a), "{weight_layout = \"o_hwi\"}");
  EXPECT_EQ(*conv_weight_layout(a), WeightLayout::o_hwi);
  EXPECT_EQ(weight_layout_from_name("oihw"), WeightLayout::oihw);
  EXPECT_EQ(weight_layout_from_name("phases"), WeightLayout::phases);
  EXPECT_EQ(weight_layout_from_name("OIHW"), std::nullopt);
}

TEST(ConvAttrs, ShapeRuleReadsTheTypedGather) {
  // upsample2x doubles the input grid before the conv; an unknown gather is an error
  // from the shape rule (so the verifier and the parser report it).
  const TensorType x{{1, 8, 4, 5}, DType::f32, {}}, w{{4, 8, 3, 3}, DType::f32, {}};
  Attrs a{{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}}};
  set_weight_layout(a, WeightLayout::oihw);
  auto plain = infer_output_types(Op::conv_gemm, a, {&x, &w});
  ASSERT_TRUE(plain) << plain.message();
  EXPECT_EQ((*plain)[0].shape, (Shape{1, 4, 4, 5}));
  set_gather(a, GatherKind::upsample2x);
  auto up = infer_output_types(Op::conv_gemm, a, {&x, &w});
  ASSERT_TRUE(up) << up.message();
  EXPECT_EQ((*up)[0].shape, (Shape{1, 4, 8, 10}));
  a.set("gather", std::string("causal"));
  EXPECT_EQ(infer_output_types(Op::conv_gemm, a, {&x, &w}).message(),
            "conv_gemm gather 'causal' is not one of plain, upsample2x");
}

TEST(ConvAttrs, TextFormOfATypedGatherRoundTrips) {
  const std::string text = R"(graph @g(%x: f32[1,2,3,3]) {
  %w: f32[4,2,3,3] = weight "w"
  %y: f32[1,4,6,6] = conv_gemm "y" (%x, %w) {gather = "upsample2x", kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  return %y
}
)";
  auto g = parse_graph(text);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(*conv_gather(g->nodes()[0].attrs), GatherKind::upsample2x);
  EXPECT_EQ(*conv_weight_layout(g->nodes()[0].attrs), WeightLayout::oihw);
  EXPECT_EQ(print_graph(*g), text);
}

}  // namespace
}  // namespace strata
