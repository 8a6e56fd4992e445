#include "plan/memory_planner.h"

#include <algorithm>
#include <numeric>

#include "core/allocator.h"

namespace streamline::plan {

size_t place_buffers(std::vector<Buffer>& buffers, bool reuse) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  size_t arena = 0;
  for (size_t i : order) {
    Buffer& b = buffers[i];
    const size_t size = align_up(std::max<size_t>(b.bytes, 1));
    // Ranges taken by placed buffers alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t j : placed) {
      const Buffer& o = buffers[j];
      if (reuse && (o.last < b.first || b.last < o.first)) continue;
      taken.emplace_back(o.offset, o.offset + align_up(std::max<size_t>(o.bytes, 1)));
    }
    std::sort(taken.begin(), taken.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [lo, hi] : taken) {
      if (lo >= cursor + size && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best == SIZE_MAX) best = cursor;
    b.offset = best;
    arena = std::max(arena, best + size);
    placed.push_back(i);
  }
  return arena;
}

Status plan_memory(ExecutionPlan& plan, bool reuse, bool inplace, const std::vector<std::vector<int>>& inplace_hints) {
  const int end = static_cast<int>(plan.steps.size());
  // Pass 1: last use per slot.
  std::vector<int> last_use(plan.slots.size(), -1);
  for (int s = 0; s < end; ++s)
    for (int in : plan.steps[static_cast<size_t>(s)].inputs)
      if (in >= 0) last_use[static_cast<size_t>(in)] = s;
  for (int o : plan.output_slots) last_use[static_cast<size_t>(o)] = end;

  // Pass 2: buffers, with in-place aliasing.
  std::vector<Buffer> buffers;
  for (int s = 0; s < end; ++s) {
    Step& st = plan.steps[static_cast<size_t>(s)];
    const std::vector<int>& hints = static_cast<size_t>(s) < inplace_hints.size() ? inplace_hints[static_cast<size_t>(s)]
                                                                                    : std::vector<int>{};
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      const int o = st.outputs[i];
      if (o < 0) continue;
      TensorSlot& out = plan.slots[static_cast<size_t>(o)];
      if (out.kind != SlotKind::kArena) continue;
      const int hint = i < hints.size() ? hints[i] : -1;
      if (inplace && hint >= 0 && static_cast<size_t>(hint) < st.inputs.size() && st.inputs[static_cast<size_t>(hint)] >= 0) {
        const TensorSlot& in = plan.slots[static_cast<size_t>(st.inputs[static_cast<size_t>(hint)])];
        if (in.kind == SlotKind::kArena && in.buffer >= 0 && in.bytes == out.bytes &&
            buffers[static_cast<size_t>(in.buffer)].last == s) {
          // The input dies here; nothing else still reads its buffer.
          out.buffer = in.buffer;
          Buffer& b = buffers[static_cast<size_t>(in.buffer)];
          b.last = std::max(b.last, last_use[static_cast<size_t>(o)] < 0 ? s : last_use[static_cast<size_t>(o)]);
          continue;
        }
      }
      Buffer b;
      b.bytes = out.bytes;
      b.first = s;
      b.last = last_use[static_cast<size_t>(o)] < 0 ? s : last_use[static_cast<size_t>(o)];
      out.buffer = static_cast<int>(buffers.size());
      buffers.push_back(b);
    }
    // Extend lifetimes of buffers read here (an alias may be read later than its first slot).
    for (int in : st.inputs)
      if (in >= 0 && plan.slots[static_cast<size_t>(in)].buffer >= 0) {
        Buffer& b = buffers[static_cast<size_t>(plan.slots[static_cast<size_t>(in)].buffer)];
        b.last = std::max(b.last, last_use[static_cast<size_t>(in)]);
      }
  }
  // Workspaces live for their step only.
  std::vector<int> ws_buffer(static_cast<size_t>(end), -1);
  for (int s = 0; s < end; ++s) {
    const Step& st = plan.steps[static_cast<size_t>(s)];
    if (st.workspace_bytes == 0) continue;
    ws_buffer[static_cast<size_t>(s)] = static_cast<int>(buffers.size());
    buffers.push_back(Buffer{st.workspace_bytes, s, s, 0});
  }
  // A buffer's lifetime must cover every member slot's uses.
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const TensorSlot& t = plan.slots[i];
    if (t.buffer >= 0 && last_use[i] >= 0) {
      Buffer& b = buffers[static_cast<size_t>(t.buffer)];
      b.last = std::max(b.last, last_use[i]);
    }
  }

  // Pass 3: offsets.
  plan.arena_bytes = place_buffers(buffers, reuse);
  plan.naive_bytes = 0;
  for (const Buffer& b : buffers) plan.naive_bytes += align_up(std::max<size_t>(b.bytes, 1));
  for (auto& t : plan.slots)
    if (t.kind == SlotKind::kArena) {
      if (t.buffer < 0) return internal_error("arena slot '" + t.name + "' has no buffer (never written?)");
      t.offset = buffers[static_cast<size_t>(t.buffer)].offset;
    }
  for (int s = 0; s < end; ++s)
    if (ws_buffer[static_cast<size_t>(s)] >= 0)
      plan.steps[static_cast<size_t>(s)].workspace_offset = buffers[static_cast<size_t>(ws_buffer[static_cast<size_t>(s)])].offset;
  return ok_status();
}

}  // namespace streamline::plan
