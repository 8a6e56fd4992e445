#pragma once
// The planner: turns a graph, its kernels and concrete input shapes into an ExecutionPlan.
//
//   plan::PlannerOptions po;                   // single stream, channels-last on
//   SL_ASSIGN_OR_RETURN(std::shared_ptr<const plan::ExecutionPlan> p,
//                       plan::make_plan(graph, kernel_set, {{"input", Shape{1, 3, 224, 224}}}, po));
//
// Passes, in order:
//   1. bind input shapes (symbolic dims take the given sizes; fixed dims must match);
//   2. walk nodes in topological order: choose layouts (insert LayoutConvert steps), call each
//      kernel's reshape for output shapes, fold nodes whose inputs are all known constants;
//   3. make graph outputs plain;
//   4. assign streams (cost-model list scheduling) and insert events, pruned by vector clocks;
//   5. plan memory: a buffer is reused only when every access of its old value happens-before the
//      new writer; in place where a kernel allows it; greedy best-fit offsets (64-byte aligned);
//   6. verify: no two unordered accesses to overlapping memory (plan/verifier.h).

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/plan_choices.h"
#include "plan/execution_plan.h"
#include "plan/kernel_set.h"
#include "plan/schedule.h"

namespace streamline::plan {

// The user's choices come whole from PlanChoices (core/plan_choices.h): channels_last (conv-like
// kernels keep activations NHWC between layers), blocked_layout (with it, a blocked layout where a
// kernel prefers one), blocked_channels (its channels per block, 8 or 16; 0 here means 8),
// num_streams (at most this many streams; 1 = a single-stream plan) and pinned_streams (node name
// -> stream). The scheduler's options (ScheduleOptions, plan/schedule.h: PlanChoices and
// event_cost) are its base, so the planner hands them to the scheduler whole.
struct PlannerOptions : ScheduleOptions {
  bool inplace = true;       // let kernels write outputs over inputs that die at them
  bool reuse_memory = true;  // false gives every buffer its own arena range (debugging)
  int num_threads = 1;       // intra-op threads per stream at run time (kernels size work splits for it)
  // Steps that move fewer bytes (inputs, weights and outputs) than serial_bytes and cost less than
  // serial_cost run on one thread (Step::threads = 1) when num_threads > 1: splitting them saves
  // less than the fork and join cost, and on shared cores a join waits for a descheduled worker.
  // serial_bytes = 0 turns this off.
  size_t serial_bytes = size_t{256} << 10;
  double serial_cost = 4e6;
  size_t guard_bytes = 0;  // safe mode: canary bytes after every buffer (checked at run time)
  bool verify = true;      // run the race verifier on every plan (fails planning on a race)
  // Registry used for planner-inserted kernels (layout changes) and for the CPU kernels that fold
  // device nodes whose inputs are all known; null = ops::default_cpu_registry().
  const ops::KernelRegistry* registry = nullptr;
  // The device the plan runs on. For Device::kCuda every step must have a CUDA kernel (CPU nodes of
  // the kernel set are allowed only where they fold), layouts stay plain, and the plan says so.
  ops::Device device = ops::Device::kCpu;
};

using InputShapes = std::vector<std::pair<std::string, Shape>>;

Result<std::shared_ptr<const ExecutionPlan>> make_plan(const graph::Graph& g, const KernelSet& kernels,
                                                       const InputShapes& inputs, const PlannerOptions& options);

}  // namespace streamline::plan
