// streamline.Attention: softmax(scale * q @ k + mask) @ v for every batch/head, in one kernel.
//
//   Attention(Q, K, V, [Mask]) -> Y, attributes scale (float, default 1) and q_perm, k_perm,
//   v_perm, out_perm (ints, default identity): q = transpose(Q, q_perm) is [.., Sq, D],
//   k = transpose(K, k_perm) is [.., D, Sk] (the right operand of the score product), v =
//   transpose(V, v_perm) is [.., Sk, Dv]; the mask is added to the scores [.., Sq, Sk] (its last
//   two dims Sq/Sk or 1); the batch dims of all four broadcast as MatMul's and Add's do; Y =
//   transpose(O, out_perm) for O [.., Sq, Dv].
//
// The permutations are never materialised: reshape turns them into strides, so the head split and
// merge transposes an exporter writes around attention cost nothing. Work is split into tasks of
// (batch/head, block of kBlockRows query rows). A task computes the block's scores with one
// oneDNN sgemm straight from the strided Q and K (an operand is copied into a dense scratch panel
// only when neither of its two matrix dims is contiguous), adds the mask row, normalises each row
// in one vectorised pass (max, exp and sum together, then a scale), and multiplies by V with a
// second sgemm that writes the output rows in place when their elements are contiguous. The scores
// of a block live in per-thread scratch (kBlockRows * Sk floats), never in a [.., Sq, Sk] tensor.
//
// Threads: tasks are shared by the run's num_threads OpenMP threads; each sgemm runs on its own
// thread (the guard below keeps oneDNN from starting a nested team).

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>

#include "ops/cpu/families.h"
#include "ops/cpu/math_vec.h"
#include "ops/cpu/onednn_common.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

constexpr int64_t kBlockRows = 64;  // query rows per task
constexpr int64_t kAlignFloats = 16;

int64_t round_up(int64_t n) {
  return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

// Where one operand's elements are: a stride per broadcast batch dim (0 when broadcast) and the
// strides of its two matrix dims (rows, then columns).
struct Operand {
  std::vector<int64_t> batch_strides;
  int64_t rs = 0, cs = 0;
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t o = 0;
    for (size_t j = 0; j < idx.size(); ++j) o += idx[j] * batch_strides[j];
    return o;
  }
};

// How sgemm reads a [rows, cols] matrix with strides (rs, cs): row-major ('N', ld = rs), or its
// transpose stored row-major ('T', ld = cs); `pack` when neither fits and it is copied first.
struct GemmView {
  char trans = 'N';
  int64_t ld = 0;
  bool pack = false;
};

GemmView gemm_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 && (rows == 1 || rs >= cols)) return {'N', rows == 1 ? std::max<int64_t>(cols, 1) : rs, false};
  if (rs == 1 && (cols == 1 || cs >= rows)) return {'T', cols == 1 ? std::max<int64_t>(rows, 1) : cs, false};
  return {'N', std::max<int64_t>(cols, 1), true};
}

struct AttentionState {
  Shape batch;  // broadcast batch dims of the logical operands
  int64_t batch_count = 1;
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  Operand q, k, v, mask, out;
  bool has_mask = false;
  // sgemm views for a whole block (rows = kBlockRows or Sq when smaller; a shorter last block
  // reads fewer rows with the same strides, which stays valid).
  GemmView qv, kv, vv;
  bool out_direct = false;  // output rows contiguous: the second sgemm writes Y directly
  int64_t out_ld = 0;
  int64_t blocks = 0;       // query-row blocks per batch/head
  // Per-thread scratch, in floats, and where each part starts.
  int64_t scores_at = 0, qpack_at = 0, kpack_at = 0, vpack_at = 0, opack_at = 0, per_thread = 0;
  int max_threads = 1;
};

class AttentionKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args) {
    auto k = std::make_unique<AttentionKernel>();
    const graph::Node& n = args.node;
    k->who_ = n.describe();
    k->scale_ = n.attr_float("scale", 1.f);
    k->q_perm_ = n.attr_ints("q_perm");
    k->k_perm_ = n.attr_ints("k_perm");
    k->v_perm_ = n.attr_ints("v_perm");
    k->out_perm_ = n.attr_ints("out_perm");
    if (n.inputs.size() < 3 || n.inputs.size() > 4) return invalid_argument(k->who_ + ": expects Q, K, V and an optional mask");
    for (const auto* p : {&k->q_perm_, &k->k_perm_, &k->v_perm_, &k->out_perm_}) {
      std::vector<int64_t> s = *p;
      std::sort(s.begin(), s.end());
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] != static_cast<int64_t>(i)) return invalid_argument(k->who_ + ": a perm attribute is not a permutation");
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid_argument(who_ + ": needs Q, K and V");
    for (const auto& t : in) {
      if (!t.present()) continue;
      if (t.dtype != DType::kFloat32) return unsupported(who_ + ": only float32 is supported, got " + dtype_name(t.dtype));
      if (t.layout != Layout::kPlain) return invalid_argument(who_ + ": inputs must be plain");
    }
    auto st = std::make_shared<AttentionState>();
    std::vector<int64_t> qd, qs, kd, ks, vd, vs;
    SL_RETURN_IF_ERROR(attention_operand_dims(in[0].shape, q_perm_, "Q", who_, &qd, &qs));
    SL_RETURN_IF_ERROR(attention_operand_dims(in[1].shape, k_perm_, "K", who_, &kd, &ks));
    SL_RETURN_IF_ERROR(attention_operand_dims(in[2].shape, v_perm_, "V", who_, &vd, &vs));
    st->sq = qd[qd.size() - 2];
    st->d = qd.back();
    st->sk = kd.back();
    st->dv = vd.back();
    if (kd[kd.size() - 2] != st->d || vd[vd.size() - 2] != st->sk)
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
                                  ", v " + Shape(vd).to_string() + (has_mask ? " and the mask " + Shape(md).to_string() : "") +
                                  " do not broadcast");
        if (x != 1) b = x;
      }
    }
    st->batch = Shape(batch);
    st->batch_count = st->batch.numel();
    st->q = operand(qd, qs, batch);
    st->k = operand(kd, ks, batch);
    st->v = operand(vd, vs, batch);

    // Mask: its last two dims are Sq and Sk, or 1 (broadcast).
    std::vector<int64_t> scores = batch;
    scores.insert(scores.end(), {st->sq, st->sk});
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
      st->has_mask = true;
      st->mask.batch_strides.assign(mst.begin(), mst.begin() + static_cast<std::ptrdiff_t>(rb));
      st->mask.rs = mst[rb];
      st->mask.cs = mst[rb + 1];
    }

    // Output: O [batch.., Sq, Dv] stored as Y = transpose(O, out_perm).
    std::vector<int64_t> od = batch;
    od.insert(od.end(), {st->sq, st->dv});
    if (!out_perm_.empty() && out_perm_.size() != od.size())
      return invalid_argument(who_ + ": out_perm has " + std::to_string(out_perm_.size()) + " entries for rank " +
                              std::to_string(od.size()));
    Shape ys;
    for (size_t i = 0; i < od.size(); ++i) ys.push_back(od[out_perm_.empty() ? i : static_cast<size_t>(out_perm_[i])]);
    std::vector<int64_t> yst(od.size(), 1), ost(od.size(), 0);
    for (size_t i = od.size(); i-- > 1;) yst[i - 1] = yst[i] * ys[i];
    for (size_t i = 0; i < od.size(); ++i) ost[out_perm_.empty() ? i : static_cast<size_t>(out_perm_[i])] = yst[i];
    st->out.batch_strides.assign(ost.begin(), ost.begin() + static_cast<std::ptrdiff_t>(rb));
    st->out.rs = ost[rb];
    st->out.cs = ost[rb + 1];

    plan_scratch(*st);
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, ys, Layout::kPlain});
    r.workspace_bytes = static_cast<size_t>(st->per_thread * st->max_threads) * sizeof(float);
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const AttentionState*>(ctx.state);
    if (!st) return internal_error(who_ + ": run without reshape state");
    if (ctx.outputs[0].numel() == 0) return ok_status();
    const int64_t tasks = st->batch_count * st->blocks;
    const int nt = static_cast<int>(std::min<int64_t>({std::max(1, ctx.num_threads), st->max_threads, tasks}));
    const float* q = ctx.inputs[0].data<float>();
    const float* k = ctx.inputs[1].data<float>();
    const float* v = ctx.inputs[2].data<float>();
    const float* mask = st->has_mask ? ctx.inputs[3].data<float>() : nullptr;
    float* y = ctx.outputs[0].data<float>();
    auto* ws = static_cast<float*>(ctx.workspace);
    std::atomic<int> failed{0};
#pragma omp parallel num_threads(nt)
    {
      // One thread per sgemm: oneDNN would otherwise size a nested team from this ICV.
      OmpThreadsGuard one(1);
      float* scratch = ws + static_cast<int64_t>(omp_get_thread_num()) * st->per_thread;
      std::vector<int64_t> idx(st->batch.rank(), 0);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tasks; ++t) {
        if (failed.load(std::memory_order_relaxed)) continue;
        int64_t rem = t / st->blocks;
        for (size_t j = st->batch.rank(); j-- > 0;) {
          idx[j] = rem % st->batch[j];
          rem /= st->batch[j];
        }
        const int64_t i0 = (t % st->blocks) * kBlockRows;
        const int64_t rows = std::min(kBlockRows, st->sq - i0);
        if (run_block(*st, idx, i0, rows, q, k, v, mask, y, scratch) != dnnl_success) failed.store(1);
      }
    }
    if (failed.load()) return internal_error(who_ + ": oneDNN sgemm failed");
    return ok_status();
  }

 private:
  // Strides of a logical operand against the broadcast batch dims (0 where it broadcasts).
  static Operand operand(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& batch) {
    Operand o;
    const size_t r = dims.size() - 2, rb = batch.size();
    o.batch_strides.assign(rb, 0);
    for (size_t j = 0; j < r; ++j)
      if (dims[j] != 1) o.batch_strides[rb - r + j] = strides[j];
    o.rs = strides[r];
    o.cs = strides[r + 1];
    return o;
  }

  // Chooses the sgemm views and lays out the per-thread scratch.
  static void plan_scratch(AttentionState& st) {
    const int64_t br = std::min(kBlockRows, std::max<int64_t>(st.sq, 1));
    st.blocks = (st.sq + kBlockRows - 1) / kBlockRows;
    st.qv = gemm_view(br, st.d, st.q.rs, st.q.cs);
    st.kv = gemm_view(st.d, st.sk, st.k.rs, st.k.cs);
    st.vv = gemm_view(st.sk, st.dv, st.v.rs, st.v.cs);
    st.out_direct = st.out.cs == 1 && (br == 1 || st.out.rs >= st.dv);
    st.out_ld = br == 1 ? std::max<int64_t>(st.dv, 1) : st.out.rs;
    int64_t at = 0;
    auto take = [&](int64_t n) {
      const int64_t start = at;
      at += round_up(n);
      return start;
    };
    st.scores_at = take(br * st.sk);
    st.qpack_at = st.qv.pack ? take(br * st.d) : 0;
    st.kpack_at = st.kv.pack ? take(st.d * st.sk) : 0;
    st.vpack_at = st.vv.pack ? take(st.sk * st.dv) : 0;
    st.opack_at = st.out_direct ? 0 : take(br * st.dv);
    st.per_thread = std::max<int64_t>(at, kAlignFloats);
    // Scratch for as many threads as a run may bring (runs with more use this many).
    st.max_threads = std::max({1, current_omp_threads(), omp_get_num_procs()});
  }

  // Copies a strided [rows, cols] matrix into a dense row-major one.
  static void pack(const float* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i * rs + j * cs];
  }

  dnnl_status_t run_block(const AttentionState& st, const std::vector<int64_t>& idx, int64_t i0, int64_t rows,
                          const float* q, const float* k, const float* v, const float* mask, float* y,
                          float* scratch) const {
    const float* qb = q + st.q.offset(idx) + i0 * st.q.rs;
    const float* kb = k + st.k.offset(idx);
    const float* vb = v + st.v.offset(idx);
    float* yb = y + st.out.offset(idx) + i0 * st.out.rs;
    float* scores = scratch + st.scores_at;
    const int64_t sk = st.sk;

    // 1. scores = scale * q_block @ k.
    GemmView qv = st.qv, kv = st.kv;
    if (qv.pack) {
      pack(qb, rows, st.d, st.q.rs, st.q.cs, scratch + st.qpack_at);
      qb = scratch + st.qpack_at;
    }
    if (kv.pack) {
      pack(kb, st.d, sk, st.k.rs, st.k.cs, scratch + st.kpack_at);
      kb = scratch + st.kpack_at;
    }
    dnnl_status_t s = dnnl_sgemm(qv.trans, kv.trans, rows, sk, st.d, scale_, qb, qv.ld, kb, kv.ld, 0.f, scores,
                                 std::max<int64_t>(sk, 1));
    if (s != dnnl_success) return s;

    // 2. Mask and softmax, row by row (max, then exp and sum in one pass, then the scale).
    for (int64_t r = 0; r < rows; ++r) {
      float* row = scores + r * sk;
      if (mask) {
        const float* mr = mask + st.mask.offset(idx) + (i0 + r) * st.mask.rs;
        if (st.mask.cs == 1) {
          for (int64_t j = 0; j < sk; ++j) row[j] += mr[j];
        } else {
          for (int64_t j = 0; j < sk; ++j) row[j] += mr[j * st.mask.cs];
        }
      }
      const float mx = vec::reduce_max(row, sk);
      const float inv = 1.f / vec::exp_shifted_sum(row, row, sk, mx);
      for (int64_t j = 0; j < sk; ++j) row[j] *= inv;
    }

    // 3. out_block = probabilities @ v.
    GemmView vv = st.vv;
    if (vv.pack) {
      pack(vb, sk, st.dv, st.v.rs, st.v.cs, scratch + st.vpack_at);
      vb = scratch + st.vpack_at;
    }
    float* ob = st.out_direct ? yb : scratch + st.opack_at;
    const int64_t ldo = st.out_direct ? (rows == 1 ? std::max<int64_t>(st.dv, 1) : st.out_ld) : std::max<int64_t>(st.dv, 1);
    s = dnnl_sgemm('N', vv.trans, rows, st.dv, sk, 1.f, scores, std::max<int64_t>(sk, 1), vb, vv.ld, 0.f, ob, ldo);
    if (s != dnnl_success || st.out_direct) return s;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < st.dv; ++j) yb[r * st.out.rs + j * st.out.cs] = ob[r * st.dv + j];
    return dnnl_success;
  }

  std::string who_;
  float scale_ = 1.f;
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
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::cpu
