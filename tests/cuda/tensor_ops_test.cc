// The CUDA pooling, reduction, Cast, Clip and data-movement kernels. Without a GPU: registration,
// reshape() shapes and errors, and host emulations of the launch plans that reshape() leaves in the
// state (PoolDims, ReduceDims, StridedDims, read as pool.cu and tensor_ops.cu read them) against the
// CPU kernels. With a GPU (Gpu* suites): every kernel against the CPU reference on random shapes
// with fixed seeds; float16 runs against float32 on the same (fp16-rounded) inputs within 2e-3 of
// the largest reference magnitude; each kernel's run() captured into a CUDA graph; the view ops
// and Clip run in place.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/launch_tensor.h"

namespace streamline::ops::cuda_test {
namespace {

using cuda::PoolDims;
using cuda::PoolOp;
using cuda::ReduceDims;
using cuda::ReduceOp;
using cuda::StridedDims;
using testing::OneNode;
using Attrs = std::map<std::string, graph::Attribute>;

constexpr double kHalfTolerance = 2e-3;

Tensor i64(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

Tensor to_half(const Tensor& t) {
  if (t.dtype() != DType::kFloat32) return t;
  Tensor h = Tensor::empty(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) h.data<uint16_t>()[i] = float_to_half(t.data<float>()[i]);
  return h;
}
Tensor to_float(const Tensor& t) {
  if (t.dtype() != DType::kFloat16) return t;
  Tensor f = Tensor::empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = half_to_float(t.data<uint16_t>()[i]);
  return f;
}

// One node with its inputs. `constant[i]`: input i is a constant (its value known at create and
// reshape); empty means every input but input 0.
struct Case {
  Case(std::string o, int v, std::vector<Tensor> i, Attrs a = {})
      : op(std::move(o)), opset(v), in(std::move(i)), attrs(std::move(a)) {}

  std::string op;
  int opset = 13;
  std::vector<Tensor> in;
  Attrs attrs;
  std::vector<bool> constant;
  size_t outputs = 1;

  std::vector<bool> mask() const {
    if (!constant.empty()) return constant;
    std::vector<bool> m(in.size(), true);
    if (!m.empty()) m[0] = false;
    return m;
  }
  std::unique_ptr<OneNode> node() const {
    auto n = make_node(op, "", in, attrs);
    graph::Node& node = n->g.node(n->id);
    node.opset = opset;
    for (size_t k = 1; k < outputs; ++k) node.outputs.push_back(n->g.add_value(std::to_string(k) + "y"));
    return n;
  }
};

// Creates the case's kernel from `reg` for `device` (keyed by the dtype of input 0) and reshapes
// it, on the host.
Result<Prepared> prepare_on(const KernelRegistry& reg, Device device, const OneNode& n, const Case& c) {
  const std::vector<bool> mask = c.mask();
  std::vector<DType> dtypes(c.in.size(), DType::kUndefined);
  std::vector<const Tensor*> constants(c.in.size(), nullptr);
  std::vector<TensorInfo> infos(c.in.size());
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.in[i].defined()) continue;
    infos[i].dtype = dtypes[i] = c.in[i].dtype();
    infos[i].shape = c.in[i].shape();
    if (mask[i]) infos[i].value = constants[i] = &c.in[i];
  }
  SL_ASSIGN_OR_RETURN(const KernelDef* def, reg.find(c.op, "", c.opset, device, selector_dtype(dtypes, 0)));
  KernelCreateArgs args{n.g, n.node(), constants, dtypes, KernelOptions{}};
  Prepared p;
  SL_ASSIGN_OR_RETURN(p.kernel, def->create(args));
  SL_ASSIGN_OR_RETURN(p.rr, p.kernel->reshape(infos));
  return p;
}

// The case's CUDA kernel, created and reshaped on the host.
Result<Prepared> prepare(const OneNode& n, const Case& c) {
  return prepare_on(cuda_reg(), Device::kCuda, n, c);
}

Result<Prepared> prepare(const Case& c) {
  return prepare(*c.node(), c);
}

// Output shape of the CUDA kernel, or [-1] with a test failure naming the error.
Shape shape_of(const Case& c) {
  auto p = prepare(c);
  if (!p.ok()) {
    ADD_FAILURE() << c.op << ": " << p.status().to_string();
    return Shape{-1};
  }
  return p->rr.outputs.at(0).shape;
}

Status status_of(const Case& c) {
  return prepare(c).status();
}

// The CPU reference: the CPU kernel, which defines the semantics the CUDA kernels match; for the
// pools the plain reference kernel (the CPU one is oneDNN plus corrections).
Result<std::vector<Tensor>> reference(const Case& c) {
  auto n = c.node();
  const KernelRegistry& reg = c.op.find("Pool") != std::string::npos ? testing::ref_reg() : testing::cpu_reg();
  EvalOptions eo;
  eo.constant_mask = c.mask();
  return evaluate_node(reg, n->g, n->node(), c.in, eo);
}

void expect_same_bytes(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16;
}

// Equal element for element: floats by value (float16 widened; NaN equals NaN, whatever its
// payload), everything else byte for byte.
void expect_identical(const Tensor& got, const Tensor& want) {
  if (!is_float(got.dtype()) || !is_float(want.dtype())) {
    expect_same_bytes(got, want);
    return;
  }
  const Tensor g = to_float(got), w = to_float(want);
  ASSERT_EQ(g.shape(), w.shape());
  int64_t differ = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float a = g.data<float>()[i], b = w.data<float>()[i];
    if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++differ;
  }
  EXPECT_EQ(differ, 0) << "of " << w.numel() << " elements";
}

// ---------------------------------------------------------------------------------------------
// Host emulations of the device kernels, reading the launch plans exactly as the .cu files do.

Tensor emulate_pool(const PoolDims& d, PoolOp op, const Tensor& x, const Shape& y_shape) {
  Tensor y = Tensor::empty(DType::kFloat32, y_shape);
  const float* xp = x.data<float>();
  for (int64_t i = 0; i < d.planes * d.out_h * d.out_w; ++i) {
    const int64_t ow = i % d.out_w, oh = (i / d.out_w) % d.out_h, plane = i / (d.out_w * d.out_h);
    const int64_t h0 = oh * d.s_h - d.pad_top, w0 = ow * d.s_w - d.pad_left;
    float acc = op == PoolOp::kMax ? -INFINITY : 0.f;
    int64_t inside = 0, ch = 0, cw = 0;
    for (int64_t a = 0; a < d.k_h; ++a) {
      const int64_t h = h0 + a * d.d_h;
      if (h < d.limit_h) ++ch;
      if (h < 0 || h >= d.in_h) continue;
      for (int64_t b = 0; b < d.k_w; ++b) {
        const int64_t w = w0 + b * d.d_w;
        if (w < 0 || w >= d.in_w) continue;
        const float v = xp[plane * d.in_h * d.in_w + h * d.in_w + w];
        acc = op == PoolOp::kMax ? std::fmax(acc, v) : acc + v;
        ++inside;
      }
    }
    for (int64_t b = 0; b < d.k_w; ++b)
      if (w0 + b * d.d_w < d.limit_w) ++cw;
    if (op == PoolOp::kAvg) {
      const int64_t count = d.count_include_pad ? ch * cw : inside;
      acc = count > 0 ? acc / static_cast<float>(count) : 0.f;
    }
    y.data<float>()[i] = acc;
  }
  return y;
}

int64_t offset_of(int64_t i, int32_t rank, const int64_t* dims, const int64_t* strides) {
  int64_t off = 0;
  for (int k = rank - 1; k >= 0; --k) {
    off += (i % dims[k]) * strides[k];
    i /= dims[k];
  }
  return off;
}

Tensor emulate_reduce(const ReduceDims& d, ReduceOp op, const Tensor& x, const Shape& y_shape) {
  Tensor y = Tensor::empty(DType::kFloat32, y_shape);
  EXPECT_EQ(d.out_numel, y.numel());
  for (int64_t o = 0; o < d.out_numel; ++o) {
    const int64_t base = offset_of(o, d.kept_rank, d.kept, d.kept_stride);
    double acc = op == ReduceOp::kMax ? -INFINITY : 0.0;
    for (int64_t r = 0; r < d.red_numel; ++r) {
      const double v = x.data<float>()[base + offset_of(r, d.red_rank, d.red, d.red_stride)];
      acc = op == ReduceOp::kMax ? std::fmax(acc, v) : acc + v;
    }
    y.data<float>()[o] = static_cast<float>(op == ReduceOp::kMean ? acc / static_cast<double>(d.red_numel) : acc);
  }
  return y;
}

Tensor emulate_strided(const StridedDims& d, const Tensor& x, const Shape& y_shape) {
  Tensor y = Tensor::empty(x.dtype(), y_shape);
  const size_t esz = dtype_size(x.dtype());
  for (int64_t i = 0; i < y.numel(); ++i)
    std::memcpy(y.data<uint8_t>() + i * static_cast<int64_t>(esz),
                x.data<uint8_t>() + (d.offset + offset_of(i, d.rank, d.out, d.in_stride)) * static_cast<int64_t>(esz),
                esz);
  return y;
}

// ---------------------------------------------------------------------------------------------
// Random cases shared by the host-emulation and the GPU tests.

Shape random_shape(std::mt19937& rng, size_t rank, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  Shape s;
  for (size_t i = 0; i < rank; ++i) s.push_back(dist(rng));
  return s;
}

std::vector<Case> pool_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  std::uniform_int_distribution<int> coin(0, 1), k(1, 4), st(1, 3);
  for (int i = 0; i < 12; ++i) {
    const Shape x{1 + coin(rng), 1 + 3 * coin(rng), 9 + k(rng) * 3, 8 + k(rng) * 2};
    const int64_t kh = k(rng), kw = k(rng);
    Attrs a{{"kernel_shape", ints({kh, kw})}, {"strides", ints({st(rng), st(rng)})}};
    if (i % 3 == 0) a["pads"] = ints({kh / 2, kw / 2, (kh - 1) / 2, kw / 2});
    if (i % 4 == 1) a["ceil_mode"] = one_int(1);
    if (i % 5 == 2) a["dilations"] = ints({2, 1});
    if (i % 6 == 3) a["auto_pad"] = str(i % 12 == 3 ? "SAME_UPPER" : "SAME_LOWER");
    const Tensor in = random_tensor(x, rng);
    cases.push_back(Case{"MaxPool", 12, {in}, a});
    Attrs avg = a;
    avg.erase("dilations");
    avg["count_include_pad"] = one_int(i % 2);
    cases.push_back(Case{"AveragePool", 11, {in}, avg});
  }
  // ResNet's stem pool, GoogLeNet's ceil-mode pool, a 1-D pool, and the global pools.
  cases.push_back(Case{"MaxPool",
                       12,
                       {random_tensor({1, 8, 112, 112}, rng)},
                       {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}});
  cases.push_back(Case{"MaxPool",
                       12,
                       {random_tensor({1, 8, 28, 28}, rng)},
                       {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"ceil_mode", one_int(1)}}});
  cases.push_back(Case{"AveragePool",
                       11,
                       {random_tensor({2, 3, 17}, rng)},
                       {{"kernel_shape", ints({4})}, {"strides", ints({3})}, {"pads", ints({1, 2})}}});
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (const Shape& s : {Shape{2, 64, 7, 7}, Shape{1, 5, 1, 1}, Shape{1, 3, 33}})
      cases.push_back(Case{op, 1, {random_tensor(s, rng)}, {}});
  return cases;
}

std::vector<Case> reduce_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  const std::vector<std::vector<int64_t>> axes{{-1}, {1}, {0, 2}, {1, 2}, {0}, {0, 1, 2}, {}, {2, -3}};
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax"})
    for (size_t i = 0; i < axes.size(); ++i) {
      const Shape s = random_shape(rng, 3, 1, 40);
      Attrs a{{"keepdims", one_int(static_cast<int64_t>(i % 2))}};
      if (!axes[i].empty()) a["axes"] = ints(axes[i]);
      cases.push_back(Case{op, 11, {random_tensor(s, rng)}, a});
    }
  // BERT's LayerNorm pieces, and a long reduction over a kept inner dim.
  cases.push_back(Case{"ReduceMean", 13, {random_tensor({2, 16, 768}, rng)}, {{"axes", ints({-1})}}});
  cases.push_back(Case{"ReduceSum", 11, {random_tensor({3000, 5}, rng)}, {{"axes", ints({0})}}});
  return cases;
}

std::vector<Case> slice_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int i = 0; i < 10; ++i) {
    const Shape s = random_shape(rng, 1 + static_cast<size_t>(i % 4), 1, 9);
    std::uniform_int_distribution<int64_t> v(-12, 12), step(-3, 3);
    std::vector<int64_t> starts, ends, axes, steps;
    for (size_t d = 0; d < s.rank(); ++d) {
      if ((i + static_cast<int>(d)) % 3 == 2) continue;  // leave some axes whole
      starts.push_back(v(rng));
      ends.push_back(d % 2 ? INT64_MAX : v(rng));
      axes.push_back(d % 2 ? static_cast<int64_t>(d) - static_cast<int64_t>(s.rank()) : static_cast<int64_t>(d));
      int64_t t = step(rng);
      steps.push_back(t == 0 ? 1 : t);
    }
    cases.push_back(Case{"Slice", 13, {random_tensor(s, rng), i64(starts), i64(ends), i64(axes), i64(steps)}, {}});
  }
  // BERT's slice of the position ids, an int64 slice, and the opset 1-9 attribute form.
  cases.push_back(Case{"Slice", 13, {random_tensor({1, 512}, rng), i64({0}), i64({128}), i64({1}), i64({1})}, {}});
  cases.push_back(Case{"Slice", 13, {i64({5, 6, 7, 8, 9}), i64({-1}), i64({-6}), i64({0}), i64({-2})}, {}});
  cases.push_back(Case{"Slice",
                       9,
                       {random_tensor({4, 6, 5}, rng)},
                       {{"starts", ints({1, -4})}, {"ends", ints({3, 100})}, {"axes", ints({0, 2})}}});
  return cases;
}

// ---------------------------------------------------------------------------------------------
// No GPU needed.

TEST(CudaTensorOps, RegisterEveryOpForItsDtypes) {
  const KernelRegistry& reg = cuda_reg();
  const DType floats[] = {DType::kFloat32, DType::kFloat16};
  for (const char* op :
       {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Clip", "ReduceMean", "ReduceSum", "ReduceMax"})
    for (DType t : floats) {
      auto def = reg.find(op, "", 13, Device::kCuda, t);
      ASSERT_TRUE(def.ok()) << op << " " << dtype_name(t) << ": " << def.status().to_string();
      EXPECT_EQ((*def)->provider, "cuda");
      EXPECT_EQ((*def)->dtype, t) << op;
    }
  EXPECT_TRUE(reg.find("ReduceMean", "", 18, Device::kCuda, DType::kFloat16).ok());
  EXPECT_FALSE(reg.find("MaxPool", "", 13, Device::kCuda, DType::kInt64).ok());
  for (const char* op :
       {"Concat", "Slice", "Gather", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8}) {
      auto def = reg.find(op, "", 13, Device::kCuda, t);
      ASSERT_TRUE(def.ok()) << op << " " << dtype_name(t);
      EXPECT_EQ((*def)->dtype, DType::kUndefined) << op;
      EXPECT_EQ((*def)->dtype_input, 0) << op;
    }
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kInt64, DType::kBool})
    EXPECT_TRUE(reg.find("Cast", "", 13, Device::kCuda, t).ok()) << dtype_name(t);
  EXPECT_FALSE(reg.find("Cast", "", 13, Device::kCuda, DType::kFloat64).ok());
}

TEST(CudaTensorOps, PoolShapesAndErrors) {
  const Tensor x = Tensor::empty(DType::kFloat32, {1, 64, 112, 112});
  const Attrs stem{{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
  EXPECT_EQ(shape_of(Case{"MaxPool", 12, {x}, stem}), (Shape{1, 64, 56, 56}));
  EXPECT_EQ(shape_of(Case{"MaxPool", 12, {Tensor::empty(DType::kFloat16, {1, 64, 112, 112})}, stem}),
            (Shape{1, 64, 56, 56}));
  const Attrs ceil{{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"ceil_mode", one_int(1)}};
  EXPECT_EQ(shape_of(Case{"MaxPool", 12, {Tensor::empty(DType::kFloat32, {1, 8, 28, 28})}, ceil}),
            (Shape{1, 8, 14, 14}));
  EXPECT_EQ(
      shape_of(Case{"AveragePool",
                    11,
                    {Tensor::empty(DType::kFloat32, {1, 2, 9, 9})},
                    {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}, {"auto_pad", str("SAME_UPPER")}}}),
      (Shape{1, 2, 5, 5}));
  EXPECT_EQ(
      shape_of(Case{"AveragePool", 11, {Tensor::empty(DType::kFloat32, {2, 3, 17})}, {{"kernel_shape", ints({4})}}}),
      (Shape{2, 3, 14}));
  EXPECT_EQ(shape_of(Case{"GlobalAveragePool", 1, {x}, {}}), (Shape{1, 64, 1, 1}));
  EXPECT_EQ(shape_of(Case{"GlobalMaxPool", 1, {Tensor::empty(DType::kFloat32, {2, 3, 5, 6, 7})}, {}}),
            (Shape{2, 3, 1, 1, 1}));

  // MaxPool's Indices output is refused at reshape, naming the node.
  Case indices{"MaxPool", 12, {x}, stem};
  indices.outputs = 2;
  const Status s = status_of(indices);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("Indices"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("MaxPool 'node0'"), std::string::npos) << s.message();
  EXPECT_EQ(
      status_of(
          Case{"MaxPool", 12, {Tensor::empty(DType::kFloat32, {1, 2, 4, 4, 4})}, {{"kernel_shape", ints({2, 2, 2})}}})
          .code(),
      StatusCode::kUnsupported);
  EXPECT_EQ(status_of(Case{"MaxPool", 12, {x}, {{"kernel_shape", ints({3})}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      status_of(Case{"MaxPool", 12, {Tensor::empty(DType::kFloat32, {1, 1, 2, 2})}, {{"kernel_shape", ints({3, 3})}}})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of(Case{"MaxPool", 12, {x}, {}}).code(), StatusCode::kInvalidArgument);  // no kernel_shape
}

TEST(CudaTensorOps, PoolShapesMatchTheCpuKernel) {
  std::mt19937 rng(11);
  for (const Case& c : pool_cases(rng)) {
    SCOPED_TRACE(c.op + " " + c.in[0].shape().to_string());
    auto want = reference(c);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_EQ(shape_of(c), (*want)[0].shape());
  }
}

TEST(CudaTensorOps, DataMovementShapesAndErrors) {
  const auto f = [](const Shape& s) { return Tensor::empty(DType::kFloat32, s); };
  EXPECT_EQ(shape_of(Case{"Concat", 13, {f({2, 3}), f({2, 5}), f({2, 1})}, {{"axis", one_int(1)}}}), (Shape{2, 9}));
  EXPECT_EQ(shape_of(Case{"Concat", 13, {f({2, 3}), f({4, 3})}, {{"axis", one_int(-2)}}}), (Shape{6, 3}));
  const Status bad_axis = status_of(Case{"Concat", 13, {f({2, 3}), f({2, 3})}, {{"axis", one_int(2)}}});
  EXPECT_EQ(bad_axis.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_axis.message().find("Concat 'node0'"), std::string::npos) << bad_axis.message();
  EXPECT_NE(bad_axis.message().find("out of range"), std::string::npos) << bad_axis.message();
  EXPECT_EQ(status_of(Case{"Concat", 13, {f({2, 3}), f({3, 3})}, {{"axis", one_int(1)}}}).code(),
            StatusCode::kInvalidArgument);

  EXPECT_EQ(shape_of(Case{"Slice", 13, {f({4, 10}), i64({1, -3}), i64({3, 100}), i64({0, 1}), i64({1, 2})}}),
            (Shape{2, 2}));
  EXPECT_EQ(shape_of(Case{"Slice", 13, {f({4, 10}), i64({-1}), i64({INT64_MIN}), i64({1}), i64({-1})}}),
            (Shape{4, 10}));
  EXPECT_EQ(shape_of(Case{"Slice", 9, {f({4, 10})}, {{"starts", ints({1})}, {"ends", ints({3})}}}), (Shape{2, 10}));
  // Starts only known at run time: refused, naming the input.
  Case runtime_starts{"Slice", 13, {f({4, 10}), i64({0}), i64({2})}, {}};
  runtime_starts.constant = {false, false, true};
  const Status rs = status_of(runtime_starts);
  EXPECT_EQ(rs.code(), StatusCode::kUnsupported);
  EXPECT_NE(rs.message().find("'starts'"), std::string::npos) << rs.message();
  EXPECT_EQ(status_of(Case{"Slice", 13, {f({4, 10}), i64({0}), i64({2}), i64({2})}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of(Case{"Slice", 13, {f({4, 10}), i64({0}), i64({2}), i64({0}), i64({0})}}).code(),
            StatusCode::kInvalidArgument);

  const Tensor idx = Tensor::from_vector<int32_t>(Shape{2, 3}, {0, 1, 2, -1, -2, 0});
  Case gather{"Gather", 13, {f({5, 4, 3}), idx}, {{"axis", one_int(1)}}};
  gather.constant = {false, false};  // indices at run time are fine
  EXPECT_EQ(shape_of(gather), (Shape{5, 2, 3, 3}));
  EXPECT_EQ(shape_of(Case{"Gather", 13, {f({5, 4}), Tensor::scalar<int64_t>(2)}}), (Shape{4}));
  EXPECT_EQ(status_of(Case{"Gather", 13, {f({5, 4}), idx}, {{"axis", one_int(-3)}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of(Case{"Gather", 13, {f({5, 4}), f({2})}}).code(), StatusCode::kInvalidArgument);
}

TEST(CudaTensorOps, ViewShapesAreInPlace) {
  const auto f = [](const Shape& s) { return Tensor::empty(DType::kFloat32, s); };
  const std::vector<std::pair<Case, Shape>> cases{
      {Case{"Reshape", 13, {f({2, 3, 4}), i64({0, -1})}}, Shape{2, 12}},
      {Case{"Flatten", 13, {f({2, 3, 4})}, {{"axis", one_int(2)}}}, Shape{6, 4}},
      {Case{"Squeeze", 13, {f({1, 3, 1}), i64({0})}}, Shape{3, 1}},
      {Case{"Squeeze", 11, {f({1, 3, 1})}}, Shape{3}},
      {Case{"Unsqueeze", 13, {f({3}), i64({0, -1})}}, Shape{1, 3, 1}},
      {Case{"Unsqueeze", 11, {f({3})}, {{"axes", ints({1})}}}, Shape{3, 1}},
      {Case{"Identity", 13, {Tensor::empty(DType::kInt64, {7})}}, Shape{7}},
      {Case{"Dropout", 13, {f({2, 2})}}, Shape{2, 2}}};
  for (const auto& [c, want] : cases) {
    SCOPED_TRACE(c.op + " opset " + std::to_string(c.opset));
    auto p = prepare(c);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->rr.outputs[0].shape, want);
    EXPECT_EQ(p->rr.outputs[0].dtype, c.in[0].dtype());
    ASSERT_FALSE(p->rr.inplace.empty());
    EXPECT_EQ(p->rr.inplace[0], 0);
  }
  Case mask{"Dropout", 13, {f({2, 2})}};
  mask.outputs = 2;
  auto p = prepare(mask);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->rr.outputs.size(), 2u);
  EXPECT_EQ(p->rr.outputs[1].dtype, DType::kBool);
  Case old_mask = mask;
  old_mask.opset = 7;  // a float mask: not written by the CUDA kernel
  EXPECT_EQ(status_of(old_mask).code(), StatusCode::kUnsupported);
  const Status bad = status_of(Case{"Reshape", 13, {f({2, 3}), i64({4, -1})}});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("Reshape 'node0'"), std::string::npos) << bad.message();
  EXPECT_EQ(status_of(Case{"Squeeze", 13, {f({2, 3}), i64({0})}}).code(), StatusCode::kInvalidArgument);
}

// The shape rules are shared (ops/data_shapes.h, ops/op_params.h): the CUDA and the CPU kernel of
// a node give the same outputs, or fail with the same code and message.
TEST(CudaTensorOps, ShapesAndErrorsMatchTheCpuKernel) {
  const auto f = [](const Shape& s) { return Tensor::empty(DType::kFloat32, s); };
  Case unsqueeze_no_axes{"Unsqueeze", 13, {f({3})}};
  Case dropout_mask{"Dropout", 13, {f({2, 2})}};
  dropout_mask.outputs = 2;
  const std::vector<Case> cases{
      Case{"Transpose", 13, {f({2, 3, 4})}},
      Case{"Transpose", 13, {f({2, 3, 4})}, {{"perm", ints({1, 2, 0})}}},
      Case{"Transpose", 13, {f({2, 3, 4})}, {{"perm", ints({0, 0, 1})}}},
      Case{"Transpose", 13, {f({2, 3, 4})}, {{"perm", ints({1, 0})}}},
      Case{"Transpose", 13, {f({2, 3})}, {{"perm", ints({})}}},  // present but empty: not "reverse"
      Case{"ReduceMean", 13, {f({2, 3})}, {{"axes", ints({2})}}},
      Case{"ReduceMean", 13, {f({2, 3})}, {{"axes", ints({-1, 0})}, {"keepdims", one_int(0)}}},
      Case{"ReduceSum", 13, {f({2, 3, 4}), i64({-1})}},
      Case{"ReduceMax", 18, {f({2, 3}), i64({5})}},
      Case{"ReduceSum", 13, {f({2, 3})}, {{"noop_with_empty_axes", one_int(1)}}},
      Case{"Softmax", 13, {f({2, 3})}, {{"axis", one_int(2)}}},
      Case{"GlobalAveragePool", 1, {f({1, 2, 3, 4, 5})}},
      Case{"Concat", 13, {f({2, 3}), f({3, 3})}, {{"axis", one_int(1)}}},
      Case{"Concat", 13, {f({2, 3}), f({2, 3})}, {{"axis", one_int(-3)}}},
      Case{"Concat", 13, {f({2, 3}), f({2, 3})}},  // no axis attribute
      Case{"Gather", 13, {f({5, 4}), i64({1, 2})}, {{"axis", one_int(-1)}}},
      Case{"Gather", 13, {f({5, 4}), i64({1})}, {{"axis", one_int(-3)}}},
      Case{"Gather", 13, {f({5, 4}), f({1})}},
      Case{"Reshape", 13, {f({2, 3}), i64({4, -1})}},
      Case{"Reshape", 13, {f({2, 3}), i64({-1, -1})}},
      Case{"Reshape", 4, {f({2, 3})}},  // no shape attribute
      Case{"Flatten", 13, {f({2, 3})}, {{"axis", one_int(3)}}},
      Case{"Squeeze", 13, {f({2, 3}), i64({0})}},
      Case{"Unsqueeze", 13, {f({2, 3}), i64({1, 1})}},
      unsqueeze_no_axes,
      dropout_mask};
  for (const Case& c : cases) {
    auto n = c.node();
    std::string trace = c.op + " opset " + std::to_string(c.opset);
    for (const auto& [name, a] : c.attrs) trace += " " + name;
    SCOPED_TRACE(trace);
    auto gpu = prepare_on(cuda_reg(), Device::kCuda, *n, c);
    auto cpu = prepare_on(testing::cpu_reg(), Device::kCpu, *n, c);
    ASSERT_EQ(gpu.ok(), cpu.ok()) << "CUDA: " << gpu.status().to_string() << "; CPU: " << cpu.status().to_string();
    if (!cpu.ok()) {
      EXPECT_EQ(gpu.status().code(), cpu.status().code());
      EXPECT_EQ(gpu.status().message(), cpu.status().message());
      EXPECT_NE(cpu.status().message().find(c.op + " 'node0'"), std::string::npos) << cpu.status().message();
      continue;
    }
    ASSERT_EQ(gpu->rr.outputs.size(), cpu->rr.outputs.size());
    for (size_t k = 0; k < cpu->rr.outputs.size(); ++k) {
      EXPECT_EQ(gpu->rr.outputs[k].shape, cpu->rr.outputs[k].shape) << "output " << k;
      EXPECT_EQ(gpu->rr.outputs[k].dtype, cpu->rr.outputs[k].dtype) << "output " << k;
    }
  }
  // The CUDA Transpose used to read a present but empty perm as "reverse the dims".
  EXPECT_EQ(status_of(Case{"Transpose", 13, {f({2, 3})}, {{"perm", ints({})}}}).message(),
            "Transpose 'node0': perm has 0 entries for rank 2");
}

TEST(CudaTensorOps, CastClipReduceShapesAndErrors) {
  const auto f = [](const Shape& s) { return Tensor::empty(DType::kFloat32, s); };
  for (DType to : {DType::kFloat16, DType::kFloat32, DType::kInt64, DType::kInt32, DType::kBool}) {
    auto p = prepare(Case{"Cast", 13, {f({2, 3})}, {{"to", one_int(static_cast<int64_t>(to))}}});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->rr.outputs[0].dtype, to);
    EXPECT_EQ(p->rr.outputs[0].shape, (Shape{2, 3}));
    EXPECT_EQ(p->rr.inplace.at(0), to == DType::kFloat32 ? 0 : -1);
  }
  EXPECT_EQ(status_of(Case{"Cast", 13, {f({2})}, {{"to", one_int(static_cast<int64_t>(DType::kFloat64))}}}).code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(status_of(Case{"Cast", 13, {f({2})}, {}}).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(shape_of(Case{"Clip", 13, {f({4, 5}), Tensor::scalar<float>(0.f), Tensor::scalar<float>(6.f)}}),
            (Shape{4, 5}));
  EXPECT_EQ(shape_of(Case{"Clip", 6, {f({4, 5})}, {{"min", one_float(0.f)}}}), (Shape{4, 5}));
  EXPECT_EQ(status_of(Case{"Clip", 13, {f({4}), Tensor::scalar<int64_t>(0)}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of(Case{"Clip", 13, {f({4}), f({2})}}).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(status_of(Case{"Clip", 13, {Tensor::empty(DType::kInt64, {4})}}).ok());  // no int64 def

  EXPECT_EQ(shape_of(Case{"ReduceMean", 13, {f({2, 3, 4})}, {{"axes", ints({-1})}}}), (Shape{2, 3, 1}));
  EXPECT_EQ(shape_of(Case{"ReduceMean", 13, {f({2, 3, 4})}, {{"axes", ints({0, 2})}, {"keepdims", one_int(0)}}}),
            (Shape{3}));
  EXPECT_EQ(shape_of(Case{"ReduceMean", 18, {f({2, 3, 4}), i64({1})}}), (Shape{2, 1, 4}));
  EXPECT_EQ(shape_of(Case{"ReduceSum", 13, {f({2, 3, 4}), i64({0, 1})}, {{"keepdims", one_int(0)}}}), (Shape{4}));
  EXPECT_EQ(shape_of(Case{"ReduceMax", 13, {f({2, 3, 4})}, {{"keepdims", one_int(0)}}}), (Shape{}));
  EXPECT_EQ(shape_of(Case{"ReduceSum", 13, {f({2, 3})}, {{"noop_with_empty_axes", one_int(1)}}}), (Shape{2, 3}));
  const Status axis = status_of(Case{"ReduceMean", 13, {f({2, 3})}, {{"axes", ints({2})}}});
  EXPECT_EQ(axis.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(axis.message().find("ReduceMean 'node0'"), std::string::npos) << axis.message();
  Case runtime_axes{"ReduceSum", 13, {f({2, 3}), i64({0})}, {}};
  runtime_axes.constant = {false, false};
  EXPECT_EQ(status_of(runtime_axes).code(), StatusCode::kUnsupported);
}

TEST(CudaTensorOps, PoolPlansMatchTheReference) {
  std::mt19937 rng(12);
  for (const Case& c : pool_cases(rng)) {
    SCOPED_TRACE(c.op + " " + c.in[0].shape().to_string());
    auto p = prepare(c);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto want = reference(c);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const Shape& y = p->rr.outputs[0].shape;
    const bool global = c.op.rfind("Global", 0) == 0, max = c.op.find("Max") != std::string::npos;
    const Tensor got = global ? emulate_reduce(*static_cast<const ReduceDims*>(p->rr.state.get()),
                                               max ? ReduceOp::kMax : ReduceOp::kMean, c.in[0], y)
                              : emulate_pool(*static_cast<const PoolDims*>(p->rr.state.get()),
                                             max ? PoolOp::kMax : PoolOp::kAvg, c.in[0], y);
    expect_close(got, (*want)[0], 1e-6);
  }
}

TEST(CudaTensorOps, ReducePlansMatchTheReference) {
  std::mt19937 rng(13);
  for (const Case& c : reduce_cases(rng)) {
    SCOPED_TRACE(c.op + " " + c.in[0].shape().to_string());
    auto p = prepare(c);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto want = reference(c);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const ReduceOp op = c.op == "ReduceMax" ? ReduceOp::kMax : c.op == "ReduceSum" ? ReduceOp::kSum : ReduceOp::kMean;
    const auto* dims = static_cast<const ReduceDims*>(p->rr.state.get());
    ASSERT_NE(dims, nullptr);
    expect_close(emulate_reduce(*dims, op, c.in[0], p->rr.outputs[0].shape), (*want)[0], 1e-6);
  }
}

TEST(CudaTensorOps, SlicePlansMatchTheCpuKernel) {
  std::mt19937 rng(14);
  for (const Case& c : slice_cases(rng)) {
    SCOPED_TRACE("Slice " + c.in[0].shape().to_string());
    auto p = prepare(c);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto want = reference(c);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    expect_same_bytes(
        emulate_strided(*static_cast<const StridedDims*>(p->rr.state.get()), c.in[0], p->rr.outputs[0].shape),
        (*want)[0]);
  }
}

// ---------------------------------------------------------------------------------------------
// On a GPU: against the CPU reference.

struct GpuRun {
  bool half = false;      // float32 inputs handed over as float16 (outputs converted back)
  bool capture = false;   // run() captured into a CUDA graph, which is then launched
  bool in_place = false;  // output 0 written into input 0's buffer
};

// Runs the case's CUDA kernel on device copies of its inputs; outputs start as NaN bytes.
Result<std::vector<Tensor>> run_gpu(const Case& c, const GpuRun& opt) {
  Case dc = c;
  if (opt.half)
    for (Tensor& t : dc.in)
      if (t.defined()) t = to_half(t);
  auto n = dc.node();
  SL_ASSIGN_OR_RETURN(Prepared p, prepare(*n, dc));
  size_t total = p.rr.workspace_bytes + exec::cuda::kDeviceAlignment;
  for (const Tensor& t : dc.in) total += t.nbytes() + exec::cuda::kDeviceAlignment;
  for (const OutputInfo& o : p.rr.outputs)
    total += static_cast<size_t>(o.shape.numel()) * dtype_size(o.dtype) + exec::cuda::kDeviceAlignment;
  SL_ASSIGN_OR_RETURN(auto arena, exec::cuda::DeviceArena::create(total));
  SL_ASSIGN_OR_RETURN(exec::cuda::CudaStream stream, exec::cuda::CudaStream::create());
  const cudaStream_t s = stream.get();
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> dev_in, upload_inputs(*arena, dc.in, s));
  std::vector<Tensor> dev_out;
  for (size_t k = 0; k < p.rr.outputs.size(); ++k) {
    const OutputInfo& o = p.rr.outputs[k];
    const size_t bytes = static_cast<size_t>(o.shape.numel()) * dtype_size(o.dtype);
    void* d = nullptr;
    if (k == 0 && opt.in_place) {
      if (bytes != dev_in[0].nbytes()) return invalid_argument("in place: output 0 and input 0 differ in size");
      d = dev_in[0].raw();
    } else {
      SL_ASSIGN_OR_RETURN(d, arena->take(bytes));
      SL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d, 0xFF, bytes, s), "output");
    }
    dev_out.push_back(Tensor::view(o.dtype, o.shape, d));
  }
  SL_ASSIGN_OR_RETURN(void* ws, arena->take(p.rr.workspace_bytes));
  const RunContext rc = device_run_context(p, dev_in, dev_out, ws, s);
  if (opt.capture) {
    SL_RETURN_IF_ERROR(run_in_cuda_graph(*p.kernel, rc, s));
  } else {
    SL_RETURN_IF_ERROR(p.kernel->run(rc));
  }
  std::vector<Tensor> out;
  for (const Tensor& d : dev_out) {
    Tensor h = Tensor::empty(d.dtype(), d.shape());
    SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h.raw(), d.raw(), d.nbytes(), cudaMemcpyDeviceToHost, s), "output");
    out.push_back(h);
  }
  SL_RETURN_IF_ERROR(stream.synchronize());
  return out;
}

// Every output of the CUDA kernel against the CPU reference (`ref`, or the same case): within
// rel * max|reference| for floats (kHalfTolerance with opt.half), identical when rel < 0.
void check_on_gpu(const Case& c, double rel, const GpuRun& opt = {}, const Case* ref = nullptr) {
  Case r = ref != nullptr ? *ref : c;
  if (opt.half)
    for (Tensor& t : r.in)
      if (t.defined()) t = to_float(to_half(t));
  auto want = reference(r);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = run_gpu(c, opt);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < want->size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    if (rel < 0)
      expect_identical((*got)[k], (*want)[k]);
    else
      expect_close(to_float((*got)[k]), to_float((*want)[k]), opt.half ? kHalfTolerance : rel);
  }
}

// Random elements of any dtype (bool as 0/1, integers as random bytes).
Tensor random_typed(DType t, const Shape& s, std::mt19937& rng) {
  if (t == DType::kFloat32) return random_tensor(s, rng);
  if (t == DType::kFloat16) return to_half(random_tensor(s, rng));
  Tensor x = Tensor::empty(t, s);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t b = 0; b < x.nbytes(); ++b)
    x.data<uint8_t>()[b] = static_cast<uint8_t>(byte(rng) & (t == DType::kBool ? 1 : 255));
  return x;
}

TEST(GpuTensorOps, PoolsMatchReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(21);
  for (const Case& c : pool_cases(rng)) {
    SCOPED_TRACE(c.op + " " + c.in[0].shape().to_string());
    check_on_gpu(c, 1e-5);
    check_on_gpu(c, 0, GpuRun{.half = true});
  }
}

TEST(GpuTensorOps, ReductionsMatchReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(22);
  for (const Case& c : reduce_cases(rng)) {
    SCOPED_TRACE(c.op + " " + c.in[0].shape().to_string());
    check_on_gpu(c, 1e-5);
    check_on_gpu(c, 0, GpuRun{.half = true});
  }
  // Axes as an input (ReduceSum from 13, the others from 18) against the attribute form.
  const Tensor x = random_tensor({4, 6, 10}, rng);
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceSum"}) {
    SCOPED_TRACE(std::string(op) + " axes input");
    const Case by_input{op, 18, {x, i64({0, -1})}, {{"keepdims", one_int(0)}}};
    const Case by_attr{op, 11, {x}, {{"axes", ints({0, 2})}, {"keepdims", one_int(0)}}};
    check_on_gpu(by_input, 1e-5, {}, &by_attr);
    check_on_gpu(by_input, 0, GpuRun{.half = true}, &by_attr);
  }
  check_on_gpu(Case{"ReduceSum", 13, {x}, {{"noop_with_empty_axes", one_int(1)}}}, -1);
}

TEST(GpuTensorOps, SliceMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(23);
  for (const Case& c : slice_cases(rng)) {
    SCOPED_TRACE("Slice " + c.in[0].shape().to_string());
    check_on_gpu(c, -1);
    check_on_gpu(c, -1, GpuRun{.half = true});
  }
}

TEST(GpuTensorOps, ConcatMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(24);
  std::uniform_int_distribution<int> count(1, 5), rank(1, 4);
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kUInt8, DType::kBool};
  for (int i = 0; i < 20; ++i) {
    const DType t = types[i % 5];
    const Shape base = random_shape(rng, static_cast<size_t>(rank(rng)), 1, 7);
    const int64_t axis = std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(base.rank()) - 1)(rng);
    Case c{"Concat", 13, {}, {{"axis", one_int(i % 2 ? axis : axis - static_cast<int64_t>(base.rank()))}}};
    for (int k = count(rng); k > 0; --k) {
      Shape s = base;
      s[static_cast<size_t>(axis)] = std::uniform_int_distribution<int64_t>(0, 6)(rng);
      c.in.push_back(random_typed(t, s, rng));
    }
    c.constant.assign(c.in.size(), false);
    SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(axis) + " of " + base.to_string());
    check_on_gpu(c, -1);
  }
  // GoogLeNet's inception concat.
  Case inception{"Concat", 13, {}, {{"axis", one_int(1)}}};
  for (int64_t ch : {64, 128, 32, 32}) inception.in.push_back(random_tensor({1, ch, 28, 28}, rng));
  inception.constant.assign(4, false);
  check_on_gpu(inception, -1);
}

TEST(GpuTensorOps, GatherMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(25);
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kUInt8};
  for (int i = 0; i < 16; ++i) {
    const DType t = types[i % 4];
    const Shape s = random_shape(rng, static_cast<size_t>(1 + i % 3), 1, 9);
    const int64_t axis = i % static_cast<int64_t>(s.rank());
    const int64_t dim = s[static_cast<size_t>(axis)];
    std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
    const Shape is = random_shape(rng, static_cast<size_t>(i % 3), 1, 4);
    Tensor idx = Tensor::empty(i % 2 ? DType::kInt32 : DType::kInt64, is);
    for (int64_t j = 0; j < idx.numel(); ++j) {
      if (i % 2)
        idx.data<int32_t>()[j] = static_cast<int32_t>(pick(rng));
      else
        idx.data<int64_t>()[j] = pick(rng);
    }
    Case c{"Gather",
           13,
           {random_typed(t, s, rng), idx},
           {{"axis", one_int(i % 3 == 2 ? axis - static_cast<int64_t>(s.rank()) : axis)}}};
    c.constant = {false, false};
    SCOPED_TRACE(std::string(dtype_name(t)) + " " + s.to_string() + " axis " + std::to_string(axis) + " indices " +
                 is.to_string());
    check_on_gpu(c, -1);
  }
  // BERT's word embedding lookup.
  Tensor ids = Tensor::empty(DType::kInt64, {2, 16});
  for (int64_t j = 0; j < ids.numel(); ++j) ids.data<int64_t>()[j] = (j * 37) % 1000;
  Case embed{"Gather", 13, {random_tensor({1000, 64}, rng), ids}, {}};
  embed.constant = {true, false};
  check_on_gpu(embed, -1);
  check_on_gpu(embed, -1, GpuRun{.half = true});
}

TEST(GpuTensorOps, GatherOutOfRangeIndexGivesZeros) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(26);
  Case c{"Gather", 13, {random_tensor({5, 3}, rng), i64({1, 5, -6, -5})}, {}};
  c.constant = {false, false};
  auto got = run_gpu(c, {});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const float* y = (*got)[0].data<float>();
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_EQ(y[j], c.in[0].data<float>()[3 + j]);
    EXPECT_EQ(y[3 + j], 0.f);
    EXPECT_EQ(y[6 + j], 0.f);
    EXPECT_EQ(y[9 + j], c.in[0].data<float>()[j]);
  }
}

std::vector<Case> view_cases(std::mt19937& rng) {
  Case mask{"Dropout", 13, {random_tensor({3, 5}, rng)}};
  mask.outputs = 2;
  return {Case{"Reshape", 13, {random_tensor({2, 3, 4}, rng), i64({0, -1})}},
          Case{"Flatten", 13, {random_tensor({2, 3, 4}, rng)}, {{"axis", one_int(2)}}},
          Case{"Squeeze", 13, {random_tensor({1, 3, 1}, rng), i64({0})}},
          Case{"Unsqueeze", 13, {random_typed(DType::kInt64, {3}, rng), i64({0, -1})}},
          Case{"Unsqueeze", 11, {random_tensor({3}, rng)}, {{"axes", ints({1})}}},
          Case{"Identity", 13, {random_typed(DType::kBool, {7}, rng)}},
          Case{"Dropout", 13, {random_tensor({4, 4}, rng)}},
          mask};
}

TEST(GpuTensorOps, ViewsCopyOrRunInPlace) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(27);
  for (const Case& c : view_cases(rng)) {
    SCOPED_TRACE(c.op + " opset " + std::to_string(c.opset));
    check_on_gpu(c, -1);
    check_on_gpu(c, -1, GpuRun{.in_place = true});
  }
}

TEST(GpuTensorOps, CastMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(28);
  // Fractions of both signs, values beyond int32 and float16, NaN and infinities.
  Tensor x = random_tensor({1000}, rng, -300.f, 300.f);
  const float special[] = {0.f,   -0.f,   0.5f,    -0.5f,    1.5f, -2.5f,    3e9f,      -3e9f,
                           1e20f, -1e20f, 70000.f, -70000.f, NAN,  INFINITY, -INFINITY, 1e-6f};
  for (size_t i = 0; i < std::size(special); ++i) x.data<float>()[i] = special[i];
  const DType targets[] = {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kInt64, DType::kBool};
  for (DType to : targets) {
    SCOPED_TRACE(std::string("float32 to ") + dtype_name(to));
    const Case c{"Cast", 13, {x}, {{"to", one_int(static_cast<int64_t>(to))}}};
    check_on_gpu(c, -1);
    check_on_gpu(c, -1, GpuRun{.half = true});
  }
  for (DType from : {DType::kInt64, DType::kInt32, DType::kBool})
    for (DType to : targets) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " to " + dtype_name(to));
      check_on_gpu(Case{"Cast", 13, {random_typed(from, {257}, rng)}, {{"to", one_int(static_cast<int64_t>(to))}}}, -1);
    }
}

TEST(GpuTensorOps, ClipMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(29);
  const Tensor x = random_tensor({3, 33, 17}, rng, -8.f, 8.f);
  const Tensor lo = Tensor::scalar<float>(-1.5f), hi = Tensor::scalar<float>(6.f);
  const std::vector<Case> cases{Case{"Clip", 13, {x, lo, hi}}, Case{"Clip", 13, {x, Tensor(), hi}},
                                Case{"Clip", 13, {x, lo}}, Case{"Clip", 13, {x}},
                                Case{"Clip", 6, {x}, {{"min", one_float(0.f)}, {"max", one_float(6.f)}}}};
  for (const Case& c : cases) {
    SCOPED_TRACE("Clip opset " + std::to_string(c.opset) + " inputs " + std::to_string(c.in.size()));
    check_on_gpu(c, 0);
    check_on_gpu(c, 0, GpuRun{.in_place = true});
    check_on_gpu(c, 0, GpuRun{.half = true});
  }
  // Bounds computed at run time are read on the device.
  Case runtime{"Clip", 13, {x, lo, hi}};
  runtime.constant = {false, false, false};
  check_on_gpu(runtime, 0);
}

TEST(GpuTensorOps, RunsCaptureIntoCudaGraphs) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(30);
  std::vector<Case> cases{
      pool_cases(rng)[0],
      pool_cases(rng)[1],
      pool_cases(rng).back(),
      reduce_cases(rng)[0],
      slice_cases(rng)[0],
      Case{"Clip", 13, {random_tensor({64}, rng), Tensor::scalar<float>(0.f)}},
      Case{"Cast", 13, {random_tensor({64}, rng)}, {{"to", one_int(static_cast<int64_t>(DType::kFloat16))}}}};
  Case concat{"Concat", 13, {random_tensor({2, 3}, rng), random_tensor({2, 5}, rng)}, {{"axis", one_int(1)}}};
  concat.constant = {false, false};
  cases.push_back(concat);
  Case gather{"Gather", 13, {random_tensor({5, 3}, rng), i64({4, -1, 0})}, {}};
  gather.constant = {false, false};
  cases.push_back(gather);
  for (const Case& v : view_cases(rng)) cases.push_back(v);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const bool exact = c.op != "MaxPool" && c.op != "AveragePool" && c.op != "GlobalMaxPool" &&
                       c.op != "GlobalAveragePool" && c.op.rfind("Reduce", 0) != 0 && c.op != "Clip";
    check_on_gpu(c, exact ? -1 : 1e-5, GpuRun{.capture = true});
  }
}

}  // namespace
}  // namespace streamline::ops::cuda_test
