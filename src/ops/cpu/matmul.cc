// Gemm, MatMul, streamline.FusedGemm and streamline.FusedMatMul on oneDNN's matmul primitive.
//
// Gemm: Y = act(alpha * A' * B' + beta * C). Transposes are strides on the descriptors. A C that is
// a row vector (or a scalar) becomes the primitive's bias, pre-divided by alpha because oneDNN
// scales the bias with the output scale; any other C is broadcast into Y and added by a sum
// post-op scaled by beta. MatMul follows NumPy: a B without batch dims runs as one 2-D product
// over all rows of A; otherwise oneDNN broadcasts the batch dims. Constant B is prepacked. The
// fused ops also take activation "Gelu" (erf form, from the transformer passes) as a post-op.
//
// Threads: a 2-D product whose weights lie in memory as a row-major [K, N] (the layout oneDNN's
// AVX2 f32 matmul wants, so prepacked weights are; rows may be padded) is cut into one block of columns per
// thread, each block run by its own single-thread primitive on a strided view of B, the bias and Y.
// The threads then share nothing and never wait on each other inside a product; oneDNN's own
// threading of one primitive synchronises its threads between panels, which costs little on idle
// cores but a great deal when another process holds one of them. Other products (batched B,
// Gemm's summed C, blocked weights) use one primitive with the run's thread count.
//
// A product of at most kGemvMaxRows rows with constant weights (a classifier head at batch 1, a
// decoder step) runs on our matrix-vector loops (gemv.h) instead: it is bound by reading the
// weights, which oneDNN's GEMM blocking does at a fraction of the memory bandwidth. Weights stay
// as Gemm's transB gives them, or are kept transposed to [N, K] when the declared shapes say the
// product will have few rows; the activation and the epilogue then run as our loops over Y.

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

#include "ops/cpu/ew_lower.h"
#include "ops/cpu/families.h"
#include "ops/cpu/gemv.h"
#include "ops/cpu/math_vec.h"
#include "ops/cpu/onednn_common.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

using dnnl::memory;

enum class CMode { kNone, kBias, kSum };

// Per-shape state.
struct MatmulState {
  memory::desc a_md, b_user_md, b_md, bias_md, y_md;
  Shape y_shape;
  int64_t m = 0, n = 0;
  bool has_bias = false;         // the primitive takes a bias
  bool bias_from_input = false;  // FusedMatMul: bias is input 2 as given
  CMode c_mode = CMode::kNone;   // Gemm's C
  Shape c_shape;
  float bias_scale = 1.f;                     // Gemm bias = bias_scale * C
  std::shared_ptr<AlignedBuffer> const_bias;  // Gemm bias computed at reshape from a constant C
  size_t scratch_budget = 0;
  size_t bias_offset = 0;  // workspace offset of a run-time Gemm bias
  size_t w_offset = 0, w_bytes = 0;
  PrimitiveCache cache;
  // Column blocks (see the file comment): whether this shape may be split, and single-thread
  // primitives keyed by the block's column count.
  bool splittable = false;
  int64_t b_ld = 0;  // row stride of the weights the blocks read
  PrimitiveCache blocks;
  EwEpilogue::ShapePlan epi;  // the elementwise epilogue: post-ops, or our loop over Y after the product
  // The matrix-vector path (see the file comment): Y = A W for st.m rows of A, k wide.
  bool gemv = false;
  bool gemv_from_input = false;  // the weights are input 1 as given, else the kernel's copy
  GemvWeights gemv_w;            // .w unset when gemv_from_input
  int64_t k = 0;
};

// Weights a thread's share of a matrix-vector product should at least read (floats): below
// this, waking a second thread costs more than it saves.
constexpr int64_t kGemvMinPerThread = 64 * 1024;

// Applies `act` (and the erf GELU when `gelu`) to y[0, n), in place.
void activate(const Activation& act, bool gelu, float* y, int64_t n) {
  switch (act.kind) {
    case ActKind::kNone:
      break;
    case ActKind::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
      break;
    case ActKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : act.alpha * y[i];
      break;
    case ActKind::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(act.beta, std::max(act.alpha, y[i]));
      break;
    case ActKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::sigmoid(y[i]);
      break;
    case ActKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(1.f, std::max(0.f, act.alpha * y[i] + act.beta));
      break;
    case ActKind::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::tanh(y[i]);
      break;
  }
  if (gelu)
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * y[i] * (1.f + vec::erf(y[i] * 0.70710678118654752f));
}

// Columns of a block below which splitting stops paying.
constexpr int64_t kMinBlockCols = 32;
// Constant weights with N a multiple of kPadEvery (rows 1 KiB apart or a multiple of it) are
// stored with kRowPad floats of padding after each row (see prepack).
constexpr int64_t kPadEvery = 256;
constexpr int64_t kRowPad = 16;

// Fills the [m, n] row-major `y` with `c` (shape cs: rank <= 2) broadcast, times `scale`.
void broadcast_c(const float* c, const Shape& cs, int64_t m, int64_t n, float scale, float* y) {
  const int64_t cm = cs.rank() == 2 ? cs[0] : 1;
  const int64_t cn = cs.rank() >= 1 ? cs[cs.rank() - 1] : 1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = scale * c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
}

class MatmulKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, bool gemm) {
    auto k = std::make_unique<MatmulKernel>();
    const graph::Node& node = args.node;
    k->who_ = node.describe();
    k->gemm_ = gemm;
    const bool fused = node.domain == "streamline";
    if (fused && node.attr_string("activation", "") == "Gelu") {
      // The transformer passes' GELU (erf form); the shared activation list does not have it.
      k->gelu_ = true;
    } else if (fused) {
      SL_ASSIGN_OR_RETURN(k->act_, parse_activation(node));
    }
    if (gemm) {
      k->alpha_ = node.attr_float("alpha", 1.f);
      k->beta_ = node.attr_float("beta", 1.f);
      k->trans_a_ = node.attr_int("transA", 0) != 0;
      k->trans_b_ = node.attr_int("transB", 0) != 0;
    }
    if (fused) {
      SL_ASSIGN_OR_RETURN(k->epi_, EwEpilogue::create(node, 3));
    }
    const size_t max_inputs = gemm || fused ? 3 : 2;
    if (node.inputs.size() < 2 || (k->epi_.empty() && node.inputs.size() > max_inputs))
      return invalid_argument(k->who_ + ": expects 2" + (max_inputs > 2 ? " or 3" : "") + " inputs");
    k->b_const_ = args.constants.size() > 1 && args.constants[1] != nullptr;
    if (k->b_const_) SL_RETURN_IF_ERROR(k->prepack(args));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() < 2 || !inputs[0].present() || !inputs[1].present())
      return invalid_argument(who_ + ": needs inputs A and B");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& in = inputs[i];
      const bool extra = !epi_.empty() && i >= epi_.first_input();  // epilogue operands may be masks
      if (in.present() && in.dtype != DType::kFloat32 && !(extra && in.dtype == DType::kBool))
        return unsupported(who_ + ": only float32 is supported, got " + dtype_name(in.dtype));
      if (in.present() && in.layout != Layout::kPlain) return invalid_argument(who_ + ": inputs must be plain");
    }
    auto st = std::make_shared<MatmulState>();
    const TensorInfo* c = inputs.size() > 2 && inputs[2].present() ? &inputs[2] : nullptr;
    SL_RETURN_IF_ERROR(gemm_ ? describe_gemm(inputs[0].shape, inputs[1].shape, c, *st)
                             : describe_matmul(inputs[0].shape, inputs[1].shape, c, *st));
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, st->y_shape, Layout::kPlain});
    if (st->y_shape.numel() == 0) return r;
    choose_gemv(*st);
    if (!epi_.empty()) {
      // Post-ops only when they are all eltwise: the column blocks run on views of Y.
      auto epi = epi_.plan(st->y_shape, Layout::kPlain, st->y_md, inputs, !st->gemv, /*allow_binary=*/false);
      if (!epi.ok()) return epi.status().with_context(who_);
      st->epi = std::move(epi).value();
    }
    if (st->gemv) {
      SL_RETURN_IF_ERROR(plan_bias(*st, c, 0, r.workspace_bytes));
      r.state = std::move(st);
      return r;
    }

    const int nthr = current_omp_threads();
    const void* plain_b = inputs[1].value ? inputs[1].value->raw() : nullptr;
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p,
                        st->cache.get(nthr, [&] { return build(*st, nthr, SIZE_MAX, plain_b); }));
    st->scratch_budget = p->scratchpad_bytes;
    size_t end = 0;
    SL_RETURN_IF_ERROR(plan_bias(*st, c, st->scratch_budget, end));
    if (!b_const_) {
      st->w_offset = align_up(end);
      st->w_bytes = std::max(p->weights_md.get_size(), st->b_user_md.get_size());
      end = st->w_offset + st->w_bytes;
    }
    r.workspace_bytes = end;
    st->splittable = splittable(*st);
    if (st->c_mode == CMode::kSum && c->shape == st->y_shape) r.inplace = {2};
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const MatmulState*>(ctx.state);
    Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return ok_status();  // reshape keeps no state for an empty output
    if (!st) return internal_error(who_ + ": run without reshape state");
    const int nthr = std::max(1, ctx.num_threads);
    ensure_omp_threads(nthr);
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[1];
    auto* ws = static_cast<uint8_t*>(ctx.workspace);
    if (st->gemv) {
      run_gemv(*st, a.data<float>(), b.data<float>(), run_bias(*st, ctx, ws), y.data<float>(), nthr);
      if (!epi_.empty()) epi_.run(st->epi, y.data<float>(), ctx.inputs, nthr);
      return ok_status();
    }
    int64_t cols = block_cols(*st, nthr);
    std::pair<const BuiltPrimitive*, const BuiltPrimitive*> blocks{nullptr, nullptr};
    if (cols > 0) {
      SL_ASSIGN_OR_RETURN(blocks, block_primitives(*st, cols));
      if (!blocks.first) cols = 0;
    }
    const BuiltPrimitive* p = nullptr;
    const void* bptr = nullptr;
    if (cols == 0) {
      SL_ASSIGN_OR_RETURN(p, st->cache.get(nthr, [&] { return build(*st, nthr, st->scratch_budget, b.raw()); }));
      SL_ASSIGN_OR_RETURN(bptr, run_weights(*p, st->b_user_md, b.raw(), packed_, ws + st->w_offset, st->w_bytes, who_));
    } else {
      bptr = packed_.buf ? packed_.buf->data() : b.raw();
    }
    const void* bias = run_bias(*st, ctx, ws);
    if (cols > 0) {
      SL_RETURN_IF_ERROR(run_blocks(*st, cols, *blocks.first, *blocks.second, a.raw(), bptr, bias, y.raw()));
      if (!epi_.empty() && !st->epi.post_ops) epi_.run(st->epi, y.data<float>(), ctx.inputs, nthr);
      return ok_status();
    }
    if (st->c_mode == CMode::kSum && ctx.inputs[2].raw() != y.raw())
      broadcast_c(ctx.inputs[2].data<float>(), st->c_shape, st->m, st->n, 1.f, y.data<float>());
    std::unordered_map<int, memory> args;
    try {
      args.emplace(DNNL_ARG_SRC, wrap(st->a_md, a.raw()));
      args.emplace(DNNL_ARG_WEIGHTS, wrap(p->weights_md, bptr));
      if (bias) args.emplace(DNNL_ARG_BIAS, wrap(st->bias_md, bias));
      args.emplace(DNNL_ARG_DST, wrap(st->y_md, y.raw()));
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who_);
    }
    SL_RETURN_IF_ERROR(execute(*p, args, ws).with_context(who_));
    if (!epi_.empty() && !st->epi.post_ops) epi_.run(st->epi, y.data<float>(), ctx.inputs, nthr);
    return ok_status();
  }

 private:
  // Gemm's bias from a row-vector C: computed now from a constant C, else room after `start` in
  // the workspace for the run to compute it in; `end` is where the workspace then ends.
  Status plan_bias(MatmulState& st, const TensorInfo* c, size_t start, size_t& end) const {
    end = start;
    if (!st.has_bias || st.bias_from_input) return ok_status();
    if (c->value) {
      auto buf = AlignedBuffer::allocate(static_cast<size_t>(st.n) * sizeof(float));
      if (!buf) return resource_exhausted(who_ + ": out of memory for the bias");
      broadcast_c(c->value->data<float>(), c->shape, 1, st.n, st.bias_scale, buf->as<float>());
      st.const_bias = std::move(buf);
    } else {
      st.bias_offset = align_up(end);
      end = st.bias_offset + static_cast<size_t>(st.n) * sizeof(float);
    }
    return ok_status();
  }

  // The bias this run adds (null for none).
  static const float* run_bias(const MatmulState& st, const RunContext& ctx, uint8_t* ws) {
    if (!st.has_bias) return nullptr;
    if (st.bias_from_input) return ctx.inputs[2].data<float>();
    if (st.const_bias) return st.const_bias->as<float>();
    auto* bb = reinterpret_cast<float*>(ws + st.bias_offset);
    broadcast_c(ctx.inputs[2].data<float>(), st.c_shape, 1, st.n, st.bias_scale, bb);
    return bb;
  }

  // Whether this shape runs on the matrix-vector loops, and on which copy of the weights.
  void choose_gemv(MatmulState& st) const {
    const memory::dims yd = st.y_md.dims();
    if (!b_const_ || st.c_mode == CMode::kSum || yd.size() != 2 || yd[0] > kGemvMaxRows) return;
    const int64_t rows = yd[0], k = st.a_md.dims()[1];
    if (st.a_md != plain_md({rows, k}) && !(rows == 1 && trans_a_)) return;  // rows of A must be dense
    st.k = k;
    if (gemv_nk_) {
      st.gemv_w = GemvWeights{gemv_nk_->as<float>(), k, true};
    } else if (st.b_user_md == permuted_md({k, st.n}, {1, 0})) {
      st.gemv_from_input = true;  // Gemm's transB: [N, K] as given
      st.gemv_w = GemvWeights{nullptr, k, true};
    } else if (packed_.buf && (packed_.md == plain_md({k, st.n}) || (padded_ && packed_.md == padded_md(k, st.n)))) {
      st.gemv_w = GemvWeights{packed_.buf->as<float>(), padded_ ? st.n + kRowPad : st.n, false};
    } else if (!packed_.buf && st.b_user_md == plain_md({k, st.n})) {
      st.gemv_from_input = true;
      st.gemv_w = GemvWeights{nullptr, st.n, false};
    } else {
      return;
    }
    st.gemv = true;
  }

  // Y = act(A W + bias) on the matrix-vector loops, columns shared among up to `nthr` threads.
  void run_gemv(const MatmulState& st, const float* a, const float* b, const float* bias, float* y, int nthr) const {
    GemvWeights w = st.gemv_w;
    if (st.gemv_from_input) w.w = b;
    const int64_t rows = st.m, n = st.n;
    const float alpha = gemm_ ? alpha_ : 1.f;
    const int64_t by_size = std::max<int64_t>(1, n * st.k / kGemvMinPerThread);
    const int parts = static_cast<int>(std::min<int64_t>({nthr, by_size, (n + 15) / 16}));
    const int64_t per = ((n + parts - 1) / parts + 15) / 16 * 16;
    auto part = [&](int64_t j0) {
      const int64_t j1 = std::min(n, j0 + per);
      gemv(a, st.k, rows, st.k, w, bias, alpha, y, n, j0, j1);
      if (act_.kind != ActKind::kNone || gelu_)
        for (int64_t r = 0; r < rows; ++r) activate(act_, gelu_, y + r * n + j0, j1 - j0);
    };
    if (parts <= 1) {
      part(0);
      return;
    }
#pragma omp parallel for num_threads(parts) schedule(static, 1)
    for (int i = 0; i < parts; ++i) {
      if (i * per < n) part(i * per);
    }
  }

  // Gemm descriptors: A [M,K] (or [K,M] with transA), B [K,N] (or [N,K]), C broadcast to [M,N].
  Status describe_gemm(const Shape& as, const Shape& bs, const TensorInfo* c, MatmulState& st) const {
    SL_ASSIGN_OR_RETURN(GemmShapes gs, gemm_shapes(as, bs, trans_a_, trans_b_, who_));
    const int64_t m = gs.m, k = gs.k, n = gs.n;
    st.m = m;
    st.n = n;
    st.y_shape = Shape{m, n};
    st.a_md = trans_a_ ? permuted_md({m, k}, {1, 0}) : plain_md({m, k});
    st.b_user_md = trans_b_ ? permuted_md({k, n}, {1, 0}) : plain_md({k, n});
    st.b_md = b_const_ ? const_weights_md({k, n}) : st.b_user_md;
    st.y_md = plain_md({m, n});
    if (c && beta_ != 0.f) {
      const Shape& cs = c->shape;
      SL_RETURN_IF_ERROR(check_gemm_c(cs, gs, who_));
      st.c_shape = cs;
      const bool row = cs.numel() == 1 || (cs.rank() == 1) || (cs.rank() == 2 && cs[0] == 1);
      if (row && alpha_ != 0.f) {
        st.c_mode = CMode::kBias;
        st.has_bias = true;
        st.bias_scale = beta_ / alpha_;
        st.bias_md = plain_md({1, n});
      } else {
        st.c_mode = CMode::kSum;
      }
    }
    return ok_status();
  }

  // MatMul descriptors with NumPy semantics; `bias` (FusedMatMul) is [N].
  Status describe_matmul(const Shape& as, const Shape& bs, const TensorInfo* bias, MatmulState& st) const {
    SL_ASSIGN_OR_RETURN(MatMulShapes ms, matmul_shapes(as, bs, who_));
    const int64_t m = ms.m, k = ms.k, n = ms.n;
    const Shape &a_batch = ms.a_batch, &b_batch = ms.b_batch, &batch = ms.batch;
    st.y_shape = ms.y;
    if (k == 0) return unsupported(who_ + ": MatMul with an empty inner dimension");
    if (bias) {
      if (bias->shape.numel() != n || bias->shape.rank() != 1)
        return invalid_argument(who_ + ": bias " + bias->shape.to_string() + " must be [" + std::to_string(n) + "]");
      st.has_bias = true;
      st.bias_from_input = true;
    }
    const bool b_flat = b_batch.numel() == 1;
    memory::dims ad, bd, yd;
    if (b_flat) {
      // One 2-D product over every row of A (B is shared by the whole batch).
      const int64_t rows = a_batch.numel() * m;
      ad = {rows, k};
      bd = {k, n};
      yd = {rows, n};
    } else {
      for (size_t i = 0; i < batch.rank(); ++i) {
        const size_t pa = batch.rank() - a_batch.rank(), pb = batch.rank() - b_batch.rank();
        ad.push_back(i < pa ? 1 : a_batch[i - pa]);
        bd.push_back(i < pb ? 1 : b_batch[i - pb]);
        yd.push_back(batch[i]);
      }
      ad.insert(ad.end(), {m, k});
      bd.insert(bd.end(), {k, n});
      yd.insert(yd.end(), {m, n});
    }
    st.m = yd[yd.size() - 2];
    st.n = n;
    st.a_md = plain_md(ad);
    st.b_user_md = plain_md(bd);
    st.b_md = b_const_ ? const_weights_md(bd) : st.b_user_md;
    st.y_md = plain_md(yd);
    if (st.has_bias) {
      memory::dims biasd(yd.size(), 1);
      biasd.back() = n;
      st.bias_md = plain_md(biasd);
    }
    return ok_status();
  }

  // Whether this shape may run as column blocks: a 2-D product with no summed C whose weights,
  // as the blocks will read them, are row-major [K, N] (dense, or with padded rows).
  // Sets st.b_ld, the distance between weight rows the blocks read with.
  bool splittable(MatmulState& st) const {
    if (st.c_mode == CMode::kSum || st.y_md.dims().size() != 2 || st.n < 2 * kMinBlockCols) return false;
    const int64_t k = st.a_md.dims()[1];
    const memory::desc dense = plain_md({k, st.n});
    if (st.b_user_md.dims() != dense.dims()) return false;
    if (packed_.buf && padded_ && packed_.md == padded_md(k, st.n)) {
      st.b_ld = st.n + kRowPad;
      return true;
    }
    st.b_ld = st.n;
    return packed_.buf ? packed_.md == dense : st.b_user_md == dense;
  }

  // Columns per block for a run with `nthr` threads (a multiple of 16), or 0 to run unsplit.
  static int64_t block_cols(const MatmulState& st, int nthr) {
    if (!st.splittable || nthr < 2) return 0;
    const int64_t per = (st.n + nthr - 1) / nthr;
    const int64_t cols = (per + 15) / 16 * 16;
    return cols >= kMinBlockCols && cols < st.n ? cols : 0;
  }

  // A single-thread primitive for Y[:, j0:j0+cols] = A @ B[:, j0:j0+cols] (+ bias, activation) on
  // strided views of the full B and Y.
  Result<std::unique_ptr<BuiltPrimitive>> build_block(const MatmulState& st, int64_t cols) const {
    MatmulState blk;
    const int64_t k = st.a_md.dims()[1];
    blk.a_md = st.a_md;
    blk.b_md = memory::desc({k, cols}, memory::data_type::f32, memory::dims{st.b_ld, 1});
    blk.y_md = memory::desc({st.m, cols}, memory::data_type::f32, memory::dims{st.n, 1});
    blk.has_bias = st.has_bias;
    if (st.has_bias) blk.bias_md = plain_md({1, cols});
    dnnl::primitive_attr attr;
    if (gemm_ && alpha_ != 1.f) attr.set_output_scales(0, {alpha_});
    dnnl::post_ops po;
    append_activation(po, act_);
    if (gelu_) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    if (st.epi.post_ops) epi_.append(po, st.epi);
    attr.set_post_ops(po);
    // No scratchpad budget: a block that needs a scratchpad gets a library one, and then the
    // product runs unsplit (see block_primitives).
    return build_primitive(
        1, 0, attr, [&](const dnnl::primitive_attr& at) { return make_pd(blk, at); }, who_);
  }

  // The block primitives for `cols` columns and for the last, narrower block; {nullptr, nullptr}
  // when either would need a library scratchpad (those are not run from several threads at once).
  Result<std::pair<const BuiltPrimitive*, const BuiltPrimitive*>> block_primitives(const MatmulState& st,
                                                                                   int64_t cols) const {
    const int64_t nblocks = (st.n + cols - 1) / cols;
    const int64_t tail = st.n - cols * (nblocks - 1);
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* full,
                        st.blocks.get(static_cast<int>(cols), [&] { return build_block(st, cols); }));
    const BuiltPrimitive* last = full;
    if (tail != cols) {
      SL_ASSIGN_OR_RETURN(last, st.blocks.get(static_cast<int>(tail), [&] { return build_block(st, tail); }));
    }
    if (!full->user_scratchpad || !last->user_scratchpad || full->scratchpad_bytes || last->scratchpad_bytes)
      return std::pair<const BuiltPrimitive*, const BuiltPrimitive*>{nullptr, nullptr};
    return std::pair<const BuiltPrimitive*, const BuiltPrimitive*>{full, last};
  }

  // Runs the column blocks of Y, one per thread.
  Status run_blocks(const MatmulState& st, int64_t cols, const BuiltPrimitive& full, const BuiltPrimitive& last,
                    const void* a, const void* b, const void* bias, void* y) const {
    const int64_t nblocks = (st.n + cols - 1) / cols;
    std::vector<Status> status(static_cast<size_t>(nblocks));
#pragma omp parallel for num_threads(static_cast <int>(nblocks)) schedule(static, 1)
    for (int64_t i = 0; i < nblocks; ++i) {
      const bool is_last = i + 1 == nblocks;
      const BuiltPrimitive& p = is_last ? last : full;
      const int64_t j0 = i * cols, nc = is_last ? st.n - j0 : cols;
      std::unordered_map<int, memory> args;
      try {
        args.emplace(DNNL_ARG_SRC, wrap(st.a_md, a));
        args.emplace(DNNL_ARG_WEIGHTS, wrap(p.weights_md, static_cast<const float*>(b) + j0));
        if (bias) args.emplace(DNNL_ARG_BIAS, wrap(plain_md({1, nc}), static_cast<const float*>(bias) + j0));
        args.emplace(DNNL_ARG_DST, wrap(memory::desc({st.m, nc}, memory::data_type::f32, memory::dims{st.n, 1}),
                                        static_cast<float*>(y) + j0));
      } catch (const dnnl::error& e) {
        status[static_cast<size_t>(i)] = dnnl_error_status(e, who_);
        continue;
      }
      status[static_cast<size_t>(i)] = execute(p, args, nullptr).with_context(who_);
    }
    for (const Status& s : status) SL_RETURN_IF_ERROR(s);
    return ok_status();
  }

  dnnl::primitive_desc make_pd(const MatmulState& st, const dnnl::primitive_attr& attr) const {
    dnnl::matmul::desc d = st.has_bias ? dnnl::matmul::desc(st.a_md, st.b_md, st.bias_md, st.y_md)
                                       : dnnl::matmul::desc(st.a_md, st.b_md, st.y_md);
    return dnnl::matmul::primitive_desc(d, attr, cpu_engine());
  }

  Result<std::unique_ptr<BuiltPrimitive>> build(const MatmulState& st, int nthr, size_t budget,
                                                const void* plain_b) const {
    dnnl::primitive_attr attr;
    if (gemm_ && alpha_ != 1.f) attr.set_output_scales(0, {alpha_});
    dnnl::post_ops po;
    if (st.c_mode == CMode::kSum) po.append_sum(beta_);
    append_activation(po, act_);
    if (gelu_) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    if (st.epi.post_ops) epi_.append(po, st.epi);
    attr.set_post_ops(po);
    SL_ASSIGN_OR_RETURN(std::unique_ptr<BuiltPrimitive> p,
                        build_primitive(
                            nthr, budget, attr, [&](const dnnl::primitive_attr& a) { return make_pd(st, a); }, who_));
    SL_RETURN_IF_ERROR(resolve_weights(*p, nthr, st.b_user_md, b_const_, packed_, plain_b, who_));
    return p;
  }

  // Prepacks a constant B that is 2-D in effect, guessing M from A's declared shape (1 if unknown).
  Status prepack(const KernelCreateArgs& args) {
    const Tensor& b = *args.constants[1];
    if (b.dtype() != DType::kFloat32) return ok_status();
    const Shape& bs = b.shape();
    if (gemm_ ? bs.rank() != 2
              : (bs.rank() > 2 && Shape(std::span<const int64_t>(bs.data(), bs.rank() - 2)).numel() != 1))
      return ok_status();
    const graph::Value& av = args.graph.value(args.node.inputs[0]);
    if (few_rows(av)) {
      // The matrix-vector loops will run it: they read Gemm's transB weights as given, and
      // everything else as a transposed [N, K] copy.
      if (gemm_ && trans_b_) return ok_status();
      const int64_t kk = gemm_ ? bs[0] : (bs.rank() >= 2 ? bs[bs.rank() - 2] : bs[0]);
      const int64_t nn = gemm_ ? bs[1] : (bs.rank() >= 2 ? bs[bs.rank() - 1] : 1);
      if (kk * nn == 0) return ok_status();
      SL_ASSIGN_OR_RETURN(gemv_nk_, reorder_to_buffer(plain_md({kk, nn}), b.raw(), permuted_md({kk, nn}, {1, 0})));
      return ok_status();
    }
    int64_t m = 1;
    if (av.dims && av.dims->size() >= 2) {
      const graph::Dim& d = (*av.dims)[gemm_ && trans_a_ ? 1 : av.dims->size() - 2];
      if (d.fixed() && d.value > 0) m = d.value;
    }
    MatmulState st;
    std::optional<TensorInfo> bias;
    if (!gemm_ && args.node.inputs.size() > 2 && args.node.inputs[2] != graph::kNoValue) {
      bias.emplace();
      bias->dtype = DType::kFloat32;
      bias->shape = Shape{bs.rank() >= 2 ? bs[bs.rank() - 1] : 1};
    }
    const int64_t k = gemm_ ? (trans_b_ ? bs[1] : bs[0]) : (bs.rank() >= 2 ? bs[bs.rank() - 2] : bs[0]);
    const Shape as = gemm_ ? (trans_a_ ? Shape{k, m} : Shape{m, k}) : Shape{m, k};
    const Status s = gemm_ ? describe_gemm(as, bs, nullptr, st) : describe_matmul(as, bs, bias ? &*bias : nullptr, st);
    if (!s.ok() || st.y_shape.numel() == 0) return ok_status();  // reshape reports errors with real shapes
    dnnl::primitive_desc pd;
    try {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      pd = make_pd(st, attr);
    } catch (const dnnl::error&) {
      return ok_status();
    }
    memory::desc want = pd.weights_desc();
    // A dense row-major [K, N] whose rows are a multiple of 1 KiB apart gets padded rows: oneDNN's
    // AVX2 sgemm walks B down its columns, and such strides map those reads onto a few cache sets
    // (measured: N = 3072 runs 2x faster with 16 floats of padding per row).
    const memory::dims wd = want.dims();
    if (wd.size() == 2 && want == plain_md(wd) && wd[1] % kPadEvery == 0) {
      want = padded_md(wd[0], wd[1]);
      padded_ = true;
    }
    if (want == st.b_user_md) return ok_status();
    SL_ASSIGN_OR_RETURN(packed_.buf, reorder_to_buffer(st.b_user_md, b.raw(), want));
    packed_.md = want;
    return ok_status();
  }

  // Whether A's declared shape says the product has at most kGemvMaxRows rows: fixed dims, or a
  // 2-D A whose row count is not known (a batch dimension, served at batch 1 as often as not).
  bool few_rows(const graph::Value& av) const {
    if (!av.dims || av.dims->empty()) return false;
    const graph::DimList& d = *av.dims;
    if (gemm_) {
      if (d.size() != 2) return false;
      const graph::Dim& m = d[trans_a_ ? 1 : 0];
      return m.fixed() ? m.value <= kGemvMaxRows : true;
    }
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < d.size(); ++i) {
      if (!d[i].fixed()) return d.size() == 2;
      rows *= d[i].value;
    }
    return rows <= kGemvMaxRows;
  }

  // Weights descriptor the primitives are made with for a constant B: the padded layout when
  // prepack chose it, else whatever oneDNN prefers.
  memory::desc const_weights_md(const memory::dims& dims) const {
    if (padded_ && dims.size() == 2) return padded_md(dims[0], dims[1]);
    return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
  }

  static memory::desc padded_md(int64_t k, int64_t n) {
    return memory::desc({k, n}, memory::data_type::f32, memory::dims{n + kRowPad, 1});
  }

  std::string who_;
  bool padded_ = false;  // packed_ holds B row-major with kRowPad floats after each row
  bool gemm_ = false;
  float alpha_ = 1.f, beta_ = 1.f;
  bool trans_a_ = false, trans_b_ = false;
  Activation act_;
  bool gelu_ = false;  // activation "Gelu": x * 0.5 * (1 + erf(x / sqrt 2)) as a post-op
  EwEpilogue epi_;     // the fused ops' elementwise epilogue (ew_* attributes), inputs 3..
  bool b_const_ = false;
  PackedWeights packed_;
  std::shared_ptr<AlignedBuffer> gemv_nk_;  // constant B transposed to [N, K] for the matrix-vector loops
};

KernelDef matmul_def(std::string op, std::string domain, int since, bool gemm) {
  KernelDef d;
  d.op = std::move(op);
  d.domain = std::move(domain);
  d.since_version = since;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "onednn";
  d.create = [gemm](const KernelCreateArgs& args) { return MatmulKernel::create(args, gemm); };
  return d;
}

}  // namespace

Status register_matmul(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(matmul_def("Gemm", "", 7, true)));
  SL_RETURN_IF_ERROR(reg.add(matmul_def("FusedGemm", "streamline", 1, true)));
  SL_RETURN_IF_ERROR(reg.add(matmul_def("MatMul", "", 1, false)));
  SL_RETURN_IF_ERROR(reg.add(matmul_def("FusedMatMul", "streamline", 1, false)));
  return ok_status();
}

}  // namespace streamline::ops::cpu
