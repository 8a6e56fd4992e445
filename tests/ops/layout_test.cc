// streamline.LayoutConvert: plain <-> channels-last round trips and its error paths.

#include "core/layout_convert.h"
#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using namespace testing;

// Runs LayoutConvert directly (evaluate_node would turn the output back to plain).
Result<Tensor> convert(const Tensor& x, const std::string& to, int threads) {
  auto n = make_node("LayoutConvert", "streamline", {x}, {{"to", str(to)}});
  SL_ASSIGN_OR_RETURN(const KernelDef* def, cpu_reg().find("LayoutConvert", "streamline", 1, Device::kCpu, x.dtype()));
  KernelCreateArgs args{n->g, n->node(), {nullptr}, {x.dtype()}, {}};
  SL_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, def->create(args));
  TensorInfo info;
  info.dtype = x.dtype();
  info.shape = x.shape();
  info.layout = x.layout();
  SL_ASSIGN_OR_RETURN(ReshapeResult rr, k->reshape(std::span<const TensorInfo>(&info, 1)));
  std::vector<Tensor> outs{Tensor::empty(rr.outputs[0].dtype, rr.outputs[0].shape, rr.outputs[0].layout)};
  std::vector<Tensor> ins{x};
  RunContext rc{ins, outs, nullptr, rr.state.get(), threads};
  SL_RETURN_IF_ERROR(k->run(rc));
  return outs[0];
}

TEST(LayoutConvertOp, RoundTrip) {
  std::mt19937 rng(71);
  for (int threads : {1, 2}) {
    Tensor x = random_tensor({2, 5, 7, 3}, rng);
    auto cl = convert(x, "channels_last", threads);
    ASSERT_TRUE(cl.ok()) << cl.status().to_string();
    EXPECT_EQ(cl->layout(), Layout::kChannelsLast);
    EXPECT_EQ(cl->shape(), x.shape());
    // Element (n, c, h, w) sits at ((n * H + h) * W + w) * C + c.
    EXPECT_EQ(cl->data<float>()[((1 * 7 + 4) * 3 + 2) * 5 + 3], x.data<float>()[((1 * 5 + 3) * 7 + 4) * 3 + 2]);
    auto back = convert(*cl, "plain", threads);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->layout(), Layout::kPlain);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(back->data<float>()[i], x.data<float>()[i]);
  }
}

TEST(LayoutConvertOp, OtherDtypesAndSameLayoutCopy) {
  Tensor x = Tensor::from_vector<int64_t>(Shape{1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto cl = convert(x, "channels_last", 1);
  ASSERT_TRUE(cl.ok()) << cl.status().to_string();
  EXPECT_EQ(cl->data<int64_t>()[1], 5);
  auto same = convert(x, "plain", 1);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->data<int64_t>()[7], 8);
}

TEST(LayoutConvertOp, Errors) {
  std::mt19937 rng(73);
  auto bad_rank = convert(random_tensor({2, 3, 4}, rng), "channels_last", 1);
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_EQ(bad_rank.status().code(), StatusCode::kInvalidArgument);
  auto bad_to = convert(random_tensor({1, 1, 1, 1}, rng), "nhwc", 1);
  ASSERT_FALSE(bad_to.ok());
  EXPECT_EQ(bad_to.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline::ops

namespace streamline::ops {
namespace {

using namespace testing;

// nChw8c: element (n, c, h, w) sits at ((n * C/8 + c/8) * H * W + h * W + w) * 8 + c % 8; every
// pair of layouts converts both ways without loss.
TEST(LayoutConvertOp, BlockedRoundTrips) {
  std::mt19937 rng(79);
  for (int threads : {1, 2}) {
    Tensor x = random_tensor({2, 16, 5, 3}, rng);
    auto b = convert(x, "nChw8c", threads);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->layout(), Layout::kBlocked8);
    EXPECT_EQ(b->shape(), x.shape());
    const int64_t n = 1, c = 11, h = 4, w = 2, C = 16, H = 5, W = 3;
    EXPECT_EQ(b->data<float>()[((n * (C / 8) + c / 8) * H * W + h * W + w) * 8 + c % 8],
              x.data<float>()[((n * C + c) * H + h) * W + w]);
    auto cl = convert(*b, "channels_last", threads);
    ASSERT_TRUE(cl.ok()) << cl.status().to_string();
    auto b2 = convert(*cl, "nChw8c", threads);
    ASSERT_TRUE(b2.ok()) << b2.status().to_string();
    auto back = convert(*b2, "plain", threads);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(back->data<float>()[i], x.data<float>()[i]);
  }
}

// nChw16c: element (n, c, h, w) at ((n * C/16 + c/16) * H * W + h * W + w) * 16 + c % 16; it
// converts to and from every other layout, nChw8c included, without loss.
TEST(LayoutConvertOp, Blocked16RoundTrips) {
  std::mt19937 rng(80);
  for (int threads : {1, 2}) {
    Tensor x = random_tensor({2, 32, 5, 3}, rng);
    auto b = convert(x, "nChw16c", threads);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->layout(), Layout::kBlocked16);
    const int64_t n = 1, c = 27, h = 4, w = 2, C = 32, H = 5, W = 3;
    EXPECT_EQ(b->data<float>()[((n * (C / 16) + c / 16) * H * W + h * W + w) * 16 + c % 16],
              x.data<float>()[((n * C + c) * H + h) * W + w]);
    for (const char* via : {"channels_last", "nChw8c", "plain"}) {
      auto mid = convert(*b, via, threads);
      ASSERT_TRUE(mid.ok()) << mid.status().to_string();
      auto b2 = convert(*mid, "nChw16c", threads);
      ASSERT_TRUE(b2.ok()) << b2.status().to_string();
      auto back = convert(*b2, "plain", threads);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(back->data<float>()[i], x.data<float>()[i]) << via;
    }
  }
  auto r = convert(random_tensor({1, 24, 2, 2}, rng), "nChw16c", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("divisible by 16"), std::string::npos) << r.status().message();
}

// Tensors large enough to split between threads (by pixel), with a block count that does not
// divide evenly between them: every element lands where the layout puts it, and back.
TEST(LayoutConvertOp, LargeBlockedChannelsLastOnSeveralThreads) {
  std::mt19937 rng(83);
  for (int block : {8, 16})
    for (int threads : {2, 3}) {
      const int64_t N = 2, C = 3 * block, H = 31, W = 29;
      Tensor x = random_tensor({N, C, H, W}, rng);
      const std::string tag = block == 8 ? "nChw8c" : "nChw16c";
      SCOPED_TRACE(tag + " on " + std::to_string(threads) + " threads");
      auto cl = convert(x, "channels_last", threads);
      ASSERT_TRUE(cl.ok()) << cl.status().to_string();
      auto b = convert(*cl, tag, threads);
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t p = 0; p < H * W; ++p)
            ASSERT_EQ(b->data<float>()[((n * (C / block) + c / block) * H * W + p) * block + c % block],
                      x.data<float>()[(n * C + c) * H * W + p])
                << "n " << n << " c " << c << " pixel " << p;
      auto back = convert(*b, "channels_last", threads);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(back->data<float>()[i], cl->data<float>()[i]);
    }
}

TEST(LayoutConvertOp, BlockedNeedsWholeBlocks) {
  std::mt19937 rng(83);
  auto r = convert(random_tensor({1, 12, 2, 2}, rng), "nChw8c", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("divisible by 8"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace streamline::ops
