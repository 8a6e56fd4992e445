#pragma once
// Priorities as the protocols write them and as the runtime holds them. Triton's request
// parameter "priority" and its configuration's default_priority_level count levels from 1
// (1 = highest) and write 0 for "the model's default" (or, in a configuration, "priorities off");
// the runtime (InferRequest::priority, BatchPolicy::default_priority) counts from 0 and holds -1
// for the default. Every front end and the configuration convert through these two functions.
//
//   request.priority = priority_from_wire(p);                 // 0 -> -1, 1 -> 0, 5 -> 4
//   db->set_default_priority_level(priority_to_wire(level));  // -1 -> 0, 0 -> 1
//
// Pure functions, thread-safe.

#include <algorithm>
#include <cstdint>
#include <limits>

namespace streamline::serve {

// A wire priority (0 = default, n >= 1 = level n) as the runtime's 0-based level (-1 = default).
// Levels past what an int holds become the largest int: the runtime clamps every level beyond the
// model's last to its lowest, so a huge value means "lowest", not an error.
constexpr int priority_from_wire(uint64_t p) {
  if (p == 0) return -1;
  return static_cast<int>(std::min<uint64_t>(p - 1, static_cast<uint64_t>(std::numeric_limits<int>::max())));
}

// The inverse: a runtime level (0 = highest) as the wire's 1-based one; any negative level (the
// default) as 0.
constexpr uint64_t priority_to_wire(int level) {
  return level < 0 ? 0 : static_cast<uint64_t>(level) + 1;
}

}  // namespace streamline::serve
