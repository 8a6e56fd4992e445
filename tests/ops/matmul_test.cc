// Gemm, FusedGemm, MatMul and FusedMatMul: the oneDNN kernels against the reference kernels on
// random shapes (fixed seed), plus shape rules and error paths.

#include <cmath>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using namespace testing;

graph::Attribute one_float(float v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kFloat;
  a.f = v;
  return a;
}

TEST(GemmOp, AllTransposeScaleAndBroadcastCombinations) {
  std::mt19937 rng(17);
  const int64_t m = 5, k = 7, n = 6;
  const std::vector<Shape> c_shapes{{}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}};
  int iter = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& [alpha, beta] :
           std::vector<std::pair<float, float>>{{1.f, 1.f}, {0.5f, 2.f}, {-1.5f, 0.f}, {0.f, 1.5f}})
        for (size_t ci = 0; ci <= c_shapes.size(); ++ci, ++iter) {
          Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng);
          Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng);
          std::vector<Tensor> in{a, b};
          if (ci < c_shapes.size()) in.push_back(random_tensor(c_shapes[ci], rng));
          std::map<std::string, graph::Attribute> attrs{
              {"transA", one_int(ta)}, {"transB", one_int(tb)}, {"alpha", one_float(alpha)}, {"beta", one_float(beta)}};
          RunOpts o;
          o.threads = 1 + iter % 2;
          // Vary which of B and C are constants (prepacked B, bias computed at reshape or run).
          o.constant_mask = {false, iter % 2 == 0, iter % 3 == 0};
          SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " alpha " +
                       std::to_string(alpha) + " beta " + std::to_string(beta) + " C " +
                       (ci < c_shapes.size() ? c_shapes[ci].to_string() : "none"));
          compare("Gemm", "", in, attrs, o);
        }
}

TEST(GemmOp, FusedActivationsAndLargerShapes) {
  std::mt19937 rng(23);
  const std::vector<std::pair<std::string, std::vector<float>>> acts{
      {"Relu", {}},    {"Clip", {-0.5f, 0.5f}},       {"LeakyRelu", {0.1f}},
      {"Sigmoid", {}}, {"HardSigmoid", {0.2f, 0.5f}}, {"Tanh", {}}};
  for (const auto& [act, params] : acts) {
    Tensor a = random_tensor({33, 70}, rng);
    Tensor b = random_tensor({65, 70}, rng);
    Tensor c = random_tensor({65}, rng);
    std::map<std::string, graph::Attribute> attrs{{"transB", one_int(1)}, {"activation", str(act)}};
    if (!params.empty()) attrs["activation_params"] = floats(params);
    SCOPED_TRACE(act);
    RunOpts o;
    o.threads = 2;
    compare("FusedGemm", "streamline", {a, b, c}, attrs, o);
    // A full-size C goes through the sum post-op.
    compare("FusedGemm", "streamline", {a, b, random_tensor({33, 65}, rng)}, attrs, o);
  }
}

TEST(MatMulOp, NumpyShapesMatchReference) {
  std::mt19937 rng(31);
  struct Case {
    Shape a, b, y;
  };
  const std::vector<Case> cases{
      {{4}, {4}, {}},
      {{4}, {4, 3}, {3}},
      {{2, 4}, {4}, {2}},
      {{5, 4}, {4, 3}, {5, 3}},
      {{2, 3, 5, 4}, {4, 6}, {2, 3, 5, 6}},
      {{2, 5, 4}, {2, 4, 6}, {2, 5, 6}},
      {{2, 1, 5, 4}, {3, 4, 6}, {2, 3, 5, 6}},
      {{5, 4}, {3, 4, 6}, {3, 5, 6}},
      {{1, 5, 4}, {1, 1, 4, 6}, {1, 1, 5, 6}},
      {{3, 5, 4}, {4}, {3, 5}},
      {{4}, {2, 4, 3}, {2, 3}},
  };
  int iter = 0;
  for (const auto& c : cases) {
    for (bool b_const : {true, false}) {
      Tensor a = random_tensor(c.a, rng);
      Tensor b = random_tensor(c.b, rng);
      RunOpts o;
      o.const_weights = b_const;
      o.threads = 1 + (iter++ % 2);
      SCOPED_TRACE(c.a.to_string() + " x " + c.b.to_string());
      compare("MatMul", "", {a, b}, {}, o);
      auto n = make_node("MatMul", "", {a, b}, {});
      auto y = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{a, b});
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      EXPECT_EQ((*y)[0].shape(), c.y);
    }
  }
}

TEST(MatMulOp, FusedBiasAndActivation) {
  std::mt19937 rng(37);
  for (const char* act : {"", "Relu", "Tanh"}) {
    for (const auto& [as, bs] : std::vector<std::pair<Shape, Shape>>{
             {{2, 9, 16}, {16, 24}}, {{9, 16}, {16, 24}}, {{2, 9, 16}, {2, 16, 24}}, {{16}, {16, 24}}}) {
      Tensor a = random_tensor(as, rng);
      Tensor b = random_tensor(bs, rng);
      Tensor bias = random_tensor({24}, rng);
      SCOPED_TRACE(std::string(act) + " " + as.to_string() + " x " + bs.to_string());
      compare("FusedMatMul", "streamline", {a, b, bias}, {{"activation", str(act)}});
      RunOpts o;
      o.constant_mask = {false, false, false};
      compare("FusedMatMul", "streamline", {a, b, bias}, {{"activation", str(act)}}, o);
    }
  }
}

// Declared shapes with a symbolic batch: B is prepacked at create, then run with batch 4.
TEST(MatMulOp, PrepackedWeightsWithSymbolicBatch) {
  std::mt19937 rng(41);
  Tensor a = random_tensor({4, 10, 64}, rng);
  Tensor b = random_tensor({64, 48}, rng);
  RunOpts o;
  o.symbolic_x = true;
  compare("MatMul", "", {a, b}, {}, o);
  Tensor ga = random_tensor({4, 64}, rng);
  compare("Gemm", "", {ga, random_tensor({48, 64}, rng), random_tensor({48}, rng)}, {{"transB", one_int(1)}}, o);
}

// At most four rows against constant weights run on the matrix-vector loops: weights read as
// Gemm's transB gives them, or from a transposed copy; K and N with every tail (K not a multiple
// of 16, N not of 4, 16 or 64); activations; one thread and columns shared by two.
TEST(MatMulOp, MatrixVectorPathMatchesReference) {
  std::mt19937 rng(43);
  const std::vector<std::pair<std::string, std::vector<float>>> acts{{"", {}},
                                                                     {"Relu", {}},
                                                                     {"LeakyRelu", {0.1f}},
                                                                     {"Clip", {-0.5f, 0.5f}},
                                                                     {"Sigmoid", {}},
                                                                     {"HardSigmoid", {0.2f, 0.5f}},
                                                                     {"Tanh", {}},
                                                                     {"Gelu", {}}};
  int iter = 0;
  for (int64_t rows : {1, 2, 3, 4}) {
    for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{{37, 21}, {300, 517}, {64, 1000}}) {
      const auto& [act, params] = acts[static_cast<size_t>(iter++) % acts.size()];
      RunOpts o;
      o.threads = 1 + iter % 2;
      SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k) + " n " + std::to_string(n) + " " + act +
                   " threads " + std::to_string(o.threads));
      std::map<std::string, graph::Attribute> attrs{{"activation", str(act)}};
      if (!params.empty()) attrs["activation_params"] = floats(params);
      if (act == "Gelu") {
        // The reference kernels have no Gelu activation: the product, then erf's GELU in double.
        const std::vector<Tensor> in{random_tensor({rows, k}, rng), random_tensor({k, n}, rng),
                                     random_tensor({n}, rng)};
        auto gelu = make_node("FusedMatMul", "streamline", in, attrs);
        EvalOptions eo;
        eo.num_threads = o.threads;
        eo.constant_mask = {false, true, true};
        auto got = evaluate_node(cpu_reg(), gelu->g, gelu->node(), in, eo);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        auto plain = make_node("FusedMatMul", "streamline", in, {});
        auto want = evaluate_node(ref_reg(), plain->g, plain->node(), in);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        float* w = (*want)[0].data<float>();
        for (int64_t i = 0; i < (*want)[0].numel(); ++i) {
          const double v = w[i];
          w[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
        }
        expect_close((*got)[0], (*want)[0]);
      } else {
        attrs["transB"] = one_int(1);
        attrs["alpha"] = one_float(0.75f);
        compare("FusedGemm", "streamline",
                {random_tensor({rows, k}, rng), random_tensor({n, k}, rng), random_tensor({n}, rng)}, attrs, o);
        attrs["transB"] = one_int(0);
        compare("FusedGemm", "streamline",
                {random_tensor({rows, k}, rng), random_tensor({k, n}, rng), random_tensor({1, n}, rng)}, attrs, o);
      }
      compare("MatMul", "", {random_tensor({1, rows, k}, rng), random_tensor({k, n}, rng)}, {}, o);
      // A transposed single row is dense too.
      if (rows == 1)
        compare("Gemm", "", {random_tensor({k, 1}, rng), random_tensor({n, k}, rng)},
                {{"transA", one_int(1)}, {"transB", one_int(1)}}, o);
    }
  }
}

// Zero rows (a detector's second stage when the first proposes no box): the output is empty, with
// and without prepacked weights, bias, activation or epilogue; nothing reads missing state.
TEST(MatMulOp, ZeroRowsGiveEmptyOutputs) {
  std::mt19937 rng(41);
  const int64_t k = 12, n = 9;
  for (bool const_b : {true, false})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(const_b ? "constant" : "computed") + " B, threads " + std::to_string(threads));
      RunOpts o;
      o.threads = threads;
      o.const_weights = const_b;
      o.constant_mask = {false, const_b, true};
      Tensor a = random_tensor({0, k}, rng);
      Tensor bt = random_tensor({n, k}, rng);
      Tensor c = random_tensor({n}, rng);
      compare("Gemm", "", {a, bt, c}, {{"transB", one_int(1)}}, o);
      compare("FusedGemm", "streamline", {a, bt, c}, {{"transB", one_int(1)}, {"activation", str("Relu")}}, o);
      compare("MatMul", "", {a, random_tensor({k, n}, rng)}, {}, o);
      compare("MatMul", "", {random_tensor({3, 0, k}, rng), random_tensor({k, n}, rng)}, {}, o);
      compare("FusedMatMul", "streamline", {a, random_tensor({k, n}, rng), c}, {{"activation", str("Sigmoid")}}, o);
    }
}

TEST(MatMulOp, BadShapesAreErrors) {
  std::mt19937 rng(43);
  auto status_of = [&](const std::string& op, const std::vector<Tensor>& in,
                       std::map<std::string, graph::Attribute> attrs) {
    auto n = make_node(op, "", in, std::move(attrs));
    auto r = evaluate_node(cpu_reg(), n->g, n->node(), in);
    return r.ok() ? ok_status() : r.status();
  };
  EXPECT_EQ(status_of("MatMul", {random_tensor({3, 4}, rng), random_tensor({5, 6}, rng)}, {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of("MatMul", {random_tensor({2, 3, 4}, rng), random_tensor({3, 4, 6}, rng)}, {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of("Gemm", {random_tensor({3, 4}, rng), random_tensor({4, 6}, rng), random_tensor({2, 6}, rng)}, {})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of("Gemm", {random_tensor({2, 3, 4}, rng), random_tensor({4, 6}, rng)}, {}).code(),
            StatusCode::kInvalidArgument);
}

// Gemm whose C has the output's shape may share the output buffer.
TEST(GemmOp, InPlaceC) {
  std::mt19937 rng(47);
  Tensor a = random_tensor({6, 8}, rng), b = random_tensor({8, 5}, rng), c = random_tensor({6, 5}, rng);
  std::map<std::string, graph::Attribute> attrs{{"alpha", one_float(0.5f)}, {"beta", one_float(2.f)}};
  auto n = make_node("Gemm", "", {a, b, c}, attrs);
  auto want = evaluate_node(ref_reg(), n->g, n->node(), std::vector<Tensor>{a, b, c});
  ASSERT_TRUE(want.ok());
  auto def = cpu_reg().find("Gemm", "", 13, Device::kCpu, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  KernelCreateArgs args{n->g, n->node(), {nullptr, &b, nullptr}, std::vector<DType>(3, DType::kFloat32), {}};
  auto kernel = (*def)->create(args);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  std::vector<TensorInfo> infos(3);
  const Tensor* ts[] = {&a, &b, &c};
  for (int i = 0; i < 3; ++i) {
    infos[i].dtype = DType::kFloat32;
    infos[i].shape = ts[i]->shape();
    infos[i].value = i == 1 ? ts[i] : nullptr;
  }
  auto rr = (*kernel)->reshape(infos);
  ASSERT_TRUE(rr.ok()) << rr.status().to_string();
  ASSERT_EQ(rr->inplace.size(), 1u);
  EXPECT_EQ(rr->inplace[0], 2);
  auto ws = AlignedBuffer::allocate(rr->workspace_bytes);
  Tensor cy = c.clone();
  std::vector<Tensor> ins{a, b, cy};
  std::vector<Tensor> outs{cy};
  RunContext rc{ins, outs, ws ? ws->data() : nullptr, rr->state.get(), 1};
  ASSERT_TRUE((*kernel)->run(rc).ok());
  expect_close(cy, (*want)[0]);
}

}  // namespace
}  // namespace streamline::ops
