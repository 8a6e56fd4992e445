#pragma once
// Multi-stream scheduling: which stream runs each step, and the events between streams.
//
//   ScheduleOptions so;  so.num_streams = 4;
//   SL_RETURN_IF_ERROR(assign_streams(plan, so));   // reorders plan.steps, sets stream/position
//   SL_RETURN_IF_ERROR(insert_events(plan));        // one event per cross-stream edge, then pruned
//   HappensBefore hb(plan);                         // ordering oracle from streams + events
//
// Stream assignment is list scheduling on the cost model: steps are taken by decreasing upward
// rank (cost of the longest path from the step to the end), and each goes to the stream where it
// would finish first, a cross-stream dependency costing `event_cost`. Chains therefore stay on one
// stream and a fan-out opens another stream only when its branches are heavy enough to pay for
// the events. Nodes named in `pinned_streams` go to the stream given.
// Event pruning keeps, per stream, a vector clock of what it has already waited for: a wait already
// implied by stream order and earlier waits is dropped.

#include <map>
#include <string>
#include <vector>

#include "core/plan_choices.h"
#include "plan/execution_plan.h"

namespace streamline::plan {

// The user's stream choices come whole from PlanChoices: num_streams (at most this many streams;
// 1 = a single-stream plan) and pinned_streams (node name -> stream); the scheduler reads no other
// field of it. PlannerOptions derives from this struct, so the planner hands it over whole.
struct ScheduleOptions : PlanChoices {
  double event_cost = 1e5;  // cost units charged for a cross-stream dependency
};

// For each step, the steps whose outputs it reads (data edges).
std::vector<std::vector<int>> step_predecessors(const ExecutionPlan& plan);

// `order`, when given, receives for each new step index the step's index before reordering.
Status assign_streams(ExecutionPlan& plan, const ScheduleOptions& options, std::vector<int>* order = nullptr);
Status insert_events(ExecutionPlan& plan);

// Happens-before between steps, derived only from the plan's streams, positions and events.
class HappensBefore {
 public:
  explicit HappensBefore(const ExecutionPlan& plan);
  // True when step a is guaranteed complete before step b starts.
  bool before(int a, int b) const;
  // The vector clock at the start of step s: for each stream, the highest position known complete
  // (-1 = none).
  const std::vector<int>& clock_at_start(int s) const { return start_[static_cast<size_t>(s)]; }

 private:
  const ExecutionPlan& plan_;
  std::vector<std::vector<int>> start_;
};

// Parses {"node name": stream, ...} (the --pin-streams file format).
Result<std::map<std::string, int>> parse_pin_file(const std::string& path);

}  // namespace streamline::plan
