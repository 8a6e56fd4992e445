#pragma once
// A static cost model: estimated work per step from its op type and shapes. Units are
// "FLOP-equivalents": arithmetic ops plus memory traffic weighted by kBytesWeight. Used for stream
// assignment and critical-path estimates; calibrated against measurement where that helps.

#include <span>
#include <string>

#include "core/shape.h"

namespace streamline::plan {

inline constexpr double kBytesWeight = 0.25;  // one byte moved ~ a quarter of a FLOP of time

struct CostInput {
  const std::string& op;
  std::span<const Shape> inputs;
  std::span<const Shape> outputs;
  int64_t group = 1;         // Conv groups
  size_t bytes_moved = 0;    // inputs + outputs bytes
};

double estimate_cost(const CostInput& in);

}  // namespace streamline::plan
