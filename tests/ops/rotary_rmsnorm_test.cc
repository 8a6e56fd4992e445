// RotaryEmbedding and RMSNormalization (opset 23) against their plain references on random shapes
// with fixed seeds, in place where the planner would alias, and their errors.

#include <gtest/gtest.h>

#include <random>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using testing::expect_same_values;
using testing::one_float;
using testing::one_int;
using testing::random_tensor;
using testing::run_one;

struct RotaryCase {
  std::string name;
  bool three_d = false;
  int64_t b = 2, heads = 3, seq = 5, d = 8;
  int64_t rotary_dim = 0;  // 0: the whole head
  bool interleaved = false;
  bool positions = true;
};

std::vector<Tensor> rotary_inputs(const RotaryCase& c, std::mt19937& rng) {
  const int64_t half = (c.rotary_dim > 0 ? c.rotary_dim : c.d) / 2;
  const Shape x = c.three_d ? Shape{c.b, c.seq, c.heads * c.d} : Shape{c.b, c.heads, c.seq, c.d};
  const int64_t max_pos = 40;
  const Shape cache = c.positions ? Shape{max_pos, half} : Shape{c.b, c.seq, half};
  std::vector<Tensor> in = {random_tensor(x, rng, -3.f, 3.f), random_tensor(cache, rng), random_tensor(cache, rng)};
  if (c.positions) {
    std::vector<int64_t> pos;
    for (int64_t i = 0; i < c.b * c.seq; ++i) pos.push_back(static_cast<int64_t>(rng() % max_pos));
    in.push_back(testing::int64_tensor(Shape{c.b, c.seq}, pos));
  }
  return in;
}

std::map<std::string, graph::Attribute> rotary_attrs(const RotaryCase& c) {
  std::map<std::string, graph::Attribute> a;
  if (c.three_d) a["num_heads"] = one_int(c.heads);
  if (c.rotary_dim > 0) a["rotary_embedding_dim"] = one_int(c.rotary_dim);
  if (c.interleaved) a["interleaved"] = one_int(1);
  return a;
}

TEST(RotaryEmbedding, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(31);
  const std::vector<RotaryCase> cases = {
      {"4d"},
      {"4d_interleaved", false, 2, 3, 5, 8, 0, true},
      {"3d", true, 2, 4, 3, 16},
      {"3d_partial_interleaved", true, 1, 2, 7, 16, 6, true},
      {"partial_no_positions", false, 2, 2, 9, 64, 32, false, false},
      {"interleaved_no_positions", false, 3, 1, 4, 10, 0, true, false},
      {"llama_head", false, 1, 8, 33, 128},
  };
  for (const RotaryCase& c : cases) {
    const std::vector<Tensor> in = rotary_inputs(c, rng);
    auto want = run_one(testing::ref_reg(), "RotaryEmbedding", 23, in, rotary_attrs(c));
    ASSERT_TRUE(want.ok()) << c.name << ": " << want.status().to_string();
    for (int threads : {1, 3}) {
      auto got = run_one(testing::cpu_reg(), "RotaryEmbedding", 23, in, rotary_attrs(c), {true}, threads);
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().to_string();
      expect_same_values((*got)[0], (*want)[0], 1e-6, c.name);
    }
  }
}

TEST(RotaryEmbedding, RunsInPlace) {
  // The planner may give the output the input's buffer; the result must not change.
  std::mt19937 rng(32);
  for (bool interleaved : {false, true}) {
    RotaryCase c{"inplace", false, 1, 2, 3, 12, 8, interleaved};
    std::vector<Tensor> in = rotary_inputs(c, rng);
    graph::Graph g;
    g.opsets[""] = 23;
    std::vector<graph::ValueId> ins;
    for (size_t i = 0; i < in.size(); ++i) ins.push_back(g.add_value("in" + std::to_string(i), in[i].dtype()));
    const graph::NodeId id = g.add_node("RotaryEmbedding", "rot", ins, {g.add_value("y")});
    g.node(id).attrs = rotary_attrs(c);
    const KernelDef* def = *testing::cpu_reg().find("RotaryEmbedding", "", 23, Device::kCpu, DType::kFloat32);
    auto kernel = def->create(KernelCreateArgs{g, g.node(id), {}, {}, {}});
    ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
    std::vector<TensorInfo> infos;
    for (const Tensor& t : in) infos.push_back(TensorInfo{t.dtype(), t.shape()});
    auto rr = (*kernel)->reshape(infos);
    ASSERT_TRUE(rr.ok()) << rr.status().to_string();
    EXPECT_EQ(rr->inplace, std::vector<int>{0});
    auto want = run_one(testing::ref_reg(), "RotaryEmbedding", 23, in, rotary_attrs(c));
    ASSERT_TRUE(want.ok());
    std::vector<Tensor> outs = {in[0]};  // output aliases input 0
    RunContext rc;
    rc.inputs = in;
    rc.outputs = outs;
    rc.state = rr->state.get();
    ASSERT_TRUE((*kernel)->run(rc).ok());
    expect_same_values(in[0], (*want)[0], 1e-6, interleaved ? "interleaved in place" : "in place");
  }
}

TEST(RotaryEmbedding, BadInputsAreClearErrors) {
  std::mt19937 rng(33);
  RotaryCase c{"bad"};
  std::vector<Tensor> in = rotary_inputs(c, rng);
  in[3].data<int64_t>()[4] = 40;  // one past the caches
  auto r = run_one(testing::cpu_reg(), "RotaryEmbedding", 23, in, rotary_attrs(c));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("position_ids value 40"), std::string::npos) << r.status().to_string();
  // An odd rotary dim, and a 3-D input without num_heads.
  auto odd =
      run_one(testing::cpu_reg(), "RotaryEmbedding", 23, rotary_inputs(c, rng), {{"rotary_embedding_dim", one_int(5)}});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("even"), std::string::npos) << odd.status().to_string();
  RotaryCase c3{"3d", true};
  auto no_heads = run_one(testing::cpu_reg(), "RotaryEmbedding", 23, rotary_inputs(c3, rng), {});
  ASSERT_FALSE(no_heads.ok());
  EXPECT_NE(no_heads.status().message().find("num_heads"), std::string::npos) << no_heads.status().to_string();
}

TEST(RMSNormalization, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(34);
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    float eps;
  };
  const std::vector<Case> cases = {
      {{2, 7, 4096}, -1, {4096}, 1e-6f},     {{3, 5, 33}, -1, {33}, 1e-5f},    {{2, 3, 4, 5}, 1, {3, 4, 5}, 1e-5f},
      {{2, 3, 4, 5}, 0, {2, 3, 4, 5}, 0.1f}, {{4, 6, 10}, -2, {1, 10}, 1e-5f}, {{1, 1, 100}, 2, {1}, 1e-5f},
  };
  for (const Case& c : cases) {
    const std::vector<Tensor> in = {random_tensor(c.x, rng, -3.f, 5.f), random_tensor(c.scale, rng, 0.5f, 1.5f)};
    std::map<std::string, graph::Attribute> a = {{"axis", one_int(c.axis)}, {"epsilon", one_float(c.eps)}};
    auto want = run_one(testing::ref_reg(), "RMSNormalization", 23, in, a);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    for (int threads : {1, 2}) {
      auto got = run_one(testing::cpu_reg(), "RMSNormalization", 23, in, a, {true}, threads);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      expect_same_values((*got)[0], (*want)[0], 2e-6, "RMSNorm " + c.x.to_string() + " axis " + std::to_string(c.axis));
    }
  }
}

TEST(RMSNormalization, UnsupportedStashTypeAndBadScaleAreErrors) {
  std::mt19937 rng(35);
  const std::vector<Tensor> in = {random_tensor(Shape{2, 8}, rng), random_tensor(Shape{8}, rng)};
  auto stash = run_one(testing::cpu_reg(), "RMSNormalization", 23, in, {{"stash_type", one_int(11)}});
  ASSERT_FALSE(stash.ok());
  EXPECT_EQ(stash.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(stash.status().message().find("stash_type 11"), std::string::npos) << stash.status().to_string();
  auto scale = run_one(testing::cpu_reg(), "RMSNormalization", 23, {in[0], random_tensor(Shape{3}, rng)}, {});
  ASSERT_FALSE(scale.ok());
  EXPECT_NE(scale.status().message().find("Scale"), std::string::npos) << scale.status().to_string();
}

}  // namespace
}  // namespace streamline::ops
