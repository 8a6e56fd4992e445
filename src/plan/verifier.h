#pragma once
// The safe-mode verifier: proves a plan free of cross-stream races, from the plan alone.
//
//   Status s = plan::verify_plan(plan);   // OK, or InvalidArgument naming both nodes and the buffer
//
// Checks, using only steps' streams, positions and wait/record events (HappensBefore):
//   1. every data edge (a step reading another step's output) is ordered producer-before-consumer;
//   2. any two accesses to overlapping arena bytes (slots and workspaces), at least one a write,
//      are ordered one way or the other;
//   3. every waited event is recorded by some step, earlier in plan order.

#include "core/status.h"
#include "plan/execution_plan.h"

namespace streamline::plan {

Status verify_plan(const ExecutionPlan& plan);

}  // namespace streamline::plan
