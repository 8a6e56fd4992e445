#pragma once
// Memory planning: assigns every arena slot and step workspace an offset in one arena.
//
// Pass 1 lists, per slot, the steps that access it (its writer and its readers; graph outputs are
// read "at the end"). Pass 2 groups slots into buffers: a step output joins its input's buffer (in
// place) when the kernel allows it, sizes match, and every other access of that buffer
// happens-before the step. Pass 3 places buffers largest first at the lowest offset free of every
// conflicting buffer. Two buffers may share memory only when every access of one happens-before
// the first write of the other (data edges, stream order and events, as HappensBefore sees them);
// on a single stream that is plain liveness. Offsets are 64-byte aligned. Reports arena_bytes
// (peak) and naive_bytes (sum without reuse).

#include <vector>

#include "plan/execution_plan.h"
#include "plan/schedule.h"

namespace streamline::plan {

struct Buffer {
  size_t bytes = 0;
  int writer = 0;              // the first step that writes it
  std::vector<int> accesses;   // every step that reads or writes it
  int pinned_to_end = 0;       // 1 when a graph output lives in it (never reused after)
  size_t offset = 0;
};

Status plan_memory(ExecutionPlan& plan, const HappensBefore& hb, bool reuse, bool inplace,
                   const std::vector<std::vector<int>>& inplace_hints);

// True when a and b may not share memory (some access of each is unordered with the other's writer).
bool buffers_conflict(const Buffer& a, const Buffer& b, const HappensBefore& hb);

// Greedy placement (exposed for tests): sets offsets, returns the arena size.
size_t place_buffers(std::vector<Buffer>& buffers, const HappensBefore& hb, bool reuse);

}  // namespace streamline::plan
