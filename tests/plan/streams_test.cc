// The planner's stream assignment, event insertion and pruning, pinning and the race verifier, on
// graphs of fake kernels.

#include <gtest/gtest.h>

#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan/stream_test_graphs.h"
#include "plan/verifier.h"

namespace streamline {
namespace {

using graph::Graph;
using graph::ValueId;
using testing::kN;
using testing::make;
using testing::Planned;
using testing::wide;

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
    if (st.name == "twice_b0_0") {
      EXPECT_EQ(st.stream, 2);
    }
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

}  // namespace
}  // namespace streamline
