#pragma once
// Fixtures shared by the plan and exec tests: a graph of parallel chains of fake kernels
// (tests/plan/fake_kernels.h) and its plan for a number of streams.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "plan/fake_kernels.h"
#include "plan/planner.h"

namespace streamline::testing {

using graph::Graph;
using graph::ValueId;

inline constexpr int64_t kN = 4096;

// x -> `branches` chains of `depth` Twice steps -> a left-deep tree of Add2 -> y.
inline Graph wide(int branches, int depth, const std::string& last_op = "Add2") {
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
  ops::KernelRegistry reg = fake_registry();
  plan::KernelSet ks;
  std::shared_ptr<const plan::ExecutionPlan> plan;
};

inline std::unique_ptr<Planned> make(const Graph& g, int streams, plan::PlannerOptions po = {}) {
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

}  // namespace streamline::testing
