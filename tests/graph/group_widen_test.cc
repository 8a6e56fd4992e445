// Tests of widen_narrow_groups: which grouped convolutions it rewrites, and that the widened
// weights give the original grouped convolution's sums (a direct loop over both, as the reference).

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

Tensor random_weights(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// x[1,c,6,6] -> Conv(W[m, c/group, 3, 3], pads 1, group) -> y.
struct GroupedConv {
  Graph g;
  NodeId conv = kNoNode;
  GroupedConv(int64_t c, int64_t m, int64_t group, bool constant_weights = true) {
    g.opsets[""] = 13;
    const ValueId x = g.add_value("x", DType::kFloat32, DimList{1, c, 6, 6});
    g.add_input(x);
    ValueId w;
    if (constant_weights) {
      w = g.add_constant("w", random_weights({m, c / group, 3, 3}, 5));
    } else {
      w = g.add_value("w", DType::kFloat32, DimList{m, c / group, 3, 3});
      g.add_input(w);
    }
    const ValueId y = g.add_value("y", DType::kFloat32, DimList{1, m, 6, 6});
    conv = g.add_node("Conv", "conv", {x, w}, {y});
    Attribute pads;
    pads.kind = Attribute::Kind::kInts;
    pads.ints = {1, 1, 1, 1};
    g.node(conv).attrs["pads"] = pads;
    g.node(conv).attrs["group"] = detail::int_attr(group);
    g.add_output(y);
  }
  const Tensor& weights() const { return *detail::constant_of(g, g.node(conv).inputs[1]); }
  int64_t group() const { return g.node(conv).attr_int("group", 1); }
};

// y = conv(x, w) with `group` groups, 3x3 filters, pads 1, stride 1, over [c, 6, 6].
std::vector<float> grouped_conv(const std::vector<float>& x, int64_t c, const Tensor& w, int64_t group) {
  const int64_t m = w.shape()[0], cg = w.shape()[1], mg = m / group;
  EXPECT_EQ(cg * group, c);
  std::vector<float> y(static_cast<size_t>(m * 36), 0.f);
  const float* wd = w.data<float>();
  for (int64_t o = 0; o < m; ++o)
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t q = 0; q < 6; ++q) {
        float s = 0.f;
        for (int64_t j = 0; j < cg; ++j)
          for (int64_t kr = 0; kr < 3; ++kr)
            for (int64_t kq = 0; kq < 3; ++kq) {
              const int64_t ir = r + kr - 1, iq = q + kq - 1;
              if (ir < 0 || ir >= 6 || iq < 0 || iq >= 6) continue;
              const int64_t ic = (o / mg) * cg + j;
              s += x[static_cast<size_t>((ic * 6 + ir) * 6 + iq)] * wd[((o * cg + j) * 3 + kr) * 3 + kq];
            }
        y[static_cast<size_t>((o * 6 + r) * 6 + q)] = s;
      }
  return y;
}

TEST(WidenNarrowGroups, MergesGroupsUntilTheyAreWholeVectorsAndKeepsTheSums) {
  // 32 channels in groups of 4 (ResNeXt's width) merge in pairs; groups of 2 in fours; output
  // groups of 2 with input groups of 4 (m != c) merge in fours.
  struct Case {
    int64_t c, m, group, want_group;
  };
  for (const Case& k : {Case{32, 32, 8, 4}, Case{16, 16, 8, 2}, Case{32, 16, 8, 2}}) {
    GroupedConv t(k.c, k.m, k.group);
    const Tensor before = t.weights();
    EXPECT_EQ(widen_narrow_groups(t.g, 8), 1);
    EXPECT_EQ(t.group(), k.want_group);
    const Tensor& after = t.weights();
    ASSERT_EQ(after.shape(), (Shape{k.m, k.c / k.want_group, 3, 3}));
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> x(static_cast<size_t>(k.c * 36));
    for (float& v : x) v = u(rng);
    const std::vector<float> want = grouped_conv(x, k.c, before, k.group);
    const std::vector<float> got = grouped_conv(x, k.c, after, k.want_group);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << "c " << k.c << " element " << i;
  }
}

TEST(WidenNarrowGroups, LeavesWholeDepthwiseUnmergeableAndRuntimeWeights) {
  GroupedConv whole(32, 32, 4);  // groups of 8
  EXPECT_EQ(widen_narrow_groups(whole.g, 8), 0);
  GroupedConv depthwise(16, 16, 16);
  EXPECT_EQ(widen_narrow_groups(depthwise.g, 8), 0);
  GroupedConv odd(12, 12, 3);  // groups of 4, but 3 groups cannot pair up
  EXPECT_EQ(widen_narrow_groups(odd.g, 8), 0);
  GroupedConv runtime(32, 32, 8, /*constant_weights=*/false);
  EXPECT_EQ(widen_narrow_groups(runtime.g, 8), 0);
  GroupedConv narrow(32, 32, 8);
  EXPECT_EQ(widen_narrow_groups(narrow.g, 0), 0) << "width 0 turns the pass off";
  EXPECT_EQ(narrow.group(), 8);
}

}  // namespace
}  // namespace streamline::graph
