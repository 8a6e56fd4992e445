// Reduce* and ArgMax/ArgMin against the reference kernels on random shapes and axis sets.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

std::vector<int64_t> random_axes(std::mt19937& rng, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    if (rng() % 2) axes.push_back(rng() % 2 ? d : d - rank);  // mix positive and negative forms
  return axes;
}

TEST(Reduce, MatchesReferenceOnRandomAxes) {
  std::mt19937 rng(31337);
  const char* float_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
                             "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  int checked = 0;
  for (const char* op : float_ops) {
    const bool positive = std::string(op) == "ReduceLogSum";
    for (int trial = 0; trial < 24; ++trial) {
      const Shape s = trial % 4 == 0 ? random_shape(rng, 1, 3, 40) : random_shape(rng, 1, 5, 6);
      const auto axes = random_axes(rng, static_cast<int64_t>(s.rank()));
      Tensor x = random_tensor(DType::kFloat32, s, rng, positive ? 0.1 : -2, positive ? 2 : 2);
      if (std::string(op) == "ReduceProd") x = random_tensor(DType::kFloat32, s, rng, 0.8, 1.2);
      OpCase c{op, 11, {{"keepdims", one_int(trial % 2)}}};
      if (!axes.empty() || trial % 3 == 0) c.attrs["axes"] = ints(axes);
      EvalOptions opt;
      opt.num_threads = 1 + trial % 2;
      EXPECT_TRUE(match_reference(c, {x}, {1e-5, 1e-5}, opt));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 240);
}

TEST(Reduce, IntegerReductions) {
  std::mt19937 rng(4);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"}) {
    for (DType dt : {DType::kInt32, DType::kInt64}) {
      for (int trial = 0; trial < 10; ++trial) {
        const Shape s = random_shape(rng, 1, 4, 5);
        Tensor x = random_tensor(dt, s, rng, std::string(op) == "ReduceProd" ? -2 : -100,
                                 std::string(op) == "ReduceProd" ? 2 : 100);
        OpCase c{op, 11, {{"axes", ints(random_axes(rng, static_cast<int64_t>(s.rank())))}}};
        EXPECT_TRUE(match_reference(c, {x}));
      }
    }
  }
}

TEST(Reduce, ReduceSumAxesInputAndNoop) {
  std::mt19937 rng(12);
  Tensor x = random_tensor(DType::kFloat32, Shape{3, 4, 5}, rng);
  EvalOptions opt;
  opt.constant_mask = {false, true};
  EXPECT_TRUE(match_reference({"ReduceSum", 13}, {x, Tensor::from_vector<int64_t>(Shape{2}, {0, -1})}, {}, opt));
  EXPECT_TRUE(match_reference({"ReduceSum", 13, {{"keepdims", one_int(0)}}},
                              {x, Tensor::from_vector<int64_t>(Shape{1}, {1})}, {}, opt));
  // No axes: reduce everything, or nothing with noop_with_empty_axes.
  auto all = run_op(cpu_reg(), {"ReduceSum", 13}, {x});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[0].shape(), (Shape{1, 1, 1}));
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += x.data<float>()[i];
  EXPECT_NEAR((*all)[0].data<float>()[0], sum, 1e-4);
  auto noop = run_op(cpu_reg(), {"ReduceSum", 13, {{"noop_with_empty_axes", one_int(1)}}},
                     {x, Tensor::empty(DType::kInt64, Shape{0})}, opt);
  ASSERT_TRUE(noop.ok()) << noop.status().to_string();
  EXPECT_TRUE(tensors_near((*noop)[0], x, 0, 0));
  // Axes that are not constant cannot size the output.
  auto dynamic = run_op(cpu_reg(), {"ReduceSum", 13}, {x, Tensor::from_vector<int64_t>(Shape{1}, {1})});
  ASSERT_FALSE(dynamic.ok());
  EXPECT_EQ(dynamic.status().code(), StatusCode::kUnsupported);
  auto bad = run_op(cpu_reg(), {"ReduceMean", 13, {{"axes", ints({3})}}}, {x});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

// From opset 18 every Reduce* takes axes as input 1 (an attribute before); the same kernel serves
// both forms, chosen by the node's opset.
TEST(Reduce, Opset18AxesInput) {
  std::mt19937 rng(18);
  EvalOptions opt;
  opt.constant_mask = {false, true};
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSumExp", "ReduceSumSquare"}) {
    Tensor x = random_tensor(DType::kFloat32, Shape{3, 4, 5}, rng, 0.5, 1.5);
    const Tensor axes = Tensor::from_vector<int64_t>(Shape{2}, {0, -1});
    EXPECT_TRUE(match_reference({op, 18}, {x, axes}, {1e-5, 1e-5}, opt)) << op;
    auto got = run_op(cpu_reg(), {op, 18, {{"keepdims", one_int(0)}}}, {x, axes}, opt);
    auto want = run_op(cpu_reg(), {op, 13, {{"keepdims", one_int(0)}, {"axes", ints({0, 2})}}}, {x});
    ASSERT_TRUE(got.ok() && want.ok()) << op << ": " << got.status().to_string();
    EXPECT_EQ((*got)[0].shape(), (Shape{4}));
    EXPECT_TRUE(tensors_near((*got)[0], (*want)[0], 0, 0)) << op;
    auto noop = run_op(cpu_reg(), {op, 18, {{"noop_with_empty_axes", one_int(1)}}},
                       {x, Tensor::empty(DType::kInt64, Shape{0})}, opt);
    ASSERT_TRUE(noop.ok()) << op << ": " << noop.status().to_string();
    EXPECT_EQ((*noop)[0].shape(), x.shape());
  }
}

// ReduceMax/ReduceMin on bool (opset 20: any / all) and on 8-bit integers.
TEST(Reduce, MaxMinOfBoolAndBytes) {
  EvalOptions opt;
  opt.constant_mask = {false, true};
  const Tensor b = Tensor::from_vector<bool>(Shape{2, 3}, {true, false, false, true, true, true});
  const Tensor axis1 = Tensor::from_vector<int64_t>(Shape{1}, {1});
  auto any = run_op(cpu_reg(), {"ReduceMax", 20, {{"keepdims", one_int(0)}}}, {b, axis1}, opt);
  auto all = run_op(cpu_reg(), {"ReduceMin", 20, {{"keepdims", one_int(0)}}}, {b, axis1}, opt);
  ASSERT_TRUE(any.ok() && all.ok()) << any.status().to_string() << all.status().to_string();
  ASSERT_EQ((*any)[0].dtype(), DType::kBool);
  EXPECT_EQ((std::vector<uint8_t>{(*any)[0].data<uint8_t>()[0], (*any)[0].data<uint8_t>()[1]}),
            (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ((std::vector<uint8_t>{(*all)[0].data<uint8_t>()[0], (*all)[0].data<uint8_t>()[1]}),
            (std::vector<uint8_t>{0, 1}));
  const Tensor i8 = Tensor::from_vector<int8_t>(Shape{4}, {-5, 7, -128, 3});
  auto mx = run_op(cpu_reg(), {"ReduceMax", 13, {{"keepdims", one_int(0)}}}, {i8});
  auto mn = run_op(cpu_reg(), {"ReduceMin", 13, {{"keepdims", one_int(0)}}}, {i8});
  ASSERT_TRUE(mx.ok() && mn.ok());
  EXPECT_EQ((*mx)[0].data<int8_t>()[0], 7);
  EXPECT_EQ((*mn)[0].data<int8_t>()[0], -128);
}

TEST(Reduce, LargeReductionsAcrossThreads) {
  std::mt19937 rng(8);
  Tensor x = random_tensor(DType::kFloat32, Shape{4, 64, 16, 16}, rng);
  for (int threads : {1, 2}) {
    EvalOptions opt;
    opt.num_threads = threads;
    for (const auto& axes : std::vector<std::vector<int64_t>>{{2, 3}, {1}, {0, 2}, {0}, {3}}) {
      EXPECT_TRUE(match_reference({"ReduceMean", 13, {{"axes", ints(axes)}}}, {x}, {1e-5, 1e-4}, opt));
      EXPECT_TRUE(match_reference({"ReduceLogSumExp", 13, {{"axes", ints(axes)}}}, {x}, {1e-5, 1e-5}, opt));
      EXPECT_TRUE(match_reference({"ReduceMax", 13, {{"axes", ints(axes)}}}, {x}, {0, 0}, opt));
    }
  }
}

TEST(Reduce, ArgMaxArgMinMatchReference) {
  std::mt19937 rng(55);
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (DType dt : {DType::kFloat32, DType::kInt32, DType::kInt64}) {
      for (int trial = 0; trial < 16; ++trial) {
        const Shape s = trial % 4 == 0 ? random_shape(rng, 1, 2, 100) : random_shape(rng, 1, 4, 6);
        const int64_t rank = static_cast<int64_t>(s.rank());
        // Small integer ranges make ties common, which select_last_index must break.
        Tensor x = random_tensor(dt, s, rng, -3, 3);
        OpCase c{op,
                 13,
                 {{"axis", one_int(std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng))},
                  {"keepdims", one_int(trial % 2)},
                  {"select_last_index", one_int((trial / 2) % 2)}}};
        EvalOptions opt;
        opt.num_threads = 1 + trial % 2;
        EXPECT_TRUE(match_reference(c, {x}, {}, opt));
      }
    }
  }
  Tensor x = Tensor::from_vector<float>(Shape{2, 3}, {1.f, 5.f, 5.f, 7.f, 7.f, 0.f});
  auto first = run_op(cpu_reg(), {"ArgMax", 13, {{"axis", one_int(1)}}}, {x});
  auto last = run_op(cpu_reg(), {"ArgMax", 13, {{"axis", one_int(1)}, {"select_last_index", one_int(1)}}}, {x});
  ASSERT_TRUE(first.ok() && last.ok());
  EXPECT_EQ((*first)[0].shape(), (Shape{2, 1}));
  EXPECT_EQ((*first)[0].data<int64_t>()[0], 1);
  EXPECT_EQ((*first)[0].data<int64_t>()[1], 0);
  EXPECT_EQ((*last)[0].data<int64_t>()[0], 2);
  EXPECT_EQ((*last)[0].data<int64_t>()[1], 1);
}

}  // namespace
}  // namespace streamline::ops::testing
