#pragma once
// Observer hooks: how tracing and metrics see runs without #ifdef blocks in the executors.
//
//   class CountSteps final : public exec::ExecObserver {
//    public:
//     void on_step_end(const plan::ExecutionPlan&, int, int) override { ++steps; }
//     std::atomic<int> steps{0};
//   };
//   CountSteps count;
//   exec::RunOptions ro;
//   ro.observer = &count;                       // any ExecutionContext: CPU, CUDA or eager
//   SL_RETURN_IF_ERROR(ctx->run(*plan, inputs, &outs, ro));
//
// Every ExecutionContext calls the same hooks: on_run_begin, then per step (a plan step; for an
// eager plan, one graph node) on_step_begin and on_step_end on the thread that runs it, then
// on_run_end. `step` indexes plan.steps, `stream` is the step's plan stream.

#include <cstdint>

namespace streamline::plan {
struct ExecutionPlan;
}

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
  virtual void on_step_timed(const plan::ExecutionPlan& plan, int step, int stream, int64_t begin_ns, int64_t end_ns) {}
};

}  // namespace streamline::exec
