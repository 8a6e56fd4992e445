// The CUDA kernels. Without a GPU: registration of every (op, dtype), and create + reshape (shapes,
// dtypes, errors) for every family. With a GPU (Gpu* suites): each kernel against the plain
// reference kernel on random inputs with a fixed seed; tolerances are relative to the largest
// reference magnitude. float16 runs (GpuKernelsFp16) compare with the reference on the
// fp16-rounded inputs: 2e-3 for elementwise and row-wise ops, 1e-2 for Gemm/MatMul/Conv. TF32 runs
// (GpuKernelsTf32) compare with the fp32 reference within 5e-3.

#include <gtest/gtest.h>

#include <random>

#include "cuda/precision_util.h"

namespace streamline::ops::cuda_test {
namespace {

// Output shape of the CUDA kernel for these input shapes, or its error.
Result<Shape> cuda_shape(const std::string& op, const std::string& domain, int opset, const std::vector<Shape>& shapes,
                         std::map<std::string, graph::Attribute> attrs = {}) {
  const std::vector<Tensor> in = zeros(shapes);
  auto n = make_node(op, domain, in, std::move(attrs));
  n->g.node(n->id).opset = opset;
  SL_ASSIGN_OR_RETURN(Prepared p, prepare_cuda(n->g, n->node(), in));
  return p.rr.outputs.at(0).shape;
}

// The output shape, or [-1] (with a test failure naming the error) when the kernel refused.
Shape shape_of(const std::string& op, const std::string& domain, int opset, const std::vector<Shape>& shapes,
               std::map<std::string, graph::Attribute> attrs = {}) {
  auto r = cuda_shape(op, domain, opset, shapes, std::move(attrs));
  if (!r.ok()) {
    ADD_FAILURE() << op << ": " << r.status().to_string();
    return Shape{-1};
  }
  return *r;
}

// ---------------------------------------------------------------------------------------------
// No GPU needed.

TEST(CudaKernels, RegisterSeparatelyFromTheCpuKernels) {
  KernelRegistry reg;
  ASSERT_TRUE(cuda::register_cuda_kernels(reg).ok());
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Add", "Sub", "Mul", "Div", "Transpose", "Softmax", "Gemm",
                         "MatMul", "Conv"}) {
    EXPECT_TRUE(reg.has_op(op, "", 13, Device::kCuda)) << op;
    EXPECT_FALSE(reg.has_op(op, "", 13, Device::kCpu)) << op;
    EXPECT_FALSE(default_cpu_registry().has_op(op, "", 13, Device::kCuda)) << op;
  }
  EXPECT_TRUE(reg.has_op("LayerNormalization", "", 17, Device::kCuda));
  EXPECT_TRUE(reg.has_op("Gelu", "", 20, Device::kCuda));
  for (const char* op : {"FusedConv", "FusedGemm", "Gelu", "LayerNormalization"})
    EXPECT_TRUE(reg.has_op(op, "streamline", 1, Device::kCuda)) << op;
  auto def = reg.find("Conv", "", 13, Device::kCuda, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ((*def)->provider, "cuda");
  // Registering twice is a duplicate-key error, not a silent overwrite.
  EXPECT_FALSE(cuda::register_cuda_kernels(reg).ok());
}

TEST(CudaKernels, ElementwiseShapesAndErrors) {
  EXPECT_EQ(shape_of("Relu", "", 14, {{2, 3}}), (Shape{2, 3}));
  EXPECT_EQ(shape_of("Add", "", 14, {{2, 1, 4}, {3, 1}}), (Shape{2, 3, 4}));
  EXPECT_EQ(shape_of("Mul", "", 14, {{}, {5}}), (Shape{5}));
  EXPECT_EQ(cuda_shape("Add", "", 14, {{2, 3}, {4}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_shape("Add", "", 14, {{1, 1, 1, 1, 1, 1, 1, 1, 2}, {2}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(shape_of("Transpose", "", 13, {{2, 3, 4}}), (Shape{4, 3, 2}));
  EXPECT_EQ(shape_of("Transpose", "", 13, {{2, 3, 4}}, {{"perm", ints({1, 2, 0})}}), (Shape{3, 4, 2}));
  auto bad = cuda_shape("Transpose", "", 13, {{2, 3, 4}}, {{"perm", ints({0, 0, 1})}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("node0"), std::string::npos) << bad.status().message();
  EXPECT_EQ(cuda_shape("Gelu", "", 20, {{4}}, {{"approximate", str("tanh")}}).status().code(),
            StatusCode::kUnsupported);
}

TEST(CudaKernels, NormalizationShapesAndErrors) {
  EXPECT_EQ(shape_of("Softmax", "", 13, {{2, 7}}), (Shape{2, 7}));
  EXPECT_EQ(cuda_shape("Softmax", "", 13, {{2, 7}}, {{"axis", one_int(0)}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(shape_of("Softmax", "", 11, {{2, 3, 7}}, {{"axis", one_int(1)}}), (Shape{2, 3, 7}));
  EXPECT_EQ(cuda_shape("Softmax", "", 13, {{2, 7}}, {{"axis", one_int(2)}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shape_of("LayerNormalization", "", 17, {{2, 5, 8}, {8}, {8}}), (Shape{2, 5, 8}));
  EXPECT_EQ(shape_of("LayerNormalization", "", 17, {{2, 5, 8}, {5, 8}}, {{"axis", one_int(1)}}), (Shape{2, 5, 8}));
  EXPECT_EQ(cuda_shape("LayerNormalization", "", 17, {{2, 5, 8}, {1, 8}}, {{"axis", one_int(1)}}).status().code(),
            StatusCode::kUnsupported);
}

TEST(CudaKernels, MatMulAndGemmShapesAndErrors) {
  EXPECT_EQ(shape_of("MatMul", "", 13, {{5, 4}, {4, 3}}), (Shape{5, 3}));
  EXPECT_EQ(shape_of("MatMul", "", 13, {{4}, {4, 3}}), (Shape{3}));
  EXPECT_EQ(shape_of("MatMul", "", 13, {{2, 5, 4}, {4}}), (Shape{2, 5}));
  EXPECT_EQ(shape_of("MatMul", "", 13, {{2, 3, 5, 4}, {4, 6}}), (Shape{2, 3, 5, 6}));
  EXPECT_EQ(shape_of("MatMul", "", 13, {{5, 4}, {3, 4, 6}}), (Shape{3, 5, 6}));
  EXPECT_EQ(shape_of("MatMul", "", 13, {{2, 5, 4}, {2, 4, 6}}), (Shape{2, 5, 6}));
  EXPECT_EQ(cuda_shape("MatMul", "", 13, {{2, 1, 5, 4}, {3, 4, 6}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(cuda_shape("MatMul", "", 13, {{5, 4}, {3, 6}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shape_of("Gemm", "", 13, {{5, 4}, {6, 4}, {6}}, {{"transB", one_int(1)}}), (Shape{5, 6}));
  EXPECT_EQ(shape_of("Gemm", "", 13, {{4, 5}, {4, 6}, {5, 1}}, {{"transA", one_int(1)}}), (Shape{5, 6}));
  EXPECT_EQ(cuda_shape("Gemm", "", 13, {{5, 4}, {4, 6}, {4}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shape_of("FusedGemm", "streamline", 1, {{5, 4}, {4, 6}}, {{"activation", str("Tanh")}}), (Shape{5, 6}));
  EXPECT_EQ(cuda_shape("FusedGemm", "streamline", 1, {{5, 4}, {4, 6}}, {{"activation", str("Mish")}}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CudaKernels, ConvShapesAndErrors) {
  EXPECT_EQ(shape_of("Conv", "", 11, {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"pads", ints({1, 1, 1, 1})}}),
            (Shape{1, 4, 8, 8}));
  EXPECT_EQ(shape_of("Conv", "", 11, {{2, 4, 9, 9}, {6, 2, 3, 3}, {6}},
                     {{"strides", ints({2, 2})}, {"group", one_int(2)}, {"dilations", ints({1, 2})}}),
            (Shape{2, 6, 4, 3}));
  EXPECT_EQ(shape_of("Conv", "", 11, {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"auto_pad", str("SAME_UPPER")}}),
            (Shape{1, 4, 8, 8}));
  EXPECT_EQ(cuda_shape("Conv", "", 11, {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"pads", ints({0, 0, 1, 1})}}).status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(cuda_shape("Conv", "", 11, {{1, 3, 8}, {4, 3, 3}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(cuda_shape("Conv", "", 11, {{1, 3, 8, 8}, {4, 2, 3, 3}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_shape("Conv", "", 11, {{1, 3, 8, 8}, {4, 3, 3, 3}, {5}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shape_of("FusedConv", "streamline", 1, {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"activation", str("Sigmoid")}}),
            (Shape{1, 4, 6, 6}));
}

// Every op these families register, as (op, domain, opset).
struct OpKey {
  const char* op;
  const char* domain;
  int opset;
};
const std::vector<OpKey> kAllOps{{"Relu", "", 14},
                                 {"Sigmoid", "", 13},
                                 {"Tanh", "", 13},
                                 {"Exp", "", 13},
                                 {"Log", "", 13},
                                 {"Sqrt", "", 13},
                                 {"Neg", "", 13},
                                 {"Abs", "", 13},
                                 {"Erf", "", 13},
                                 {"Reciprocal", "", 13},
                                 {"Gelu", "", 20},
                                 {"Gelu", "streamline", 1},
                                 {"Add", "", 14},
                                 {"Sub", "", 14},
                                 {"Mul", "", 14},
                                 {"Div", "", 14},
                                 {"Transpose", "", 13},
                                 {"Softmax", "", 11},
                                 {"Softmax", "", 13},
                                 {"LayerNormalization", "", 17},
                                 {"LayerNormalization", "streamline", 1},
                                 {"Gemm", "", 13},
                                 {"FusedGemm", "streamline", 1},
                                 {"MatMul", "", 13},
                                 {"FusedMatMul", "streamline", 1},
                                 {"Conv", "", 11},
                                 {"FusedConv", "streamline", 1}};

TEST(CudaKernels, EveryOpHasFloat32AndFloat16Defs) {
  for (const OpKey& k : kAllOps)
    for (DType t : {DType::kFloat32, DType::kFloat16}) {
      SCOPED_TRACE(std::string(k.op) + " " + dtype_name(t));
      auto def = cuda_reg().find(k.op, k.domain, k.opset, Device::kCuda, t);
      ASSERT_TRUE(def.ok()) << def.status().to_string();
      EXPECT_EQ((*def)->dtype, t);
      EXPECT_EQ((*def)->provider, "cuda");
    }
  // No other float type is registered.
  for (const char* op : {"Relu", "MatMul", "Conv"})
    EXPECT_FALSE(cuda_reg().find(op, "", 13, Device::kCuda, DType::kBFloat16).ok()) << op;
}

// The prepared kernel of `op` for float16 inputs of these shapes.
Result<Prepared> prepare_fp16(const std::string& op, const std::string& domain, int opset,
                              const std::vector<Shape>& shapes, std::map<std::string, graph::Attribute> attrs = {}) {
  Spec s{op, domain, opset, zeros(shapes), std::move(attrs)};
  auto n = s.node();
  return prepare_spec(*n, s, as_fp16());
}

TEST(CudaKernels, Float16ReshapeKeepsTheDtype) {
  struct Case {
    const char* op;
    const char* domain;
    int opset;
    std::vector<Shape> in;
    Shape out;
  };
  const std::vector<Case> cases{{"Relu", "", 14, {{2, 3}}, {2, 3}},
                                {"Gelu", "streamline", 1, {{4}}, {4}},
                                {"Add", "", 14, {{2, 1, 4}, {3, 1}}, {2, 3, 4}},
                                {"Transpose", "", 13, {{2, 3, 4}}, {4, 3, 2}},
                                {"Softmax", "", 13, {{2, 7}}, {2, 7}},
                                {"LayerNormalization", "", 17, {{2, 5, 8}, {8}, {8}}, {2, 5, 8}},
                                {"Gemm", "", 13, {{5, 4}, {4, 6}, {6}}, {5, 6}},
                                {"MatMul", "", 13, {{2, 5, 4}, {4, 6}}, {2, 5, 6}},
                                {"Conv", "", 11, {{1, 3, 8, 8}, {4, 3, 3, 3}, {4}}, {1, 4, 6, 6}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    auto p = prepare_fp16(c.op, c.domain, c.opset, c.in);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->rr.outputs.at(0).dtype, DType::kFloat16);
    EXPECT_EQ(p->rr.outputs.at(0).shape, c.out);
  }
}

TEST(CudaKernels, DefsRefuseOtherDtypes) {
  // A float32 def handed float16 tensors (and the reverse) says which dtype it takes.
  const std::vector<Tensor> half_in{to_fp16(Tensor::empty(DType::kFloat32, Shape{2, 3}))};
  auto n = make_node("Relu", "", half_in, {});
  auto def = cuda_reg().find("Relu", "", 14, Device::kCuda, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  KernelCreateArgs args{n->g, n->node(), {nullptr}, {DType::kFloat16}, KernelOptions{}};
  auto k = (*def)->create(args);
  ASSERT_TRUE(k.ok());
  TensorInfo info;
  info.dtype = DType::kFloat16;
  info.shape = Shape{2, 3};
  auto r = (*k)->reshape(std::span<const TensorInfo>(&info, 1));
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("float32"), std::string::npos) << r.status().message();
  // A float16 LayerNormalization takes float16 Scale and B (an fp16 model's constants are fp16).
  Spec ln{"LayerNormalization",
          "",
          17,
          {to_fp16(Tensor::empty(DType::kFloat32, Shape{2, 8})), Tensor::empty(DType::kFloat32, Shape{8})},
          {}};
  auto ln_node = ln.node();
  auto ln_def = cuda_reg().find("LayerNormalization", "", 17, Device::kCuda, DType::kFloat16);
  ASSERT_TRUE(ln_def.ok());
  KernelCreateArgs ln_args{
      ln_node->g, ln_node->node(), {nullptr, nullptr}, {DType::kFloat16, DType::kFloat32}, KernelOptions{}};
  auto ln_kernel = (*ln_def)->create(ln_args);
  ASSERT_TRUE(ln_kernel.ok());
  std::vector<TensorInfo> infos(2);
  infos[0].dtype = DType::kFloat16;
  infos[0].shape = Shape{2, 8};
  infos[1].dtype = DType::kFloat32;
  infos[1].shape = Shape{8};
  EXPECT_EQ((*ln_kernel)->reshape(infos).status().code(), StatusCode::kUnsupported);
  // Reshape errors are the same in float16.
  EXPECT_EQ(prepare_fp16("Add", "", 14, {{2, 3}, {4}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(prepare_fp16("MatMul", "", 13, {{5, 4}, {3, 6}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(prepare_fp16("Conv", "", 11, {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"pads", ints({0, 0, 1, 1})}}).status().code(),
            StatusCode::kUnsupported);
}

TEST(CudaKernels, Tf32IsAnOptionOfTheFloat32Defs) {
  // Creating and reshaping with Precision::kTf32 needs no device; shapes are as in fp32.
  for (const auto& [op, shapes] : std::vector<std::pair<std::string, std::vector<Shape>>>{
           {"Gemm", {{5, 4}, {4, 6}}}, {"MatMul", {{3, 5, 4}, {4, 6}}}, {"Conv", {{1, 3, 8, 8}, {4, 3, 3, 3}}}}) {
    Spec s{op, "", 13, zeros(shapes), {}};
    auto n = s.node();
    auto p = prepare_spec(*n, s, as_tf32());
    ASSERT_TRUE(p.ok()) << op << ": " << p.status().to_string();
    EXPECT_EQ(p->rr.outputs.at(0).dtype, DType::kFloat32) << op;
  }
}

// ---------------------------------------------------------------------------------------------
// On a GPU: against the reference kernels.

// The unary ops and the input range each is tested on (inside its domain, away from overflow).
struct UnaryCase {
  const char* op;
  float lo, hi;
};
constexpr UnaryCase kUnaryCases[] = {{"Relu", -2, 2},  {"Sigmoid", -6, 6}, {"Tanh", -4, 4},    {"Exp", -3, 3},
                                     {"Log", 0.1f, 5}, {"Sqrt", 0.f, 9},   {"Neg", -2, 2},     {"Abs", -2, 2},
                                     {"Erf", -3, 3},   {"Reciprocal", 0.5f, 4}};

TEST(GpuKernels, UnaryOpsMatchReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(101);
  for (const UnaryCase& c : kUnaryCases)
    for (const Shape& s : {Shape{3, 17, 33}, Shape{1}, Shape{(1 << 20) + 3}}) {
      SCOPED_TRACE(std::string(c.op) + " " + s.to_string());
      expect_matches_reference(c.op, "", 13, {random_tensor(s, rng, c.lo, c.hi)}, {}, 2e-6);
    }
  SCOPED_TRACE("Gelu");
  expect_matches_reference("Gelu", "streamline", 1, {random_tensor({4, 1000}, rng, -5, 5)}, {}, 2e-6);
}

TEST(GpuKernels, BinaryBroadcastMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(202);
  const std::vector<std::pair<Shape, Shape>> cases{{{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}},
                                                   {{1}, {5, 6}},          {{}, {2, 2}},     {{7, 1, 1, 5}, {1, 6, 1}},
                                                   {{64, 768}, {768}},     {{0, 3}, {3}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (const auto& [a, b] : cases) {
      SCOPED_TRACE(std::string(op) + " " + a.to_string() + " " + b.to_string());
      // Divisors kept away from zero.
      expect_matches_reference(op, "", 14, {random_tensor(a, rng), random_tensor(b, rng, 0.5f, 2.f)}, {}, 1e-6);
    }
}

TEST(GpuKernels, TransposeMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(303);
  expect_matches_reference("Transpose", "", 13, {random_tensor({2, 3, 4, 5}, rng)}, {{"perm", ints({0, 2, 3, 1})}}, 0);
  expect_matches_reference("Transpose", "", 13, {random_tensor({2, 3, 4, 5}, rng)}, {}, 0);
  expect_matches_reference("Transpose", "", 13, {random_tensor({67, 129}, rng)}, {{"perm", ints({1, 0})}}, 0);
}

TEST(GpuKernels, SoftmaxMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(404);
  for (const Shape& s : {Shape{4, 1000}, Shape{2, 3, 7}, Shape{5}, Shape{3, 4099}}) {
    SCOPED_TRACE(s.to_string());
    expect_matches_reference("Softmax", "", 13, {random_tensor(s, rng, -8, 8)}, {}, 1e-5);
  }
  // Opset 11 flattens at the axis.
  expect_matches_reference("Softmax", "", 11, {random_tensor({2, 3, 7}, rng, -8, 8)}, {{"axis", one_int(1)}}, 1e-5);
}

TEST(GpuKernels, LayerNormalizationMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(505);
  expect_matches_reference("LayerNormalization", "", 17,
                           {random_tensor({4, 768}, rng, -3, 5), random_tensor({768}, rng), random_tensor({768}, rng)},
                           {{"epsilon", one_float(1e-5f)}}, 2e-5);
  expect_matches_reference("LayerNormalization", "", 17, {random_tensor({2, 5, 33}, rng), random_tensor({33}, rng)}, {},
                           2e-5);
  expect_matches_reference("LayerNormalization", "", 17,
                           {random_tensor({2, 5, 6}, rng), random_tensor({5, 6}, rng), random_tensor({5, 6}, rng)},
                           {{"axis", one_int(1)}}, 2e-5);
}

TEST(GpuKernels, GemmMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(606);
  const int64_t m = 33, k = 70, n = 65;
  const std::vector<Shape> c_shapes{{n}, {1, n}, {m, n}, {m, 1}, {}, {1, 1}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t ci = 0; ci <= c_shapes.size(); ++ci)
        for (const auto& [alpha, beta] : std::vector<std::pair<float, float>>{{1.f, 1.f}, {0.5f, 2.f}}) {
          std::vector<Tensor> in{random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng),
                                 random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng)};
          if (ci < c_shapes.size()) in.push_back(random_tensor(c_shapes[ci], rng));
          SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " C " +
                       (ci < c_shapes.size() ? c_shapes[ci].to_string() : "none") + " alpha " + std::to_string(alpha));
          expect_matches_reference("Gemm", "", 13, in,
                                   {{"transA", one_int(ta)},
                                    {"transB", one_int(tb)},
                                    {"alpha", one_float(alpha)},
                                    {"beta", one_float(beta)}},
                                   1e-5);
        }
  // Relu in the epilogue, with and without the bias epilogue.
  for (const Shape& c : {Shape{n}, Shape{m, n}}) {
    SCOPED_TRACE("FusedGemm Relu C " + c.to_string());
    expect_matches_reference("FusedGemm", "streamline", 1,
                             {random_tensor({m, k}, rng), random_tensor({n, k}, rng), random_tensor(c, rng)},
                             {{"transB", one_int(1)}, {"activation", str("Relu")}}, 1e-5);
  }
}

TEST(GpuKernels, MatMulMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(707);
  const std::vector<std::pair<Shape, Shape>> cases{{{4}, {4}},
                                                   {{4}, {4, 3}},
                                                   {{2, 4}, {4}},
                                                   {{5, 4}, {4, 3}},
                                                   {{2, 3, 5, 4}, {4, 6}},
                                                   {{2, 5, 4}, {2, 4, 6}},
                                                   {{5, 4}, {3, 4, 6}},
                                                   {{1, 5, 4}, {1, 1, 4, 6}},
                                                   {{3, 5, 4}, {4}},
                                                   {{8, 128, 64}, {8, 64, 128}},
                                                   {{256, 768}, {768, 3072}}};
  for (const auto& [a, b] : cases) {
    SCOPED_TRACE(a.to_string() + " x " + b.to_string());
    expect_matches_reference("MatMul", "", 13, {random_tensor(a, rng), random_tensor(b, rng)}, {}, 1e-5);
  }
}

TEST(GpuKernels, ConvMatchesReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(808);
  struct Case {
    Shape x, w;
    std::map<std::string, graph::Attribute> attrs;
    bool bias;
  };
  const std::vector<Case> cases{
      {{1, 3, 16, 16}, {8, 3, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, true},
      {{2, 4, 15, 17}, {6, 4, 3, 3}, {{"strides", ints({2, 2})}}, true},
      {{1, 8, 12, 12}, {8, 2, 3, 3}, {{"group", one_int(4)}, {"pads", ints({1, 1, 1, 1})}}, false},
      {{1, 8, 12, 12}, {8, 1, 3, 3}, {{"group", one_int(8)}, {"pads", ints({1, 1, 1, 1})}}, true},
      {{1, 3, 20, 20}, {4, 3, 3, 3}, {{"dilations", ints({2, 2})}, {"pads", ints({2, 2, 2, 2})}}, true},
      {{1, 16, 7, 7}, {32, 16, 1, 1}, {}, true},
      {{1, 3, 9, 9}, {4, 3, 3, 3}, {{"auto_pad", str("SAME_UPPER")}}, false},
      {{1, 64, 56, 56}, {64, 64, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, true}};
  for (const Case& c : cases) {
    std::vector<Tensor> in{random_tensor(c.x, rng), random_tensor(c.w, rng)};
    if (c.bias) in.push_back(random_tensor({c.w[0]}, rng));
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    expect_matches_reference("Conv", "", 11, in, c.attrs, 1e-5);
    auto fused = c.attrs;
    fused["activation"] = str("Relu");
    expect_matches_reference("FusedConv", "streamline", 1, in, fused, 1e-5);
  }
}

TEST(GpuKernels, RunErrorsNameTheNode) {
  SL_REQUIRE_GPU();
  // A MatMul whose batch broadcasts on both sides is refused before any device work, naming the node.
  std::mt19937 rng(909);
  const std::vector<Tensor> in{random_tensor({2, 1, 5, 4}, rng), random_tensor({3, 4, 6}, rng)};
  auto n = make_node("MatMul", "", in, {});
  auto r = run_cuda(n->g, n->node(), in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("MatMul 'node0'"), std::string::npos) << r.status().message();
}

// ---------------------------------------------------------------------------------------------
// On a GPU, float16 and TF32.

TEST(GpuKernelsFp16, ElementwiseMatchReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1201);
  for (const UnaryCase& c : kUnaryCases)
    for (const Shape& s : {Shape{3, 17, 33}, Shape{1}, Shape{(1 << 18) + 3}}) {
      SCOPED_TRACE(std::string(c.op) + " " + s.to_string());
      expect_cuda_matches_reference(Spec{c.op, "", 13, {random_tensor(s, rng, c.lo, c.hi)}, {}}, as_fp16(), 2e-3);
    }
  expect_cuda_matches_reference(Spec{"Gelu", "streamline", 1, {random_tensor({4, 1000}, rng, -5, 5)}, {}}, as_fp16(),
                                2e-3);
  const std::vector<std::pair<Shape, Shape>> bcast{
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{}, {2, 2}}, {{64, 768}, {768}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (const auto& [a, b] : bcast) {
      SCOPED_TRACE(std::string(op) + " " + a.to_string() + " " + b.to_string());
      expect_cuda_matches_reference(Spec{op, "", 14, {random_tensor(a, rng), random_tensor(b, rng, 0.5f, 2.f)}, {}},
                                    as_fp16(), 2e-3);
    }
  // A transpose moves bits: exact.
  expect_cuda_matches_reference(
      Spec{"Transpose", "", 13, {random_tensor({2, 3, 4, 5}, rng)}, {{"perm", ints({0, 2, 3, 1})}}}, as_fp16(), 0);
}

TEST(GpuKernelsFp16, SoftmaxAndLayerNormMatchReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1202);
  for (const Shape& s : {Shape{4, 1000}, Shape{2, 3, 7}, Shape{3, 4099}}) {
    SCOPED_TRACE(s.to_string());
    expect_cuda_matches_reference(Spec{"Softmax", "", 13, {random_tensor(s, rng, -8, 8)}, {}}, as_fp16(), 2e-3);
  }
  expect_cuda_matches_reference(Spec{"Softmax", "", 11, {random_tensor({2, 3, 7}, rng, -8, 8)}, {{"axis", one_int(1)}}},
                                as_fp16(), 2e-3);
  expect_cuda_matches_reference(
      Spec{"LayerNormalization",
           "",
           17,
           {random_tensor({4, 768}, rng, -3, 5), random_tensor({768}, rng), random_tensor({768}, rng)},
           {{"epsilon", one_float(1e-5f)}}},
      as_fp16(), 2e-3);
  expect_cuda_matches_reference(
      Spec{"LayerNormalization", "streamline", 1, {random_tensor({2, 5, 33}, rng), random_tensor({33}, rng)}, {}},
      as_fp16(), 2e-3);
}

TEST(GpuKernelsFp16, GemmMatMulConvMatchReference) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1203);
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{64, 128, 96}, {33, 70, 65}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        SCOPED_TRACE("Gemm " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " transA " +
                     std::to_string(ta) + " transB " + std::to_string(tb));
        expect_cuda_matches_reference(
            Spec{"Gemm",
                 "",
                 13,
                 {random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng),
                  random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng), random_tensor({n}, rng)},
                 {{"transA", one_int(ta)}, {"transB", one_int(tb)}}},
            as_fp16(), 1e-2);
      }
  const std::vector<std::pair<Shape, Shape>> mm{
      {{4}, {4, 3}},          {{2, 3, 5, 64}, {64, 32}},    {{2, 5, 64}, {2, 64, 48}},
      {{5, 64}, {3, 64, 48}}, {{8, 128, 64}, {8, 64, 128}}, {{256, 768}, {768, 3072}}};
  for (const auto& [a, b] : mm) {
    SCOPED_TRACE("MatMul " + a.to_string() + " x " + b.to_string());
    expect_cuda_matches_reference(Spec{"MatMul", "", 13, {random_tensor(a, rng), random_tensor(b, rng)}, {}}, as_fp16(),
                                  1e-2);
  }
  struct ConvCase {
    Shape x, w;
    std::map<std::string, graph::Attribute> attrs;
  };
  const std::vector<ConvCase> conv{
      {{1, 3, 16, 16}, {8, 3, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}},
      {{2, 4, 15, 17}, {6, 4, 3, 3}, {{"strides", ints({2, 2})}}},
      {{1, 8, 12, 12}, {8, 1, 3, 3}, {{"group", one_int(8)}, {"pads", ints({1, 1, 1, 1})}}},
      {{1, 64, 56, 56}, {64, 64, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}}};
  for (const ConvCase& c : conv) {
    SCOPED_TRACE("Conv " + c.x.to_string() + " * " + c.w.to_string());
    expect_cuda_matches_reference(
        Spec{"Conv", "", 11, {random_tensor(c.x, rng), random_tensor(c.w, rng), random_tensor({c.w[0]}, rng)}, c.attrs},
        as_fp16(), 1e-2);
  }
}

TEST(GpuKernelsTf32, GemmMatMulConvWithinTf32Tolerance) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1204);
  expect_cuda_matches_reference(
      Spec{"Gemm",
           "",
           13,
           {random_tensor({256, 512}, rng), random_tensor({384, 512}, rng), random_tensor({384}, rng)},
           {{"transB", one_int(1)}, {"alpha", one_float(0.5f)}}},
      as_tf32(), 5e-3);
  expect_cuda_matches_reference(
      Spec{"MatMul", "", 13, {random_tensor({8, 128, 64}, rng), random_tensor({8, 64, 128}, rng)}, {}}, as_tf32(),
      5e-3);
  expect_cuda_matches_reference(
      Spec{"MatMul", "", 13, {random_tensor({256, 768}, rng), random_tensor({768, 1024}, rng)}, {}}, as_tf32(), 5e-3);
  expect_cuda_matches_reference(
      Spec{"Conv",
           "",
           11,
           {random_tensor({2, 64, 28, 28}, rng), random_tensor({64, 64, 3, 3}, rng), random_tensor({64}, rng)},
           {{"pads", ints({1, 1, 1, 1})}}},
      as_tf32(), 5e-3);
  expect_cuda_matches_reference(Spec{"FusedConv",
                                     "streamline",
                                     1,
                                     {random_tensor({1, 16, 20, 20}, rng), random_tensor({32, 16, 3, 3}, rng),
                                      random_tensor({32}, rng), random_tensor({1, 32, 18, 18}, rng)},
                                     {{"activation", str("Relu")}}},
                                as_tf32(), 5e-3);
}

}  // namespace
}  // namespace streamline::ops::cuda_test
