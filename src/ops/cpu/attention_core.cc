// The fused attention engine (see attention_core.h).

#include "ops/cpu/attention_core.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "ops/cpu/math_vec.h"
#include "ops/cpu/onednn_common.h"

namespace streamline::ops::cpu {
namespace {

constexpr int64_t kAlignFloats = 16;
constexpr int64_t kMinWorkPerThread = int64_t{1} << 19;  // multiply-adds, about 10-20 us
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t n) {
  return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

AttentionGemmView gemm_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 && (rows == 1 || rs >= cols)) return {'N', rows == 1 ? std::max<int64_t>(cols, 1) : rs, false};
  if (rs == 1 && (cols == 1 || cs >= rows)) return {'T', cols == 1 ? std::max<int64_t>(rows, 1) : cs, false};
  return {'N', std::max<int64_t>(cols, 1), true};
}

// Copies a strided [rows, cols] matrix into a dense row-major one.
void pack(const float* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i * rs + j * cs];
}

void store_row(const float* row, int64_t n, float* dst, int64_t cs) {
  if (cs == 1) {
    std::memcpy(dst, row, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t j = 0; j < n; ++j) dst[j * cs] = row[j];
}

// The keys query `i` may see: [lo, hi) (empty when hi <= lo).
struct KeyRange {
  int64_t lo = 0, hi = 0;
};

struct BlockLimits {
  int64_t hi_base = 0;  // keys beyond the mask and the run-time key count are hidden
  int64_t causal_offset = 0, window_offset = 0;
};

KeyRange key_range(const AttentionProblem& p, const BlockLimits& l, int64_t row) {
  const int64_t i = row * p.row_position_step;
  KeyRange r{0, l.hi_base};
  if (p.causal) r.hi = std::min(r.hi, i + l.causal_offset + 1);
  if (p.right_window >= 0) r.hi = std::min(r.hi, i + l.window_offset + p.right_window + 1);
  if (p.left_window >= 0) r.lo = std::max<int64_t>(0, i + l.window_offset - p.left_window);
  r.hi = std::max<int64_t>(r.hi, 0);
  return r;
}

// Softcap, mask and softmax of one score row of `w` columns, capturing the scores the problem
// asks for on the way; the keys outside `kr` end with probability 0.
void normalise_row(const AttentionProblem& p, float* row, int64_t w, KeyRange kr, const void* mask_row,
                   float* scores_row) {
  const int64_t lo = std::min(kr.lo, w), hi = std::min(kr.hi, w);
  if (p.scores == AttentionScores::kRaw) store_row(row, w, scores_row, p.scores_view.cs);
  if (p.softcap > 0.f) {
    const float c = p.softcap, inv = 1.f / p.softcap;
    for (int64_t j = 0; j < w; ++j) row[j] = c * vec::tanh(row[j] * inv);
  }
  if (p.scores == AttentionScores::kSoftcapped) store_row(row, w, scores_row, p.scores_view.cs);
  for (int64_t j = 0; j < lo; ++j) row[j] = kNegInf;
  for (int64_t j = std::max(hi, lo); j < w; ++j) row[j] = kNegInf;
  const int64_t mcs = p.mask_view.cs;
  if (p.mask == AttentionMask::kFloat) {
    const float* m = static_cast<const float*>(mask_row);
    if (mcs == 1) {
      for (int64_t j = lo; j < hi; ++j) row[j] += m[j];
    } else {
      for (int64_t j = lo; j < hi; ++j) row[j] += m[j * mcs];
    }
  } else if (p.mask == AttentionMask::kBool) {
    const uint8_t* m = static_cast<const uint8_t*>(mask_row);
    if (mcs == 1) {
      for (int64_t j = lo; j < hi; ++j) row[j] = vec::select(m[j] != 0, row[j], kNegInf);
    } else {
      for (int64_t j = lo; j < hi; ++j) row[j] = vec::select(m[j * mcs] != 0, row[j], kNegInf);
    }
  }
  if (p.scores == AttentionScores::kMasked) store_row(row, w, scores_row, p.scores_view.cs);

  const float mx = hi > lo ? vec::reduce_max(row + lo, hi - lo) : kNegInf;
  if (mx == kNegInf) {
    // No visible key (or every visible one masked to -inf): zero probabilities.
    std::fill(row, row + w, 0.f);
  } else {
    const float inv = 1.f / vec::exp_shifted_sum(row + lo, row + lo, hi - lo, mx);
    for (int64_t j = lo; j < hi; ++j) row[j] *= inv;
    std::fill(row, row + lo, 0.f);
    std::fill(row + hi, row + w, 0.f);
  }
  if (p.scores == AttentionScores::kSoftmax) store_row(row, w, scores_row, p.scores_view.cs);
}

void zero_rows(float* y, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) y[r * rs + j * cs] = 0.f;
}

dnnl_status_t run_block(const AttentionProblem& p, const AttentionBuffers& b, const std::vector<int64_t>& idx,
                        int64_t i0, int64_t rows, float* scratch) {
  // 1. The keys this block may see.
  BlockLimits lim;
  lim.hi_base = p.sk;
  if (p.mask != AttentionMask::kNone) lim.hi_base = std::min(lim.hi_base, p.mask_cols);
  lim.causal_offset = p.causal_offset;
  lim.window_offset = p.window_offset;
  if (p.key_limits) {
    const int64_t n = std::clamp<int64_t>(b.key_limits[idx[0]], 0, p.sk);
    lim.hi_base = std::min(lim.hi_base, n);
    const int64_t positions = p.row_position_step == 0 ? 1 : p.sq;
    if (p.limit_offsets) lim.causal_offset = lim.window_offset = n - positions;
  }
  int64_t w = p.sk;  // score columns computed: every key when the scores are an output
  if (p.scores == AttentionScores::kNone) {
    w = 0;
    for (int64_t r = 0; r < rows; ++r) w = std::max(w, key_range(p, lim, i0 + r).hi);
  }
  float* yb = b.out + p.out.offset(idx) + i0 * p.out.rs;
  if (w == 0) {
    zero_rows(yb, rows, p.dv, p.out.rs, p.out.cs);
    return dnnl_success;
  }

  // 2. scores = scale * q_block @ k[:, :w].
  const float* qb = b.q + p.q.offset(idx) + i0 * p.q.rs;
  const float* kb = b.k + p.k.offset(idx);
  const float* vb = b.v + p.v.offset(idx);
  float* scores = scratch + p.scores_at;
  AttentionGemmView qv = p.qv, kv = p.kv;
  if (qv.pack) {
    pack(qb, rows, p.d, p.q.rs, p.q.cs, scratch + p.qpack_at);
    qb = scratch + p.qpack_at;
  }
  if (kv.pack) {
    pack(kb, p.d, w, p.k.rs, p.k.cs, scratch + p.kpack_at);
    kb = scratch + p.kpack_at;
    kv.ld = w;
  }
  dnnl_status_t s = dnnl_sgemm(qv.trans, kv.trans, rows, w, p.d, p.scale, qb, qv.ld, kb, kv.ld, 0.f, scores, w);
  if (s != dnnl_success) return s;

  // 3. Softcap, mask and softmax, row by row.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    const void* mask_row = nullptr;
    if (p.mask != AttentionMask::kNone) {
      const int64_t off = p.mask_view.offset(idx) + i * p.mask_view.rs;
      mask_row = p.mask == AttentionMask::kFloat ? static_cast<const void*>(static_cast<const float*>(b.mask) + off)
                                                 : static_cast<const void*>(static_cast<const uint8_t*>(b.mask) + off);
    }
    float* scores_row =
        p.scores != AttentionScores::kNone ? b.scores + p.scores_view.offset(idx) + i * p.scores_view.rs : nullptr;
    normalise_row(p, scores + r * w, w, key_range(p, lim, i), mask_row, scores_row);
  }

  // 4. out_block = probabilities @ v[:w].
  AttentionGemmView vv = p.vv;
  if (vv.pack) {
    pack(vb, w, p.dv, p.v.rs, p.v.cs, scratch + p.vpack_at);
    vb = scratch + p.vpack_at;
  }
  float* ob = p.out_direct ? yb : scratch + p.opack_at;
  const int64_t ldo = p.out_direct ? (rows == 1 ? std::max<int64_t>(p.dv, 1) : p.out_ld) : std::max<int64_t>(p.dv, 1);
  s = dnnl_sgemm('N', vv.trans, rows, p.dv, w, 1.f, scores, w, vb, vv.ld, 0.f, ob, ldo);
  if (s != dnnl_success || p.out_direct) return s;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < p.dv; ++j) yb[r * p.out.rs + j * p.out.cs] = ob[r * p.dv + j];
  return dnnl_success;
}

}  // namespace

void fold_query_group(AttentionProblem& p) {
  const size_t r = p.batch.rank();
  if (p.sq != 1 || r < 2 || p.batch[r - 1] <= 1 || p.k.batch[r - 1] != 0 || p.v.batch[r - 1] != 0) return;
  auto drop_last = [&](AttentionView& v) {
    v.rs = v.batch[r - 1];
    v.batch.pop_back();
  };
  p.sq = p.batch[r - 1];
  p.row_position_step = 0;
  drop_last(p.q);
  drop_last(p.out);
  if (p.mask != AttentionMask::kNone) drop_last(p.mask_view);
  if (p.scores != AttentionScores::kNone) drop_last(p.scores_view);
  p.k.batch.pop_back();
  p.v.batch.pop_back();
  Shape batch;
  for (size_t j = 0; j + 1 < r; ++j) batch.push_back(p.batch[j]);
  p.batch = batch;
}

void finish_problem(AttentionProblem& p) {
  const int64_t br = std::min(kAttentionBlockRows, std::max<int64_t>(p.sq, 1));
  p.blocks = (p.sq + kAttentionBlockRows - 1) / kAttentionBlockRows;
  p.qv = gemm_view(br, p.d, p.q.rs, p.q.cs);
  p.kv = gemm_view(p.d, p.sk, p.k.rs, p.k.cs);
  p.vv = gemm_view(p.sk, p.dv, p.v.rs, p.v.cs);
  p.out_direct = p.out.cs == 1 && (br == 1 || p.out.rs >= p.dv);
  p.out_ld = br == 1 ? std::max<int64_t>(p.dv, 1) : p.out.rs;
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t start = at;
    at += round_up(n);
    return start;
  };
  p.scores_at = take(br * p.sk);
  p.qpack_at = p.qv.pack ? take(br * p.d) : 0;
  p.kpack_at = p.kv.pack ? take(p.d * p.sk) : 0;
  p.vpack_at = p.vv.pack ? take(p.sk * p.dv) : 0;
  p.opack_at = p.out_direct ? 0 : take(br * p.dv);
  p.per_thread = std::max<int64_t>(at, kAlignFloats);
  // Scratch for as many threads as a run may bring (runs with more use this many).
  p.max_threads = std::max({1, current_omp_threads(), omp_get_num_procs()});
}

size_t attention_workspace_bytes(const AttentionProblem& p) {
  return static_cast<size_t>(p.per_thread * p.max_threads) * sizeof(float);
}

Status run_attention(const AttentionProblem& p, const AttentionBuffers& b, void* workspace, int num_threads,
                     const std::string& who) {
  if (p.sq == 0 || p.dv == 0 || p.batch.numel() == 0) return ok_status();
  const int64_t tasks = p.batch.numel() * p.blocks;
  // Threads: at most one per task, and one per kMinWorkPerThread multiply-adds (an upper bound,
  // before causal trimming), so a decode step does not pay a parallel region for a few us of work.
  const int64_t work = p.batch.numel() * p.sq * p.sk * (p.d + p.dv);
  const int64_t by_work = std::max<int64_t>(1, work / kMinWorkPerThread);
  const int nt = static_cast<int>(std::min<int64_t>({std::max(1, num_threads), p.max_threads, tasks, by_work}));
  auto* ws = static_cast<float*>(workspace);
  std::atomic<int> failed{0};
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    // One thread per sgemm: oneDNN would otherwise size a nested team from this ICV.
    OmpThreadsGuard one(1);
    float* scratch = ws + static_cast<int64_t>(omp_get_thread_num()) * p.per_thread;
    std::vector<int64_t> idx(p.batch.rank(), 0);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      if (failed.load(std::memory_order_relaxed)) continue;
      int64_t rem = t / p.blocks;
      for (size_t j = p.batch.rank(); j-- > 0;) {
        idx[j] = rem % p.batch[j];
        rem /= p.batch[j];
      }
      const int64_t i0 = (t % p.blocks) * kAttentionBlockRows;
      const int64_t rows = std::min(kAttentionBlockRows, p.sq - i0);
      if (run_block(p, b, idx, i0, rows, scratch) != dnnl_success) failed.store(1);
    }
  }
  if (failed.load()) return internal_error(who + ": oneDNN sgemm failed");
  return ok_status();
}

}  // namespace streamline::ops::cpu
