#include "exec/executor.h"

#include <omp.h>

#include <cstring>

namespace streamline::exec {

Status ExecutionContext::bind(const plan::ExecutionPlan& plan, Binding** out) {
  if (!arena_ || arena_->size() < plan.arena_bytes) {
    arena_ = AlignedBuffer::allocate(plan.arena_bytes);
    if (!arena_) return resource_exhausted("cannot allocate an arena of " + std::to_string(plan.arena_bytes) + " bytes");
    bindings_.clear();  // every binding pointed into the old arena
  }
  auto it = bindings_.find(plan.id);
  if (it != bindings_.end() && it->second.arena_base == arena_->data()) {
    *out = &it->second;
    return ok_status();
  }
  Binding b;
  b.arena_base = arena_->data();
  char* base = static_cast<char*>(arena_->data());
  auto tensor_for = [&](int slot) -> Tensor {
    if (slot < 0) return Tensor();
    const plan::TensorSlot& s = plan.slots[static_cast<size_t>(slot)];
    switch (s.kind) {
      case plan::SlotKind::kArena: return Tensor::view(s.dtype, s.shape, base + s.offset, s.layout);
      case plan::SlotKind::kConstant: return plan.constants[static_cast<size_t>(s.constant)];
      case plan::SlotKind::kInput: return Tensor::view(s.dtype, s.shape, nullptr, s.layout);
    }
    return Tensor();
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const plan::Step& st = plan.steps[i];
    std::vector<Tensor> ins, outs;
    for (size_t a = 0; a < st.inputs.size(); ++a) {
      ins.push_back(tensor_for(st.inputs[a]));
      if (st.inputs[a] >= 0 && plan.slots[static_cast<size_t>(st.inputs[a])].kind == plan::SlotKind::kInput)
        b.input_uses.emplace_back(static_cast<int>(i), static_cast<int>(a));
    }
    for (int o : st.outputs) outs.push_back(tensor_for(o));
    b.step_inputs.push_back(std::move(ins));
    b.step_outputs.push_back(std::move(outs));
  }
  auto [pos, _] = bindings_.insert_or_assign(plan.id, std::move(b));
  *out = &pos->second;
  return ok_status();
}

Status run_plan(const plan::ExecutionPlan& plan, ExecutionContext& ctx, std::span<const Tensor> inputs,
                std::vector<Tensor>* outputs, const RunOptions& options) {
  // Pass 1: check the inputs against the plan.
  if (inputs.size() != plan.input_names.size())
    return invalid_argument("expected " + std::to_string(plan.input_names.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const plan::TensorSlot& s = plan.slots[static_cast<size_t>(plan.input_slots[i])];
    if (inputs[i].dtype() != s.dtype || inputs[i].shape() != s.shape || inputs[i].layout() != Layout::kPlain)
      return invalid_argument("input '" + plan.input_names[i] + "' must be " + dtype_name(s.dtype) +
                              s.shape.to_string() + ", got " + inputs[i].describe());
    if (!inputs[i].raw() && s.bytes) return invalid_argument("input '" + plan.input_names[i] + "' has no data");
  }
  // Pass 2: bind the context's arena to this plan and patch in the caller's input pointers.
  ExecutionContext::Binding* b = nullptr;
  SL_RETURN_IF_ERROR(ctx.bind(plan, &b));
  for (const auto& [step, arg] : b->input_uses) {
    const int slot = plan.steps[static_cast<size_t>(step)].inputs[static_cast<size_t>(arg)];
    const int idx = plan.slots[static_cast<size_t>(slot)].input_index;
    b->step_inputs[static_cast<size_t>(step)][static_cast<size_t>(arg)] = inputs[static_cast<size_t>(idx)];
  }
  // Pass 3: run the steps in order on this thread.
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(options.num_threads);
  char* base = static_cast<char*>(b->arena_base);
  Status status;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const plan::Step& st = plan.steps[i];
    if (options.observer) options.observer->on_step_begin(plan, static_cast<int>(i), st.stream);
    ops::RunContext rc;
    rc.inputs = b->step_inputs[i];
    rc.outputs = b->step_outputs[i];
    rc.workspace = st.workspace_bytes ? base + st.workspace_offset : nullptr;
    rc.state = st.state.get();
    rc.num_threads = options.num_threads;
    status = st.kernel->run(rc);
    if (options.observer) options.observer->on_step_end(plan, static_cast<int>(i), st.stream);
    if (!status.ok()) {
      status = status.with_context("node '" + st.name + "' (" + st.op + ")");
      break;
    }
  }
  omp_set_num_threads(saved_threads);
  SL_RETURN_IF_ERROR(status);
  // Pass 4: hand the outputs back.
  if (outputs) {
    outputs->clear();
    for (int slot : plan.output_slots) {
      const plan::TensorSlot& s = plan.slots[static_cast<size_t>(slot)];
      Tensor t;
      switch (s.kind) {
        case plan::SlotKind::kArena: t = Tensor::view(s.dtype, s.shape, base + s.offset); break;
        case plan::SlotKind::kConstant: t = plan.constants[static_cast<size_t>(s.constant)]; break;
        case plan::SlotKind::kInput: t = inputs[static_cast<size_t>(s.input_index)]; break;
      }
      outputs->push_back(options.copy_outputs ? t.clone() : t);
    }
  }
  return ok_status();
}

}  // namespace streamline::exec
