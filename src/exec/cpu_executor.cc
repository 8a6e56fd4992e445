#include "exec/cpu_executor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "core/cpu_set.h"
#include "exec/run_outputs.h"
#include "ops/cpu/task_runner.h"
#include "plan/schedule.h"

namespace streamline::exec {
namespace {

constexpr unsigned char kCanary = 0xA5;
constexpr unsigned char kPoison = 0xFF;  // NaN for floats, -1 for integers

}  // namespace

// State shared by the stream threads during one run.
struct RunState {
  const plan::ExecutionPlan* plan;
  CpuExecutionContext* ctx;
  CpuExecutionContext::Binding* binding;
  const RunOptions* options;
  uint64_t generation;
  std::atomic<bool> failed{false};
  std::atomic<int> busy_streams{0};  // streams inside a kernel (elastic threads)
  std::mutex error_mu;
  Status error;

  void fail(Status s) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (error.ok()) error = std::move(s);
    failed.store(true, std::memory_order_release);
  }

  // Safe mode, before a step: write canaries after each output and the workspace.
  void arm_canaries(const plan::Step& st, char* base) const {
    const size_t g = plan->guard_bytes;
    for (int o : st.outputs) {
      if (o < 0) continue;
      const auto& s = plan->slots[static_cast<size_t>(o)];
      if (s.kind == plan::SlotKind::kArena) std::memset(base + s.offset + s.bytes, kCanary, g);
    }
    if (st.workspace_bytes) std::memset(base + st.workspace_offset + st.workspace_bytes, kCanary, g);
  }

  // Safe mode, after a step: every canary must be intact.
  Status check_canaries(const plan::Step& st, char* base) const {
    const size_t g = plan->guard_bytes;
    auto intact = [&](size_t at) {
      for (size_t i = 0; i < g; ++i)
        if (static_cast<unsigned char>(base[at + i]) != kCanary) return false;
      return true;
    };
    for (int o : st.outputs) {
      if (o < 0) continue;
      const auto& s = plan->slots[static_cast<size_t>(o)];
      if (s.kind == plan::SlotKind::kArena && !intact(s.offset + s.bytes))
        return internal_error("safe mode: node '" + st.name + "' (" + st.op + ") wrote past the end of output '" +
                              s.name + "'");
    }
    if (st.workspace_bytes && !intact(st.workspace_offset + st.workspace_bytes))
      return internal_error("safe mode: node '" + st.name + "' (" + st.op + ") wrote past its workspace");
    return ok_status();
  }

  // Runs one stream's steps in order.
  void run_stream(int stream) {
    CpuStream& cs = ctx->streams_[static_cast<size_t>(stream)];
    cs.begin_run(generation);
    struct Leave {
      CpuStream& s;
      ~Leave() { s.end_run(); }
    } leave{cs};
    const bool elastic = options->elastic_threads > 0 && plan->stream_steps.size() > 1;
    omp_set_num_threads(elastic ? options->elastic_threads : options->num_threads);
    char* base = static_cast<char*>(binding->arena_base);
    CpuEvent* events = ctx->events_.get();
    for (int i : plan->stream_steps[static_cast<size_t>(stream)]) {
      const plan::Step& st = plan->steps[static_cast<size_t>(i)];
      for (int e : st.wait_events) cs.wait(events[e]);
      if (!failed.load(std::memory_order_acquire)) {
        if (options->observer) options->observer->on_step_begin(*plan, i, stream);
        const bool safe = options->safe && plan->guard_bytes;
        if (safe) arm_canaries(st, base);
        ops::RunContext rc;
        rc.inputs = binding->step_inputs[static_cast<size_t>(i)];
        rc.outputs = binding->step_outputs[static_cast<size_t>(i)];
        rc.workspace = st.workspace_bytes ? base + st.workspace_offset : nullptr;
        rc.state = st.state.get();
        rc.num_threads = options->num_threads;
        if (elastic) {
          const int busy = busy_streams.fetch_add(1, std::memory_order_acq_rel) + 1;
          rc.num_threads = std::max(1, options->elastic_threads / busy);
        }
        // A step planned serial runs on this thread alone (kernels and oneDNN read OpenMP's count).
        const int omp_before = st.threads == 1 && rc.num_threads > 1 ? omp_get_max_threads() : 0;
        if (omp_before) {
          rc.num_threads = 1;
          omp_set_num_threads(1);
        }
        const uint64_t tasks_before = ops::cpu::run_tasks_calls();
        Status s = st.kernel->run(rc);
        if (omp_before) omp_set_num_threads(omp_before);
        // A kernel on several threads that did not use run_tasks used OpenMP, whose workers now
        // spin for a while: the next run_tasks takes them rather than the pool's helpers.
        if (rc.num_threads > 1 && ops::cpu::run_tasks_calls() == tasks_before) ops::cpu::note_openmp_region();
        if (elastic) busy_streams.fetch_sub(1, std::memory_order_acq_rel);
        if (s.ok() && safe) s = check_canaries(st, base);
        if (options->observer) options->observer->on_step_end(*plan, i, stream);
        if (!s.ok()) fail(s.with_context("node '" + st.name + "' (" + st.op + ")"));
        if (options->safe)
          for (const auto& [off, len] : binding->poison_after[static_cast<size_t>(i)])
            std::memset(base + off, kPoison, len);
      }
      // Events are recorded even after a failure so that no other stream waits forever.
      for (int e : st.record_events) cs.record(events[e]);
    }
  }

  static void run_stream_job(void* self, int stream) { static_cast<RunState*>(self)->run_stream(stream); }
};

Status CpuExecutionContext::bind(const plan::ExecutionPlan& plan, Binding** out) {
  if (!arena_ || arena_->size() < plan.arena_bytes) {
    arena_ = AlignedBuffer::allocate(plan.arena_bytes);
    if (!arena_)
      return resource_exhausted("cannot allocate an arena of " + std::to_string(plan.arena_bytes) + " bytes");
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
      case plan::SlotKind::kArena:
        return Tensor::view(s.dtype, s.shape, base + s.offset, s.layout);
      case plan::SlotKind::kConstant:
        return plan.constants[static_cast<size_t>(s.constant)];
      case plan::SlotKind::kInput:
        return Tensor::view(s.dtype, s.shape, nullptr, s.layout);
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
  // Outputs written in memory of their own (Binding::direct_outputs).
  {
    std::unordered_map<int, int> outputs_in_buffer;
    for (int o : plan.output_slots)
      if (plan.slots[static_cast<size_t>(o)].kind == plan::SlotKind::kArena)
        ++outputs_in_buffer[plan.slots[static_cast<size_t>(o)].buffer];
    for (size_t o = 0; o < plan.output_slots.size(); ++o) {
      const plan::TensorSlot& out = plan.slots[static_cast<size_t>(plan.output_slots[o])];
      if (out.kind != plan::SlotKind::kArena || out.buffer < 0 || outputs_in_buffer[out.buffer] != 1) continue;
      Binding::DirectOutput d;
      d.output = static_cast<int>(o);
      d.base = out.offset;
      d.end = out.offset + out.bytes;
      for (const plan::TensorSlot& t : plan.slots)
        if (t.kind == plan::SlotKind::kArena && t.buffer == out.buffer) {
          d.base = std::min(d.base, t.offset);
          d.end = std::max(d.end, t.offset + t.bytes);
        }
      for (size_t i = 0; i < plan.steps.size(); ++i) {
        const plan::Step& st = plan.steps[i];
        for (const bool output : {false, true}) {
          const std::vector<int>& slots = output ? st.outputs : st.inputs;
          for (size_t a = 0; a < slots.size(); ++a) {
            if (slots[a] < 0) continue;
            const plan::TensorSlot& t = plan.slots[static_cast<size_t>(slots[a])];
            if (t.kind == plan::SlotKind::kArena && t.buffer == out.buffer)
              d.uses.push_back({static_cast<int>(i), static_cast<int>(a), output, slots[a]});
          }
        }
      }
      b.direct_outputs.push_back(std::move(d));
    }
  }
  // Safe mode: a buffer is poisoned after the access that every other access happens-before
  // (when there is one); graph outputs never are.
  b.poison_after.assign(plan.steps.size(), {});
  {
    const plan::HappensBefore hb(plan);
    std::unordered_map<int, std::vector<int>> accesses;  // buffer -> steps
    std::unordered_map<int, std::pair<size_t, size_t>> range;
    std::vector<char> pinned(plan.slots.size(), 0);
    for (int o : plan.output_slots) pinned[static_cast<size_t>(o)] = 1;
    std::unordered_map<int, bool> buffer_pinned;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const plan::Step& st = plan.steps[i];
      for (const auto* list : {&st.inputs, &st.outputs})
        for (int sl : *list) {
          if (sl < 0) continue;
          const plan::TensorSlot& s = plan.slots[static_cast<size_t>(sl)];
          if (s.kind != plan::SlotKind::kArena) continue;
          accesses[s.buffer].push_back(static_cast<int>(i));
          auto& r = range[s.buffer];
          r = {s.offset, std::max(r.second, s.bytes)};
        }
    }
    for (size_t sl = 0; sl < plan.slots.size(); ++sl)
      if (pinned[sl] && plan.slots[sl].kind == plan::SlotKind::kArena) buffer_pinned[plan.slots[sl].buffer] = true;
    for (const auto& [buf, steps] : accesses) {
      if (buffer_pinned.count(buf)) continue;
      for (int m : steps) {
        bool last = true;
        for (int a : steps)
          if (a != m && !hb.before(a, m)) {
            last = false;
            break;
          }
        if (last) {
          b.poison_after[static_cast<size_t>(m)].push_back(range[buf]);
          break;
        }
      }
    }
  }
  auto [pos, _] = bindings_.insert_or_assign(plan.id, std::move(b));
  *out = &pos->second;
  return ok_status();
}

Status CpuExecutionContext::point_direct_outputs(const plan::ExecutionPlan& plan, Binding& b, bool direct,
                                                 std::vector<std::shared_ptr<AlignedBuffer>>* owners) {
  if (!direct && !b.redirected) return ok_status();
  char* arena = static_cast<char*>(b.arena_base);
  for (const Binding::DirectOutput& d : b.direct_outputs) {
    char* base = arena + d.base;
    if (direct) {
      auto buf = AlignedBuffer::allocate_for_overwrite(d.end - d.base);
      if (!buf)
        return resource_exhausted("cannot allocate " + std::to_string(d.end - d.base) + " bytes for output '" +
                                  plan.output_names[static_cast<size_t>(d.output)] + "'");
      base = static_cast<char*>(buf->data());
      owners->push_back(std::move(buf));
    }
    for (const Binding::SlotUse& u : d.uses) {
      const plan::TensorSlot& t = plan.slots[static_cast<size_t>(u.slot)];
      auto& list = u.output ? b.step_outputs : b.step_inputs;
      list[static_cast<size_t>(u.step)][static_cast<size_t>(u.arg)] =
          Tensor::view(t.dtype, t.shape, base + (t.offset - d.base), t.layout);
    }
  }
  b.redirected = direct;
  return ok_status();
}

Status CpuExecutionContext::prepare_streams(const plan::ExecutionPlan& plan) {
  const int workers = plan.num_streams - 1;
  if (workers > 0 && (!pool_ || pool_->workers() < workers))
    pool_ = std::make_unique<StreamPool>(workers, options_.stream_cores);
  if (num_events_ < static_cast<size_t>(plan.num_events)) {
    events_ = std::make_unique<CpuEvent[]>(static_cast<size_t>(plan.num_events));
    num_events_ = static_cast<size_t>(plan.num_events);
    generation_ = 0;
  }
  while (streams_.size() < static_cast<size_t>(plan.num_streams))
    streams_.emplace_back(static_cast<int>(streams_.size()));
  if (plan.num_streams == 1 && !options_.stream_cores.empty()) core::pin_current_thread(options_.stream_cores[0]);
  return ok_status();
}

Status check_inputs(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs) {
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
  return ok_status();
}

Status CpuExecutionContext::run_values(const plan::ExecutionPlan& plan, std::span<const AnyValue> inputs,
                                       std::vector<AnyValue>* outputs, const RunOptions& options) {
  if (!plan.eager) return invalid_argument("values of any kind are run by eager plans only; this plan is planned");
  if (!eager_) eager_ = std::make_unique<EagerExecutionContext>();
  return eager_->run_values(plan, inputs, outputs, options);
}

Status CpuExecutionContext::run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                                std::vector<Tensor>* outputs, const RunOptions& options) {
  if (plan.device != ops::Device::kCpu)
    return invalid_argument(std::string("a CPU context cannot run a plan made for ") + ops::device_name(plan.device));
  if (plan.eager) {
    if (!eager_) eager_ = std::make_unique<EagerExecutionContext>();
    return eager_->run(plan, inputs, outputs, options);
  }
  // Pass 1: check the inputs against the plan.
  SL_RETURN_IF_ERROR(check_inputs(plan, inputs));
  if (plan.stream_steps.size() != static_cast<size_t>(plan.num_streams))
    return internal_error("plan has " + std::to_string(plan.num_streams) + " streams but " +
                          std::to_string(plan.stream_steps.size()) + " stream step lists");
  // Pass 2: bind the context to this plan and patch in the caller's input pointers.
  Binding* b = nullptr;
  SL_RETURN_IF_ERROR(bind(plan, &b));
  SL_RETURN_IF_ERROR(prepare_streams(plan));
  for (const auto& [step, arg] : b->input_uses) {
    const int slot = plan.steps[static_cast<size_t>(step)].inputs[static_cast<size_t>(arg)];
    const int idx = plan.slots[static_cast<size_t>(slot)].input_index;
    b->step_inputs[static_cast<size_t>(step)][static_cast<size_t>(arg)] = inputs[static_cast<size_t>(idx)];
  }
  // Outputs handed out as copies are written where they are handed out (not in safe mode, whose
  // guard bytes live in the arena).
  const bool direct = options.copy_outputs && outputs && !options.safe && !b->direct_outputs.empty();
  std::vector<std::shared_ptr<AlignedBuffer>> owners;
  SL_RETURN_IF_ERROR(point_direct_outputs(plan, *b, direct, &owners));
  // Pass 3: run the streams (a single stream on the threads its measured choice gives).
  RunOptions effective = options;
  ThreadChoice* choice = nullptr;
  if (options.adapt_threads && plan.num_streams == 1 && options.num_threads > 1) {
    choice = &thread_choice_[plan.id];
    effective.num_threads = choice->next(options.num_threads);
  }
  RunState rs;
  rs.plan = &plan;
  rs.ctx = this;
  rs.binding = b;
  rs.options = &effective;
  rs.generation = ++generation_;
  const int saved_threads = omp_get_max_threads();
  if (options.observer) options.observer->on_run_begin(plan);
  const auto started = std::chrono::steady_clock::now();
  if (plan.num_streams == 1) {
    rs.run_stream(0);
  } else {
    pool_->run(plan.num_streams, &RunState::run_stream_job, &rs);
  }
  if (options.observer) options.observer->on_run_end(plan);
  omp_set_num_threads(saved_threads);
  SL_RETURN_IF_ERROR(rs.error);
  if (choice)
    choice->record(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  // Pass 4: hand the outputs back.
  if (outputs) {
    char* base = static_cast<char*>(b->arena_base);
    collect_outputs(plan, inputs, options.copy_outputs && !direct, outputs,
                    [base](size_t, const plan::TensorSlot& s) { return base + s.offset; });
    if (direct) {
      // The direct ones in their own memory, the others copied out of the arena.
      std::vector<char> done(outputs->size(), 0);
      for (size_t k = 0; k < b->direct_outputs.size(); ++k) {
        const Binding::DirectOutput& d = b->direct_outputs[k];
        const auto o = static_cast<size_t>(d.output);
        const plan::TensorSlot& s = plan.slots[static_cast<size_t>(plan.output_slots[o])];
        Tensor t =
            Tensor::view(s.dtype, s.shape, static_cast<char*>(owners[k]->data()) + (s.offset - d.base), s.layout);
        t.set_owner(owners[k]);
        (*outputs)[o] = std::move(t);
        done[o] = 1;
      }
      for (size_t o = 0; o < outputs->size(); ++o)
        if (!done[o]) (*outputs)[o] = (*outputs)[o].clone();
    }
  }
  return ok_status();
}

}  // namespace streamline::exec
