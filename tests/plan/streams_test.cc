#include <gtest/gtest.h>

#include "exec/executor.h"
#include "exec/trace.h"
#include "plan/fake_kernels.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan/verifier.h"

namespace streamline {
namespace {

using graph::Graph;
using graph::ValueId;

constexpr int64_t kN = 4096;

// x -> `branches` chains of `depth` Twice steps -> a left-deep tree of Add2 -> y.
Graph wide(int branches, int depth, const std::string& last_op = "Add2") {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  std::vector<ValueId> tips;
  for (int b = 0; b < branches; ++b) {
    ValueId v = x;
    for (int d = 0; d < depth; ++d) {
      ValueId o = g.add_value("b" + std::to_string(b) + "_" + std::to_string(d));
      g.add_node("Twice", "twice_b" + std::to_string(b) + "_" + std::to_string(d), {v}, {o});
      v = o;
    }
    tips.push_back(v);
  }
  ValueId acc = tips[0];
  for (size_t i = 1; i < tips.size(); ++i) {
    ValueId o = g.add_value("sum" + std::to_string(i));
    g.add_node(i + 1 == tips.size() ? last_op : "Add2", "add" + std::to_string(i), {acc, tips[i]}, {o});
    acc = o;
  }
  g.add_output(acc);
  return g;
}

struct Planned {
  ops::KernelRegistry reg = testing::fake_registry();
  plan::KernelSet ks;
  std::shared_ptr<const plan::ExecutionPlan> plan;
};

std::unique_ptr<Planned> make(const Graph& g, int streams, plan::PlannerOptions po = {}) {
  auto p = std::make_unique<Planned>();
  auto ks = plan::create_kernels(g, p->reg, {});
  EXPECT_TRUE(ks.ok()) << ks.status().to_string();
  p->ks = std::move(ks).value();
  po.registry = &p->reg;
  po.num_streams = streams;
  po.event_cost = 0;  // fake kernels are cheap; let every fan-out spread
  const plan::InputShapes shapes = {{"x", Shape{1, kN}}};
  auto plan = plan::make_plan(g, p->ks, shapes, po);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (plan.ok()) p->plan = *plan;
  return p;
}

Result<std::vector<float>> run(const plan::ExecutionPlan& p, bool safe = false) {
  exec::ExecutionContext ctx;
  Tensor x = Tensor::empty(DType::kFloat32, Shape{1, kN});
  for (int64_t i = 0; i < kN; ++i) x.data<float>()[i] = static_cast<float>(i % 97);
  std::vector<Tensor> outs;
  exec::RunOptions ro;
  ro.safe = safe;
  SL_RETURN_IF_ERROR(exec::run_plan(p, ctx, {&x, 1}, &outs, ro));
  return std::vector<float>(outs[0].data<float>(), outs[0].data<float>() + outs[0].numel());
}

TEST(Streams, MultiStreamOutputsEqualSingleStream) {
  const Graph g = wide(6, 3);
  auto single = make(g, 1);
  auto ref = run(*single->plan);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(single->plan->num_streams, 1);
  EXPECT_EQ(single->plan->num_events, 0);
  for (int s : {2, 4, 8}) {
    auto p = make(g, s);
    ASSERT_TRUE(p->plan);
    EXPECT_GT(p->plan->num_streams, 1) << s;
    EXPECT_LE(p->plan->num_streams, s);
    EXPECT_TRUE(p->plan->verified);
    EXPECT_GT(p->plan->events_inserted, 0);
    EXPECT_LE(p->plan->num_events, p->plan->events_inserted);
    for (int rep = 0; rep < 20; ++rep) {  // repeated runs exercise the event generations
      auto out = run(*p->plan, rep % 2 == 1);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      EXPECT_EQ(*out, *ref) << "streams=" << s;
    }
  }
}

// Elastic threads: a step that runs while no other stream is inside a kernel gets every thread;
// no step gets more than that or fewer than one; the outputs do not change.
TEST(Streams, ElasticThreadsGiveALoneStreamEveryThread) {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  ValueId stem = g.add_value("stem");
  g.add_node("NoteTwice", "stem", {x}, {stem});  // everything else depends on it: it runs alone
  std::vector<ValueId> tips;
  for (int b = 0; b < 3; ++b) {
    ValueId v = stem;
    for (int d = 0; d < 4; ++d) {
      ValueId o = g.add_value("e" + std::to_string(b) + "_" + std::to_string(d));
      g.add_node("NoteTwice", "n" + std::to_string(b) + "_" + std::to_string(d), {v}, {o});
      v = o;
    }
    tips.push_back(v);
  }
  ValueId s1 = g.add_value("s1"), s2 = g.add_value("s2");
  g.add_node("Add2", "add1", {tips[0], tips[1]}, {s1});
  g.add_node("Add2", "add2", {s1, tips[2]}, {s2});
  g.add_output(s2);

  auto p = make(g, 3);
  ASSERT_TRUE(p->plan);
  ASSERT_GT(p->plan->num_streams, 1);
  auto ref = run(*p->plan);
  ASSERT_TRUE(ref.ok());
  for (int rep = 0; rep < 10; ++rep) {
    testing::thread_notes().seen.clear();
    exec::ExecutionContext ctx;
    Tensor in = Tensor::empty(DType::kFloat32, Shape{1, kN});
    for (int64_t i = 0; i < kN; ++i) in.data<float>()[i] = static_cast<float>(i % 97);
    std::vector<Tensor> outs;
    exec::RunOptions ro;
    ro.num_threads = 1;
    ro.elastic_threads = 4;
    ASSERT_TRUE(exec::run_plan(*p->plan, ctx, {&in, 1}, &outs, ro).ok());
    EXPECT_EQ(std::vector<float>(outs[0].data<float>(), outs[0].data<float>() + kN), *ref);
    ASSERT_EQ(testing::thread_notes().seen.size(), 13u);
    for (const auto& [name, threads] : testing::thread_notes().seen) {
      if (name == "stem") EXPECT_EQ(threads, 4);
      EXPECT_GE(threads, 1) << name;
      EXPECT_LE(threads, 4) << name;
    }
  }
  // Without elastic threads every step gets num_threads.
  testing::thread_notes().seen.clear();
  ASSERT_TRUE(run(*p->plan).ok());
  for (const auto& [name, threads] : testing::thread_notes().seen) EXPECT_EQ(threads, 1) << name;
}

TEST(Streams, ChainStaysOnOneStreamWhenEventsAreExpensive) {
  auto p = std::make_unique<Planned>();
  const Graph g = wide(1, 6);
  p->ks = std::move(plan::create_kernels(g, p->reg, {})).value();
  plan::PlannerOptions po;
  po.registry = &p->reg;
  po.num_streams = 4;  // default event cost: a chain gains nothing from a second stream
  auto plan = plan::make_plan(g, p->ks, {{"x", Shape{1, kN}}}, po);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)->num_streams, 1);
  EXPECT_EQ((*plan)->num_events, 0);
}

TEST(Streams, PrunesWaitsImpliedByEarlierWaits) {
  // s0: A writes a.  s1: B reads a, C reads a and b.  C's wait for A is implied by B's.
  plan::ExecutionPlan p;
  auto slot = [&](const std::string& name) {
    plan::TensorSlot s;
    s.name = name;
    s.bytes = 64;
    p.slots.push_back(s);
    return static_cast<int>(p.slots.size() - 1);
  };
  const int a = slot("a"), b = slot("b"), c = slot("c");
  auto step = [&](const std::string& name, int stream, int position, std::vector<int> in, std::vector<int> out) {
    plan::Step st;
    st.name = name;
    st.stream = stream;
    st.position = position;
    st.inputs = std::move(in);
    st.outputs = std::move(out);
    p.steps.push_back(st);
  };
  step("A", 0, 0, {}, {a});
  step("B", 1, 0, {a}, {b});
  step("C", 1, 1, {a, b}, {c});
  p.num_streams = 2;
  p.stream_steps = {{0}, {1, 2}};
  ASSERT_TRUE(plan::insert_events(p).ok());
  EXPECT_EQ(p.events_inserted, 2);
  EXPECT_EQ(p.num_events, 1);
  EXPECT_EQ(p.steps[1].wait_events.size(), 1u);
  EXPECT_TRUE(p.steps[2].wait_events.empty());
  EXPECT_TRUE(plan::verify_plan(p).ok());
}

TEST(Verifier, CatchesADroppedEvent) {
  auto p = make(wide(4, 2), 4);
  ASSERT_TRUE(p->plan);
  plan::ExecutionPlan broken;
  // Copy the data we need (ExecutionPlan holds unique_ptrs, so rebuild the relevant fields).
  broken.slots = p->plan->slots;
  broken.steps = p->plan->steps;
  broken.num_streams = p->plan->num_streams;
  broken.stream_steps = p->plan->stream_steps;
  broken.num_events = p->plan->num_events;
  ASSERT_TRUE(plan::verify_plan(broken).ok());
  bool dropped = false;
  for (auto& st : broken.steps)
    if (!st.wait_events.empty()) {
      st.wait_events.clear();
      dropped = true;
      break;
    }
  ASSERT_TRUE(dropped);
  Status s = plan::verify_plan(broken);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node '"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no event"), std::string::npos) << s.message();
}

TEST(Verifier, CatchesAForcedReuse) {
  auto p = make(wide(4, 2), 4);
  ASSERT_TRUE(p->plan);
  plan::ExecutionPlan broken;
  broken.slots = p->plan->slots;
  broken.steps = p->plan->steps;
  broken.num_streams = p->plan->num_streams;
  broken.stream_steps = p->plan->stream_steps;
  broken.num_events = p->plan->num_events;
  // Put the first-level outputs of two branches (on different streams, unordered) at one offset.
  int first = -1, second = -1;
  for (const auto& st : broken.steps) {
    if (st.name.rfind("twice_b", 0) != 0 || st.name.find("_0") == std::string::npos) continue;
    if (first < 0) first = st.outputs[0];
    else if (broken.steps[0].stream != st.stream || second < 0) second = st.outputs[0];
  }
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  broken.slots[static_cast<size_t>(second)].offset = broken.slots[static_cast<size_t>(first)].offset;
  Status s = plan::verify_plan(broken);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("race"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(broken.slots[static_cast<size_t>(second)].name), std::string::npos) << s.message();
}

TEST(Streams, PinnedNodesGoWhereTheyAreTold) {
  plan::PlannerOptions po;
  po.pinned_streams = {{"twice_b0_0", 2}};
  auto p = make(wide(3, 2), 4, po);
  ASSERT_TRUE(p->plan);
  for (const auto& st : p->plan->steps)
    if (st.name == "twice_b0_0") EXPECT_EQ(st.stream, 2);
  auto bad = std::make_unique<Planned>();
  const Graph g = wide(3, 2);
  bad->ks = std::move(plan::create_kernels(g, bad->reg, {})).value();
  plan::PlannerOptions po2;
  po2.registry = &bad->reg;
  po2.num_streams = 2;
  po2.pinned_streams = {{"twice_b0_0", 5}};
  auto r = plan::make_plan(g, bad->ks, {{"x", Shape{1, kN}}}, po2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("twice_b0_0"), std::string::npos);
}

TEST(Streams, ErrorOnOneStreamStopsTheRunWithoutHanging) {
  auto p = make(wide(4, 2, "Boom"), 4);
  ASSERT_TRUE(p->plan);
  for (int i = 0; i < 5; ++i) {
    auto r = run(*p->plan);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("boom"), std::string::npos);
  }
}

TEST(SafeMode, CanaryCatchesAnOverrun) {
  plan::PlannerOptions po;
  po.guard_bytes = 64;
  auto p = make(wide(2, 1, "Add2"), 1, po);
  ASSERT_TRUE(p->plan);
  EXPECT_TRUE(run(*p->plan, true).ok());
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  ValueId a = g.add_value("a"), y = g.add_value("y");
  g.add_node("Overrun", "overrun", {x}, {a});
  g.add_node("Twice", "twice", {a}, {y});
  g.add_output(y);
  auto q = make(g, 1, po);
  ASSERT_TRUE(q->plan);
  auto r = run(*q->plan, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("overrun"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("past the end"), std::string::npos) << r.status().message();
}

// Device executors report steps after the run with measured intervals; the trace takes them like
// host-timed steps: one slice per step, on the step's stream track.
TEST(Trace, DeviceTimedStepsBecomeSlices) {
  auto p = make(wide(2, 1, "Add2"), 2);
  ASSERT_TRUE(p->plan);
  const plan::ExecutionPlan& plan = *p->plan;
  exec::TraceRecorder trace;
  ASSERT_TRUE(trace.wants_step_times());
  trace.on_run_begin(plan);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    trace.on_step_timed(plan, static_cast<int>(i), plan.steps[i].stream, 1000 * static_cast<int64_t>(i),
                        1000 * static_cast<int64_t>(i) + 500);
  trace.on_run_end(plan);
  EXPECT_EQ(trace.slices(), plan.steps.size());
  const std::string json = trace.to_json();
  for (const auto& st : plan.steps) EXPECT_NE(json.find(st.name), std::string::npos) << st.name;
}

}  // namespace
}  // namespace streamline
