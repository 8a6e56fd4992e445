#pragma once
// Chrome trace-event recording (opens in Perfetto and chrome://tracing).
//
//   exec::TraceRecorder trace;                 // an ExecObserver
//   ro.observer = &trace;  ctx.run(...);  ctx.run(...);
//   SL_RETURN_IF_ERROR(trace.write("run.json"));
//
// One track per stream ("stream 0", "stream 1", ...), one slice per step with its op, provider
// and tensor shapes, and a flow arrow for every event from the step that records it to the step
// that waits for it, so the overlap between streams and the bubbles are visible.
// Thread-safety: each stream appends to its own buffer; write() must not overlap a run.

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "exec/observer.h"
#include "plan/execution_plan.h"

namespace streamline::exec {

class TraceRecorder final : public ExecObserver {
 public:
  // Stops recording after `max_slices` step slices (long benchmarks stay bounded).
  explicit TraceRecorder(size_t max_slices = 100000) : max_slices_(max_slices) {}

  void on_run_begin(const plan::ExecutionPlan& plan) override;
  void on_step_begin(const plan::ExecutionPlan& plan, int step, int stream) override;
  void on_step_end(const plan::ExecutionPlan& plan, int step, int stream) override;
  void on_run_end(const plan::ExecutionPlan& plan) override;
  bool wants_step_times() const override { return true; }
  void on_step_timed(const plan::ExecutionPlan& plan, int step, int stream, int64_t begin_ns, int64_t end_ns) override;

  // The whole trace as a JSON object {"traceEvents": [...]}.
  std::string to_json() const;
  Status write(const std::string& path) const;
  size_t slices() const;

 private:
  struct Slice {
    const plan::ExecutionPlan* plan;
    int step, stream, run;
    int64_t begin_ns, end_ns;
  };
  struct StreamBuffer {
    std::vector<Slice> slices;
    int64_t pending_begin = 0;
  };
  size_t max_slices_;
  mutable std::mutex mu_;
  std::vector<StreamBuffer> streams_;
  int runs_ = 0;
  int64_t origin_ns_ = 0;
  std::atomic<size_t> count_{0};
};

}  // namespace streamline::exec
