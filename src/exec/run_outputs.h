#pragma once
// Handing a planned run's outputs back, the same for every execution context: each of
// plan.output_slots becomes the tensor its slot holds. Only where an arena slot's bytes are on the
// host differs (the CPU arena itself, or the CUDA context's staging copy), so the caller says.
//
//   collect_outputs(plan, inputs, options.copy_outputs, outputs,
//                   [&](size_t o, const plan::TensorSlot& s) { return base + s.offset; });
//
// Header-only: the callback is inlined into each context's run. Not synchronised (called by the
// thread that ran the plan).

#include <cstddef>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "plan/execution_plan.h"

namespace streamline::exec {

// `arena_at(o, slot)`: the host address of output o when its slot is in the arena. Constants come
// from the plan, inputs as given; each is cloned when `copy` (RunOptions::copy_outputs), else a
// view or a shared tensor.
template <class ArenaAt>
void collect_outputs(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs, bool copy,
                     std::vector<Tensor>* outputs, ArenaAt&& arena_at) {
  outputs->clear();
  outputs->reserve(plan.output_slots.size());
  for (size_t o = 0; o < plan.output_slots.size(); ++o) {
    const plan::TensorSlot& s = plan.slots[static_cast<size_t>(plan.output_slots[o])];
    Tensor t;
    switch (s.kind) {
      case plan::SlotKind::kArena:
        t = Tensor::view(s.dtype, s.shape, arena_at(o, s));
        break;
      case plan::SlotKind::kConstant:
        t = plan.constants[static_cast<size_t>(s.constant)];
        break;
      case plan::SlotKind::kInput:
        t = inputs[static_cast<size_t>(s.input_index)];
        break;
    }
    outputs->push_back(copy ? t.clone() : t);
  }
}

}  // namespace streamline::exec
