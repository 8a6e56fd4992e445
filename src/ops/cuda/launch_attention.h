#pragma once
// The launcher of the fused attention kernel (attention.cu), in plain types shared by the kernel
// class (attention.cc, host compiler) and nvcc.
//
//   AttentionDims d = ...;   // filled by reshape: sizes, broadcast batch dims, element strides
//   cudaError_t e = launch_attention(d, AttentionElem::kFloat16, q, k, v, mask, y, stream);
//
// Computes, for every batch index, Y = softmax(scale * q @ k + mask) @ v with q [Sq, D], k [D, Sk],
// v [Sk, Dv], mask [Sq, Sk] and the output O [Sq, Dv], each read or written through its strides
// (never copied into a dense tensor first). Enqueues on `stream` and returns the launch error; an
// empty output launches nothing. All pointers are device pointers; `mask` may be null.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace streamline::ops::cuda {

inline constexpr int kAttentionMaxBatchRank = 6;          // broadcast batch dims (operands of rank <= 8)
inline constexpr int64_t kAttentionMaxHeadDim = 128;      // D and Dv
inline constexpr int64_t kAttentionMinRowsPerBlock = 16;  // the smallest query tile a block takes

enum class AttentionElem : int32_t { kFloat32, kFloat16 };

// Where one operand's elements are, in elements: a stride per broadcast batch dim (0 where the
// operand broadcasts), then the strides of its two matrix dims.
struct AttentionOperand {
  int64_t batch[kAttentionMaxBatchRank] = {};
  int64_t rs = 0;  // first matrix dim (q: query row, k: head-dim index, v: key, mask/out: query row)
  int64_t cs = 0;  // second matrix dim (q: head-dim index, k: key, v: value column, mask: key, out: column)
};

struct AttentionDims {
  int32_t batch_rank = 0;
  int64_t batch[kAttentionMaxBatchRank] = {};
  int64_t batch_count = 1;  // product of `batch`
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  float scale = 1.f;
  AttentionOperand q, k, v, mask, out;
};

cudaError_t launch_attention(const AttentionDims& d, AttentionElem elem, const void* q, const void* k, const void* v,
                             const void* mask, void* y, cudaStream_t stream);

}  // namespace streamline::ops::cuda
