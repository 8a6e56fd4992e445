// The CUDA streamline.Attention kernel. Without a GPU: registration, reshape shapes and errors, and
// a host emulation of the kernel's addressing (the AttentionDims reshape plans, read exactly as
// attention.cu reads them) against the reference kernel. With a GPU (Gpu* suites): the kernel
// against the reference kernel (the optimised CPU kernel for BERT-sized shapes) on random inputs
// with fixed seeds, fp32 and fp16. Inputs are unit-scale, so tolerances are absolute.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/launch_attention.h"

namespace streamline::ops::cuda_test {
namespace {

using cuda::AttentionDims;
using testing::OneNode;
using Attrs = std::map<std::string, graph::Attribute>;

// BERT's layout: Q, K, V and Y as [B, S, H, D]; the heads split and merge through the perms.
Attrs bert_attrs(float scale) {
  return {{"scale", one_float(scale)},
          {"q_perm", ints({0, 2, 1, 3})},
          {"k_perm", ints({0, 2, 3, 1})},
          {"v_perm", ints({0, 2, 1, 3})},
          {"out_perm", ints({0, 2, 1, 3})}};
}

// A BERT attention mask [B, 1, 1, S]: 0 for the first valid[b] keys, -10000 after them.
Tensor padding_mask(const std::vector<int64_t>& valid, int64_t s) {
  const int64_t b = static_cast<int64_t>(valid.size());
  Tensor m = Tensor::empty(DType::kFloat32, {b, 1, 1, s});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < s; ++j) m.data<float>()[i * s + j] = j < valid[static_cast<size_t>(i)] ? 0.f : -10000.f;
  return m;
}

Tensor to_half(const Tensor& t) {
  Tensor h = Tensor::empty(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) h.data<uint16_t>()[i] = float_to_half(t.data<float>()[i]);
  return h;
}
Tensor to_float(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) return t;
  Tensor f = Tensor::empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = half_to_float(t.data<uint16_t>()[i]);
  return f;
}

// Creates the node's CUDA kernel for `dtype` and reshapes it for `inputs` (host only).
Result<Prepared> prepare(const OneNode& n, const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<TensorInfo> infos(inputs.size());
  std::vector<DType> dtypes(inputs.size(), DType::kUndefined);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    infos[i].dtype = dtypes[i] = inputs[i].dtype();
    infos[i].shape = inputs[i].shape();
  }
  SL_ASSIGN_OR_RETURN(const KernelDef* def,
                      cuda_reg().find(n.node().op_type, n.node().domain, 1, Device::kCuda, dtype));
  KernelCreateArgs args{n.g, n.node(), std::vector<const Tensor*>(inputs.size(), nullptr), dtypes, KernelOptions{}};
  Prepared p;
  SL_ASSIGN_OR_RETURN(p.kernel, def->create(args));
  SL_ASSIGN_OR_RETURN(p.rr, p.kernel->reshape(infos));
  return p;
}

// Output shape of the kernel for these input shapes (float32 unless told), or its error.
Result<Shape> attention_shape(const std::vector<Shape>& shapes, Attrs attrs, DType dtype = DType::kFloat32) {
  std::vector<Tensor> in;
  for (const Shape& s : shapes) in.push_back(Tensor::empty(dtype, s));
  auto n = make_node("Attention", "streamline", in, std::move(attrs));
  SL_ASSIGN_OR_RETURN(Prepared p, prepare(*n, in, dtype));
  return p.rr.outputs.at(0).shape;
}

// Runs the kernel on device copies of `inputs` (all of one dtype); the output comes back as fp32.
// The output is pre-filled with NaN bytes so that an unwritten element fails the comparison.
Result<Tensor> run_gpu(const OneNode& n, const std::vector<Tensor>& inputs) {
  SL_ASSIGN_OR_RETURN(Prepared p, prepare(n, inputs, inputs[0].dtype()));
  const OutputInfo& o = p.rr.outputs.at(0);
  const size_t out_bytes = static_cast<size_t>(o.shape.numel()) * dtype_size(o.dtype);
  size_t total = out_bytes + 2 * exec::cuda::kDeviceAlignment + p.rr.workspace_bytes;
  for (const Tensor& t : inputs) total += t.nbytes() + exec::cuda::kDeviceAlignment;
  SL_ASSIGN_OR_RETURN(auto arena, exec::cuda::DeviceArena::create(total));
  SL_ASSIGN_OR_RETURN(exec::cuda::CudaStream stream, exec::cuda::CudaStream::create());
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> dev_in, upload_inputs(*arena, inputs, stream.get()));
  SL_ASSIGN_OR_RETURN(void* y, arena->take(out_bytes));
  if (out_bytes > 0) SL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y, 0xFF, out_bytes, stream.get()), "output");
  std::vector<Tensor> dev_out{Tensor::view(o.dtype, o.shape, y)};
  SL_RETURN_IF_ERROR(p.kernel->run(device_run_context(p, dev_in, dev_out, /*workspace=*/nullptr, stream.get())));
  Tensor host = Tensor::empty(o.dtype, o.shape);
  if (out_bytes > 0)
    SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.raw(), y, out_bytes, cudaMemcpyDeviceToHost, stream.get()), "output");
  SL_RETURN_IF_ERROR(stream.synchronize());
  return to_float(host);
}

// max |got - want| <= atol, and no NaN where the reference has a number.
void expect_near(const Tensor& got, const Tensor& want, double atol) {
  ASSERT_EQ(got.shape(), want.shape());
  double max_diff = 0.0;
  int64_t nan = 0, worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.data<float>()[i], g = got.data<float>()[i];
    if (std::isnan(g) && !std::isnan(w)) ++nan;
    if (!std::isnan(g) && std::fabs(g - w) > max_diff) {
      max_diff = std::fabs(g - w);
      worst = i;
    }
  }
  EXPECT_EQ(nan, 0) << "elements left unwritten or NaN";
  EXPECT_LE(max_diff, atol) << "at element " << worst << " of " << want.shape().to_string();
}

enum class Against { kReference, kCpuKernel };

// The CUDA kernel for `dtype` against a CPU kernel on the same (for fp16: fp16-rounded) values.
void expect_matches(const std::vector<Tensor>& inputs_f32, const Attrs& attrs, DType dtype, double atol,
                    Against against = Against::kReference) {
  std::vector<Tensor> dev_inputs, ref_inputs;
  for (const Tensor& t : inputs_f32) {
    if (dtype == DType::kFloat16 && t.defined()) {
      dev_inputs.push_back(to_half(t));
      ref_inputs.push_back(to_float(dev_inputs.back()));
    } else {
      dev_inputs.push_back(t);
      ref_inputs.push_back(t);
    }
  }
  auto n = make_node("Attention", "streamline", ref_inputs, attrs);
  EvalOptions eo;
  eo.num_threads = 8;
  auto want = evaluate_node(against == Against::kReference ? testing::ref_reg() : testing::cpu_reg(), n->g, n->node(),
                            ref_inputs, eo);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = run_gpu(*n, dev_inputs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_near(*got, (*want)[0], atol);
}

// Attention in double computed from the raw input buffers through the AttentionDims that reshape
// planned, addressing every element as attention.cu does. Unwritten output elements stay NaN.
Tensor emulate(const AttentionDims& d, const std::vector<Tensor>& in, const Shape& y_shape) {
  Tensor y = Tensor::empty(DType::kFloat32, y_shape);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  const float* q = in[0].data<float>();
  const float* k = in[1].data<float>();
  const float* v = in[2].data<float>();
  const float* mask = in.size() > 3 && in[3].defined() ? in[3].data<float>() : nullptr;
  std::vector<double> s(static_cast<size_t>(d.sk));
  for (int64_t b = 0; b < d.batch_count; ++b) {
    int64_t qo = 0, ko = 0, vo = 0, mo = 0, oo = 0, rem = b;
    for (int j = d.batch_rank - 1; j >= 0; --j) {
      const int64_t i = rem % d.batch[j];
      rem /= d.batch[j];
      qo += i * d.q.batch[j];
      ko += i * d.k.batch[j];
      vo += i * d.v.batch[j];
      mo += i * d.mask.batch[j];
      oo += i * d.out.batch[j];
    }
    for (int64_t r = 0; r < d.sq; ++r) {
      double mx = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < d.sk; ++j) {
        double acc = 0.0;
        for (int64_t t = 0; t < d.d; ++t)
          acc += double(q[qo + r * d.q.rs + t * d.q.cs]) * k[ko + t * d.k.rs + j * d.k.cs];
        acc *= d.scale;
        if (mask != nullptr) acc += mask[mo + r * d.mask.rs + j * d.mask.cs];
        s[static_cast<size_t>(j)] = acc;
        mx = std::max(mx, acc);
      }
      for (double& x : s) sum += x = std::exp(x - mx);
      for (int64_t c = 0; c < d.dv; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < d.sk; ++j) acc += s[static_cast<size_t>(j)] / sum * v[vo + j * d.v.rs + c * d.v.cs];
        y.data<float>()[oo + r * d.out.rs + c * d.out.cs] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

// ---------------------------------------------------------------------------------------------
// No GPU needed.

TEST(CudaAttention, RegistersFloat32AndFloat16) {
  const KernelRegistry& reg = cuda_reg();
  EXPECT_TRUE(reg.has_op("Attention", "streamline", 1, Device::kCuda));
  EXPECT_FALSE(reg.has_op("Attention", "", 13, Device::kCuda));
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    auto def = reg.find("Attention", "streamline", 1, Device::kCuda, t);
    ASSERT_TRUE(def.ok()) << dtype_name(t);
    EXPECT_EQ((*def)->provider, "cuda");
    EXPECT_EQ((*def)->dtype, t);
  }
  EXPECT_FALSE(reg.find("Attention", "streamline", 1, Device::kCuda, DType::kFloat64).ok());
}

TEST(CudaAttention, ReshapeShapes) {
  auto shape = [](const std::vector<Shape>& in, const Attrs& a, DType t = DType::kFloat32) {
    auto r = attention_shape(in, a, t);
    if (!r.ok()) {
      ADD_FAILURE() << r.status().to_string();
      return Shape{-1};
    }
    return *r;
  };
  // BERT: [B, S, H, D] in and out.
  EXPECT_EQ(shape({{2, 128, 12, 64}, {2, 128, 12, 64}, {2, 128, 12, 64}, {2, 1, 1, 128}}, bert_attrs(0.125f)),
            (Shape{2, 128, 12, 64}));
  EXPECT_EQ(shape({{2, 128, 12, 64}, {2, 128, 12, 64}, {2, 128, 12, 64}}, bert_attrs(0.125f), DType::kFloat16),
            (Shape{2, 128, 12, 64}));
  // Identity perms, Sq != Sk, Dv != D.
  EXPECT_EQ(shape({{2, 3, 50, 16}, {2, 3, 16, 70}, {2, 3, 70, 40}}, {}), (Shape{2, 3, 50, 40}));
  // Batch dims broadcast (K and V shared by the batch, V of lower rank), masks of several ranks.
  EXPECT_EQ(shape({{2, 3, 20, 16}, {1, 3, 16, 24}, {3, 24, 16}, {2, 1, 20, 1}}, {}), (Shape{2, 3, 20, 16}));
  EXPECT_EQ(shape({{2, 3, 20, 16}, {2, 3, 16, 24}, {2, 3, 24, 16}, {20, 24}}, {}), (Shape{2, 3, 20, 16}));
  EXPECT_EQ(shape({{2, 3, 20, 16}, {2, 3, 16, 24}, {2, 3, 24, 16}, {24}}, {}), (Shape{2, 3, 20, 16}));
  EXPECT_EQ(shape({{3, 20, 16}, {3, 16, 24}, {3, 24, 16}, {5, 1, 1, 24}}, {}), (Shape{5, 3, 20, 16}));
  // out_perm alone; head dim 128 on the fast path.
  EXPECT_EQ(shape({{2, 3, 20, 16}, {2, 3, 16, 24}, {2, 3, 24, 16}}, {{"out_perm", ints({0, 2, 1, 3})}}),
            (Shape{2, 20, 3, 16}));
  EXPECT_EQ(shape({{1, 2, 9, 128}, {1, 2, 128, 9}, {1, 2, 9, 128}}, {}), (Shape{1, 2, 9, 128}));
}

TEST(CudaAttention, ReshapeErrors) {
  const std::vector<Shape> qkv{{2, 3, 20, 16}, {2, 3, 16, 24}, {2, 3, 24, 16}};
  auto code = [](const std::vector<Shape>& in, const Attrs& a, DType t = DType::kFloat32) {
    return attention_shape(in, a, t).status().code();
  };
  // A perm that is not a permutation (refused at create), or of the wrong length (at reshape).
  auto bad = attention_shape(qkv, {{"q_perm", ints({0, 1, 1, 3})}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("node0"), std::string::npos) << bad.status().message();
  EXPECT_EQ(code(qkv, {{"out_perm", ints({0, 1, 2, 4})}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(qkv, {{"k_perm", ints({0, 2, 1})}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(qkv, {{"out_perm", ints({1, 0, 2})}}), StatusCode::kInvalidArgument);
  // Inner dims that differ; operands of rank 1.
  EXPECT_EQ(code({{2, 3, 20, 16}, {2, 3, 8, 24}, {2, 3, 24, 16}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{2, 3, 20, 16}, {2, 3, 16, 24}, {2, 3, 25, 16}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{16}, {16, 24}, {24, 16}}, {}), StatusCode::kUnsupported);
  // Head dims above the fast path's 128.
  auto wide = attention_shape({{1, 2, 9, 160}, {1, 2, 160, 9}, {1, 2, 9, 64}}, {});
  EXPECT_EQ(wide.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(wide.status().message().find("128"), std::string::npos) << wide.status().message();
  EXPECT_EQ(code({{1, 2, 9, 64}, {1, 2, 64, 9}, {1, 2, 9, 129}}, {}), StatusCode::kUnsupported);
  // Masks whose matrix dims are neither Sq/Sk nor 1, or whose batch dims do not broadcast.
  std::vector<Shape> with_mask = qkv;
  with_mask.push_back({2, 1, 5, 24});
  EXPECT_EQ(code(with_mask, {}), StatusCode::kInvalidArgument);
  with_mask.back() = {2, 1, 20, 23};
  EXPECT_EQ(code(with_mask, {}), StatusCode::kInvalidArgument);
  with_mask.back() = {3, 1, 1, 24};
  EXPECT_EQ(code(with_mask, {}), StatusCode::kInvalidArgument);
  // Batch dims of Q, K, V that do not broadcast.
  EXPECT_EQ(code({{2, 3, 20, 16}, {4, 3, 16, 24}, {2, 3, 24, 16}}, {}), StatusCode::kInvalidArgument);
  // Too many batch dims.
  EXPECT_EQ(code({{1, 1, 1, 1, 1, 1, 2, 4, 8}, {2, 8, 4}, {2, 4, 8}}, {}), StatusCode::kUnsupported);
}

TEST(CudaAttention, Float16DefRefusesOtherDtypes) {
  std::vector<Tensor> in{Tensor::empty(DType::kFloat16, {1, 2, 8, 16}), Tensor::empty(DType::kFloat16, {1, 2, 16, 8}),
                         Tensor::empty(DType::kFloat16, {1, 2, 8, 16}), Tensor::empty(DType::kFloat32, {1, 1, 1, 8})};
  auto n = make_node("Attention", "streamline", in, {});
  auto p = prepare(*n, in, DType::kFloat16);
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  in.pop_back();
  EXPECT_TRUE(prepare(*n, in, DType::kFloat16).ok());
}

// The strides reshape plans address every element as the reference kernel's definition does.
TEST(CudaAttention, PlannedStridesMatchReference) {
  std::mt19937 rng(11);
  struct Case {
    std::vector<Tensor> in;
    Attrs attrs;
  };
  std::vector<Case> cases;
  cases.push_back({{random_tensor({2, 7, 3, 8}, rng), random_tensor({2, 7, 3, 8}, rng),
                    random_tensor({2, 7, 3, 8}, rng), padding_mask({7, 4}, 7)},
                   bert_attrs(0.35f)});
  cases.push_back({{random_tensor({2, 3, 5, 8}, rng), random_tensor({2, 3, 8, 6}, rng),
                    random_tensor({2, 3, 6, 4}, rng), random_tensor({5, 6}, rng)},
                   {{"out_perm", ints({2, 0, 1, 3})}}});
  cases.push_back({{random_tensor({2, 3, 5, 8}, rng), random_tensor({1, 3, 8, 6}, rng), random_tensor({3, 6, 4}, rng),
                    random_tensor({2, 1, 5, 1}, rng)},
                   {{"scale", one_float(0.5f)}}});
  // Every operand permuted differently, the output too.
  cases.push_back({{random_tensor({5, 2, 8}, rng), random_tensor({6, 8, 2}, rng), random_tensor({2, 4, 6}, rng)},
                   {{"q_perm", ints({1, 0, 2})},
                    {"k_perm", ints({2, 1, 0})},
                    {"v_perm", ints({0, 2, 1})},
                    {"out_perm", ints({1, 2, 0})}}});
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    auto n = make_node("Attention", "streamline", cases[c].in, cases[c].attrs);
    auto want = evaluate_node(testing::ref_reg(), n->g, n->node(), cases[c].in);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    auto p = prepare(*n, cases[c].in, DType::kFloat32);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ(p->rr.outputs.at(0).shape, (*want)[0].shape());
    const auto* dims = static_cast<const AttentionDims*>(p->rr.state.get());
    ASSERT_NE(dims, nullptr);
    expect_near(emulate(*dims, cases[c].in, (*want)[0].shape()), (*want)[0], 1e-6);
  }
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

constexpr double kFp32Tol = 3e-5;
// fp16 output rounding alone is up to 4.9e-4 on unit-scale outputs (inputs are rounded before the
// reference sees them).
constexpr double kFp16Tol = 2e-3;

// Small shapes against the reference kernel, for both dtypes: the head split layouts, masks, tile
// edges (S not a multiple of 16 or 32 rows, nor of the 32-key tile), Sq != Sk, Dv != D.
TEST(GpuAttention, MatchesReference) {
  SL_REQUIRE_GPU();
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const double tol = t == DType::kFloat32 ? kFp32Tol : kFp16Tol;
    std::mt19937 rng(2024);
    auto r = [&](const Shape& s) { return random_tensor(s, rng); };
    {
      SCOPED_TRACE("BERT perms with a padding mask, S 77");
      expect_matches({r({2, 77, 3, 64}), r({2, 77, 3, 64}), r({2, 77, 3, 64}), padding_mask({77, 50}, 77)},
                     bert_attrs(0.125f), t, tol);
    }
    {
      SCOPED_TRACE("BERT perms, no mask, D 32");
      expect_matches({r({1, 40, 2, 32}), r({1, 40, 2, 32}), r({1, 40, 2, 32})}, bert_attrs(0.25f), t, tol);
    }
    {
      SCOPED_TRACE("identity perms, Sq 50, Sk 70");
      const std::vector<Tensor> qkv{r({2, 3, 50, 64}), r({2, 3, 64, 70}), r({2, 3, 70, 64})};
      expect_matches(qkv, {{"scale", one_float(0.125f)}}, t, tol);
      expect_matches({qkv[0], qkv[1], qkv[2], padding_mask({70, 33}, 70)}, {{"scale", one_float(0.125f)}}, t, tol);
    }
    {
      SCOPED_TRACE("Dv != D, a random [Sq, Sk] mask, out_perm");
      expect_matches({r({3, 33, 16}), r({3, 16, 45}), r({3, 45, 40}), random_tensor({33, 45}, rng, -2.f, 0.f)},
                     {{"out_perm", ints({1, 0, 2})}}, t, tol);
    }
    {
      SCOPED_TRACE("head dim 128, a [B, 1, Sq, Sk] mask");
      expect_matches(
          {r({2, 2, 37, 128}), r({2, 2, 128, 37}), r({2, 2, 37, 128}), random_tensor({2, 1, 37, 37}, rng, -3.f, 0.f)},
          {{"scale", one_float(0.0884f)}}, t, tol);
    }
    {
      SCOPED_TRACE("broadcast batch dims, mask over Sq only");
      expect_matches({r({2, 3, 20, 16}), r({1, 3, 16, 24}), r({3, 24, 16}), random_tensor({2, 1, 20, 1}, rng)},
                     {{"scale", one_float(0.5f)}}, t, tol);
    }
    {
      SCOPED_TRACE("one query, one key");
      expect_matches({r({1, 1, 1, 8}), r({1, 1, 8, 1}), r({1, 1, 1, 8})}, {}, t, tol);
    }
    {
      SCOPED_TRACE("peaked scores (scale 1, D 64), S 300");
      expect_matches({r({1, 300, 1, 64}), r({1, 300, 1, 64}), r({1, 300, 1, 64})}, bert_attrs(1.f), t, tol);
    }
  }
}

// BERT-base shapes (12 heads of 64, S 128 and 512, larger batches), which take the 8-warp blocks,
// against the optimised CPU kernel (itself tested against the reference in tests/ops).
TEST(GpuAttention, BertShapesMatchCpuKernel) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(7);
  struct Case {
    int64_t b, s, h, d;
  };
  for (const Case& c : {Case{8, 128, 12, 64}, Case{4, 512, 12, 64}, Case{4, 256, 8, 32}, Case{2, 384, 4, 128}}) {
    std::vector<int64_t> valid;
    for (int64_t i = 0; i < c.b; ++i) valid.push_back(c.s - (i * 37) % c.s);
    const std::vector<Tensor> in{random_tensor({c.b, c.s, c.h, c.d}, rng), random_tensor({c.b, c.s, c.h, c.d}, rng),
                                 random_tensor({c.b, c.s, c.h, c.d}, rng), padding_mask(valid, c.s)};
    const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
    for (DType t : {DType::kFloat32, DType::kFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " B " + std::to_string(c.b) + " S " + std::to_string(c.s) + " H " +
                   std::to_string(c.h) + " D " + std::to_string(c.d));
      expect_matches(in, bert_attrs(scale), t, t == DType::kFloat32 ? kFp32Tol : kFp16Tol, Against::kCpuKernel);
    }
  }
}

// Zero-sized outputs launch nothing; Sk 0 writes zeros (an empty weighted sum).
TEST(GpuAttention, EmptyShapes) {
  SL_REQUIRE_GPU();
  std::mt19937 rng(5);
  const std::vector<Tensor> empty_q{random_tensor({1, 2, 0, 8}, rng), random_tensor({1, 2, 8, 5}, rng),
                                    random_tensor({1, 2, 5, 8}, rng)};
  auto n = make_node("Attention", "streamline", empty_q, {});
  auto y = run_gpu(*n, empty_q);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (Shape{1, 2, 0, 8}));
  const std::vector<Tensor> no_keys{random_tensor({1, 2, 3, 8}, rng), random_tensor({1, 2, 8, 0}, rng),
                                    random_tensor({1, 2, 0, 8}, rng)};
  auto m = make_node("Attention", "streamline", no_keys, {});
  auto z = run_gpu(*m, no_keys);
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  for (int64_t i = 0; i < z->numel(); ++i) EXPECT_EQ(z->data<float>()[i], 0.f) << i;
}

}  // namespace
}  // namespace streamline::ops::cuda_test
