// QLinearMatMul, MatMulInteger, streamline.QMatMul and streamline.MatMulIntegerToFloat on oneDNN's
// int8 matmul.
//
// A product whose B is a constant 2-D matrix runs as one primitive over all rows of A (A of any
// rank; its leading dimensions are rows): uint8/int8 A with a per-tensor zero point (a constant
// in the primitive, or read at run time: DynamicQuantizeLinear computes it per run), B as int8
// without zero point (shifted at create like qconv.cc's weights) prepacked in oneDNN's layout,
// int32 bias, per-column output scales, the destination zero point and the activation
// (quant_onednn.h). MatMulIntegerToFloat's A scale changes every run, so the output scales hold
// only B's scale and a binary post-op multiplies by A's scale (a run-time [1, 1] tensor); its
// float bias follows as a binary add. Everything else runs the plain loops of quant_linear.cc.
//
// CPUs without VNNI: oneDNN adds neighbouring u8 x s8 products in 16 bits, which saturates for
// weights whose neighbours' magnitudes add past 128. A B with any weight above 64 in magnitude is
// split into two halves of at most 64 stacked along K, and A is read twice side by side
// ([A, A] x [B1; B2] = A x B): twice the multiply-adds, exact sums.
//
// Threads: a small product runs on one thread. When B is the larger operand (a transformer's
// projections at batch 1: 128 rows of A against a 768 x 3072 B) one primitive runs on all threads
// and oneDNN splits it, reading B once; row bands would each read all of B. Otherwise, with enough
// rows and work, bands of rows are tasks for run_tasks (task_runner.h), each a single-thread
// primitive on its slice of A and Y sharing one packed B.

#include <algorithm>
#include <climits>
#include <cstring>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/onednn_common.h"
#include "ops/cpu/quant_onednn.h"
#include "ops/cpu/task_runner.h"

namespace streamline::ops::cpu {
namespace {

using dnnl::memory;

// Row bands of one product for one thread count: single-thread primitives on [rows, K] slices.
struct RowBands {
  int64_t rows = 0;  // per band (the last may have fewer)
  std::unique_ptr<BuiltPrimitive> full, last;
  memory::desc a_full, y_full, a_last, y_last;
  size_t slot_scratch = 0;
};

struct QMatMulState {
  memory::desc a_md, y_md, bias_md, scale_md;
  int64_t rows = 0;
  Shape y_shape;
  bool has_bias = false;
  size_t scratch = 0;    // scratchpad bytes (the bands' for all slots, or the whole primitive's)
  size_t zp_offset = 0;  // workspace offset of the run-time A zero point (int32)
  size_t a2_offset = 0;  // workspace offset of [A, A] when B is split (QMatMulKernel::doubled_)
  PrimitiveCache cache;
  ThreadCountCache<RowBands> bands;  // null entries: the count runs one primitive
};

// Multiply-adds below which a band is not worth a task, and the fewest rows a band gets.
constexpr double kMacsPerTask = 4e6;
constexpr int64_t kMinBandRows = 16;

class QMatMulKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, QOpKind kind) {
    auto k = std::make_unique<QMatMulKernel>();
    k->who_ = args.node.describe();
    k->kind_ = kind;
    k->s_ = matmul_slots(kind);
    SL_ASSIGN_OR_RETURN(bool fast, k->prepare(args));
    if (!fast) return make_plain_qmatmul(args, kind);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (!slot_present(in, s_.x) || !slot_present(in, s_.w)) return invalid_argument(who_ + ": missing A or B");
    const TensorInfo& a = in[static_cast<size_t>(s_.x)];
    if (a.dtype != a_dtype_) return invalid_argument(who_ + ": A dtype " + dtype_name(a.dtype) + " changed");
    if (a.layout != Layout::kPlain) return invalid_argument(who_ + ": A must be plain");
    if (a.shape.rank() < 1 || a.shape[a.shape.rank() - 1] != k_)
      return invalid_argument(who_ + ": A " + a.shape.to_string() + " does not match B [" + std::to_string(k_) + ", " +
                              std::to_string(n_) + "]");
    if (runtime_zp_) {
      const TensorInfo& z = in[static_cast<size_t>(s_.x_zp)];
      if (z.shape.numel() != 1 || z.dtype != a_dtype_)
        return invalid_argument(who_ + ": A's zero point must be one " + dtype_name(a_dtype_) + " value");
    }
    if (runtime_scale_ && in[static_cast<size_t>(s_.x_scale)].shape.numel() != 1)
      return invalid_argument(who_ + ": A's scale must be one value");
    auto st = std::make_shared<QMatMulState>();
    st->rows = a.shape.numel() / k_;
    st->y_shape = Shape(std::span<const int64_t>(a.shape.data(), a.shape.rank() - 1));
    st->y_shape.push_back(n_);
    st->has_bias = slot_present(in, s_.bias);
    if (st->has_bias) {
      const TensorInfo& b = in[static_cast<size_t>(s_.bias)];
      if (b.shape.numel() != n_ || b.dtype != bias_dtype())
        return invalid_argument(who_ + ": bias must be " + dtype_name(bias_dtype()) + " [" + std::to_string(n_) + "]");
      st->bias_md = memory::desc({1, n_}, dnnl_dtype(bias_dtype()), memory::format_tag::ab);
    }
    st->a_md = memory::desc({st->rows, pk()}, dnnl_dtype(a_dtype_), memory::format_tag::ab);
    st->y_md = memory::desc({st->rows, n_}, dnnl_dtype(out_.out), memory::format_tag::ab);
    st->scale_md = memory::desc({1, 1}, memory::data_type::f32, memory::format_tag::ab);
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{out_.out, st->y_shape, Layout::kPlain});
    if (st->rows == 0) return r;
    const int nthr = current_omp_threads();
    SL_ASSIGN_OR_RETURN(const RowBands* bands, st->bands.get(nthr, [&] { return plan_bands(*st, nthr, SIZE_MAX); }));
    if (bands) {
      st->scratch = bands->slot_scratch * static_cast<size_t>(nthr);
    } else {
      const int wt = whole_threads(*st, nthr);
      SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p, st->cache.get(wt, [&] { return build(*st, wt, SIZE_MAX); }));
      st->scratch = p->scratchpad_bytes;
    }
    st->zp_offset = align_up(st->scratch);
    st->a2_offset = align_up(st->zp_offset + (runtime_zp_ ? sizeof(int32_t) : 0));
    r.workspace_bytes =
        st->a2_offset + (doubled_ ? static_cast<size_t>(st->rows * pk()) * dtype_size(a_dtype_) : size_t{0});
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const QMatMulState*>(ctx.state);
    if (!st) return ctx.outputs[0].numel() == 0 ? ok_status() : internal_error(who_ + ": run without reshape state");
    const int nthr = std::max(1, ctx.num_threads);
    auto* ws = static_cast<uint8_t*>(ctx.workspace);
    if (runtime_zp_)
      *reinterpret_cast<int32_t*>(ws + st->zp_offset) =
          static_cast<int32_t>(param_value(ctx.inputs[static_cast<size_t>(s_.x_zp)], 0));
    SL_ASSIGN_OR_RETURN(const RowBands* bands,
                        st->bands.get(nthr, [&] { return plan_bands(*st, nthr, st->scratch / nthr); }));
    const auto* a = static_cast<const uint8_t*>(ctx.inputs[static_cast<size_t>(s_.x)].raw());
    if (doubled_) {
      // [A, A]: each row of A twice, for the split weights (see prepare).
      const size_t row = static_cast<size_t>(k_) * dtype_size(a_dtype_);
      uint8_t* a2 = ws + st->a2_offset;
      for (int64_t r = 0; r < st->rows; ++r) {
        std::memcpy(a2 + 2 * row * static_cast<size_t>(r), a + row * static_cast<size_t>(r), row);
        std::memcpy(a2 + 2 * row * static_cast<size_t>(r) + row, a + row * static_cast<size_t>(r), row);
      }
      a = a2;
    }
    auto* y = static_cast<uint8_t*>(ctx.outputs[0].raw());
    if (bands) {
      const int64_t tasks = (st->rows + bands->rows - 1) / bands->rows;
      const size_t a_row = static_cast<size_t>(pk()) * dtype_size(a_dtype_);
      const size_t y_row = static_cast<size_t>(n_) * dtype_size(out_.out);
      std::vector<Status> status(static_cast<size_t>(tasks));
      run_tasks(tasks, nthr, [&](int64_t t, int slot) {
        const bool last = t + 1 == tasks && st->rows % bands->rows != 0;
        const size_t r0 = static_cast<size_t>(t * bands->rows);
        status[static_cast<size_t>(t)] =
            execute_on(*st, last ? *bands->last : *bands->full, last ? bands->a_last : bands->a_full,
                       last ? bands->y_last : bands->y_full, a + r0 * a_row, y + r0 * y_row, ctx,
                       ws + bands->slot_scratch * static_cast<size_t>(slot), ws);
      });
      for (const Status& s : status) SL_RETURN_IF_ERROR(s);
      return ok_status();
    }
    const int wt = whole_threads(*st, nthr);
    ensure_omp_threads(wt);
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p, st->cache.get(wt, [&] { return build(*st, wt, st->scratch); }));
    return execute_on(*st, *p, st->a_md, st->y_md, a, y, ctx, ws, ws);
  }

 private:
  // Whether B is the larger operand (see the file comment): then no row bands.
  bool b_larger(const QMatMulState& st) const { return n_ > st.rows; }
  // How many tasks of kMacsPerTask the product holds, at most 4 per thread.
  int64_t work_tasks(const QMatMulState& st, int nthr) const {
    const double macs = static_cast<double>(st.rows) * static_cast<double>(k_ * n_);
    return std::min<int64_t>(4 * static_cast<int64_t>(nthr), static_cast<int64_t>(macs / kMacsPerTask));
  }
  // How many row bands `nthr` threads would cut this product into (below 2: none).
  int64_t band_tasks(const QMatMulState& st, int nthr) const {
    if (b_larger(st)) return 0;
    return std::min<int64_t>(work_tasks(st, nthr), st.rows / kMinBandRows);
  }
  // Threads of the one primitive when there are no bands.
  int whole_threads(const QMatMulState& st, int nthr) const {
    if (b_larger(st)) return work_tasks(st, nthr) < 2 ? 1 : nthr;
    return band_tasks(st, nthr) < 2 ? 1 : nthr;
  }

  // Row bands for `nthr` threads, or null (one thread, too little work, or a band scratchpad
  // above `slot_budget`).
  Result<std::unique_ptr<RowBands>> plan_bands(const QMatMulState& st, int nthr, size_t slot_budget) const {
    const int64_t tasks = band_tasks(st, nthr);
    if (nthr < 2 || tasks < 2) return std::unique_ptr<RowBands>();
    auto b = std::make_unique<RowBands>();
    b->rows = (st.rows + tasks - 1) / tasks;
    auto one = [&](int64_t rows, memory::desc* a_md, memory::desc* y_md) -> Result<std::unique_ptr<BuiltPrimitive>> {
      QMatMulState band;
      band.rows = rows;
      band.has_bias = st.has_bias;
      band.bias_md = st.bias_md;
      band.scale_md = st.scale_md;
      band.a_md = *a_md = memory::desc({rows, pk()}, st.a_md.data_type(), memory::format_tag::ab);
      band.y_md = *y_md = memory::desc({rows, n_}, st.y_md.data_type(), memory::format_tag::ab);
      return build(band, 1, slot_budget);
    };
    SL_ASSIGN_OR_RETURN(b->full, one(b->rows, &b->a_full, &b->y_full));
    if (st.rows % b->rows != 0) {
      SL_ASSIGN_OR_RETURN(b->last, one(st.rows % b->rows, &b->a_last, &b->y_last));
    }
    for (const BuiltPrimitive* p : {b->full.get(), b->last.get()}) {
      if (!p) continue;
      if (!p->user_scratchpad) return std::unique_ptr<RowBands>();  // concurrent runs need own scratch
      b->slot_scratch = std::max(b->slot_scratch, align_up(p->scratchpad_bytes));
    }
    return b;
  }

  // Runs `p` on A rows at `a` into Y rows at `y`; `scratch` is its scratchpad, `ws` the workspace
  // holding the run-time zero point.
  Status execute_on(const QMatMulState& st, const BuiltPrimitive& p, const memory::desc& a_md, const memory::desc& y_md,
                    const void* a, void* y, const RunContext& ctx, void* scratch, uint8_t* ws) const {
    std::unordered_map<int, memory> args;
    try {
      args.emplace(DNNL_ARG_SRC, wrap(a_md, a));
      args.emplace(DNNL_ARG_WEIGHTS, wrap(p.weights_md, p.packed_weights->data()));
      args.emplace(DNNL_ARG_DST, wrap(y_md, y));
      int post = 0;
      if (runtime_scale_)
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(post++) | DNNL_ARG_SRC_1,
                     wrap(st.scale_md, ctx.inputs[static_cast<size_t>(s_.x_scale)].raw()));
      if (st.has_bias) {
        const void* b = ctx.inputs[static_cast<size_t>(s_.bias)].raw();
        if (float_bias())
          args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(post++) | DNNL_ARG_SRC_1, wrap(st.bias_md, b));
        else
          args.emplace(DNNL_ARG_BIAS, wrap(st.bias_md, b));
      }
      if (runtime_zp_)
        args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
                     wrap(memory::desc({1}, memory::data_type::s32, memory::format_tag::a), ws + st.zp_offset));
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who_);
    }
    return execute(p, args, scratch).with_context(who_);
  }

  // MatMulIntegerToFloat's bias is float32 and added after scaling; QMatMul's is int32, added to
  // the accumulator.
  bool float_bias() const { return kind_ == QOpKind::kToFloat; }
  DType bias_dtype() const { return float_bias() ? DType::kFloat32 : DType::kInt32; }

  // Reads constants; false when the node needs the plain kernel.
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
    if (static_cast<size_t>(s_.x) >= a.input_dtypes.size()) return false;
    a_dtype_ = a.input_dtypes[static_cast<size_t>(s_.x)];
    if (!is_q8(a_dtype_)) return false;
    // B, its scale and zero point, and the output's parameters must be constants.
    for (int slot : {s_.w, s_.w_scale, s_.w_zp, s_.y_scale, s_.y_zp})
      if (present(slot) && !constant(slot)) return false;
    const Tensor* b = constant(s_.w);
    if (!b || b->shape().rank() != 2 || !is_q8(b->dtype())) return false;
    k_ = b->shape()[0];
    n_ = b->shape()[1];
    if (k_ == 0 || n_ == 0) return false;
    // A's zero point: constant, or one value read every run.
    if (present(s_.x_zp)) {
      if (const Tensor* z = constant(s_.x_zp)) {
        if (z->numel() != 1) return false;
        a_zp_ = static_cast<int32_t>(param_value(*z, 0));
      } else {
        runtime_zp_ = true;
      }
    }
    if (kind_ == QOpKind::kFused || kind_ == QOpKind::kToFloat) {
      SL_ASSIGN_OR_RETURN(act_, read_activation(node, /*allow_gelu=*/true));
    }

    // B without zero points, as int8 [K, N].
    const Tensor* b_zp = constant(s_.w_zp);
    if (b_zp && b_zp->numel() != 1 && b_zp->numel() != n_) return false;
    b8_ = Tensor::empty(DType::kInt8, b->shape());
    for (int64_t i = 0; i < b->numel(); ++i) {
      const int32_t zp = b_zp ? static_cast<int32_t>(param_value(*b_zp, i % n_)) : 0;
      const int32_t v =
          (b->dtype() == DType::kInt8 ? b->data<int8_t>()[i] : static_cast<int32_t>(b->data<uint8_t>()[i])) - zp;
      if (v < -128 || v > 127) return false;
      b8_.data<int8_t>()[i] = static_cast<int8_t>(v);
    }
    // Without VNNI, weights that could saturate oneDNN's 16-bit pair sums are split in halves of
    // at most 64 in magnitude, stacked along K: [A, A] x [B1; B2] = A x B with B = B1 + B2, and
    // no pair of products can exceed 255 * 128. A is copied twice side by side every run.
    if (!int8_products_exact() && int8_may_saturate(b8_.data<int8_t>(), b8_.numel())) {
      Tensor split = Tensor::empty(DType::kInt8, Shape{2 * k_, n_});
      split_int8_halves(b8_.data<int8_t>(), 1, k_ * n_, split.data<int8_t>());
      b8_ = std::move(split);
      doubled_ = true;
    }

    // Output stage.
    std::vector<double> acc_scales;
    DType out = DType::kInt32;
    double y_scale = 1.0;
    int32_t y_zp = 0;
    if (kind_ != QOpKind::kInteger) {
      const Tensor* bs = constant(s_.w_scale);
      if (!bs || (bs->numel() != 1 && bs->numel() != n_) || !present(s_.x_scale)) return false;
      const Tensor* as = constant(s_.x_scale);
      runtime_scale_ = as == nullptr;
      if (as && as->numel() != 1) return false;
      const double a_scale = as ? param_value(*as, 0) : 1.0;
      for (int64_t j = 0; j < bs->numel(); ++j) acc_scales.push_back(a_scale * param_value(*bs, j));
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
      // A run-time A scale is multiplied in after the output scales, which only works for float
      // outputs with no activation before it.
      if (runtime_scale_ && out != DType::kFloat32) return false;
      for (double s : acc_scales)
        if (!(s > 0.0) || !std::isfinite(s)) return false;
    }
    out_ = output_stage(acc_scales, out, y_scale, y_zp, act_);
    return true;
  }

  Result<std::unique_ptr<BuiltPrimitive>> build(const QMatMulState& st, int nthr, size_t budget) const {
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (!out_.scales.empty()) {
      if (runtime_scale_ || (st.has_bias && float_bias())) {
        // Scales, the run-time A scale and the float bias come before the activation.
        attr.set_output_scales(out_.scales.size() > 1 ? 1 << 1 : 0, out_.scales);
        if (runtime_scale_) po.append_binary(dnnl::algorithm::binary_mul, st.scale_md);
        if (st.has_bias && float_bias()) po.append_binary(dnnl::algorithm::binary_add, st.bias_md);
        append_q_activation(po, out_.act, 1.f);
      } else {
        out_.apply(attr, po, std::nullopt, 1 << 1);
      }
    }
    if (runtime_zp_)
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    else if (a_zp_ != 0)
      attr.set_zero_points(DNNL_ARG_SRC, 0, {a_zp_});
    attr.set_post_ops(po);
    const memory::desc any_b({pk(), n_}, memory::data_type::s8, memory::format_tag::any);
    const bool bias_arg = st.has_bias && !float_bias();
    auto make_pd = [&](const dnnl::primitive_attr& at) {
      const dnnl::matmul::desc d = bias_arg ? dnnl::matmul::desc(st.a_md, any_b, st.bias_md, st.y_md)
                                            : dnnl::matmul::desc(st.a_md, any_b, st.y_md);
      return dnnl::matmul::primitive_desc(d, at, cpu_engine());
    };
    SL_ASSIGN_OR_RETURN(std::unique_ptr<BuiltPrimitive> p, build_primitive(nthr, budget, attr, make_pd, who_));
    OmpThreadsGuard guard(nthr);
    const memory::desc user_b({pk(), n_}, memory::data_type::s8, memory::format_tag::ab);
    SL_ASSIGN_OR_RETURN(p->packed_weights, packs_.get(p->weights_md, user_b, b8_.raw()));
    p->weights_source = WeightsSource::kBuiltPacked;
    return p;
  }

  std::string who_;
  QOpKind kind_ = QOpKind::kQLinear;
  QSlots s_;
  DType a_dtype_ = DType::kUInt8;
  int32_t a_zp_ = 0;
  bool runtime_zp_ = false;
  bool runtime_scale_ = false;
  int64_t k_ = 0, n_ = 0;
  bool doubled_ = false;  // B split in halves stacked along K, A read twice (see prepare)
  int64_t pk() const { return doubled_ ? 2 * k_ : k_; }  // the primitives' K
  ActivationAttrs act_;
  Tensor b8_;          // int8 B [K, N] without zero points ([2K, N] split, see prepare)
  WeightPacks packs_;  // b8_ in the layouts the primitives want
  QOutputStage out_;
};

KernelDef qmatmul_def(const char* op, const char* domain, int since, QOpKind kind) {
  KernelDef d;
  d.op = op;
  d.domain = domain;
  d.since_version = since;
  d.device = Device::kCpu;
  d.dtype = DType::kUndefined;
  d.provider = "onednn";
  d.create = [kind](const KernelCreateArgs& args) { return QMatMulKernel::create(args, kind); };
  return d;
}

}  // namespace

Status register_qmatmul(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(qmatmul_def("QLinearMatMul", "", 10, QOpKind::kQLinear)));
  SL_RETURN_IF_ERROR(reg.add(qmatmul_def("MatMulInteger", "", 10, QOpKind::kInteger)));
  SL_RETURN_IF_ERROR(reg.add(qmatmul_def("QMatMul", "streamline", 1, QOpKind::kFused)));
  return reg.add(qmatmul_def("MatMulIntegerToFloat", "streamline", 1, QOpKind::kToFloat));
}

}  // namespace streamline::ops::cpu
