#pragma once
// Running elementwise programs (graph/ew_program.h) over tensors in one pass: the engine of
// streamline.Elementwise and of the epilogues fused into convolutions and matrix products.
//
//   SL_ASSIGN_OR_RETURN(EwExec ex, EwExec::compile(program));            // at create
//   SL_ASSIGN_OR_RETURN(EwWalk w, make_ew_walk(out_shape, out_layout, operands));  // at reshape
//   run_ew(ex, w, input_pointers, out, threads);                           // at run
//
// The output is walked in memory order in chunks of kChunk elements. Per chunk, each input is read
// in place when it has the output's shape and layout, read as one value when it is a scalar or
// broadcast to the whole chunk, and otherwise gathered through its strides (a per-channel
// [1, C, 1, 1] tensor against a blocked output, say) into a chunk buffer, which the next chunk
// reuses when it would gather the same values (see EwWalk::period); then every instruction
// is one vectorised loop over the chunk, and the last writes the output. Registers that are dead
// share buffers. The output may be the buffer of an input that has its shape and layout.
//
// Thread-safety: an EwExec and an EwWalk are immutable; run_ew may run concurrently.

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/ew_program.h"

namespace streamline::ops::cpu {

class EwExec {
 public:
  static constexpr int64_t kChunk = 256;

  // Checks the program and assigns chunk buffers to its registers.
  static Result<EwExec> compile(const graph::EwProgram& p);

  const graph::EwProgram& program() const { return p_; }
  int num_inputs() const { return p_.num_inputs; }
  // Chunk buffers one thread needs (each kChunk floats), the gathered inputs included.
  int num_buffers() const { return num_buffers_; }

  // One chunk of `len` <= kChunk elements: in[k] holds input k's `len` values, or one value when
  // uniform[k]; out receives len values (it may be in[k] for a non-uniform k). `bufs` holds
  // num_buffers() chunk buffers, of which the first num_inputs() may hold the gathered inputs.
  void run_chunk(const float* const* in, const bool* uniform, int64_t len, float* out, float* bufs) const;

 private:
  struct Step {
    graph::EwInstr instr;
    int dst_buf = -1;               // buffer of the result; -1 for the last instruction (writes `out`)
    int arg_buf[3] = {-1, -1, -1};  // per operand: buffer of an instruction result, or -1
  };
  graph::EwProgram p_;
  std::vector<Step> steps_;
  int num_buffers_ = 0;
};

// How one input is read for a given output.
struct EwOperand {
  Shape shape;
  Layout layout = Layout::kPlain;
  DType dtype = DType::kFloat32;  // float32, or bool (read as 0 / 1)
};

// The output's iteration and each input's strides over it (see math_broadcast.h).
struct EwWalk {
  enum class Read { kInPlace, kUniform, kGather };
  std::vector<int64_t> dims;                  // iteration dims, outermost first
  std::vector<std::vector<int64_t>> strides;  // per input, per dim (0: broadcast)
  std::vector<Read> read;
  std::vector<DType> dtypes;
  // Per input, for gathered ones: within each aligned span of span[k] output elements, input k's
  // value at element e depends only on the span and on e % period[k] (the input is broadcast over
  // the dims between). A per-channel [C, 1, 1] operand of a blocked [1, C, H, W] output has period
  // 16 (the block) and span H * W * 16, so every chunk of such a span gathers the same values.
  // span == period: no such reuse.
  std::vector<int64_t> period;
  std::vector<int64_t> span;
  int64_t numel = 0;
};

// Whether inputs of these shapes and layouts can be read for this output without converting them
// (the rules of strided_plan_supports, math_broadcast.h).
bool ew_walk_supports(const Shape& out, Layout out_layout, std::span<const EwOperand> inputs);
// The walk; InvalidArgument when an input does not broadcast to `out` or is not supported.
Result<EwWalk> make_ew_walk(const Shape& out, Layout out_layout, std::span<const EwOperand> inputs);

// Runs `ex` over the whole output. inputs[k] points at input k's data (float or bool as the walk
// says); `out` is float32 in the walk's output layout.
void run_ew(const EwExec& ex, const EwWalk& w, std::span<const void* const> inputs, float* out, int threads);

}  // namespace streamline::ops::cpu
