// streamline.Attention: softmax(scale * q @ k + mask) @ v for every batch/head, in one kernel.
//
//   Attention(Q, K, V, [Mask]) -> Y, attributes scale (float, default 1), q_perm, k_perm, v_perm,
//   out_perm (ints, default identity), is_causal (int, default 0) and softcap (float, default 0):
//   q = transpose(Q, q_perm) is [.., Sq, D], k = transpose(K, k_perm) is [.., D, Sk] (the right
//   operand of the score product), v = transpose(V, v_perm) is [.., Sk, Dv]; with softcap > 0 the
//   scores become softcap * tanh(scores / softcap); the mask is added to the scores [.., Sq, Sk]
//   (its last two dims Sq/Sk or 1), or, when it is bool, hides the keys where it is false; with
//   is_causal, query i sees keys 0..i only; the batch dims of all four broadcast as MatMul's and
//   Add's do; Y = transpose(O, out_perm) for O [.., Sq, Dv].
//
// The permutations are never materialised: reshape turns them into strides, so the head split and
// merge transposes an exporter writes around attention cost nothing. The work runs on the fused
// engine in attention_core.h (tasks of batch/head and 64 query rows, scores in per-thread scratch).

#include <algorithm>

#include "ops/cpu/attention_core.h"
#include "ops/cpu/families.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

// Strides of a logical operand against the broadcast batch dims (0 where it broadcasts).
AttentionView operand(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      const std::vector<int64_t>& batch) {
  AttentionView o;
  const size_t r = dims.size() - 2, rb = batch.size();
  o.batch.assign(rb, 0);
  for (size_t j = 0; j < r; ++j)
    if (dims[j] != 1) o.batch[rb - r + j] = strides[j];
  o.rs = strides[r];
  o.cs = strides[r + 1];
  return o;
}

class AttentionKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args) {
    auto k = std::make_unique<AttentionKernel>();
    const graph::Node& n = args.node;
    k->who_ = n.describe();
    k->scale_ = n.attr_float("scale", 1.f);
    k->softcap_ = n.attr_float("softcap", 0.f);
    k->causal_ = n.attr_int("is_causal", 0) != 0;
    k->q_perm_ = n.attr_ints("q_perm");
    k->k_perm_ = n.attr_ints("k_perm");
    k->v_perm_ = n.attr_ints("v_perm");
    k->out_perm_ = n.attr_ints("out_perm");
    if (n.inputs.size() < 3 || n.inputs.size() > 4)
      return invalid_argument(k->who_ + ": expects Q, K, V and an optional mask");
    if (!(k->softcap_ >= 0.f)) return invalid_argument(k->who_ + ": softcap must be >= 0");
    for (const auto* p : {&k->q_perm_, &k->k_perm_, &k->v_perm_, &k->out_perm_}) {
      std::vector<int64_t> s = *p;
      std::sort(s.begin(), s.end());
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] != static_cast<int64_t>(i))
          return invalid_argument(k->who_ + ": a perm attribute is not a permutation");
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid_argument(who_ + ": needs Q, K and V");
    for (size_t i = 0; i < in.size(); ++i) {
      const TensorInfo& t = in[i];
      if (!t.present()) continue;
      const bool ok = t.dtype == DType::kFloat32 || (i == 3 && t.dtype == DType::kBool);
      if (!ok) return unsupported(who_ + ": only float32 (and a bool mask) is supported, got " + dtype_name(t.dtype));
      if (t.layout != Layout::kPlain) return invalid_argument(who_ + ": inputs must be plain");
    }
    auto st = std::make_shared<AttentionProblem>();
    AttentionProblem& p = *st;
    std::vector<int64_t> qd, qs, kd, ks, vd, vs;
    SL_RETURN_IF_ERROR(attention_operand_dims(in[0].shape, q_perm_, "Q", who_, &qd, &qs));
    SL_RETURN_IF_ERROR(attention_operand_dims(in[1].shape, k_perm_, "K", who_, &kd, &ks));
    SL_RETURN_IF_ERROR(attention_operand_dims(in[2].shape, v_perm_, "V", who_, &vd, &vs));
    p.sq = qd[qd.size() - 2];
    p.d = qd.back();
    p.sk = kd.back();
    p.dv = vd.back();
    p.scale = scale_;
    p.softcap = softcap_;
    p.causal = causal_;
    if (kd[kd.size() - 2] != p.d || vd[vd.size() - 2] != p.sk)
      return invalid_argument(who_ + ": inner dimensions differ: q " + Shape(qd).to_string() + ", k " +
                              Shape(kd).to_string() + ", v " + Shape(vd).to_string());
    // Batch dims: q's, k's, v's and the mask's (all but its last two dims) broadcast together, as
    // MatMul, Add and MatMul broadcast them in the unfused graph.
    const bool has_mask = in.size() > 3 && in[3].present();
    std::vector<int64_t> md;
    if (has_mask) md = in[3].shape.to_vector();
    const size_t mask_batch = md.size() > 2 ? md.size() - 2 : 0;
    const size_t rb = std::max({qd.size() - 2, kd.size() - 2, vd.size() - 2, mask_batch});
    std::vector<int64_t> batch(rb, 1);
    for (const auto* dims : {&qd, &kd, &vd, &md}) {
      const size_t r = dims == &md ? mask_batch : dims->size() - 2;
      for (size_t j = 0; j < r; ++j) {
        int64_t& b = batch[rb - r + j];
        const int64_t x = (*dims)[j];
        if (b != 1 && x != 1 && b != x)
          return invalid_argument(who_ + ": batch dims of q " + Shape(qd).to_string() + ", k " + Shape(kd).to_string() +
                                  ", v " + Shape(vd).to_string() +
                                  (has_mask ? " and the mask " + Shape(md).to_string() : "") + " do not broadcast");
        if (x != 1) b = x;
      }
    }
    p.batch = Shape(batch);
    p.q = operand(qd, qs, batch);
    p.k = operand(kd, ks, batch);
    p.v = operand(vd, vs, batch);

    // Mask: its last two dims are Sq and Sk, or 1 (broadcast).
    std::vector<int64_t> scores = batch;
    scores.insert(scores.end(), {p.sq, p.sk});
    if (has_mask) {
      const Shape& ms = in[3].shape;
      std::vector<int64_t> mst(scores.size(), 0);
      int64_t stride = 1;
      for (size_t i = ms.rank(); i-- > 0;) {
        const size_t j = scores.size() - ms.rank() + i;
        mst[j] = ms[i] == 1 ? 0 : stride;
        stride *= ms[i];
        if (ms[i] != 1 && ms[i] != scores[j])
          return invalid_argument(who_ + ": mask " + ms.to_string() + " does not broadcast to the scores " +
                                  Shape(scores).to_string());
      }
      p.mask = in[3].dtype == DType::kBool ? AttentionMask::kBool : AttentionMask::kFloat;
      p.mask_view.batch.assign(mst.begin(), mst.begin() + static_cast<std::ptrdiff_t>(rb));
      p.mask_view.rs = mst[rb];
      p.mask_view.cs = mst[rb + 1];
      p.mask_cols = p.sk;
    }

    // Output: O [batch.., Sq, Dv] stored as Y = transpose(O, out_perm).
    std::vector<int64_t> od = batch;
    od.insert(od.end(), {p.sq, p.dv});
    if (!out_perm_.empty() && out_perm_.size() != od.size())
      return invalid_argument(who_ + ": out_perm has " + std::to_string(out_perm_.size()) + " entries for rank " +
                              std::to_string(od.size()));
    Shape ys;
    for (size_t i = 0; i < od.size(); ++i) ys.push_back(od[out_perm_.empty() ? i : static_cast<size_t>(out_perm_[i])]);
    std::vector<int64_t> yst(od.size(), 1), ost(od.size(), 0);
    for (size_t i = od.size(); i-- > 1;) yst[i - 1] = yst[i] * ys[i];
    for (size_t i = 0; i < od.size(); ++i) ost[out_perm_.empty() ? i : static_cast<size_t>(out_perm_[i])] = yst[i];
    p.out.batch.assign(ost.begin(), ost.begin() + static_cast<std::ptrdiff_t>(rb));
    p.out.rs = ost[rb];
    p.out.cs = ost[rb + 1];

    finish_problem(p);
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, ys, Layout::kPlain});
    r.workspace_bytes = attention_workspace_bytes(p);
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* p = static_cast<const AttentionProblem*>(ctx.state);
    if (!p) return internal_error(who_ + ": run without reshape state");
    if (ctx.outputs[0].numel() == 0) return ok_status();
    AttentionBuffers b;
    b.q = ctx.inputs[0].data<float>();
    b.k = ctx.inputs[1].data<float>();
    b.v = ctx.inputs[2].data<float>();
    if (p->mask != AttentionMask::kNone) b.mask = ctx.inputs[3].raw();
    b.out = ctx.outputs[0].data<float>();
    return run_attention(*p, b, ctx.workspace, ctx.num_threads, who_);
  }

 private:
  std::string who_;
  float scale_ = 1.f;
  float softcap_ = 0.f;
  bool causal_ = false;
  std::vector<int64_t> q_perm_, k_perm_, v_perm_, out_perm_;
};

}  // namespace

Status register_attention(KernelRegistry& reg) {
  KernelDef d;
  d.op = "Attention";
  d.domain = "streamline";
  d.since_version = 1;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "onednn";
  d.create = AttentionKernel::create;
  SL_RETURN_IF_ERROR(reg.add(std::move(d)));
  SL_RETURN_IF_ERROR(register_onnx_attention(reg));
  return register_rotary(reg);
}

}  // namespace streamline::ops::cpu
