// Winograd F(2x2, 3x3) and F(4x4, 3x3): winograd_conv against a direct convolution computed here in double
// (borders, odd sizes, uneven padding, several chunks, every epilogue, thread counts), the Conv
// kernel's Winograd path against the reference kernel, and which convolutions take it.

#include <gtest/gtest.h>

#include "graph/ew_program.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using namespace testing;
using cpu::Activation;
using cpu::ActKind;

struct Case {
  int f;
  int64_t n, c, m, h, w, pt, pl, pb, pr;
  ActKind act;
  bool bias, residual;
  int threads;
  int block = 8;
};

// NCHW -> nChw<B>c (c a multiple of B).
std::vector<float> to_blocked(const float* x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t bl) {
  std::vector<float> y(static_cast<size_t>(n * c * h * w));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < h * w; ++i)
        y[static_cast<size_t>((((b * (c / bl) + ch / bl) * h * w) + i) * bl + ch % bl)] = x[(b * c + ch) * h * w + i];
  return y;
}

double activate(double v, const Activation& a) {
  switch (a.kind) {
    case ActKind::kRelu:
      return v > 0 ? v : 0;
    case ActKind::kLeakyRelu:
      return v > 0 ? v : a.alpha * v;
    case ActKind::kClip:
      return std::min<double>(std::max<double>(v, a.alpha), a.beta);
    default:
      return v;
  }
}

void run_case(const Case& k, std::mt19937& rng) {
  const int64_t oh = k.h + k.pt + k.pb - 2, ow = k.w + k.pl + k.pr - 2;
  Tensor x = random_tensor({k.n, k.c, k.h, k.w}, rng);
  Tensor w = random_tensor({k.m, k.c, 3, 3}, rng);
  Tensor b = random_tensor({k.m}, rng);
  Tensor z = random_tensor({k.n, k.m, oh, ow}, rng);
  Activation act;
  act.kind = k.act;
  act.alpha = k.act == ActKind::kClip ? -0.5f : 0.1f;
  act.beta = 0.5f;

  // Direct convolution in double, NCHW.
  std::vector<double> want(static_cast<size_t>(k.n * k.m * oh * ow));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t bi = 0; bi < k.n; ++bi)
    for (int64_t o = 0; o < k.m; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double s = k.bias ? b.data<float>()[o] : 0.0;
          for (int64_t ch = 0; ch < k.c; ++ch)
            for (int64_t di = 0; di < 3; ++di)
              for (int64_t dj = 0; dj < 3; ++dj) {
                const int64_t ih = i + di - k.pt, iw = j + dj - k.pl;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                s += double(xp[((bi * k.c + ch) * k.h + ih) * k.w + iw]) * wp[((o * k.c + ch) * 3 + di) * 3 + dj];
              }
          const size_t idx = static_cast<size_t>(((bi * k.m + o) * oh + i) * ow + j);
          if (k.residual) s += z.data<float>()[idx];
          want[idx] = activate(s, act);
        }

  const int64_t bl = k.block;
  const std::vector<float> xb = to_blocked(xp, k.n, k.c, k.h, k.w, bl);
  std::vector<float> yb = k.residual ? to_blocked(z.data<float>(), k.n, k.m, oh, ow, bl)
                                     : std::vector<float>(static_cast<size_t>(k.n * k.m * oh * ow), 123.f);
  const cpu::WinogradWeights u = cpu::winograd_weights(wp, k.m, k.c, k.f);
  ASSERT_TRUE(u.u);
  cpu::WinogradGeom g = cpu::winograd_geom(k.f, k.n, k.c, k.m, k.h, k.w, oh, ow, k.pt, k.pl);
  g.block = k.block;
  EXPECT_EQ(g.tiles, k.n * ((oh + k.f - 1) / k.f) * ((ow + k.f - 1) / k.f));
  auto ws = AlignedBuffer::allocate(g.workspace_bytes());
  cpu::WinogradEpilogue e;
  e.bias = k.bias ? b.data<float>() : nullptr;
  e.accumulate = k.residual;
  e.act = act;
  ASSERT_TRUE(cpu::winograd_conv(g, u, xb.data(), yb.data(), e, ws->data(), k.threads).ok());

  const std::vector<double> got_nchw = [&] {
    std::vector<double> r(want.size());
    for (int64_t bi = 0; bi < k.n; ++bi)
      for (int64_t o = 0; o < k.m; ++o)
        for (int64_t i = 0; i < oh * ow; ++i)
          r[static_cast<size_t>((bi * k.m + o) * oh * ow + i)] =
              yb[static_cast<size_t>(((bi * (k.m / bl) + o / bl) * oh * ow + i) * bl + o % bl)];
    return r;
  }();
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    max_diff = std::max(max_diff, std::fabs(got_nchw[i] - want[i]));
  }
  // float32 accumulation over c*9 products: F(2x2) well inside 1e-5 of the output scale, F(4x4)
  // (larger transform coefficients) inside 1e-4, the model tests' bound.
  EXPECT_LE(max_diff, (k.f == 2 ? 1e-5 : 1e-4) * std::max(max_ref, 1.0)) << "max ref " << max_ref;
}

TEST(Winograd, MatchesDirectConvolution) {
  std::mt19937 rng(2025);
  const std::vector<Case> cases{
      {0, 1, 16, 16, 7, 7, 1, 1, 1, 1, ActKind::kNone, true, false, 1},      // partial tiles at the far edges
      {0, 2, 8, 24, 9, 6, 0, 0, 0, 0, ActKind::kRelu, true, false, 2},       // no padding, batch 2
      {0, 1, 24, 16, 10, 11, 2, 1, 0, 2, ActKind::kClip, false, true, 3},    // uneven padding, residual
      {0, 1, 32, 40, 8, 8, 1, 1, 1, 1, ActKind::kLeakyRelu, true, true, 2},  // residual and LeakyRelu
      {0, 1, 256, 256, 20, 20, 1, 1, 1, 1, ActKind::kRelu, true, false, 2},  // several chunks
      {0, 3, 16, 64, 5, 13, 1, 1, 1, 1, ActKind::kNone, false, false, 40},   // more threads than products
      // Enough tiles that each thread takes ranges of them through every phase (winograd_conv):
      // two threads with a residual; three threads over a batch of two, ranges crossing images.
      {0, 1, 16, 32, 30, 30, 1, 1, 1, 1, ActKind::kRelu, true, true, 2},
      {0, 2, 16, 16, 17, 23, 1, 1, 1, 1, ActKind::kClip, true, true, 3},
  };
  for (int block : {8, 16})
    for (int f : {2, 4})
      for (size_t i = 0; i < cases.size(); ++i) {
        Case k = cases[i];
        if (k.c % block != 0 || k.m % block != 0) continue;
        SCOPED_TRACE("F(" + std::to_string(f) + "x" + std::to_string(f) + ", 3x3) case " + std::to_string(i) +
                     " block " + std::to_string(block));
        k.f = f;
        k.block = block;
        run_case(k, rng);
      }
}

TEST(Winograd, ChunksKeepTheWorkingSetBounded) {
  // 56x56 outputs of 64 -> 64 channels (ResNet-50's first stage): 784 tiles in several chunks,
  // each chunk's transformed inputs and products within 2 MiB.
  const cpu::WinogradGeom g = cpu::winograd_geom(2, 1, 64, 64, 56, 56, 56, 56, 1, 1);
  EXPECT_EQ(g.tiles, 784);
  EXPECT_GT(g.tiles, g.chunk);
  EXPECT_LE(g.workspace_bytes(), (size_t{2} << 20) + 128);
  // The last chunk is not a sliver: chunks are evened out.
  const int64_t chunks = (g.tiles + g.chunk - 1) / g.chunk;
  EXPECT_GT(g.tiles - (chunks - 1) * g.chunk, g.chunk / 2);
}

TEST(Winograd, WhenItApplies) {
  EXPECT_EQ(cpu::winograd_tile(8, 64, 64, 56, 56), 4);  // large outputs: F(4x4, 3x3)
  EXPECT_EQ(cpu::winograd_tile(8, 256, 256, 14, 14), 2);
  EXPECT_EQ(cpu::winograd_tile(8, 8, 64, 56, 56), 0);    // too few input channels
  EXPECT_EQ(cpu::winograd_tile(8, 20, 64, 56, 56), 0);   // not whole nChw8c blocks
  EXPECT_EQ(cpu::winograd_tile(16, 24, 64, 56, 56), 0);  // not whole nChw16c blocks
  EXPECT_EQ(cpu::winograd_tile(16, 32, 64, 56, 56), 4);
  EXPECT_TRUE(cpu::winograd_worthwhile(8, 2, 256, 256, 1, 14, 14));
  EXPECT_FALSE(cpu::winograd_worthwhile(8, 2, 512, 512, 1, 7, 7));  // one 7x7 image: too few tiles
  EXPECT_TRUE(cpu::winograd_worthwhile(8, 2, 512, 512, 2, 7, 7));   // ... two images
  EXPECT_FALSE(cpu::winograd_worthwhile(8, 0, 64, 64, 1, 56, 56));
  Activation a;
  a.kind = ActKind::kSigmoid;
  EXPECT_FALSE(cpu::winograd_activation_ok(a));
  a.kind = ActKind::kClip;
  EXPECT_TRUE(cpu::winograd_activation_ok(a));
}

// The Conv kernel takes the Winograd path for nChw8c 3x3 stride-1 convolutions with enough
// channels and pixels; it must agree with the reference kernel (1e-4 of the output scale) like
// the direct path does.
TEST(Winograd, ConvKernelMatchesReference) {
  std::mt19937 rng(77);
  const std::vector<std::pair<std::string, std::vector<float>>> acts{
      {"", {}}, {"Relu", {}}, {"Clip", {-0.3f, 0.4f}}, {"LeakyRelu", {0.2f}}};
  int iter = 0;
  for (const auto& [act, params] : acts) {
    for (int variant = 0; variant < 3; ++variant, ++iter) {
      // Some shapes are large enough for F(4x4, 3x3), the rest take F(2x2, 3x3) or (7x7 outputs
      // of one image) the direct primitive. Not with Clip: its [-0.3, 0.4] output is far smaller
      // than the pre-activation values whose scale F(4x4)'s rounding follows, so the bound relative
      // to the output would test the clip, not the convolution (MatchesDirectConvolution covers
      // F(4x4) with Clip).
      const bool large = variant == 0 && act != "Clip";
      const int64_t c = 16 * (1 + iter % 3), m = 8 * (2 + iter % 4);
      const int64_t h = large ? 28 + iter % 5 : 7 + iter % 6, w = large ? 30 + iter % 3 : 8 + iter % 5;
      const int64_t n = 1 + iter % 2, p = variant == 2 ? 0 : 1;
      const int64_t oh = h + 2 * p - 2, ow = w + 2 * p - 2;
      std::vector<Tensor> in{random_tensor({n, c, h, w}, rng), random_tensor({m, c, 3, 3}, rng),
                             random_tensor({m}, rng)};
      if (variant == 1) in.push_back(random_tensor({n, m, oh, ow}, rng));
      std::map<std::string, graph::Attribute> attrs{{"pads", ints({p, p, p, p})}, {"activation", str(act)}};
      if (!params.empty()) attrs["activation_params"] = floats(params);
      for (int block : {8, 16}) {
        RunOpts o;
        o.blocked = true;
        o.block = block;
        o.threads = 1 + iter % 2;
        SCOPED_TRACE(act + " variant " + std::to_string(variant) + " block " + std::to_string(block));
        compare("FusedConv", "streamline", in, attrs, o);
      }
    }
  }
}

// Which algorithm a 3x3 convolution runs is a fixed rule, the same in every process: with the
// default kernel options a 64-channel 56x56 one on nChw16c runs Winograd F(2x2, 3x3) (its
// workspace is exactly Winograd's), F(4x4, 3x3) only when a fixed algorithm is asked for
// (ConvAlgorithm::kDirect), the direct primitive without winograd.
TEST(Winograd, DefaultOptionsRunTwoByTwoTiles) {
  std::mt19937 rng(91);
  const int64_t c = 64, m = 64, h = 56, w = 56;
  std::vector<Tensor> in{random_tensor({1, c, h, w}, rng), random_tensor({m, c, 3, 3}, rng), random_tensor({m}, rng)};
  auto n = make_node("FusedConv", "streamline", in, {{"pads", ints({1, 1, 1, 1})}, {"activation", str("Relu")}});
  auto def = cpu_reg().find("FusedConv", "streamline", 1, Device::kCpu, DType::kFloat32);
  ASSERT_TRUE(def.ok()) << def.status().to_string();
  auto workspace = [&](const KernelOptions& ko) -> size_t {
    KernelCreateArgs args{
        n->g, n->node(), {nullptr, &in[1], &in[2]}, {DType::kFloat32, DType::kFloat32, DType::kFloat32}, ko};
    auto k = (*def)->create(args);
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    if (!k.ok()) return 0;
    std::vector<TensorInfo> infos{{DType::kFloat32, in[0].shape(), Layout::kBlocked16, nullptr},
                                  {DType::kFloat32, in[1].shape(), Layout::kPlain, &in[1]},
                                  {DType::kFloat32, in[2].shape(), Layout::kPlain, &in[2]}};
    auto r = (*k)->reshape(infos);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->workspace_bytes : 0;
  };
  auto wino_bytes = [&](int f) {
    cpu::WinogradGeom g = cpu::winograd_geom(f, 1, c, m, h, w, h, w, 1, 1);
    g.block = 16;
    return g.workspace_bytes();
  };
  KernelOptions ko;
  ko.blocked_channels = 16;
  EXPECT_EQ(workspace(ko), wino_bytes(2));
  ko.conv_algorithm = ConvAlgorithm::kDirect;
  EXPECT_EQ(workspace(ko), wino_bytes(4));
  ko.winograd = false;
  const size_t direct = workspace(ko);
  EXPECT_NE(direct, wino_bytes(2));
  EXPECT_NE(direct, wino_bytes(4));
}

// A 3x3 convolution whose elementwise epilogue has a post-op form (SiLU here) runs the direct
// primitive, which applies it while computing each output, instead of Winograd and a second pass
// over y; one whose epilogue has none (a sine) still runs Winograd, the epilogue being our loop
// either way.
TEST(Winograd, EpiloguesWithPostOpsRunDirect) {
  std::mt19937 rng(93);
  const int64_t c = 64, m = 64, h = 40, w = 40;
  std::vector<Tensor> in{random_tensor({1, c, h, w}, rng), random_tensor({m, c, 3, 3}, rng), random_tensor({m}, rng)};
  auto workspace = [&](const graph::EwProgram& p) -> size_t {
    graph::Node attrs_of;
    graph::set_program_attrs(attrs_of, p);
    std::map<std::string, graph::Attribute> attrs = attrs_of.attrs;
    attrs["pads"] = ints({1, 1, 1, 1});
    // FusedConv's epilogue reads its inputs from 4 on, so the node has an (omitted) residual Z.
    std::vector<Tensor> node_in = in;
    node_in.emplace_back();
    auto n = make_node("FusedConv", "streamline", node_in, attrs);
    auto def = cpu_reg().find("FusedConv", "streamline", 1, Device::kCpu, DType::kFloat32);
    EXPECT_TRUE(def.ok()) << def.status().to_string();
    if (!def.ok()) return 0;
    KernelOptions ko;
    ko.blocked_channels = 16;
    KernelCreateArgs args{n->g,
                          n->node(),
                          {nullptr, &in[1], &in[2], nullptr},
                          {DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kUndefined},
                          ko};
    auto k = (*def)->create(args);
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    if (!k.ok()) return 0;
    std::vector<TensorInfo> infos{{DType::kFloat32, in[0].shape(), Layout::kBlocked16, nullptr},
                                  {DType::kFloat32, in[1].shape(), Layout::kPlain, &in[1]},
                                  {DType::kFloat32, in[2].shape(), Layout::kPlain, &in[2]},
                                  {}};
    auto r = (*k)->reshape(infos);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->workspace_bytes : 0;
  };
  cpu::WinogradGeom g = cpu::winograd_geom(2, 1, c, m, h, w, h, w, 1, 1);
  g.block = 16;
  graph::EwProgram silu;
  silu.num_inputs = 1;
  silu.add(graph::EwOp::kMul, {0, silu.add(graph::EwOp::kSigmoid, {0})});
  graph::EwProgram sine;
  sine.num_inputs = 1;
  sine.add(graph::EwOp::kSin, {0});
  EXPECT_NE(workspace(silu), g.workspace_bytes());
  EXPECT_EQ(workspace(sine), g.workspace_bytes());
}

}  // namespace
}  // namespace streamline::ops
