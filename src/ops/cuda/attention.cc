// CUDA streamline.Attention: softmax(scale * q @ k + mask) @ v in one fused kernel (attention.cu),
// for float32 and float16 (fp32 math). The op's definition is in src/ops/cpu/attention.cc: q, k and
// v are Q, K and V seen through q_perm, k_perm and v_perm as [.., Sq, D], [.., D, Sk] and
// [.., Sk, Dv]; the mask (last two dims Sq/Sk or 1) is added to the scores; the batch dims of all
// four broadcast; Y = transpose(O, out_perm). reshape() turns the permutations and broadcasts into
// element strides (AttentionDims, the per-shape state), so run() only launches.
//
// Limits: head dims D and Dv up to 128 (Unsupported above), at most 6 broadcast batch dims, all
// inputs of the def's dtype (no bool mask) and plain layout, no is_causal or softcap.

#include <algorithm>
#include <climits>
#include <memory>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/launch_attention.h"
#include "ops/op_params.h"

namespace streamline::ops::cuda {
namespace {

bool is_permutation(std::vector<int64_t> p) {
  std::sort(p.begin(), p.end());
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::string dims_string(const std::vector<int64_t>& d) {
  return Shape(d).to_string();
}

// Dense row-major strides of `s`.
std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (size_t i = s.rank(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(DType dtype, float scale, std::vector<int64_t> q_perm, std::vector<int64_t> k_perm,
                  std::vector<int64_t> v_perm, std::vector<int64_t> out_perm, std::string who)
      : dtype_(dtype),
        scale_(scale),
        q_perm_(std::move(q_perm)),
        k_perm_(std::move(k_perm)),
        v_perm_(std::move(v_perm)),
        out_perm_(std::move(out_perm)),
        who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || in.size() > 4 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid_argument(who_ + ": needs Q, K, V and an optional mask");
    for (const TensorInfo& t : in) {
      if (!t.present()) continue;
      if (t.dtype != dtype_)
        return invalid_argument(who_ + ": every input must be " + dtype_name(dtype_) + ", got " + dtype_name(t.dtype));
      if (t.layout != Layout::kPlain) return unsupported(who_ + ": the CUDA kernel takes plain tensors");
    }
    std::vector<int64_t> qd, qs, kd, ks, vd, vs;
    SL_RETURN_IF_ERROR(attention_operand_dims(in[0].shape, q_perm_, "Q", who_, &qd, &qs));
    SL_RETURN_IF_ERROR(attention_operand_dims(in[1].shape, k_perm_, "K", who_, &kd, &ks));
    SL_RETURN_IF_ERROR(attention_operand_dims(in[2].shape, v_perm_, "V", who_, &vd, &vs));
    auto st = std::make_shared<AttentionDims>();
    st->sq = qd[qd.size() - 2];
    st->d = qd.back();
    st->sk = kd.back();
    st->dv = vd.back();
    st->scale = scale_;
    if (kd[kd.size() - 2] != st->d || vd[vd.size() - 2] != st->sk)
      return invalid_argument(who_ + ": inner dimensions differ: q " + dims_string(qd) + ", k " + dims_string(kd) +
                              ", v " + dims_string(vd));
    if (st->d > kAttentionMaxHeadDim || st->dv > kAttentionMaxHeadDim)
      return unsupported(who_ + ": the CUDA kernel takes head dims up to " + std::to_string(kAttentionMaxHeadDim) +
                         ", got D " + std::to_string(st->d) + " and Dv " + std::to_string(st->dv));

    // The mask, right-aligned: its last two dims are the score matrix's (Sq/Sk or 1), the rest
    // join the batch broadcast.
    const bool has_mask = in.size() > 3 && in[3].present();
    std::vector<int64_t> md;
    if (has_mask) {
      md = in[3].shape.to_vector();
      while (md.size() < 2) md.insert(md.begin(), 1);
      const int64_t mq = md[md.size() - 2], mk = md.back();
      if ((mq != 1 && mq != st->sq) || (mk != 1 && mk != st->sk))
        return invalid_argument(who_ + ": mask " + in[3].shape.to_string() + " does not broadcast to the scores [.., " +
                                std::to_string(st->sq) + ", " + std::to_string(st->sk) + "]");
    }

    // 1. Broadcast batch dims of q, k, v and the mask.
    size_t rb = 0;
    for (const auto* dims : {&qd, &kd, &vd, &md})
      if (!dims->empty()) rb = std::max(rb, dims->size() - 2);
    if (rb > static_cast<size_t>(kAttentionMaxBatchRank))
      return unsupported(who_ + ": the CUDA kernel takes at most " + std::to_string(kAttentionMaxBatchRank) +
                         " batch dims, got " + std::to_string(rb));
    std::vector<int64_t> batch(rb, 1);
    for (const auto* dims : {&qd, &kd, &vd, &md}) {
      if (dims->empty()) continue;
      const size_t r = dims->size() - 2;
      for (size_t j = 0; j < r; ++j) {
        int64_t& b = batch[rb - r + j];
        const int64_t x = (*dims)[j];
        if (b != 1 && x != 1 && b != x)
          return invalid_argument(who_ + ": batch dims of q " + dims_string(qd) + ", k " + dims_string(kd) + ", v " +
                                  dims_string(vd) + (has_mask ? " and the mask " + dims_string(md) : "") +
                                  " do not broadcast");
        if (x != 1) b = x;
      }
    }
    st->batch_rank = static_cast<int32_t>(rb);
    st->batch_count = 1;
    for (size_t j = 0; j < rb; ++j) {
      st->batch[j] = batch[j];
      st->batch_count *= batch[j];
    }
    st->q = operand(qd, qs, rb);
    st->k = operand(kd, ks, rb);
    st->v = operand(vd, vs, rb);
    if (has_mask) {
      std::vector<int64_t> mst = dense_strides(Shape(md));
      st->mask = operand(md, mst, rb);
      // A broadcast matrix dim reads the same element along that dim.
      if (md[md.size() - 2] == 1) st->mask.rs = 0;
      if (md.back() == 1) st->mask.cs = 0;
    }

    // 2. The output: O [batch.., Sq, Dv] stored as Y = transpose(O, out_perm).
    std::vector<int64_t> od = batch;
    od.insert(od.end(), {st->sq, st->dv});
    if (!out_perm_.empty() && out_perm_.size() != od.size())
      return invalid_argument(who_ + ": out_perm has " + std::to_string(out_perm_.size()) + " entries for the rank " +
                              std::to_string(od.size()) + " output " + dims_string(od));
    Shape ys;
    for (size_t i = 0; i < od.size(); ++i) ys.push_back(od[perm_at(out_perm_, i)]);
    const std::vector<int64_t> yst = dense_strides(ys);
    std::vector<int64_t> ost(od.size(), 0);
    for (size_t i = 0; i < od.size(); ++i) ost[perm_at(out_perm_, i)] = yst[i];
    for (size_t j = 0; j < rb; ++j) st->out.batch[j] = od[j] == 1 ? 0 : ost[j];
    st->out.rs = ost[rb];
    st->out.cs = ost[rb + 1];

    // 3. One block per (batch index, query tile) must fit the grid.
    const int64_t tiles = (st->sq + kAttentionMinRowsPerBlock - 1) / kAttentionMinRowsPerBlock;
    if (st->batch_count > 0 && tiles > INT_MAX / st->batch_count)
      return unsupported(who_ + ": " + std::to_string(st->batch_count) + " batch indices of " + std::to_string(st->sq) +
                         " query rows are more blocks than one launch takes");

    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, ys, Layout::kPlain});
    rr.state = std::move(st);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const AttentionDims*>(ctx.state);
    if (st == nullptr) return internal_error(who_ + ": run without reshape state");
    if (ctx.outputs[0].numel() == 0) return ok_status();
    const bool has_mask = ctx.inputs.size() > 3 && ctx.inputs[3].defined();
    const AttentionElem elem = dtype_ == DType::kFloat16 ? AttentionElem::kFloat16 : AttentionElem::kFloat32;
    SL_CUDA_RETURN_IF_ERROR(
        launch_attention(*st, elem, ctx.inputs[0].raw(), ctx.inputs[1].raw(), ctx.inputs[2].raw(),
                         has_mask ? ctx.inputs[3].raw() : nullptr, ctx.outputs[0].raw(), stream_of(ctx)),
        who_);
    return ok_status();
  }

 private:
  static size_t perm_at(const std::vector<int64_t>& perm, size_t i) {
    return perm.empty() ? i : static_cast<size_t>(perm[i]);
  }

  // Strides of a logical operand against `rb` broadcast batch dims (0 where it broadcasts).
  static AttentionOperand operand(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, size_t rb) {
    AttentionOperand o;
    const size_t r = dims.size() - 2;
    for (size_t j = 0; j < r; ++j)
      if (dims[j] != 1) o.batch[rb - r + j] = strides[j];
    o.rs = strides[r];
    o.cs = strides[r + 1];
    return o;
  }

  DType dtype_;
  float scale_;
  std::vector<int64_t> q_perm_, k_perm_, v_perm_, out_perm_;
  std::string who_;
};

Result<std::unique_ptr<Kernel>> make_attention(const KernelCreateArgs& args, DType dtype) {
  const graph::Node& n = args.node;
  if (n.inputs.size() < 3 || n.inputs.size() > 4)
    return invalid_argument(n.describe() + ": expects Q, K, V and an optional mask");
  if (n.attr_int("is_causal", 0) != 0 || n.attr_float("softcap", 0.f) != 0.f)
    return unsupported(n.describe() + ": the CUDA kernel does not implement is_causal or softcap");
  std::vector<int64_t> perms[4];
  const char* names[4] = {"q_perm", "k_perm", "v_perm", "out_perm"};
  for (int i = 0; i < 4; ++i) {
    perms[i] = n.attr_ints(names[i]);
    if (!is_permutation(perms[i]))
      return invalid_argument(n.describe() + ": " + names[i] + " " + dims_string(perms[i]) + " is not a permutation");
  }
  return std::unique_ptr<Kernel>(std::make_unique<AttentionKernel>(dtype, n.attr_float("scale", 1.f), perms[0],
                                                                   perms[1], perms[2], perms[3], n.describe()));
}

}  // namespace

Status register_attention(KernelRegistry& reg) {
  for (DType t : {DType::kFloat32, DType::kFloat16})
    SL_RETURN_IF_ERROR(reg.add(cuda_def(
        "Attention", 1, [t](const KernelCreateArgs& args) { return make_attention(args, t); }, "streamline", INT_MAX,
        t)));
  return ok_status();
}

}  // namespace streamline::ops::cuda
