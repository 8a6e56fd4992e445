// Eager execution: shape sets whose shapes depend on run-time values run node by node, against
// hand-computed references (ONNX's NonMaxSuppression example) and the planned path; shape sets that
// plan still use plans, failures of another kind stay errors, and observers (traces, metrics) see
// every node of an eager run as they see the steps of a planned one; the "eager" device runs every
// shape set that way, with the planned path's results.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "exec/trace.h"
#include "graph/ir.h"
#include "ops/op_test_util.h"
#include "plan/execution_plan.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using graph::Attribute;
using graph::DimList;

using ops::testing::ints;
using ops::testing::one_int;

Tensor random_tensor(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  return ops::testing::random_tensor(s, rng);
}

std::shared_ptr<Model> load(graph::Graph g, ModelOptions mo = {}) {
  mo.num_threads = 2;
  auto m = Model::from_graph(std::move(g), mo);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

// x[2,3,4], n[1] -> Reshape(x, [n, prod(Shape(x)) / n]) * 2. With `n_value` the count is a
// constant (the planned twin of the graph).
graph::Graph reshape_graph(std::optional<int64_t> n_value) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{2, 3, 4});
  g.add_input(x);
  graph::ValueId n;
  if (n_value) {
    n = g.add_constant("n", Tensor::from_vector<int64_t>(Shape{1}, {*n_value}));
  } else {
    n = g.add_value("n", DType::kInt64, DimList{1});
    g.add_input(n);
  }
  const auto s = g.add_value("s", DType::kInt64);
  const auto total = g.add_value("total", DType::kInt64);
  const auto m = g.add_value("m", DType::kInt64);
  const auto shape = g.add_value("shape", DType::kInt64);
  const auto r = g.add_value("r", DType::kFloat32);
  const auto y = g.add_value("y", DType::kFloat32);
  const auto two = g.add_constant("two", Tensor::scalar<float>(2.f));
  g.add_node("Shape", "shape_of_x", {x}, {s});
  g.add_node("ReduceProd", "count", {s}, {total});
  g.add_node("Div", "per_row", {total, n}, {m});
  const auto cat = g.add_node("Concat", "new_shape", {n, m}, {shape});
  g.node(cat).attrs["axis"] = one_int(0);
  g.add_node("Reshape", "reshape", {x, shape}, {r});
  g.add_node("Mul", "double", {r, two}, {y});
  g.add_output(y);
  return g;
}

void expect_doubled(const Tensor& x, const Tensor& y, const Shape& shape) {
  ASSERT_EQ(y.dtype(), DType::kFloat32);
  ASSERT_EQ(y.shape(), shape);
  ASSERT_EQ(y.layout(), Layout::kPlain);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y.data<float>()[i], 2.f * x.data<float>()[i]) << i;
}

TEST(Eager, ReshapeToRunTimeShapeRunsNodeByNode) {
  auto model = load(reshape_graph(std::nullopt));
  ASSERT_TRUE(model);
  const std::vector<Shape> shapes{Shape{2, 3, 4}, Shape{1}};
  auto mode = model->execution_mode(shapes);
  ASSERT_TRUE(mode.ok()) << mode.status().to_string();
  EXPECT_EQ(*mode, ExecutionMode::kEager);
  EXPECT_STREQ(execution_mode_name(*mode), "eager");
  EXPECT_NE(model->eager_reason(shapes).find("Reshape 'reshape'"), std::string::npos) << model->eager_reason(shapes);
  auto plan = model->plan_for(shapes);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnsupported);

  // One shape set, two run-time shapes: the output shape follows n.
  Session session(model);
  const Tensor x = random_tensor(Shape{2, 3, 4}, 1);
  for (int64_t n : {3, 6, 24}) {
    auto outs = session.run(std::vector<Tensor>{x, Tensor::from_vector<int64_t>(Shape{1}, {n})});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    ASSERT_EQ(outs->size(), 1u);
    expect_doubled(x, (*outs)[0], Shape{n, 24 / n});
  }
  // A count that does not divide the element count is the kernel's error, with the node named.
  auto bad = session.run(std::vector<Tensor>{x, Tensor::from_vector<int64_t>(Shape{1}, {5})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Reshape 'reshape'"), std::string::npos) << bad.status().to_string();
}

TEST(Eager, ConstantShapesStillPlan) {
  auto model = load(reshape_graph(int64_t{6}));
  ASSERT_TRUE(model);
  const std::vector<Shape> shapes{Shape{2, 3, 4}};
  auto mode = model->execution_mode(shapes);
  ASSERT_TRUE(mode.ok()) << mode.status().to_string();
  EXPECT_EQ(*mode, ExecutionMode::kPlanned);
  EXPECT_EQ(model->eager_reason(shapes), "");
  auto plan = model->plan_for(shapes);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto again = model->plan_for(shapes);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(plan->get(), again->get());  // cached
  Session session(model);
  const Tensor x = random_tensor(Shape{2, 3, 4}, 2);
  auto outs = session.run(std::vector<Tensor>{x});
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  expect_doubled(x, (*outs)[0], Shape{6, 4});
  EXPECT_GT(session.arena_bytes(), 0u);  // ran through the plan's arena
}

// NonMaxSuppression with every input given at run time. Boxes and expected selections are the
// suppress_by_IOU example of the ONNX operator documentation.
TEST(Eager, NonMaxSuppressionWithRunTimeInputs) {
  graph::Graph g;
  g.opsets[""] = 11;
  const auto boxes = g.add_value("boxes", DType::kFloat32, DimList{1, 6, 4});
  const auto scores = g.add_value("scores", DType::kFloat32, DimList{1, 1, 6});
  const auto max_out = g.add_value("max_output_boxes_per_class", DType::kInt64, DimList{1});
  const auto iou = g.add_value("iou_threshold", DType::kFloat32, DimList{1});
  const auto thr = g.add_value("score_threshold", DType::kFloat32, DimList{1});
  for (auto v : {boxes, scores, max_out, iou, thr}) g.add_input(v);
  const auto selected = g.add_value("selected", DType::kInt64);
  g.add_node("NonMaxSuppression", "nms", {boxes, scores, max_out, iou, thr}, {selected});
  g.add_output(selected);
  auto model = load(std::move(g));
  ASSERT_TRUE(model);

  const Tensor b = Tensor::from_vector<float>(Shape{1, 6, 4}, {0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                                                               0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101});
  const Tensor s = Tensor::from_vector<float>(Shape{1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f});
  const Tensor i = Tensor::from_vector<float>(Shape{1}, {0.5f});
  const Tensor t = Tensor::from_vector<float>(Shape{1}, {0.f});
  auto mode = model->execution_mode({b.shape(), s.shape(), Shape{1}, i.shape(), t.shape()});
  ASSERT_TRUE(mode.ok()) << mode.status().to_string();
  EXPECT_EQ(*mode, ExecutionMode::kEager);

  Session session(model);
  const std::vector<int64_t> all{0, 0, 3, 0, 0, 0, 0, 0, 5};
  for (int64_t keep : {3, 2}) {
    auto outs = session.run(std::vector<Tensor>{b, s, Tensor::from_vector<int64_t>(Shape{1}, {keep}), i, t});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    const Tensor& y = (*outs)[0];
    ASSERT_EQ(y.dtype(), DType::kInt64);
    ASSERT_EQ(y.shape(), (Shape{keep, 3}));
    for (int64_t k = 0; k < keep * 3; ++k) EXPECT_EQ(y.data<int64_t>()[k], all[static_cast<size_t>(k)]) << k;
  }
  // A score threshold above every score selects nothing.
  auto none = session.run(std::vector<Tensor>{b, s, Tensor::from_vector<int64_t>(Shape{1}, {3}), i,
                                              Tensor::from_vector<float>(Shape{1}, {0.99f})});
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ((*none)[0].shape(), (Shape{0, 3}));
}

// x[1,32] -> Reshape(x, shape) -> Conv 2->c (3x3, pad 1) -> Conv c->c (1x1) -> Relu. Conv kernels
// prefer channels-last or a blocked layout, which eager runs keep between them (32 channels fill
// nChw16c and nChw8c blocks); graph outputs come back plain.
graph::Graph conv_graph(bool constant_shape, int64_t c = 8) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{1, 32});
  g.add_input(x);
  graph::ValueId shape;
  if (constant_shape) {
    shape = g.add_constant("shape", Tensor::from_vector<int64_t>(Shape{4}, {1, 2, 4, 4}));
  } else {
    shape = g.add_value("shape", DType::kInt64, DimList{4});
    g.add_input(shape);
  }
  const auto w1 = g.add_constant("w1", random_tensor(Shape{c, 2, 3, 3}, 11));
  const auto b1 = g.add_constant("b1", random_tensor(Shape{c}, 12));
  const auto w2 = g.add_constant("w2", random_tensor(Shape{c, c, 1, 1}, 13));
  const auto r = g.add_value("r", DType::kFloat32);
  const auto c1 = g.add_value("c1", DType::kFloat32);
  const auto c2 = g.add_value("c2", DType::kFloat32);
  const auto y = g.add_value("y", DType::kFloat32);
  g.add_node("Reshape", "reshape", {x, shape}, {r});
  const auto conv1 = g.add_node("Conv", "conv1", {r, w1, b1}, {c1});
  g.node(conv1).attrs["pads"] = ints({1, 1, 1, 1});
  g.add_node("Conv", "conv2", {c1, w2}, {c2});
  g.add_node("Relu", "relu", {c2}, {y});
  g.add_output(c1);
  g.add_output(y);
  return g;
}

TEST(Eager, ChannelsLastKernelsGivePlainOutputs) {
  for (int64_t c : {8, 32}) {
    auto eager = load(conv_graph(false, c));
    auto planned = load(conv_graph(true, c));
    ASSERT_TRUE(eager && planned);
    const Tensor x = random_tensor(Shape{1, 32}, 3);
    const Tensor shape = Tensor::from_vector<int64_t>(Shape{4}, {1, 2, 4, 4});
    auto mode = eager->execution_mode({x.shape(), shape.shape()});
    ASSERT_TRUE(mode.ok()) << mode.status().to_string();
    EXPECT_EQ(*mode, ExecutionMode::kEager);
    Session es(eager), ps(planned);
    auto want = ps.run(std::vector<Tensor>{x});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    // The second run reuses the first one's reshape results.
    for (int run = 0; run < 2; ++run) {
      auto got = es.run(std::vector<Tensor>{x, shape});
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(got->size(), 2u);
      for (size_t o = 0; o < 2; ++o) {
        const Tensor& a = (*got)[o];
        const Tensor& b = (*want)[o];
        ASSERT_EQ(a.layout(), Layout::kPlain);
        ASSERT_EQ(a.shape(), (Shape{1, c, 4, 4}));
        ASSERT_EQ(a.shape(), b.shape());
        for (int64_t k = 0; k < a.numel(); ++k)
          ASSERT_NEAR(a.data<float>()[k], b.data<float>()[k], 1e-4f)
              << c << " channels, run " << run << ", output " << o << " element " << k;
      }
    }
  }
}

// Sessions of one model share its eager plan and the reshape results it keeps: concurrent runs
// on shapes that alternate (two reshapes kept per kernel) give the planned twin's results.
TEST(Eager, ConcurrentSessionsShareKeptReshapes) {
  auto eager = load(conv_graph(false, 32));
  auto planned = load(conv_graph(true, 32));
  ASSERT_TRUE(eager && planned);
  const Tensor x = random_tensor(Shape{1, 32}, 5);
  Session ps(planned);
  auto want = ps.run(std::vector<Tensor>{x});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  // The same elements as [1, 2, 4, 4] and as [1, 2, 2, 8]: the second has no planned twin, so only
  // the first is compared; both keep the kernels' cache busy with two signatures.
  const Tensor square = Tensor::from_vector<int64_t>(Shape{4}, {1, 2, 4, 4});
  const Tensor wide = Tensor::from_vector<int64_t>(Shape{4}, {1, 2, 2, 8});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Session es(eager);
      for (int run = 0; run < 20; ++run) {
        const bool sq = (run + t) % 2 == 0;
        auto got = es.run(std::vector<Tensor>{x, sq ? square : wide});
        if (!got.ok() || got->size() != 2) {
          ++wrong;
          continue;
        }
        if (!sq) {
          if ((*got)[1].shape() != Shape({1, 32, 2, 8})) ++wrong;
          continue;
        }
        for (size_t o = 0; o < 2; ++o)
          for (int64_t k = 0; k < (*want)[o].numel(); ++k)
            if (std::fabs((*got)[o].data<float>()[k] - (*want)[o].data<float>()[k]) > 1e-4f) {
              ++wrong;
              break;
            }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A failure that values would not cure (an exponent dtype Pow does not take) stays an error.
TEST(Eager, OtherPlanningFailuresStayErrors) {
  graph::Graph g;
  g.opsets[""] = 15;
  const auto x = g.add_value("x", DType::kFloat32, DimList{3});
  const auto e = g.add_value("e", DType::kUInt32, DimList{3});
  g.add_input(x);
  g.add_input(e);
  const auto y = g.add_value("y", DType::kFloat32);
  g.add_node("Pow", "pow", {x, e}, {y});
  g.add_output(y);
  auto model = load(std::move(g));
  ASSERT_TRUE(model);
  auto mode = model->execution_mode({Shape{3}, Shape{3}});
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(mode.status().message().find("Pow 'pow'"), std::string::npos) << mode.status().to_string();
  Session session(model);
  auto outs = session.run(
      std::vector<Tensor>{Tensor::empty(DType::kFloat32, Shape{3}), Tensor::empty(DType::kUInt32, Shape{3})});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), StatusCode::kUnsupported);
}

TEST(Eager, WrongInputDtypeIsAnError) {
  auto model = load(reshape_graph(std::nullopt));
  ASSERT_TRUE(model);
  Session session(model);
  auto outs =
      session.run(std::vector<Tensor>{random_tensor(Shape{2, 3, 4}, 4), Tensor::from_vector<float>(Shape{1}, {3.f})});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), StatusCode::kInvalidArgument);
}

// Records every hook call: the begin/end pairs per step and the names of the steps that ran.
class StepLog final : public exec::ExecObserver {
 public:
  void on_run_begin(const plan::ExecutionPlan&) override { ++runs; }
  void on_step_begin(const plan::ExecutionPlan& p, int step, int stream) override {
    EXPECT_EQ(open, -1) << "a step began inside another";
    open = step;
    EXPECT_EQ(stream, 0);
  }
  void on_step_end(const plan::ExecutionPlan& p, int step, int stream) override {
    EXPECT_EQ(open, step) << "a step ended that had not begun";
    open = -1;
    names.push_back(p.steps[static_cast<size_t>(step)].name);
  }
  void on_run_end(const plan::ExecutionPlan&) override { ++ended; }
  int runs = 0, ended = 0, open = -1;
  std::vector<std::string> names;
};

TEST(Eager, ObserversSeeEveryNode) {
  auto model = load(reshape_graph(std::nullopt));
  ASSERT_TRUE(model);
  Session session(model);
  const Tensor x = random_tensor(Shape{2, 3, 4}, 3);
  const std::vector<Tensor> ins{x, Tensor::from_vector<int64_t>(Shape{1}, {3})};
  StepLog log;
  RunOptions ro;
  ro.observer = &log;
  auto outs = session.run(ins, ro);
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  ASSERT_EQ(*model->execution_mode({x.shape(), Shape{1}}), ExecutionMode::kEager);
  EXPECT_EQ(log.runs, 1);
  EXPECT_EQ(log.ended, 1);
  // Every node of the graph, in a topological order.
  const std::vector<std::string> expected{"shape_of_x", "count", "per_row", "new_shape", "reshape", "double"};
  EXPECT_EQ(log.names, expected);

  // A trace of two eager runs has one slice per node and run, named and typed like planned steps.
  exec::TraceRecorder trace;
  ro.observer = &trace;
  ASSERT_TRUE(session.run(ins, ro).ok());
  ASSERT_TRUE(session.run(ins, ro).ok());
  EXPECT_EQ(trace.slices(), 2 * expected.size());
  const std::string json = trace.to_json();
  EXPECT_NE(json.find("\"name\": \"reshape\", \"cat\": \"Reshape\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"run\": 2"), std::string::npos) << json;
}

// x[1,3,8,8] -> Conv(3x3, pads 1, bias) -> Relu -> y: fused, blocked and planned on the CPU device.
graph::Graph conv_relu_graph() {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{1, 3, 8, 8});
  g.add_input(x);
  const auto w = g.add_constant("w", random_tensor(Shape{4, 3, 3, 3}, 11));
  const auto b = g.add_constant("b", random_tensor(Shape{4}, 12));
  const auto c = g.add_value("c", DType::kFloat32);
  const auto y = g.add_value("y", DType::kFloat32);
  const auto conv = g.add_node("Conv", "conv", {x, w, b}, {c});
  g.node(conv).attrs["pads"] = ints({1, 1, 1, 1});
  g.node(conv).attrs["kernel_shape"] = ints({3, 3});
  g.add_node("Relu", "relu", {c}, {y});
  g.add_output(y);
  return g;
}

TEST(Eager, TheEagerDeviceRunsEveryShapeSetNodeByNode) {
  ModelOptions eager_options;
  eager_options.device = "eager";
  auto eager = load(conv_relu_graph(), eager_options);
  auto planned = load(conv_relu_graph());
  ASSERT_TRUE(eager && planned);
  EXPECT_EQ(eager->device_name(), "eager");
  EXPECT_EQ(planned->device_name(), "cpu");
  const std::vector<Shape> shapes{Shape{1, 3, 8, 8}};
  ASSERT_EQ(*planned->execution_mode(shapes), ExecutionMode::kPlanned);
  auto mode = eager->execution_mode(shapes);
  ASSERT_TRUE(mode.ok()) << mode.status().to_string();
  EXPECT_EQ(*mode, ExecutionMode::kEager);
  EXPECT_NE(eager->eager_reason(shapes).find("eager device"), std::string::npos) << eager->eager_reason(shapes);
  auto plan = eager->plan_for(shapes);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnsupported);

  const Tensor x = random_tensor(Shape{1, 3, 8, 8}, 13);
  Session eager_session(eager), planned_session(planned);
  StepLog log;
  RunOptions ro;
  ro.observer = &log;
  auto got = eager_session.run(std::vector<Tensor>{x}, ro);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto want = planned_session.run(std::vector<Tensor>{x});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_EQ((*got)[0].shape(), (Shape{1, 4, 8, 8}));
  ASSERT_EQ((*got)[0].layout(), Layout::kPlain);
  for (int64_t i = 0; i < (*want)[0].numel(); ++i)
    ASSERT_NEAR((*got)[0].data<float>()[i], (*want)[0].data<float>()[i], 1e-5f) << i;
  EXPECT_EQ(log.runs, 1);
  EXPECT_FALSE(log.names.empty());
  EXPECT_EQ(eager_session.arena_bytes(), 0u);  // no plan, no arena
  EXPECT_GT(planned_session.arena_bytes(), 0u);
}

TEST(Eager, AnUnknownDeviceNamesTheKnownOnes) {
  ModelOptions mo;
  mo.device = "tpu";
  auto m = Model::from_graph(conv_relu_graph(), mo);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("cpu, eager, cuda or cuda:N"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace streamline
