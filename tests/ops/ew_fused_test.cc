// Elementwise programs: streamline.Elementwise on random programs, broadcast shapes and every
// layout against the reference interpreter; the post-op recognition of SiLU, GELU, HardSwish and
// friends in their spellings; and the epilogues of FusedConv and FusedMatMul (as oneDNN post-ops
// and as our own loop, blocked and channels-last, Winograd and direct) against the reference
// kernels, all with fixed seeds.

#include <gtest/gtest.h>

#include "graph/ew_program.h"
#include "ops/cpu/ew_lower.h"
#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using graph::EwInstr;
using graph::EwOp;
using graph::EwProgram;
using namespace testing;

constexpr int kImm = EwInstr::kImm;

std::map<std::string, graph::Attribute> program_attrs(const EwProgram& p) {
  graph::Node n;
  graph::set_program_attrs(n, p);
  return n.attrs;
}

// Runs `node` with the CPU and the reference kernels and compares output 0: |got - want| within
// atol + rtol * |want| elementwise.
void expect_matches_reference(const OneNode& n, const std::vector<Tensor>& inputs, const EvalOptions& eo,
                              double atol = 1e-5, double rtol = 1e-4) {
  auto got = evaluate_node(cpu_reg(), n.g, n.node(), inputs, eo);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EvalOptions ref = eo;
  ref.input_layout = Layout::kPlain;
  ref.num_threads = 1;
  auto want = evaluate_node(ref_reg(), n.g, n.node(), inputs, ref);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  const Tensor& g = (*got)[0];
  const Tensor& w = (*want)[0];
  ASSERT_EQ(g.shape(), w.shape());
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double a = g.data<float>()[i], b = w.data<float>()[i];
    if (std::isnan(b)) continue;
    ASSERT_LE(std::fabs(a - b), atol + rtol * std::fabs(b)) << "element " << i << " of " << w.shape().to_string();
  }
}

EwProgram random_program(std::mt19937& rng, int inputs) {
  // Ops that stay finite on [-2, 2] inputs and their combinations.
  const EwOp unary[] = {EwOp::kRelu, EwOp::kLeakyRelu, EwOp::kSigmoid,     EwOp::kTanh,      EwOp::kNeg,
                        EwOp::kAbs,  EwOp::kErf,       EwOp::kHardSigmoid, EwOp::kHardSwish, EwOp::kSoftplus,
                        EwOp::kElu,  EwOp::kClip,      EwOp::kSilu,        EwOp::kGeluErf,   EwOp::kGeluTanh,
                        EwOp::kMish, EwOp::kSoftsign,  EwOp::kSin,         EwOp::kIdentity};
  const EwOp binary[] = {EwOp::kAdd, EwOp::kSub, EwOp::kMul, EwOp::kMax, EwOp::kMin, EwOp::kPRelu};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  EwProgram p;
  p.num_inputs = inputs;
  const int n = 2 + pick(6);
  for (int i = 0; i < n; ++i) {
    const int regs = p.num_registers();
    // Mostly the newest register, so chains form; sometimes any earlier one.
    auto arg = [&] { return pick(3) == 0 ? pick(regs) : regs - 1; };
    const int kind = pick(5);
    if (kind < 2) {
      p.add(unary[pick(sizeof(unary) / sizeof(unary[0]))], {arg()}, 0.1f + 0.1f * static_cast<float>(pick(5)), 0.9f);
    } else if (kind < 4) {
      const EwOp op = binary[pick(sizeof(binary) / sizeof(binary[0]))];
      const bool imm = pick(3) == 0;
      const int a = arg(), b = imm ? kImm : pick(regs);
      p.add(op, pick(2) ? std::vector<int>{a, b} : std::vector<int>{b, a}, 0.f, 0.f, 0.5f);
    } else if (kind == 4) {
      p.add(EwOp::kPow, {arg(), kImm}, 0.f, 0.f, pick(2) ? 2.f : 3.f);
    }
  }
  if (p.code.empty()) p.add(EwOp::kRelu, {0});
  // Keep values bounded: a final tanh.
  p.add(EwOp::kTanh, {p.output()});
  return p;
}

TEST(EwFused, RandomProgramsMatchReferenceInEveryLayout) {
  std::mt19937 rng(2024);
  int checked = 0;
  for (int iter = 0; iter < 80; ++iter) {
    const int ninputs = 1 + iter % 3;
    EwProgram p = random_program(rng, ninputs);
    const int layout_kind = iter % 4;  // plain, channels-last, nChw8c, nChw16c
    const int64_t c = layout_kind == 3 ? 32 : 16;
    const Shape out{1 + iter % 2, c, 3 + iter % 4, 5};
    const Shape partners[] = {out, {1, c, 1, 1}, {c, 1, 1}, {1, 1, out[2], out[3]}, {}, {out[3]}};
    std::vector<Tensor> inputs{random_tensor(out, rng, -2.f, 2.f)};
    for (int k = 1; k < ninputs; ++k) inputs.push_back(random_tensor(partners[(iter + k) % 6], rng, -2.f, 2.f));
    if (iter % 7 == 3) std::swap(inputs[0], inputs.back());  // the full-size input need not come first
    auto n = make_node("Elementwise", "streamline", inputs, program_attrs(p));
    EvalOptions eo;
    eo.constant_mask.assign(inputs.size(), false);
    eo.num_threads = 1 + iter % 2;
    eo.input_layout = layout_kind == 0   ? Layout::kPlain
                      : layout_kind == 1 ? Layout::kChannelsLast
                      : layout_kind == 2 ? Layout::kBlocked8
                                         : Layout::kBlocked16;
    SCOPED_TRACE("iter " + std::to_string(iter) + ": " + p.to_string());
    expect_matches_reference(*n, inputs, eo);
    ++checked;
  }
  EXPECT_EQ(checked, 80);
}

TEST(EwFused, LargeOutputsSplitAcrossThreadsAndMasks) {
  std::mt19937 rng(7);
  EwProgram p;  // where(mask, sigmoid(a) * b, a)
  p.num_inputs = 3;
  const int s = p.add(EwOp::kSigmoid, {0});
  const int m = p.add(EwOp::kMul, {s, 1});
  p.add(EwOp::kWhere, {2, m, 0});
  const Shape out{2, 64, 33, 33};
  Tensor a = random_tensor(out, rng), b = random_tensor({1, 64, 1, 1}, rng);
  Tensor mask = Tensor::empty(DType::kBool, Shape{2, 1, 33, 33});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<uint8_t>()[i] = i % 5 < 2;
  auto n = make_node("Elementwise", "streamline", {a, b, mask}, program_attrs(p));
  for (int threads : {1, 2, 3}) {
    EvalOptions eo;
    eo.constant_mask = {false, false, false};
    eo.num_threads = threads;
    eo.input_layout = threads == 3 ? Layout::kBlocked16 : Layout::kPlain;
    expect_matches_reference(*n, {a, b, mask}, eo);
  }
}

// Broadcast operands are gathered once per span and reused by the following chunks (EwWalk::period):
// spans that are and are not multiples of the chunk, per-channel and per-pixel operands, chunks
// split across threads, in every layout.
TEST(EwFused, BroadcastOperandsReusedAcrossChunksMatchReference) {
  std::mt19937 rng(11);
  EwProgram p;  // relu(x * scale + shift) * pixel: a BatchNormalization, an activation, a mask
  p.num_inputs = 4;
  const int a = p.add(EwOp::kMul, {0, 1});
  const int b = p.add(EwOp::kAdd, {a, 2});
  const int r = p.add(EwOp::kRelu, {b});
  p.add(EwOp::kMul, {r, 3});
  const Shape shapes[] = {{1, 64, 16, 16}, {2, 48, 7, 9}, {1, 32, 5, 5}, {2, 16, 33, 17}};
  int checked = 0;
  for (const Shape& out : shapes) {
    const int64_t c = out[1];
    Tensor x = random_tensor(out, rng, -2.f, 2.f);
    Tensor scale = random_tensor({c, 1, 1}, rng, 0.5f, 2.f), shift = random_tensor({1, c, 1, 1}, rng, -1.f, 1.f);
    Tensor pixel = random_tensor({1, 1, out[2], out[3]}, rng, -2.f, 2.f);
    auto n = make_node("Elementwise", "streamline", {x, scale, shift, pixel}, program_attrs(p));
    for (Layout layout : {Layout::kPlain, Layout::kChannelsLast, Layout::kBlocked8, Layout::kBlocked16}) {
      if (layout == Layout::kBlocked16 && c % 16 != 0) continue;
      for (int threads : {1, 3}) {
        EvalOptions eo;
        eo.constant_mask = {false, true, true, false};
        eo.num_threads = threads;
        eo.input_layout = layout;
        SCOPED_TRACE(out.to_string() + " " + layout_name(layout) + " threads " + std::to_string(threads));
        expect_matches_reference(*n, {x, scale, shift, pixel}, eo);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 32);
}

// SiLU, GELU and HardSwish written in different ways all map onto oneDNN's functions; close
// relatives do not.
TEST(EwFused, NamedFunctionsAreRecognisedInAnySpelling) {
  auto one = [](std::initializer_list<std::pair<EwOp, std::vector<int>>> code, std::vector<float> imms = {}) {
    EwProgram p;
    p.num_inputs = 1;
    size_t k = 0;
    for (const auto& [op, args] : code) p.add(op, args, 0.f, 0.f, k < imms.size() ? imms[k++] : 0.f);
    return cpu::identify_function(p, p.output());
  };
  using dnnl::algorithm;
  auto alg = [](const std::optional<cpu::EwPostOp>& f) { return f ? f->alg : algorithm::undef; };
  // SiLU both ways round, and swish with a factor (GELU's sigmoid approximation).
  EXPECT_EQ(alg(one({{EwOp::kSigmoid, {0}}, {EwOp::kMul, {0, 1}}})), algorithm::eltwise_swish);
  EXPECT_EQ(alg(one({{EwOp::kSigmoid, {0}}, {EwOp::kMul, {1, 0}}})), algorithm::eltwise_swish);
  auto sw = one({{EwOp::kMul, {0, kImm}}, {EwOp::kSigmoid, {1}}, {EwOp::kMul, {0, 2}}}, {1.702f});
  ASSERT_TRUE(sw);
  EXPECT_EQ(sw->alg, algorithm::eltwise_swish);
  EXPECT_NEAR(sw->alpha, 1.702f, 1e-5f);
  // GELU, erf form: x * 0.5 * (1 + erf(x / sqrt 2)) and (x * (erf(x * c) * 0.5 + 0.5)).
  EXPECT_EQ(alg(one({{EwOp::kDiv, {0, kImm}},
                     {EwOp::kErf, {1}},
                     {EwOp::kAdd, {2, kImm}},
                     {EwOp::kMul, {0, 3}},
                     {EwOp::kMul, {4, kImm}}},
                    {1.4142135f, 0.f, 1.f, 0.f, 0.5f})),
            algorithm::eltwise_gelu_erf);
  EXPECT_EQ(alg(one({{EwOp::kMul, {0, kImm}},
                     {EwOp::kErf, {1}},
                     {EwOp::kMul, {2, kImm}},
                     {EwOp::kAdd, {3, kImm}},
                     {EwOp::kMul, {0, 4}}},
                    {0.70710678f, 0.f, 0.5f, 0.5f})),
            algorithm::eltwise_gelu_erf);
  // GELU, tanh form, with x^3 as Pow and as two products.
  EXPECT_EQ(alg(one({{EwOp::kPow, {0, kImm}},
                     {EwOp::kMul, {1, kImm}},
                     {EwOp::kAdd, {0, 2}},
                     {EwOp::kMul, {3, kImm}},
                     {EwOp::kTanh, {4}},
                     {EwOp::kAdd, {5, kImm}},
                     {EwOp::kMul, {0, 6}},
                     {EwOp::kMul, {7, kImm}}},
                    {3.f, 0.044715f, 0.f, 0.7978845608f, 0.f, 1.f, 0.f, 0.5f})),
            algorithm::eltwise_gelu_tanh);
  EXPECT_EQ(alg(one({{EwOp::kMul, {0, 0}},
                     {EwOp::kMul, {1, 0}},
                     {EwOp::kMul, {2, kImm}},
                     {EwOp::kAdd, {0, 3}},
                     {EwOp::kMul, {4, kImm}},
                     {EwOp::kTanh, {5}},
                     {EwOp::kAdd, {6, kImm}},
                     {EwOp::kMul, {7, kImm}},
                     {EwOp::kMul, {0, 8}}},
                    {0.f, 0.f, 0.044715f, 0.f, 0.7978845608f, 0.f, 1.f, 0.5f})),
            algorithm::eltwise_gelu_tanh);
  // HardSwish: x * relu6(x + 3) / 6 and x * HardSigmoid(x) with 1/6, 1/2.
  {
    EwProgram p;
    p.num_inputs = 1;
    p.add(EwOp::kAdd, {0, kImm}, 0.f, 0.f, 3.f);
    p.add(EwOp::kClip, {1}, 0.f, 6.f);
    p.add(EwOp::kMul, {0, 2});
    p.add(EwOp::kDiv, {3, kImm}, 0.f, 0.f, 6.f);
    EXPECT_EQ(alg(cpu::identify_function(p, p.output())), algorithm::eltwise_hardswish);
    EwProgram q;
    q.num_inputs = 1;
    q.add(EwOp::kHardSigmoid, {0}, 1.f / 6.f, 0.5f);
    q.add(EwOp::kMul, {1, 0});
    EXPECT_EQ(alg(cpu::identify_function(q, q.output())), algorithm::eltwise_hardswish);
  }
  // An affine map, relu6 as a clip, a leaky ReLU as max(x, 0.1 x).
  auto lin = one({{EwOp::kMul, {0, kImm}}, {EwOp::kAdd, {1, kImm}}}, {2.5f, -1.f});
  ASSERT_TRUE(lin);
  EXPECT_EQ(lin->alg, algorithm::eltwise_linear);
  EXPECT_FLOAT_EQ(lin->alpha, 2.5f);
  EXPECT_FLOAT_EQ(lin->beta, -1.f);
  EXPECT_EQ(alg(one({{EwOp::kMul, {0, kImm}}, {EwOp::kMax, {0, 1}}}, {0.1f})), algorithm::eltwise_relu);
  // Near misses: x * sigmoid(x) + x is no named function; GELU with another cubic coefficient
  // is not GELU.
  EXPECT_EQ(alg(one({{EwOp::kSigmoid, {0}}, {EwOp::kMul, {0, 1}}, {EwOp::kAdd, {2, 0}}})), algorithm::undef);
  EXPECT_EQ(alg(one({{EwOp::kPow, {0, kImm}},
                     {EwOp::kMul, {1, kImm}},
                     {EwOp::kAdd, {0, 2}},
                     {EwOp::kMul, {3, kImm}},
                     {EwOp::kTanh, {4}},
                     {EwOp::kAdd, {5, kImm}},
                     {EwOp::kMul, {0, 6}},
                     {EwOp::kMul, {7, kImm}}},
                    {3.f, 0.1f, 0.f, 0.7978845608f, 0.f, 1.f, 0.f, 0.5f})),
            algorithm::undef);
}

TEST(EwFused, ProgramsWithOtherInputsLowerToBinaryPostOps) {
  // relu(x + z) * s: add z, relu, multiply by s.
  EwProgram p;
  p.num_inputs = 3;
  const int a = p.add(EwOp::kAdd, {0, 1});
  const int r = p.add(EwOp::kRelu, {a});
  p.add(EwOp::kMul, {2, r});
  auto ops = cpu::lower_to_post_ops(p);
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->size(), 3u);
  EXPECT_EQ((*ops)[0].kind, cpu::EwPostOp::Kind::kBinary);
  EXPECT_EQ((*ops)[0].input, 1);
  EXPECT_EQ((*ops)[1].alg, dnnl::algorithm::eltwise_relu);
  EXPECT_EQ((*ops)[2].alg, dnnl::algorithm::binary_mul);
  EXPECT_EQ((*ops)[2].input, 2);
  // z - x keeps x on the right: no post-op subtracts the accumulator from an operand.
  EwProgram q;
  q.num_inputs = 2;
  q.add(EwOp::kSub, {1, 0});
  EXPECT_FALSE(cpu::lower_to_post_ops(q));
  // where() and sin() have no post-op.
  EwProgram w;
  w.num_inputs = 1;
  w.add(EwOp::kSin, {0});
  EXPECT_FALSE(cpu::lower_to_post_ops(w));
}

struct ConvEpilogueCase {
  const char* name;
  EwProgram program;
  std::vector<Shape> extra_shapes;  // shapes of inputs 1.. of the program
};

std::vector<ConvEpilogueCase> conv_epilogues(int64_t m, const Shape& y) {
  std::vector<ConvEpilogueCase> cs;
  {
    EwProgram p;  // SiLU: a swish post-op
    p.num_inputs = 1;
    p.add(EwOp::kSigmoid, {0});
    p.add(EwOp::kMul, {0, 1});
    cs.push_back({"silu", p, {}});
  }
  {
    EwProgram p;  // squeeze-excitation-like scale by a per-channel tensor, then an affine map
    p.num_inputs = 2;
    const int s = p.add(EwOp::kMul, {0, 1});
    const int t = p.add(EwOp::kMul, {s, kImm}, 0.f, 0.f, 0.5f);
    p.add(EwOp::kAdd, {t, kImm}, 0.f, 0.f, 1.f);
    cs.push_back({"per-channel", p, {{1, m, 1, 1}}});
  }
  {
    EwProgram p;  // a residual of the output's shape, then HardSwish
    p.num_inputs = 2;
    const int a = p.add(EwOp::kAdd, {0, 1});
    p.add(EwOp::kHardSwish, {a});
    cs.push_back({"residual", p, {y}});
  }
  {
    EwProgram p;  // no post-op: our loop (sin, and an operand broadcast along rows)
    p.num_inputs = 2;
    const int s = p.add(EwOp::kSin, {0});
    p.add(EwOp::kMul, {s, 1});
    cs.push_back({"loop", p, {{1, 1, y[2], 1}}});
  }
  return cs;
}

// FusedConv with each epilogue, dense (some Winograd-sized), depthwise and first-layer, in
// nChw8c, nChw16c and channels-last.
TEST(EwFused, ConvEpiloguesMatchReference) {
  std::mt19937 rng(31);
  struct Geo {
    int64_t n, c, m, h, w, k, group;
  };
  const Geo geos[] = {
      {1, 16, 32, 9, 7, 3, 1}, {2, 32, 32, 28, 28, 3, 1}, {1, 32, 32, 6, 6, 3, 32}, {1, 3, 16, 8, 8, 3, 1}};
  int checked = 0;
  for (const Geo& g : geos) {
    const Shape x{g.n, g.c, g.h, g.w}, y{g.n, g.m, g.h, g.w};
    for (const ConvEpilogueCase& ec : conv_epilogues(g.m, y)) {
      for (int lay = 0; lay < 3; ++lay) {
        std::vector<Tensor> in{random_tensor(x, rng), random_tensor({g.m, g.c / g.group, g.k, g.k}, rng),
                               random_tensor({g.m}, rng), Tensor()};
        for (const Shape& s : ec.extra_shapes) in.push_back(random_tensor(s, rng));
        auto attrs = program_attrs(ec.program);
        attrs["pads"] = ints({1, 1, 1, 1});
        attrs["group"] = one_int(g.group);
        attrs["activation"] = str("Relu");
        RunOpts o;
        o.blocked = lay < 2;
        o.block = lay == 0 ? 8 : 16;
        o.channels_last = lay == 2;
        o.threads = 1 + checked % 2;
        o.constant_mask.assign(in.size(), false);
        o.constant_mask[1] = o.constant_mask[2] = true;
        if (in.size() > 4) o.constant_mask[4] = ec.extra_shapes[0].numel() < y.numel();  // per-channel: a constant
        SCOPED_TRACE(std::string(ec.name) + " c" + std::to_string(g.c) + " m" + std::to_string(g.m) + " group " +
                     std::to_string(g.group) + " layout " + std::to_string(lay));
        compare("FusedConv", "streamline", in, attrs, o);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 * 4 * 3);
}

// FusedMatMul with a GELU written out (eltwise post-op) and a SwiGLU gate (our loop, reading a
// second tensor), unsplit and in column blocks (2 threads, N >= 64), and at two rows, where the
// matrix-vector loops run the product and our loop every epilogue.
TEST(EwFused, MatMulEpiloguesMatchReference) {
  std::mt19937 rng(41);
  EwProgram gelu;
  gelu.num_inputs = 1;
  {
    const int c = gelu.add(EwOp::kPow, {0, kImm}, 0.f, 0.f, 3.f);
    const int t1 = gelu.add(EwOp::kMul, {c, kImm}, 0.f, 0.f, 0.044715f);
    const int t2 = gelu.add(EwOp::kAdd, {0, t1});
    const int t3 = gelu.add(EwOp::kMul, {t2, kImm}, 0.f, 0.f, 0.7978845608f);
    const int t4 = gelu.add(EwOp::kTanh, {t3});
    const int t5 = gelu.add(EwOp::kAdd, {t4, kImm}, 0.f, 0.f, 1.f);
    const int t6 = gelu.add(EwOp::kMul, {0, t5});
    gelu.add(EwOp::kMul, {t6, kImm}, 0.f, 0.f, 0.5f);
  }
  EwProgram swiglu;
  swiglu.num_inputs = 2;
  {
    const int s = swiglu.add(EwOp::kSigmoid, {0});
    const int si = swiglu.add(EwOp::kMul, {0, s});
    swiglu.add(EwOp::kMul, {si, 1});
  }
  // The soft cap of attention scores, c tanh(x / c): two different affine maps around a tanh.
  EwProgram softcap;
  softcap.num_inputs = 1;
  {
    const int d = softcap.add(EwOp::kDiv, {0, kImm}, 0.f, 0.f, 2.5f);
    const int t = softcap.add(EwOp::kTanh, {d});
    softcap.add(EwOp::kMul, {t, kImm}, 0.f, 0.f, 2.5f);
  }
  for (const auto& [batch, rows] : std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {1, 2}}) {
    for (int64_t n : {24, 96}) {
      for (const EwProgram* p : {&gelu, &swiglu, &softcap}) {
        for (int threads : {1, 2}) {
          std::vector<Tensor> in{random_tensor({batch, rows, 16}, rng), random_tensor({16, n}, rng),
                                 random_tensor({n}, rng)};
          if (p->num_inputs == 2) in.push_back(random_tensor({batch, rows, n}, rng));
          RunOpts o;
          o.threads = threads;
          o.constant_mask.assign(in.size(), false);
          o.constant_mask[1] = o.constant_mask[2] = true;
          SCOPED_TRACE(p->to_string() + " rows " + std::to_string(batch * rows) + " n " + std::to_string(n) +
                       " threads " + std::to_string(threads));
          compare("FusedMatMul", "streamline", in, program_attrs(*p), o);
        }
      }
    }
  }
}

TEST(EwFused, MalformedProgramsAreInvalidArgument) {
  std::mt19937 rng(5);
  EwProgram p;
  p.num_inputs = 1;
  p.add(EwOp::kAdd, {0, 3});  // register 3 does not exist yet
  const std::vector<Tensor> x{random_tensor({2, 3}, rng)};
  auto n = make_node("Elementwise", "streamline", x, program_attrs(p));
  auto r = evaluate_node(cpu_reg(), n->g, n->node(), x);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  // A program reading more inputs than the node has.
  EwProgram q;
  q.num_inputs = 2;
  q.add(EwOp::kAdd, {0, 1});
  auto m = make_node("Elementwise", "streamline", x, program_attrs(q));
  auto s = evaluate_node(cpu_reg(), m->g, m->node(), x);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline::ops
