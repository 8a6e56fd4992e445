// The transformer kernels (streamline.Gelu, streamline.LayerNormalization, streamline.Attention and
// FusedMatMul with activation "Gelu") against their plain references on random shapes, fixed seeds.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/op_test_util.h"
#include "ops/reference/ref_transformer.h"

namespace streamline::ops {
namespace {

using testing::expect_same_values;
using testing::ints;
using testing::make_node;
using testing::one_float;
using testing::random_tensor;
using testing::ref_reg;

// Runs the node through the optimised and the reference registry; compares output 0.
void compare(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, graph::Attribute> attrs,
             int threads, double rel, const std::string& what, double floor = 1e-3) {
  auto n = make_node(op, "streamline", inputs, std::move(attrs));
  EvalOptions eo;
  eo.num_threads = threads;
  eo.constant_mask.assign(inputs.size(), false);
  auto got = evaluate_node(default_cpu_registry(), n->g, n->node(), inputs, eo);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
  auto want = evaluate_node(ref_reg(), n->g, n->node(), inputs);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().to_string();
  expect_same_values((*got)[0], (*want)[0], rel, what, floor);
}

// ------------------------------------------------------------------------------------------------
// Gelu

TEST(Gelu, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(11);
  const std::vector<Shape> shapes = {{1}, {7}, {3, 5}, {2, 17, 33}, {4, 128, 96}, {1, 3, 8, 8}};
  for (const Shape& s : shapes)
    for (int threads : {1, 3})
      // 1 + erf(x / sqrt 2) cancels for negative x (in every float implementation, the unfused
      // graph's too), so the bound is absolute for outputs below 1.
      compare("Gelu", {random_tensor(s, rng, -6.f, 6.f)}, {}, threads, 1e-6,
              "Gelu " + s.to_string() + " threads " + std::to_string(threads), 1.0);
}

TEST(Gelu, KnownValuesAndSpecialInputs) {
  Tensor x = Tensor::from_vector<float>(Shape{5}, {0.f, 1.f, -1.f, 10.f, -10.f});
  auto n = make_node("Gelu", "streamline", {x}, {});
  auto y = evaluate_node(default_cpu_registry(), n->g, n->node(), std::vector<Tensor>{x});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const float* v = (*y)[0].data<float>();
  EXPECT_EQ(v[0], 0.f);
  EXPECT_NEAR(v[1], 0.8413447f, 1e-6);
  EXPECT_NEAR(v[2], -0.1586553f, 1e-6);
  EXPECT_NEAR(v[3], 10.f, 1e-6);
  EXPECT_NEAR(v[4], 0.f, 1e-6);
}

// ------------------------------------------------------------------------------------------------
// streamline.LayerNormalization

TEST(FusedLayerNorm, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(12);
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    bool bias;
    float eps;
  };
  const std::vector<Case> cases = {
      {{2, 5, 768}, -1, {768}, true, 1e-5f},    {{3, 7, 33}, -1, {33}, false, 1e-12f},
      {{4, 6, 10}, -2, {6, 10}, true, 1e-5f},   {{2, 9}, 1, {1}, true, 1e-3f},
      {{1, 1, 100}, -1, {1, 100}, true, 1e-5f},
  };
  for (const Case& c : cases) {
    const int64_t cols = c.x.back();
    std::vector<Tensor> in = {random_tensor(c.x, rng, -3.f, 5.f), random_tensor(c.scale, rng, 0.5f, 1.5f)};
    if (c.bias) in.push_back(random_tensor(Shape{cols}, rng));
    if (c.bias && c.axis == -2) in.back() = random_tensor(Shape{c.x[1], cols}, rng);
    for (int threads : {1, 2})
      compare("LayerNormalization", in, {{"axis", testing::one_int(c.axis)}, {"epsilon", one_float(c.eps)}}, threads,
              2e-6, "LayerNorm " + c.x.to_string() + " axis " + std::to_string(c.axis));
  }
}

// ------------------------------------------------------------------------------------------------
// streamline.Attention

struct AttnCase {
  std::string name;
  Shape q, k, v;
  std::vector<int64_t> q_perm, k_perm, v_perm, out_perm;
  Shape mask;  // empty: no mask
  float scale;
};

std::map<std::string, graph::Attribute> attn_attrs(const AttnCase& c) {
  std::map<std::string, graph::Attribute> a = {{"scale", one_float(c.scale)}};
  if (!c.q_perm.empty()) a["q_perm"] = ints(c.q_perm);
  if (!c.k_perm.empty()) a["k_perm"] = ints(c.k_perm);
  if (!c.v_perm.empty()) a["v_perm"] = ints(c.v_perm);
  if (!c.out_perm.empty()) a["out_perm"] = ints(c.out_perm);
  return a;
}

std::vector<Tensor> attn_inputs(const AttnCase& c, std::mt19937& rng) {
  std::vector<Tensor> in = {random_tensor(c.q, rng, -2.f, 2.f), random_tensor(c.k, rng, -2.f, 2.f),
                            random_tensor(c.v, rng)};
  if (!c.mask.empty()) {
    // Additive mask: mostly 0, some large negative entries, as padding masks are. A mask constant
    // along the keys gets moderate values instead: -10000 added to a whole row would round every
    // score to float's spacing at 10000 in both engines and say nothing about the kernel.
    Tensor m = random_tensor(c.mask, rng);
    const bool per_key = c.mask.back() > 1;
    for (int64_t i = 0; i < m.numel(); ++i) {
      float& x = m.data<float>()[i];
      x = per_key ? (x > 0.6f ? -10000.f : 0.f) : 2.f * x - 1.f;
    }
    in.push_back(m);
  }
  return in;
}

TEST(Attention, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(13);
  const std::vector<AttnCase> cases = {
      // Plain [N, Sq, D] @ [N, D, Sk], no perms.
      {"plain", {6, 10, 16}, {6, 16, 12}, {6, 12, 8}, {}, {}, {}, {}, {}, 0.25f},
      // nn.MultiheadAttention export: [S, N, D] per operand, the head split as perms.
      {"torch", {9, 12, 64}, {9, 12, 64}, {9, 12, 64}, {1, 0, 2}, {1, 2, 0}, {1, 0, 2}, {1, 0, 2}, {}, 0.125f},
      // BERT-style export: [B, S, H, D] with a [B, 1, 1, S] padding mask.
      {"bert",
       {2, 20, 4, 32},
       {2, 20, 4, 32},
       {2, 20, 4, 32},
       {0, 2, 1, 3},
       {0, 2, 3, 1},
       {0, 2, 1, 3},
       {0, 2, 1, 3},
       {2, 1, 1, 20},
       0.1767767f},
      // Several row blocks with a short last one, cross attention (Sq != Sk), Dv != D, [Sq, Sk] mask.
      {"blocks", {3, 150, 40}, {3, 40, 77}, {3, 77, 24}, {}, {}, {}, {}, {150, 77}, 0.3f},
      // A mask constant along the key axis ([.., Sq, 1]: column stride 0).
      {"mask_col", {2, 3, 5, 8}, {2, 3, 8, 6}, {2, 3, 6, 8}, {}, {}, {}, {}, {2, 1, 5, 1}, 1.f},
      // Batch broadcasting between operands of different ranks.
      {"broadcast", {2, 3, 7, 8}, {1, 3, 8, 9}, {3, 9, 5}, {}, {}, {}, {}, {}, 0.5f},
      // A mask with more batch dims than q, k and v: it widens the batch, as Add would.
      {"mask_batch", {2, 6, 8}, {2, 8, 7}, {2, 7, 4}, {}, {}, {}, {}, {3, 1, 6, 7}, 0.5f},
      // One query row.
      {"one_row", {4, 1, 16}, {4, 16, 33}, {4, 33, 16}, {}, {}, {}, {}, {4, 1, 33}, 0.25f},
      // No matrix dim contiguous in Q, K, V or the output: every operand takes the packing path.
      {"packed", {5, 6, 3}, {6, 16, 3}, {16, 8, 3}, {2, 0, 1}, {2, 0, 1}, {2, 0, 1}, {1, 2, 0}, {}, 0.4f},
  };
  for (const AttnCase& c : cases) {
    const std::vector<Tensor> in = attn_inputs(c, rng);
    for (int threads : {1, 3})
      compare("Attention", in, attn_attrs(c), threads, 2e-5, c.name + " threads " + std::to_string(threads));
  }
}

TEST(Attention, FullyMaskedKeysGetNoWeight) {
  // Keys 2..3 masked out with -inf-like values: the output is the softmax over keys 0..1 only.
  std::mt19937 rng(14);
  AttnCase c{"masked", {1, 3, 4}, {1, 4, 4}, {1, 4, 2}, {}, {}, {}, {}, {1, 1, 4}, 1.f};
  std::vector<Tensor> in = attn_inputs(c, rng);
  float* m = in[3].data<float>();
  m[0] = m[1] = 0.f;
  m[2] = m[3] = -1e30f;
  auto n = make_node("Attention", "streamline", in, attn_attrs(c));
  auto got = evaluate_node(default_cpu_registry(), n->g, n->node(), in);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  // Changing the masked keys' values must not change the output.
  for (int64_t j = 0; j < 2; ++j) in[2].data<float>()[2 * 2 + j] += 100.f;
  auto again = evaluate_node(default_cpu_registry(), n->g, n->node(), in);
  ASSERT_TRUE(again.ok());
  expect_same_values((*again)[0], (*got)[0], 0.0, "masked keys");
}

TEST(Attention, CausalSoftcapAndBoolMaskMatchReference) {
  // The attributes ONNX Attention brings to the fused op: is_causal (top-left, query i sees keys
  // 0..i), softcap, and a bool mask; with perms and several row blocks.
  std::mt19937 rng(19);
  const std::vector<AttnCase> cases = {
      {"causal_bert",
       {2, 70, 4, 32},
       {2, 70, 4, 32},
       {2, 70, 4, 32},
       {0, 2, 1, 3},
       {0, 2, 3, 1},
       {0, 2, 1, 3},
       {0, 2, 1, 3},
       {},
       0.1767767f},
      {"causal_cross", {3, 9, 16}, {3, 16, 12}, {3, 12, 8}, {}, {}, {}, {}, {9, 12}, 0.25f},
  };
  for (const AttnCase& c : cases)
    for (float softcap : {0.f, 1.5f}) {
      std::map<std::string, graph::Attribute> a = attn_attrs(c);
      a["is_causal"] = testing::one_int(1);
      if (softcap > 0.f) a["softcap"] = one_float(softcap);
      const std::vector<Tensor> in = attn_inputs(c, rng);
      for (int threads : {1, 3})
        compare("Attention", in, a, threads, 2e-5, c.name + " softcap " + std::to_string(softcap));
    }
  // A bool mask: false hides the key.
  AttnCase c{"bool", {2, 3, 5, 8}, {2, 3, 8, 7}, {2, 3, 7, 8}, {}, {}, {}, {}, {}, 0.5f};
  std::vector<Tensor> in = attn_inputs(c, rng);
  Tensor mask = Tensor::empty(DType::kBool, Shape{2, 1, 5, 7});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<uint8_t>()[i] = (rng() % 4) != 0;
  in.push_back(mask);
  compare("Attention", in, attn_attrs(c), 2, 2e-5, "bool mask");
}

TEST(Attention, BadShapesAreErrorsNotCrashes) {
  std::mt19937 rng(15);
  auto run = [&](const std::vector<Tensor>& in, std::map<std::string, graph::Attribute> attrs) {
    auto n = make_node("Attention", "streamline", in, std::move(attrs));
    return evaluate_node(default_cpu_registry(), n->g, n->node(), in).status();
  };
  const Tensor q = random_tensor({2, 4, 8}, rng), k = random_tensor({2, 8, 5}, rng), v = random_tensor({2, 5, 3}, rng);
  EXPECT_TRUE(run({q, k, v}, {}).ok());
  // Inner dimension mismatch (q's D 8, k's 7).
  EXPECT_EQ(run({q, random_tensor({2, 7, 5}, rng), v}, {}).code(), StatusCode::kInvalidArgument);
  // Sk mismatch between k and v.
  EXPECT_EQ(run({q, k, random_tensor({2, 6, 3}, rng)}, {}).code(), StatusCode::kInvalidArgument);
  // Batch dims that do not broadcast.
  EXPECT_EQ(run({q, random_tensor({3, 8, 5}, rng), v}, {}).code(), StatusCode::kInvalidArgument);
  // A perm of the wrong length, and one that is not a permutation.
  EXPECT_EQ(run({q, k, v}, {{"q_perm", ints({1, 0})}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run({q, k, v}, {{"k_perm", ints({0, 0, 1})}}).code(), StatusCode::kInvalidArgument);
  // A mask whose [Sq, Sk] part does not match, or whose batch dims do not broadcast.
  EXPECT_EQ(run({q, k, v, random_tensor({2, 4, 6}, rng)}, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run({q, k, v, random_tensor({3, 4, 5}, rng)}, {}).code(), StatusCode::kInvalidArgument);
  // Rank 1 operands.
  EXPECT_EQ(run({random_tensor({8}, rng), k, v}, {}).code(), StatusCode::kUnsupported);
}

// ------------------------------------------------------------------------------------------------
// FusedMatMul / FusedGemm with activation "Gelu" (oneDNN's gelu_erf post-op)

TEST(FusedMatMulGelu, MatchesMatMulThenGelu) {
  std::mt19937 rng(16);
  struct Case {
    Shape a, b;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 7, 48}, {48, 40}, true}, {{5, 33}, {33, 17}, false}, {{1, 128, 64}, {64, 256}, true}};
  for (const Case& c : cases) {
    std::vector<Tensor> in = {random_tensor(c.a, rng, -2.f, 2.f), random_tensor(c.b, rng, -0.5f, 0.5f)};
    in.push_back(c.bias ? random_tensor(Shape{c.b[1]}, rng) : Tensor());
    std::map<std::string, graph::Attribute> attrs = {{"activation", testing::str("Gelu")}};
    auto fused = make_node("FusedMatMul", "streamline", in, attrs);
    for (bool const_b : {true, false}) {
      EvalOptions eo;
      eo.num_threads = 2;
      eo.constant_mask = {false, const_b, true};
      auto got = evaluate_node(default_cpu_registry(), fused->g, fused->node(), in, eo);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      // Reference: the plain FusedMatMul, then the reference Gelu.
      auto plain = make_node("FusedMatMul", "streamline", in, {});
      auto mm = evaluate_node(ref_reg(), plain->g, plain->node(), in);
      ASSERT_TRUE(mm.ok()) << mm.status().to_string();
      auto gelu = make_node("Gelu", "streamline", {(*mm)[0]}, {});
      auto want = evaluate_node(ref_reg(), gelu->g, gelu->node(), std::vector<Tensor>{(*mm)[0]});
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      expect_same_values((*got)[0], (*want)[0], 1e-5, "FusedMatMul+Gelu " + c.a.to_string() + " x " + c.b.to_string());
    }
  }
}

TEST(FusedMatMulGelu, GemmTakesGeluToo) {
  std::mt19937 rng(17);
  std::vector<Tensor> in = {random_tensor({6, 20}, rng), random_tensor({12, 20}, rng), random_tensor({12}, rng)};
  std::map<std::string, graph::Attribute> attrs = {{"activation", testing::str("Gelu")},
                                                   {"transB", testing::one_int(1)}};
  auto fused = make_node("FusedGemm", "streamline", in, attrs);
  auto got = evaluate_node(default_cpu_registry(), fused->g, fused->node(), in);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto plain = make_node("Gemm", "", in, {{"transB", testing::one_int(1)}});
  auto mm = evaluate_node(ref_reg(), plain->g, plain->node(), in);
  ASSERT_TRUE(mm.ok()) << mm.status().to_string();
  auto gelu = make_node("Gelu", "streamline", {(*mm)[0]}, {});
  auto want = evaluate_node(ref_reg(), gelu->g, gelu->node(), std::vector<Tensor>{(*mm)[0]});
  ASSERT_TRUE(want.ok());
  expect_same_values((*got)[0], (*want)[0], 1e-5, "FusedGemm+Gelu");
}

// With several threads a 2-D product runs as one column block per thread (matmul.cc); blocks of
// unequal width, constant (some with padded rows) and run-time weights, bias, alpha and
// activations all stay exact.
TEST(MatMulColumnBlocks, MatchReferenceForEveryThreadCount) {
  std::mt19937 rng(18);
  struct Case {
    std::string op, domain;
    Shape a, b;
    bool bias;
    std::map<std::string, graph::Attribute> attrs;
  };
  const std::vector<Case> cases = {
      {"MatMul", "", {2, 9, 64}, {64, 200}, false, {}},
      {"FusedMatMul", "streamline", {37, 48}, {48, 130}, true, {{"activation", testing::str("Relu")}}},
      {"FusedMatMul", "streamline", {1, 5, 32}, {32, 96}, true, {{"activation", testing::str("Gelu")}}},
      {"Gemm",
       "",
       {7, 40},
       {150, 40},
       true,
       {{"transB", testing::one_int(1)}, {"alpha", one_float(0.5f)}, {"beta", one_float(2.f)}}},
      {"Gemm", "", {3, 20}, {20, 77}, true, {}},
      // N a multiple of 256: constant weights are stored with padded rows.
      {"FusedMatMul", "streamline", {2, 9, 64}, {64, 256}, true, {{"activation", testing::str("Gelu")}}},
      {"Gemm", "", {5, 24}, {512, 24}, true, {{"transB", testing::one_int(1)}}},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> in = {random_tensor(c.a, rng), random_tensor(c.b, rng)};
    const int64_t n = c.op == "Gemm" && c.attrs.count("transB") ? c.b[0] : c.b[1];
    if (c.bias) in.push_back(random_tensor(Shape{n}, rng));
    auto node = make_node(c.op, c.domain, in, c.attrs);
    // The reference of a Gelu product: the plain product, then Gelu.
    std::map<std::string, graph::Attribute> plain_attrs = c.attrs;
    const bool gelu = c.attrs.count("activation") && c.attrs.at("activation").s == "Gelu";
    if (gelu) plain_attrs.erase("activation");
    auto plain = make_node(c.op, c.domain, in, plain_attrs);
    auto want = evaluate_node(ref_reg(), plain->g, plain->node(), in);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    if (gelu) {
      auto g = make_node("Gelu", "streamline", {(*want)[0]}, {});
      want = evaluate_node(ref_reg(), g->g, g->node(), std::vector<Tensor>{(*want)[0]});
      ASSERT_TRUE(want.ok());
    }
    for (bool const_b : {true, false})
      for (int threads : {1, 2, 3, 4}) {
        EvalOptions eo;
        eo.num_threads = threads;
        eo.constant_mask.assign(in.size(), true);
        eo.constant_mask[0] = false;
        eo.constant_mask[1] = const_b;
        auto got = evaluate_node(default_cpu_registry(), node->g, node->node(), in, eo);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        expect_same_values((*got)[0], (*want)[0], 1e-5,
                           c.op + " " + c.a.to_string() + " x " + c.b.to_string() + " threads " +
                               std::to_string(threads) + (const_b ? " constant B" : " run-time B"));
      }
  }
}

}  // namespace
}  // namespace streamline::ops
