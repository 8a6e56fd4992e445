// The model's plan cache: a shape set being planned never holds up runs of shape sets already
// planned, concurrent first runs of one shape set plan it once, and a failed planning is not cached.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "graph/ir.h"
#include "plan/execution_plan.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using namespace std::chrono_literals;

// x [N, 4] -> Relu -> y.
graph::Graph relu_graph() {
  graph::Graph g;
  g.opsets[""] = 13;
  graph::Dim n;
  n.symbol = "N";
  const auto x = g.add_value("x", DType::kFloat32, graph::DimList{n, graph::Dim{4}});
  const auto y = g.add_value("y", DType::kFloat32);
  g.add_input(x);
  g.add_node("Relu", "relu", {x}, {y});
  g.add_output(y);
  return g;
}

Tensor input(int64_t rows) {
  Tensor t = Tensor::empty(DType::kFloat32, Shape{rows, 4});
  for (int64_t i = 0; i < rows * 4; ++i) t.data<float>()[i] = static_cast<float>(i % 3) - 1.f;
  return t;
}

// Planning of one shape set blocks in the planning hook until released (a slow planner).
struct SlowPlanner {
  int64_t slow_rows = 0;
  std::promise<void> entered;
  std::shared_future<void> released;
  std::atomic<int> slow_calls{0};
  std::atomic<int> calls{0};

  void on_planning(const std::vector<Shape>& shapes) {
    calls.fetch_add(1);
    if (shapes.at(0)[0] != slow_rows) return;
    if (slow_calls.fetch_add(1) == 0) entered.set_value();
    released.wait();
  }
};

TEST(PlanCache, PlanningANewShapeNeverBlocksRunsOfPlannedShapes) {
  SlowPlanner slow;
  slow.slow_rows = 2;
  std::promise<void> release;
  slow.released = release.get_future().share();
  ModelOptions mo;
  mo.num_threads = 1;
  mo.on_planning = [&slow](const std::vector<Shape>& s) { slow.on_planning(s); };
  auto loaded = Model::from_graph(relu_graph(), mo);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  std::shared_ptr<Model> model = *loaded;

  Session warm(model);
  ASSERT_TRUE(warm.run({input(1)}).ok());  // [1, 4] is planned and cached
  EXPECT_EQ(slow.calls.load(), 1);

  // Two first runs of [2, 4]: one plans (and stalls in the planner), the other waits for it.
  auto first = std::async(std::launch::async, [&] { return Session(model).run({input(2)}); });
  slow.entered.get_future().wait();
  auto second = std::async(std::launch::async, [&] { return Session(model).run({input(2)}); });

  // Meanwhile a run of the planned shape completes, and so does planning of a third shape set.
  auto planned = std::async(std::launch::async, [&] { return Session(model).run({input(1)}); });
  auto other = std::async(std::launch::async, [&] { return Session(model).run({input(3)}); });
  const bool planned_done = planned.wait_for(10s) == std::future_status::ready;
  const bool other_done = other.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(planned_done) << "a run of a planned shape waited for another shape's planning";
  EXPECT_TRUE(other_done) << "planning one shape set waited for another's";
  EXPECT_EQ(second.wait_for(0s), std::future_status::timeout) << "the second [2, 4] run did not wait for its plan";

  release.set_value();
  for (auto* f : {&first, &second, &planned, &other}) {
    auto r = f->get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = r->at(0);
    for (int64_t i = 0; i < y.shape().numel(); ++i)
      EXPECT_EQ(y.data<float>()[i], std::max(0.f, static_cast<float>(i % 3) - 1.f));
  }
  EXPECT_EQ(slow.slow_calls.load(), 1) << "[2, 4] was planned more than once";
  EXPECT_EQ(slow.calls.load(), 3);  // [1,4], [2,4], [3,4]
}

TEST(PlanCache, AFailedPlanningIsNotCached) {
  std::atomic<int> calls{0};
  ModelOptions mo;
  mo.num_threads = 1;
  mo.on_planning = [&calls](const std::vector<Shape>&) { calls.fetch_add(1); };
  auto loaded = Model::from_graph(relu_graph(), mo);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // A shape the model's Relu accepts but its declared input does not: planning fails, each time,
  // and is tried again each time.
  EXPECT_FALSE((*loaded)->plan_for({Shape{1, 5}}).ok());
  EXPECT_FALSE((*loaded)->plan_for({Shape{1, 5}}).ok());
  EXPECT_EQ(calls.load(), 2);
  EXPECT_TRUE((*loaded)->plan_for({Shape{1, 4}}).ok());
  EXPECT_TRUE((*loaded)->plan_for({Shape{1, 4}}).ok());
  EXPECT_EQ(calls.load(), 3);
}

}  // namespace
}  // namespace streamline
