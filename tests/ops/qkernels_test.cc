// The int8 kernels (ops/cpu/qconv.cc, qmatmul.cc, qelementwise.cc) against the reference kernels on
// random shapes, zero points and scales (fixed seeds), with constant weights and parameters so the
// oneDNN paths run, in plain and channels-last layouts, on 1 and 2 threads. 8-bit outputs may
// differ from the reference by one step where float and double rounding part (a value within a
// few ulps of .5); anything more, or more than 1% of the elements, fails.

#include "ops/cpu/quant_onednn.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

Tensor q8(DType dt, const Shape& s, std::mt19937& rng, int lo = -1000, int hi = 1000) {
  Tensor t = Tensor::empty(dt, s);
  const int tlo = dt == DType::kInt8 ? -128 : 0, thi = dt == DType::kInt8 ? 127 : 255;
  std::uniform_int_distribution<int> d(std::max(lo, tlo), std::min(hi, thi));
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (dt == DType::kInt8)
      t.data<int8_t>()[k] = static_cast<int8_t>(d(rng));
    else
      t.data<uint8_t>()[k] = static_cast<uint8_t>(d(rng));
  }
  return t;
}

Tensor scalar_q8(DType dt, int v) {
  Tensor t = Tensor::empty(dt, Shape{});
  if (dt == DType::kInt8)
    t.data<int8_t>()[0] = static_cast<int8_t>(v);
  else
    t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  return t;
}

Tensor i32(const Shape& s, std::mt19937& rng, int lo, int hi) {
  Tensor t = Tensor::empty(DType::kInt32, s);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<int32_t>()[k] = d(rng);
  return t;
}

// 8-bit: within one step everywhere and off by one on at most 1% (or 2) of the elements;
// int32: exact; float: within tol * (1 + |want|).
::testing::AssertionResult q_close(const Tensor& got, const Tensor& want, double tol = 1e-4) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "got " << got.describe() << ", want " << want.describe();
  int64_t off = 0;
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double a = element_as_double(got, k), b = element_as_double(want, k);
    if (got.dtype() == DType::kFloat32) {
      if (std::fabs(a - b) > tol * (1.0 + std::fabs(b)))
        return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", want " << b;
    } else if (got.dtype() == DType::kInt32) {
      if (a != b) return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", want " << b;
    } else {
      if (std::fabs(a - b) > 1)
        return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", want " << b;
      off += a != b;
    }
  }
  if (off > std::max<int64_t>(2, got.numel() / 100))
    return ::testing::AssertionFailure() << off << " of " << got.numel() << " elements off by one";
  return ::testing::AssertionSuccess();
}

struct QRun {
  Layout layout = Layout::kPlain;
  int threads = 1;
  std::vector<bool> constant;  // per input; empty: all constant but input 0 (and Z at 9)
};

// The CPU kernel (with `r`'s layout, threads and constants) against the reference.
void expect_matches(const NodeCase& c, const std::vector<Tensor>& inputs, const QRun& r, const std::string& what,
                    double tol = 1e-4) {
  EvalOptions o;
  o.num_threads = r.threads;
  o.input_layout = r.layout;
  o.constant_mask = r.constant;
  if (o.constant_mask.empty()) {
    o.constant_mask.assign(inputs.size(), true);
    o.constant_mask[0] = false;
    if (inputs.size() > 9) o.constant_mask[9] = false;
  }
  auto got = evaluate_node(cpu_reg(), c.graph(), c.node(), inputs, o);
  ASSERT_TRUE(got.ok()) << what << ": cpu: " << got.status().to_string();
  auto want = c.run(ref_reg(), inputs);
  ASSERT_TRUE(want.ok()) << what << ": reference: " << want.status().to_string();
  EXPECT_TRUE(q_close((*got)[0], (*want)[0], tol)) << what;
}

const char* kActs[] = {"", "Relu", "Clip", "Sigmoid"};

// The convolution and matmul kernels on this CPU's int8 path, and on the path of CPUs without
// VNNI (weights split in halves, inputs read twice, int8 inputs copied as uint8) whatever this
// CPU has: both must match the reference exactly or within its rounding.
class QKernelPaths : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) cpu::int8_exactness_override().store(0);
  }
  void TearDown() override { cpu::int8_exactness_override().store(-1); }
};
INSTANTIATE_TEST_SUITE_P(QKernels, QKernelPaths, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "SplitWeights" : "ThisCpu"; });

TEST_P(QKernelPaths, QLinearConvMatchesReference) {
  std::mt19937 rng(701);
  for (int iter = 0; iter < 24; ++iter) {
    const bool depthwise = iter % 6 == 5;
    const int64_t group = depthwise ? 16 : iter % 4 == 3 ? 2 : 1;
    const int64_t c = depthwise ? 16 : group * (1 + rng() % 12), m = depthwise ? 16 : group * (1 + rng() % 20);
    const int64_t h = 3 + rng() % 12, w = 3 + rng() % 12, k = 1 + rng() % 3;
    const DType xt = iter % 2 ? DType::kInt8 : DType::kUInt8, yt = iter % 3 ? DType::kUInt8 : DType::kInt8;
    const bool per_channel = iter % 4 < 2;
    // uint8 weights with a zero point near the middle still fit int8 after the shift.
    const bool u8w = iter % 5 == 4;
    Tensor wt = u8w ? q8(DType::kUInt8, Shape{m, c / group, k, k}, rng, 20, 230)
                    : q8(DType::kInt8, Shape{m, c / group, k, k}, rng, -127, 127);
    Tensor wzp = u8w ? scalar_q8(DType::kUInt8, 125) : scalar_q8(DType::kInt8, 0);
    NodeCase qc("QLinearConv", 10, 9);
    const int64_t pad = k / 2, stride = 1 + iter % 2;
    qc.ints("pads", {pad, pad, pad, pad}).ints("strides", {stride, stride}).i("group", group);
    Tensor x = q8(xt, Shape{1 + static_cast<int64_t>(rng() % 2), c, h, w}, rng);
    const std::vector<Tensor> in = {x,
                                    random_tensor(Shape{}, rng, 0.01f, 0.05f),
                                    scalar_q8(xt, static_cast<int>(rng() % 60) - (xt == DType::kInt8 ? 30 : 0)),
                                    wt,
                                    random_tensor(per_channel ? Shape{m} : Shape{}, rng, 0.005f, 0.02f),
                                    wzp,
                                    random_tensor(Shape{}, rng, 0.5f, 2.f),
                                    scalar_q8(yt, yt == DType::kInt8 ? -5 : 120),
                                    i32(Shape{m}, rng, -2000, 2000)};
    const QRun r{iter % 3 ? Layout::kChannelsLast : Layout::kPlain, 1 + iter % 2, {}};
    expect_matches(qc, in, r, "QLinearConv iter " + std::to_string(iter) + " x " + x.shape().to_string());
  }
}

TEST_P(QKernelPaths, ConvIntegerMatchesReferenceExactly) {
  std::mt19937 rng(702);
  for (int iter = 0; iter < 8; ++iter) {
    const int64_t c = 1 + rng() % 16, m = 1 + rng() % 16;
    const DType xt = iter % 2 ? DType::kInt8 : DType::kUInt8;
    NodeCase ci("ConvInteger", 10, 4);
    ci.ints("pads", {1, 1, 1, 1});
    const std::vector<Tensor> in = {q8(xt, Shape{1, c, 6 + iter, 5}, rng), q8(DType::kInt8, Shape{m, c, 3, 3}, rng),
                                    scalar_q8(xt, 7), scalar_q8(DType::kInt8, 0)};
    // Odd iterations take the input's zero point at run time, as after a DynamicQuantizeLinear.
    const std::vector<bool> constant = {false, true, iter % 2 == 0, true};
    expect_matches(ci, in, QRun{iter % 2 ? Layout::kChannelsLast : Layout::kPlain, 1 + iter % 3, constant},
                   "ConvInteger");
  }
}

TEST_P(QKernelPaths, FusedQConvWithResidualAndActivation) {
  std::mt19937 rng(703);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t c = 8 * (1 + rng() % 4), m = 8 * (1 + rng() % 4), h = 4 + rng() % 9, w = 4 + rng() % 9;
    const DType xt = iter % 2 ? DType::kInt8 : DType::kUInt8, yt = iter % 4 < 2 ? DType::kUInt8 : DType::kInt8;
    const bool residual = iter % 3 != 2, float_out = iter % 5 == 4;
    NodeCase qc("QConv", 1, 12, 1, {}, "streamline");
    qc.ints("pads", {1, 1, 1, 1});
    const std::string act = kActs[iter % 4];
    if (!act.empty()) qc.s("activation", act);
    if (act == "Clip") qc.floats("activation_params", {0.f, 3.f});
    // A clamp on conv + bias before the residual (the range of a QDQ graph's intermediate tensor).
    if (residual && iter % 4 == 1) qc.floats("pre_residual_clip", {-0.3f, 0.4f});
    std::vector<Tensor> in = {q8(xt, Shape{1, c, h, w}, rng),
                              random_tensor(Shape{}, rng, 0.01f, 0.05f),
                              scalar_q8(xt, xt == DType::kInt8 ? -128 : 0),
                              q8(DType::kInt8, Shape{m, c, 3, 3}, rng, -127, 127),
                              random_tensor(Shape{m}, rng, 0.005f, 0.02f),
                              Tensor(),
                              float_out ? Tensor() : random_tensor(Shape{}, rng, 0.05f, 0.2f),
                              float_out ? Tensor() : scalar_q8(yt, yt == DType::kInt8 ? -20 : 100),
                              i32(Shape{m}, rng, -500, 500),
                              Tensor(),
                              Tensor(),
                              Tensor()};
    if (residual && !float_out) {
      in[9] = q8(DType::kUInt8, Shape{1, m, h, w}, rng);
      in[10] = random_tensor(Shape{}, rng, 0.02f, 0.1f);
      in[11] = scalar_q8(DType::kUInt8, 128);
    }
    const QRun r{iter % 2 ? Layout::kChannelsLast : Layout::kPlain, 1 + iter % 2, {}};
    expect_matches(qc, in, r, "QConv iter " + std::to_string(iter) + " act " + act, 2e-4);
  }
}

TEST(QKernels, QConvKeepsChannelsLastOnTheOneDnnPath) {
  std::mt19937 rng(704);
  NodeCase qc("QLinearConv", 10, 9);
  const std::vector<Tensor> in = {q8(DType::kUInt8, Shape{1, 8, 5, 5}, rng),
                                  Tensor::scalar<float>(0.02f),
                                  scalar_q8(DType::kUInt8, 3),
                                  q8(DType::kInt8, Shape{8, 8, 1, 1}, rng),
                                  Tensor::scalar<float>(0.01f),
                                  scalar_q8(DType::kInt8, 0),
                                  Tensor::scalar<float>(0.5f),
                                  scalar_q8(DType::kUInt8, 9),
                                  Tensor()};
  std::vector<DType> dtypes;
  std::vector<const Tensor*> consts;
  for (size_t i = 0; i < in.size(); ++i) {
    dtypes.push_back(in[i].defined() ? in[i].dtype() : DType::kUndefined);
    consts.push_back(i > 0 && in[i].defined() ? &in[i] : nullptr);
  }
  auto def = cpu_reg().find("QLinearConv", "", 10, Device::kCpu, DType::kUInt8);
  ASSERT_TRUE(def.ok());
  auto k = (*def)->create(KernelCreateArgs{qc.graph(), qc.node(), consts, dtypes, {}});
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  // The oneDNN kernel asks for NHWC; the plain fallback takes whatever it is given.
  EXPECT_EQ((*k)->layout_support(), LayoutSupport::kPreferChannelsLast);
  // A run-time input zero point (DynamicQuantizeLinear's) stays on oneDNN.
  NodeCase ci("ConvInteger", 10, 4);
  const std::vector<Tensor> ci_in = {in[0], in[3], in[2], in[5]};
  std::vector<DType> ci_dtypes;
  for (const Tensor& t : ci_in) ci_dtypes.push_back(t.dtype());
  auto ci_def = cpu_reg().find("ConvInteger", "", 10, Device::kCpu, DType::kUInt8);
  ASSERT_TRUE(ci_def.ok());
  const std::vector<const Tensor*> ci_consts = {nullptr, &ci_in[1], nullptr, &ci_in[3]};
  auto ck = (*ci_def)->create(KernelCreateArgs{ci.graph(), ci.node(), ci_consts, ci_dtypes, {}});
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  EXPECT_EQ((*ck)->layout_support(), LayoutSupport::kPreferChannelsLast);
  // Run-time weights send it to the plain loops.
  consts[3] = nullptr;
  auto plain = (*def)->create(KernelCreateArgs{qc.graph(), qc.node(), consts, dtypes, {}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->layout_support(), LayoutSupport::kAny);
}

TEST_P(QKernelPaths, QuantizedMatMulsMatchReference) {
  std::mt19937 rng(705);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t m = 1 + rng() % 40, k = 1 + rng() % 70, n = 1 + rng() % 50;
    const DType at = iter % 2 ? DType::kInt8 : DType::kUInt8, yt = iter % 3 ? DType::kUInt8 : DType::kInt8;
    const Shape as = iter % 3 == 0 ? Shape{2, m, k} : Shape{m, k};
    const bool per_col = iter % 2 == 0;
    Tensor a = q8(at, as, rng), b = q8(DType::kInt8, Shape{k, n}, rng, -127, 127);
    Tensor azp = scalar_q8(at, at == DType::kInt8 ? 3 : 128);
    const QRun r{Layout::kPlain, 1 + iter % 2, {}};
    const std::string what = " iter " + std::to_string(iter) + " A " + as.to_string() + " n " + std::to_string(n);

    NodeCase ql("QLinearMatMul", 10, 8);
    expect_matches(ql,
                   {a, random_tensor(Shape{}, rng, 0.01f, 0.05f), azp, b,
                    random_tensor(per_col ? Shape{n} : Shape{}, rng, 0.01f, 0.05f), scalar_q8(DType::kInt8, 0),
                    random_tensor(Shape{}, rng, 0.2f, 0.5f), scalar_q8(yt, yt == DType::kInt8 ? 0 : 128)},
                   r, "QLinearMatMul" + what);

    NodeCase mi("MatMulInteger", 10, 4);
    // A's zero point at run time, as DynamicQuantizeLinear produces it.
    expect_matches(mi, {a, b, azp, scalar_q8(DType::kInt8, 0)},
                   QRun{Layout::kPlain, r.threads, {false, true, false, true}}, "MatMulInteger" + what);

    NodeCase qm("QMatMul", 1, 9, 1, {}, "streamline");
    const std::string act = kActs[iter % 4];
    if (!act.empty()) qm.s("activation", act);
    if (act == "Clip") qm.floats("activation_params", {-1.f, 2.f});
    const bool float_out = iter % 4 == 1;
    expect_matches(qm,
                   {a, random_tensor(Shape{}, rng, 0.01f, 0.05f), azp, b,
                    random_tensor(per_col ? Shape{n} : Shape{}, rng, 0.01f, 0.05f), Tensor(),
                    float_out ? Tensor() : random_tensor(Shape{}, rng, 0.1f, 0.3f),
                    float_out ? Tensor() : scalar_q8(yt, yt == DType::kInt8 ? 0 : 128), i32(Shape{n}, rng, -300, 300)},
                   r, "QMatMul " + act + what, 2e-4);

    NodeCase tf("MatMulIntegerToFloat", 1, 7, 1, {}, "streamline");
    if (iter % 2) tf.s("activation", "Gelu");
    expect_matches(tf,
                   {a, b, random_tensor(Shape{}, rng, 0.01f, 0.05f),
                    random_tensor(per_col ? Shape{n} : Shape{}, rng, 0.01f, 0.05f), azp, scalar_q8(DType::kInt8, 0),
                    random_tensor(Shape{n}, rng, -1.f, 1.f)},
                   QRun{Layout::kPlain, r.threads, {false, true, false, true, false, true, true}},
                   "MatMulIntegerToFloat" + what, 2e-4);
  }
}

// Large enough that 2 and 3 threads cut the work into row bands (qconv.cc, qmatmul.cc): top,
// middle and bottom bands with their own padding, strides, a residual, a run-time zero point.
TEST_P(QKernelPaths, BandedRunsMatchReference) {
  std::mt19937 rng(709);
  for (int64_t stride : {1, 2}) {
    // About 18M and 9M multiply-adds: a band per thread, so three threads cut a middle band.
    NodeCase qc("QConv", 1, 12, 1, {}, "streamline");
    qc.ints("pads", {1, 1, 1, 1}).ints("strides", {stride, stride}).s("activation", "Relu");
    const int64_t h = stride == 1 ? 33 : 65, w = 30, oh = (h + 2 - 3) / stride + 1, ow = (w + 2 - 3) / stride + 1;
    const std::vector<Tensor> in = {q8(DType::kUInt8, Shape{1, 32, h, w}, rng),
                                    Tensor::scalar<float>(0.02f),
                                    scalar_q8(DType::kUInt8, 0),
                                    q8(DType::kInt8, Shape{64, 32, 3, 3}, rng, -127, 127),
                                    random_tensor(Shape{64}, rng, 0.002f, 0.01f),
                                    Tensor(),
                                    Tensor::scalar<float>(0.3f),
                                    scalar_q8(DType::kUInt8, 0),
                                    i32(Shape{64}, rng, -900, 900),
                                    q8(DType::kUInt8, Shape{1, 64, oh, ow}, rng),
                                    Tensor::scalar<float>(0.1f),
                                    scalar_q8(DType::kUInt8, 128)};
    for (int threads : {2, 3})
      expect_matches(qc, in, QRun{Layout::kChannelsLast, threads, {}},
                     "banded QConv, stride " + std::to_string(stride) + ", " + std::to_string(threads) + " threads");
  }
  // 300 rows of 256 x 200: about 15M multiply-adds, three bands on three threads.
  NodeCase tf("MatMulIntegerToFloat", 1, 7, 1, {}, "streamline");
  const Tensor a = q8(DType::kUInt8, Shape{2, 150, 256}, rng), b = q8(DType::kInt8, Shape{256, 200}, rng, -127, 127);
  expect_matches(tf,
                 {a, b, Tensor::scalar<float>(0.03f), random_tensor(Shape{200}, rng, 0.01f, 0.02f),
                  scalar_q8(DType::kUInt8, 131), scalar_q8(DType::kInt8, 0), random_tensor(Shape{200}, rng, -1.f, 1.f)},
                 QRun{Layout::kPlain, 3, {false, true, false, true, false, true, true}}, "banded MatMulIntegerToFloat",
                 2e-4);
  // B larger than A (40 rows against 256 x 640, about 6.6M multiply-adds): one primitive on both
  // threads, per-column scales and the float bias across the whole row.
  const Tensor a2 = q8(DType::kUInt8, Shape{1, 40, 256}, rng), b2 = q8(DType::kInt8, Shape{256, 640}, rng, -127, 127);
  expect_matches(tf,
                 {a2, b2, Tensor::scalar<float>(0.03f), random_tensor(Shape{640}, rng, 0.01f, 0.02f),
                  scalar_q8(DType::kUInt8, 120), scalar_q8(DType::kInt8, 0), random_tensor(Shape{640}, rng, -1.f, 1.f)},
                 QRun{Layout::kPlain, 2, {false, true, false, true, false, true, true}},
                 "MatMulIntegerToFloat with B larger than A", 2e-4);
}

TEST(QKernels, QAddAndQGlobalAveragePoolMatchReference) {
  std::mt19937 rng(706);
  for (int iter = 0; iter < 12; ++iter) {
    const Shape s{1 + static_cast<int64_t>(rng() % 2), 1 + static_cast<int64_t>(rng() % 40),
                  1 + static_cast<int64_t>(rng() % 9), 1 + static_cast<int64_t>(rng() % 9)};
    const DType at = iter % 2 ? DType::kInt8 : DType::kUInt8, bt = iter % 3 ? DType::kUInt8 : DType::kInt8;
    const DType yt = iter % 4 < 2 ? DType::kUInt8 : DType::kInt8;
    const QRun r{iter % 2 ? Layout::kChannelsLast : Layout::kPlain,
                 1 + iter % 2,
                 {false, true, true, false, true, true, true, true}};
    NodeCase add("QAdd", 1, 8, 1, {}, "streamline");
    if (iter % 3 == 1) add.s("activation", "Relu");
    expect_matches(add,
                   {q8(at, s, rng), random_tensor(Shape{}, rng, 0.01f, 0.1f), scalar_q8(at, 10), q8(bt, s, rng),
                    random_tensor(Shape{}, rng, 0.01f, 0.1f), scalar_q8(bt, 7),
                    random_tensor(Shape{}, rng, 0.05f, 0.2f), scalar_q8(yt, yt == DType::kInt8 ? -3 : 60)},
                   r, "QAdd " + s.to_string());
    NodeCase gap("QGlobalAveragePool", 1, 5, 1, {}, "streamline");
    expect_matches(gap,
                   {q8(at, s, rng), random_tensor(Shape{}, rng, 0.01f, 0.1f), scalar_q8(at, 9),
                    random_tensor(Shape{}, rng, 0.001f, 0.05f), scalar_q8(yt, 2)},
                   QRun{r.layout, r.threads, {false, true, true, true, true}}, "QGlobalAveragePool " + s.to_string());
  }
}

TEST(QKernels, QMulAndBroadcastQAddMatchReference) {
  std::mt19937 rng(710);
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t n = 1 + iter % 2, c = 1 + static_cast<int64_t>(rng() % 70);
    const Shape s{n, c, 1 + static_cast<int64_t>(rng() % 9), 1 + static_cast<int64_t>(rng() % 9)};
    // B: the same shape, a [N or 1, C, 1, 1] channel vector (squeeze-and-excite), or one value.
    const Shape bs = iter % 3 == 0 ? s : iter % 3 == 1 ? Shape{iter % 2 ? n : 1, c, 1, 1} : Shape{};
    const DType at = iter % 2 ? DType::kInt8 : DType::kUInt8, bt = iter % 4 < 2 ? DType::kUInt8 : DType::kInt8;
    const QRun r{iter % 2 ? Layout::kChannelsLast : Layout::kPlain,
                 1 + iter % 2,
                 {false, true, true, bs.rank() != 4, true, true, true, true}};
    for (const char* op : {"QMul", "QAdd"}) {
      NodeCase c2(op, 1, 8, 1, {}, "streamline");
      if (iter % 4 == 3) c2.s("activation", "Relu");
      expect_matches(
          c2,
          {q8(at, s, rng), random_tensor(Shape{}, rng, 0.01f, 0.1f), scalar_q8(at, 3), q8(bt, bs, rng),
           random_tensor(Shape{}, rng, 0.01f, 0.1f), scalar_q8(bt, 9),
           random_tensor(Shape{}, rng, std::string(op) == "QMul" ? 0.05f : 0.01f, 0.3f), scalar_q8(DType::kUInt8, 64)},
          r, std::string(op) + " " + s.to_string() + " * " + bs.to_string());
    }
  }
}

TEST(QKernels, QLookupMapsEveryCode) {
  std::mt19937 rng(711);
  for (DType xt : {DType::kUInt8, DType::kInt8}) {
    for (int64_t n : {5, 64, 1000, 70000}) {
      Tensor table = q8(DType::kInt8, Shape{256}, rng);
      NodeCase lk("QLookup", 1, 2, 1, {}, "streamline");
      expect_matches(lk, {q8(xt, Shape{n}, rng), table}, QRun{Layout::kPlain, 2, {false, true}},
                     "QLookup " + std::to_string(n), 0.0);
    }
  }
}

TEST(QKernels, QScaleShiftAndQAveragePoolMatchReference) {
  std::mt19937 rng(712);
  for (int iter = 0; iter < 10; ++iter) {
    const int64_t c = 1 + static_cast<int64_t>(rng() % 40);
    const Shape s{1 + static_cast<int64_t>(iter % 2), c, 4 + static_cast<int64_t>(rng() % 9),
                  4 + static_cast<int64_t>(rng() % 9)};
    const DType xt = iter % 2 ? DType::kInt8 : DType::kUInt8, yt = iter % 3 ? DType::kUInt8 : DType::kInt8;
    const Layout layout = iter % 2 ? Layout::kChannelsLast : Layout::kPlain;
    NodeCase ss("QScaleShift", 1, 7, 1, {}, "streamline");
    if (iter % 3 == 1) ss.s("activation", "Relu");
    expect_matches(ss,
                   {q8(xt, s, rng), random_tensor(Shape{}, rng, 0.01f, 0.05f), scalar_q8(xt, 5),
                    random_tensor(Shape{c}, rng, 0.5f, 2.f), random_tensor(Shape{c}, rng, -1.f, 1.f),
                    random_tensor(Shape{}, rng, 0.02f, 0.1f), scalar_q8(yt, yt == DType::kInt8 ? -3 : 30)},
                   QRun{layout, 1 + iter % 2, {false, true, true, true, true, true, true}},
                   "QScaleShift " + s.to_string());
    NodeCase ap("QAveragePool", 1, 5, 1, {}, "streamline");
    const int64_t k = 2 + iter % 2, pad = iter % 3 == 0 ? 1 : 0;
    ap.ints("kernel_shape", {k, k}).ints("strides", {2, 2}).ints("pads", {pad, pad, pad, pad});
    if (iter % 4 == 1) ap.i("count_include_pad", 1);
    expect_matches(ap,
                   {q8(xt, s, rng), random_tensor(Shape{}, rng, 0.01f, 0.05f), scalar_q8(xt, 7),
                    random_tensor(Shape{}, rng, 0.01f, 0.05f), scalar_q8(yt, 4)},
                   QRun{layout, 1 + iter % 2, {false, true, true, true, true}}, "QAveragePool " + s.to_string());
  }
}

TEST(QKernels, Int8MaxPoolEqualsFloatMaxPool) {
  std::mt19937 rng(707);
  for (int iter = 0; iter < 12; ++iter) {
    const DType t = iter % 2 ? DType::kInt8 : DType::kUInt8;
    const Tensor x = q8(t,
                        Shape{1 + static_cast<int64_t>(iter % 2), 3 + static_cast<int64_t>(rng() % 20),
                              5 + static_cast<int64_t>(rng() % 9), 5 + static_cast<int64_t>(rng() % 9)},
                        rng);
    NodeCase mp("MaxPool", 12, 1);
    const int64_t k = 2 + iter % 2, pad = iter % 3 == 0 ? 1 : 0;
    mp.ints("kernel_shape", {k, k}).ints("strides", {2, 2}).ints("pads", {pad, pad, pad, pad});
    if (iter % 4 == 3) mp.i("ceil_mode", 1);
    EvalOptions o;
    o.num_threads = 1 + iter % 2;
    o.input_layout = iter % 2 ? Layout::kChannelsLast : Layout::kPlain;
    o.constant_mask = {false};
    auto got = evaluate_node(cpu_reg(), mp.graph(), mp.node(), std::vector<Tensor>{x}, o);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    Tensor xf = Tensor::empty(DType::kFloat32, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) xf.data<float>()[i] = static_cast<float>(element_as_double(x, i));
    auto want = mp.run(ref_reg(), {xf});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    ASSERT_EQ((*got)[0].shape(), (*want)[0].shape());
    ASSERT_EQ((*got)[0].dtype(), t);
    for (int64_t i = 0; i < (*want)[0].numel(); ++i)
      ASSERT_EQ(element_as_double((*got)[0], i), (*want)[0].data<float>()[i]) << "element " << i;
  }
}

TEST(QKernels, QuantizeDequantizeKeepChannelsLast) {
  std::mt19937 rng(708);
  const Tensor x = random_tensor(Shape{2, 5, 3, 4}, rng, -4.f, 4.f);
  NodeCase q("QuantizeLinear", 13, 3);
  expect_matches(q, {x, Tensor::scalar<float>(0.03f), scalar_q8(DType::kInt8, -3)},
                 QRun{Layout::kChannelsLast, 2, {false, true, true}}, "QuantizeLinear NHWC", 0.0);
  NodeCase dq("DequantizeLinear", 13, 3);
  expect_matches(
      dq, {q8(DType::kUInt8, Shape{2, 5, 3, 4}, rng), Tensor::scalar<float>(0.03f), scalar_q8(DType::kUInt8, 77)},
      QRun{Layout::kChannelsLast, 2, {false, true, true}}, "DequantizeLinear NHWC", 1e-6);
}

}  // namespace
}  // namespace streamline::ops::testing
