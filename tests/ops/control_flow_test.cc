// If, Loop and Scan run their subgraphs through the eager interpreter; checked against the same
// computations written out as plain loops.

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>

#include "ops/eager.h"
#include "ops/op_test_util.h"
#include "ops/registry.h"

namespace streamline::ops {
namespace {

using graph::Attribute;
using graph::DimList;

using testing::ints;
using testing::one_int;

Tensor random_tensor(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::random_tensor(s, rng);
}

Attribute graph_attr(graph::Graph g) {
  Attribute a;
  a.kind = Attribute::Kind::kGraph;
  a.g = std::make_shared<graph::Graph>(std::move(g));
  return a;
}

// Runs a whole graph of tensors through a SubgraphRunner (kernels made on first use).
Result<std::vector<Tensor>> run_graph(graph::Graph g, const std::vector<Tensor>& inputs) {
  SubgraphRunner runner(std::make_shared<const graph::Graph>(std::move(g)), {});
  SL_RETURN_IF_ERROR(runner.check_supported());
  const std::vector<AnyValue> values(inputs.begin(), inputs.end());
  SL_ASSIGN_OR_RETURN(std::vector<AnyValue> outs, runner.run(values, {}));
  std::vector<Tensor> tensors;
  for (const AnyValue& v : outs) tensors.push_back(v.tensor());
  return tensors;
}

// A branch computing `op`(x, c) where x is the enclosing graph's value named "x".
graph::Graph branch(const char* op, float c, int opset) {
  graph::Graph b;
  b.opsets[""] = opset;
  const auto x = b.add_value("x");
  const auto k = b.add_constant("k", Tensor::scalar<float>(c));
  const auto y = b.add_value(std::string(op) + "_out");
  b.add_node(op, std::string(op) + "_node", {x, k}, {y});
  b.add_output(y);
  return b;
}

TEST(ControlFlow, IfRunsTheChosenBranchWithOuterValues) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto cond = g.add_value("cond", DType::kBool, DimList{});
  const auto x = g.add_value("x", DType::kFloat32, DimList{4});
  g.add_input(cond);
  g.add_input(x);
  const auto y = g.add_value("y");
  const auto n = g.add_node("If", "if0", {cond}, {y});
  g.node(n).attrs["then_branch"] = graph_attr(branch("Add", 1.f, 13));
  g.node(n).attrs["else_branch"] = graph_attr(branch("Mul", 2.f, 13));
  g.add_output(y);
  const Tensor xv = random_tensor(Shape{4}, 1);
  for (bool c : {true, false}) {
    auto outs = run_graph(g, {Tensor::scalar<bool>(c), xv});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    const Tensor& out = (*outs)[0];
    ASSERT_EQ(out.shape(), Shape{4});
    for (int64_t i = 0; i < 4; ++i) {
      const float want = c ? xv.data<float>()[i] + 1.f : xv.data<float>()[i] * 2.f;
      EXPECT_FLOAT_EQ(out.data<float>()[i], want) << c << " " << i;
    }
  }
  // A condition that is not one element is an error naming the node.
  auto bad = run_graph(g, {Tensor::from_vector<bool>(Shape{2}, {true, false}), xv});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("If 'if0'"), std::string::npos) << bad.status().to_string();
}

// Loop(M, cond, s): s += x each iteration (x from the enclosing graph), scan output s; the body's
// condition is iteration < stop_after.
graph::Graph loop_graph(int64_t stop_after) {
  graph::Graph body;
  body.opsets[""] = 13;
  const auto it = body.add_value("it", DType::kInt64, DimList{});
  const auto cond_in = body.add_value("cond_in", DType::kBool, DimList{});
  const auto s_in = body.add_value("s_in");
  body.add_input(it);
  body.add_input(cond_in);
  body.add_input(s_in);
  const auto x = body.add_value("x");
  const auto limit = body.add_constant("limit", Tensor::scalar<int64_t>(stop_after));
  const auto cond_out = body.add_value("cond_out");
  const auto s_out = body.add_value("s_out");
  const auto scan = body.add_value("scan");
  body.add_node("Less", "keep_going", {it, limit}, {cond_out});
  body.add_node("Add", "accumulate", {s_in, x}, {s_out});
  body.add_node("Identity", "record", {s_out}, {scan});
  body.add_output(cond_out);
  body.add_output(s_out);
  body.add_output(scan);

  graph::Graph g;
  g.opsets[""] = 13;
  const auto m = g.add_value("M", DType::kInt64, DimList{});
  const auto c = g.add_value("cond", DType::kBool, DimList{});
  const auto s0 = g.add_value("s0", DType::kFloat32, DimList{3});
  const auto xv = g.add_value("x", DType::kFloat32, DimList{3});
  for (auto v : {m, c, s0, xv}) g.add_input(v);
  const auto s_final = g.add_value("s_final");
  const auto scans = g.add_value("scans");
  const auto n = g.add_node("Loop", "loop0", {m, c, s0}, {s_final, scans});
  g.node(n).attrs["body"] = graph_attr(std::move(body));
  g.add_output(s_final);
  g.add_output(scans);
  return g;
}

TEST(ControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  const Tensor s0 = random_tensor(Shape{3}, 2), x = random_tensor(Shape{3}, 3);
  // (trip count, stop_after) -> iterations run: min(M, stop_after + 1).
  for (auto [trips, stop_after, iterations] :
       {std::tuple{int64_t{4}, int64_t{100}, int64_t{4}}, std::tuple{int64_t{10}, int64_t{2}, int64_t{3}}}) {
    auto outs = run_graph(loop_graph(stop_after), {Tensor::scalar<int64_t>(trips), Tensor::scalar<bool>(true), s0, x});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    const Tensor& fin = (*outs)[0];
    const Tensor& scans = (*outs)[1];
    ASSERT_EQ(fin.shape(), Shape{3});
    ASSERT_EQ(scans.shape(), (Shape{iterations, 3}));
    std::vector<float> s(s0.data<float>(), s0.data<float>() + 3);
    for (int64_t k = 0; k < iterations; ++k)
      for (int64_t i = 0; i < 3; ++i) {
        s[static_cast<size_t>(i)] += x.data<float>()[i];
        EXPECT_FLOAT_EQ(scans.data<float>()[k * 3 + i], s[static_cast<size_t>(i)]) << k << " " << i;
      }
    for (int64_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(fin.data<float>()[i], s[static_cast<size_t>(i)]);
  }
  // cond false from the start: no iteration, the initial value comes back.
  auto none = run_graph(loop_graph(5), {Tensor::scalar<int64_t>(3), Tensor::scalar<bool>(false), s0, x});
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ((*none)[0].data<float>()[i], s0.data<float>()[i]);
  EXPECT_EQ((*none)[1].shape()[0], 0);
}

// A Loop that grows a tensor by concatenation (as torchvision's Mask R-CNN pastes masks): each
// iteration appends i * x. The body's new tensor leaves the body without a copy; an output that is
// an input passed through, or shares storage with another output, is still a copy.
TEST(ControlFlow, LoopGrowsATensorByConcatenation) {
  graph::Graph body;
  body.opsets[""] = 13;
  const auto i = body.add_value("i", DType::kInt64, DimList{});
  const auto c_in = body.add_value("c_in", DType::kBool, DimList{});
  const auto acc_in = body.add_value("acc_in", DType::kFloat32);
  body.add_input(i);
  body.add_input(c_in);
  body.add_input(acc_in);
  const auto c_out = body.add_value("c_out");
  const auto fi = body.add_value("fi");
  const auto row = body.add_value("row");
  const auto acc_out = body.add_value("acc_out");
  body.add_node("Identity", "keep_going", {c_in}, {c_out});
  const auto cast = body.add_node("Cast", "to_float", {i}, {fi});
  body.node(cast).attrs["to"] = one_int(static_cast<int64_t>(DType::kFloat32));
  body.add_node("Mul", "scale", {fi, body.add_value("x")}, {row});
  const auto cat = body.add_node("Concat", "append", {acc_in, row}, {acc_out});
  body.node(cat).attrs["axis"] = one_int(0);
  body.add_output(c_out);
  body.add_output(acc_out);

  graph::Graph g;
  g.opsets[""] = 13;
  const auto m = g.add_value("m", DType::kInt64, DimList{});
  const auto cond = g.add_value("cond", DType::kBool, DimList{});
  const auto acc0 = g.add_value("acc0", DType::kFloat32);
  const auto x = g.add_value("x", DType::kFloat32);
  for (auto v : {m, cond, acc0, x}) g.add_input(v);
  const auto fin = g.add_value("fin");
  const auto same = g.add_value("same");
  const auto lp = g.add_node("Loop", "grow", {m, cond, acc0}, {fin});
  g.node(lp).attrs["body"] = graph_attr(std::move(body));
  g.add_node("Identity", "alias", {fin}, {same});
  g.add_output(fin);
  g.add_output(same);
  g.add_output(x);

  const int64_t width = 1024, trips = 24;
  const Tensor xv = random_tensor(Shape{1, width}, 5);
  const Tensor acc0v = random_tensor(Shape{1, width}, 6);
  auto outs = run_graph(g, {Tensor::scalar<int64_t>(trips), Tensor::scalar<bool>(true), acc0v, xv});
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  ASSERT_EQ(outs->size(), 3u);
  const Tensor& got = (*outs)[0];
  ASSERT_EQ(got.shape(), (Shape{trips + 1, width}));
  for (int64_t j = 0; j < width; ++j) EXPECT_EQ(got.data<float>()[j], acc0v.data<float>()[j]);
  for (int64_t r = 0; r < trips; ++r)
    for (int64_t j = 0; j < width; j += 97)
      EXPECT_FLOAT_EQ(got.data<float>()[(r + 1) * width + j], static_cast<float>(r) * xv.data<float>()[j]) << r;
  // Outputs sharing storage, or an input's, come back as copies of their own.
  const Tensor& alias = (*outs)[1];
  ASSERT_EQ(alias.shape(), got.shape());
  EXPECT_NE(alias.raw(), got.raw());
  EXPECT_EQ(std::memcmp(alias.raw(), got.raw(), got.nbytes()), 0);
  EXPECT_NE((*outs)[2].raw(), xv.raw());
  got.data<float>()[0] += 1.f;
  EXPECT_NE(alias.data<float>()[0], got.data<float>()[0]);
}

// A tensor a graph makes goes out as it is; a run of x -> Relu allocates the output (and a
// workspace), not a copy of it as well.
TEST(ControlFlow, SubgraphOutputsAreNotCopiedTwice) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{4096});
  g.add_input(x);
  const auto y = g.add_value("y");
  g.add_node("Relu", "relu", {x}, {y});
  g.add_output(y);
  SubgraphRunner runner(std::make_shared<const graph::Graph>(std::move(g)), {});
  const std::vector<AnyValue> in{AnyValue(random_tensor(Shape{4096}, 7))};
  ASSERT_TRUE(runner.run(in, {}).ok());  // kernels made on first use
  const int64_t before = allocation_stats().allocations.load();
  auto outs = runner.run(in, {});
  const int64_t allocated = allocation_stats().allocations.load() - before;
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  EXPECT_GE(allocated, 1);
  EXPECT_LE(allocated, 2) << "the output was copied";
  for (int64_t j = 0; j < 4096; ++j)
    EXPECT_EQ((*outs)[0].tensor().data<float>()[j], std::max(0.f, in[0].tensor().data<float>()[j]));
}

// Scan-9 summing rows of x[T, 2]: state s[2]; scan output s after each step.
graph::Graph scan_graph(int opset, std::vector<int64_t> in_dirs, std::vector<int64_t> out_axes) {
  graph::Graph body;
  body.opsets[""] = opset;
  const auto s_in = body.add_value("s_in", DType::kFloat32);
  const auto row = body.add_value("row", DType::kFloat32);
  body.add_input(s_in);
  body.add_input(row);
  const auto s_out = body.add_value("s_out");
  const auto rec = body.add_value("rec");
  body.add_node("Add", "add", {s_in, row}, {s_out});
  body.add_node("Identity", "rec", {s_out}, {rec});
  body.add_output(s_out);
  body.add_output(rec);

  graph::Graph g;
  g.opsets[""] = opset;
  const auto s0 = g.add_value("s0", DType::kFloat32);
  const auto x = g.add_value("x", DType::kFloat32);
  g.add_input(s0);
  g.add_input(x);
  const auto fin = g.add_value("fin");
  const auto ys = g.add_value("ys");
  std::vector<graph::ValueId> ins{s0, x};
  if (opset < 9) ins.insert(ins.begin(), graph::kNoValue);  // no sequence_lens
  const auto n = g.add_node("Scan", "scan0", ins, {fin, ys});
  g.node(n).attrs["body"] = graph_attr(std::move(body));
  g.node(n).attrs["num_scan_inputs"] = one_int(1);
  if (!in_dirs.empty()) g.node(n).attrs[opset < 9 ? "directions" : "scan_input_directions"] = ints(in_dirs);
  if (!out_axes.empty()) g.node(n).attrs["scan_output_axes"] = ints(out_axes);
  g.add_output(fin);
  g.add_output(ys);
  return g;
}

TEST(ControlFlow, ScanSumsRowsInEitherDirection) {
  const Tensor s0 = random_tensor(Shape{2}, 4), x = random_tensor(Shape{3, 2}, 5);
  for (bool reverse : {false, true}) {
    // Output axis 1: ys is [2, T] rather than [T, 2].
    auto outs = run_graph(scan_graph(11, {reverse ? 1 : 0}, {1}), {s0, x});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    const Tensor& fin = (*outs)[0];
    const Tensor& ys = (*outs)[1];
    ASSERT_EQ(ys.shape(), (Shape{2, 3}));
    float s[2] = {s0.data<float>()[0], s0.data<float>()[1]};
    for (int64_t t = 0; t < 3; ++t) {
      const int64_t row = reverse ? 2 - t : t;
      for (int64_t j = 0; j < 2; ++j) {
        s[j] += x.data<float>()[row * 2 + j];
        EXPECT_FLOAT_EQ(ys.data<float>()[j * 3 + t], s[j]) << reverse << " " << t << " " << j;
      }
    }
    EXPECT_FLOAT_EQ(fin.data<float>()[0], s[0]);
    EXPECT_FLOAT_EQ(fin.data<float>()[1], s[1]);
  }
}

TEST(ControlFlow, Scan8ScansEachBatchEntry) {
  const Tensor s0 = random_tensor(Shape{2, 2}, 6), x = random_tensor(Shape{2, 3, 2}, 7);
  auto outs = run_graph(scan_graph(8, {}, {}), {s0, x});
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  const Tensor& fin = (*outs)[0];
  const Tensor& ys = (*outs)[1];
  ASSERT_EQ(fin.shape(), (Shape{2, 2}));
  ASSERT_EQ(ys.shape(), (Shape{2, 3, 2}));
  for (int64_t b = 0; b < 2; ++b) {
    float s[2] = {s0.data<float>()[b * 2], s0.data<float>()[b * 2 + 1]};
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t j = 0; j < 2; ++j) {
        s[j] += x.data<float>()[(b * 3 + t) * 2 + j];
        EXPECT_FLOAT_EQ(ys.data<float>()[(b * 3 + t) * 2 + j], s[j]);
      }
    EXPECT_FLOAT_EQ(fin.data<float>()[b * 2], s[0]);
    EXPECT_FLOAT_EQ(fin.data<float>()[b * 2 + 1], s[1]);
  }
}

TEST(ControlFlow, UnsupportedBodyOpFailsAtCreate) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto cond = g.add_value("cond", DType::kBool, DimList{});
  g.add_input(cond);
  graph::Graph then_b;
  then_b.opsets[""] = 13;
  const auto t = then_b.add_value("t");
  then_b.add_node("NoSuchOp", "mystery", {}, {t});
  then_b.add_output(t);
  const auto y = g.add_value("y");
  const auto n = g.add_node("If", "if0", {cond}, {y});
  g.node(n).attrs["then_branch"] = graph_attr(std::move(then_b));
  g.node(n).attrs["else_branch"] = graph_attr(branch("Add", 1.f, 13));
  g.add_output(y);
  auto outs = run_graph(std::move(g), {Tensor::scalar<bool>(true)});
  ASSERT_FALSE(outs.ok());
  EXPECT_EQ(outs.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(outs.status().message().find("NoSuchOp"), std::string::npos) << outs.status().to_string();
}

}  // namespace
}  // namespace streamline::ops
