#pragma once
// The executor: runs an ExecutionPlan on an ExecutionContext. It only consumes the plan.
//
//   exec::ExecutionContext ctx;                          // one per concurrent run
//   exec::RunOptions ro;  ro.num_threads = 2;            // intra-op threads per stream
//   std::vector<Tensor> outs;
//   SL_RETURN_IF_ERROR(exec::run_plan(*plan, ctx, inputs, &outs, ro));
//
// Single-stream plans run on the calling thread. Multi-stream plans run stream 0 on the calling
// thread and the others on the context's CPU stream workers; a step waits for its plan events
// before it starts and records its events when it ends (events are per-context atomics stamped
// with the run's generation, so nothing is reset or allocated per run).
// An ExecutionContext owns the arena (grown to the largest plan it has run, never per run), its
// stream workers (made once) and per-plan bindings. It runs one plan at a time: use one context per
// concurrent run. Plans and kernels are shared and read-only.

#include <atomic>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "exec/stream_pool.h"
#include "plan/execution_plan.h"

namespace streamline::exec {

// Instrumentation hooks, called on the thread that runs the step (one thread per stream).
// Implementations must tolerate concurrent calls from different streams.
class ExecObserver {
 public:
  virtual ~ExecObserver() = default;
  virtual void on_run_begin(const plan::ExecutionPlan& plan) {}
  virtual void on_step_begin(const plan::ExecutionPlan& plan, int step, int stream) {}
  virtual void on_step_end(const plan::ExecutionPlan& plan, int step, int stream) {}
  virtual void on_run_end(const plan::ExecutionPlan& plan) {}
  // Device executors (CUDA) cannot call the two step hooks when a step runs: the host only
  // enqueues it. When an observer wants step times, such an executor measures every step with
  // device timing events (and skips CUDA graphs for that run), then reports each step once after
  // the run with its interval on the host clock (now_ns(), aligned at the run's first step).
  virtual bool wants_step_times() const { return false; }
  virtual void on_step_timed(const plan::ExecutionPlan& plan, int step, int stream, int64_t begin_ns,
                             int64_t end_ns) {}
};

struct RunOptions {
  int num_threads = 1;                // intra-op threads per stream for this run
  // Elastic threads, for plans with several streams: when > 0, each step runs on
  // max(1, elastic_threads / streams running a step at that moment) threads, so a stream running
  // alone (a network's stem, a long branch) uses every core and concurrent branches share them.
  // The plan must have been made for elastic_threads threads per stream (workspaces sized for it).
  int elastic_threads = 0;
  ExecObserver* observer = nullptr;   // optional hooks
  bool copy_outputs = true;           // false: outputs are views into the context, valid until its next run
  bool safe = false;                  // poison dead buffers, check canaries after each step (needs guard_bytes)
};

struct ContextOptions {
  // Cores for each stream's thread (stream 0 = the calling thread); empty = no pinning.
  std::vector<std::vector<int>> stream_cores;
};

class ExecutionContext {
 public:
  explicit ExecutionContext(ContextOptions options = {}) : options_(std::move(options)) {}
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  size_t arena_bytes() const { return arena_ ? arena_->size() : 0; }

 private:
  friend Status run_plan(const plan::ExecutionPlan&, ExecutionContext&, std::span<const Tensor>,
                         std::vector<Tensor>*, const RunOptions&);
  friend struct RunState;
  struct Binding {
    std::vector<std::vector<Tensor>> step_inputs;
    std::vector<std::vector<Tensor>> step_outputs;
    // (step, argument) pairs that read run inputs: patched with the caller's pointers each run.
    std::vector<std::pair<int, int>> input_uses;
    // Safe mode: per step, arena ranges whose value is dead after it (poisoned).
    std::vector<std::vector<std::pair<size_t, size_t>>> poison_after;
    void* arena_base = nullptr;
  };
  Status bind(const plan::ExecutionPlan& plan, Binding** out);
  Status prepare_streams(const plan::ExecutionPlan& plan);

  ContextOptions options_;
  std::shared_ptr<AlignedBuffer> arena_;
  std::unordered_map<uint64_t, Binding> bindings_;  // by plan id
  std::unique_ptr<StreamPool> pool_;
  std::unique_ptr<std::atomic<uint64_t>[]> events_;
  size_t num_events_ = 0;
  uint64_t generation_ = 0;
};

// Checks `inputs` against the plan's inputs: their count, and each one's dtype, shape, plain
// layout and data. Every executor calls it before running.
Status check_inputs(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs);

// Runs `plan` once. `inputs` follow plan.input_names; outputs follow plan.output_names.
// Errors name the failing node and op; after an error on one stream the others stop starting
// new steps and the run returns the first error.
Status run_plan(const plan::ExecutionPlan& plan, ExecutionContext& ctx, std::span<const Tensor> inputs,
                std::vector<Tensor>* outputs, const RunOptions& options);

}  // namespace streamline::exec
