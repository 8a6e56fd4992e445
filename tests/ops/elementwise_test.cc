// Elementwise kernels: the vectorised math helpers against libm, every binary/unary op against the
// reference kernels on random (broadcasting) shapes, both layouts and 1/2 threads, plus hand-checked
// cases and error paths.

#include <cstring>

#include "ops/cpu/math_vec.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

namespace vec = cpu::vec;

// Error of `got` in units in the last place of the float nearest to `want`.
double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e30;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : 1e30;
  const float wf = static_cast<float>(want);
  double ulp = std::fabs(static_cast<double>(std::nextafter(wf, INFINITY)) - wf);
  if (std::fabs(wf) < 1.17549435e-38f || ulp == 0) ulp = 1.4e-45;
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

template <typename F, typename G>
double max_ulp(F f, G g, float lo, float hi) {
  double worst = 0;
  for (uint64_t b = 0; b < 0x100000000ull; b += 4099) {
    const auto bits = static_cast<uint32_t>(b);
    float x;
    std::memcpy(&x, &bits, 4);
    if (!(x >= lo && x <= hi)) continue;
    worst = std::max(worst, ulp_error(f(x), g(static_cast<double>(x))));
  }
  return worst;
}

TEST(VecMath, AccuracyAgainstLibm) {
  EXPECT_LE(max_ulp(
                vec::exp, [](double x) { return std::exp(x); }, -200, 200),
            2.0);
  EXPECT_LE(max_ulp(
                vec::log, [](double x) { return std::log(x); }, 0, INFINITY),
            2.0);
  EXPECT_LE(max_ulp(
                vec::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -200, 200),
            3.0);
  EXPECT_LE(max_ulp(
                vec::tanh, [](double x) { return std::tanh(x); }, -50, 50),
            3.0);
  EXPECT_LE(max_ulp(
                vec::erf, [](double x) { return std::erf(x); }, -10, 10),
            3.0);
  EXPECT_LE(max_ulp(
                vec::expm1, [](double x) { return std::expm1(x); }, -100, 80),
            5.0);
  EXPECT_LE(max_ulp(
                vec::softplus, [](double x) { return std::log1p(std::exp(x)); }, -80, 100),
            5.0);
  EXPECT_LE(max_ulp(
                vec::mish, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, -80, 100),
            5.0);
}

TEST(VecMath, SpecialValues) {
  const float inf = INFINITY, nan = NAN;
  EXPECT_EQ(vec::exp(inf), inf);
  EXPECT_EQ(vec::exp(-inf), 0.f);
  EXPECT_TRUE(std::isnan(vec::exp(nan)));
  EXPECT_EQ(vec::exp(0.f), 1.f);
  EXPECT_EQ(vec::log(0.f), -inf);
  EXPECT_TRUE(std::isnan(vec::log(-1.f)));
  EXPECT_EQ(vec::log(inf), inf);
  EXPECT_EQ(vec::log(1.f), 0.f);
  EXPECT_EQ(vec::tanh(inf), 1.f);
  EXPECT_EQ(vec::tanh(-inf), -1.f);
  EXPECT_TRUE(std::isnan(vec::tanh(nan)));
  EXPECT_EQ(vec::erf(-inf), -1.f);
  EXPECT_TRUE(std::isnan(vec::erf(nan)));
  EXPECT_EQ(vec::sigmoid(-inf), 0.f);
  EXPECT_EQ(vec::sigmoid(inf), 1.f);
  float x[37], y[37];
  for (int i = 0; i < 37; ++i) x[i] = static_cast<float>(i * i);
  vec::sqrt_array(x, y, 37);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(y[i], static_cast<float>(i));
  EXPECT_EQ(vec::reduce_max(x, 37), 36.f * 36.f);
  EXPECT_EQ(vec::reduce_sum(x, 37), 16206.f);
}

// The softmax exponentials: e^x where that is a normal float, exactly 0 below (subnormals cost a
// microcode assist each), NaN kept; the sum they return matches libm's.
TEST(VecMath, ExpShiftedSumLeavesOutSubnormals) {
  EXPECT_EQ(vec::exp_or_zero(-87.5f), 0.f);
  EXPECT_EQ(vec::exp_or_zero(-INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(vec::exp_or_zero(NAN)));
  EXPECT_LE(ulp_error(vec::exp_or_zero(-86.9f), std::exp(static_cast<double>(-86.9f))), 2.0);
  std::vector<float> x(203), y(203);
  double want = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 3.f - static_cast<float>(i);  // 3 down to -199 around the shift of 3: far below -87
    want += std::exp(static_cast<double>(x[i]) - 3.0);
  }
  const float got = vec::exp_shifted_sum(x.data(), y.data(), static_cast<int64_t>(x.size()), 3.f);
  EXPECT_NEAR(got, want, 1e-6 * want);
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = std::exp(static_cast<double>(x[i]) - 3.0);
    if (static_cast<double>(x[i]) - 3.0 < vec::kExpNormalMin)
      EXPECT_EQ(y[i], 0.f) << "x " << x[i];
    else
      EXPECT_LE(ulp_error(y[i], e), 2.0) << "x " << x[i];
  }
}

// ---------------------------------------------------------------------------------------------

struct BinaryCase {
  const char* op;
  std::vector<DType> dtypes;
  int opset = 13;
  std::map<std::string, graph::Attribute> attrs = {};
  double lo = -3, hi = 3;
};

std::vector<BinaryCase> binary_cases() {
  const DType f = DType::kFloat32, i32 = DType::kInt32, i64 = DType::kInt64, b = DType::kBool;
  return {
      {"Add", {f, i32, i64}},
      {"Sub", {f, i32, i64}},
      {"Mul", {f, i32, i64}},
      {"Div", {f, i32, i64}},
      {"Pow", {f}, 13, {}, 0.1, 3},
      {"Pow", {i32, i64}, 13, {}, 0, 4},
      {"Mod", {f}, 13, {{"fmod", one_int(1)}}},
      {"Mod", {i32, i64}, 13, {{"fmod", one_int(0)}}, -9, 9},
      {"Mod", {i32, i64}, 13, {{"fmod", one_int(1)}}, -9, 9},
      {"Max", {f, i32, i64}},
      {"Min", {f, i32, i64}},
      {"Sum", {f, i32, i64}},
      {"Mean", {f}},
      {"Equal", {f, i32, i64, b}, 13, {}, -2, 2},
      {"Less", {f, i32, i64}, 13, {}, -2, 2},
      {"Greater", {f, i32, i64}, 13, {}, -2, 2},
      {"LessOrEqual", {f, i32, i64}, 13, {}, -2, 2},
      {"GreaterOrEqual", {f, i32, i64}, 13, {}, -2, 2},
      {"And", {b}},
      {"Or", {b}},
      {"Xor", {b}},
      {"BitShift", {DType::kUInt8, DType::kUInt32, DType::kUInt64}, 13, {{"direction", str("LEFT")}}, 0, 9},
      {"BitShift", {DType::kUInt8, DType::kUInt16, DType::kUInt64}, 13, {{"direction", str("RIGHT")}}, 0, 9},
  };
}

TEST(Elementwise, BinaryMatchesReferenceOnRandomBroadcasts) {
  std::mt19937 rng(1234);
  int checked = 0;
  for (const BinaryCase& bc : binary_cases()) {
    for (DType dt : bc.dtypes) {
      for (int trial = 0; trial < 24; ++trial) {
        const Shape out = random_shape(rng, 0, 5, 5);
        Shape sa = out, sb = out;
        if (trial % 4 == 1) sb = broadcast_partner(rng, out);
        if (trial % 4 == 2) sa = broadcast_partner(rng, out);
        if (trial % 4 == 3) sb = Shape{};
        Tensor a = random_tensor(dt, sa, rng, bc.lo, bc.hi);
        Tensor b = random_tensor(dt, sb, rng, bc.lo, bc.hi);
        OpCase c{bc.op, bc.opset, bc.attrs};
        EvalOptions opt;
        opt.num_threads = 1 + trial % 2;
        EXPECT_TRUE(match_reference(c, {a, b}, {}, opt));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(Elementwise, BinaryChannelsLastAndRowBroadcasts) {
  std::mt19937 rng(77);
  const Shape shapes[][2] = {
      {{2, 3, 4, 5}, {2, 3, 4, 5}}, {{2, 3, 4, 5}, {1, 3, 1, 1}},
      {{2, 3, 4, 5}, {}},           {{1, 8, 3, 3}, {1, 8, 3, 3}},
      {{2, 3, 4, 5}, {5}},          {{2, 3, 4, 5}, {2, 1, 4, 5}},
      {{2, 1, 4, 5}, {1, 3, 1, 1}}, {{3, 1}, {1, 4}},
      {{4, 6, 7}, {6, 1}},
  };
  for (const auto& pair : shapes) {
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Less"}) {
      for (Layout layout : {Layout::kPlain, Layout::kChannelsLast}) {
        for (int threads : {1, 2}) {
          Tensor a = random_tensor(DType::kFloat32, pair[0], rng);
          Tensor b = random_tensor(DType::kFloat32, pair[1], rng);
          EvalOptions opt;
          opt.input_layout = layout;
          opt.num_threads = threads;
          EXPECT_TRUE(match_reference({op}, {a, b}, {}, opt));
          EXPECT_TRUE(match_reference({op}, {b, a}, {}, opt));
        }
      }
    }
  }
}

// Blocked outputs (nChw8c, nChw16c) walked with broadcast operands: per-channel ([1,C,1,1] as an
// activation, which arrives blocked, or [C,1,1] plain), per-pixel, per-row, scalar and full
// operands, in both orders, for arithmetic, comparisons and Where.
TEST(Elementwise, BlockedLayoutsWithBroadcasts) {
  std::mt19937 rng(78);
  const Shape x{2, 32, 5, 3};
  const Shape partners[] = {{2, 32, 5, 3}, {1, 32, 1, 1}, {32, 1, 1}, {1, 1, 5, 3},
                            {2, 1, 5, 1},  {3},           {},         {2, 32, 1, 1}};
  for (Layout layout : {Layout::kBlocked8, Layout::kBlocked16}) {
    for (const Shape& other : partners) {
      for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "PRelu", "Less"}) {
        const bool prelu = std::string(op) == "PRelu";
        if (prelu && (other.rank() == 4 && other[0] == 2 && other[2] == 1)) continue;  // slope must not grow x
        Tensor a = random_tensor(DType::kFloat32, x, rng);
        Tensor b = random_tensor(DType::kFloat32, other, rng);
        for (int threads : {1, 2}) {
          EvalOptions opt;
          opt.input_layout = layout;
          opt.num_threads = threads;
          EXPECT_TRUE(match_reference({op}, {a, b}, {}, opt)) << op << " " << other.to_string();
          if (!prelu) {
            EXPECT_TRUE(match_reference({op}, {b, a}, {}, opt)) << op << " " << other.to_string();
          }
        }
      }
      Tensor cond = random_tensor(DType::kBool, other, rng);
      Tensor a = random_tensor(DType::kFloat32, x, rng);
      Tensor b = random_tensor(DType::kFloat32, other, rng);
      EvalOptions opt;
      opt.input_layout = layout;
      EXPECT_TRUE(match_reference({"Where", 16}, {cond, a, b}, {}, opt)) << other.to_string();
    }
  }
}

TEST(Elementwise, LargeTensorsSplitAcrossThreads) {
  std::mt19937 rng(5);
  const Shape big{2, 64, 33, 33};
  Tensor a = random_tensor(DType::kFloat32, big, rng);
  Tensor b = random_tensor(DType::kFloat32, Shape{1, 64, 1, 1}, rng);
  Tensor c = random_tensor(DType::kFloat32, big, rng);
  for (int threads : {1, 2, 3}) {
    EvalOptions opt;
    opt.num_threads = threads;
    EXPECT_TRUE(match_reference({"Add"}, {a, b}, {}, opt));
    EXPECT_TRUE(match_reference({"Mul"}, {a, c}, {}, opt));
    EXPECT_TRUE(match_reference({"Sigmoid"}, {a}, {}, opt));
    EXPECT_TRUE(match_reference({"Tanh"}, {a}, {}, opt));
    opt.input_layout = Layout::kChannelsLast;
    EXPECT_TRUE(match_reference({"Add"}, {a, b}, {}, opt));
    EXPECT_TRUE(match_reference({"Erf"}, {a}, {}, opt));
    // Blocked activations against per-channel tensors run block row by block row; the threads'
    // chunks then start and end inside a channel block's pixels.
    Tensor per_image = random_tensor(DType::kFloat32, Shape{2, 64, 1, 1}, rng);
    for (Layout layout : {Layout::kBlocked8, Layout::kBlocked16}) {
      opt.input_layout = layout;
      for (const Tensor* other : {&b, &per_image}) {
        EXPECT_TRUE(match_reference({"Mul"}, {a, *other}, {}, opt)) << layout_name(layout);
        EXPECT_TRUE(match_reference({"Sub"}, {*other, a}, {}, opt)) << layout_name(layout);
      }
    }
  }
}

TEST(Elementwise, VariadicWhereAndPRelu) {
  std::mt19937 rng(99);
  for (const char* op : {"Sum", "Mean", "Max", "Min"}) {
    for (int trial = 0; trial < 12; ++trial) {
      const Shape out = random_shape(rng, 1, 4, 4);
      std::vector<Tensor> ins;
      const int n = 1 + trial % 4;
      for (int k = 0; k < n; ++k)
        ins.push_back(random_tensor(DType::kFloat32, k == 0 ? out : broadcast_partner(rng, out), rng));
      EvalOptions opt;
      opt.num_threads = 1 + trial % 2;
      EXPECT_TRUE(match_reference({op, 13}, ins, {}, opt));
      if (std::string(op) != "Mean") {
        for (auto& t : ins) t = random_tensor(DType::kInt64, t.shape(), rng, -50, 50);
        EXPECT_TRUE(match_reference({op, 13}, ins, {}, opt));
      }
    }
  }
  for (int trial = 0; trial < 20; ++trial) {
    const Shape out = random_shape(rng, 0, 4, 4);
    Tensor cond = random_tensor(DType::kBool, broadcast_partner(rng, out), rng);
    for (DType dt : {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kBool}) {
      Tensor x = random_tensor(dt, out, rng);
      Tensor y = random_tensor(dt, broadcast_partner(rng, out), rng);
      EXPECT_TRUE(match_reference({"Where", 16}, {cond, x, y}));
      EXPECT_TRUE(match_reference({"Where", 16}, {cond, y, x}));
    }
  }
  Tensor x = random_tensor(DType::kFloat32, Shape{2, 3, 4, 5}, rng);
  for (const Shape& slope : {Shape{3, 1, 1}, Shape{1}, Shape{2, 3, 4, 5}, Shape{5}}) {
    Tensor s = random_tensor(DType::kFloat32, slope, rng);
    EXPECT_TRUE(match_reference({"PRelu", 16}, {x, s}));
    EvalOptions cl;
    cl.input_layout = Layout::kChannelsLast;
    EXPECT_TRUE(match_reference({"PRelu", 16}, {x, s}, {}, cl));
  }
}

TEST(Elementwise, PowWithMixedTypesAndScalarExponents) {
  std::mt19937 rng(3);
  Tensor base = random_tensor(DType::kFloat32, Shape{3, 7}, rng, 0.1, 2);
  for (float p : {1.f, 2.f, 3.f, 0.5f, -1.5f}) {
    EXPECT_TRUE(match_reference({"Pow", 15}, {base, Tensor::scalar(p)}));
  }
  EXPECT_TRUE(match_reference({"Pow", 15}, {base, Tensor::scalar<int64_t>(3)}));
  EXPECT_TRUE(match_reference({"Pow", 15}, {base, random_tensor(DType::kInt32, Shape{7}, rng, -2, 3)}));
  Tensor ibase = random_tensor(DType::kInt64, Shape{3, 7}, rng, -4, 4);
  EXPECT_TRUE(match_reference({"Pow", 15}, {ibase, Tensor::scalar(2.f)}));
  EXPECT_TRUE(match_reference({"Pow", 15}, {ibase, random_tensor(DType::kInt32, Shape{7}, rng, -1, 5)}));
}

// ---------------------------------------------------------------------------------------------

struct UnaryCase {
  const char* op;
  double lo = -4, hi = 4;
  std::map<std::string, graph::Attribute> attrs = {};
  int opset = 18;
};

TEST(Elementwise, UnaryMatchesReference) {
  const UnaryCase cases[] = {
      {"Relu"},
      {"LeakyRelu", -4, 4, {{"alpha", one_float(0.2f)}}},
      {"Elu"},
      {"Elu", -1e-3, 1e-3},
      {"Selu"},
      {"Celu", -4, 4, {{"alpha", one_float(0.7f)}}},
      {"ThresholdedRelu", -4, 4, {{"alpha", one_float(0.5f)}}},
      {"Sigmoid", -30, 30},
      {"HardSigmoid"},
      {"HardSigmoid", -4, 4, {{"alpha", one_float(0.3f)}, {"beta", one_float(0.1f)}}},
      {"HardSwish"},
      {"Tanh"},
      {"Tanh", -0.1, 0.1},
      {"Softplus", -30, 30},
      {"Softsign"},
      {"Mish", -20, 20},
      {"Erf"},
      {"Erf", -0.2, 0.2},
      {"Exp", -80, 80},
      {"Log", 1e-6, 1e6},
      {"Sqrt", 0, 100},
      {"Reciprocal", 0.5, 4},
      {"Neg"},
      {"Abs"},
      {"Sign"},
      {"Floor"},
      {"Ceil"},
      {"Round"},
      {"Sin"},
      {"Cos"},
      {"Tan", -1.5, 1.5},
      {"Asin", -1, 1},
      {"Acos", -1, 1},
      {"Atan"},
      {"Sinh"},
      {"Cosh"},
      {"Asinh"},
      {"Acosh", 1, 9},
      {"Atanh", -0.99, 0.99},
      {"IsNaN"},
      {"IsInf"},
  };
  std::mt19937 rng(42);
  for (const UnaryCase& uc : cases) {
    for (int trial = 0; trial < 6; ++trial) {
      const Shape s = trial == 5 ? Shape{2, 3, 5, 7} : random_shape(rng, 0, 4, 9);
      Tensor x = random_tensor(DType::kFloat32, s, rng, uc.lo, uc.hi);
      EvalOptions opt;
      opt.num_threads = 1 + trial % 2;
      if (trial >= 4) opt.input_layout = Layout::kChannelsLast;
      EXPECT_TRUE(match_reference({uc.op, uc.opset, uc.attrs}, {x}, {1e-6, 2e-6}, opt));
    }
  }
  for (const char* op : {"Relu", "Neg", "Abs", "Sign"}) {
    for (DType dt : {DType::kInt32, DType::kInt64}) {
      Tensor x = random_tensor(dt, Shape{4, 9}, rng, -100, 100);
      EXPECT_TRUE(match_reference({op, 14}, {x}));
    }
  }
  EXPECT_TRUE(match_reference({"Not", 1}, {random_tensor(DType::kBool, Shape{3, 11}, rng)}));
}

TEST(Elementwise, IsInfIsNaNDetectFlags) {
  Tensor x = Tensor::from_vector<float>(Shape{5}, {1.f, INFINITY, -INFINITY, NAN, 0.f});
  for (int pos : {0, 1}) {
    for (int neg : {0, 1}) {
      OpCase c{"IsInf", 10, {{"detect_positive", one_int(pos)}, {"detect_negative", one_int(neg)}}};
      auto out = run_op(cpu_reg(), c, {x});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const uint8_t* y = (*out)[0].data<uint8_t>();
      EXPECT_EQ(y[0], 0);
      EXPECT_EQ(y[1], pos);
      EXPECT_EQ(y[2], neg);
      EXPECT_EQ(y[3], 0);
      EXPECT_EQ(y[4], 0);
    }
  }
  auto nan = run_op(cpu_reg(), {"IsNaN", 13}, {x});
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ((*nan)[0].data<uint8_t>()[3], 1);
  EXPECT_EQ((*nan)[0].data<uint8_t>()[1], 0);
}

TEST(Elementwise, ClipAttributesAndInputs) {
  std::mt19937 rng(8);
  Tensor x = random_tensor(DType::kFloat32, Shape{3, 4, 5}, rng);
  EXPECT_TRUE(match_reference({"Clip", 6, {{"min", one_float(-1.f)}, {"max", one_float(0.5f)}}}, {x}));
  EXPECT_TRUE(match_reference({"Clip", 6, {{"max", one_float(0.5f)}}}, {x}));
  EXPECT_TRUE(match_reference({"Clip", 13}, {x, Tensor::scalar(-0.5f), Tensor::scalar(2.f)}));
  EXPECT_TRUE(match_reference({"Clip", 13}, {x, Tensor(), Tensor::scalar(0.f)}));
  EXPECT_TRUE(match_reference({"Clip", 13}, {x, Tensor::scalar(0.f)}));
  EXPECT_TRUE(match_reference({"Clip", 13}, {x}));
  Tensor xi = random_tensor(DType::kInt64, Shape{17}, rng, -20, 20);
  EXPECT_TRUE(match_reference({"Clip", 13}, {xi, Tensor::scalar<int64_t>(-3), Tensor::scalar<int64_t>(7)}));
  // min > max: every element becomes max (numpy.clip).
  auto out = run_op(cpu_reg(), {"Clip", 13}, {x, Tensor::scalar(2.f), Tensor::scalar(1.f)});
  ASSERT_TRUE(out.ok());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ((*out)[0].data<float>()[i], 1.f);
}

// ---------------------------------------------------------------------------------------------
// Hand-computed expectations.

TEST(Elementwise, IntegerModFollowsSpecSigns) {
  Tensor a = Tensor::from_vector<int32_t>(Shape{6}, {-7, 7, -7, 7, 5, -4});
  Tensor b = Tensor::from_vector<int32_t>(Shape{6}, {3, -3, -3, 3, 0, 2});
  auto py = run_op(cpu_reg(), {"Mod", 13, {{"fmod", one_int(0)}}}, {a, b});
  ASSERT_TRUE(py.ok()) << py.status().to_string();
  const std::vector<int32_t> want_py = {2, -2, -1, 1, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ((*py)[0].data<int32_t>()[i], want_py[static_cast<size_t>(i)]) << i;
  auto c = run_op(cpu_reg(), {"Mod", 13, {{"fmod", one_int(1)}}}, {a, b});
  ASSERT_TRUE(c.ok());
  const std::vector<int32_t> want_c = {-1, 1, -1, 1, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ((*c)[0].data<int32_t>()[i], want_c[static_cast<size_t>(i)]) << i;
  Tensor fa = Tensor::from_vector<float>(Shape{2}, {-7.5f, 7.5f});
  Tensor fb = Tensor::from_vector<float>(Shape{2}, {2.f, -2.f});
  auto f = run_op(cpu_reg(), {"Mod", 13, {{"fmod", one_int(1)}}}, {fa, fb});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[0].data<float>()[0], -1.5f);
  EXPECT_EQ((*f)[0].data<float>()[1], 1.5f);
  auto bad = run_op(cpu_reg(), {"Mod", 13}, {fa, fb});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Elementwise, IntegerDivTruncatesAndSurvivesZero) {
  Tensor a = Tensor::from_vector<int64_t>(Shape{5}, {-7, 7, -7, 9, INT64_MIN});
  Tensor b = Tensor::from_vector<int64_t>(Shape{5}, {2, -2, -2, 0, -1});
  auto out = run_op(cpu_reg(), {"Div", 13}, {a, b});
  ASSERT_TRUE(out.ok());
  const int64_t* y = (*out)[0].data<int64_t>();
  EXPECT_EQ(y[0], -3);
  EXPECT_EQ(y[1], -3);
  EXPECT_EQ(y[2], 3);
  EXPECT_EQ(y[3], 0);
  EXPECT_EQ(y[4], INT64_MIN);
}

TEST(Elementwise, RoundHalfToEven) {
  Tensor x = Tensor::from_vector<float>(Shape{8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f, 3.5f});
  auto out = run_op(cpu_reg(), {"Round", 11}, {x});
  ASSERT_TRUE(out.ok());
  const std::vector<float> want = {0.f, 2.f, 2.f, -0.f, -2.f, 2.f, -3.f, 4.f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*out)[0].data<float>()[i], want[static_cast<size_t>(i)]) << i;
}

TEST(Elementwise, NonBroadcastableShapesAreInvalidArgument) {
  Tensor a = Tensor::empty(DType::kFloat32, Shape{2, 3});
  Tensor b = Tensor::empty(DType::kFloat32, Shape{4});
  auto out = run_op(cpu_reg(), {"Add", 13}, {a, b});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("[2,3]"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("[4]"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("node0"), std::string::npos) << out.status().message();

  Tensor w = Tensor::empty(DType::kFloat32, Shape{5});
  auto where = run_op(cpu_reg(), {"Where", 16}, {Tensor::empty(DType::kBool, Shape{3}), w, w});
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.status().code(), StatusCode::kInvalidArgument);

  auto mixed = run_op(cpu_reg(), {"Add", 13}, {a, Tensor::empty(DType::kInt64, Shape{2, 3})});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);

  auto prelu = run_op(cpu_reg(), {"PRelu", 16}, {b, a});
  ASSERT_FALSE(prelu.ok());

  auto shift = run_op(cpu_reg(), {"BitShift", 11},
                      {Tensor::empty(DType::kUInt8, Shape{2}), Tensor::empty(DType::kUInt8, Shape{2})});
  ASSERT_FALSE(shift.ok());  // direction is required
}

// ---------------------------------------------------------------------------------------------
// Kernel-level contract: layouts, accepts() and in-place runs.

std::unique_ptr<Kernel> make_kernel(const graph::Graph& g, const graph::Node& n, std::vector<DType> dtypes) {
  auto def = cpu_reg().find(n.op_type, "", n.opset, Device::kCpu, dtypes[0]);
  EXPECT_TRUE(def.ok());
  std::vector<const Tensor*> constants(dtypes.size(), nullptr);
  KernelCreateArgs args{g, n, constants, dtypes, {}};
  auto k = (*def)->create(args);
  EXPECT_TRUE(k.ok());
  return std::move(k).value();
}

TEST(Elementwise, LayoutContract) {
  graph::Graph g;
  g.opsets[""] = 13;
  const graph::ValueId a = g.add_value("a"), b = g.add_value("b"), y = g.add_value("y");
  const graph::NodeId add = g.add_node("Add", "add", {a, b}, {y});
  const graph::NodeId relu = g.add_node("Relu", "relu", {a}, {y});
  auto k = make_kernel(g, g.node(add), {DType::kFloat32, DType::kFloat32});
  EXPECT_EQ(k->layout_support(), LayoutSupport::kAny);
  const Shape s{1, 8, 4, 4};
  auto info = [](Shape sh, Layout l) { return TensorInfo{DType::kFloat32, sh, l, nullptr}; };
  std::vector<TensorInfo> same = {info(s, Layout::kChannelsLast), info(s, Layout::kChannelsLast)};
  std::vector<TensorInfo> mixed = {info(s, Layout::kChannelsLast), info(s, Layout::kPlain)};
  std::vector<TensorInfo> scalar = {info(s, Layout::kChannelsLast), info(Shape{}, Layout::kPlain)};
  std::vector<TensorInfo> chan = {info(s, Layout::kChannelsLast), info(Shape{1, 8, 1, 1}, Layout::kChannelsLast)};
  const Shape s16{1, 16, 4, 4};
  std::vector<TensorInfo> blocked_chan = {info(s16, Layout::kBlocked16), info(Shape{1, 16, 1, 1}, Layout::kPlain)};
  std::vector<TensorInfo> blocked_rows = {info(s16, Layout::kBlocked16), info(Shape{1, 1, 4, 1}, Layout::kPlain)};
  std::vector<TensorInfo> two_blocks = {info(s16, Layout::kBlocked16), info(s16, Layout::kBlocked8)};
  std::vector<TensorInfo> blocked_bcast = {info(s16, Layout::kChannelsLast),
                                           info(Shape{1, 16, 4, 1}, Layout::kBlocked8)};
  // Every layout pair the broadcasting walk maps onto the output is accepted: the same layout, a
  // plain operand walked through its strides, scalars, per-channel and per-pixel operands against
  // channels-last and blocked outputs. Blocked operands of another block, or broadcast blocked
  // operands under a non-blocked output, are not.
  EXPECT_TRUE(k->accepts(same));
  EXPECT_TRUE(k->accepts(mixed));
  EXPECT_TRUE(k->accepts(scalar));
  EXPECT_TRUE(k->accepts(chan));
  EXPECT_TRUE(k->accepts(blocked_chan));
  EXPECT_TRUE(k->accepts(blocked_rows));
  EXPECT_FALSE(k->accepts(two_blocks));
  EXPECT_FALSE(k->accepts(blocked_bcast));
  auto rb = k->reshape(blocked_chan);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->outputs[0].layout, Layout::kBlocked16);
  EXPECT_EQ(rb->inplace, std::vector<int>{0});
  auto rr = k->reshape(same);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr->outputs[0].layout, Layout::kChannelsLast);
  EXPECT_EQ(rr->inplace, std::vector<int>{0});
  auto rs = k->reshape(std::vector<TensorInfo>{info(Shape{8, 1, 1}, Layout::kPlain), info(s, Layout::kChannelsLast)});
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->outputs[0].layout, Layout::kChannelsLast);
  EXPECT_EQ(rs->inplace, std::vector<int>{1});

  auto u = make_kernel(g, g.node(relu), {DType::kFloat32});
  EXPECT_EQ(u->layout_support(), LayoutSupport::kAny);
  auto ur = u->reshape(std::vector<TensorInfo>{info(s, Layout::kChannelsLast)});
  ASSERT_TRUE(ur.ok());
  EXPECT_EQ(ur->outputs[0].layout, Layout::kChannelsLast);
  EXPECT_EQ(ur->inplace, std::vector<int>{0});
}

TEST(Elementwise, InPlaceRunsMatchOutOfPlace) {
  std::mt19937 rng(11);
  const Shape s{3, 50, 41};
  for (const char* op : {"Add", "Mul", "Sub", "Sigmoid", "Tanh", "Exp", "LeakyRelu", "Clip"}) {
    graph::Graph g;
    g.opsets[""] = 13;
    const graph::ValueId a = g.add_value("a"), b = g.add_value("b"), y = g.add_value("y");
    const bool binary = std::string(op) == "Add" || std::string(op) == "Mul" || std::string(op) == "Sub";
    const graph::NodeId n = g.add_node(op, "n", binary ? std::vector<graph::ValueId>{a, b} : std::vector{a}, {y});
    for (const Shape& other : {s, Shape{50, 1}, Shape{}}) {
      Tensor x = random_tensor(DType::kFloat32, s, rng);
      Tensor z = random_tensor(DType::kFloat32, other, rng);
      std::vector<Tensor> inputs = binary ? std::vector<Tensor>{x, z} : std::vector<Tensor>{x};
      auto want = run_op(cpu_reg(), {op, 13}, inputs);
      ASSERT_TRUE(want.ok());
      // Second input as the full-shape one: the output may take input 1's buffer.
      for (int order = 0; order < (binary ? 2 : 1); ++order) {
        std::vector<Tensor> ins = order == 0 ? inputs : std::vector<Tensor>{z, x};
        std::vector<DType> dts(ins.size(), DType::kFloat32);
        auto k = make_kernel(g, g.node(n), dts);
        std::vector<TensorInfo> infos;
        for (const Tensor& t : ins) infos.push_back(TensorInfo{t.dtype(), t.shape(), t.layout(), nullptr});
        auto rr = k->reshape(infos);
        ASSERT_TRUE(rr.ok());
        ASSERT_EQ(rr->inplace.size(), 1u);
        const int share = rr->inplace[0];
        ASSERT_GE(share, 0) << op;
        auto expect = run_op(cpu_reg(), {op, 13}, ins);
        ASSERT_TRUE(expect.ok());
        std::vector<Tensor> copies;
        for (const Tensor& t : ins) copies.push_back(t.clone());
        std::vector<Tensor> outs = {copies[static_cast<size_t>(share)]};
        RunContext rc;
        rc.inputs = copies;
        rc.outputs = outs;
        rc.state = rr->state.get();
        rc.num_threads = 2;
        ASSERT_TRUE(k->run(rc).ok());
        EXPECT_TRUE(tensors_near(outs[0], (*expect)[0], 0, 0)) << op;
      }
    }
  }
}

}  // namespace
}  // namespace streamline::ops::testing
