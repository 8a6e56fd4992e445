#pragma once
// The CPU executor: an ExecutionContext that runs CPU plans on CPU streams.
//
//   exec::CpuExecutionContext ctx;                       // one per concurrent run
//   exec::RunOptions ro;  ro.num_threads = 2;            // intra-op threads per stream
//   std::vector<Tensor> outs;
//   SL_RETURN_IF_ERROR(ctx.run(*plan, inputs, &outs, ro));
//
// Single-stream plans run on the calling thread. Multi-stream plans run stream 0 on the calling
// thread and the others on the context's stream workers (StreamPool); each stream is a CpuStream,
// each plan event a CpuEvent (exec/cpu_stream.h): a step waits for its plan events before it
// starts and records its events when it ends (stamped with the run's generation, so nothing is
// reset or allocated per run). Eager plans (plan.eager) run node by node on the calling thread
// through the context's EagerExecutionContext (exec/eager_executor.h). With
// RunOptions::adapt_threads a single-stream plan runs on its requested threads or on one, by the
// run times the context measures per plan (exec/thread_choice.h).
// The context owns the arena (grown to the largest plan it has run, never per run), its stream
// workers (made once) and per-plan bindings. It runs one plan at a time.

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "exec/cpu_stream.h"
#include "exec/eager_executor.h"
#include "exec/execution_context.h"
#include "exec/stream_pool.h"
#include "exec/thread_choice.h"

namespace streamline::exec {

class CpuExecutionContext final : public ExecutionContext {
 public:
  explicit CpuExecutionContext(ContextOptions options = {}) : options_(std::move(options)) {}
  CpuExecutionContext(const CpuExecutionContext&) = delete;
  CpuExecutionContext& operator=(const CpuExecutionContext&) = delete;

  // Errors name the failing node and op; after an error on one stream the others stop starting
  // new steps and the run returns the first error.
  [[nodiscard]] Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                           std::vector<Tensor>* outputs, const RunOptions& options) override;
  // Eager plans only: runs them through the context's EagerExecutionContext.
  [[nodiscard]] Status run_values(const plan::ExecutionPlan& plan, std::span<const AnyValue> inputs,
                                  std::vector<AnyValue>* outputs, const RunOptions& options) override;
  size_t arena_bytes() const override { return arena_ ? arena_->size() : 0; }
  int num_streams() const override { return static_cast<int>(streams_.size()); }
  std::string device() const override { return "cpu"; }

 private:
  friend struct RunState;
  struct Binding {
    std::vector<std::vector<Tensor>> step_inputs;
    std::vector<std::vector<Tensor>> step_outputs;
    // (step, argument) pairs that read run inputs: patched with the caller's pointers each run.
    std::vector<std::pair<int, int>> input_uses;
    // Safe mode: per step, arena ranges whose value is dead after it (poisoned).
    std::vector<std::vector<std::pair<size_t, size_t>>> poison_after;
    void* arena_base = nullptr;
    // Graph outputs a run that hands out copies (RunOptions::copy_outputs) writes straight into
    // memory of their own instead of the arena, sparing the copy: an arena output whose memory
    // buffer (the output and every slot aliasing it, such as the input of an in-place step or a
    // view) holds no other graph output. Each run allocates the buffer and points the uses at it;
    // a run that keeps views into the arena points them back.
    struct SlotUse {
      int step = 0;
      int arg = 0;
      bool output = false;  // of step_outputs, else step_inputs
      int slot = 0;
    };
    struct DirectOutput {
      int output = 0;            // index into plan.output_slots
      size_t base = 0, end = 0;  // the buffer's arena range
      std::vector<SlotUse> uses;
    };
    std::vector<DirectOutput> direct_outputs;
    bool redirected = false;  // the uses point outside the arena (the last run's outputs)
  };
  Status bind(const plan::ExecutionPlan& plan, Binding** out);
  // Points the direct outputs' uses at fresh buffers (`direct` true: *owners gets one per direct
  // output, in b.direct_outputs order) or back at the arena.
  Status point_direct_outputs(const plan::ExecutionPlan& plan, Binding& b, bool direct,
                              std::vector<std::shared_ptr<AlignedBuffer>>* owners);
  Status prepare_streams(const plan::ExecutionPlan& plan);

  ContextOptions options_;
  std::shared_ptr<AlignedBuffer> arena_;
  std::unordered_map<uint64_t, Binding> bindings_;  // by plan id
  std::unique_ptr<StreamPool> pool_;
  std::vector<CpuStream> streams_;      // stream s runs on the caller (s = 0) or pool worker s
  std::unique_ptr<CpuEvent[]> events_;  // the plan's events
  size_t num_events_ = 0;
  uint64_t generation_ = 0;
  std::unique_ptr<EagerExecutionContext> eager_;              // made for the first eager plan
  std::unordered_map<uint64_t, ThreadChoice> thread_choice_;  // by plan id (RunOptions::adapt_threads)
};

}  // namespace streamline::exec
