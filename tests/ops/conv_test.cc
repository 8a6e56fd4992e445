// Conv, FusedConv and ConvTranspose: the oneDNN kernels against the reference kernels on random
// shapes (fixed seed), plus error paths and the in-place residual path.

#include <gtest/gtest.h>

#include <thread>
#include <tuple>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using namespace testing;

// ---- Conv / FusedConv -------------------------------------------------------------------------

TEST(ConvOp, RandomShapesMatchReference) {
  std::mt19937 rng(1234);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 40; ++iter) {
    const int kind = iter % 4;  // 0 dense, 1 grouped, 2 depthwise, 3 dense strided+dilated
    const int64_t group = kind == 1 ? pick(2, 3) : 1;
    int64_t c = group * pick(1, 4), m = group * pick(1, 5);
    int64_t gr = group;
    if (kind == 2) {
      c = pick(2, 8);
      m = c;
      gr = c;
    }
    const int64_t kh = pick(1, 3), kw = pick(1, 3);
    const int64_t sh = kind == 3 ? 2 : pick(1, 2), sw = pick(1, 2);
    const int64_t dh = kind == 3 ? 2 : 1, dw = pick(1, 2);
    const int64_t h = pick(6, 12), w = pick(6, 12), n = pick(1, 2);
    std::vector<int64_t> pads{pick(0, 2), pick(0, 2), pick(0, 2), pick(0, 2)};
    Tensor x = random_tensor({n, c, h, w}, rng);
    Tensor wt = random_tensor({m, c / gr, kh, kw}, rng);
    Tensor b = random_tensor({m}, rng);
    std::map<std::string, graph::Attribute> attrs{
        {"group", one_int(gr)}, {"strides", ints({sh, sw})}, {"dilations", ints({dh, dw})}, {"pads", ints(pads)}};
    RunOpts o;
    o.channels_last = iter % 2 == 1;
    o.const_weights = iter % 3 != 2;
    o.threads = 1 + iter % 2;
    SCOPED_TRACE("iter " + std::to_string(iter));
    compare("Conv", "", {x, wt, iter % 5 == 4 ? Tensor() : b}, attrs, o);
  }
}

// nChw8c and nChw16c: dense, depthwise and first-layer (C < 8) convolutions in the blocked layout,
// with bias, fused activation and residual, against the reference.
TEST(ConvOp, BlockedLayoutMatchesReference) {
  std::mt19937 rng(4321);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 48; ++iter) {
    const int block = iter < 24 ? 8 : 16;
    const int kind = iter % 3;  // 0 dense, 1 depthwise, 2 first layer
    const int64_t c = kind == 2 ? pick(1, 7) : block * pick(1, 3);
    const int64_t m = kind == 1 ? c : block * pick(1, 3);
    const int64_t gr = kind == 1 ? c : 1;
    const int64_t k = pick(1, 3), s = pick(1, 2), h = pick(5, 11), w = pick(5, 11), n = pick(1, 2);
    const int64_t p = pick(0, k - 1);
    Tensor x = random_tensor({n, c, h, w}, rng);
    Tensor wt = random_tensor({m, c / gr, k, k}, rng);
    Tensor b = random_tensor({m}, rng);
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    std::vector<Tensor> in{x, wt, b};
    if (iter % 2 == 1) in.push_back(random_tensor({n, m, oh, ow}, rng));
    std::map<std::string, graph::Attribute> attrs{
        {"group", one_int(gr)}, {"strides", ints({s, s})}, {"pads", ints({p, p, p, p})}, {"activation", str("Relu")}};
    RunOpts o;
    o.blocked = true;
    o.block = block;
    o.threads = 1 + iter % 2;
    SCOPED_TRACE("iter " + std::to_string(iter) + " kind " + std::to_string(kind) + " block " + std::to_string(block));
    compare("FusedConv", "streamline", in, attrs, o);
  }
}

// FusedConv's x_scale (a squeeze-excitation scale moved into the convolution): one scale for
// the batch (weights scaled in the reorder) and one per image (X * S in the workspace), in every
// layout, with bias, residual and activation, against the reference.
TEST(ConvOp, FusedConvInputScaleMatchesReference) {
  std::mt19937 rng(4327);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 32; ++iter) {
    const int layout = iter % 4;  // 0 plain, 1 channels-last, 2 nChw8c, 3 nChw16c
    const int block = layout == 3 ? 16 : 8;
    const int64_t c = layout >= 2 ? block * pick(1, 3) : pick(3, 24);
    const int64_t m = layout >= 2 ? block * pick(1, 2) : pick(2, 20);
    const int64_t k = iter % 3 == 2 ? 3 : 1, s = 1 + (iter / 4) % 2, p = k / 2;
    const int64_t n = 1 + (iter / 8) % 2, h = pick(5, 12), w = pick(5, 12);
    const bool per_image = n > 1 && iter % 2 == 1;
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    std::vector<Tensor> in{random_tensor({n, c, h, w}, rng), random_tensor({m, c, k, k}, rng), random_tensor({m}, rng)};
    in.push_back(iter % 5 == 0 ? random_tensor({n, m, oh, ow}, rng) : Tensor());
    in.push_back(random_tensor({per_image ? n : 1, c, 1, 1}, rng, 0.f, 2.f));
    std::map<std::string, graph::Attribute> attrs{{"strides", ints({s, s})},
                                                  {"pads", ints({p, p, p, p})},
                                                  {"activation", str(iter % 3 == 0 ? "Relu" : "")},
                                                  {"x_scale", one_int(1)}};
    RunOpts o;
    o.channels_last = layout == 1;
    o.blocked = layout >= 2;
    o.block = block;
    o.threads = 1 + iter % 2;
    SCOPED_TRACE("iter " + std::to_string(iter) + " layout " + std::to_string(layout) + " scale rows " +
                 std::to_string(per_image ? n : 1));
    compare("FusedConv", "streamline", in, attrs, o);
  }
}

// x_scale asks for the scale input, of [1 or N, C, 1, 1], on an ungrouped convolution.
TEST(ConvOp, FusedConvInputScaleErrors) {
  std::mt19937 rng(4329);
  Tensor x = random_tensor({2, 8, 6, 6}, rng);
  Tensor wt = random_tensor({4, 8, 1, 1}, rng);
  const std::map<std::string, graph::Attribute> attrs{{"x_scale", one_int(1)}};
  auto def = cpu_reg().find("FusedConv", "streamline", 1, Device::kCpu, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  auto create = [&](const OneNode& n, const Tensor& w, size_t inputs) {
    std::vector<const Tensor*> constants(inputs, nullptr);
    constants[1] = &w;
    KernelCreateArgs args{n.g, n.node(), constants, std::vector<DType>(inputs, DType::kFloat32), {}};
    return (*def)->create(args);
  };
  {
    auto n = make_node("FusedConv", "streamline", {x, wt}, attrs);
    EXPECT_TRUE(fails_with(create(*n, wt, 2).status(), StatusCode::kInvalidArgument, {"input 4"}));
  }
  {
    auto grouped = attrs;
    grouped["group"] = one_int(2);
    Tensor wg = random_tensor({4, 4, 1, 1}, rng);
    auto n =
        make_node("FusedConv", "streamline", {x, wg, Tensor(), Tensor(), random_tensor({1, 8, 1, 1}, rng)}, grouped);
    EXPECT_TRUE(fails_with(create(*n, wg, 5).status(), StatusCode::kInvalidArgument, {"ungrouped"}));
  }
  for (const Shape& bad : {Shape{1, 4, 1, 1}, Shape{3, 8, 1, 1}, Shape{1, 8, 2, 1}}) {
    SCOPED_TRACE(bad.to_string());
    Tensor scale = random_tensor(bad, rng);
    auto n = make_node("FusedConv", "streamline", {x, wt, Tensor(), Tensor(), scale}, attrs);
    auto k = create(*n, wt, 5);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    std::vector<TensorInfo> infos{info_of(x, false), info_of(wt), TensorInfo{}, TensorInfo{}, info_of(scale, false)};
    EXPECT_TRUE(fails_with((*k)->reshape(infos).status(), StatusCode::kInvalidArgument, {"x_scale input"}));
  }
}

// The layouts a convolution asks for: blocked for whole blocks, plain for a first layer,
// channels-last otherwise (grouped, odd channels, or when blocked layouts are off). With 16-channel
// blocks, groups of exactly 16 channels stay blocked too.
TEST(ConvOp, PreferredLayouts) {
  std::mt19937 rng(4322);
  auto layout_for = [&](int64_t c, int64_t m, int64_t group, int block, Layout given = Layout::kPlain) {
    Tensor x = random_tensor({1, c, 6, 6}, rng);
    Tensor w = random_tensor({m, c / group, 3, 3}, rng);
    auto n = make_node("Conv", "", {x, w}, {{"group", one_int(group)}});
    auto def = cpu_reg().find("Conv", "", 13, Device::kCpu, DType::kFloat32);
    EXPECT_TRUE(def.ok());
    std::vector<const Tensor*> consts{nullptr, &w};
    KernelCreateArgs args{n->g, n->node(), consts, {DType::kFloat32, DType::kFloat32}, {}};
    auto k = (*def)->create(args);
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    std::vector<TensorInfo> infos(2);
    infos[0].dtype = infos[1].dtype = DType::kFloat32;
    infos[0].shape = x.shape();
    infos[0].layout = given;
    infos[1].shape = w.shape();
    infos[1].value = &w;
    return (*k)->preferred_layout(infos, block);
  };
  EXPECT_EQ(layout_for(16, 32, 1, 8), Layout::kBlocked8);
  EXPECT_EQ(layout_for(16, 16, 16, 8), Layout::kBlocked8);     // depthwise
  EXPECT_EQ(layout_for(3, 64, 1, 8), Layout::kPlain);          // first layer
  EXPECT_EQ(layout_for(16, 16, 2, 8), Layout::kBlocked8);      // groups of one block
  EXPECT_EQ(layout_for(32, 32, 2, 8), Layout::kChannelsLast);  // groups of two blocks
  EXPECT_EQ(layout_for(16, 16, 4, 8), Layout::kChannelsLast);  // groups of half a block
  EXPECT_EQ(layout_for(12, 16, 1, 8), Layout::kChannelsLast);  // partial block
  EXPECT_EQ(layout_for(16, 32, 1, 0), Layout::kChannelsLast);
  EXPECT_EQ(layout_for(16, 32, 1, 16), Layout::kBlocked16);
  EXPECT_EQ(layout_for(32, 32, 32, 16), Layout::kBlocked16);    // depthwise
  EXPECT_EQ(layout_for(3, 32, 1, 16), Layout::kPlain);          // first layer
  EXPECT_EQ(layout_for(3, 24, 1, 16), Layout::kChannelsLast);   // a first layer without whole blocks
  EXPECT_EQ(layout_for(24, 32, 1, 16), Layout::kChannelsLast);  // partial block
  EXPECT_EQ(layout_for(64, 64, 4, 16), Layout::kBlocked16);     // groups of 16
  EXPECT_EQ(layout_for(64, 64, 8, 16), Layout::kChannelsLast);  // groups of 8
  // With 16-channel blocks an input that arrives channels-last stays so; with 8 it does not.
  EXPECT_EQ(layout_for(32, 32, 1, 16, Layout::kChannelsLast), Layout::kChannelsLast);
  EXPECT_EQ(layout_for(32, 32, 32, 16, Layout::kChannelsLast), Layout::kChannelsLast);
  EXPECT_EQ(layout_for(32, 32, 1, 16, Layout::kBlocked16), Layout::kBlocked16);
  EXPECT_EQ(layout_for(32, 32, 1, 8, Layout::kChannelsLast), Layout::kBlocked8);
}

TEST(ConvOp, AutoPadModes) {
  std::mt19937 rng(7);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (int64_t stride : {1, 2}) {
      Tensor x = random_tensor({1, 3, 9, 8}, rng);
      Tensor w = random_tensor({4, 3, 4, 3}, rng);
      SCOPED_TRACE(std::string(mode) + " stride " + std::to_string(stride));
      compare("Conv", "", {x, w}, {{"auto_pad", str(mode)}, {"strides", ints({stride, stride})}});
      RunOpts cl;
      cl.channels_last = true;
      compare("Conv", "", {x, w}, {{"auto_pad", str(mode)}, {"strides", ints({stride, stride})}}, cl);
    }
  }
}

TEST(ConvOp, OneAndThreeDimensional) {
  std::mt19937 rng(11);
  compare("Conv", "", {random_tensor({2, 4, 17}, rng), random_tensor({6, 2, 3}, rng), random_tensor({6}, rng)},
          {{"group", one_int(2)}, {"pads", ints({1, 2})}, {"strides", ints({2})}, {"dilations", ints({2})}});
  compare("Conv", "", {random_tensor({1, 3, 5, 6, 7}, rng), random_tensor({4, 3, 2, 3, 2}, rng)},
          {{"pads", ints({1, 0, 1, 0, 1, 1})}, {"strides", ints({1, 2, 1})}});
}

TEST(ConvOp, FusedActivationsBiasAndResidual) {
  std::mt19937 rng(99);
  const std::vector<std::pair<std::string, std::vector<float>>> acts{{"", {}},
                                                                     {"Relu", {}},
                                                                     {"Clip", {-0.3f, 0.4f}},
                                                                     {"LeakyRelu", {0.2f}},
                                                                     {"Sigmoid", {}},
                                                                     {"HardSigmoid", {0.3f, 0.4f}},
                                                                     {"Tanh", {}}};
  for (const auto& [act, params] : acts) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool with_z = variant >= 2;
      RunOpts o;
      o.channels_last = variant % 2 == 1;
      o.threads = 2;
      Tensor x = random_tensor({2, 8, 7, 6}, rng);
      Tensor w = random_tensor({16, 8, 3, 3}, rng);
      Tensor b = random_tensor({16}, rng);
      std::vector<Tensor> in{x, w, b};
      if (with_z) in.push_back(random_tensor({2, 16, 7, 6}, rng));
      std::map<std::string, graph::Attribute> attrs{{"pads", ints({1, 1, 1, 1})}, {"activation", str(act)}};
      if (!params.empty()) attrs["activation_params"] = floats(params);
      SCOPED_TRACE(act + " variant " + std::to_string(variant));
      compare("FusedConv", "streamline", in, attrs, o);
    }
  }
}

TEST(ConvOp, PrepackWithSymbolicOrUnknownInputShape) {
  std::mt19937 rng(5);
  Tensor x = random_tensor({3, 16, 10, 10}, rng);
  Tensor w = random_tensor({32, 16, 3, 3}, rng);
  Tensor b = random_tensor({32}, rng);
  std::map<std::string, graph::Attribute> attrs{{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}};
  for (bool cl : {false, true}) {
    RunOpts sym;
    sym.symbolic_x = true;
    sym.channels_last = cl;
    compare("Conv", "", {x, w, b}, attrs, sym);
    RunOpts unk;
    unk.unknown_x = true;
    unk.channels_last = cl;
    compare("Conv", "", {x, w, b}, attrs, unk);
  }
}

// A residual that shares the output's buffer (the planner's in-place choice) and a kernel run with
// several thread counts from one reshape.
TEST(ConvOp, InPlaceResidualAndThreadCounts) {
  std::mt19937 rng(3);
  Tensor x = random_tensor({1, 8, 9, 9}, rng);
  Tensor w = random_tensor({8, 8, 3, 3}, rng);
  Tensor b = random_tensor({8}, rng);
  Tensor z = random_tensor({1, 8, 9, 9}, rng);
  std::map<std::string, graph::Attribute> attrs{{"pads", ints({1, 1, 1, 1})}, {"activation", str("Relu")}};
  auto n = make_node("FusedConv", "streamline", {x, w, b, z}, attrs);
  auto want = evaluate_node(ref_reg(), n->g, n->node(), std::vector<Tensor>{x, w, b, z});
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  auto def = cpu_reg().find("FusedConv", "streamline", 1, Device::kCpu, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ((*def)->provider, "onednn");
  KernelCreateArgs args{n->g, n->node(), {nullptr, &w, &b, nullptr}, std::vector<DType>(4, DType::kFloat32), {}};
  auto kernel = (*def)->create(args);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  std::vector<TensorInfo> infos(4);
  const Tensor* ts[] = {&x, &w, &b, &z};
  for (int i = 0; i < 4; ++i) {
    infos[i].dtype = DType::kFloat32;
    infos[i].shape = ts[i]->shape();
    infos[i].value = (i == 1 || i == 2) ? ts[i] : nullptr;
  }
  auto rr = (*kernel)->reshape(infos);
  ASSERT_TRUE(rr.ok()) << rr.status().to_string();
  ASSERT_EQ(rr->inplace.size(), 1u);
  EXPECT_EQ(rr->inplace[0], 3);
  auto ws = AlignedBuffer::allocate(rr->workspace_bytes);
  for (int threads : {1, 2, 1, 3}) {
    Tensor zy = z.clone();
    std::vector<Tensor> ins{x, w, b, zy};
    std::vector<Tensor> outs{zy};
    RunContext rc{ins, outs, ws ? ws->data() : nullptr, rr->state.get(), threads};
    ASSERT_TRUE((*kernel)->run(rc).ok());
    SCOPED_TRACE("threads " + std::to_string(threads));
    expect_close(zy, (*want)[0]);
  }
}

// One kernel and one reshape state shared by concurrent runs with different thread counts (the
// per-thread-count primitives are built on first use while other runs are in flight).
TEST(ConvOp, ConcurrentRunsShareOneState) {
  std::mt19937 rng(13);
  Tensor x = random_tensor({1, 16, 12, 12}, rng);
  Tensor w = random_tensor({24, 16, 3, 3}, rng);
  Tensor b = random_tensor({24}, rng);
  std::map<std::string, graph::Attribute> attrs{{"pads", ints({1, 1, 1, 1})}, {"activation", str("Relu")}};
  auto n = make_node("FusedConv", "streamline", {x, w, b}, attrs);
  auto want = evaluate_node(ref_reg(), n->g, n->node(), std::vector<Tensor>{x, w, b});
  ASSERT_TRUE(want.ok());
  auto def = cpu_reg().find("FusedConv", "streamline", 1, Device::kCpu, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  KernelCreateArgs args{n->g, n->node(), {nullptr, &w, &b}, std::vector<DType>(3, DType::kFloat32), {}};
  auto kernel = (*def)->create(args);
  ASSERT_TRUE(kernel.ok());
  std::vector<TensorInfo> infos(3);
  const Tensor* ts[] = {&x, &w, &b};
  for (int i = 0; i < 3; ++i) {
    infos[i].dtype = DType::kFloat32;
    infos[i].shape = ts[i]->shape();
    infos[i].value = i > 0 ? ts[i] : nullptr;
  }
  auto rr = (*kernel)->reshape(infos);
  ASSERT_TRUE(rr.ok());
  constexpr int kThreads = 4;
  std::vector<Tensor> outs;
  for (int t = 0; t < kThreads; ++t) outs.push_back(Tensor::empty(DType::kFloat32, (*want)[0].shape()));
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      auto ws = AlignedBuffer::allocate(rr->workspace_bytes);
      std::vector<Tensor> ins{x, w, b};
      std::vector<Tensor> o{outs[static_cast<size_t>(t)]};
      for (int rep = 0; rep < 5; ++rep) {
        RunContext rc{ins, o, ws ? ws->data() : nullptr, rr->state.get(), 1 + (t + rep) % 3};
        if (!(*kernel)->run(rc).ok()) ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[static_cast<size_t>(t)], 0);
    expect_close(outs[static_cast<size_t>(t)], (*want)[0]);
  }
}

TEST(ConvOp, BadShapesAreErrorsNotCrashes) {
  std::mt19937 rng(1);
  Tensor x = random_tensor({1, 6, 8, 8}, rng);
  auto status_of = [&](const std::vector<Tensor>& in, std::map<std::string, graph::Attribute> attrs) {
    auto n = make_node("Conv", "", in, std::move(attrs));
    auto r = evaluate_node(cpu_reg(), n->g, n->node(), in);
    return r.ok() ? ok_status() : r.status();
  };
  Status wrong_rank = status_of({x, random_tensor({4, 6, 3}, rng)}, {});
  EXPECT_EQ(wrong_rank.code(), StatusCode::kInvalidArgument) << wrong_rank.to_string();
  Status bad_group = status_of({x, random_tensor({4, 1, 3, 3}, rng)}, {{"group", one_int(4)}});
  EXPECT_EQ(bad_group.code(), StatusCode::kInvalidArgument) << bad_group.to_string();
  EXPECT_NE(bad_group.message().find("group"), std::string::npos);
  Status bad_bias = status_of({x, random_tensor({4, 6, 3, 3}, rng), random_tensor({5}, rng)}, {});
  EXPECT_EQ(bad_bias.code(), StatusCode::kInvalidArgument) << bad_bias.to_string();
  Status too_big = status_of({x, random_tensor({4, 6, 11, 11}, rng)}, {});
  EXPECT_EQ(too_big.code(), StatusCode::kInvalidArgument) << too_big.to_string();
  Status bad_pad = status_of({x, random_tensor({4, 6, 3, 3}, rng)}, {{"auto_pad", str("SAME_MIDDLE")}});
  EXPECT_EQ(bad_pad.code(), StatusCode::kInvalidArgument) << bad_pad.to_string();
  Status bad_act = [&] {
    auto n =
        make_node("FusedConv", "streamline", {x, random_tensor({4, 6, 3, 3}, rng)}, {{"activation", str("Swishy")}});
    auto r = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{x, random_tensor({4, 6, 3, 3}, rng)});
    return r.ok() ? ok_status() : r.status();
  }();
  EXPECT_EQ(bad_act.code(), StatusCode::kInvalidArgument) << bad_act.to_string();
}

TEST(ConvOp, EmptyBatch) {
  std::mt19937 rng(19);
  Tensor x = Tensor::empty(DType::kFloat32, Shape{0, 3, 5, 5});
  Tensor w = random_tensor({4, 3, 3, 3}, rng);
  auto n = make_node("Conv", "", {x, w}, {{"pads", ints({1, 1, 1, 1})}});
  for (bool cl : {false, true}) {
    EvalOptions eo;
    eo.input_layout = cl ? Layout::kChannelsLast : Layout::kPlain;
    auto y = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{x, w}, eo);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    EXPECT_EQ((*y)[0].shape(), (Shape{0, 4, 5, 5}));
  }
  auto p = make_node("MaxPool", "", {x}, {{"kernel_shape", ints({2, 2})}});
  auto py = evaluate_node(cpu_reg(), p->g, p->node(), std::vector<Tensor>{x});
  ASSERT_TRUE(py.ok()) << py.status().to_string();
  EXPECT_EQ((*py)[0].shape(), (Shape{0, 3, 4, 4}));
}

// ---- ConvTranspose ----------------------------------------------------------------------------

TEST(ConvTransposeOp, RandomShapesMatchReference) {
  std::mt19937 rng(42);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 20; ++iter) {
    const int64_t group = iter % 3 == 1 ? 2 : 1;
    const int64_t c = group * pick(1, 4), mg = pick(1, 4);
    const int64_t k = pick(1, 4), s = pick(1, 3), d = iter % 4 == 3 ? 2 : 1;
    const int64_t p0 = pick(0, (k - 1) * d / 2), p1 = pick(0, (k - 1) * d / 2);
    const int64_t op = s > 1 ? pick(0, s - 1) : 0;
    Tensor x = random_tensor({pick(1, 2), c, pick(3, 7), pick(3, 7)}, rng);
    Tensor w = random_tensor({c, mg, k, k}, rng);
    Tensor b = random_tensor({mg * group}, rng);
    std::map<std::string, graph::Attribute> attrs{{"group", one_int(group)},
                                                  {"strides", ints({s, s})},
                                                  {"dilations", ints({d, d})},
                                                  {"pads", ints({p0, p1, p1, p0})},
                                                  {"output_padding", ints({op, 0})}};
    RunOpts o;
    o.const_weights = iter % 2 == 0;
    o.threads = 1 + iter % 2;
    SCOPED_TRACE("iter " + std::to_string(iter));
    compare("ConvTranspose", "", {x, w, iter % 3 == 2 ? Tensor() : b}, attrs, o);
  }
}

// Stride equal to the kernel (2x2 stride 2 upsampling and its relatives) runs as matrix products
// over blocks of input rows and a scatter: square and oblong kernels, with and without bias, one
// and two threads, constant and computed weights, and an image tall enough for several blocks.
TEST(ConvTransposeOp, StrideEqualToKernelMatchesReference) {
  std::mt19937 rng(44);
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> cases{// c, m, kh, kw, h, w
                                                                                            {8, 6, 2, 2, 5, 7},
                                                                                            {3, 4, 3, 3, 4, 4},
                                                                                            {16, 8, 2, 1, 6, 5},
                                                                                            {5, 7, 1, 3, 3, 9},
                                                                                            {64, 512, 2, 2, 40, 24}};
  int iter = 0;
  for (const auto& [c, m, kh, kw, h, w] : cases)
    for (int variant = 0; variant < 2; ++variant, ++iter) {
      Tensor x = random_tensor({1 + variant, c, h, w}, rng);
      Tensor wt = random_tensor({c, m, kh, kw}, rng);
      Tensor b = random_tensor({m}, rng);
      RunOpts o;
      o.const_weights = variant == 0;
      o.threads = 1 + variant;
      SCOPED_TRACE("case " + std::to_string(iter));
      compare("ConvTranspose", "", {x, wt, variant ? b : Tensor()}, {{"strides", ints({kh, kw})}}, o);
    }
}

TEST(ConvTransposeOp, OutputShapeAndAutoPad) {
  std::mt19937 rng(8);
  Tensor x = random_tensor({1, 4, 5, 6}, rng);
  Tensor w = random_tensor({4, 3, 3, 3}, rng);
  compare("ConvTranspose", "", {x, w}, {{"strides", ints({2, 2})}, {"output_shape", ints({10, 12})}});
  compare("ConvTranspose", "", {x, w}, {{"strides", ints({2, 2})}, {"output_shape", ints({1, 3, 9, 11})}});
  compare("ConvTranspose", "", {x, w}, {{"strides", ints({2, 2})}, {"auto_pad", str("SAME_UPPER")}});
  compare("ConvTranspose", "", {x, w}, {{"strides", ints({2, 2})}, {"auto_pad", str("SAME_LOWER")}});
  // output_padding beyond the end padding: the last rows/columns hold only the bias.
  compare("ConvTranspose", "", {x, w, random_tensor({3}, rng)},
          {{"strides", ints({2, 3})}, {"output_padding", ints({1, 2})}});
  compare("ConvTranspose", "", {random_tensor({2, 3, 9}, rng), random_tensor({3, 2, 4}, rng)},
          {{"strides", ints({3})}, {"pads", ints({1, 2})}});
}

TEST(ConvTransposeOp, ShapeFollowsSpec) {
  std::mt19937 rng(2);
  Tensor x = random_tensor({1, 2, 3, 3}, rng);
  Tensor w = random_tensor({2, 5, 3, 3}, rng);
  auto n = make_node("ConvTranspose", "", {x, w},
                     {{"strides", ints({3, 2})}, {"pads", ints({1, 0, 1, 0})}, {"output_padding", ints({1, 1})}});
  auto y = evaluate_node(cpu_reg(), n->g, n->node(), std::vector<Tensor>{x, w});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // out = s * (in - 1) + output_padding + k - pads: 3*2+1+3-2 = 8, 2*2+1+3-0 = 8.
  EXPECT_EQ((*y)[0].shape(), (Shape{1, 5, 8, 8}));
}

}  // namespace
}  // namespace streamline::ops

namespace streamline::ops {
namespace {

using namespace testing;

// 1-D convolutions written as 2-D ([N, C, L, 1], Kx1 filters) run with their long axis as the width
// (ConvAlgorithm::kLongAxis, and whatever kMeasure picks): same results as the reference in every
// layout, with padding, strides, dilations, groups, a residual and a fused activation.
TEST(ConvOp, WidthOneConvolutionsAlongTheLongAxis) {
  std::mt19937 rng(4400);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 24; ++iter) {
    const int64_t c = 16 * pick(1, 2), m = 16 * pick(1, 3), l = pick(9, 40), k = pick(1, 5);
    const int64_t s = pick(1, 2), d = iter % 5 == 0 ? 2 : 1, p = pick(0, k - 1), group = iter % 4 == 3 ? c : 1;
    const int64_t mm = group > 1 ? c : m;
    const int64_t out = (l + 2 * p - d * (k - 1) - 1) / s + 1;
    std::vector<Tensor> in{random_tensor({1 + iter % 2, c, l, 1}, rng), random_tensor({mm, c / group, k, 1}, rng),
                           random_tensor({mm}, rng)};
    if (iter % 3 == 1) in.push_back(random_tensor({1 + iter % 2, mm, out, 1}, rng));
    std::map<std::string, graph::Attribute> attrs{{"strides", ints({s, 1})},
                                                  {"dilations", ints({d, 1})},
                                                  {"pads", ints({p, 0, p, 0})},
                                                  {"group", one_int(group)},
                                                  {"activation", str("Relu")}};
    for (int lay = 0; lay < 3; ++lay)
      for (ConvAlgorithm algo : {ConvAlgorithm::kLongAxis, ConvAlgorithm::kMeasure}) {
        RunOpts o;
        o.blocked = lay == 1;
        o.block = 16;
        o.channels_last = lay == 2;
        o.threads = 1 + iter % 2;
        SCOPED_TRACE("iter " + std::to_string(iter) + " layout " + std::to_string(lay) + " algo " +
                     std::to_string(static_cast<int>(algo)));
        auto n = make_node("FusedConv", "streamline", in, attrs);
        EvalOptions eo;
        eo.num_threads = o.threads;
        eo.input_layout = lay == 1 ? Layout::kBlocked16 : lay == 2 ? Layout::kChannelsLast : Layout::kPlain;
        eo.kernel_options.blocked_channels = 16;
        eo.kernel_options.conv_algorithm = algo;
        eo.constant_mask.assign(in.size(), false);
        eo.constant_mask[1] = eo.constant_mask[2] = true;
        auto got = evaluate_node(cpu_reg(), n->g, n->node(), in, eo);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        auto want = evaluate_node(ref_reg(), n->g, n->node(), in);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        expect_close((*got)[0], (*want)[0]);
      }
  }
}

}  // namespace
}  // namespace streamline::ops
