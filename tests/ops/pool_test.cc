// MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool: the oneDNN kernels against the
// reference kernels on random shapes (fixed seed), plus output-size rules and error paths.

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using namespace testing;

TEST(PoolOp, RandomShapesMatchReference) {
  std::mt19937 rng(51);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 48; ++iter) {
    const bool is_max = iter % 2 == 0;
    const int64_t kh = pick(1, 3), kw = pick(2, 3);
    const int64_t sh = pick(1, 3), sw = pick(1, 2);
    std::vector<int64_t> pads{pick(0, kh - 1), pick(0, kw - 1), pick(0, kh - 1), pick(0, kw - 1)};
    std::map<std::string, graph::Attribute> attrs{{"kernel_shape", ints({kh, kw})},
                                                  {"strides", ints({sh, sw})},
                                                  {"pads", ints(pads)},
                                                  {"ceil_mode", one_int(iter % 3 == 0)}};
    if (is_max && iter % 4 == 2) attrs["dilations"] = ints({2, 1});
    if (!is_max) attrs["count_include_pad"] = one_int(iter % 4 == 1);
    Tensor x = random_tensor({pick(1, 2), pick(1, 9), pick(5, 11), pick(5, 11)}, rng);
    RunOpts o;
    o.channels_last = iter % 5 >= 3;
    o.threads = 1 + iter % 2;
    SCOPED_TRACE("iter " + std::to_string(iter));
    compare(is_max ? "MaxPool" : "AveragePool", "", {x}, attrs, o);
  }
}

// Max and average pools in nChw8c and nChw16c against the reference. 2-D MaxPool with whole
// groups of 8 channels (nChw8c, nChw16c or channels-last) runs streamline's own loop (16 channels
// at a time where the layout and the build allow), so ceil mode, dilations, asymmetric pads and
// every layout are covered here.
TEST(PoolOp, BlockedLayoutMatchesReference) {
  std::mt19937 rng(57);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 24; ++iter) {
    const bool is_max = iter % 2 == 0;
    const int64_t k = pick(2, 3), s = pick(1, 2), kw = iter % 5 == 1 ? pick(1, 4) : k;
    std::map<std::string, graph::Attribute> attrs{{"kernel_shape", ints({k, kw})},
                                                  {"strides", ints({s, s})},
                                                  {"pads", ints({1, pick(0, 1), pick(0, 1), 1})},
                                                  {"ceil_mode", one_int(iter % 3 == 0)}};
    if (is_max && iter % 4 == 2) attrs["dilations"] = iter % 8 == 2 ? ints({2, 1}) : ints({1, 2});
    Tensor x = random_tensor({pick(1, 2), 8 * pick(1, 3), pick(5, 11), pick(5, 11)}, rng);
    // The same sizes with 16 or 32 channels for nChw16c (its own generator: the shapes of the
    // other iterations stay as they were).
    std::mt19937 rng16(static_cast<unsigned>(iter));
    Tensor x16 = random_tensor({x.shape()[0], 16 * (1 + iter % 2), x.shape()[2], x.shape()[3]}, rng16);
    SCOPED_TRACE("iter " + std::to_string(iter));
    for (int block : {8, 16, 0}) {
      RunOpts o;
      o.blocked = block > 0;
      o.block = block > 0 ? block : 8;
      o.channels_last = block == 0;
      o.threads = 1 + iter % 2;
      const Tensor& in = block == 16 ? x16 : x;
      compare(is_max ? "MaxPool" : "AveragePool", "", {in}, attrs, o);
      compare(is_max ? "GlobalMaxPool" : "GlobalAveragePool", "", {in}, {}, o);
      // Channels-last with whole groups of 16 (the 16-lane loop on AVX-512 builds).
      if (block == 0) compare(is_max ? "MaxPool" : "AveragePool", "", {x16}, attrs, o);
    }
  }
}

// ceil_mode windows that reach past the end padding: AveragePool with count_include_pad counts
// only the taps inside the padded input.
TEST(PoolOp, CeilModeAndCountIncludePad) {
  std::mt19937 rng(53);
  Tensor x = random_tensor({1, 3, 6, 7}, rng);
  for (int include : {0, 1})
    for (bool cl : {false, true}) {
      RunOpts o;
      o.channels_last = cl;
      std::map<std::string, graph::Attribute> attrs{{"kernel_shape", ints({3, 3})},
                                                    {"strides", ints({2, 2})},
                                                    {"pads", ints({1, 1, 0, 0})},
                                                    {"ceil_mode", one_int(1)},
                                                    {"count_include_pad", one_int(include)}};
      SCOPED_TRACE("include " + std::to_string(include) + " cl " + std::to_string(cl));
      compare("AveragePool", "", {x}, attrs, o);
      compare("MaxPool", "", {x}, attrs, o);
    }
  // Width 7, pads 1+1, kernel 2, stride 2, ceil: ceil(7/2)+1 = 5 windows, but the last would start
  // in the end padding (at 8 >= 7 + 1) and is dropped. Height 6: ceil(6/2)+1 = 4, all kept.
  auto n = make_node("MaxPool", "", {x},
                     {{"kernel_shape", ints({2, 2})},
                      {"strides", ints({2, 2})},
                      {"pads", ints({1, 1, 1, 1})},
                      {"ceil_mode", one_int(1)}});
  auto y = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{x});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (Shape{1, 3, 4, 4}));
  compare("MaxPool", "", {x}, n->node().attrs);
}

TEST(PoolOp, AutoPadAndOtherRanks) {
  std::mt19937 rng(57);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    Tensor x = random_tensor({2, 4, 9, 8}, rng);
    std::map<std::string, graph::Attribute> attrs{
        {"kernel_shape", ints({3, 2})}, {"strides", ints({2, 2})}, {"auto_pad", str(mode)}};
    SCOPED_TRACE(mode);
    compare("MaxPool", "", {x}, attrs);
    attrs["count_include_pad"] = one_int(1);
    compare("AveragePool", "", {x}, attrs);
  }
  compare("MaxPool", "", {random_tensor({2, 3, 13}, rng)},
          {{"kernel_shape", ints({3})}, {"strides", ints({2})}, {"pads", ints({1, 1})}});
  compare("AveragePool", "", {random_tensor({1, 2, 5, 6, 7}, rng)},
          {{"kernel_shape", ints({2, 3, 2})}, {"pads", ints({0, 1, 1, 1, 1, 0})}});
}

TEST(PoolOp, GlobalPools) {
  std::mt19937 rng(59);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    for (bool cl : {false, true}) {
      RunOpts o;
      o.channels_last = cl;
      o.threads = cl ? 2 : 1;
      SCOPED_TRACE(std::string(op) + (cl ? " channels-last" : " plain"));
      compare(op, "", {random_tensor({2, 17, 7, 7}, rng)}, {}, o);
    }
    compare(op, "", {random_tensor({2, 5, 11}, rng)}, {});
  }
}

// Global pools over channels-last and blocked inputs run streamline's own loop: inputs large enough
// to cut each image's pixels between two threads (one channels-last group, or one block), whole
// blocks shared between threads, channel counts that fill 32-lane chunks, 8-lane ones and neither.
TEST(PoolOp, GlobalPoolsSplitBetweenThreads) {
  std::mt19937 rng(61);
  struct Case {
    std::vector<int64_t> shape;
    int block;  // 0: channels-last
  };
  const std::vector<Case> cases{{{1, 64, 40, 40}, 0}, {{1, 48, 33, 29}, 0},  {{1, 19, 61, 45}, 0},
                                {{2, 40, 30, 30}, 0}, {{1, 16, 50, 50}, 16}, {{1, 64, 24, 24}, 16},
                                {{2, 16, 45, 45}, 8}, {{3, 24, 20, 20}, 8}};
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (const Case& c : cases)
      for (int threads : {1, 2, 3}) {
        RunOpts o;
        o.channels_last = c.block == 0;
        o.blocked = c.block > 0;
        o.block = c.block > 0 ? c.block : 8;
        o.threads = threads;
        SCOPED_TRACE(std::string(op) + " " + Shape(c.shape).to_string() + " block " + std::to_string(c.block) + " on " +
                     std::to_string(threads) + " threads");
        compare(op, "", {random_tensor(Shape(c.shape), rng)}, {}, o);
      }
}

// Channels-last in gives channels-last out, except for global pools, whose [N, C, 1, 1] output is
// reported plain.
TEST(PoolOp, OutputLayouts) {
  std::mt19937 rng(61);
  Tensor x = random_tensor({1, 4, 6, 6}, rng);
  for (const char* op : {"MaxPool", "GlobalAveragePool"}) {
    std::map<std::string, graph::Attribute> attrs;
    if (std::string(op) == "MaxPool") attrs["kernel_shape"] = ints({2, 2});
    auto n = make_node(op, "", {x}, attrs);
    KernelCreateArgs args{n->g, n->node(), {nullptr}, {DType::kFloat32}, {}};
    auto def = cpu_reg().find(op, "", 13, Device::kCpu, DType::kFloat32);
    ASSERT_TRUE(def.ok());
    auto kernel = (*def)->create(args);
    ASSERT_TRUE(kernel.ok());
    EXPECT_EQ((*kernel)->layout_support(), LayoutSupport::kPreferChannelsLast);
    TensorInfo info;
    info.dtype = DType::kFloat32;
    info.shape = x.shape();
    info.layout = Layout::kChannelsLast;
    auto rr = (*kernel)->reshape(std::span<const TensorInfo>(&info, 1));
    ASSERT_TRUE(rr.ok()) << rr.status().to_string();
    EXPECT_EQ(rr->outputs[0].layout, std::string(op) == "MaxPool" ? Layout::kChannelsLast : Layout::kPlain);
  }
}

TEST(PoolOp, BadAttributesAreErrors) {
  std::mt19937 rng(67);
  Tensor x = random_tensor({1, 2, 5, 5}, rng);
  auto status_of = [&](const std::string& op, std::map<std::string, graph::Attribute> attrs) {
    auto n = make_node(op, "", {x}, std::move(attrs));
    auto r = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{x});
    return r.ok() ? ok_status() : r.status();
  };
  EXPECT_EQ(status_of("MaxPool", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of("MaxPool", {{"kernel_shape", ints({2})}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of("AveragePool", {{"kernel_shape", ints({7, 7})}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_of("MaxPool", {{"kernel_shape", ints({2, 2})}, {"strides", ints({0, 1})}}).code(),
            StatusCode::kInvalidArgument);
  // The optional Indices output comes from the direct loops (pool_direct_test.cc), with the
  // same values as the oneDNN kernel.
  auto n = make_node("MaxPool", "", {x}, {{"kernel_shape", ints({2, 2})}});
  graph::Node node = n->node();
  node.outputs.push_back(n->g.add_value("indices"));
  auto with_indices = evaluate_node(cpu_reg(), n->g, node, std::vector<Tensor>{x});
  auto plain = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{x});
  ASSERT_TRUE(with_indices.ok() && plain.ok()) << with_indices.status().to_string();
  ASSERT_EQ(with_indices->size(), 2u);
  EXPECT_EQ((*with_indices)[1].dtype(), DType::kInt64);
  for (int64_t i = 0; i < (*plain)[0].numel(); ++i)
    EXPECT_EQ((*with_indices)[0].data<float>()[i], (*plain)[0].data<float>()[i]);
}

}  // namespace
}  // namespace streamline::ops
