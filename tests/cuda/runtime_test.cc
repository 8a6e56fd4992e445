// Models on the CUDA device: planning (anywhere), clean failures without a GPU, and (Gpu* suites)
// whole runs against the CPU device: fp32, tf32 and fp16, several streams, CUDA graphs on and off,
// several contexts at once.
//
// GpuModel.TestModelsMatchTheCpu reads exported test models from $SL_TEST_MODELS when it is set
// (scripts/gpu-check), else from the model tests' cache (SL_MODEL_DIR, passed in by CMake), which it
// fills with scripts/export_models.py as the model tests do; a missing model fails it.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "cuda_test_util.h"
#include "exec/backend.h"
#include "exec/trace.h"
#include "graph/ir.h"
#include "graph/passes.h"
#include "models/exported_model.h"
#include "ops/kernel.h"
#include "plan/execution_plan.h"
#include "runtime/device.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using graph::DimList;
using ops::testing::ints;
using ops::testing::one_int;

Tensor random_input(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  return ops::testing::random_tensor(s, rng);
}

// x[2,4,6,6] -> Conv 3x3 pad 1 (8 filters) -> Relu -> Reshape(to [2, Shape-derived count]) -> * 2.
// The Reshape's shape comes from Shape/ReduceProd/Div/Concat, which fold when the plan is made
// (Concat has a CUDA kernel, so folding it needs the CPU one).
graph::Graph conv_graph(bool with_sin = false) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{2, 4, 6, 6});
  g.add_input(x);
  const auto w = g.add_constant("w", random_input(Shape{8, 4, 3, 3}, 11));
  const auto b = g.add_constant("b", random_input(Shape{8}, 12));
  const auto c = g.add_value("c", DType::kFloat32);
  const auto r = g.add_value("r", DType::kFloat32);
  const auto conv = g.add_node("Conv", "conv", {x, w, b}, {c});
  g.node(conv).attrs["kernel_shape"] = ints({3, 3});
  g.node(conv).attrs["pads"] = ints({1, 1, 1, 1});
  g.add_node("Relu", "relu", {c}, {r});
  graph::ValueId act = r;
  if (with_sin) {
    const auto s = g.add_value("sin_out", DType::kFloat32);
    g.add_node("Sin", "sin1", {r}, {s});
    act = s;
  }
  const auto n = g.add_constant("n", Tensor::from_vector<int64_t>(Shape{1}, {2}));
  const auto shp = g.add_value("s", DType::kInt64);
  const auto total = g.add_value("total", DType::kInt64);
  const auto m = g.add_value("m", DType::kInt64);
  const auto shape = g.add_value("shape", DType::kInt64);
  const auto flat = g.add_value("flat", DType::kFloat32);
  const auto y = g.add_value("y", DType::kFloat32);
  const auto two = g.add_constant("two", Tensor::scalar<float>(2.f));
  g.add_node("Shape", "shape_of", {act}, {shp});
  g.add_node("ReduceProd", "count", {shp}, {total});
  g.add_node("Div", "per_row", {total, n}, {m});
  const auto cat = g.add_node("Concat", "new_shape", {n, m}, {shape});
  g.node(cat).attrs["axis"] = one_int(0);
  g.add_node("Reshape", "reshape", {act, shape}, {flat});
  g.add_node("Mul", "double", {flat, two}, {y});
  g.add_output(y);
  return g;
}

std::shared_ptr<Model> load(graph::Graph g, ModelOptions mo) {
  auto m = Model::from_graph(std::move(g), mo);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

ModelOptions cuda_options(int streams = 1) {
  ModelOptions mo;
  mo.device = "cuda:0";
  mo.num_streams = streams;
  mo.optimize = false;  // keep Conv and Relu apart: both kernels get exercised
  return mo;
}

TEST(CudaModel, PlansForTheGpuWithoutOne) {
  auto model = load(conv_graph(), cuda_options());
  ASSERT_TRUE(model);
  EXPECT_EQ(model->device().kind, ops::Device::kCuda);
  EXPECT_EQ(model->device().to_string(), "cuda:0");
  auto plan = model->plan_for({Shape{2, 4, 6, 6}});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const plan::ExecutionPlan& p = **plan;
  EXPECT_EQ(p.device, ops::Device::kCuda);
  EXPECT_TRUE(p.verified);
  // The shape arithmetic folded away; what is left runs on CUDA kernels, in plain layout.
  std::vector<std::string> ops;
  for (const auto& st : p.steps) {
    ops.push_back(st.op);
    EXPECT_EQ(st.provider, "cuda") << st.name;
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "Relu", "Reshape", "Mul"}));
  EXPECT_GE(p.folded_nodes, 4);
  for (const auto& s : p.slots) EXPECT_EQ(s.layout, Layout::kPlain) << s.name;
  EXPECT_NE(p.to_json().find("\"device\": \"cuda\""), std::string::npos);
}

TEST(CudaModel, MultiStreamPlanIsVerified) {
  auto model = load(conv_graph(), cuda_options(4));
  ASSERT_TRUE(model);
  auto plan = model->plan_for({Shape{2, 4, 6, 6}});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE((*plan)->verified);
  EXPECT_LE((*plan)->num_streams, 4);
}

TEST(CudaModel, CpuOnlyNodesComputedAtRunTimeAreListed) {
  auto model = load(conv_graph(/*with_sin=*/true), cuda_options());
  ASSERT_TRUE(model);
  auto plan = model->plan_for({Shape{2, 4, 6, 6}});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(plan.status().message().find("no cuda kernel"), std::string::npos) << plan.status().to_string();
  EXPECT_NE(plan.status().message().find("Sin (opset 13): sin1"), std::string::npos) << plan.status().to_string();
}

TEST(CudaModel, OptionsAreChecked) {
  ModelOptions mo;
  mo.device = "tpu";
  auto bad = Model::from_graph(conv_graph(), mo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown device 'tpu'"), std::string::npos);
  mo.device = "cpu";
  mo.precision = ops::Precision::kFp16;
  bad = Model::from_graph(conv_graph(), mo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("needs a GPU device"), std::string::npos);
  mo = cuda_options();
  mo.safe = true;
  bad = Model::from_graph(conv_graph(), mo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("safe mode"), std::string::npos);
}

TEST(CudaModel, HalfPrecisionConvertsWeightsAndKeepsFloatAtTheBoundary) {
  ModelOptions mo = cuda_options();
  mo.precision = ops::Precision::kFp16;
  auto model = load(conv_graph(), mo);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->inputs()[0].dtype, DType::kFloat32);
  EXPECT_EQ(model->outputs()[0].dtype, DType::kFloat32);
  auto plan = model->plan_for({Shape{2, 4, 6, 6}});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const plan::ExecutionPlan& p = **plan;
  ASSERT_GE(p.steps.size(), 3u);
  EXPECT_EQ(p.steps.front().op, "Cast");
  EXPECT_EQ(p.steps.back().op, "Cast");
  for (const auto& st : p.steps) {
    if (st.op != "Conv") continue;
    const plan::TensorSlot& w = p.slots[static_cast<size_t>(st.inputs[1])];
    EXPECT_EQ(w.dtype, DType::kFloat16);
    const plan::TensorSlot& out = p.slots[static_cast<size_t>(st.outputs[0])];
    EXPECT_EQ(out.dtype, DType::kFloat16);
  }
}

// Largest |a - b| over the largest |b| (the output's scale).
double scaled_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double err = 0, scale = 1e-12;
  for (int64_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data<float>()[i])));
  }
  return err / scale;
}

std::vector<Tensor> run_once(const std::shared_ptr<Model>& model, const std::vector<Tensor>& inputs, int times = 1) {
  Session session(model);
  std::vector<Tensor> outs;
  for (int i = 0; i < times; ++i) {
    auto r = session.run(inputs);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return {};
    outs = std::move(r).value();
  }
  return outs;
}

// Label unit, so it runs on every machine, and never skips: what it asserts depends on the machine.
// Without a usable GPU a run fails cleanly (Unavailable, naming the device) instead of crashing;
// with one the same session runs and matches the CPU.
TEST(CudaSession, RunsWhereAGpuIsAndFailsCleanlyWhereNot) {
  auto model = load(conv_graph(), cuda_options());
  ASSERT_TRUE(model);
  const std::vector<Tensor> in{random_input(Shape{2, 4, 6, 6}, 1)};
  Session session(model);
  auto outs = session.run(in);
  if (!exec::cuda::require_device().ok()) {
    ASSERT_FALSE(outs.ok());
    EXPECT_EQ(outs.status().code(), StatusCode::kUnavailable) << outs.status().to_string();
    EXPECT_NE(outs.status().message().find("cuda:0"), std::string::npos) << outs.status().to_string();
    return;
  }
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  ModelOptions cpu;
  cpu.optimize = false;
  const auto want = run_once(load(conv_graph(), cpu), in);
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(outs->size(), 1u);
  EXPECT_LT(scaled_error((*outs)[0], want[0]), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

TEST(GpuModel, SmallGraphMatchesTheCpu) {
  SL_REQUIRE_GPU();
  const std::vector<Tensor> in{random_input(Shape{2, 4, 6, 6}, 3)};
  ModelOptions cpu;
  cpu.optimize = false;
  const auto want = run_once(load(conv_graph(), cpu), in);
  ASSERT_EQ(want.size(), 1u);
  // Direct launches, then (runs 2 and 3) a captured graph: both match.
  for (bool graphs : {false, true}) {
    ModelOptions mo = cuda_options();
    mo.cuda_graphs = graphs;
    const auto got = run_once(load(conv_graph(), mo), in, 3);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LT(scaled_error(got[0], want[0]), 1e-5) << "cuda graphs " << graphs;
  }
  ModelOptions half = cuda_options();
  half.precision = ops::Precision::kFp16;
  const auto h = run_once(load(conv_graph(), half), in, 2);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_LT(scaled_error(h[0], want[0]), 1e-2);  // fp16: 11-bit mantissa, 36-term sums
}

// Every exported test model: CUDA fp32 (1 and 4 streams, graphs on), tf32 and fp16 against the CPU.
TEST(GpuModel, TestModelsMatchTheCpu) {
  SL_REQUIRE_GPU();
  struct Case {
    const char* name;
    double fp32, tf32, fp16;  // tolerances on the scaled error
  };
  const Case cases[] = {{"resnet50", 1e-4, 2e-2, 5e-2},      {"mobilenet_v2", 1e-4, 2e-2, 5e-2},
                        {"squeezenet1_1", 1e-4, 2e-2, 5e-2}, {"googlenet", 1e-4, 2e-2, 5e-2},
                        {"bert_tiny", 1e-4, 2e-2, 5e-2},     {"bert", 1e-4, 2e-2, 5e-2}};
  // $SL_TEST_MODELS when set (scripts/gpu-check exports there); else the model tests' cache,
  // exporting what is missing. A model that is still missing is a failure: on a GPU machine this
  // test must run every model, not pass on none.
  const char* dir = std::getenv("SL_TEST_MODELS");
  for (const Case& c : cases) {
    const std::filesystem::path path =
        dir ? std::filesystem::path(dir) / (std::string(c.name) + ".onnx") : testing::exported_model(c.name);
    ASSERT_TRUE(std::filesystem::exists(path)) << c.name << ": no model at " << path;
    auto cpu_model = Model::load(path.string(), {});
    ASSERT_TRUE(cpu_model.ok()) << cpu_model.status().to_string();
    auto shapes = (*cpu_model)->default_shapes(2);
    ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
    std::vector<Tensor> in;
    for (size_t i = 0; i < shapes->size(); ++i) {
      const auto& d = (*cpu_model)->inputs()[i];
      if (d.dtype == DType::kInt64) {
        Tensor t = Tensor::empty(DType::kInt64, (*shapes)[i]);
        for (int64_t k = 0; k < t.numel(); ++k) t.data<int64_t>()[k] = (k * 37) % 1000;
        in.push_back(t);
      } else {
        in.push_back(random_input((*shapes)[i], 5 + static_cast<uint32_t>(i)));
      }
    }
    const auto want = run_once(*cpu_model, in);
    ASSERT_FALSE(want.empty()) << c.name;
    struct Variant {
      ops::Precision precision;
      int streams;
      double tol;
    };
    for (const Variant& v : {Variant{ops::Precision::kFp32, 1, c.fp32}, Variant{ops::Precision::kFp32, 4, c.fp32},
                             Variant{ops::Precision::kTf32, 1, c.tf32}, Variant{ops::Precision::kFp16, 1, c.fp16}}) {
      ModelOptions mo;
      mo.device = "cuda:0";
      mo.precision = v.precision;
      mo.num_streams = v.streams;
      auto m = Model::load(path.string(), mo);
      ASSERT_TRUE(m.ok()) << c.name << ": " << m.status().to_string();
      const auto got = run_once(*m, in, 3);
      ASSERT_EQ(got.size(), want.size()) << c.name;
      for (size_t o = 0; o < got.size(); ++o)
        EXPECT_LT(scaled_error(got[o], want[o]), v.tol) << c.name << " output " << o << " precision "
                                                        << ops::precision_name(v.precision) << " streams " << v.streams;
    }
  }
}

TEST(GpuModel, TracedRunsTimeEveryStepOnTheDevice) {
  SL_REQUIRE_GPU();
  auto model = load(conv_graph(), cuda_options(2));
  ASSERT_TRUE(model);
  Session session(model);
  const std::vector<Tensor> in{random_input(Shape{2, 4, 6, 6}, 4)};
  exec::TraceRecorder trace;
  RunOptions ro;
  ro.observer = &trace;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session.run(in, ro).ok());  // traced runs skip CUDA graphs
  auto plan = model->plan_for({Shape{2, 4, 6, 6}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(trace.slices(), 3 * (*plan)->steps.size());
  EXPECT_NE(trace.to_json().find("\"Conv\""), std::string::npos);
}

TEST(GpuModel, ContextsRunConcurrentlyAndShareWeights) {
  SL_REQUIRE_GPU();
  auto model = load(conv_graph(), cuda_options());
  ASSERT_TRUE(model);
  const std::vector<Tensor> in{random_input(Shape{2, 4, 6, 6}, 9)};
  const auto want = run_once(model, in);
  ASSERT_EQ(want.size(), 1u);
  const size_t weights = model->device_weights()->bytes();
  EXPECT_GT(weights, 0u);
  std::vector<std::thread> threads;
  std::vector<double> errors(4, 1.0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Session s(model);
      for (int i = 0; i < 20; ++i) {
        auto r = s.run(in);
        if (!r.ok()) return;
        errors[static_cast<size_t>(t)] = scaled_error((*r)[0], want[0]);
      }
    });
  for (auto& t : threads) t.join();
  for (double e : errors) EXPECT_EQ(e, 0.0);
  EXPECT_EQ(model->device_weights()->bytes(), weights);  // one copy, whatever the contexts
}

}  // namespace
}  // namespace streamline
