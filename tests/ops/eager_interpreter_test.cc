// The eager interpreter's two savings over reshaping and converting on every node of every run:
// reshape results kept between runs (ReshapeCache) for kernels that answer without run-time values,
// and activations left in the layout their producer wrote (EagerLayouts). Checked with kernels that
// record what they are asked and given, and against the same graph with both off.

#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "core/layout_convert.h"
#include "ops/eager.h"
#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using graph::DimList;

// Copies its first input to its output (in the output's layout) and records how it was called:
// reshapes with and without the input's value, and the layout its input arrived in.
class RecordingKernel final : public Kernel {
 public:
  RecordingKernel(LayoutSupport support, Layout preferred, Layout out_layout, bool needs_value)
      : support_(support), preferred_(preferred), out_layout_(out_layout), needs_value_(needs_value) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (!in[0].value) {
      ++bare_reshapes;
      if (needs_value_) return unsupported("needs the input's value");
    } else {
      ++valued_reshapes;
    }
    ReshapeResult r;
    const Layout out = in[0].shape.rank() == 4 && out_layout_ != Layout::kPlain ? out_layout_ : in[0].layout;
    r.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, out});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    ++runs;
    last_layout = ctx.inputs[0].layout();
    return convert_layout(ctx.inputs[0], ctx.outputs[0]);
  }
  LayoutSupport layout_support() const override { return support_; }
  // Takes other layouts than plain only when it sees its input's value, as Resize takes the
  // blocked layout only for sizes it can read.
  bool accepts(std::span<const TensorInfo> in) const override { return in[0].value != nullptr; }
  Layout preferred_layout(std::span<const TensorInfo>, int) const override { return preferred_; }

  mutable std::atomic<int> bare_reshapes{0};
  mutable std::atomic<int> valued_reshapes{0};
  mutable std::atomic<int> runs{0};
  mutable Layout last_layout = Layout::kPlain;

 private:
  LayoutSupport support_;
  Layout preferred_;
  Layout out_layout_;
  bool needs_value_;
};

// x -> a -> b -> c -> y, with a's output also a graph output; kernels by NodeId.
struct Chain {
  graph::Graph g;
  std::vector<std::unique_ptr<Kernel>> kernels;
  RecordingKernel& at(size_t i) { return static_cast<RecordingKernel&>(*kernels[i]); }
};

Chain chain(std::vector<std::unique_ptr<Kernel>> kernels) {
  Chain c;
  c.g.opsets[""] = 13;
  graph::ValueId v = c.g.add_value("x", DType::kFloat32, DimList{1, 16, 3, 5});
  c.g.add_input(v);
  for (size_t i = 0; i < kernels.size(); ++i) {
    const graph::ValueId out = c.g.add_value("v" + std::to_string(i), DType::kFloat32);
    c.g.add_node("Identity", "n" + std::to_string(i), {v}, {out});
    if (i == 0) c.g.add_output(out);
    v = out;
  }
  c.g.add_output(v);
  c.kernels = std::move(kernels);
  return c;
}

Tensor random_input(const Shape& shape) {
  std::mt19937 rng(7);
  return testing::random_tensor(shape, rng);
}

void expect_equal(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.layout(), Layout::kPlain);
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

TEST(EagerInterpreter, ReshapeResultsServeLaterRunsWithTheSameShapes) {
  std::vector<std::unique_ptr<Kernel>> ks;
  ks.push_back(std::make_unique<RecordingKernel>(LayoutSupport::kAny, Layout::kPlain, Layout::kPlain, false));
  ks.push_back(std::make_unique<RecordingKernel>(LayoutSupport::kAny, Layout::kPlain, Layout::kPlain, true));
  Chain c = chain(std::move(ks));
  ReshapeCache cache;
  EagerOptions eo;
  eo.reshapes = &cache;
  const Tensor x = random_input(Shape{1, 16, 3, 5});
  for (int run = 0; run < 3; ++run) {
    auto outs = run_eager(c.g, c.kernels, std::vector<Tensor>{x}, eo);
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    expect_equal((*outs)[1], x);
  }
  // The first kernel answers without values: asked once, bare, then its answer serves every run.
  EXPECT_EQ(c.at(0).bare_reshapes, 1);
  EXPECT_EQ(c.at(0).valued_reshapes, 0);
  EXPECT_EQ(c.at(0).runs, 3);
  // The second needs values: asked bare once (remembered), then with values on every run.
  EXPECT_EQ(c.at(1).bare_reshapes, 1);
  EXPECT_EQ(c.at(1).valued_reshapes, 3);
  EXPECT_EQ(cache.size(), 2u);

  // Another shape is another entry; the first shape's entry is still there.
  const Tensor x2 = random_input(Shape{1, 16, 2, 2});
  auto outs = run_eager(c.g, c.kernels, std::vector<Tensor>{x2}, eo);
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  expect_equal((*outs)[1], x2);
  EXPECT_EQ(c.at(0).bare_reshapes, 2);
  ASSERT_TRUE(run_eager(c.g, c.kernels, std::vector<Tensor>{x}, eo).ok());
  EXPECT_EQ(c.at(0).bare_reshapes, 2);
  EXPECT_EQ(cache.size(), 4u);

  // Without a cache every run reshapes, with values.
  ASSERT_TRUE(run_eager(c.g, c.kernels, std::vector<Tensor>{x}).ok());
  EXPECT_EQ(c.at(0).valued_reshapes, 1);
}

TEST(EagerInterpreter, ReshapeCacheKeepsTheNewestSignaturesPerKernel) {
  std::vector<std::unique_ptr<Kernel>> ks;
  ks.push_back(std::make_unique<RecordingKernel>(LayoutSupport::kAny, Layout::kPlain, Layout::kPlain, false));
  Chain c = chain(std::move(ks));
  ReshapeCache cache;
  EagerOptions eo;
  eo.reshapes = &cache;
  for (int64_t w = 1; w <= static_cast<int64_t>(ReshapeCache::kPerKernel) + 2; ++w) {
    const Tensor x = random_input(Shape{1, 16, 3, w});
    auto outs = run_eager(c.g, c.kernels, std::vector<Tensor>{x}, eo);
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    expect_equal((*outs)[0], x);
  }
  EXPECT_EQ(cache.size(), ReshapeCache::kPerKernel);
}

// A conv-like kernel that prefers nChw16c and writes it, one that takes any layout, one that takes
// plain only: the first gets its plain input converted, the second the blocked value as it is, the
// third a plain copy; graph outputs come back plain and equal to the input.
TEST(EagerInterpreter, ActivationsStayInTheLayoutTheirProducerWrote) {
  auto make = [] {
    std::vector<std::unique_ptr<Kernel>> ks;
    ks.push_back(std::make_unique<RecordingKernel>(LayoutSupport::kPreferChannelsLast, Layout::kBlocked16,
                                                   Layout::kBlocked16, false));
    ks.push_back(std::make_unique<RecordingKernel>(LayoutSupport::kAny, Layout::kPlain, Layout::kPlain, false));
    ks.push_back(std::make_unique<RecordingKernel>(LayoutSupport::kPlainOnly, Layout::kPlain, Layout::kPlain, false));
    return chain(std::move(ks));
  };
  const Tensor x = random_input(Shape{1, 16, 3, 5});
  Chain on = make();
  EagerOptions eo;
  eo.layouts = EagerLayouts{true, 16};
  auto got = run_eager(on.g, on.kernels, std::vector<Tensor>{x}, eo);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(on.at(0).last_layout, Layout::kBlocked16);
  EXPECT_EQ(on.at(1).last_layout, Layout::kBlocked16);  // it was shown the value
  EXPECT_EQ(on.at(2).last_layout, Layout::kPlain);
  ASSERT_EQ(got->size(), 2u);
  expect_equal((*got)[0], x);
  expect_equal((*got)[1], x);

  // Off: every kernel gets plain values.
  Chain off = make();
  auto plain = run_eager(off.g, off.kernels, std::vector<Tensor>{x});
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(off.at(0).last_layout, Layout::kPlain);
  EXPECT_EQ(off.at(1).last_layout, Layout::kPlain);
  expect_equal((*plain)[1], x);
}

}  // namespace
}  // namespace streamline::ops
