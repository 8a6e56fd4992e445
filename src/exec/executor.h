#pragma once
// The executor: runs an ExecutionPlan on an ExecutionContext. It only consumes the plan.
//
//   exec::ExecutionContext ctx;                          // one per concurrent run
//   exec::RunOptions ro;  ro.num_threads = 2;
//   std::vector<Tensor> outs;
//   SL_RETURN_IF_ERROR(exec::run_plan(*plan, ctx, inputs, &outs, ro));
//
// An ExecutionContext owns the arena (grown to the largest plan it has run, never per run) and
// per-plan bindings of step arguments to arena addresses. A context runs one plan at a time: it is
// not thread-safe; use one context per thread. Plans and kernels are shared and read-only.

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "plan/execution_plan.h"

namespace streamline::exec {

// Instrumentation hooks, called on the thread that runs the step. Implementations must be
// thread-safe if one observer is shared by several contexts.
class ExecObserver {
 public:
  virtual ~ExecObserver() = default;
  virtual void on_step_begin(const plan::ExecutionPlan& plan, int step, int stream) {}
  virtual void on_step_end(const plan::ExecutionPlan& plan, int step, int stream) {}
};

struct RunOptions {
  int num_threads = 1;                // intra-op threads for this run
  ExecObserver* observer = nullptr;   // optional hooks
  bool copy_outputs = true;           // false: outputs are views into the context, valid until its next run
};

class ExecutionContext {
 public:
  ExecutionContext() = default;
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  size_t arena_bytes() const { return arena_ ? arena_->size() : 0; }

 private:
  friend Status run_plan(const plan::ExecutionPlan&, ExecutionContext&, std::span<const Tensor>,
                         std::vector<Tensor>*, const RunOptions&);
  struct Binding {
    std::vector<std::vector<Tensor>> step_inputs;
    std::vector<std::vector<Tensor>> step_outputs;
    // (step, argument) pairs that read run inputs: patched with the caller's pointers each run.
    std::vector<std::pair<int, int>> input_uses;
    void* arena_base = nullptr;
  };
  Status bind(const plan::ExecutionPlan& plan, Binding** out);

  std::shared_ptr<AlignedBuffer> arena_;
  std::unordered_map<uint64_t, Binding> bindings_;  // by plan id
};

// Runs `plan` once. `inputs` follow plan.input_names; outputs follow plan.output_names.
// Errors name the failing node and op.
Status run_plan(const plan::ExecutionPlan& plan, ExecutionContext& ctx, std::span<const Tensor> inputs,
                std::vector<Tensor>* outputs, const RunOptions& options);

}  // namespace streamline::exec
