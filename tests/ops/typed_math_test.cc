// Elementwise arithmetic, comparisons, unary math, Clip and reductions for the extra dtypes (int8
// ... uint64, float16, bfloat16, float64): the CPU kernels against the reference on random
// broadcast shapes (fixed seed).

#include "ops/cpu/extra_common.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

constexpr DType kInts[] = {DType::kInt8, DType::kInt16, DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};
constexpr DType kFloats[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat64};

// Values in [lo, hi] (integers) or [lo, hi) (floats), stored in `dt`.
Tensor values_of(DType dt, const Shape& s, std::mt19937& rng, double lo, double hi) {
  Tensor t = Tensor::empty(dt, s);
  for (int64_t k = 0; k < t.numel(); ++k) {
    double v = std::uniform_real_distribution<double>(lo, hi)(rng);
    if (!cpu::is_float_dtype(dt)) v = std::floor(v);
    cpu::store_f(dt, t.raw(), k, v);
  }
  return t;
}

Shape broadcastable(const Shape& s, std::mt19937& rng) {
  Shape b;
  const size_t drop = std::uniform_int_distribution<size_t>(0, s.rank())(rng);
  for (size_t k = drop; k < s.rank(); ++k) b.push_back(rng() % 3 == 0 ? 1 : s[k]);
  return b;
}

TEST(TypedMath, BinaryOpsMatchReference) {
  std::mt19937 rng(501);
  const char* ops[] = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min"};
  int iter = 0;
  for (const char* op : ops) {
    for (DType dt : kInts) {
      const Shape s = random_shape(rng, 1, 4, 4);
      const bool is_signed = dt == DType::kInt8 || dt == DType::kInt16;
      const double lo = is_signed ? -100 : 0, hi = is_signed ? 100 : 250;
      Tensor a = values_of(dt, s, rng, lo, hi), b = values_of(dt, broadcastable(s, rng), rng, lo, hi);
      NodeCase nc(op, 13, 2);
      if (std::string(op) == "Mod") nc.i("fmod", iter++ % 2);
      expect_cpu_matches_reference(nc, {a, b}, 0.0, std::string(op) + " " + dtype_name(dt));
    }
    for (DType dt : kFloats) {
      const Shape s = random_shape(rng, 1, 4, 4);
      Tensor a = values_of(dt, s, rng, -8, 8), b = values_of(dt, broadcastable(s, rng), rng, 0.5, 4);
      NodeCase nc(op, 13, 2);
      if (std::string(op) == "Mod") nc.i("fmod", 1);
      expect_cpu_matches_reference(nc, {a, b}, dt == DType::kFloat64 ? 1e-12 : 1e-2,
                                   std::string(op) + " " + dtype_name(dt));
    }
  }
}

TEST(TypedMath, VariadicOpsMatchReference) {
  std::mt19937 rng(502);
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    for (DType dt : kFloats) {
      const Shape s = random_shape(rng, 1, 3, 4);
      std::vector<Tensor> in;
      const int n = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int k = 0; k < n; ++k) in.push_back(values_of(dt, k == 0 ? s : broadcastable(s, rng), rng, -4, 4));
      NodeCase nc(op, 13, in.size());
      expect_cpu_matches_reference(nc, in, dt == DType::kFloat64 ? 1e-12 : 1e-2,
                                   std::string(op) + " " + dtype_name(dt));
    }
  }
}

TEST(TypedMath, IntegerAddWrapsAndDivisionByZeroIsZero) {
  Tensor a = Tensor::from_vector<uint8_t>(Shape{3}, {250, 7, 9});
  Tensor b = Tensor::from_vector<uint8_t>(Shape{3}, {10, 0, 2});
  NodeCase add("Add", 14, 2), div("Div", 14, 2);
  auto s = add.run(cpu_reg(), {a, b});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)[0].data<uint8_t>()[0], 4);
  auto q = div.run(cpu_reg(), {a, b});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ((*q)[0].data<uint8_t>()[1], 0);
  EXPECT_EQ((*q)[0].data<uint8_t>()[2], 4);
}

TEST(TypedMath, ClipMatchesReference) {
  std::mt19937 rng(503);
  for (DType dt : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kUInt32, DType::kFloat16, DType::kFloat64}) {
    Tensor x = values_of(dt, random_shape(rng, 1, 3, 5), rng, 0, 100);
    Tensor lo = values_of(dt, Shape{}, rng, 10, 30), hi = values_of(dt, Shape{}, rng, 60, 90);
    NodeCase both("Clip", 13, 3), only_hi("Clip", 13, 3, 1, {true, false, true});
    expect_cpu_matches_reference(both, {x, lo, hi}, 0.0, std::string("Clip ") + dtype_name(dt));
    expect_cpu_matches_reference(only_hi, {x, Tensor(), hi}, 0.0, std::string("Clip max ") + dtype_name(dt));
  }
}

TEST(TypedMath, ReductionsMatchReference) {
  std::mt19937 rng(504);
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
                       "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  int iter = 0;
  for (const char* op : ops) {
    for (DType dt : kFloats) {
      const Shape s = random_shape(rng, 1, 4, 4);
      const int64_t rank = static_cast<int64_t>(s.rank());
      std::vector<int64_t> axes;
      for (int64_t d = 0; d < rank; ++d)
        if (rng() % 2) axes.push_back(rng() % 2 ? d : d - rank);
      Tensor x = values_of(dt, s, rng, 0.25, 2);
      const bool sum = std::string(op) == "ReduceSum";
      NodeCase nc(op, 13, sum ? 2 : 1);
      nc.i("keepdims", iter++ % 2);
      if (!sum && !axes.empty()) nc.ints("axes", axes);
      const std::vector<Tensor> in = sum ? std::vector<Tensor>{x, i64(axes)} : std::vector<Tensor>{x};
      const std::vector<bool> constant = sum ? std::vector<bool>{false, true} : std::vector<bool>{false};
      expect_cpu_matches_reference(nc, in, dt == DType::kFloat64 ? 1e-12 : 2e-2,
                                   std::string(op) + " " + dtype_name(dt) + " " + s.to_string(), 1, constant);
    }
  }
}

TEST(TypedMath, ComparisonsMatchReference) {
  std::mt19937 rng(505);
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    for (DType dt : {DType::kInt8, DType::kInt16, DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64,
                     DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      const Shape s = random_shape(rng, 1, 4, 4);
      // A small range makes equal pairs common.
      Tensor a = values_of(dt, s, rng, 0, 4), b = values_of(dt, broadcastable(s, rng), rng, 0, 4);
      NodeCase nc(op, 13, 2);
      expect_cpu_matches_reference(nc, {a, b}, 0.0, std::string(op) + " " + dtype_name(dt));
    }
  }
}

TEST(TypedMath, UnaryOpsMatchReference) {
  std::mt19937 rng(506);
  const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Softplus", "Exp", "Log", "Sqrt", "Neg", "Abs",
                       "Sign", "Floor",   "Ceil", "Round",    "Sin", "Cos", "Atan", "Erf", "Reciprocal"};
  for (const char* op : ops) {
    for (DType dt : kFloats) {
      const std::string name(op);
      const bool positive = name == "Log" || name == "Sqrt" || name == "Reciprocal";
      Tensor x = values_of(dt, random_shape(rng, 1, 3, 5), rng, positive ? 0.25 : -3, 3);
      expect_cpu_matches_reference(NodeCase(op, 13, 1), {x}, dt == DType::kFloat64 ? 1e-12 : 2e-2,
                                   name + " " + dtype_name(dt));
    }
  }
}

TEST(TypedMath, IsNaNAndIsInfOfHalfAndDouble) {
  for (DType dt : kFloats) {
    Tensor x = Tensor::empty(dt, Shape{4});
    const double v[] = {1.0, INFINITY, -INFINITY, NAN};
    for (int i = 0; i < 4; ++i) cpu::store_f(dt, x.raw(), i, v[i]);
    NodeCase nan("IsNaN", 20, 1), inf("IsInf", 20, 1), neg("IsInf", 20, 1);
    neg.i("detect_positive", 0);
    auto a = nan.run(cpu_reg(), {x});
    auto b = inf.run(cpu_reg(), {x});
    auto c = neg.run(cpu_reg(), {x});
    ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << dtype_name(dt) << ": " << a.status().to_string();
    const auto bits = [](const Tensor& t) {
      return std::vector<uint8_t>(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
    };
    EXPECT_EQ(bits((*a)[0]), (std::vector<uint8_t>{0, 0, 0, 1})) << dtype_name(dt);
    EXPECT_EQ(bits((*b)[0]), (std::vector<uint8_t>{0, 1, 1, 0})) << dtype_name(dt);
    EXPECT_EQ(bits((*c)[0]), (std::vector<uint8_t>{0, 0, 1, 0})) << dtype_name(dt);
  }
}

// Gelu (opset 20): the erf form and the tanh approximation, float32 and float64.
TEST(TypedMath, GeluBothForms) {
  std::mt19937 rng(507);
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    Tensor x = values_of(dt, Shape{257}, rng, -5, 5);
    for (const char* approx : {"none", "tanh"}) {
      NodeCase nc("Gelu", 20, 1);
      nc.s("approximate", approx);
      auto y = nc.run(cpu_reg(), {x});
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = cpu::load_f(dt, x.raw(), i);
        const double want = std::string(approx) == "tanh"
                                ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                                : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        EXPECT_NEAR(cpu::load_f(dt, (*y)[0].raw(), i), want, dt == DType::kFloat64 ? 1e-12 : 2e-6)
            << approx << " " << dtype_name(dt) << " at " << v;
      }
    }
  }
  NodeCase bad("Gelu", 20, 1);
  bad.s("approximate", "fast");
  EXPECT_FALSE(bad.run(cpu_reg(), {values_of(DType::kFloat32, Shape{2}, rng, -1, 1)}).ok());
}

// MatMul and Softmax/LogSoftmax for float64/float16 and integers agree with the float32 kernels on
// the same (exactly representable) values, with broadcast batches and 1-D operands.
TEST(TypedMath, MatMulAndSoftmaxOfOtherDtypes) {
  std::mt19937 rng(508);
  const std::vector<std::pair<Shape, Shape>> shapes = {{Shape{3, 4}, Shape{4, 5}},
                                                       {Shape{2, 1, 3, 4}, Shape{3, 4, 2}},
                                                       {Shape{4}, Shape{2, 4, 3}},
                                                       {Shape{2, 3, 4}, Shape{4}}};
  for (const auto& [as, bs] : shapes) {
    const Tensor a32 = values_of(DType::kFloat32, as, rng, -4, 4), b32 = values_of(DType::kFloat32, bs, rng, -4, 4);
    Tensor a = Tensor::empty(DType::kFloat32, as), b = Tensor::empty(DType::kFloat32, bs);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = std::round(a32.data<float>()[i]);
    for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = std::round(b32.data<float>()[i]);
    auto want = NodeCase("MatMul", 13, 2).run(cpu_reg(), {a, b});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    for (DType dt : {DType::kFloat64, DType::kFloat16, DType::kInt32, DType::kInt64}) {
      Tensor ad = Tensor::empty(dt, as), bd = Tensor::empty(dt, bs);
      for (int64_t i = 0; i < a.numel(); ++i) cpu::store_f(dt, ad.raw(), i, a.data<float>()[i]);
      for (int64_t i = 0; i < b.numel(); ++i) cpu::store_f(dt, bd.raw(), i, b.data<float>()[i]);
      auto got = NodeCase("MatMul", 13, 2).run(cpu_reg(), {ad, bd});
      ASSERT_TRUE(got.ok()) << dtype_name(dt) << ": " << got.status().to_string();
      ASSERT_EQ((*got)[0].shape(), (*want)[0].shape()) << dtype_name(dt);
      for (int64_t i = 0; i < (*want)[0].numel(); ++i)
        EXPECT_EQ(cpu::load_f(dt, (*got)[0].raw(), i), (*want)[0].data<float>()[i]) << dtype_name(dt) << " " << i;
    }
  }
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {0, 1, -1}) {
      const Tensor x = values_of(DType::kFloat32, Shape{3, 4, 5}, rng, -3, 3);
      Tensor xd = Tensor::empty(DType::kFloat64, x.shape());
      for (int64_t i = 0; i < x.numel(); ++i) xd.data<double>()[i] = x.data<float>()[i];
      NodeCase nc(op, 13, 1);
      nc.i("axis", axis);
      auto want = nc.run(cpu_reg(), {x});
      auto got = nc.run(cpu_reg(), {xd});
      ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
      for (int64_t i = 0; i < x.numel(); ++i)
        EXPECT_NEAR((*got)[0].data<double>()[i], (*want)[0].data<float>()[i], 1e-5) << op << " axis " << axis;
    }
  }
}

}  // namespace
}  // namespace streamline::ops::testing
