#pragma once
// The fused attention engine behind streamline.Attention and ONNX Attention (opset 23 on): for
// every task batch index and every query row, softmax over the visible keys of
// scale * q @ k [softcapped] [+ mask], then @ v, with the scores of a block of query rows kept in
// per-thread scratch, never in a [.., Sq, Sk] tensor.
//
//   AttentionProblem p;                 // shapes and strides, filled by the kernel's reshape
//   p.batch = Shape{b, heads};  p.sq = ...;  p.q = View{{sb, sh}, d, 1};  ...
//   finish_problem(p);                  // gemm views, scratch layout
//   size_t ws = attention_workspace_bytes(p);
//   SL_RETURN_IF_ERROR(run_attention(p, AttentionBuffers{q, k, v, mask, ...}, workspace, threads, who));
//
// Operands are strided views over a set of task batch dims (stride 0 where an operand is
// broadcast), so transposes, head splits and grouped-query heads (a group dim that K and V
// broadcast over) are strides, never copies. Work is split into tasks of (batch index, block of
// kAttentionBlockRows query rows). A task computes its block's scores with one oneDNN sgemm
// straight from the strided Q and K (an operand is packed into scratch only when neither of its
// matrix dims is contiguous), applies softcap and the mask, normalises each row over its visible
// keys in one vectorised pass, and multiplies by V with a second sgemm. Keys no row of the block
// can see (causal, a mask shorter than the keys) are left out of both products. A row that sees
// no key at all gets zero probabilities and a zero output.
//
// Thread-safety: a finished problem is immutable; run_attention may be called concurrently with
// separate buffers and workspaces.

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/status.h"

namespace streamline::ops::cpu {

inline constexpr int64_t kAttentionBlockRows = 64;  // query rows per task

// Where one operand's elements are: a stride per task batch dim (0 when broadcast) and the
// strides of its two matrix dims (rows, then columns).
struct AttentionView {
  std::vector<int64_t> batch;
  int64_t rs = 0, cs = 0;
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t o = 0;
    for (size_t j = 0; j < idx.size(); ++j) o += idx[j] * batch[j];
    return o;
  }
};

// How sgemm reads a [rows, cols] matrix: row-major ('N', ld), its transpose stored row-major
// ('T', ld), or `pack` when neither fits and it is copied into scratch first.
struct AttentionGemmView {
  char trans = 'N';
  int64_t ld = 0;
  bool pack = false;
};

enum class AttentionMask {
  kNone,
  kFloat,  // float32 values added to the scores
  kBool,   // uint8: 0 hides the key from the query, anything else keeps it
};

// Which scores ONNX Attention's qk_matmul_output receives (its qk_matmul_output_mode 0..3).
enum class AttentionScores {
  kNone,
  kRaw,         // 0: scale * q @ k
  kSoftcapped,  // 1: after softcap (as raw without one)
  kMasked,      // 2: after softcap and the mask (hidden keys -inf)
  kSoftmax,     // 3: the probabilities
};

struct AttentionProblem {
  // --- filled by the kernel ---
  Shape batch;                            // task batch dims: the operands' broadcast batch dims
  int64_t sq = 0, sk = 0, d = 0, dv = 0;  // query rows, keys, head size of q/k and of v
  float scale = 1.f;
  float softcap = 0.f;  // > 0: scores become softcap * tanh(scores / softcap) before the mask
  // q [Sq, D]; k the right operand [D, Sk]; v [Sk, Dv]; out [Sq, Dv]; each over `batch`.
  AttentionView q, k, v, out;
  AttentionMask mask = AttentionMask::kNone;
  AttentionView mask_view;  // [Sq, mask_cols] over `batch`; cs 0 broadcasts one value over the keys
  int64_t mask_cols = 0;    // keys the mask covers; later keys are hidden (ONNX pads with -inf)
  // Key j is visible to query i when j <= i + causal_offset (with causal) and
  // i + window_offset - left_window <= j <= i + window_offset + right_window (each bound when >= 0).
  bool causal = false;
  int64_t causal_offset = 0;
  // The query position of row i is i * row_position_step: 0 when the rows are the query heads of
  // one kv head at a single position (a decode step, see fold_query_group).
  int64_t row_position_step = 1;
  int64_t left_window = -1, right_window = -1, window_offset = 0;
  // Run-time key counts per index of batch dim 0 (ONNX's nonpad_kv_seqlen): keys from the count
  // on are hidden, and with `limit_offsets` the causal and window offsets become count - Sq.
  bool key_limits = false;
  bool limit_offsets = false;
  AttentionScores scores = AttentionScores::kNone;
  AttentionView scores_view;  // [Sq, Sk] over `batch`

  // --- set by finish_problem ---
  AttentionGemmView qv, kv, vv;
  bool out_direct = false;  // output rows contiguous: the second sgemm writes them in place
  int64_t out_ld = 0;
  int64_t blocks = 0;  // query-row blocks per batch index
  // Per-thread scratch, in floats, and where each part starts.
  int64_t scores_at = 0, qpack_at = 0, kpack_at = 0, vpack_at = 0, opack_at = 0, per_thread = 0;
  int max_threads = 1;
};

// What one run reads and writes; pointers to the first element of each operand.
struct AttentionBuffers {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const void* mask = nullptr;           // float or uint8, as the problem says
  const int64_t* key_limits = nullptr;  // batch[0] counts when the problem has key_limits
  float* out = nullptr;
  float* scores = nullptr;  // when the problem asks for scores
};

// For a single query position (a decode step) whose last task batch dim is a group of query
// heads sharing K and V (stride 0 there in k and v): the group becomes the block's rows, so one
// sgemm per kv head reads K and V once instead of once per query head. No-op otherwise.
void fold_query_group(AttentionProblem& p);

// Chooses the sgemm views and lays out the per-thread scratch. Call once the shapes are in.
void finish_problem(AttentionProblem& p);

// Scratch bytes run_attention needs for a finished problem.
size_t attention_workspace_bytes(const AttentionProblem& p);

// Runs every task on up to `num_threads` OpenMP threads. `who` names the node in errors.
Status run_attention(const AttentionProblem& p, const AttentionBuffers& b, void* workspace, int num_threads,
                     const std::string& who);

}  // namespace streamline::ops::cpu
