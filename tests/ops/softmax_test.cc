// Softmax, LogSoftmax and Hardmax against the reference kernels, and the opset 11 vs 13 axis rules.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

TEST(Softmax, MatchesReferenceOnRandomShapesAndAxes) {
  std::mt19937 rng(2024);
  int checked = 0;
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (int opset : {11, 13}) {
      for (int trial = 0; trial < 20; ++trial) {
        const Shape s = trial % 3 == 0 ? random_shape(rng, 1, 2, 200) : random_shape(rng, 1, 4, 7);
        const int64_t rank = static_cast<int64_t>(s.rank());
        const int64_t axis = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
        Tensor x = random_tensor(DType::kFloat32, s, rng, -20, 20);
        OpCase c{op, opset, {{"axis", one_int(axis)}}};
        EvalOptions opt;
        opt.num_threads = 1 + trial % 2;
        EXPECT_TRUE(match_reference(c, {x}, {1e-6, 1e-5}, opt));
        if (rank >= 2 || opset >= 13) {  // the default axis 1 needs rank 2 before opset 13
          EXPECT_TRUE(match_reference({op, opset}, {x}, {1e-6, 1e-5}, opt));
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 120);
}

TEST(Softmax, LargeInputsAcrossThreads) {
  std::mt19937 rng(6);
  Tensor rows = random_tensor(DType::kFloat32, Shape{64, 1000}, rng, -50, 50);
  Tensor cols = random_tensor(DType::kFloat32, Shape{4, 300, 130}, rng, -50, 50);
  for (int threads : {1, 2}) {
    EvalOptions opt;
    opt.num_threads = threads;
    for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
      EXPECT_TRUE(match_reference({op, 13}, {rows}, {1e-6, 1e-5}, opt));
      EXPECT_TRUE(match_reference({op, 13, {{"axis", one_int(1)}}}, {cols}, {1e-6, 1e-5}, opt));
    }
  }
}

TEST(Softmax, Opset11FlattensWhileOpset13UsesOneAxis) {
  // x = [[[0, 1], [2, 3]]], axis = 1.
  Tensor x = Tensor::from_vector<float>(Shape{1, 2, 2}, {0.f, 1.f, 2.f, 3.f});
  auto old = run_op(cpu_reg(), {"Softmax", 11, {{"axis", one_int(1)}}}, {x});
  auto now = run_op(cpu_reg(), {"Softmax", 13, {{"axis", one_int(1)}}}, {x});
  ASSERT_TRUE(old.ok() && now.ok());
  // Opset 11: one row of four values.
  const double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR((*old)[0].data<float>()[i], std::exp(i) / z, 1e-6);
  // Opset 13: columns {0, 2} and {1, 3} each normalised.
  const double p = 1 / (1 + std::exp(2.0));
  EXPECT_NEAR((*now)[0].data<float>()[0], p, 1e-6);
  EXPECT_NEAR((*now)[0].data<float>()[2], 1 - p, 1e-6);
  EXPECT_NEAR((*now)[0].data<float>()[1], p, 1e-6);
  EXPECT_NEAR((*now)[0].data<float>()[3], 1 - p, 1e-6);
  // Default axes: 1 before opset 13 (same as above), -1 from 13.
  auto def13 = run_op(cpu_reg(), {"Softmax", 13}, {x});
  ASSERT_TRUE(def13.ok());
  const double q = 1 / (1 + std::exp(1.0));
  EXPECT_NEAR((*def13)[0].data<float>()[0], q, 1e-6);
  EXPECT_NEAR((*def13)[0].data<float>()[1], 1 - q, 1e-6);
}

TEST(Softmax, StableForLargeValuesAndHardmaxTakesFirstMax) {
  Tensor x = Tensor::from_vector<float>(Shape{1, 4}, {1000.f, 1000.f, -1000.f, 999.f});
  auto sm = run_op(cpu_reg(), {"Softmax", 13}, {x});
  ASSERT_TRUE(sm.ok());
  const double z = 2 + std::exp(-1.0);
  EXPECT_NEAR((*sm)[0].data<float>()[0], 1 / z, 1e-6);
  EXPECT_EQ((*sm)[0].data<float>()[2], 0.f);
  auto ls = run_op(cpu_reg(), {"LogSoftmax", 13}, {x});
  ASSERT_TRUE(ls.ok());
  EXPECT_NEAR((*ls)[0].data<float>()[3], -1 - std::log(z), 1e-4);
  auto hm = run_op(cpu_reg(), {"Hardmax", 13}, {x});
  ASSERT_TRUE(hm.ok());
  EXPECT_EQ((*hm)[0].data<float>()[0], 1.f);
  EXPECT_EQ((*hm)[0].data<float>()[1], 0.f);
}

TEST(Softmax, BadAxisIsInvalidAndIntegerInputUnsupported) {
  Tensor x = Tensor::empty(DType::kFloat32, Shape{2, 3});
  auto bad = run_op(cpu_reg(), {"Softmax", 13, {{"axis", one_int(2)}}}, {x});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto ints = run_op(cpu_reg(), {"Softmax", 13}, {Tensor::empty(DType::kInt32, Shape{2})});
  ASSERT_FALSE(ints.ok());
  EXPECT_EQ(ints.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace streamline::ops::testing
