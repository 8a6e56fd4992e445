// The CPU executor: multi-stream plans give single-stream outputs, elastic threads, errors that
// name the node and stop every stream, input checks, safe-mode canaries, and device-timed steps in
// traces.

#include <gtest/gtest.h>

#include <algorithm>

#include "exec/cpu_executor.h"
#include "exec/trace.h"
#include "ops/registry.h"
#include "plan/stream_test_graphs.h"

namespace streamline {
namespace {

using graph::Graph;
using graph::ValueId;
using testing::kN;
using testing::make;
using testing::wide;

Result<std::vector<float>> run(const plan::ExecutionPlan& p, bool safe = false) {
  exec::CpuExecutionContext ctx;
  Tensor x = Tensor::empty(DType::kFloat32, Shape{1, kN});
  for (int64_t i = 0; i < kN; ++i) x.data<float>()[i] = static_cast<float>(i % 97);
  std::vector<Tensor> outs;
  exec::RunOptions ro;
  ro.safe = safe;
  SL_RETURN_IF_ERROR(ctx.run(p, {&x, 1}, &outs, ro));
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
    exec::CpuExecutionContext ctx;
    Tensor in = Tensor::empty(DType::kFloat32, Shape{1, kN});
    for (int64_t i = 0; i < kN; ++i) in.data<float>()[i] = static_cast<float>(i % 97);
    std::vector<Tensor> outs;
    exec::RunOptions ro;
    ro.num_threads = 1;
    ro.elastic_threads = 4;
    ASSERT_TRUE(ctx.run(*p->plan, {&in, 1}, &outs, ro).ok());
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

// Steps below the planner's serial size run on one thread whatever the run's count; larger ones,
// and every step with serial_bytes = 0, get the run's count; the outputs do not change.
TEST(Streams, SmallStepsRunSerial) {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  ValueId a = g.add_value("a"), b = g.add_value("b");
  g.add_node("NoteTwice", "first", {x}, {a});
  g.add_node("NoteTwice", "second", {a}, {b});
  g.add_output(b);
  const size_t step_bytes = 2 * kN * sizeof(float);  // input and output
  struct Case {
    size_t serial_bytes;
    int threads;
    int want;  // threads each step runs on
  };
  const Case cases[] = {{step_bytes + 1, 3, 1}, {step_bytes, 3, 3}, {0, 3, 3}, {step_bytes + 1, 1, 1}};
  std::optional<std::vector<float>> ref;
  for (const Case& c : cases) {
    SCOPED_TRACE("serial_bytes " + std::to_string(c.serial_bytes) + ", threads " + std::to_string(c.threads));
    plan::PlannerOptions po;
    po.serial_bytes = c.serial_bytes;
    po.num_threads = c.threads;
    auto p = make(g, 1, po);
    ASSERT_TRUE(p->plan);
    for (const plan::Step& st : p->plan->steps) EXPECT_EQ(st.threads, c.want == 1 && c.threads > 1 ? 1 : 0);
    testing::thread_notes().seen.clear();
    exec::CpuExecutionContext ctx;
    Tensor in = Tensor::empty(DType::kFloat32, Shape{1, kN});
    for (int64_t i = 0; i < kN; ++i) in.data<float>()[i] = static_cast<float>(i % 97);
    std::vector<Tensor> outs;
    exec::RunOptions ro;
    ro.num_threads = c.threads;
    ASSERT_TRUE(ctx.run(*p->plan, {&in, 1}, &outs, ro).ok());
    const std::vector<float> got(outs[0].data<float>(), outs[0].data<float>() + kN);
    if (!ref) ref = got;
    EXPECT_EQ(got, *ref);
    ASSERT_EQ(testing::thread_notes().seen.size(), 2u);
    for (const auto& [name, threads] : testing::thread_notes().seen) EXPECT_EQ(threads, c.want) << name;
  }
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

TEST(Executor, RunErrorsNameTheNodeAndBadInputsAreRejected) {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, 4});
  g.add_input(x);
  ValueId y = g.add_value("y");
  g.add_node("Boom", "kaboom", {x}, {y});
  g.add_output(y);
  testing::Planned p;
  auto ks = plan::create_kernels(g, p.reg, {});
  ASSERT_TRUE(ks.ok()) << ks.status().to_string();
  p.ks = std::move(ks).value();
  plan::PlannerOptions po;
  po.registry = &p.reg;
  auto planned = plan::make_plan(g, p.ks, {{"x", Shape{1, 4}}}, po);
  ASSERT_TRUE(planned.ok()) << planned.status().to_string();
  exec::CpuExecutionContext ctx;
  Tensor in = Tensor::empty(DType::kFloat32, Shape{1, 4});
  std::vector<Tensor> outs;
  Status s = ctx.run(**planned, {&in, 1}, &outs, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kaboom"), std::string::npos) << s.message();
  Tensor wrong = Tensor::empty(DType::kInt64, Shape{1, 4});
  s = ctx.run(**planned, {&wrong, 1}, &outs, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x'"), std::string::npos) << s.message();
}

// Outputs handed out as copies are written straight into memory of their own: the values are
// right whatever aliases the arena had (an output read by a later step, two outputs on one buffer,
// an output that is an input), they outlive the next run, and a run that keeps arena views (as a
// serving instance does) gets views again.
TEST(Executor, CopiedOutputsAreWrittenInTheirOwnMemory) {
  Graph g;
  g.opsets[""] = 13;
  ValueId x = g.add_value("x", DType::kFloat32, graph::DimList{1, kN});
  g.add_input(x);
  const auto v = [&](const char* name) { return g.add_value(name); };
  ValueId neg = v("neg"), relu = v("relu"), twice = v("twice"), same = v("same"), flat = v("flat"), echo = v("echo");
  ValueId shape = g.add_constant("shape", Tensor::from_vector<int64_t>(Shape{1}, {kN}));
  g.add_node("Neg", "neg", {x}, {neg});
  g.add_node("Relu", "relu", {neg}, {relu});          // may run in place over neg
  g.add_node("Add", "twice", {relu, relu}, {twice});  // reads an output
  g.add_node("Identity", "same", {twice}, {same});
  g.add_node("Reshape", "flat", {same, shape}, {flat});  // twice, same, flat: possibly one buffer
  g.add_node("Identity", "echo", {x}, {echo});           // the input itself
  for (ValueId o : {relu, twice, flat, echo}) g.add_output(o);
  auto ks = plan::create_kernels(g, ops::default_cpu_registry(), {});
  ASSERT_TRUE(ks.ok()) << ks.status().to_string();
  plan::PlannerOptions po;
  auto planned = plan::make_plan(g, *ks, {{"x", Shape{1, kN}}}, po);
  ASSERT_TRUE(planned.ok()) << planned.status().to_string();
  const plan::ExecutionPlan& p = **planned;
  exec::CpuExecutionContext ctx;
  const auto input = [](float scale) {
    Tensor t = Tensor::empty(DType::kFloat32, Shape{1, kN});
    for (int64_t i = 0; i < kN; ++i) t.data<float>()[i] = scale * static_cast<float>(i % 7 - 3);
    return t;
  };
  const auto check = [&](const std::vector<Tensor>& outs, const Tensor& in, float scale) {
    ASSERT_EQ(outs.size(), 4u);
    EXPECT_EQ(outs[2].shape(), Shape{kN});
    for (int64_t i = 0; i < kN; ++i) {
      const float r = std::max(0.f, -scale * static_cast<float>(i % 7 - 3));
      ASSERT_EQ(outs[0].data<float>()[i], r) << i;
      ASSERT_EQ(outs[1].data<float>()[i], 2 * r) << i;
      ASSERT_EQ(outs[2].data<float>()[i], 2 * r) << i;
      ASSERT_EQ(outs[3].data<float>()[i], in.data<float>()[i]) << i;
    }
  };
  std::vector<Tensor> first, second, views;
  Tensor in1 = input(1), in2 = input(-2);
  exec::RunOptions copy;
  ASSERT_TRUE(ctx.run(p, {&in1, 1}, &first, copy).ok());
  check(first, in1, 1);
  exec::RunOptions keep;
  keep.copy_outputs = false;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(ctx.run(p, {&in2, 1}, &second, copy).ok());
    check(second, in2, -2);
    check(first, in1, 1);  // the first run's outputs are still its own
    ASSERT_TRUE(ctx.run(p, {&in1, 1}, &views, keep).ok());
    check(views, in1, 1);
  }
  // A run that copies out writes relu (its own buffer, neg's if it ran in place) outside the
  // arena: the arena still holds the previous run's relu.
  ASSERT_TRUE(ctx.run(p, {&in2, 1}, &second, copy).ok());
  check(second, in2, -2);
  for (int64_t i = 0; i < kN; ++i)
    ASSERT_EQ(views[0].data<float>()[i], std::max(0.f, -static_cast<float>(i % 7 - 3))) << i;
  // Copies never share memory with each other, the arena or the input.
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_NE(first[i].raw(), in1.raw()) << i;
    EXPECT_NE(first[i].raw(), views[i].raw()) << i;
    for (size_t j = i + 1; j < first.size(); ++j) EXPECT_NE(first[i].raw(), first[j].raw()) << i << " " << j;
  }
  first[1].data<float>()[0] = 1e9f;
  EXPECT_NE(first[2].data<float>()[0], 1e9f);
}

}  // namespace
}  // namespace streamline
