// ONNX Attention (opset 23 on) on the fused attention engine (attention_core.h).
//
//   Attention(Q, K, V, [attn_mask], [past_key], [past_value], [nonpad_kv_seqlen])
//     -> Y, [present_key], [present_value], [qk_matmul_output]
//
// Q, K, V are 4-D [B, heads, S, head_size] or 3-D [B, S, heads * head_size] (q_num_heads and
// kv_num_heads say the heads); the 3-D head split is a stride, never a copy. Grouped-query
// attention (kv heads < q heads, q heads a multiple): query head h reads kv head h / (Hq / Hkv),
// done by splitting the task's head dim into (kv head, group) with K and V broadcast over the
// group. With past_key/past_value the keys are their concatenation with K and V along the
// sequence, written once per run into present_key/present_value (or scratch when those outputs
// are not asked for) in [B, Hkv, total, head_size]; the engine reads them from there. The bias is
// the mask (bool: false hides the key; float: added; a last dim shorter than the keys hides the
// rest, as ONNX pads it with -inf) plus, with is_causal, the causal frontier j <= i + past length.
// nonpad_kv_seqlen (opset 24) hides the keys of batch b from nonpad_kv_seqlen[b] on and moves the
// causal frontier to nonpad_kv_seqlen[b] - Sq (bottom-right, as ONNX's reference does). From
// opset 25, left_window_size/right_window_size bound the keys around that frontier too.
// qk_matmul_output_mode 0..3 selects the scores written to qk_matmul_output (raw, softcapped,
// with the mask, after softmax). A query row that sees no key gets a zero output.
//
// float16 models run through float32 copies in the workspace (the engine computes in float32);
// softmax_precision is accepted for every float type and the softmax always runs in float32.

#include <cmath>
#include <cstring>

#include "ops/cpu/attention_core.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu {
namespace {

constexpr size_t kAlignBytes = 64;

size_t align_up(size_t n) {
  return (n + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

// The shapes and buffers of one reshape: the engine's problem plus how the cache is formed.
struct OnnxAttentionState {
  AttentionProblem p;
  DType dtype = DType::kFloat32;
  int64_t batch = 0, hkv = 0, past = 0, skv = 0, total = 0, d = 0, dv = 0;
  // New K/V rows in the source tensors: strides of batch, kv head and sequence (head size unit).
  int64_t k_sb = 0, k_sh = 0, k_st = 0, v_sb = 0, v_sh = 0, v_st = 0;
  bool cache = false;  // the engine reads K/V from [B, Hkv, total, D] present buffers
  bool want_present_k = false, want_present_v = false, want_scores = false;
  bool half_mask = false;  // a float16 mask converted to float32
  // Workspace offsets (bytes); kNoBuffer when unused.
  size_t engine_at = 0, pk_at = 0, pv_at = 0, q_at = 0, k_at = 0, v_at = 0, pastk_at = 0, pastv_at = 0, mask_at = 0,
         y_at = 0, scores_at = 0, bytes = 0;
};

constexpr size_t kNoBuffer = SIZE_MAX;

bool requested(const graph::Node& n, size_t i) {
  return i < n.outputs.size() && n.outputs[i] != graph::kNoValue;
}

class OnnxAttentionKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args) {
    const graph::Node& n = args.node;
    auto k = std::make_unique<OnnxAttentionKernel>();
    k->who_ = n.describe();
    k->has_scale_ = n.has_attr("scale");
    k->scale_ = n.attr_float("scale", 1.f);
    k->causal_ = n.attr_int("is_causal", 0) != 0;
    k->q_heads_ = n.attr_int("q_num_heads", 0);
    k->kv_heads_ = n.attr_int("kv_num_heads", 0);
    k->softcap_ = n.attr_float("softcap", 0.f);
    const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
      return invalid_argument(k->who_ + ": qk_matmul_output_mode must be 0..3, got " + std::to_string(mode));
    k->mode_ = static_cast<AttentionScores>(mode + 1);
    if (n.has_attr("softmax_precision")) {
      const auto sp = static_cast<DType>(n.attr_int("softmax_precision", 1));
      if (sp != DType::kFloat32 && sp != DType::kFloat16 && sp != DType::kBFloat16 && sp != DType::kFloat64)
        return invalid_argument(k->who_ + ": softmax_precision must be a float type, got " +
                                std::to_string(n.attr_int("softmax_precision", 1)));
    }
    if (n.opset >= 25) {
      k->left_window_ = n.attr_int("left_window_size", -1);
      k->right_window_ = n.attr_int("right_window_size", -1);
      if (k->left_window_ < -1 || k->right_window_ < -1)
        return invalid_argument(k->who_ + ": left_window_size and right_window_size must be -1 or >= 0");
    }
    if (n.inputs.size() < 3 || n.inputs.size() > 7 || (n.opset < 24 && n.inputs.size() > 6))
      return invalid_argument(k->who_ + ": expects Q, K, V and up to " + std::string(n.opset < 24 ? "3" : "4") +
                              " optional inputs, got " + std::to_string(n.inputs.size()) + " inputs");
    if (n.outputs.size() > 4) return invalid_argument(k->who_ + ": has at most 4 outputs");
    k->outputs_ = std::max<size_t>(n.outputs.size(), 1);
    for (size_t i = 0; i < 4; ++i) k->want_[i] = requested(n, i);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    auto at = [&](size_t i) -> const TensorInfo* { return i < in.size() && in[i].present() ? &in[i] : nullptr; };
    if (!at(0) || !at(1) || !at(2)) return invalid_argument(who_ + ": needs Q, K and V");
    const DType t = in[0].dtype;
    if (t != DType::kFloat32 && t != DType::kFloat16)
      return unsupported(who_ + ": Q of " + std::string(dtype_name(t)) + " is not supported (float32, float16 are)");
    for (size_t i : {1, 2, 4, 5})
      if (at(i) && at(i)->dtype != t)
        return invalid_argument(who_ + ": input " + std::to_string(i) + " is " + dtype_name(at(i)->dtype) +
                                ", expected " + dtype_name(t) + " as Q");
    for (const auto& x : in)
      if (x.present() && x.layout != Layout::kPlain) return invalid_argument(who_ + ": inputs must be plain");
    if (at(3) && at(3)->dtype != DType::kBool && at(3)->dtype != t)
      return invalid_argument(who_ + ": attn_mask must be bool or " + dtype_name(t) + ", got " +
                              dtype_name(at(3)->dtype));
    if (at(6) && at(6)->dtype != DType::kInt64) return invalid_argument(who_ + ": nonpad_kv_seqlen must be int64");
    if (!at(4) != !at(5)) return invalid_argument(who_ + ": past_key and past_value must be given together");
    if (at(6) && at(4))
      return invalid_argument(who_ + ": nonpad_kv_seqlen cannot be combined with past_key/past_value");

    auto st = std::make_shared<OnnxAttentionState>();
    OnnxAttentionState& s = *st;
    s.dtype = t;
    SL_RETURN_IF_ERROR(read_shapes(in, s));
    const int64_t hq = s.p.batch[1] * s.p.batch[2], g = s.p.batch[2];
    const int64_t sq = s.p.sq;
    const bool three_d = in[0].shape.rank() == 3;
    if (at(4)) {
      const Shape& pk = in[4].shape;
      const Shape& pv = in[5].shape;
      if (pk.rank() != 4 || pv.rank() != 4 || pk[0] != s.batch || pk[1] != s.hkv || pk[3] != s.d || pv[0] != s.batch ||
          pv[1] != s.hkv || pv[3] != s.dv || pv[2] != pk[2])
        return invalid_argument(who_ + ": past_key " + pk.to_string() + " / past_value " + pv.to_string() +
                                " do not match [" + std::to_string(s.batch) + ", " + std::to_string(s.hkv) +
                                ", past, " + std::to_string(s.d) + "/" + std::to_string(s.dv) + "]");
      s.past = pk[2];
    }
    s.total = s.past + s.skv;
    s.want_present_k = want_[1];
    s.want_present_v = want_[2];
    s.want_scores = want_[3];
    s.cache = at(4) || s.want_present_k || s.want_present_v || t == DType::kFloat16;

    AttentionProblem& p = s.p;
    p.sk = s.total;
    p.scale = has_scale_ ? scale_ : 1.f / std::sqrt(static_cast<float>(s.d));
    p.softcap = softcap_ > 0.f ? softcap_ : 0.f;
    p.causal = causal_;
    p.causal_offset = p.window_offset = s.past;
    p.left_window = left_window_;
    p.right_window = right_window_;
    // K and V: the present buffers ([B, Hkv, total, D] dense) or the inputs themselves.
    if (s.cache) {
      p.k = AttentionView{{s.hkv * s.total * s.d, s.total * s.d, 0}, 1, s.d};
      p.v = AttentionView{{s.hkv * s.total * s.dv, s.total * s.dv, 0}, s.dv, 1};
    } else {
      p.k = AttentionView{{s.k_sb, s.k_sh, 0}, 1, s.k_st};
      p.v = AttentionView{{s.v_sb, s.v_sh, 0}, s.v_st, 1};
    }
    // Y: [B, Hq, Sq, Dv] or [B, Sq, Hq * Dv].
    Shape y;
    if (three_d) {
      y = Shape{s.batch, sq, hq * s.dv};
      p.out = AttentionView{{sq * hq * s.dv, g * s.dv, s.dv}, hq * s.dv, 1};
    } else {
      y = Shape{s.batch, hq, sq, s.dv};
      p.out = AttentionView{{hq * sq * s.dv, g * sq * s.dv, sq * s.dv}, s.dv, 1};
    }
    if (at(3)) SL_RETURN_IF_ERROR(mask_view(in[3], s));
    if (at(6)) {
      if (in[6].shape.rank() != 1 || in[6].shape[0] != s.batch)
        return invalid_argument(who_ + ": nonpad_kv_seqlen " + in[6].shape.to_string() + " must be [" +
                                std::to_string(s.batch) + "]");
      p.key_limits = true;
      p.limit_offsets = true;
    }
    if (s.want_scores) {
      p.scores = mode_;
      p.scores_view = AttentionView{{hq * sq * s.total, g * sq * s.total, sq * s.total}, s.total, 1};
    }
    fold_query_group(p);
    finish_problem(p);
    plan_workspace(in, s, y.numel(), hq * sq);

    ReshapeResult r;
    r.outputs.push_back(OutputInfo{t, y, Layout::kPlain});
    const Shape pks{s.batch, s.hkv, s.total, s.d}, pvs{s.batch, s.hkv, s.total, s.dv};
    const Shape qks{s.batch, hq, sq, s.total};
    for (size_t i = 1; i < outputs_; ++i) r.outputs.push_back(OutputInfo{t, i == 1 ? pks : i == 2 ? pvs : qks});
    r.workspace_bytes = s.bytes;
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* s = static_cast<const OnnxAttentionState*>(ctx.state);
    if (!s) return internal_error(who_ + ": run without reshape state");
    auto* ws = static_cast<unsigned char*>(ctx.workspace);
    auto buf = [&](size_t off) { return reinterpret_cast<float*>(ws + off); };
    auto input = [&](size_t i) -> const Tensor* {
      return i < ctx.inputs.size() && ctx.inputs[i].defined() ? &ctx.inputs[i] : nullptr;
    };
    auto output = [&](size_t i) -> Tensor* {
      return i < ctx.outputs.size() && want_[i] && ctx.outputs[i].defined() ? &ctx.outputs[i] : nullptr;
    };
    const bool half = s->dtype == DType::kFloat16;
    const int nt = ctx.num_threads;
    // float32 views of the inputs (float16 ones converted into the workspace).
    auto as_float = [&](const Tensor& t, size_t off) -> const float* {
      if (!half) return t.data<float>();
      float* dst = buf(off);
      const auto* src = t.data<uint16_t>();
      math::parallel_chunks(t.numel(), math::kCheapGrain, nt,
                            [&](int64_t lo, int64_t hi) { vec::half_to_float_array(src + lo, dst + lo, hi - lo); });
      return dst;
    };
    AttentionBuffers b;
    b.q = as_float(ctx.inputs[0], s->q_at);
    const float* k_new = as_float(ctx.inputs[1], s->k_at);
    const float* v_new = as_float(ctx.inputs[2], s->v_at);
    if (const Tensor* m = input(3)) b.mask = s->half_mask ? as_float(*m, s->mask_at) : m->raw();
    if (const Tensor* n = input(6)) b.key_limits = n->data<int64_t>();

    if (s->cache) {
      const float* past_k = input(4) ? as_float(*input(4), s->pastk_at) : nullptr;
      const float* past_v = input(5) ? as_float(*input(5), s->pastv_at) : nullptr;
      float* pk = !half && output(1) ? output(1)->data<float>() : buf(s->pk_at);
      float* pv = !half && output(2) ? output(2)->data<float>() : buf(s->pv_at);
      concat_cache(*s, past_k, k_new, s->k_sb, s->k_sh, s->k_st, s->d, pk, nt);
      concat_cache(*s, past_v, v_new, s->v_sb, s->v_sh, s->v_st, s->dv, pv, nt);
      b.k = pk;
      b.v = pv;
      if (half && output(1)) to_half(pk, *output(1), nt);
      if (half && output(2)) to_half(pv, *output(2), nt);
    } else {
      b.k = k_new;
      b.v = v_new;
    }
    b.out = half ? buf(s->y_at) : ctx.outputs[0].data<float>();
    if (s->want_scores) {
      Tensor* qk = output(3);
      if (!qk) return internal_error(who_ + ": qk_matmul_output has no buffer");
      b.scores = half ? buf(s->scores_at) : qk->data<float>();
    }
    SL_RETURN_IF_ERROR(run_attention(s->p, b, ws + s->engine_at, nt, who_));
    if (half) {
      to_half(b.out, ctx.outputs[0], nt);
      if (s->want_scores) to_half(b.scores, *output(3), nt);
    }
    return ok_status();
  }

 private:
  // Heads, sequences and head sizes of the 3-D or 4-D Q, K, V; the task batch [B, Hkv, group].
  Status read_shapes(std::span<const TensorInfo> in, OnnxAttentionState& s) const {
    const Shape& q = in[0].shape;
    const Shape& k = in[1].shape;
    const Shape& v = in[2].shape;
    const auto shapes = [&] { return "Q " + q.to_string() + ", K " + k.to_string() + ", V " + v.to_string(); };
    if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
      return invalid_argument(who_ + ": Q, K and V must all be 3-D or all 4-D, got " + shapes());
    int64_t hq = 0, sq = 0;
    if (q.rank() == 3) {
      if (q_heads_ <= 0 || kv_heads_ <= 0)
        return invalid_argument(who_ + ": 3-D inputs need q_num_heads and kv_num_heads (> 0)");
      hq = q_heads_;
      s.hkv = kv_heads_;
      if (q[2] % hq != 0 || k[2] % s.hkv != 0 || v[2] % s.hkv != 0)
        return invalid_argument(who_ + ": hidden sizes of " + shapes() + " do not split into " + std::to_string(hq) +
                                " query and " + std::to_string(s.hkv) + " kv heads");
      s.batch = q[0];
      sq = q[1];
      s.skv = k[1];
      s.d = q[2] / hq;
      s.dv = v[2] / s.hkv;
      if (k[2] / s.hkv != s.d || k[0] != s.batch || v[0] != s.batch || v[1] != s.skv)
        return invalid_argument(who_ + ": " + shapes() + " do not agree on batch, kv length or head size");
      // [B, S, heads * D]: row stride heads * D, head stride D.
      s.k_sb = s.skv * k[2];
      s.k_sh = s.d;
      s.k_st = k[2];
      s.v_sb = s.skv * v[2];
      s.v_sh = s.dv;
      s.v_st = v[2];
      s.p.q = AttentionView{{sq * q[2], 0, s.d}, q[2], 1};
    } else {
      s.batch = q[0];
      hq = q[1];
      sq = q[2];
      s.d = q[3];
      s.hkv = k[1];
      s.skv = k[2];
      s.dv = v[3];
      if (k[0] != s.batch || v[0] != s.batch || k[3] != s.d || v[1] != s.hkv || v[2] != s.skv)
        return invalid_argument(who_ + ": " + shapes() + " do not agree on batch, heads, kv length or head size");
      if ((q_heads_ > 0 && q_heads_ != hq) || (kv_heads_ > 0 && kv_heads_ != s.hkv))
        return invalid_argument(who_ + ": q_num_heads/kv_num_heads disagree with the 4-D " + shapes());
      s.k_sb = s.hkv * s.skv * s.d;
      s.k_sh = s.skv * s.d;
      s.k_st = s.d;
      s.v_sb = s.hkv * s.skv * s.dv;
      s.v_sh = s.skv * s.dv;
      s.v_st = s.dv;
      s.p.q = AttentionView{{hq * sq * s.d, 0, sq * s.d}, s.d, 1};
    }
    if (s.hkv <= 0 || hq % s.hkv != 0)
      return invalid_argument(who_ + ": " + std::to_string(hq) + " query heads are not a multiple of " +
                              std::to_string(s.hkv) + " kv heads");
    const int64_t g = hq / s.hkv;
    s.p.batch = Shape{s.batch, s.hkv, g};
    s.p.q.batch[1] = g * s.p.q.batch[2];  // head h = kv head * group + g
    s.p.sq = sq;
    s.p.d = s.d;
    s.p.dv = s.dv;
    return ok_status();
  }

  // The mask right-aligned against [B, Hq, Sq, total]; its last dim may be shorter than total.
  Status mask_view(const TensorInfo& m, OnnxAttentionState& s) const {
    const Shape& ms = m.shape;
    const int64_t g = s.p.batch[2], hq = s.p.batch[1] * g;
    const std::vector<int64_t> target = {s.batch, hq, s.p.sq, s.total};
    if (ms.rank() < 1 || ms.rank() > 4)
      return invalid_argument(who_ + ": attn_mask " + ms.to_string() + " must have rank 1 to 4");
    std::vector<int64_t> md(4, 1);
    for (size_t i = 0; i < ms.rank(); ++i) md[4 - ms.rank() + i] = ms[i];
    for (size_t i = 0; i < 3; ++i)
      if (md[i] != 1 && md[i] != target[i])
        return invalid_argument(who_ + ": attn_mask " + ms.to_string() + " does not broadcast to " +
                                Shape(target).to_string());
    if (md[3] > s.total)
      return invalid_argument(who_ + ": attn_mask " + ms.to_string() + " covers more keys than the " +
                              std::to_string(s.total) + " there are");
    const int64_t s2 = md[3], s1 = s2 * md[2], s0 = s1 * md[1];
    AttentionProblem& p = s.p;
    p.mask = m.dtype == DType::kBool ? AttentionMask::kBool : AttentionMask::kFloat;
    p.mask_view.batch = {md[0] == 1 ? 0 : s0, md[1] == 1 ? 0 : g * s1, md[1] == 1 ? 0 : s1};
    p.mask_view.rs = md[2] == 1 ? 0 : s2;
    p.mask_view.cs = 1;
    p.mask_cols = md[3];
    s.half_mask = m.dtype == DType::kFloat16;
    return ok_status();
  }

  // Workspace: the engine's scratch, present buffers the outputs do not hold, float32 copies.
  void plan_workspace(std::span<const TensorInfo> in, OnnxAttentionState& s, int64_t y_numel,
                      int64_t score_rows) const {
    const bool half = s.dtype == DType::kFloat16;
    size_t at = 0;
    auto take = [&](bool need, int64_t floats) {
      if (!need) return kNoBuffer;
      const size_t start = at;
      at += align_up(static_cast<size_t>(floats) * sizeof(float));
      return start;
    };
    auto numel = [&](size_t i) { return i < in.size() && in[i].present() ? in[i].shape.numel() : 0; };
    s.engine_at = take(true, static_cast<int64_t>(attention_workspace_bytes(s.p) / sizeof(float)));
    s.pk_at = take(s.cache && (half || !s.want_present_k), s.batch * s.hkv * s.total * s.d);
    s.pv_at = take(s.cache && (half || !s.want_present_v), s.batch * s.hkv * s.total * s.dv);
    s.q_at = take(half, numel(0));
    s.k_at = take(half, numel(1));
    s.v_at = take(half, numel(2));
    s.pastk_at = take(half && numel(4) > 0, numel(4));
    s.pastv_at = take(half && numel(5) > 0, numel(5));
    s.mask_at = take(s.half_mask, numel(3));
    s.y_at = take(half, y_numel);
    s.scores_at = take(half && s.want_scores, s.batch * score_rows * s.total);
    s.bytes = at;
  }

  // present[b, h] = concat(past[b, h], new rows) as [total, width] rows.
  static void concat_cache(const OnnxAttentionState& s, const float* past, const float* src, int64_t sb, int64_t sh,
                           int64_t st, int64_t width, float* dst, int nt) {
    const int64_t pairs = s.batch * s.hkv;
    const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
    // A copy splits only when each thread moves a few MiB: below that one core is as fast.
    constexpr int64_t kCopyGrain = int64_t{1} << 20;  // floats
    math::parallel_chunks(pairs, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(1, s.total * width)), nt,
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t bh = lo; bh < hi; ++bh) {
                              const int64_t bi = bh / s.hkv, h = bh % s.hkv;
                              float* out = dst + bh * s.total * width;
                              if (s.past > 0) std::memcpy(out, past + bh * s.past * width, row_bytes * s.past);
                              const float* in = src + bi * sb + h * sh;
                              for (int64_t t = 0; t < s.skv; ++t)
                                std::memcpy(out + (s.past + t) * width, in + t * st, row_bytes);
                            }
                          });
  }

  static void to_half(const float* src, Tensor& dst, int nt) {
    auto* d = dst.data<uint16_t>();
    math::parallel_chunks(dst.numel(), math::kCheapGrain, nt,
                          [&](int64_t lo, int64_t hi) { vec::float_to_half_array(src + lo, d + lo, hi - lo); });
  }

  std::string who_;
  bool has_scale_ = false;
  float scale_ = 1.f;
  bool causal_ = false;
  int64_t q_heads_ = 0, kv_heads_ = 0;
  float softcap_ = 0.f;
  AttentionScores mode_ = AttentionScores::kRaw;
  int64_t left_window_ = -1, right_window_ = -1;
  size_t outputs_ = 1;
  bool want_[4] = {true, false, false, false};
};

}  // namespace

Status register_onnx_attention(KernelRegistry& reg) {
  KernelDef d;
  d.op = "Attention";
  d.domain = "";
  d.since_version = 23;
  d.device = Device::kCpu;
  d.dtype = DType::kUndefined;
  d.provider = "onednn";
  d.create = OnnxAttentionKernel::create;
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::cpu
