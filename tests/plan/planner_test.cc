#include "plan/planner.h"

#include <gtest/gtest.h>

#include "exec/cpu_executor.h"
#include "plan/fake_kernels.h"
#include "plan/memory_planner.h"

namespace streamline {
namespace {

using graph::Dim;
using graph::Graph;
using graph::ValueId;

constexpr int64_t kN = 1000;  // elements per tensor: 4000 bytes, 4032 aligned

// x -> Twice -> Twice -> ... (n times) -> y
Graph chain(int n) {
  Graph g;
  g.opsets[""] = 13;
  ValueId v = g.add_value("x", DType::kFloat32, graph::DimList{Dim::sym("batch"), kN});
  g.add_input(v);
  for (int i = 0; i < n; ++i) {
    ValueId o = g.add_value("t" + std::to_string(i));
    g.add_node("Twice", "twice" + std::to_string(i), {v}, {o});
    v = o;
  }
  g.add_output(v);
  return g;
}

// x -> a=Twice(x), b=Twice(a), c=Twice(a), d=Add2(b, c), y=Twice(d)
Graph diamond() {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  ValueId a = g.add_value("a"), b = g.add_value("b"), c = g.add_value("c"), d = g.add_value("d"), y = g.add_value("y");
  g.add_node("Twice", "na", {x}, {a});
  g.add_node("Twice", "nb", {a}, {b});
  g.add_node("Twice", "nc", {a}, {c});
  g.add_node("Add2", "nd", {b, c}, {d});
  g.add_node("Twice", "ny", {d}, {y});
  g.add_output(y);
  return g;
}

struct Planned {
  ops::KernelRegistry reg = testing::fake_registry();
  plan::KernelSet ks;
  std::shared_ptr<const plan::ExecutionPlan> plan;
};

Result<std::unique_ptr<Planned>> make(const Graph& g, Shape x_shape, plan::PlannerOptions po = {}) {
  auto p = std::make_unique<Planned>();
  SL_ASSIGN_OR_RETURN(p->ks, plan::create_kernels(g, p->reg, {}));
  po.registry = &p->reg;
  const plan::InputShapes shapes = {{"x", x_shape}};
  SL_ASSIGN_OR_RETURN(p->plan, plan::make_plan(g, p->ks, shapes, po));
  return p;
}

// Every pair of arena slots alive at the same step and in different buffers must not overlap.
void expect_no_live_overlap(const plan::ExecutionPlan& p) {
  const int n = static_cast<int>(p.steps.size());
  std::vector<int> def(p.slots.size(), -1), last(p.slots.size(), -1);
  for (int s = 0; s < n; ++s) {
    for (int i : p.steps[static_cast<size_t>(s)].inputs)
      if (i >= 0) last[static_cast<size_t>(i)] = s;
    for (int o : p.steps[static_cast<size_t>(s)].outputs)
      if (o >= 0) def[static_cast<size_t>(o)] = s;
  }
  for (int o : p.output_slots) last[static_cast<size_t>(o)] = n;
  for (size_t i = 0; i < p.slots.size(); ++i)
    for (size_t j = i + 1; j < p.slots.size(); ++j) {
      const auto& a = p.slots[i];
      const auto& b = p.slots[j];
      if (a.kind != plan::SlotKind::kArena || b.kind != plan::SlotKind::kArena || a.buffer == b.buffer) continue;
      const bool live_together = !(std::max(last[i], def[i]) < def[j] || std::max(last[j], def[j]) < def[i]);
      const bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(live_together && overlap) << a.name << " and " << b.name << " share memory while both live";
    }
}

std::vector<float> run(const plan::ExecutionPlan& p, float fill) {
  exec::CpuExecutionContext ctx;
  Tensor x = Tensor::empty(DType::kFloat32, p.input_shapes[0]);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = fill + static_cast<float>(i);
  std::vector<Tensor> outs;
  Status s = ctx.run(p, {&x, 1}, &outs, {});
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!s.ok()) return {};
  return std::vector<float>(outs[0].data<float>(), outs[0].data<float>() + outs[0].numel());
}

TEST(Planner, ChainRunsInPlaceInOneBuffer) {
  auto p = make(chain(5), Shape{1, kN});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto& plan = *(*p)->plan;
  EXPECT_EQ(plan.steps.size(), 5u);
  EXPECT_EQ(plan.arena_bytes, align_up(kN * 4));
  EXPECT_EQ(plan.naive_bytes, align_up(kN * 4));  // in place: every step shares the first buffer
  auto y = run(plan, 1.f);
  ASSERT_EQ(y.size(), static_cast<size_t>(kN));
  EXPECT_FLOAT_EQ(y[0], 32.f);
  EXPECT_FLOAT_EQ(y[10], 32.f * 11);
}

TEST(Planner, ChainWithoutInPlaceAlternatesTwoBuffers) {
  plan::PlannerOptions po;
  po.inplace = false;
  auto p = make(chain(5), Shape{1, kN}, po);
  ASSERT_TRUE(p.ok());
  const auto& plan = *(*p)->plan;
  EXPECT_EQ(plan.naive_bytes, 5 * align_up(kN * 4));
  EXPECT_EQ(plan.arena_bytes, 2 * align_up(kN * 4));
  expect_no_live_overlap(plan);
  EXPECT_FLOAT_EQ(run(plan, 1.f)[0], 32.f);
}

TEST(Planner, NoReuseGivesNaiveArena) {
  plan::PlannerOptions po;
  po.inplace = false;
  po.reuse_memory = false;
  auto p = make(chain(4), Shape{1, kN}, po);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->plan->arena_bytes, (*p)->plan->naive_bytes);
}

TEST(Planner, DiamondKeepsLiveBuffersApart) {
  for (bool inplace : {false, true}) {
    plan::PlannerOptions po;
    po.inplace = inplace;
    auto p = make(diamond(), Shape{1, kN}, po);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    expect_no_live_overlap(*(*p)->plan);
    auto y = run(*(*p)->plan, 0.f);
    // y = 2 * (4a + 4a)/... : a = 2x, b = c = 4x, d = 8x, y = 16x
    EXPECT_FLOAT_EQ(y[3], 16.f * 3);
  }
}

TEST(Planner, SymbolicBatchBindsAndPlansDifferPerShape) {
  auto p1 = make(chain(2), Shape{1, kN});
  auto p4 = make(chain(2), Shape{4, kN});
  ASSERT_TRUE(p1.ok() && p4.ok());
  EXPECT_EQ((*p4)->plan->arena_bytes, align_up(4 * kN * 4));
  EXPECT_EQ(run(*(*p4)->plan, 0.f).size(), static_cast<size_t>(4 * kN));
}

TEST(Planner, InputShapeErrorsNameTheInput) {
  auto bad_rank = make(chain(2), Shape{kN});
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_EQ(bad_rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_rank.status().message().find("input 'x'"), std::string::npos) << bad_rank.status().message();
  auto bad_dim = make(chain(2), Shape{1, kN + 1});
  ASSERT_FALSE(bad_dim.ok());
  EXPECT_NE(bad_dim.status().message().find("[batch,1000]"), std::string::npos) << bad_dim.status().message();
}

TEST(Planner, FoldsNodesOnConstants) {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  ValueId w = g.add_constant("w", Tensor::from_vector<float>(Shape{1, kN}, std::vector<float>(kN, 1.5f)));
  ValueId w2 = g.add_value("w2"), y = g.add_value("y");
  g.add_node("Twice", "fold_me", {w}, {w2});
  g.add_node("Add2", "add", {x, w2}, {y});
  g.add_output(y);
  auto p = make(g, Shape{1, kN});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->plan->folded_nodes, 1);
  EXPECT_EQ((*p)->plan->steps.size(), 1u);
  EXPECT_FLOAT_EQ(run(*(*p)->plan, 1.f)[0], 4.f);
}

TEST(Planner, UnsupportedOpsAreAllListed) {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  ValueId a = g.add_value("a"), b = g.add_value("b"), c = g.add_value("c");
  g.add_node("Mystery", "m1", {x}, {a});
  g.add_node("Mystery", "m2", {a}, {b});
  g.add_node("Enigma", "e1", {b}, {c});
  g.add_output(c);
  ops::KernelRegistry reg = testing::fake_registry();
  auto ks = plan::create_kernels(g, reg, {});
  ASSERT_FALSE(ks.ok());
  EXPECT_EQ(ks.status().code(), StatusCode::kUnsupported);
  const std::string m = ks.status().message();
  EXPECT_NE(m.find("Mystery (opset 13) for float32: m1, m2"), std::string::npos) << m;
  EXPECT_NE(m.find("Enigma (opset 13) for float32: e1"), std::string::npos) << m;
}

TEST(MemoryPlanner, PlacesLargestFirstInGaps) {
  // Five steps on one stream; buffer k is written at step k and read at step k+1.
  plan::ExecutionPlan p;
  p.steps.resize(5);
  for (int i = 0; i < 5; ++i) p.steps[static_cast<size_t>(i)].position = i;
  p.stream_steps = {{0, 1, 2, 3, 4}};
  const plan::HappensBefore hb(p);
  auto buf = [](size_t bytes, int w) {
    plan::Buffer b;
    b.bytes = bytes;
    b.writer = w;
    b.accesses = {w, w + 1};
    return b;
  };
  std::vector<plan::Buffer> b = {buf(1000, 0), buf(2000, 1), buf(500, 2), buf(900, 3)};
  const size_t arena = plan::place_buffers(b, hb, true);
  // b0 [0,1] and b1 [1,2] overlap in time; b2 [2,3] overlaps b1; b3 [3,4] overlaps b2.
  EXPECT_LE(arena, align_up(2000) + align_up(1000));
  EXPECT_NE(b[0].offset, b[1].offset);
  const bool b2_b3_apart = b[2].offset + 512 <= b[3].offset || b[3].offset + 960 <= b[2].offset;
  EXPECT_TRUE(b2_b3_apart);
  for (const auto& x : b) EXPECT_EQ(x.offset % 64, 0u);
}

}  // namespace
}  // namespace streamline
