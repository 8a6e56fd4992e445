#pragma once
// Memory planning: assigns every arena slot and step workspace an offset in one arena.
//
// Pass 1 computes each slot's last use (graph outputs live to the end). Pass 2 groups slots into
// buffers: a step output joins its input's buffer (in place) when the kernel allows it, the input
// is an arena slot that dies at that step, and sizes match. Pass 3 places buffers largest first at
// the lowest offset that overlaps no buffer whose lifetime intersects (greedy best fit).
// Offsets are 64-byte aligned. Reports arena_bytes (peak) and naive_bytes (sum without reuse).

#include <vector>

#include "plan/execution_plan.h"

namespace streamline::plan {

struct Buffer {
  size_t bytes = 0;
  int first = 0;   // first step that writes it
  int last = 0;    // last step that reads it
  size_t offset = 0;
};

Status plan_memory(ExecutionPlan& plan, bool reuse, bool inplace, const std::vector<std::vector<int>>& inplace_hints);

// Greedy placement of buffers (exposed for tests): sets offsets, returns the arena size.
size_t place_buffers(std::vector<Buffer>& buffers, bool reuse);

}  // namespace streamline::plan
