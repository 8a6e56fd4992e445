// ONNX Attention (opset 23 on) on the fused engine against the plain reference: 3-D and 4-D
// inputs, grouped-query heads, bool/float/short/broadcast masks, causal frontiers with a KV cache,
// softcap, every qk_matmul_output mode, nonpad_kv_seqlen (24), windows (25), float16, several
// query-row blocks, one and three threads; random values, fixed seeds. Then the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using testing::expect_same_values;
using testing::one_float;
using testing::one_int;
using testing::random_tensor;
using testing::run_one;

struct Case {
  std::string name;
  bool three_d = false;
  int64_t b = 2, hq = 2, hkv = 2, sq = 4, skv = 4, past = 0, d = 8, dv = 8;
  Shape mask = Shape();  // empty: none
  bool bool_mask = false;
  bool causal = false;
  float softcap = 0.f;
  float scale = 0.f;  // 0: the default 1/sqrt(D)
  int qk_mode = -1;   // -1: no qk_matmul_output
  bool present = false;
  bool nonpad = false;            // opset 24
  int64_t left = -1, right = -1;  // opset 25
};

int opset_of(const Case& c) {
  return c.left >= 0 || c.right >= 0 ? 25 : c.nonpad ? 24 : 23;
}

std::map<std::string, graph::Attribute> attrs_of(const Case& c) {
  std::map<std::string, graph::Attribute> a;
  if (c.three_d) {
    a["q_num_heads"] = one_int(c.hq);
    a["kv_num_heads"] = one_int(c.hkv);
  }
  if (c.causal) a["is_causal"] = one_int(1);
  if (c.softcap > 0.f) a["softcap"] = one_float(c.softcap);
  if (c.scale > 0.f) a["scale"] = one_float(c.scale);
  if (c.qk_mode >= 0) a["qk_matmul_output_mode"] = one_int(c.qk_mode);
  if (c.left >= 0) a["left_window_size"] = one_int(c.left);
  if (c.right >= 0) a["right_window_size"] = one_int(c.right);
  return a;
}

std::vector<Tensor> inputs_of(const Case& c, std::mt19937& rng) {
  auto qkv = [&](int64_t heads, int64_t seq, int64_t size) {
    return c.three_d ? Shape{c.b, seq, heads * size} : Shape{c.b, heads, seq, size};
  };
  std::vector<Tensor> in = {random_tensor(qkv(c.hq, c.sq, c.d), rng, -2.f, 2.f),
                            random_tensor(qkv(c.hkv, c.skv, c.d), rng, -2.f, 2.f),
                            random_tensor(qkv(c.hkv, c.skv, c.dv), rng)};
  in.resize(c.nonpad ? 7 : 6);
  if (!c.mask.empty()) {
    if (c.bool_mask) {
      in[3] = testing::random_bool(c.mask, rng, 0.8);
    } else {
      // Mostly 0, some -inf and some moderate values, as padding and bias masks are.
      in[3] = random_tensor(c.mask, rng);
      for (int64_t i = 0; i < in[3].numel(); ++i) {
        float& x = in[3].data<float>()[i];
        x = x > 0.8f ? -std::numeric_limits<float>::infinity() : x > 0.f ? 0.f : x;
      }
    }
  }
  if (c.past > 0) {
    in[4] = random_tensor(Shape{c.b, c.hkv, c.past, c.d}, rng, -2.f, 2.f);
    in[5] = random_tensor(Shape{c.b, c.hkv, c.past, c.dv}, rng);
  }
  if (c.nonpad) {
    std::vector<int64_t> n;
    for (int64_t i = 0; i < c.b; ++i) n.push_back(1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(c.skv)));
    in[6] = testing::int64_tensor(Shape{c.b}, n);
  }
  while (!in.empty() && !in.back().defined()) in.pop_back();
  return in;
}

std::vector<bool> outputs_of(const Case& c) {
  return {true, c.present, c.present, c.qk_mode >= 0};
}

void check(const Case& c, const std::vector<Tensor>& in, int threads) {
  const std::string what = c.name + " threads " + std::to_string(threads);
  auto got = run_one(testing::cpu_reg(), "Attention", opset_of(c), in, attrs_of(c), outputs_of(c), threads);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
  auto want = run_one(testing::ref_reg(), "Attention", opset_of(c), in, attrs_of(c), outputs_of(c));
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().to_string();
  const std::vector<bool> outs = outputs_of(c);
  const char* names[] = {"Y", "present_key", "present_value", "qk_matmul_output"};
  for (size_t i = 0; i < outs.size() && i < want->size(); ++i)
    if (outs[i]) expect_same_values((*got)[i], (*want)[i], 2e-5, what + " " + names[i]);
}

TEST(OnnxAttention, MatchesReferenceOnRandomConfigurations) {
  std::mt19937 rng(23);
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  add({.name = "4d"});
  add({.name = "3d", .three_d = true, .hq = 3, .hkv = 3, .sq = 5, .skv = 7, .d = 8, .dv = 6});
  add({.name = "3d_gqa_causal_blocks",
       .three_d = true,
       .b = 1,
       .hq = 8,
       .hkv = 2,
       .sq = 70,
       .skv = 70,
       .d = 16,
       .dv = 16,
       .causal = true});
  add({.name = "4d_gqa_past_causal",
       .hq = 6,
       .hkv = 3,
       .sq = 3,
       .skv = 3,
       .past = 17,
       .causal = true,
       .present = true});
  add({.name = "decode_mqa_short_mask",
       .hq = 8,
       .hkv = 1,
       .sq = 1,
       .skv = 1,
       .past = 40,
       .d = 32,
       .dv = 32,
       .mask = {2, 1, 1, 30},
       .causal = true,
       .present = true});
  add({.name = "bool_mask_per_head", .hq = 4, .hkv = 2, .sq = 6, .skv = 9, .mask = {1, 4, 6, 9}, .bool_mask = true});
  add({.name = "bool_mask_2d_causal_past",
       .sq = 4,
       .skv = 4,
       .past = 5,
       .mask = {4, 9},
       .bool_mask = true,
       .causal = true,
       .present = true});
  add({.name = "short_float_mask_3d", .hq = 3, .hkv = 3, .sq = 5, .skv = 11, .mask = {3, 5, 8}});
  add({.name = "mask_one_key", .sq = 3, .skv = 6, .mask = {3, 1}});
  add({.name = "softcap_scale", .hq = 4, .hkv = 4, .sq = 6, .skv = 6, .mask = {6, 6}, .softcap = 2.5f, .scale = 0.3f});
  add({.name = "diff_head_sizes_3d_past",
       .three_d = true,
       .hq = 4,
       .hkv = 2,
       .sq = 2,
       .skv = 3,
       .past = 6,
       .d = 8,
       .dv = 12,
       .present = true});
  for (int mode = 0; mode < 4; ++mode)
    add({.name = "qk_mode_" + std::to_string(mode),
         .hq = 4,
         .hkv = 2,
         .sq = 5,
         .skv = 3,
         .past = 4,
         .mask = {5, 7},
         .causal = mode % 2 == 1,
         .softcap = 3.f,
         .qk_mode = mode,
         .present = true});
  add({.name = "qk_mode_3_3d", .three_d = true, .hq = 2, .hkv = 2, .sq = 4, .skv = 6, .qk_mode = 3});
  add({.name = "nonpad_causal",
       .hq = 2,
       .hkv = 1,
       .sq = 2,
       .skv = 10,
       .mask = {2, 1, 2, 8},
       .causal = true,
       .nonpad = true});
  add({.name = "nonpad_decode", .b = 3, .hq = 4, .hkv = 2, .sq = 1, .skv = 16, .causal = true, .nonpad = true});
  // One position, grouped heads: the group becomes the block's rows; per-head mask and scores.
  add({.name = "decode_gqa_head_mask_qk",
       .hq = 6,
       .hkv = 2,
       .sq = 1,
       .skv = 1,
       .past = 9,
       .mask = {2, 6, 1, 10},
       .causal = true,
       .qk_mode = 2,
       .present = true});
  add({.name = "decode_gqa_3d_window",
       .three_d = true,
       .hq = 4,
       .hkv = 2,
       .sq = 1,
       .skv = 1,
       .past = 12,
       .causal = true,
       .qk_mode = 3,
       .present = true,
       .left = 5});
  add({.name = "window_causal", .b = 1, .sq = 20, .skv = 20, .causal = true, .left = 4});
  add({.name = "window_both_past", .sq = 5, .skv = 5, .past = 10, .present = true, .left = 3, .right = 1});
  add({.name = "long_causal_d64", .b = 1, .hq = 4, .hkv = 4, .sq = 130, .skv = 130, .d = 64, .dv = 64, .causal = true});
  add({.name = "cross_attention", .hq = 3, .hkv = 3, .sq = 67, .skv = 5, .d = 4, .dv = 4, .mask = {67, 5}});
  for (const Case& c : cases) {
    const std::vector<Tensor> in = inputs_of(c, rng);
    for (int threads : {1, 3}) check(c, in, threads);
  }
}

TEST(OnnxAttention, MaskedOutKeysCarryNoWeight) {
  // Keys the causal frontier hides: changing their values leaves every output row as it was.
  std::mt19937 rng(24);
  Case c{.name = "causal", .b = 1, .hq = 1, .hkv = 1, .sq = 4, .skv = 4, .causal = true};
  std::vector<Tensor> in = inputs_of(c, rng);
  auto first = run_one(testing::cpu_reg(), "Attention", 23, in, attrs_of(c));
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  // V row 3 is visible only to query 3; rows 0..2 of Y must not move.
  for (int64_t e = 0; e < c.dv; ++e) in[2].data<float>()[3 * c.dv + e] += 100.f;
  auto second = run_one(testing::cpu_reg(), "Attention", 23, in, attrs_of(c));
  ASSERT_TRUE(second.ok());
  for (int64_t i = 0; i < 3 * c.dv; ++i) EXPECT_EQ((*first)[0].data<float>()[i], (*second)[0].data<float>()[i]) << i;
  EXPECT_NE((*first)[0].data<float>()[3 * c.dv], (*second)[0].data<float>()[3 * c.dv]);
}

TEST(OnnxAttention, RowWithoutVisibleKeysIsZero) {
  // A bool mask hiding every key of query 1: its output row is 0, not NaN.
  std::mt19937 rng(25);
  Case c{.name = "hidden_row", .b = 1, .hq = 1, .hkv = 1, .sq = 3, .skv = 5, .mask = {3, 5}, .bool_mask = true};
  std::vector<Tensor> in = inputs_of(c, rng);
  for (int64_t j = 0; j < 5; ++j) {
    in[3].data<uint8_t>()[j] = 1;
    in[3].data<uint8_t>()[5 + j] = 0;
  }
  auto y = run_one(testing::cpu_reg(), "Attention", 23, in, attrs_of(c));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int64_t e = 0; e < c.dv; ++e) {
    EXPECT_EQ((*y)[0].data<float>()[c.dv + e], 0.f);
    EXPECT_TRUE(std::isfinite((*y)[0].data<float>()[e]));
  }
}

Tensor to_half(const Tensor& t) {
  Tensor h = Tensor::empty(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) h.data<uint16_t>()[i] = float_to_half(t.data<float>()[i]);
  return h;
}

Tensor to_float(const Tensor& t) {
  Tensor f = Tensor::empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = half_to_float(t.data<uint16_t>()[i]);
  return f;
}

TEST(OnnxAttention, Float16RunsInFloat32) {
  // float16 inputs give the float32 result on the same (rounded) values, rounded once more.
  std::mt19937 rng(26);
  Case c{.name = "fp16",
         .hq = 4,
         .hkv = 2,
         .sq = 3,
         .skv = 3,
         .past = 5,
         .mask = {3, 8},
         .causal = true,
         .qk_mode = 2,
         .present = true};
  std::vector<Tensor> in = inputs_of(c, rng);
  std::vector<Tensor> half_in, rounded;
  for (const Tensor& t : in) {
    half_in.push_back(t.defined() && t.dtype() == DType::kFloat32 ? to_half(t) : t);
    rounded.push_back(t.defined() && t.dtype() == DType::kFloat32 ? to_float(half_in.back()) : t);
  }
  auto got = run_one(testing::cpu_reg(), "Attention", 23, half_in, attrs_of(c), outputs_of(c), 2);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto want = run_one(testing::ref_reg(), "Attention", 23, rounded, attrs_of(c), outputs_of(c));
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ((*got)[i].dtype(), DType::kFloat16) << i;
    expect_same_values(to_float((*got)[i]), (*want)[i], 1e-3, "fp16 output " + std::to_string(i));
  }
}

TEST(OnnxAttention, BadInputsAreClearErrors) {
  std::mt19937 rng(27);
  const Tensor q4 = random_tensor(Shape{1, 4, 3, 8}, rng), k4 = random_tensor(Shape{1, 3, 5, 8}, rng);
  const Tensor v4 = random_tensor(Shape{1, 3, 5, 8}, rng);
  auto expect_error = [&](const std::vector<Tensor>& in, std::map<std::string, graph::Attribute> a, StatusCode code,
                          const std::string& needle) {
    auto r = run_one(testing::cpu_reg(), "Attention", 23, in, std::move(a));
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  };
  // 4 query heads over 3 kv heads.
  expect_error({q4, k4, v4}, {}, StatusCode::kInvalidArgument, "not a multiple");
  const Tensor k = random_tensor(Shape{1, 2, 5, 8}, rng), v = random_tensor(Shape{1, 2, 5, 8}, rng);
  // 3-D without head counts.
  expect_error(
      {random_tensor(Shape{1, 3, 32}, rng), random_tensor(Shape{1, 5, 16}, rng), random_tensor(Shape{1, 5, 16}, rng)},
      {}, StatusCode::kInvalidArgument, "q_num_heads");
  // A mask covering more keys than there are, and one that does not broadcast.
  expect_error({q4, k, v, random_tensor(Shape{3, 6}, rng)}, {}, StatusCode::kInvalidArgument, "more keys");
  expect_error({q4, k, v, random_tensor(Shape{2, 3, 5}, rng)}, {}, StatusCode::kInvalidArgument, "broadcast");
  // past_key without past_value.
  expect_error({q4, k, v, Tensor(), random_tensor(Shape{1, 2, 4, 8}, rng)}, {}, StatusCode::kInvalidArgument,
               "together");
  // An integer mask and a bad output mode.
  expect_error({q4, k, v, testing::int64_tensor(Shape{1}, {0})}, {}, StatusCode::kInvalidArgument, "attn_mask");
  expect_error({q4, k, v}, {{"qk_matmul_output_mode", one_int(4)}}, StatusCode::kInvalidArgument,
               "qk_matmul_output_mode");
}

}  // namespace
}  // namespace streamline::ops
