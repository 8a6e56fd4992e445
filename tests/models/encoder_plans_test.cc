// An exported BERT-like encoder (bert_tiny: two post-norm layers, decomposed LayerNorm at opset
// 14) through the C++ API: the transformer passes fuse it, the Model makes one plan per input
// shape and hands the cached one back for a shape it has seen, and runs of alternating shapes
// give PyTorch's output.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/npy.h"
#include "models/exported_model.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

std::filesystem::path encoder_path() {
  return testing::exported_model("bert_tiny");
}

Tensor token_ids(const Shape& s, int64_t seed) {
  Tensor t = Tensor::empty(DType::kInt64, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = (i * 37 + seed * 11) % 1000;
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(double(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

TEST(EncoderPlans, FusedAndOnePlanPerInputShape) {
  const std::filesystem::path path = encoder_path();
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  ModelOptions mo;
  mo.num_threads = 2;
  auto model = Model::load(path.string(), mo);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const graph::PassReport& r = (*model)->pass_report();
  EXPECT_EQ(r.attention_fused, 2) << r.to_string();
  EXPECT_EQ(r.layer_norm_fused, 4) << r.to_string();
  EXPECT_EQ(r.gelu_fused, 2) << r.to_string();

  const std::vector<Shape> s18 = {Shape{1, 8}}, s28 = {Shape{2, 8}}, s19 = {Shape{1, 9}};
  auto a = (*model)->plan_for(s18);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto again = (*model)->plan_for(s18);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a->get(), again->get()) << "a second request for [1,8] made a new plan";
  auto b = (*model)->plan_for(s28);
  auto c = (*model)->plan_for(s19);
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_NE(b->get(), a->get());
  EXPECT_NE(c->get(), a->get());
  EXPECT_NE(c->get(), b->get());
  EXPECT_EQ((*model)->plan_for(s28)->get(), b->get());

  // The exported reference pair, then other shapes, then the first shape again: the same output.
  auto ids = read_npy((path.parent_path() / "bert_tiny.input.npy").string());
  auto want = read_npy((path.parent_path() / "bert_tiny.torch.npy").string());
  ASSERT_TRUE(ids.ok() && want.ok());
  Session session(*model);
  auto first = session.run({*ids});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_EQ((*first)[0].shape(), want->shape());
  EXPECT_LE(max_abs_diff((*first)[0], *want), 1e-4 * 8) << "against PyTorch";
  for (const Shape& s : {Shape{2, 8}, Shape{1, 9}, Shape{3, 33}}) {
    auto out = session.run({token_ids(s, s[1])});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ((*out)[0].shape(), (Shape{s[0], s[1], 128}));
  }
  auto last = session.run({*ids});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(max_abs_diff((*last)[0], (*first)[0]), 0.0) << "the cached [1,8] plan gave a different result";
}

}  // namespace
}  // namespace streamline
