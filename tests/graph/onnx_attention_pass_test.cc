// ONNX Attention (opset 23) into streamline.Attention: the 4-D form with its head-split and
// head-merge Transposes becomes one fused node with permutations and gives the unfused graph's
// outputs; the forms the fused op does not cover (grouped kv heads, a short mask, a KV cache, a
// read qk output, 3-D inputs) keep their ONNX node.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "graph/graph_run_util.h"
#include "graph/onnx_import.h"
#include "graph/onnx_test_models.h"
#include "graph/passes.h"
#include "ops/evaluator.h"

namespace streamline::graph {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::OnnxModel;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

struct Spec {
  int64_t kv_heads = 4;  // query heads: 4
  bool mask = false;
  bool bool_mask = false;
  std::string mask_keys = "S";  // the mask's last dim
  bool causal = true;
  float softcap = 0.f;
  bool past = false;       // past_key/past_value inputs
  bool qk_output = false;  // qk_matmul_output read as a graph output
};

// x [B, S, H, D] per operand -> Transpose(0, 2, 1, 3) -> Attention -> Transpose(0, 2, 1, 3).
std::unique_ptr<OnnxModel> model(const Spec& s) {
  auto mp = std::make_unique<OnnxModel>(23);
  OnnxModel& m = *mp;
  const std::string hk = std::to_string(s.kv_heads);
  m.input("q", kFloat, {"B", "S", "4", "16"});
  m.input("k", kFloat, {"B", "S", hk, "16"});
  m.input("v", kFloat, {"B", "S", hk, "16"});
  std::vector<std::string> in = {"qt", "kt", "vt"};
  if (s.mask || s.past) in.push_back(s.mask ? "mask" : "");
  if (s.mask) m.input("mask", s.bool_mask ? kBool : kFloat, {"S", s.mask_keys});
  if (s.past) {
    m.input("past_k", kFloat, {"B", hk, "3", "16"});
    m.input("past_v", kFloat, {"B", hk, "3", "16"});
    in.insert(in.end(), {"past_k", "past_v"});
  }
  for (const char* n : {"q", "k", "v"})
    attr_ints(m.node("Transpose", std::string("t") + n, {n}, {std::string(n) + "t"}), "perm", {0, 2, 1, 3});
  std::vector<std::string> out = {"o"};
  if (s.qk_output) out = {"o", "", "", "qk"};
  auto* a = m.node("Attention", "attn", in, out);
  if (s.causal) attr_int(a, "is_causal", 1);
  if (s.softcap > 0.f) attr_float(a, "softcap", s.softcap);
  attr_ints(m.node("Transpose", "to", {"o"}, {"y"}), "perm", {0, 2, 1, 3});
  m.output("y", kFloat, {"B", "S", "4", "16"});
  if (s.qk_output) m.output("qk", kFloat, {"B", "4", "S", "?"});
  return mp;
}

std::vector<Tensor> inputs(const Spec& s, int64_t seq) {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  auto random = [&](const Shape& sh) {
    Tensor t = Tensor::empty(DType::kFloat32, sh);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    return t;
  };
  std::vector<Tensor> in = {random({2, seq, 4, 16}), random({2, seq, s.kv_heads, 16}),
                            random({2, seq, s.kv_heads, 16})};
  if (s.mask) {
    const int64_t keys = s.mask_keys == "S" ? seq : std::stoll(s.mask_keys);
    Tensor m = Tensor::empty(s.bool_mask ? DType::kBool : DType::kFloat32, Shape{seq, keys});
    for (int64_t i = 0; i < m.numel(); ++i) {
      const bool keep = i % keys != 2 || i < keys;  // key 2 hidden from every query but the first
      if (s.bool_mask)
        m.data<uint8_t>()[i] = keep;
      else
        m.data<float>()[i] = keep ? 0.1f * static_cast<float>(i % 3) : -1e9f;
    }
    in.push_back(m);
  }
  if (s.past) {
    in.push_back(random({2, s.kv_heads, 3, 16}));
    in.push_back(random({2, s.kv_heads, 3, 16}));
  }
  return in;
}

Graph import(const OnnxModel& m) {
  ImportOptions io;
  io.max_opset = 23;  // this test is about the pass, whatever the default import range
  auto g = import_onnx_bytes(m.bytes(), "", io);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(g).value() : Graph();
}

int live(const Graph& g, const std::string& op, const std::string& domain) {
  int c = 0;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    c += !n.dead && n.op_type == op && n.domain == domain;
  }
  return c;
}

const Node* fused_attention(const Graph& g) {
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (!n.dead && n.op_type == "Attention" && n.domain == kStreamlineDomain) return &n;
  }
  return nullptr;
}

struct Result2 {
  Graph fused;
  PassReport report;
};

// Optimises one import, runs it and an unoptimised import on the same inputs, compares.
Result2 optimise_and_compare(const Spec& s, int64_t seq = 7) {
  auto m = model(s);
  Result2 r{import(*m), {}};
  Graph plain = import(*m);
  ops::KernelEvaluator eval(ops::default_cpu_registry());
  EXPECT_TRUE(run_passes(r.fused, PassOptions{}, &eval, &r.report).ok());
  const std::vector<Tensor> in = inputs(s, seq);
  auto a = testing::run_graph(r.fused, in);
  auto b = testing::run_graph(plain, in);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (!a.ok() || !b.ok()) return r;
  const Tensor &x = (*a)[0], &y = (*b)[0];
  EXPECT_EQ(x.shape(), y.shape());
  double max_ref = 0.0, max_diff = 0.0;
  for (int64_t k = 0; k < y.numel() && x.shape() == y.shape(); ++k) {
    max_ref = std::max(max_ref, std::fabs(double(y.data<float>()[k])));
    max_diff = std::max(max_diff, std::fabs(double(x.data<float>()[k]) - y.data<float>()[k]));
  }
  EXPECT_LE(max_diff, 1e-5 * std::max(max_ref, 1e-6)) << "max ref " << max_ref;
  return r;
}

TEST(FuseOnnxAttention, TransposesBecomePermutations) {
  for (float softcap : {0.f, 3.f}) {
    Spec s;
    s.softcap = softcap;
    Result2 r = optimise_and_compare(s);
    EXPECT_EQ(r.report.attention_fused, 1);
    EXPECT_EQ(r.fused.live_node_count(), 1);
    const Node* a = fused_attention(r.fused);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->attr_ints("q_perm"), (std::vector<int64_t>{0, 2, 1, 3}));
    EXPECT_EQ(a->attr_ints("k_perm"), (std::vector<int64_t>{0, 2, 3, 1}));
    EXPECT_EQ(a->attr_ints("v_perm"), (std::vector<int64_t>{0, 2, 1, 3}));
    EXPECT_EQ(a->attr_ints("out_perm"), (std::vector<int64_t>{0, 2, 1, 3}));
    EXPECT_FLOAT_EQ(a->attr_float("scale", 0.f), 0.25f);  // 1 / sqrt(16)
    EXPECT_EQ(a->attr_int("is_causal", 0), 1);
    EXPECT_FLOAT_EQ(a->attr_float("softcap", 0.f), softcap);
    EXPECT_EQ(r.fused.value(r.fused.outputs()[0]).name, "y");
  }
}

TEST(FuseOnnxAttention, MasksCoveringEveryKeyAndOneKvHeadFuse) {
  Spec float_mask;
  float_mask.mask = true;
  Spec bool_mask = float_mask;
  bool_mask.bool_mask = true;
  Spec mqa;
  mqa.kv_heads = 1;  // the fused op broadcasts K and V over the query heads
  for (const Spec* s : {&float_mask, &bool_mask, &mqa}) {
    Result2 r = optimise_and_compare(*s, 70);  // two query-row blocks
    EXPECT_EQ(r.report.attention_fused, 1);
    ASSERT_NE(fused_attention(r.fused), nullptr);
    EXPECT_EQ(fused_attention(r.fused)->inputs.size(), s->mask ? 4u : 3u);
  }
}

TEST(FuseOnnxAttention, FormsTheFusedOpDoesNotCoverAreLeftAlone) {
  Spec gqa;
  gqa.kv_heads = 2;
  Spec short_mask;  // 5 keys of a mask for 7: ONNX hides the last two, the fused op would broadcast
  short_mask.mask = true;
  short_mask.mask_keys = "5";
  Spec cache;
  cache.past = true;
  Spec qk;
  qk.qk_output = true;
  for (const Spec* s : {&gqa, &short_mask, &cache, &qk}) {
    SCOPED_TRACE(s == &gqa ? "gqa" : s == &short_mask ? "short mask" : s == &cache ? "cache" : "qk output");
    auto m = model(*s);
    Graph g = import(*m);
    ops::KernelEvaluator eval(ops::default_cpu_registry());
    PassReport r;
    ASSERT_TRUE(run_passes(g, PassOptions{}, &eval, &r).ok());
    EXPECT_EQ(r.attention_fused, 0);
    EXPECT_EQ(live(g, "Attention", ""), 1);
    EXPECT_EQ(live(g, "Transpose", ""), 4);
  }
}

}  // namespace
}  // namespace streamline::graph
