// The CUDA fused ops: streamline.FusedConv (bias, residual Z, activation), streamline.FusedGemm and
// streamline.FusedMatMul (bias, every activation including the erf-form Gelu).
// Without a GPU: activation parsing, shapes and errors at create/reshape.
// With a GPU (Gpu* suites): against the reference kernels on random inputs with fixed seeds, in
// fp32 (1e-5 of the largest reference magnitude) and fp16 (1e-2, against the reference on the
// fp16-rounded inputs); the residual written in place; runs captured into a CUDA graph.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cuda/precision_util.h"

namespace streamline::ops::cuda_test {
namespace {

using Attrs = std::map<std::string, graph::Attribute>;

// An omitted optional input in a list of shapes.
const Shape kOmitted{-1};

// The prepared kernel for these input shapes (float32 or float16), or its error.
Result<Prepared> prepare_shapes(const std::string& op, const std::vector<Shape>& shapes, Attrs attrs,
                                DType dtype = DType::kFloat32) {
  Spec s{op, "streamline", 1, zeros(shapes), std::move(attrs)};
  RunSpec r;
  r.dtype = dtype;
  auto n = s.node();
  return prepare_spec(*n, s, r);
}

StatusCode code_of(const std::string& op, const std::vector<Shape>& shapes, Attrs attrs) {
  return prepare_shapes(op, shapes, std::move(attrs)).status().code();
}

struct Act {
  const char* name;
  std::vector<float> params;
};
// Every activation the fused ops take, with parameters away from their defaults where they have
// any (and Clip once without, for its FLT_MAX defaults).
const std::vector<Act> kActivations{
    {"", {}},     {"Relu", {}},    {"LeakyRelu", {0.2f}}, {"Clip", {-0.3f, 0.4f}},
    {"Clip", {}}, {"Sigmoid", {}}, {"Tanh", {}},          {"HardSigmoid", {0.3f, 0.45f}}};

Attrs with_act(Attrs attrs, const Act& a) {
  if (a.name[0] != '\0') attrs["activation"] = str(a.name);
  if (!a.params.empty()) attrs["activation_params"] = floats(a.params);
  return attrs;
}

std::string describe(const Act& a) {
  std::string s = a.name[0] != '\0' ? a.name : "none";
  for (float p : a.params) {
    s += ' ';
    s += std::to_string(p);
  }
  return s;
}

// The reference output of `s`; for activation "Gelu" (which the reference kernels lack), the
// reference without the activation followed by the erf GELU in double.
Result<Tensor> reference_with_gelu(const Spec& s, DType dtype) {
  auto it = s.attrs.find("activation");
  if (it == s.attrs.end() || it->second.s != "Gelu") return reference_for(s, dtype);
  Spec plain = s;
  plain.attrs.erase("activation");
  SL_ASSIGN_OR_RETURN(Tensor y, reference_for(plain, dtype));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double x = y.data<float>()[i];
    y.data<float>()[i] = static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
  }
  return y;
}

// The CUDA output of `s` run as `r` against the reference, within rel times the largest reference
// magnitude before or after the activation: a bounded activation (Clip, Sigmoid) keeps the
// absolute error of the larger values it was given, so its output alone is the wrong scale.
void expect_fused_matches(const Spec& s, const RunSpec& r, double rel) {
  auto want = reference_with_gelu(s, r.dtype);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  Spec pre = s;
  pre.attrs.erase("activation");
  pre.attrs.erase("activation_params");
  auto pre_want = reference_for(pre, r.dtype);
  ASSERT_TRUE(pre_want.ok()) << pre_want.status().to_string();
  auto got = run_spec(s, r);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want->shape());
  double scale = 1e-3, max_diff = 0.0;
  int64_t nan = 0;
  for (int64_t i = 0; i < want->numel(); ++i) {
    const double w = want->data<float>()[i], g = got->data<float>()[i];
    scale = std::max({scale, std::fabs(w), std::fabs(double(pre_want->data<float>()[i]))});
    if (std::isnan(g) && !std::isnan(w))
      ++nan;
    else if (!std::isnan(g))
      max_diff = std::max(max_diff, std::fabs(g - w));
  }
  EXPECT_EQ(nan, 0) << "elements left unwritten or NaN";
  EXPECT_LE(max_diff, rel * scale) << "largest reference magnitude " << scale;
}

// ---------------------------------------------------------------------------------------------
// No GPU needed.

TEST(CudaFused, EveryActivationIsAccepted) {
  for (const Act& a : kActivations) {
    SCOPED_TRACE(describe(a));
    for (DType t : {DType::kFloat32, DType::kFloat16}) {
      EXPECT_TRUE(prepare_shapes("FusedConv", {{1, 3, 8, 8}, {4, 3, 3, 3}, {4}}, with_act({}, a), t).ok());
      EXPECT_TRUE(prepare_shapes("FusedGemm", {{5, 4}, {4, 6}, {6}}, with_act({}, a), t).ok());
      EXPECT_TRUE(prepare_shapes("FusedMatMul", {{5, 4}, {4, 6}, {6}}, with_act({}, a), t).ok());
    }
  }
  for (const char* op : {"FusedGemm", "FusedMatMul"})
    EXPECT_TRUE(prepare_shapes(op, {{5, 4}, {4, 6}}, {{"activation", str("Gelu")}}).ok()) << op;
  for (const char* name : {"None", "Identity"})
    EXPECT_TRUE(prepare_shapes("FusedConv", {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"activation", str(name)}}).ok());
}

TEST(CudaFused, BadActivationsAreInvalidArguments) {
  EXPECT_EQ(code_of("FusedConv", {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"activation", str("Swish")}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("FusedGemm", {{5, 4}, {4, 6}}, {{"activation", str("Softplus")}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("FusedMatMul", {{5, 4}, {4, 6}}, {{"activation", str("gelu")}}), StatusCode::kInvalidArgument);
  // Clip with min > max.
  EXPECT_EQ(code_of("FusedMatMul", {{5, 4}, {4, 6}},
                    {{"activation", str("Clip")}, {"activation_params", floats({1.f, -1.f})}}),
            StatusCode::kInvalidArgument);
  // The CPU FusedConv has no Gelu either.
  auto gelu_conv = prepare_shapes("FusedConv", {{1, 3, 8, 8}, {4, 3, 3, 3}}, {{"activation", str("Gelu")}});
  EXPECT_EQ(gelu_conv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gelu_conv.status().message().find("node0"), std::string::npos) << gelu_conv.status().message();
}

TEST(CudaFused, FusedConvResidual) {
  auto p = prepare_shapes("FusedConv", {{2, 3, 8, 8}, {4, 3, 3, 3}, {4}, {2, 4, 8, 8}},
                          {{"pads", ints({1, 1, 1, 1})}, {"activation", str("Relu")}});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->rr.outputs.at(0).shape, (Shape{2, 4, 8, 8}));
  // Y may take Z's buffer: the convolution then accumulates onto it.
  EXPECT_EQ(p->rr.inplace, (std::vector<int>{3}));
  EXPECT_GT(p->rr.workspace_bytes, 0u);
  // Z without B.
  EXPECT_TRUE(prepare_shapes("FusedConv", {{2, 3, 8, 8}, {4, 3, 3, 3}, kOmitted, {2, 4, 6, 6}}, {}).ok());
  // No Z: nothing to share.
  auto no_z = prepare_shapes("FusedConv", {{2, 3, 8, 8}, {4, 3, 3, 3}, {4}}, {});
  ASSERT_TRUE(no_z.ok());
  EXPECT_TRUE(no_z->rr.inplace.empty());
  // Z must have the output's shape (no broadcasting).
  EXPECT_EQ(code_of("FusedConv", {{2, 3, 8, 8}, {4, 3, 3, 3}, {4}, {1, 4, 6, 6}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("FusedConv", {{2, 3, 8, 8}, {4, 3, 3, 3}, {4}, {4, 1, 1}}, {}), StatusCode::kInvalidArgument);
  // A plain Conv takes no fourth input.
  Spec conv{"Conv", "", 11, zeros({{2, 3, 8, 8}, {4, 3, 3, 3}, {4}, {2, 4, 6, 6}}), {}};
  auto n = conv.node();
  EXPECT_EQ(prepare_spec(*n, conv, RunSpec{}).status().code(), StatusCode::kInvalidArgument);
}

// Output sizes are the CPU kernel's: a 4-tap kernel over a 3-wide input is refused, where
// truncating division once made (3 - 4) / 2 + 1 an output of 1.
TEST(CudaFused, ConvRefusesAKernelWiderThanThePaddedInput) {
  Spec wide{"Conv", "", 11, zeros({{1, 1, 3, 3}, {1, 1, 4, 4}}), {{"strides", ints({2, 2})}}};
  auto n = wide.node();
  auto p = prepare_spec(*n, wide, RunSpec{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("kernel extent 4 exceeds padded input 3"), std::string::npos)
      << p.status().to_string();
  // SAME_UPPER pads it: ceil(3 / 2) = 2 outputs per axis, with the pads (1, 2) that cuDNN cannot
  // take (it needs them symmetric).
  Spec same{"Conv",
            "",
            11,
            zeros({{1, 1, 3, 3}, {1, 1, 4, 4}}),
            {{"strides", ints({2, 2})}, {"auto_pad", str("SAME_UPPER")}}};
  auto ns = same.node();
  EXPECT_EQ(prepare_spec(*ns, same, RunSpec{}).status().code(), StatusCode::kUnsupported);
}

TEST(CudaFused, FusedMatMulShapesAndErrors) {
  const auto shape = [](const std::vector<Shape>& in) {
    auto p = prepare_shapes("FusedMatMul", in, {{"activation", str("Gelu")}});
    return p.ok() ? p->rr.outputs.at(0).shape : Shape{-1};
  };
  EXPECT_EQ(shape({{5, 4}, {4, 6}, {6}}), (Shape{5, 6}));
  EXPECT_EQ(shape({{2, 5, 4}, {4, 6}, {6}}), (Shape{2, 5, 6}));
  EXPECT_EQ(shape({{3, 5, 4}, {3, 4, 6}, {6}}), (Shape{3, 5, 6}));
  EXPECT_EQ(shape({{4}, {4, 6}, {6}}), (Shape{6}));
  EXPECT_EQ(shape({{5, 4}, {4, 6}}), (Shape{5, 6}));
  // The bias is [N].
  EXPECT_EQ(code_of("FusedMatMul", {{5, 4}, {4, 6}, {5}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("FusedMatMul", {{5, 4}, {4, 6}, {1, 6}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("FusedMatMul", {{5, 4}, {4, 6}, {6}, {6}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("FusedMatMul", {{5, 4}, {3, 6}}, {}), StatusCode::kInvalidArgument);
  // FusedGemm's C broadcasts as Gemm's does.
  EXPECT_TRUE(prepare_shapes("FusedGemm", {{5, 4}, {4, 6}, {5, 1}}, {{"activation", str("Tanh")}}).ok());
  EXPECT_EQ(code_of("FusedGemm", {{5, 4}, {4, 6}, {4}}, {}), StatusCode::kInvalidArgument);
}

TEST(CudaFused, Float16DefsTakeFloat16Only) {
  // A float16 bias with float32 activations (or the reverse) is refused, not converted.
  std::vector<Tensor> mixed = zeros({{5, 4}, {4, 6}});
  mixed.push_back(to_fp16(Tensor::empty(DType::kFloat32, Shape{6})));
  Spec s{"FusedMatMul", "streamline", 1, mixed, {}};
  auto n = s.node();
  std::vector<TensorInfo> infos(3);
  for (size_t i = 0; i < 3; ++i) {
    infos[i].dtype = mixed[i].dtype();
    infos[i].shape = mixed[i].shape();
  }
  auto def = cuda_reg().find("FusedMatMul", "streamline", 1, Device::kCuda, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  KernelCreateArgs args{n->g,
                        n->node(),
                        {nullptr, nullptr, nullptr},
                        {DType::kFloat32, DType::kFloat32, DType::kFloat16},
                        KernelOptions{}};
  auto k = (*def)->create(args);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->reshape(infos).status().code(), StatusCode::kUnsupported);
  auto p16 = prepare_shapes("FusedConv", {{1, 3, 8, 8}, {4, 3, 3, 3}, {4}, {1, 4, 6, 6}}, {}, DType::kFloat16);
  ASSERT_TRUE(p16.ok()) << p16.status().to_string();
  EXPECT_EQ(p16->rr.outputs.at(0).dtype, DType::kFloat16);
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

TEST(GpuFused, FusedConvBiasResidualActivation) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1101);
  const Shape x{2, 8, 10, 10}, w{16, 8, 3, 3}, y{2, 16, 10, 10};
  for (const Act& a : kActivations)
    for (int bias = 0; bias < 2; ++bias)
      for (int z = 0; z < 2; ++z) {
        std::vector<Tensor> in{random_tensor(x, rng), random_tensor(w, rng, -0.3f, 0.3f),
                               bias ? random_tensor({16}, rng) : Tensor()};
        if (z) in.push_back(random_tensor(y, rng, -2.f, 2.f));
        const Spec s{"FusedConv", "streamline", 1, in, with_act({{"pads", ints({1, 1, 1, 1})}}, a)};
        SCOPED_TRACE(describe(a) + (bias ? " +B" : "") + (z ? " +Z" : ""));
        expect_fused_matches(s, RunSpec{}, 1e-5);
        expect_fused_matches(s, as_fp16(), 1e-2);
      }
}

TEST(GpuFused, FusedConvOtherGeometries) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1102);
  struct Case {
    Shape x, w;
    Attrs attrs;
  };
  const std::vector<Case> cases{{{1, 8, 12, 12}, {8, 1, 3, 3}, {{"group", one_int(8)}, {"pads", ints({1, 1, 1, 1})}}},
                                {{2, 4, 15, 17}, {6, 4, 3, 3}, {{"strides", ints({2, 2})}}},
                                {{1, 16, 7, 7}, {32, 16, 1, 1}, {}},
                                {{1, 64, 28, 28}, {64, 64, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}}};
  for (const Case& c : cases) {
    Spec shape_spec{"Conv", "", 11, zeros({c.x, c.w}), c.attrs};
    auto sn = shape_spec.node();
    auto p = prepare_spec(*sn, shape_spec, RunSpec{});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const Shape y = p->rr.outputs.at(0).shape;
    const std::vector<Tensor> in{random_tensor(c.x, rng), random_tensor(c.w, rng, -0.3f, 0.3f),
                                 random_tensor({c.w[0]}, rng), random_tensor(y, rng)};
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    const Spec s{"FusedConv", "streamline", 1, in, with_act(c.attrs, {"LeakyRelu", {0.1f}})};
    expect_fused_matches(s, RunSpec{}, 1e-5);
    expect_fused_matches(s, as_fp16(), 1e-2);
  }
}

TEST(GpuFused, FusedConvWritesOverItsResidual) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1103);
  for (int bias = 0; bias < 2; ++bias) {
    const std::vector<Tensor> in{random_tensor({2, 8, 9, 9}, rng), random_tensor({12, 8, 3, 3}, rng, -0.3f, 0.3f),
                                 bias ? random_tensor({12}, rng) : Tensor(), random_tensor({2, 12, 9, 9}, rng)};
    const Spec s{"FusedConv",
                 "streamline",
                 1,
                 in,
                 {{"pads", ints({1, 1, 1, 1})}, {"activation", str("Clip")}, {"activation_params", floats({0, 1})}}};
    SCOPED_TRACE(bias ? "with B" : "without B");
    RunSpec r;
    r.output_shares_input = 3;
    expect_fused_matches(s, r, 1e-5);
    RunSpec r16 = as_fp16();
    r16.output_shares_input = 3;
    expect_fused_matches(s, r16, 1e-2);
  }
}

TEST(GpuFused, FusedGemmEveryActivationAndC) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1104);
  const int64_t m = 32, k = 72, n = 48;
  struct CForm {
    Shape c;
    float beta;
  };
  const std::vector<CForm> forms{{{-1}, 1.f},   {{n}, 1.f},    {{n}, 0.5f}, {{1, n}, 1.f},
                                 {{m, n}, 2.f}, {{m, 1}, 1.f}, {{}, -1.f},  {{1, 1}, 1.f}};
  std::vector<Act> acts = kActivations;
  acts.push_back({"Gelu", {}});
  for (const Act& a : acts)
    for (const CForm& f : forms)
      for (int tb = 0; tb < 2; ++tb) {
        std::vector<Tensor> in{random_tensor({m, k}, rng), random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng)};
        if (!(f.c.rank() == 1 && f.c[0] < 0)) in.push_back(random_tensor(f.c, rng));
        Attrs attrs{{"transB", one_int(tb)}, {"alpha", one_float(0.75f)}, {"beta", one_float(f.beta)}};
        const Spec s{"FusedGemm", "streamline", 1, in, with_act(attrs, a)};
        SCOPED_TRACE(describe(a) + " C " + (in.size() > 2 ? f.c.to_string() : "none") + " beta " +
                     std::to_string(f.beta) + " transB " + std::to_string(tb));
        expect_fused_matches(s, RunSpec{}, 1e-5);
        expect_fused_matches(s, as_fp16(), 1e-2);
      }
}

TEST(GpuFused, FusedMatMulEveryActivation) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1105);
  const std::vector<std::pair<Shape, Shape>> cases{{{2, 5, 64}, {64, 48}},   {{3, 5, 32}, {3, 32, 16}},
                                                   {{5, 32}, {4, 32, 24}},   {{32}, {32, 24}},
                                                   {{128, 256}, {256, 512}}, {{7, 33}, {33, 17}}};
  std::vector<Act> acts = kActivations;
  acts.push_back({"Gelu", {}});
  for (const Act& a : acts)
    for (const auto& [as, bs] : cases)
      for (int bias = 0; bias < 2; ++bias) {
        const int64_t n = bs[bs.rank() - 1];
        std::vector<Tensor> in{random_tensor(as, rng), random_tensor(bs, rng)};
        if (bias) in.push_back(random_tensor({n}, rng));
        const Spec s{"FusedMatMul", "streamline", 1, in, with_act({}, a)};
        SCOPED_TRACE(describe(a) + " " + as.to_string() + " x " + bs.to_string() + (bias ? " +bias" : ""));
        expect_fused_matches(s, RunSpec{}, 1e-5);
        expect_fused_matches(s, as_fp16(), 1e-2);
      }
}

TEST(GpuFused, RunsCaptureIntoACudaGraph) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(1106);
  RunSpec r;
  r.capture_graph = true;
  RunSpec r16 = as_fp16();
  r16.capture_graph = true;
  const std::vector<Spec> specs{
      {"FusedConv",
       "streamline",
       1,
       {random_tensor({1, 8, 16, 16}, rng), random_tensor({8, 8, 3, 3}, rng, -0.3f, 0.3f), random_tensor({8}, rng),
        random_tensor({1, 8, 16, 16}, rng)},
       {{"pads", ints({1, 1, 1, 1})}, {"activation", str("Relu")}}},
      {"FusedMatMul",
       "streamline",
       1,
       {random_tensor({4, 16, 64}, rng), random_tensor({64, 32}, rng), random_tensor({32}, rng)},
       {{"activation", str("Gelu")}}},
      {"FusedGemm",
       "streamline",
       1,
       {random_tensor({16, 24}, rng), random_tensor({24, 40}, rng), random_tensor({16, 40}, rng)},
       {{"activation", str("Tanh")}}},
      {"LayerNormalization",
       "",
       17,
       {random_tensor({8, 64}, rng), random_tensor({64}, rng), random_tensor({64}, rng)},
       {}},
      {"Softmax", "", 13, {random_tensor({8, 100}, rng, -4, 4)}, {}},
      {"Add", "", 14, {random_tensor({4, 1, 8}, rng), random_tensor({3, 1}, rng)}, {}},
      {"Transpose", "", 13, {random_tensor({2, 3, 4}, rng)}, {{"perm", ints({2, 0, 1})}}}};
  for (const Spec& s : specs) {
    SCOPED_TRACE(s.op);
    expect_fused_matches(s, r, 1e-5);
    expect_fused_matches(s, r16, 1e-2);
  }
}

}  // namespace
}  // namespace streamline::ops::cuda_test
