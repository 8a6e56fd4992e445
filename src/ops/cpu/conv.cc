// Conv, streamline.FusedConv and ConvTranspose on oneDNN.
//
// FusedConv computes Y = act(conv(X, W) + B + Z): B becomes the primitive's bias, Z a sum post-op
// (Y is filled with Z first, or already holds it when the plan gives Y the buffer of Z), the
// activation an eltwise post-op. Constant weights are reordered once into the layout oneDNN prefers:
// at create when the graph declares the input's spatial size, else per shape at reshape.
// 3x3 stride-1 convolutions on blocked activations with enough channels and pixels, and no
// elementwise epilogue that oneDNN could fuse, run Winograd F(2x2, 3x3) instead (conv_winograd.h);
// their filters are transformed once at create.
//
// FusedConv with x_scale = 1 takes a fifth input S [N or 1, C, 1, 1] and computes conv(X * S, W)
// (graph/pass_scale.cc moves squeeze-excitation scales there): with one scale for the batch the
// plain weights are reordered on every run with each input channel times its scale, a pass over
// O x C x K weights instead of C x H x W activations; with a scale per image X * S is formed in
// the workspace first.

#include <dnnl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>

#include "core/layout_convert.h"
#include "ops/cpu/algo_choice.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/ew_lower.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/onednn_common.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

using dnnl::memory;

// Per-shape state: descriptors and the primitives built for them.
struct ConvState {
  ConvGeom geom;
  // The geometry the primitive is built for: geom, or geom with its two spatial axes exchanged
  // (long_axis: a Kx1 convolution over a width-1 tensor runs as 1xK over a height-1 one; the bytes
  // of such tensors are the same in every layout, and oneDNN's kernels run far faster along W).
  ConvGeom prim;
  bool long_axis = false;
  memory::desc src_md, dst_md, bias_md, user_w_md, any_w_md;
  bool has_bias = false;
  bool has_z = false;
  size_t scratch_budget = 0;  // workspace bytes for the scratchpad
  size_t w_offset = 0;        // workspace offset of run-time reordered weights
  size_t w_bytes = 0;
  bool x_scale = false;          // FusedConv x_scale: input 4 scales X's channels
  bool scale_per_image = false;  // S has a row per image: X * S formed at x_offset instead
  size_t x_offset = 0;
  Layout x_layout = Layout::kPlain;
  PrimitiveCache cache;
  bool winograd = false;  // runs winograd_conv with `wgeom` instead of a primitive
  WinogradGeom wgeom;
  bool patches = false;       // a ConvTranspose whose kernels tile the output: run_patches
  int64_t patch_rows = 0;     // input rows per matrix product (bounds the workspace)
  EwEpilogue::ShapePlan epi;  // the elementwise epilogue: post-ops, or our loop over y afterwards
  int epi_post_op_base = 0;   // post-ops before the epilogue's (sum, activation)
};

memory::desc activation_md(const ConvGeom& g, Layout layout, bool is_src) {
  memory::dims d{g.n, is_src ? g.c : g.m};
  for (size_t i = 0; i < g.in.size(); ++i) d.push_back(is_src ? g.in[i] : g.out[i]);
  if (layout == Layout::kChannelsLast) return permuted_md(d, {0, 2, 3, 1});
  if (layout == Layout::kBlocked8) return memory::desc(d, memory::data_type::f32, memory::format_tag::nChw8c);
  if (layout == Layout::kBlocked16) return memory::desc(d, memory::data_type::f32, memory::format_tag::nChw16c);
  return plain_md(d);
}

// The activation layout for a 2-D convolution with c input and m output channels, given the
// blocked layout's channels per block (0: blocked layouts off). oneDNN's blocked convolutions
// (nChw8c for AVX2, nChw16c for AVX-512) are its fastest, but mixing a blocked layout with NHWC
// falls back to its reference code, so a blocked layout is chosen only when both sides have whole
// blocks (plain, grouped by whole blocks, or depthwise); everything else stays channels-last.
// A first layer (fewer than 8 input channels, as images have) reads plain NCHW and writes the
// blocked layout, for which oneDNN has a dedicated kernel; conv_layout() then returns kPlain for
// its input.
bool first_layer(int64_t c, int64_t m, int64_t group, int block) {
  return block > 0 && c < 8 && m % block == 0 && group == 1;
}

Layout conv_layout(int64_t c, int64_t m, int64_t group, int block) {
  if (first_layer(c, m, group, block)) return Layout::kPlain;
  if (block == 0) return Layout::kChannelsLast;
  const bool whole = c % block == 0 && m % block == 0;
  const bool depthwise = group == c && group == m;
  // Groups of exactly one block each way run oneDNN's blocked grouped kernels: on AVX-512 6x
  // faster than NHWC for 16-channel groups; on AVX2, 8-channel groups (RegNetY, ResNeXt's once
  // widened) run about as fast as NHWC or faster and spare the layout conversions around them
  // (RegNetY-400MF's steps 8% faster on one thread). Wider and narrower groups run faster
  // channels-last.
  const bool group_blocks = group > 1 && c / group == block && m / group == block;
  return whole && (group == 1 || depthwise || group_blocks) ? blocked_layout(block) : Layout::kChannelsLast;
}

// The output layout for an input in `in`: the same, except that a first layer (see above) given
// a plain input writes the blocked layout when blocked layouts are allowed (block > 0).
Layout conv_out_layout(Layout in, const ConvGeom& g, int block) {
  if (in == Layout::kPlain && g.in.size() == 2 && first_layer(g.c, g.m, g.group, block)) return blocked_layout(block);
  return in;
}

// Weights as ONNX stores them, in oneDNN's logical (groups, out, in, spatial) order.
// `channels_last`: rank-4 Conv weights stored [M, kh, kw, C/group] (a non-constant W the planner
// converted along with the activations).
memory::desc user_weights_md(const ConvGeom& g, bool transposed, bool channels_last = false) {
  memory::dims d;
  if (g.group > 1) d.push_back(g.group);
  d.push_back(g.m / g.group);
  d.push_back(g.c / g.group);
  for (int64_t k : g.k) d.push_back(k);
  if (channels_last) return g.group > 1 ? permuted_md(d, {0, 1, 3, 4, 2}) : permuted_md(d, {0, 2, 3, 1});
  if (!transposed) return plain_md(d);
  // ONNX ConvTranspose weights are [in, out/group, k...]: swap the out and in axes physically.
  std::vector<int> order(d.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const size_t o = g.group > 1 ? 1 : 0;
  std::swap(order[o], order[o + 1]);
  return permuted_md(d, order);
}

class ConvKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, bool transposed) {
    auto k = std::make_unique<ConvKernel>();
    k->who_ = args.node.describe();
    k->fused_ = args.node.domain == "streamline";
    k->block_ = !transposed && args.options.blocked() ? args.options.block() : 0;
    k->algo_ = args.options.conv_algorithm;
    SL_ASSIGN_OR_RETURN(k->attrs_, read_conv_attrs(args.node, transposed));
    if (k->fused_) {
      SL_ASSIGN_OR_RETURN(k->act_, parse_activation(args.node));
    }
    if (args.node.inputs.size() < 2) return invalid_argument(k->who_ + ": needs inputs X and W");
    k->x_scale_ = k->fused_ && args.node.attr_int("x_scale", 0) != 0;
    if (k->x_scale_ && (transposed || k->attrs_.group != 1))
      return invalid_argument(k->who_ + ": x_scale needs an ungrouped convolution");
    const size_t first_extra = graph::conv_epilogue_first_input(args.node);
    if (k->x_scale_ && (args.node.inputs.size() < first_extra || args.node.inputs[4] == graph::kNoValue))
      return invalid_argument(k->who_ + ": x_scale = 1 needs the scale as input 4");
    if (k->fused_ && !transposed) {
      SL_ASSIGN_OR_RETURN(k->epi_, EwEpilogue::create(args.node, first_extra));
    }
    const size_t max_inputs = k->fused_ ? first_extra : 3;
    if (k->epi_.empty() && args.node.inputs.size() > max_inputs)
      return invalid_argument(k->who_ + ": at most " + std::to_string(max_inputs) + " inputs");
    k->weights_const_ = args.constants.size() > 1 && args.constants[1] != nullptr;
    if (k->weights_const_) k->prepare_winograd(args);
    if (k->weights_const_ && !k->wino_.u) SL_RETURN_IF_ERROR(k->prepack(args));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override {
    return attrs_.transposed ? LayoutSupport::kPlainOnly : LayoutSupport::kPreferChannelsLast;
  }
  // On AVX-512 (16-channel blocks) oneDNN's NHWC convolutions run about as fast as its nChw16c ones
  // (depthwise ones up to 1.5x slower), so an input that arrives channels-last stays so: two
  // layout conversions around a convolution cost more than the difference.
  Layout preferred_layout(std::span<const TensorInfo> inputs, int block) const override {
    if (inputs.size() < 2 || inputs[0].shape.rank() != 4 || inputs[1].shape.rank() != 4 || !weights_const_)
      return Layout::kChannelsLast;
    const Shape& xs = inputs[0].shape;
    if (block == 16 && inputs[0].layout == Layout::kChannelsLast && xs[2] * xs[3] > 1) return Layout::kChannelsLast;
    return conv_layout(xs[1], inputs[1].shape[0], attrs_.group, block);
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() < 2 || !inputs[0].present() || !inputs[1].present())
      return invalid_argument(who_ + ": needs inputs X and W");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& in = inputs[i];
      const bool extra = !epi_.empty() && i >= epi_.first_input();  // epilogue operands may be masks
      if (in.present() && in.dtype != DType::kFloat32 && !(extra && in.dtype == DType::kBool))
        return unsupported(who_ + ": only float32 is supported, got " + dtype_name(in.dtype));
    }
    const TensorInfo& x = inputs[0];
    const TensorInfo& w = inputs[1];
    const bool w_cl = w.layout == Layout::kChannelsLast;
    if (w_cl && (w.shape.rank() != 4 || attrs_.transposed))
      return invalid_argument(who_ + ": channels-last weights must be rank 4");
    auto st = std::make_shared<ConvState>();
    SL_ASSIGN_OR_RETURN(st->geom, conv_geometry(who_, attrs_, x.shape, w.shape));
    const ConvGeom& g = st->geom;
    Layout layout = x.layout;
    if (layout != Layout::kPlain && (x.shape.rank() != 4 || attrs_.transposed))
      return invalid_argument(who_ + ": " + layout_name(layout) + " input must be rank 4");
    // An input of one pixel ([N, C, 1, 1]) has the same bytes in every layout, so the planner hands
    // it over in the layout it has; a blocked one whose output channels do not fill blocks (an SSD
    // head on its last 1x1 feature map) is read as channels-last.
    if (layout_block(layout) && g.m % layout_block(layout) != 0 && x.shape[2] * x.shape[3] == 1)
      layout = Layout::kChannelsLast;
    const int64_t blk = layout_block(layout);
    if (blk && (g.c % blk != 0 || g.m % blk != 0))
      return invalid_argument(who_ + ": " + layout_name(layout) + " needs input and output channels divisible by " +
                              std::to_string(blk));
    const Layout out_layout = weights_const_ ? conv_out_layout(layout, g, block_) : layout;
    st->x_layout = layout;
    if (x_scale_) SL_RETURN_IF_ERROR(check_scale(*st, inputs));
    st->has_bias = inputs.size() > 2 && inputs[2].present();
    if (st->has_bias && (inputs[2].shape.rank() != 1 || inputs[2].shape[0] != g.m))
      return invalid_argument(who_ + ": bias " + inputs[2].shape.to_string() + " must be [" + std::to_string(g.m) +
                              "]");
    st->has_z = inputs.size() > 3 && inputs[3].present() && (epi_.empty() || epi_.first_input() > 3);
    if (st->has_z && inputs[3].shape != g.y_shape)
      return invalid_argument(who_ + ": residual Z " + inputs[3].shape.to_string() + " must match output " +
                              g.y_shape.to_string());
    if (attrs_.transposed)
      for (size_t i = 0; i < g.in.size(); ++i)
        if (g.pad_l[i] < 0)
          return unsupported(who_ + ": output_shape larger than the natural output (negative leading padding)");
    if (patches_apply(g, layout)) {
      // Each input pixel owns its own kh x kw patch of the output: one matrix product per block
      // of rows and a scatter, no overlap to add up.
      st->patches = true;
      const int64_t row_floats = g.m * g.k[0] * g.k[1] * g.in[1];
      st->patch_rows = std::clamp<int64_t>(kPatchBytes / (4 * row_floats), 1, g.in[0]);
      ReshapeResult r;
      r.outputs.push_back(OutputInfo{DType::kFloat32, g.y_shape, layout});
      r.workspace_bytes = static_cast<size_t>(st->patch_rows * row_floats) * sizeof(float);
      r.state = std::move(st);
      return r;
    }
    describe(*st, layout, out_layout, w_cl);

    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, g.y_shape, out_layout});
    if (st->has_z && inputs[3].layout == r.outputs[0].layout) r.inplace = {3};
    const int nthr = current_omp_threads();
    const void* plain_w = w.value ? w.value->raw() : nullptr;
    // The algorithm: oneDNN's direct convolution as the shape is, along the long axis, or Winograd.
    const bool wino = !x_scale_ && winograd_applies(g, layout, out_layout);
    const bool long_axis = !w_cl && weights_const_ && !x_scale_ && long_axis_applies(g);
    // Winograd runs by its fixed rule (winograd_applies), never by a timing: it rounds differently
    // from the direct kernel, so a measured choice would make a model's results depend on how
    // loaded the machine was. A measured choice is only between algorithms of the same arithmetic
    // (direct, along the long axis, which needs Kx1 filters, so never meets Winograd's 3x3).
    const bool measured = algo_ == ConvAlgorithm::kMeasure;
    Algo algo = wino ? Algo::kWinograd : Algo::kDirect;
    if (algo_ == ConvAlgorithm::kLongAxis && long_axis) algo = Algo::kLongAxis;
    if (measured && weights_const_ && long_axis) {
      SL_ASSIGN_OR_RETURN(algo, measure(*st, /*wino=*/false, long_axis, layout, out_layout, nthr, plain_w));
    }
    if (algo == Algo::kLongAxis) {
      st->long_axis = true;
      describe(*st, layout, out_layout, w_cl);
    }
    if (!epi_.empty()) SL_RETURN_IF_ERROR(plan_epilogue(*st, inputs, out_layout, algo != Algo::kWinograd));
    if (algo == Algo::kWinograd) {
      st->winograd = true;
      st->wgeom = winograd_geometry(g);
      r.workspace_bytes = st->wgeom.workspace_bytes();
      r.state = std::move(st);
      return r;
    }

    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p,
                        st->cache.get(nthr, [&] { return build(*st, nthr, SIZE_MAX, plain_w); }));
    st->scratch_budget = p->scratchpad_bytes;
    // Workspace: the scratchpad, then weights reordered per run (non-constant, or scaled), then
    // X * S (a scale per image).
    size_t end = st->scratch_budget;
    if (!weights_const_ || (x_scale_ && !st->scale_per_image)) {
      st->w_offset = align_up(end);
      st->w_bytes = std::max(p->weights_md.get_size(), st->user_w_md.get_size());
      end = st->w_offset + st->w_bytes;
    }
    if (st->scale_per_image) {
      st->x_offset = align_up(end);
      end = st->x_offset + st->src_md.get_size();
    }
    r.workspace_bytes = end;
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const ConvState*>(ctx.state);
    if (!st) return internal_error(who_ + ": run without reshape state");
    const int nthr = std::max(1, ctx.num_threads);
    ensure_omp_threads(nthr);
    const Tensor& x = ctx.inputs[0];
    const Tensor& w = ctx.inputs[1];
    Tensor& y = ctx.outputs[0];
    // Both algorithms add the residual Z from y: copy it there unless the plan put Y in Z's buffer.
    if (st->has_z) {
      const Tensor& z = ctx.inputs[3];
      if (z.raw() != y.raw()) SL_RETURN_IF_ERROR(convert_layout(z, y, nthr).with_context(who_ + ": residual"));
    }
    if (st->patches) return run_patches(*st, ctx, nthr);
    if (st->winograd) {
      WinogradEpilogue e;
      e.bias = st->has_bias ? ctx.inputs[2].data<float>() : nullptr;
      e.accumulate = st->has_z;
      e.act = act_;
      SL_RETURN_IF_ERROR(
          winograd_conv(st->wgeom, wino_, x.data<float>(), y.data<float>(), e, ctx.workspace, nthr).with_context(who_));
      if (!epi_.empty()) epi_.run(st->epi, y.data<float>(), ctx.inputs, nthr);
      return ok_status();
    }
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p,
                        st->cache.get(nthr, [&] { return build(*st, nthr, st->scratch_budget, w.raw()); }));
    auto* ws = static_cast<uint8_t*>(ctx.workspace);
    const void* xptr = x.raw();
    const void* wptr = nullptr;
    if (st->x_scale && !st->scale_per_image) {
      SL_ASSIGN_OR_RETURN(wptr, scaled_weights(*st, *p, w.raw(), ctx.inputs[4].data<float>(), ws + st->w_offset));
    } else {
      SL_ASSIGN_OR_RETURN(wptr, run_weights(*p, st->user_w_md, w.raw(), packed_, ws + st->w_offset, st->w_bytes, who_));
    }
    if (st->scale_per_image) {
      float* scaled = reinterpret_cast<float*>(ws + st->x_offset);
      scale_channels(*st, x.data<float>(), ctx.inputs[4].data<float>(), scaled, nthr);
      xptr = scaled;
    }
    std::unordered_map<int, memory> args;
    try {
      args.emplace(DNNL_ARG_SRC, wrap(st->src_md, xptr));
      args.emplace(DNNL_ARG_WEIGHTS, wrap(p->weights_md, wptr));
      if (st->has_bias) args.emplace(DNNL_ARG_BIAS, wrap(st->bias_md, ctx.inputs[2].raw()));
      args.emplace(DNNL_ARG_DST, wrap(st->dst_md, y.raw()));
      if (st->epi.post_ops) epi_.add_args(args, st->epi, st->epi_post_op_base, ctx.inputs);
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who_);
    }
    SL_RETURN_IF_ERROR(execute(*p, args, ws).with_context(who_));
    if (!epi_.empty() && !st->epi.post_ops) epi_.run(st->epi, y.data<float>(), ctx.inputs, nthr);
    return ok_status();
  }

 private:
  enum class Algo { kDirect, kLongAxis, kWinograd };

  // Workspace for the products of run_patches: rows of the input per product are chosen so that
  // their columns stay about this size.
  static constexpr int64_t kPatchBytes = int64_t{4} << 20;

  // A plain 2-D ConvTranspose whose stride equals its kernel (no dilation, padding or extra output
  // size, one group): the 2x2 stride-2 upsampling of U-Nets, Mask R-CNN's mask head and text
  // detectors. oneDNN's deconvolution on plain NCHW runs such shapes at a third of the rate of one
  // matrix product.
  bool patches_apply(const ConvGeom& g, Layout layout) const {
    if (!attrs_.transposed || fused_ || x_scale_ || layout != Layout::kPlain || g.in.size() != 2 || g.group != 1)
      return false;
    for (size_t i = 0; i < 2; ++i)
      if (g.strides[i] != g.k[i] || g.dil[i] != 1 || g.pad_l[i] != 0 || g.pad_r[i] != 0 || g.out[i] != g.in[i] * g.k[i])
        return false;
    return true;
  }

  // Per image and block of input rows: Z[(co, i, j), pixel] = sum_ci W[ci, (co, i, j)] X[ci, pixel]
  // (W as ONNX stores it, [C, M * kh * kw]), then y[co, h * kh + i, w * kw + j] = Z + bias[co].
  Status run_patches(const ConvState& st, const RunContext& ctx, int nthr) const {
    const ConvGeom& g = st.geom;
    const int64_t h = g.in[0], w = g.in[1], kh = g.k[0], kw = g.k[1], oh = g.out[0], ow = g.out[1];
    const int64_t mk = g.m * kh * kw;
    const float* x = ctx.inputs[0].data<float>();
    const float* wt = ctx.inputs[1].data<float>();
    const float* bias = st.has_bias ? ctx.inputs[2].data<float>() : nullptr;
    float* y = ctx.outputs[0].data<float>();
    auto* z = static_cast<float*>(ctx.workspace);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t h0 = 0; h0 < h; h0 += st.patch_rows) {
        const int64_t rows = std::min(st.patch_rows, h - h0), cols = rows * w;
        const dnnl_status_t rc =
            dnnl_sgemm('T', 'N', mk, cols, g.c, 1.f, wt, mk, x + (n * g.c) * h * w + h0 * w, h * w, 0.f, z, cols);
        if (rc != dnnl_success)
          return internal_error(who_ + ": oneDNN sgemm failed (status " + std::to_string(rc) + ")");
#pragma omp parallel for num_threads(nthr) schedule(static)
        for (int64_t co = 0; co < g.m; ++co) {
          const float b = bias ? bias[co] : 0.f;
          float* yc = y + (n * g.m + co) * oh * ow;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < kh; ++i) {
              float* yrow = yc + ((h0 + r) * kh + i) * ow;
              for (int64_t j = 0; j < kw; ++j) {
                const float* zrow = z + ((co * kh + i) * kw + j) * cols + r * w;
                for (int64_t c = 0; c < w; ++c) yrow[c * kw + j] = zrow[c] + b;
              }
            }
        }
      }
    return ok_status();
  }

  // Checks the x_scale input S against X and notes whether it has a row per image.
  Status check_scale(ConvState& st, std::span<const TensorInfo> inputs) const {
    const ConvGeom& g = st.geom;
    if (inputs.size() < 5 || !inputs[4].present()) return invalid_argument(who_ + ": x_scale needs input 4");
    const Shape& s = inputs[4].shape;
    if (s.rank() != 4 || s[1] != g.c || s[2] != 1 || s[3] != 1 || (s[0] != 1 && s[0] != g.n) || g.in.size() != 2)
      return invalid_argument(who_ + ": x_scale input " + s.to_string() + " must be [1 or " + std::to_string(g.n) +
                              ", " + std::to_string(g.c) + ", 1, 1] for a 2-D input");
    const int64_t blk = layout_block(inputs[4].layout);
    if (blk && g.c % blk != 0)
      return invalid_argument(who_ + ": x_scale input in " + layout_name(inputs[4].layout) + " with " +
                              std::to_string(g.c) + " channels");
    st.x_scale = true;
    st.scale_per_image = s[0] > 1;
    return ok_status();
  }

  // The weights of p's layout with input channel c times scale[c], reordered into `dst`.
  Result<const void*> scaled_weights(const ConvState& st, const BuiltPrimitive& p, const void* plain_w,
                                     const float* scale, void* dst) const {
    if (!p.scaled_weights_reorder) return internal_error(who_ + ": no scaled weights reorder");
    try {
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_FROM, wrap(st.user_w_md, plain_w));
      args.emplace(DNNL_ARG_TO, memory(p.weights_md, cpu_engine(), dst));
      args.emplace(DNNL_ARG_ATTR_OUTPUT_SCALES, wrap(plain_md({st.geom.c}), scale));
      p.scaled_weights_reorder->execute(thread_stream(), args);
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who_ + ": scaled weights");
    }
    return static_cast<const void*>(dst);
  }

  // y = x * scale per image and channel, in x's layout (plain, channels-last or blocked).
  static void scale_channels(const ConvState& st, const float* x, const float* scale, float* y, int threads) {
    const ConvGeom& g = st.geom;
    const int64_t c = g.c, pixels = g.in[0] * g.in[1];
    const int64_t blk = layout_block(st.x_layout);
    // Rows of `len` floats with one scale each (plain: a channel's pixels) or a vector of scales
    // (channels-last: a pixel's channels; blocked: a block's pixels of `blk` lanes).
    const int64_t rows = st.x_layout == Layout::kChannelsLast ? g.n * pixels : blk ? g.n * (c / blk) : g.n * c;
    const int64_t len = st.x_layout == Layout::kChannelsLast ? c : blk ? pixels * blk : pixels;
    math::parallel_chunks(rows, std::max<int64_t>(1, math::kCheapGrain / len), threads, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* xr = x + r * len;
        float* yr = y + r * len;
        if (st.x_layout == Layout::kChannelsLast) {
          const float* sr = scale + (r / pixels) * c;
          for (int64_t i = 0; i < len; ++i) yr[i] = xr[i] * sr[i];
        } else if (blk) {
          const float* sr = scale + (r / (c / blk)) * c + (r % (c / blk)) * blk;
          for (int64_t p = 0; p < pixels; ++p)
            for (int64_t l = 0; l < blk; ++l) yr[p * blk + l] = xr[p * blk + l] * sr[l];
        } else {
          const float sv = scale[r];
          for (int64_t i = 0; i < len; ++i) yr[i] = xr[i] * sv;
        }
      }
    });
  }

  // oneDNN's descriptors of `st` for its geometry (st.prim: st.geom, its spatial axes exchanged
  // when st.long_axis) and layouts.
  void describe(ConvState& st, Layout layout, Layout out_layout, bool w_cl) const {
    st.prim = st.geom;
    if (st.long_axis)
      for (auto* v :
           {&st.prim.in, &st.prim.k, &st.prim.out, &st.prim.strides, &st.prim.dil, &st.prim.pad_l, &st.prim.pad_r})
        std::swap((*v)[0], (*v)[1]);
    st.src_md = activation_md(st.prim, layout, true);
    st.dst_md = activation_md(st.prim, out_layout, false);
    st.bias_md = st.has_bias ? plain_md({st.geom.m}) : memory::desc();
    st.user_w_md = user_weights_md(st.prim, attrs_.transposed, w_cl);
    st.any_w_md = memory::desc(st.user_w_md.dims(), memory::data_type::f32, memory::format_tag::any);
  }

  // A 2-D convolution that only runs down a width-1 tensor (Kx1 filters, nothing along W), as
  // 1-D convolutions are written for 2-D runtimes: [N, C, L, 1].
  bool long_axis_applies(const ConvGeom& g) const {
    return !attrs_.transposed && g.in.size() == 2 && g.in[1] == 1 && g.out[1] == 1 && g.k[1] == 1 && g.pad_l[1] == 0 &&
           g.pad_r[1] == 0 && g.in[0] > 1;
  }

  WinogradGeom winograd_geometry(const ConvGeom& g) const {
    WinogradGeom wg =
        winograd_geom(wino_.f, g.n, g.c, g.m, g.in[0], g.in[1], g.out[0], g.out[1], g.pad_l[0], g.pad_l[1]);
    wg.block = wino_.block;
    return wg;
  }

  // Times the candidates on scratch buffers (algo_choice.h) and returns the fastest.
  Result<Algo> measure(const ConvState& st, bool wino, bool long_axis, Layout layout, Layout out_layout, int nthr,
                       const void* plain_w) const {
    const ConvGeom& g = st.geom;
    std::vector<Algo> algos{Algo::kDirect};
    if (long_axis) algos.push_back(Algo::kLongAxis);
    if (wino) algos.push_back(Algo::kWinograd);
    auto x = AlignedBuffer::allocate(st.src_md.get_size());
    auto y = AlignedBuffer::allocate(st.dst_md.get_size());
    auto bias = AlignedBuffer::allocate(static_cast<size_t>(g.m) * sizeof(float));
    if (!x || !y || !bias) return resource_exhausted(who_ + ": out of memory measuring algorithms");
    std::memset(x->data(), 0, st.src_md.get_size());
    std::memset(bias->data(), 0, static_cast<size_t>(g.m) * sizeof(float));
    std::vector<std::shared_ptr<ConvState>> states;
    std::vector<std::shared_ptr<AlignedBuffer>> scratch;
    std::vector<std::function<void()>> runs;
    for (Algo a : algos) {
      if (a == Algo::kWinograd) {
        const WinogradGeom wg = winograd_geometry(g);
        auto ws = AlignedBuffer::allocate(wg.workspace_bytes());
        if (!ws) return resource_exhausted(who_ + ": out of memory measuring Winograd");
        scratch.push_back(ws);
        runs.push_back([this, wg, ws, &x, &y, &bias, nthr] {
          WinogradEpilogue e;
          e.bias = bias->as<float>();
          e.act = act_;
          (void)winograd_conv(wg, wino_, x->as<float>(), y->as<float>(), e, ws->data(), nthr);
        });
        continue;
      }
      auto cand = std::make_shared<ConvState>();
      cand->geom = st.geom;
      cand->has_bias = st.has_bias;
      cand->long_axis = a == Algo::kLongAxis;
      describe(*cand, layout, out_layout, false);
      SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p,
                          cand->cache.get(nthr, [&] { return build(*cand, nthr, SIZE_MAX, plain_w); }));
      auto ws = AlignedBuffer::allocate(std::max<size_t>(p->scratchpad_bytes, 64));
      if (!ws) return resource_exhausted(who_ + ": out of memory measuring convolutions");
      scratch.push_back(ws);
      states.push_back(cand);
      const void* wptr = p->weights_source == WeightsSource::kKernelPacked ? packed_.buf->data()
                         : p->packed_weights                               ? p->packed_weights->data()
                                                                           : plain_w;
      runs.push_back([cand, p, ws, wptr, &x, &y, &bias] {
        std::unordered_map<int, memory> args;
        args.emplace(DNNL_ARG_SRC, wrap(cand->src_md, x->data()));
        args.emplace(DNNL_ARG_WEIGHTS, wrap(p->weights_md, wptr));
        if (cand->has_bias) args.emplace(DNNL_ARG_BIAS, wrap(cand->bias_md, bias->data()));
        args.emplace(DNNL_ARG_DST, wrap(cand->dst_md, y->data()));
        (void)execute(*p, args, ws->data());
      });
    }
    std::string key = "conv " + std::to_string(g.n) + "x" + std::to_string(g.c) + "->" + std::to_string(g.m) + " g" +
                      std::to_string(g.group) + " " + layout_name(layout) + "/" + layout_name(out_layout) + " t" +
                      std::to_string(nthr);
    for (const auto* v : {&g.in, &g.k, &g.strides, &g.dil, &g.pad_l, &g.pad_r}) {
      key += " ";
      for (int64_t d : *v) key += std::to_string(d) + ",";
    }
    for (Algo a : algos) key += " " + std::to_string(static_cast<int>(a));
    OmpThreadsGuard guard(nthr);
    return algos[static_cast<size_t>(choose_by_time(key, runs))];
  }

  // Creates the primitive descriptor for `st` (weights in any layout) with `attr`.
  dnnl::primitive_desc make_pd(const ConvState& st, const dnnl::primitive_attr& attr) const {
    const ConvGeom& g = st.prim;
    memory::dims strides(g.strides.begin(), g.strides.end());
    memory::dims dil;
    for (int64_t d : g.dil) dil.push_back(d - 1);
    memory::dims pl(g.pad_l.begin(), g.pad_l.end());
    memory::dims pr;
    if (!attrs_.transposed) {
      pr.assign(g.pad_r.begin(), g.pad_r.end());
    } else {
      // oneDNN derives the output size from its right padding; output_padding shrinks it.
      for (size_t i = 0; i < g.in.size(); ++i)
        pr.push_back((g.in[i] - 1) * g.strides[i] + (g.k[i] - 1) * g.dil[i] + 1 - g.pad_l[i] - g.out[i]);
    }
    const auto& eng = cpu_engine();
    const auto prop = dnnl::prop_kind::forward_inference;
    if (!attrs_.transposed) {
      using Conv = dnnl::convolution_forward;
      const auto alg = dnnl::algorithm::convolution_direct;
      Conv::desc d = st.has_bias
                         ? Conv::desc(prop, alg, st.src_md, st.any_w_md, st.bias_md, st.dst_md, strides, dil, pl, pr)
                         : Conv::desc(prop, alg, st.src_md, st.any_w_md, st.dst_md, strides, dil, pl, pr);
      return Conv::primitive_desc(d, attr, eng);
    }
    using Deconv = dnnl::deconvolution_forward;
    const auto alg = dnnl::algorithm::deconvolution_direct;
    Deconv::desc d = st.has_bias
                         ? Deconv::desc(prop, alg, st.src_md, st.any_w_md, st.bias_md, st.dst_md, strides, dil, pl, pr)
                         : Deconv::desc(prop, alg, st.src_md, st.any_w_md, st.dst_md, strides, dil, pl, pr);
    return Deconv::primitive_desc(d, attr, eng);
  }

  // The post-ops of the conv itself (residual sum, activation), then the epilogue's.
  dnnl::post_ops post_ops(const ConvState& st) const {
    dnnl::post_ops po;
    if (st.has_z) po.append_sum(1.f);
    append_activation(po, act_);
    if (st.epi.post_ops) epi_.append(po, st.epi);
    return po;
  }

  // Decides how the elementwise epilogue runs for this shape: as post-ops when they map, the
  // primitive still is one of oneDNN's optimised ones with them (not its reference code), and
  // `post_ops_ok` (not Winograd); otherwise our loop over y after the convolution.
  Status plan_epilogue(ConvState& st, std::span<const TensorInfo> inputs, Layout out_layout, bool post_ops_ok) const {
    auto sp = epi_.plan(st.geom.y_shape, out_layout, st.dst_md, inputs, post_ops_ok);
    if (!sp.ok()) return sp.status().with_context(who_);
    st.epi = std::move(sp).value();
    dnnl::post_ops base;
    if (st.has_z) base.append_sum(1.f);
    append_activation(base, act_);
    st.epi_post_op_base = base.len();
    if (!st.epi.post_ops) return ok_status();
    bool fast = false;
    try {
      dnnl::primitive_attr attr;
      attr.set_post_ops(post_ops(st));
      const std::string impl = make_pd(st, attr).impl_info_str();
      fast = impl.find("ref") == std::string::npos;
    } catch (const dnnl::error&) {
      fast = false;
    }
    if (fast) return ok_status();
    SL_ASSIGN_OR_RETURN(st.epi, epi_.plan(st.geom.y_shape, out_layout, st.dst_md, inputs, false));
    return ok_status();
  }

  // Builds the primitive for `nthr` threads and decides where its weights come from. `plain_w`
  // holds the constant weights in ONNX layout when they are not prepacked yet.
  Result<std::unique_ptr<BuiltPrimitive>> build(const ConvState& st, int nthr, size_t budget,
                                                const void* plain_w) const {
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops(st));
    SL_ASSIGN_OR_RETURN(std::unique_ptr<BuiltPrimitive> p,
                        build_primitive(
                            nthr, budget, attr, [&](const dnnl::primitive_attr& a) { return make_pd(st, a); }, who_));
    // The copy packed at create has the unexchanged axes: a long-axis primitive packs from plain.
    SL_RETURN_IF_ERROR(resolve_weights(*p, nthr, st.user_w_md, weights_const_, st.long_axis ? PackedWeights{} : packed_,
                                       plain_w, who_));
    if (st.x_scale && !st.scale_per_image) {
      OmpThreadsGuard guard(nthr);
      try {
        dnnl::primitive_attr ra;
        ra.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});  // per input channel (dim 1 of OIHW)
        const auto& eng = cpu_engine();
        p->scaled_weights_reorder =
            dnnl::reorder(dnnl::reorder::primitive_desc(eng, st.user_w_md, eng, p->weights_md, ra));
      } catch (const dnnl::error& e) {
        return dnnl_error_status(e, who_ + ": scaled weights reorder");
      }
    }
    return p;
  }

  // Whether this 2-D convolution's filters suit Winograd F(2x2, 3x3): 3x3, stride 1, no dilation,
  // ungrouped, an activation the output transform applies.
  bool winograd_shape(const Shape& w) const {
    if (attrs_.transposed || attrs_.group != 1 || w.rank() != 4 || w[2] != 3 || w[3] != 3) return false;
    for (int64_t s : attrs_.strides)
      if (s != 1) return false;
    for (int64_t d : attrs_.dilations)
      if (d != 1) return false;
    return winograd_activation_ok(act_);
  }

  // Whether a reshape with these geometry and layouts runs the transformed filters.
  bool winograd_applies(const ConvGeom& g, Layout in, Layout out) const {
    return wino_.u && is_blocked(in) && out == in && layout_block(in) == wino_.block && g.in.size() == 2 &&
           g.c == wino_.c && g.m == wino_.m && g.k == std::vector<int64_t>{3, 3} &&
           g.strides == std::vector<int64_t>{1, 1} && g.dil == std::vector<int64_t>{1, 1} && g.group == 1 &&
           winograd_worthwhile(wino_.block, wino_.f, g.c, g.m, g.n, g.out[0], g.out[1]);
  }

  // Transforms the filters at create when the planner will give this convolution blocked activations
  // and the declared input size makes it a candidate (winograd_tile). Each reshape then runs
  // Winograd where it pays for that shape (winograd_worthwhile) and the direct primitive otherwise.
  // Not with an elementwise epilogue that has a post-op form (SiLU, HardSwish, GELU, a residual
  // added after the activation): the direct primitive applies it while its output is in
  // registers, Winograd in a second pass over y. On the YOLO-style detector (SiLU after every
  // convolution, one thread) that pass made Winograd 1.6x slower than the direct primitive at 32
  // channels and 80x80 and 1.2-1.35x at 64 channels and 40x40 or 20x20, and the model as a whole
  // slower than without Winograd.
  void prepare_winograd(const KernelCreateArgs& args) {
    const Tensor& w = *args.constants[1];
    if (!args.options.winograd || !args.options.blocked() || x_scale_) return;
    if (w.dtype() != DType::kFloat32 || !winograd_shape(w.shape())) return;
    if (epi_.has_post_ops()) return;
    const int64_t m = w.shape()[0], c = w.shape()[1];
    const int block = args.options.block();
    if (conv_layout(c, m, 1, block) != blocked_layout(block)) return;
    const graph::Value& xv = args.graph.value(args.node.inputs[0]);
    if (!xv.dims || xv.dims->size() != 4 || !(*xv.dims)[2].fixed() || !(*xv.dims)[3].fixed()) return;
    auto geom = conv_geometry(who_, attrs_, Shape{1, c, (*xv.dims)[2].value, (*xv.dims)[3].value}, w.shape());
    if (!geom.ok()) return;
    // F(4x4, 3x3) only where a fixed algorithm is asked for (kDirect, kLongAxis): it rounds about
    // twice as far from the exact result as F(2x2, 3x3), which rounds like the direct kernel
    // (InceptionV3 at 1.2e-4 of its output scale against PyTorch instead of under 1e-4).
    const int tile = winograd_tile(block, c, m, geom->out[0], geom->out[1]);
    const int f = tile == 4 && algo_ == ConvAlgorithm::kMeasure ? 2 : tile;
    // Transformed when a batch of two would use them.
    if (f == 0 || !winograd_worthwhile(block, f, c, m, 2, geom->out[0], geom->out[1])) return;
    wino_ = winograd_weights(w.data<float>(), m, c, f);
    wino_.block = block;
  }

  // Reorders constant weights into oneDNN's preferred layout for the input size the graph
  // declares (unknown batch counts as 1). Skipped when a spatial size is unknown.
  Status prepack(const KernelCreateArgs& args) {
    const Tensor& w = *args.constants[1];
    if (w.dtype() != DType::kFloat32) return ok_status();
    const graph::Value& xv = args.graph.value(args.node.inputs[0]);
    if (!xv.dims || xv.dims->size() != w.shape().rank()) return ok_status();
    Shape xs;
    for (size_t i = 0; i < xv.dims->size(); ++i) {
      const graph::Dim& d = (*xv.dims)[i];
      if (i == 0)
        xs.push_back(d.fixed() && d.value > 0 ? d.value : 1);
      else if (!d.fixed())
        return ok_status();
      else
        xs.push_back(d.value);
    }
    auto geom = conv_geometry(who_, attrs_, xs, w.shape());
    if (!geom.ok()) return ok_status();  // reshape reports the error with the real shapes
    ConvState st;
    st.geom = *geom;
    st.prim = *geom;
    // Pack for the layout the planner will give this convolution (see preferred_layout).
    Layout layout = Layout::kPlain;
    const int block = args.options.blocked_layout ? args.options.block() : 0;
    if (xs.rank() == 4 && !attrs_.transposed && args.options.channels_last)
      layout = conv_layout(st.geom.c, st.geom.m, attrs_.group, block);
    st.has_bias = args.node.inputs.size() > 2 && args.node.inputs[2] != graph::kNoValue;
    st.has_z = args.node.inputs.size() > 3 && args.node.inputs[3] != graph::kNoValue;
    st.src_md = activation_md(st.geom, layout, true);
    st.dst_md =
        activation_md(st.geom,
                      layout == Layout::kPlain && xs.rank() == 4 && !attrs_.transposed && args.options.channels_last
                          ? conv_out_layout(layout, st.geom, block)
                          : layout,
                      false);
    st.bias_md = st.has_bias ? plain_md({st.geom.m}) : memory::desc();
    st.user_w_md = user_weights_md(st.geom, attrs_.transposed);
    st.any_w_md = memory::desc(st.user_w_md.dims(), memory::data_type::f32, memory::format_tag::any);
    dnnl::primitive_desc pd;
    try {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      pd = make_pd(st, attr);
    } catch (const dnnl::error&) {
      return ok_status();  // reshape builds for the real shape and reports what oneDNN says
    }
    const memory::desc want = pd.weights_desc();
    if (want == st.user_w_md) return ok_status();
    SL_ASSIGN_OR_RETURN(packed_.buf, reorder_to_buffer(st.user_w_md, w.raw(), want));
    packed_.md = want;
    return ok_status();
  }

  std::string who_;
  bool fused_ = false;
  ConvAttrs attrs_;
  Activation act_;  // fused (streamline-domain) nodes only
  bool weights_const_ = false;
  bool x_scale_ = false;  // FusedConv x_scale: input 4 scales X's channels
  ConvAlgorithm algo_ = ConvAlgorithm::kMeasure;
  int block_ = 0;         // channels per block of blocked outputs allowed, 0: none (conv_out_layout)
  PackedWeights packed_;  // constant weights reordered at create, if any
  EwEpilogue epi_;        // FusedConv's elementwise epilogue (ew_* attributes), inputs 4..
  WinogradWeights wino_;  // transformed filters, when prepare_winograd chose Winograd
};

KernelDef conv_def(std::string op, std::string domain, bool transposed) {
  KernelDef d;
  d.op = std::move(op);
  d.domain = std::move(domain);
  d.since_version = 1;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "onednn";
  d.create = [transposed](const KernelCreateArgs& args) { return ConvKernel::create(args, transposed); };
  return d;
}

}  // namespace

Status register_conv(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(conv_def("Conv", "", false)));
  SL_RETURN_IF_ERROR(reg.add(conv_def("FusedConv", "streamline", false)));
  SL_RETURN_IF_ERROR(reg.add(conv_def("ConvTranspose", "", true)));
  return ok_status();
}

}  // namespace streamline::ops::cpu
