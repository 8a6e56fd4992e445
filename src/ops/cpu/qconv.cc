// QLinearConv, ConvInteger and streamline.QConv on oneDNN's int8 convolutions.
//
// A 2-D convolution whose weights, scales and output zero point are constants runs as one oneDNN
// primitive: uint8/int8 source with its zero point (a constant, or read every run), int8 weights (uint8 weights, or
// int8 ones with a zero point, are shifted to zero-point-free int8 at create when they fit), int32 bias, per-channel
// output scales, the destination zero point, the residual Z of streamline.QConv as a sum post-op (Y starts as a copy of
// Z, or shares Z's buffer) and the activation as eltwise post-ops (quant_onednn.h). Activations are channels-last
// (oneDNN's int8 kernels are built around NHWC); plain inputs work too. Every other case runs the plain loops of
// quant_linear.cc.
//
// Threads: on channels-last data with enough work, the output is cut into bands of rows (per
// image), one per thread, each a task for run_tasks (task_runner.h) running a single-thread
// primitive on its dense slice of the source and destination; the weights are packed once for all
// of them. A helper slow to wake leaves its band to the caller, where oneDNN's own threading
// (static split, barrier at the end) would wait for it. One band per thread, not several: every
// band is a primitive call of its own (a few microseconds) that reads all the weights again, and
// MobileNetV2 and ResNet-50 int8 ran 15-20% faster on two threads with two bands than with eight
// (a thread that loses its core for long is the thread choice's business: exec/thread_choice.h).
//
// CPUs without VNNI: oneDNN adds neighbouring u8 x s8 products in 16 bits, which saturates, and
// for a signed source it halves the weights, which rounds. Weights with any value above 64 in
// magnitude are split in two halves side by side along each group's input channels, read against
// the input copied twice the same way (twice the multiply-adds, exact sums), and an int8 input is
// copied as uint8 (x + 128, the zero point shifted alike). Depthwise weights stay as they are.
//
// Depthwise convolutions: oneDNN 2.6 picks its brdgmm kernel for an unsigned source without a
// zero point, which measured 3-4x slower here than its jit_int8 depthwise kernel, so the latter
// is taken when it is offered.

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <tuple>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/onednn_common.h"
#include "ops/cpu/quant_onednn.h"
#include "ops/cpu/task_runner.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

using dnnl::memory;

struct Geom2d {
  int64_t n = 0, c = 0, m = 0, h = 0, w = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  Shape y_shape() const { return Shape{n, m, oh, ow}; }
};

// One task of a banded run: output rows [o0, o1) of image n, reading input rows from i0 on,
// with primitive `prim` of its BandPlan.
struct Band {
  int64_t n = 0, o0 = 0, o1 = 0, i0 = 0;
  size_t prim = 0;
};

// Row bands of one convolution for one thread count: single-thread primitives on dense NHWC
// slices of the source and destination (a band of rows is contiguous in NHWC).
struct BandPlan {
  std::vector<Band> bands;
  std::vector<std::unique_ptr<BuiltPrimitive>> prims;
  std::vector<memory::desc> src_mds, dst_mds;  // per primitive
  size_t slot_scratch = 0;                     // scratchpad bytes per thread slot
};

struct QConvState {
  Geom2d g;
  memory::desc src_md, dst_md, bias_md;
  bool has_bias = false, has_z = false;
  bool channels_last = false;
  size_t scratch = 0;                // workspace bytes: the bands' scratchpads or the whole primitive's
  size_t x2_offset = 0;              // workspace offset of the doubled input (QConvKernel::doubled_)
  PrimitiveCache cache;              // whole-tensor primitives per thread count
  ThreadCountCache<BandPlan> bands;  // null entries: the count runs the whole primitive
};

// Multiply-adds below which a band is not worth a task (oneDNN's per-call cost is a few us).
constexpr double kMacsPerTask = 1e6;
// A depthwise multiply-add costs about this many of a dense one (it reuses nothing across
// channels: MobileNetV2's 144-channel 56x56 depthwise layer ran 140 us for 1.6M of them on one
// thread, its 1x1 layer beside it 110 us for 10.8M).
constexpr double kDepthwiseMacCost = 8;

class QConvKernel final : public Kernel {
 public:
  // The oneDNN kernel when the node qualifies (see the file comment), the plain one otherwise.
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, QOpKind kind) {
    auto k = std::make_unique<QConvKernel>();
    k->who_ = args.node.describe();
    k->kind_ = kind;
    k->s_ = conv_slots(kind);
    SL_ASSIGN_OR_RETURN(bool fast, k->prepare(args));
    if (!fast) return make_plain_qconv(args, kind);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kPreferChannelsLast; }
  Layout preferred_layout(std::span<const TensorInfo>, int) const override { return Layout::kChannelsLast; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (!slot_present(in, s_.x) || !slot_present(in, s_.w)) return invalid_argument(who_ + ": missing inputs");
    const TensorInfo& x = in[static_cast<size_t>(s_.x)];
    if (x.dtype != x_dtype_) return invalid_argument(who_ + ": input dtype " + dtype_name(x.dtype) + " changed");
    if (x.shape.rank() != 4) return invalid_argument(who_ + ": input must be rank 4, got " + x.shape.to_string());
    if (x.layout == Layout::kBlocked8) return invalid_argument(who_ + ": nChw8c input");
    auto st = std::make_shared<QConvState>();
    // With split weights the primitives read the input doubled along channels (see prepare).
    Shape xs = x.shape;
    if (doubled_) xs[1] *= 2;
    SL_ASSIGN_OR_RETURN(st->g, geometry(xs));
    const Geom2d& g = st->g;
    st->has_bias = slot_present(in, s_.bias);
    if (st->has_bias) {
      const TensorInfo& b = in[static_cast<size_t>(s_.bias)];
      if (b.dtype != DType::kInt32 || b.shape.numel() != g.m)
        return invalid_argument(who_ + ": bias must be int32 [" + std::to_string(g.m) + "]");
    }
    st->has_z = slot_present(in, s_.z);
    if (st->has_z) {
      const TensorInfo& z = in[static_cast<size_t>(s_.z)];
      if (z.shape != g.y_shape() || z.dtype != residual_->dtype)
        return invalid_argument(who_ + ": residual Z must be " + dtype_name(residual_->dtype) + " " +
                                g.y_shape().to_string());
      if (z.layout != x.layout) return invalid_argument(who_ + ": residual Z must have the input's layout");
    }
    const bool cl = x.layout == Layout::kChannelsLast;
    auto md = [&](int64_t ch, int64_t h, int64_t w, DType t) {
      return memory::desc({g.n, ch, h, w}, dnnl_dtype(t), cl ? memory::format_tag::nhwc : memory::format_tag::nchw);
    };
    st->src_md = md(g.c, g.h, g.w, shift_src_ ? DType::kUInt8 : x_dtype_);
    st->dst_md = md(g.m, g.oh, g.ow, out_.out);
    if (st->has_bias) st->bias_md = memory::desc({g.m}, memory::data_type::s32, memory::format_tag::a);
    st->channels_last = cl;
    const int nthr = current_omp_threads();
    SL_ASSIGN_OR_RETURN(const BandPlan* plan, st->bands.get(nthr, [&] { return plan_bands(*st, nthr, SIZE_MAX); }));
    if (plan) {
      st->scratch = plan->slot_scratch * static_cast<size_t>(nthr);
    } else {
      const int wt = whole_threads(*st, nthr);
      SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p, st->cache.get(wt, [&] { return build(*st, wt, SIZE_MAX); }));
      st->scratch = p->scratchpad_bytes;
    }
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{out_.out, g.y_shape(), x.layout});
    if (st->has_z) r.inplace = {s_.z};
    // A run-time zero point lives after the scratchpads, as int32; the doubled input after it.
    st->x2_offset = align_up(align_up(st->scratch) + (runtime_zp_ ? sizeof(int32_t) : 0));
    r.workspace_bytes =
        st->x2_offset +
        (doubled_ || shift_src_ ? static_cast<size_t>(g.n * g.c * g.h * g.w) * dtype_size(x_dtype_) : 0);
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const QConvState*>(ctx.state);
    if (!st) return internal_error(who_ + ": run without reshape state");
    const int nthr = std::max(1, ctx.num_threads);
    Tensor& y = ctx.outputs[0];
    const void* z = st->has_z ? ctx.inputs[static_cast<size_t>(s_.z)].raw() : nullptr;
    if (runtime_zp_)
      *reinterpret_cast<int32_t*>(static_cast<uint8_t*>(ctx.workspace) + align_up(st->scratch)) =
          static_cast<int32_t>(param_value(ctx.inputs[static_cast<size_t>(s_.x_zp)], 0)) + (shift_src_ ? 128 : 0);
    SL_ASSIGN_OR_RETURN(const BandPlan* plan,
                        st->bands.get(nthr, [&] { return plan_bands(*st, nthr, st->scratch / nthr); }));
    const void* x = ctx.inputs[static_cast<size_t>(s_.x)].raw();
    if (doubled_ || shift_src_) x = copy_input(*st, x, static_cast<uint8_t*>(ctx.workspace) + st->x2_offset);
    if (plan) return run_bands(*st, *plan, ctx, x, z, nthr);
    const int wt = whole_threads(*st, nthr);
    ensure_omp_threads(wt);
    if (z && z != y.raw()) std::memcpy(y.raw(), z, y.nbytes());
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p, st->cache.get(wt, [&] { return build(*st, wt, st->scratch); }));
    std::unordered_map<int, memory> args;
    try {
      args.emplace(DNNL_ARG_SRC, wrap(st->src_md, x));
      args.emplace(DNNL_ARG_WEIGHTS, wrap(p->weights_md, p->packed_weights->data()));
      if (st->has_bias) args.emplace(DNNL_ARG_BIAS, wrap(st->bias_md, ctx.inputs[static_cast<size_t>(s_.bias)].raw()));
      args.emplace(DNNL_ARG_DST, wrap(st->dst_md, y.raw()));
      if (runtime_zp_) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_arg(*st, ctx));
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who_);
    }
    return execute(*p, args, ctx.workspace).with_context(who_);
  }

 private:
  // Reads attributes and constants; false when the node needs the plain kernel.
  Result<bool> prepare(const KernelCreateArgs& a) {
    const graph::Node& node = a.node;
    auto constant = [&](int slot) -> const Tensor* {
      return slot >= 0 && static_cast<size_t>(slot) < a.constants.size() ? a.constants[static_cast<size_t>(slot)]
                                                                         : nullptr;
    };
    auto present = [&](int slot) {
      const size_t i = static_cast<size_t>(slot);
      return slot >= 0 && i < node.inputs.size() && node.inputs[i] != graph::kNoValue &&
             (i >= a.input_dtypes.size() || a.input_dtypes[i] != DType::kUndefined);
    };
    // Every parameter that is present must be a constant; the activation input must be 8-bit.
    for (int slot : {s_.x_scale, s_.w, s_.w_scale, s_.w_zp, s_.y_scale, s_.y_zp, s_.z_scale, s_.z_zp})
      if (present(slot) && !constant(slot)) return false;
    // The input's zero point may come at run time (DynamicQuantizeLinear before a ConvInteger).
    runtime_zp_ = present(s_.x_zp) && !constant(s_.x_zp);
    if (static_cast<size_t>(s_.x) >= a.input_dtypes.size()) return false;
    x_dtype_ = a.input_dtypes[static_cast<size_t>(s_.x)];
    if (!is_q8(x_dtype_)) return false;
    const Tensor* w = constant(s_.w);
    if (!w || w->shape().rank() != 4 || !is_q8(w->dtype())) return false;
    const Tensor* x_zp = constant(s_.x_zp);
    if (x_zp && x_zp->numel() != 1) return false;
    x_zp_ = x_zp ? static_cast<int32_t>(param_value(*x_zp, 0)) : 0;
    if (kind_ != QOpKind::kInteger && !present(s_.x_scale)) return false;
    if (present(s_.z) && !present(s_.z_scale)) return false;

    SL_ASSIGN_OR_RETURN(attrs_, read_conv_attrs(node, /*transposed=*/false));
    if (kind_ == QOpKind::kFused) {
      SL_ASSIGN_OR_RETURN(act_, read_activation(node, /*allow_gelu=*/true));
    }
    const Shape& ws = w->shape();
    m_ = ws[0];
    if (m_ % attrs_.group != 0) return false;  // the plain kernel reports it
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != std::vector<int64_t>{ws[2], ws[3]}) return false;

    // Weights without zero points, as int8.
    const Tensor* w_zp = constant(s_.w_zp);
    if (w_zp && w_zp->numel() != 1 && w_zp->numel() != m_) return false;
    w8_ = Tensor::empty(DType::kInt8, ws);
    const int64_t per = w->numel() / m_;
    for (int64_t o = 0; o < m_; ++o) {
      const int32_t zp = w_zp ? static_cast<int32_t>(param_value(*w_zp, o)) : 0;
      for (int64_t i = o * per; i < (o + 1) * per; ++i) {
        const int32_t v =
            (w->dtype() == DType::kInt8 ? w->data<int8_t>()[i] : static_cast<int32_t>(w->data<uint8_t>()[i])) - zp;
        if (v < -128 || v > 127) return false;
        w8_.data<int8_t>()[i] = static_cast<int8_t>(v);
      }
    }
    // Without VNNI, weights that could saturate oneDNN's 16-bit pair sums are split in halves of
    // at most 64 in magnitude, side by side along each group's input channels, and every run
    // reads the input twice the same way (see QConvKernel::doubled_). Depthwise kernels
    // accumulate in 32 bits and keep their weights.
    const int64_t cg = ws[1];
    if (!int8_products_exact() && cg > 1 && int8_may_saturate(w8_.data<int8_t>(), w8_.numel())) {
      // Each filter [C/g, kh, kw] becomes [hi; lo] along its input channels.
      Tensor split = Tensor::empty(DType::kInt8, Shape{m_, 2 * cg, ws[2], ws[3]});
      split_int8_halves(w8_.data<int8_t>(), m_, cg * ws[2] * ws[3], split.data<int8_t>());
      w8_ = std::move(split);
      doubled_ = true;
    }
    // Without VNNI an int8 input is copied as uint8 (x + 128, zero point + 128): for a signed
    // source oneDNN halves the weights instead, which rounds odd ones.
    if (!int8_products_exact() && x_dtype_ == DType::kInt8) {
      shift_src_ = true;
      x_zp_ += 128;
    }

    // Output stage.
    std::vector<double> acc_scales;
    DType out = DType::kInt32;
    double y_scale = 1.0;
    int32_t y_zp = 0;
    if (kind_ != QOpKind::kInteger) {
      const Tensor* xs = constant(s_.x_scale);
      const Tensor* wsc = constant(s_.w_scale);
      if (!wsc || (wsc->numel() != 1 && wsc->numel() != m_)) return false;
      for (int64_t o = 0; o < wsc->numel(); ++o) acc_scales.push_back(param_value(*xs, 0) * param_value(*wsc, o));
      out = DType::kFloat32;
      if (const Tensor* ys = constant(s_.y_scale)) {
        y_scale = param_value(*ys, 0);
        const Tensor* yz = constant(s_.y_zp);
        out = yz ? yz->dtype() : DType::kUInt8;
        y_zp = yz ? static_cast<int32_t>(param_value(*yz, 0)) : 0;
        if (!is_q8(out) || !(y_scale > 0.0)) return false;
      } else if (kind_ == QOpKind::kQLinear) {
        return false;
      }
      for (double s : acc_scales)
        if (!(s > 0.0) || !std::isfinite(s)) return false;
    }
    if (present(s_.z)) {
      if (!is_q8(out)) return false;  // a float output has no 8-bit buffer to sum into
      QResidual r;
      r.scale = static_cast<float>(param_value(*constant(s_.z_scale), 0));
      const Tensor* zz = constant(s_.z_zp);
      r.zp = zz ? static_cast<int32_t>(param_value(*zz, 0)) : 0;
      r.dtype = zz ? zz->dtype() : DType::kUInt8;
      residual_ = r;
    }
    out_ = output_stage(acc_scales, out, y_scale, y_zp, act_);
    const std::vector<float> clip = node.attr_floats("pre_residual_clip");
    if (clip.size() == 2) out_.pre_residual_clip = std::make_pair(clip[0], clip[1]);
    return true;
  }

  // The shared Conv shape function's geometry, in the 2-D form the int8 kernels take.
  Result<Geom2d> geometry(const Shape& x) const {
    SL_ASSIGN_OR_RETURN(ConvGeom cg, conv_geometry(who_, attrs_, x, w8_.shape()));
    Geom2d g;
    g.n = cg.n;
    g.c = cg.c;
    g.m = cg.m;
    g.h = cg.in[0];
    g.w = cg.in[1];
    g.kh = cg.k[0];
    g.kw = cg.k[1];
    g.sh = cg.strides[0];
    g.sw = cg.strides[1];
    g.dh = cg.dil[0];
    g.dw = cg.dil[1];
    g.pt = cg.pad_l[0];
    g.pl = cg.pad_l[1];
    g.pb = cg.pad_r[0];
    g.pr = cg.pad_r[1];
    g.oh = cg.out[0];
    g.ow = cg.out[1];
    return g;
  }

  // Row bands for `nthr` threads (see BandPlan), or null when this convolution runs as one
  // primitive: one thread, a plain layout, too little work, or band scratchpads larger than
  // `slot_budget` bytes each.
  // The run-time source zero point run() stored after the scratchpads, as oneDNN memory.
  memory zp_arg(const QConvState& st, const RunContext& ctx) const {
    return wrap(memory::desc({1}, memory::data_type::s32, memory::format_tag::a),
                static_cast<uint8_t*>(ctx.workspace) + align_up(st.scratch));
  }

  // One group per channel, as many outputs as inputs.
  bool depthwise(const Geom2d& g) const { return attrs_.group > 1 && attrs_.group == g.c && attrs_.group == g.m; }

  // How many bands `nthr` threads would cut this convolution into (below 2: none).
  int64_t band_tasks(const Geom2d& g, int nthr) const {
    const double macs = static_cast<double>(g.n * g.m * (g.c / attrs_.group) * g.kh * g.kw) *
                        static_cast<double>(g.oh * g.ow) * (depthwise(g) ? kDepthwiseMacCost : 1.0);
    return std::min<int64_t>({static_cast<int64_t>(nthr), static_cast<int64_t>(macs / kMacsPerTask), g.n * g.oh});
  }

  // Threads of the whole-tensor primitive: one when the work is too small to cut into bands
  // (a fork and join would cost more than it saves), else all.
  int whole_threads(const QConvState& st, int nthr) const {
    return st.channels_last && band_tasks(st.g, nthr) < 2 ? 1 : nthr;
  }

  Result<std::unique_ptr<BandPlan>> plan_bands(const QConvState& st, int nthr, size_t slot_budget) const {
    const Geom2d& g = st.g;
    const int64_t tasks = band_tasks(g, nthr);
    if (nthr < 2 || !st.channels_last || tasks < 2) return std::unique_ptr<BandPlan>();
    auto plan = std::make_unique<BandPlan>();
    const int64_t per_image = (tasks + g.n - 1) / g.n, rows = (g.oh + per_image - 1) / per_image;
    std::map<std::tuple<bool, bool, int64_t>, size_t> kinds;  // (top, bottom, rows) -> primitive
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t o0 = 0; o0 < g.oh; o0 += rows) {
        Band b;
        b.n = n;
        b.o0 = o0;
        b.o1 = std::min(g.oh, o0 + rows);
        const int64_t i0 = b.o0 * g.sh - g.pt, i1 = (b.o1 - 1) * g.sh - g.pt + (g.kh - 1) * g.dh + 1;
        b.i0 = std::max<int64_t>(0, i0);
        const auto key = std::make_tuple(b.o0 == 0, b.o1 == g.oh, b.o1 - b.o0);
        auto it = kinds.find(key);
        if (it == kinds.end()) {
          // This band as a convolution of its own: its input rows, the padding it touches.
          QConvState band;
          band.g = g;
          band.g.n = 1;
          band.g.h = std::min(g.h, i1) - b.i0;
          band.g.oh = b.o1 - b.o0;
          band.g.pt = b.i0 - i0;
          band.g.pb = std::max<int64_t>(0, i1 - g.h);
          band.has_bias = st.has_bias;
          band.bias_md = st.bias_md;
          band.src_md = memory::desc({1, g.c, band.g.h, g.w}, st.src_md.data_type(), memory::format_tag::nhwc);
          band.dst_md = memory::desc({1, g.m, band.g.oh, g.ow}, st.dst_md.data_type(), memory::format_tag::nhwc);
          SL_ASSIGN_OR_RETURN(std::unique_ptr<BuiltPrimitive> p, build(band, 1, slot_budget));
          if (!p->user_scratchpad) return std::unique_ptr<BandPlan>();  // concurrent runs need own scratch
          plan->slot_scratch = std::max(plan->slot_scratch, align_up(p->scratchpad_bytes));
          it = kinds.emplace(key, plan->prims.size()).first;
          plan->prims.push_back(std::move(p));
          plan->src_mds.push_back(band.src_md);
          plan->dst_mds.push_back(band.dst_md);
        }
        b.prim = it->second;
        plan->bands.push_back(b);
      }
    return plan;
  }

  // The input as the primitives read it: each group's channels twice in a row for split weights
  // (see prepare; `g.c` is already the doubled count), shifted to uint8 with shift_src_.
  // Returns `out`.
  const void* copy_input(const QConvState& st, const void* in, uint8_t* out) const {
    const Geom2d& g = st.g;
    const size_t e = dtype_size(x_dtype_);
    const auto* src = static_cast<const uint8_t*>(in);
    if (!doubled_) {
      copy_run(out, src, static_cast<size_t>(g.n * g.c * g.h * g.w) * e);
      return out;
    }
    // Runs of one group's channels (channels-last: per pixel) or planes (plain: per image), each
    // written twice: [group 0, group 0, group 1, group 1, ...].
    const int64_t cg = g.c / 2 / attrs_.group;
    const size_t run = static_cast<size_t>(st.channels_last ? cg : cg * g.h * g.w) * e;
    const int64_t runs = (st.channels_last ? g.n * g.h * g.w : g.n) * attrs_.group;
    for (int64_t i = 0; i < runs; ++i) {
      const uint8_t* from = src + static_cast<size_t>(i) * run;
      uint8_t* to = out + static_cast<size_t>(i) * 2 * run;
      copy_run(to, from, run);
      copy_run(to + run, from, run);
    }
    return out;
  }

  // n bytes of the input, shifted from int8 to uint8 (flipping the sign bit adds 128) with shift_src_.
  void copy_run(uint8_t* to, const uint8_t* from, size_t n) const {
    if (!shift_src_) {
      std::memcpy(to, from, n);
      return;
    }
    for (size_t i = 0; i < n; ++i) to[i] = static_cast<uint8_t>(from[i] ^ 0x80u);
  }

  Status run_bands(const QConvState& st, const BandPlan& plan, const RunContext& ctx, const void* xin, const void* z,
                   int nthr) const {
    const Geom2d& g = st.g;
    const auto* x = static_cast<const uint8_t*>(xin);
    auto* y = static_cast<uint8_t*>(ctx.outputs[0].raw());
    const void* bias = st.has_bias ? ctx.inputs[static_cast<size_t>(s_.bias)].raw() : nullptr;
    const size_t x_row = static_cast<size_t>(g.w * g.c), y_row = static_cast<size_t>(g.ow * g.m) * dtype_size(out_.out);
    std::vector<Status> status(plan.bands.size());
    run_tasks(static_cast<int64_t>(plan.bands.size()), nthr, [&](int64_t t, int slot) {
      const Band& b = plan.bands[static_cast<size_t>(t)];
      const BuiltPrimitive& p = *plan.prims[b.prim];
      uint8_t* yb = y + static_cast<size_t>(b.n * g.oh + b.o0) * y_row;
      if (z && z != y)
        std::memcpy(yb, static_cast<const uint8_t*>(z) + (yb - y), static_cast<size_t>(b.o1 - b.o0) * y_row);
      std::unordered_map<int, memory> args;
      try {
        args.emplace(DNNL_ARG_SRC, wrap(plan.src_mds[b.prim], x + static_cast<size_t>(b.n * g.h + b.i0) * x_row));
        args.emplace(DNNL_ARG_WEIGHTS, wrap(p.weights_md, p.packed_weights->data()));
        if (bias) args.emplace(DNNL_ARG_BIAS, wrap(st.bias_md, bias));
        args.emplace(DNNL_ARG_DST, wrap(plan.dst_mds[b.prim], yb));
        if (runtime_zp_) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_arg(st, ctx));
      } catch (const dnnl::error& e) {
        status[static_cast<size_t>(t)] = dnnl_error_status(e, who_);
        return;
      }
      status[static_cast<size_t>(t)] =
          execute(p, args, static_cast<uint8_t*>(ctx.workspace) + plan.slot_scratch * static_cast<size_t>(slot));
    });
    for (const Status& s : status) SL_RETURN_IF_ERROR(s.with_context(who_));
    return ok_status();
  }

  Result<std::unique_ptr<BuiltPrimitive>> build(const QConvState& st, int nthr, size_t budget) const {
    const Geom2d& g = st.g;
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (!out_.scales.empty()) out_.apply(attr, po, residual_, 1 << 1);
    if (runtime_zp_)
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    else if (x_zp_ != 0)
      attr.set_zero_points(DNNL_ARG_SRC, 0, {x_zp_});
    attr.set_post_ops(po);
    memory::dims wd = attrs_.group > 1 ? memory::dims{attrs_.group, g.m / attrs_.group, g.c / attrs_.group, g.kh, g.kw}
                                       : memory::dims{g.m, g.c, g.kh, g.kw};
    const memory::desc any_w(wd, memory::data_type::s8, memory::format_tag::any);
    const bool one_per_channel = depthwise(g);
    auto make_pd = [&](const dnnl::primitive_attr& at) {
      using Conv = dnnl::convolution_forward;
      const memory::dims strides{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pl{g.pt, g.pl}, pr{g.pb, g.pr};
      const auto prop = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      Conv::desc d = st.has_bias ? Conv::desc(prop, alg, st.src_md, any_w, st.bias_md, st.dst_md, strides, dil, pl, pr)
                                 : Conv::desc(prop, alg, st.src_md, any_w, st.dst_md, strides, dil, pl, pr);
      Conv::primitive_desc pd(d, at, cpu_engine());
      if (one_per_channel) {
        Conv::primitive_desc first = pd;
        do {
          if (std::strncmp(pd.impl_info_str(), "brdgmm", 6) != 0) return pd;
        } while (pd.next_impl());
        return first;
      }
      return pd;
    };
    SL_ASSIGN_OR_RETURN(std::unique_ptr<BuiltPrimitive> p, build_primitive(nthr, budget, attr, make_pd, who_));
    const memory::desc user_w(wd, memory::data_type::s8,
                              attrs_.group > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
    OmpThreadsGuard guard(nthr);
    SL_ASSIGN_OR_RETURN(p->packed_weights, packs_.get(p->weights_md, user_w, w8_.raw()));
    p->weights_source = WeightsSource::kBuiltPacked;
    return p;
  }

  std::string who_;
  QOpKind kind_ = QOpKind::kQLinear;
  QSlots s_;
  DType x_dtype_ = DType::kUInt8;
  int32_t x_zp_ = 0;
  bool runtime_zp_ = false;  // x_zp_ is read from the input every run (see zp_arg)
  int64_t m_ = 0;
  ConvAttrs attrs_;
  ActivationAttrs act_;
  Tensor w8_;               // int8 weights without zero points, ONNX layout ([M, 2C/g, kh, kw] when split)
  bool doubled_ = false;    // weights split in halves along each group's input channels (see prepare)
  bool shift_src_ = false;  // an int8 input copied as uint8 without VNNI (x_zp_ includes the shift)
  WeightPacks packs_;       // w8_ in the layouts the primitives want
  QOutputStage out_;
  std::optional<QResidual> residual_;
};

KernelDef qconv_def(const char* op, const char* domain, int since, QOpKind kind) {
  KernelDef d;
  d.op = op;
  d.domain = domain;
  d.since_version = since;
  d.device = Device::kCpu;
  d.dtype = DType::kUndefined;
  d.provider = "onednn";
  d.create = [kind](const KernelCreateArgs& args) { return QConvKernel::create(args, kind); };
  return d;
}

}  // namespace

Status register_qconv(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(qconv_def("QLinearConv", "", 10, QOpKind::kQLinear)));
  SL_RETURN_IF_ERROR(reg.add(qconv_def("ConvInteger", "", 10, QOpKind::kInteger)));
  return reg.add(qconv_def("QConv", "streamline", 1, QOpKind::kFused));
}

}  // namespace streamline::ops::cpu
