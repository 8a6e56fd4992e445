// Tests of fold_channel_scale_into_conv (pass_scale.cc): which squeeze-excitation multiplies move
// into the convolution after them, and that the rewritten graph computes what the original did
// (run by the CPU kernels, and by the reference kernels).

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "graph/graph_run_util.h"
#include "graph/pass_util.h"
#include "graph/passes.h"
#include "ops/op_test_util.h"

namespace streamline::graph {
namespace {

using testing::live_ops;

struct SeOptions {
  Dim batch = Dim(1);
  int64_t c = 16, hw = 12, out = 8, group = 1, k = 1;
  bool scale_first = false;     // Mul(s, x) instead of Mul(x, s)
  bool constant_scale = false;  // s a constant instead of computed from x
  bool second_reader = false;   // the product is also a graph output
  bool full_scale = false;      // s of x's full shape (no per-channel scale)
};

// x -> GlobalAveragePool -> Sigmoid -> s; Mul(x, s) -> Conv(W, B) -> y: the tail of a
// squeeze-excitation block and the projection after it.
struct SeGraph {
  Graph g;
  ValueId x = kNoValue, s = kNoValue, product = kNoValue, y = kNoValue;
  NodeId conv = kNoNode;
  explicit SeGraph(const SeOptions& o) {
    g.opsets[""] = 13;
    std::mt19937 rng(23);
    const DimList xd{o.batch, Dim(o.c), Dim(o.hw), Dim(o.hw)};
    const DimList sd = o.full_scale ? xd : DimList{o.batch, Dim(o.c), Dim(1), Dim(1)};
    x = g.add_value("x", DType::kFloat32, xd);
    g.add_input(x);
    if (o.constant_scale) {
      s = g.add_constant("s", ops::testing::random_tensor(Shape{1, o.c, 1, 1}, rng, 0.f, 2.f));
    } else {
      const ValueId pooled = g.add_value("pooled", DType::kFloat32, DimList{o.batch, Dim(o.c), Dim(1), Dim(1)});
      s = g.add_value("s", DType::kFloat32, sd);
      g.node(g.add_node("GlobalAveragePool", "pool", {x}, {pooled})).opset = 13;
      if (o.full_scale) {
        g.node(g.add_node("Add", "widen", {x, pooled}, {s})).opset = 13;
      } else {
        g.node(g.add_node("Sigmoid", "gate", {pooled}, {s})).opset = 13;
      }
    }
    product = g.add_value("product", DType::kFloat32, xd);
    const std::vector<ValueId> mul_in = o.scale_first ? std::vector<ValueId>{s, x} : std::vector<ValueId>{x, s};
    g.node(g.add_node("Mul", "scale", mul_in, {product})).opset = 13;
    const ValueId w =
        g.add_constant("w", ops::testing::random_tensor(Shape{o.out, o.c / o.group, o.k, o.k}, rng, -0.5f, 0.5f));
    const ValueId b = g.add_constant("b", ops::testing::random_tensor(Shape{o.out}, rng));
    y = g.add_value("y", DType::kFloat32);
    conv = g.add_node("Conv", "project", {product, w, b}, {y});
    g.node(conv).opset = 13;
    g.node(conv).attrs["group"] = ops::testing::one_int(o.group);
    g.node(conv).attrs["pads"] = detail::ints_attr({o.k / 2, o.k / 2, o.k / 2, o.k / 2});
    g.add_output(y);
    if (o.second_reader) g.add_output(product);
    g.rebuild_edges();
  }
};

// The graph before and after the pass on the same input: the same values, by the CPU kernels
// and by the reference ones.
void expect_same_results(SeGraph& t, const Shape& shape, int rewrites, const std::vector<std::string>& ops) {
  std::mt19937 rng(29);
  const Tensor in = ops::testing::random_tensor(shape, rng, -2.f, 2.f);
  auto before = testing::run_graph(t.g, {in});
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  ASSERT_EQ(fold_channel_scale_into_conv(t.g), rewrites);
  EXPECT_EQ(live_ops(t.g), ops);
  for (const ops::KernelRegistry* reg : {&ops::default_cpu_registry(), &ops::testing::ref_reg()}) {
    auto after = testing::run_graph(t.g, {in}, *reg);
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    ASSERT_EQ((*after)[0].shape(), (*before)[0].shape());
    ops::testing::expect_close((*after)[0], (*before)[0], 1e-5);
  }
}

TEST(ScaleIntoConv, SqueezeExcitationScaleMovesIntoTheConvolution) {
  SeGraph t(SeOptions{});
  expect_same_results(t, Shape{1, 16, 12, 12}, 1, {"GlobalAveragePool", "Sigmoid", "FusedConv"});
  const Node& c = t.g.node(t.conv);
  EXPECT_EQ(c.domain, kStreamlineDomain);
  EXPECT_EQ(c.attr_int("x_scale", 0), 1);
  ASSERT_EQ(c.inputs.size(), 5u);
  EXPECT_EQ(c.inputs[0], t.x);
  EXPECT_EQ(c.inputs[3], kNoValue);
  EXPECT_EQ(c.inputs[4], t.s);
}

TEST(ScaleIntoConv, EitherOperandOrderAndAScalePerImage) {
  SeOptions o;
  o.scale_first = true;
  o.batch = Dim::sym("N");
  SeGraph t(o);
  // Three images, each with its own scale (the kernel forms X * S itself then).
  expect_same_results(t, Shape{3, 16, 12, 12}, 1, {"GlobalAveragePool", "Sigmoid", "FusedConv"});
}

TEST(ScaleIntoConv, ThreeByThreeFiltersWithFewPixelsPerWeightStay) {
  SeOptions o;
  o.k = 3;  // 8 x 16 x 9 weights against 16 x 12 x 12 activations: too many weights
  SeGraph t(o);
  expect_same_results(t, Shape{1, 16, 12, 12}, 0, {"GlobalAveragePool", "Sigmoid", "Mul", "Conv"});
  SeOptions wide;
  wide.k = 3;
  wide.hw = 40;
  SeGraph u(wide);
  expect_same_results(u, Shape{1, 16, 40, 40}, 1, {"GlobalAveragePool", "Sigmoid", "FusedConv"});
}

TEST(ScaleIntoConv, OtherMultipliesAreLeftAlone) {
  const std::vector<std::string> unchanged{"GlobalAveragePool", "Sigmoid", "Mul", "Conv"};
  SeOptions many;
  many.out = 64;  // 64 x 16 weights against 16 x 144 activations
  SeGraph a(many);
  expect_same_results(a, Shape{1, 16, 12, 12}, 0, unchanged);
  SeOptions grouped;
  grouped.group = 2;
  SeGraph b(grouped);
  expect_same_results(b, Shape{1, 16, 12, 12}, 0, unchanged);
  SeOptions shared;
  shared.second_reader = true;
  SeGraph c(shared);
  expect_same_results(c, Shape{1, 16, 12, 12}, 0, unchanged);
  SeOptions constant;
  constant.constant_scale = true;
  SeGraph d(constant);
  expect_same_results(d, Shape{1, 16, 12, 12}, 0, {"Mul", "Conv"});
  SeOptions full;
  full.full_scale = true;
  SeGraph e(full);
  expect_same_results(e, Shape{1, 16, 12, 12}, 0, {"GlobalAveragePool", "Add", "Mul", "Conv"});
}

TEST(ScaleIntoConv, RunPassesMovesTheScaleUnlessSwitchedOff) {
  for (bool on : {true, false}) {
    SeGraph t(SeOptions{});
    PassOptions po;
    po.scale_into_conv = on;
    PassReport r;
    ASSERT_TRUE(run_passes(t.g, po, nullptr, &r).ok());
    EXPECT_EQ(r.scales_into_conv, on ? 1 : 0);
    int muls = 0;
    for (const std::string& op : live_ops(t.g)) muls += op == "Mul";
    EXPECT_EQ(muls, on ? 0 : 1);
  }
}

}  // namespace
}  // namespace streamline::graph
