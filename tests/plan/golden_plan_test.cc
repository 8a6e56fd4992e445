// Golden plan dumps: the planner's output (ExecutionPlan::to_json: streams, steps, events, slots,
// arena offsets, costs) for a few fixed graphs, compared with the dumps checked in under
// tests/plan/golden/. The graphs run on kernels whose choices do not depend on the machine: the fake
// kernels (tests/plan/fake_kernels.h) and the reference kernels (a small convolutional block), so
// a dump changes only when the planner does. After an intended planner change, regenerate the dumps
// with scripts/update_golden_plans.sh and review their diff with the change. The files are found
// through SL_SOURCE_DIR (plan/golden_util.h).

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/registry.h"
#include "plan/golden_util.h"
#include "plan/stream_test_graphs.h"

namespace streamline {
namespace {

using testing::expect_golden;
using testing::line_diff;

TEST(GoldenPlans, DiffShowsTheChangedLinesWithContext) {
  const std::string d = line_diff("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n", "a\nb\nC\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n");
  EXPECT_EQ(d, "  1: a\n  2: b\n- 3: c\n+ 3: C\n  4: d\n  5: e\n  ...\n  11: k\n  12: l\n+ 13: m\n");
  EXPECT_EQ(line_diff("same\n", "same\n"), "");
}

TEST(GoldenPlans, SingleStream) {
  auto p = testing::make(testing::wide(3, 2), 1);
  ASSERT_TRUE(p->plan);
  expect_golden(*p->plan, "wide3x2_streams1");
}

TEST(GoldenPlans, ThreeStreams) {
  auto p = testing::make(testing::wide(3, 2), 3);
  ASSERT_TRUE(p->plan);
  expect_golden(*p->plan, "wide3x2_streams3");
}

TEST(GoldenPlans, MoreBranchesThanStreams) {
  auto p = testing::make(testing::wide(6, 3), 4);
  ASSERT_TRUE(p->plan);
  expect_golden(*p->plan, "wide6x3_streams4");
}

TEST(GoldenPlans, DeepChainsOnTwoStreams) {
  auto p = testing::make(testing::wide(2, 5), 2);
  ASSERT_TRUE(p->plan);
  expect_golden(*p->plan, "wide2x5_streams2");
}

graph::Attribute ints_attr(std::vector<int64_t> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

Tensor weights(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// A residual block on the reference kernels: x -> Conv 3x3 -> Relu -> Conv 3x3 -> + x -> Relu, and
// a 1x1 Conv branch from x joined at the end: constants, padding attributes, two branches to
// spread and slots that die early.
TEST(GoldenPlans, ResidualBlockOnReferenceKernels) {
  graph::Graph g;
  g.opsets[""] = 13;
  const graph::ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, 8, 16, 16});
  g.add_input(x);
  auto conv = [&](const std::string& name, graph::ValueId in, int64_t k, uint32_t seed) {
    const graph::ValueId w = g.add_constant(name + ".w", weights(Shape{8, 8, k, k}, seed));
    const graph::ValueId b = g.add_constant(name + ".b", weights(Shape{8}, seed + 100));
    const graph::ValueId out = g.add_value(name + ".y");
    const graph::NodeId n = g.add_node("Conv", name, {in, w, b}, {out});
    const int64_t pad = k / 2;
    g.node(n).attrs["pads"] = ints_attr({pad, pad, pad, pad});
    g.node(n).attrs["kernel_shape"] = ints_attr({k, k});
    return out;
  };
  auto unary = [&](const std::string& op, const std::string& name, std::vector<graph::ValueId> in) {
    const graph::ValueId out = g.add_value(name + ".y");
    g.add_node(op, name, std::move(in), {out});
    return out;
  };
  const graph::ValueId a = unary("Relu", "relu1", {conv("conv1", x, 3, 1)});
  const graph::ValueId sum = unary("Add", "add1", {conv("conv2", a, 3, 2), x});
  const graph::ValueId side = conv("proj", x, 1, 3);
  const graph::ValueId y = unary("Add", "add2", {unary("Relu", "relu2", {sum}), side});
  g.add_output(y);

  const ops::KernelRegistry& reg = ops::testing::ref_reg();
  for (int streams : {1, 2}) {
    auto ks = plan::create_kernels(g, reg, {});
    ASSERT_TRUE(ks.ok()) << ks.status().to_string();
    plan::PlannerOptions po;
    po.registry = &reg;
    po.num_streams = streams;
    auto plan = plan::make_plan(g, *ks, {{"x", Shape{1, 8, 16, 16}}}, po);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    expect_golden(**plan, "residual_reference_streams" + std::to_string(streams));
  }
}

}  // namespace
}  // namespace streamline
