// Tests of split_heavy_convolutions on small hand-built graphs. The numbers (a split model gives
// the unsplit outputs) are checked end to end by the model tests with --split-convs.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/passes.h"

namespace streamline::graph {
namespace {

Tensor ramp(const Shape& s, float scale) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i);
  return t;
}

std::vector<const Node*> live_ops(const Graph& g, const std::string& op) {
  std::vector<const Node*> out;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (!n.dead && n.op_type == op) out.push_back(&n);
  }
  return out;
}

// x[1,4,6,6] -> Conv(W[m,4,3,3], B[m], pads 1) -> y[1,m,6,6], plus whatever the test adds.
struct ConvGraph {
  Graph g;
  ValueId x = kNoValue, w = kNoValue, b = kNoValue, y = kNoValue;
  NodeId conv = kNoNode;
  explicit ConvGraph(int64_t m, int64_t group = 1) {
    g.opsets[""] = 13;
    x = g.add_value("x", DType::kFloat32, DimList{1, 4, 6, 6});
    g.add_input(x);
    w = g.add_constant("w", ramp({m, 4 / group, 3, 3}, 0.01f));
    b = g.add_constant("b", ramp({m}, 1.f));
    y = g.add_value("y", DType::kFloat32, DimList{1, m, 6, 6});
    conv = g.add_node("Conv", "conv", {x, w, b}, {y});
    Attribute pads;
    pads.kind = Attribute::Kind::kInts;
    pads.ints = {1, 1, 1, 1};
    g.node(conv).attrs["pads"] = pads;
    Attribute grp;
    grp.i = group;
    g.node(conv).attrs["group"] = grp;
  }
  // A second input concatenated after y on channels.
  ValueId concat_with_other(const std::string& out_name) {
    const ValueId other = g.add_value("other", DType::kFloat32, DimList{1, 2, 6, 6});
    g.add_input(other);
    const ValueId out = g.add_value(out_name, DType::kFloat32);
    const NodeId cat = g.add_node("Concat", "cat", {y, other}, {out});
    Attribute axis;
    axis.i = 1;
    g.node(cat).attrs["axis"] = axis;
    g.add_output(out);
    return out;
  }
};

TEST(SplitConvolutions, SlicesFeedTheReadersChannelConcat) {
  ConvGraph t(32);
  t.concat_with_other("out");
  EXPECT_EQ(split_heavy_convolutions(t.g, 2, 0.02), 1);
  t.g.compact();
  const auto convs = live_ops(t.g, "Conv");
  ASSERT_EQ(convs.size(), 2u);
  const auto cats = live_ops(t.g, "Concat");
  ASSERT_EQ(cats.size(), 1u) << "the block's Concat takes the slices; no join is added";
  const Node& cat = *cats[0];
  ASSERT_EQ(cat.inputs.size(), 3u);
  EXPECT_EQ(cat.inputs[0], convs[0]->outputs[0]);
  EXPECT_EQ(cat.inputs[1], convs[1]->outputs[0]);
  EXPECT_EQ(t.g.value(cat.inputs[2]).name, "other");
  const Tensor w = ramp({32, 4, 3, 3}, 0.01f);
  for (int k = 0; k < 2; ++k) {
    const Node& c = *convs[static_cast<size_t>(k)];
    EXPECT_EQ(c.inputs[0], t.g.find_value("x"));
    EXPECT_EQ(c.attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    const Tensor& ws = *t.g.value(c.inputs[1]).constant;
    const Tensor& bs = *t.g.value(c.inputs[2]).constant;
    ASSERT_EQ(ws.shape(), (Shape{16, 4, 3, 3}));
    ASSERT_EQ(bs.shape(), (Shape{16}));
    for (int64_t i = 0; i < ws.numel(); ++i)
      ASSERT_EQ(ws.data<float>()[i], w.data<float>()[k * ws.numel() + i]) << "slice " << k << " weight " << i;
    EXPECT_EQ(bs.data<float>()[0], static_cast<float>(16 * k));
    const auto& dims = t.g.value(c.outputs[0]).dims;
    ASSERT_TRUE(dims.has_value());
    EXPECT_EQ((*dims)[1].value, 16);
  }
}

TEST(SplitConvolutions, OtherReadersAndGraphOutputsGetAJoinWritingTheOriginalValue) {
  ConvGraph t(56);
  const ValueId r = t.g.add_value("r", DType::kFloat32);
  t.g.add_node("Relu", "relu", {t.y}, {r});
  t.g.add_output(r);
  t.g.add_output(t.y);
  EXPECT_EQ(split_heavy_convolutions(t.g, 3, 0.02), 1);
  t.g.compact();
  const auto convs = live_ops(t.g, "Conv");
  ASSERT_EQ(convs.size(), 3u);
  // 56 channels in three: cuts at 18.7 and 37.3 rounded to whole blocks of 8 -> 16, 24, 16.
  std::vector<int64_t> widths;
  for (const Node* c : convs) widths.push_back(t.g.value(c->inputs[1]).constant->shape()[0]);
  EXPECT_EQ(widths, (std::vector<int64_t>{16, 24, 16}));
  const auto cats = live_ops(t.g, "Concat");
  ASSERT_EQ(cats.size(), 1u);
  EXPECT_EQ(cats[0]->attr_int("axis", 0), 1);
  ASSERT_EQ(cats[0]->outputs.size(), 1u);
  EXPECT_EQ(t.g.value(cats[0]->outputs[0]).name, "y");
  EXPECT_EQ(t.g.value(live_ops(t.g, "Relu")[0]->inputs[0]).name, "y");
  EXPECT_EQ(t.g.value(t.g.outputs()[1]).name, "y");
  EXPECT_TRUE(t.g.topological_order().ok());
}

TEST(SplitConvolutions, LeavesLightGroupedNarrowAndResidualConvolutions) {
  {  // grouped
    ConvGraph t(32, 2);
    t.concat_with_other("out");
    EXPECT_EQ(split_heavy_convolutions(t.g, 2, 0.02), 0);
  }
  {  // too few channels for two slices of at least two blocks
    ConvGraph t(24);
    t.concat_with_other("out");
    EXPECT_EQ(split_heavy_convolutions(t.g, 2, 0.02), 0);
  }
  {  // a residual operand
    ConvGraph t(32);
    Node& n = t.g.node(t.conv);
    n.op_type = "FusedConv";
    n.domain = kStreamlineDomain;
    const ValueId z = t.g.add_value("z", DType::kFloat32, DimList{1, 32, 6, 6});
    t.g.add_input(z);
    n.inputs.push_back(z);
    t.concat_with_other("out");
    EXPECT_EQ(split_heavy_convolutions(t.g, 2, 0.02), 0);
  }
  {  // below the share: a second convolution 100x heavier
    ConvGraph t(32);
    const ValueId big_w = t.g.add_constant("big_w", ramp({3200, 4, 3, 3}, 0.001f));
    const ValueId big = t.g.add_value("big", DType::kFloat32, DimList{1, 3200, 6, 6});
    t.g.add_node("Conv", "big_conv", {t.x, big_w}, {big});
    t.g.add_output(big);
    t.concat_with_other("out");
    EXPECT_EQ(split_heavy_convolutions(t.g, 2, 0.02), 1);
    t.g.compact();
    for (const Node* c : live_ops(t.g, "Conv")) EXPECT_NE(c->name, "big_conv") << "the heavy one is split";
    bool small_kept = false;
    for (const Node* c : live_ops(t.g, "Conv")) small_kept = small_kept || c->name == "conv";
    EXPECT_TRUE(small_kept);
  }
  {  // off
    ConvGraph t(32);
    t.concat_with_other("out");
    EXPECT_EQ(split_heavy_convolutions(t.g, 1, 0.02), 0);
  }
}

TEST(SplitConvolutions, RunPassesSplitsFusedConvolutionsWhenAsked) {
  ConvGraph t(32);
  const ValueId r = t.g.add_value("r", DType::kFloat32, DimList{1, 32, 6, 6});
  t.g.add_node("Relu", "relu", {t.y}, {r});
  t.g.add_output(r);
  PassOptions po;
  po.split_conv_parts = 2;
  PassReport report;
  ASSERT_TRUE(run_passes(t.g, po, nullptr, &report).ok());
  EXPECT_EQ(report.conv_fused, 1);
  EXPECT_EQ(report.convs_split, 1);
  const auto fused = live_ops(t.g, "FusedConv");
  ASSERT_EQ(fused.size(), 2u);
  for (const Node* f : fused) EXPECT_EQ(f->attr_string("activation", ""), "Relu");
  ASSERT_EQ(live_ops(t.g, "Concat").size(), 1u);
  EXPECT_EQ(t.g.value(t.g.outputs()[0]).name, "r");
  EXPECT_NE(report.to_string().find("convs_split=1"), std::string::npos);
}

}  // namespace
}  // namespace streamline::graph
