#pragma once
// The execution interface: an ExecutionContext runs ExecutionPlans on inputs into outputs. One
// interface for every way a plan runs: CPU streams (exec/cpu_executor.h), CUDA streams
// (exec/cuda/executor.h) and node by node for eager plans (exec/eager_executor.h). Contexts are
// made by a Backend (exec/backend.h), so the layers above never name a device's types.
//
//   SL_ASSIGN_OR_RETURN(exec::Backend * cpu, registry.find(ops::Device::kCpu));  // exec/backend.h
//   SL_ASSIGN_OR_RETURN(auto weights, cpu->attach_model());                   // once per model
//   SL_ASSIGN_OR_RETURN(auto ctx, weights->make_context({}));                  // one per concurrent run
//   exec::RunOptions ro;  ro.num_threads = 2;
//   std::vector<Tensor> outs;
//   SL_RETURN_IF_ERROR(ctx->run(*plan, inputs, &outs, ro));
//
// Ownership and threads: a context owns its arena (grown to the largest plan it has run, never per
// run), its streams and events (made once, as plans need them) and per-plan bindings. It runs one
// plan at a time: use one context per concurrent run. Plans and kernels are shared and read-only.

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/value.h"
#include "exec/observer.h"
#include "plan/execution_plan.h"

namespace streamline::exec {

struct RunOptions {
  // Intra-op threads per stream for this run.
  int num_threads = 1;
  // Elastic threads, for plans with several streams: when > 0, each step runs on
  // max(1, elastic_threads / streams running a step at that moment) threads, so a stream running
  // alone (a network's stem, a long branch) uses every core and concurrent branches share them.
  // The plan must have been made for elastic_threads threads per stream (workspaces sized for it).
  int elastic_threads = 0;
  // Optional hooks (tracing, metrics); not owned, must outlive the run.
  ExecObserver* observer = nullptr;
  // false: outputs are views into the context, valid until its next run.
  bool copy_outputs = true;
  // Poison dead buffers and check canaries after each step (the plan needs guard_bytes). CPU only.
  bool safe = false;
  // CPU, single-stream plans run on num_threads > 1 threads: time the runs and run on one thread
  // while that measures faster (a machine whose cores other processes hold), probing both counts
  // now and then (exec/thread_choice.h). Off: every run uses num_threads.
  bool adapt_threads = false;
};

// How a context is made; each field is read by the backends it names, when the context is made.
struct ContextOptions {
  // CPU: cores for each stream's thread (stream 0 = the calling thread); empty = no pinning.
  std::vector<std::vector<int>> stream_cores;
  // CUDA: the device ordinal the context runs on.
  int device = 0;
  // CUDA: capture each plan into a CUDA graph after a warm-up run and replay it.
  bool cuda_graphs = true;
};

class ExecutionContext {
 public:
  virtual ~ExecutionContext() = default;

  // Runs `plan` once. `inputs` (host tensors, plain layout) follow plan.input_names; `outputs`
  // receives host tensors in plan.output_names order: owned copies, or views valid until the next
  // run when options.copy_outputs is false. Errors name the failing node and op. A plan the
  // context cannot run (made for another device, or eager on a planned-only context) is
  // InvalidArgument.
  [[nodiscard]] virtual Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                                   std::vector<Tensor>* outputs, const RunOptions& options) = 0;
  // Runs an eager plan with inputs and outputs of any kind (tensors, sequences, optionals;
  // core/value.h), in plan.input_names / plan.output_names order; outputs are owned. Models with
  // sequences, optionals or string tensors run this way. InvalidArgument from contexts that do
  // not run eager plans (CUDA) and for plans that are not eager.
  [[nodiscard]] virtual Status run_values(const plan::ExecutionPlan& plan, std::span<const AnyValue> inputs,
                                          std::vector<AnyValue>* outputs, const RunOptions& options) = 0;
  // Memory the context holds for activations (host arena or device block).
  virtual size_t arena_bytes() const = 0;
  // Compute streams made so far (CPU: stream threads including the caller's; CUDA: device streams).
  virtual int num_streams() const = 0;
  // Where it runs: "cpu", "cuda:N" or "eager".
  virtual std::string device() const = 0;
};

// Checks `inputs` against the plan's inputs: their count, and each one's dtype, shape, plain
// layout and data. Every executor calls it before running.
[[nodiscard]] Status check_inputs(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs);

}  // namespace streamline::exec
